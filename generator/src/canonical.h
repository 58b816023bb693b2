#pragma once
// Canonical text forms of small graphs and graph fragments. A form is the
// smallest serialization over all topological orders, so it does not depend
// on the order the operators were generated in.
#include <functional>
#include <string>
#include <vector>

#include "pcgx/generator/small_graph.h"

namespace pcgx::gen {

// An external tensor of a fragment: a pool tensor or an operator output of
// the enclosing graph, identified by `id`; `tag` stands for it in an
// abstract form (its parallel shape), `name` in a concrete one.
struct External {
  int id;
  std::string name;
  std::string tag;
};

// A fragment: operators whose inputs are either other fragment operators
// (internal) or externals, and the fragment outputs (op, output) that the
// rest of a graph sees.
struct FragOp {
  uint32_t inst;
  struct In {
    bool internal;
    int a;  // internal: fragment op index; external: index into externals
    int b;  // internal: output index
  };
  std::vector<In> in;
};
struct Fragment {
  std::vector<FragOp> ops;
  std::vector<External> externals;
  std::vector<std::pair<int, int>> outputs;
};

struct Form {
  std::string text;
  std::vector<int> position_of_op;   // fragment op -> position in the canonical order
  std::vector<int> external_of_var;  // abstract forms: variable -> external index
};

// `key(inst)` names an operator instance.
Form canonical_form(const Fragment& f, bool abstract, const std::function<const std::string&(uint32_t)>& key);

}  // namespace pcgx::gen
