#pragma once
// Operator sets for the generator (data). An opset names operators, may
// restrict attribute values ("Linear(activation=none|relu)"), and says which
// tensor families its input pool needs. Adding an operator to an opset is a
// one-line change here; the generator enumerates its attributes from the
// registry entry's GenDomain hints.
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
};

const std::vector<Opset>& named_opsets();
// Throws pcgx::Error for an unknown name.
const Opset& find_opset(const std::string& name);
const Opset* find_opset_or_null(const std::string& name);

// Parses "--ops": comma-separated operators, each optionally restricted,
// e.g. "Linear(activation=none|relu),Relu,Repartition". Unknown operators,
// attributes or values are errors naming them.
Opset parse_ops(const std::string& list);

std::string to_string(const OpChoice& c);

}  // namespace pcgx::gen
