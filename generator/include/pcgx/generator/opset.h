#pragma once
// Operator sets for the generator, as data: rulesets/opsets/NAME.json
// ({"format": "pcgx.opset", "name", "description", "ndims", "ops": [..]},
// each op as --ops writes one). An opset names operators, may restrict
// attribute values ("Linear(activation=none|relu)"), and says which tensor
// families its input pool needs (index tensors for the embeddings, 4-d
// kernels for Conv2D: derived from its operators). Adding an operator to
// an opset is one line of its file, or a new file; the generator
// enumerates attributes from the registry entry's GenDomain hints.
#include <map>
#include <string>
#include <vector>

#include "pcgx/pcg/attributes.h"

namespace pcgx::gen {

struct OpChoice {
  std::string op;
  std::map<std::string, std::vector<AttrValue>> values;  // overrides the registry's domain
};

struct Opset {
  std::string name;
  std::string description;
  std::vector<OpChoice> ops;
  int default_ndims = 3;
  bool index_inputs = false;   // int64 index tensors (embeddings)
  bool conv_kernels = false;   // 4-d convolution weights
  int vector_weights = 0;      // 1-d weights (a norm's gamma and beta): as many as one operator reads
  // Each operator once, in the order the choices name them.
  std::vector<std::string> operators() const;
};

// The shipped opsets (every file of the opsets directory), by name.
const std::vector<Opset>& named_opsets();
// Throws pcgx::Error for an unknown name, listing the known ones.
const Opset& find_opset(const std::string& name);
const Opset* find_opset_or_null(const std::string& name);
// An opset file; throws pcgx::Error naming the file and field.
Opset load_opset(const std::string& path);
// A shipped opset by name, or an opset file by path (a name with '/' or
// ending in .json).
Opset resolve_opset(const std::string& name_or_file);
// Where the shipped opsets are (pcg/resources.h); named opsets are also
// found in plugins' opset directories, after the shipped ones.
std::string opsets_dir();

// Parses "--ops": comma-separated operators, each optionally restricted,
// e.g. "Linear(activation=none|relu),Relu,Repartition". Unknown operators,
// attributes or values are errors naming them.
Opset parse_ops(const std::string& list);

std::string to_string(const OpChoice& c);

// Throws pcgx::Error when an operator of the opset has a required attribute
// that neither a default, a domain nor the opset gives values for (the
// generator could not enumerate it).
void check_enumerable(const OpChoice& choice);

}  // namespace pcgx::gen
