#pragma once
// PCGs as Z3 terms, and axioms as rewrite patterns over them (internal).
#include <z3++.h>

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph.h"
#include "pcgx/verifier/verifier.h"

namespace pcgx::verify {

// An operator with no row in the encoding table at all (not merely
// attributes the table does not code): no rule of it can be proved.
struct MissingEncoding : Error {
  std::string op;
  explicit MissingEncoding(const std::string& name)
      : Error("operator " + name + " has no SMT encoding (its registry entry has no OpDef::smt)"), op(name) {}
};

// An axiom "forall vars. pre => lhs = rhs" (pre may be absent). Variables
// are Z3 de Bruijn indices; `tensor_var[i]` tells the sort of index i.
struct Axiom {
  std::string name;
  std::vector<bool> tensor_var;
  std::optional<z3::expr> pre;
  z3::expr lhs, rhs;
  bool usable[2] = {false, false};  // may lhs (0) / rhs (1) serve as the pattern?
};

std::vector<Axiom> parse_axioms(z3::context& ctx, const AxiomSet& set);

using Bindings = std::vector<std::optional<z3::expr>>;

// A bound variable of a quantifier body, and its de Bruijn index.
bool is_var(const z3::expr& e);
unsigned var_index(const z3::expr& e);

class Terms {
 public:
  explicit Terms(z3::context& ctx);

  z3::context& ctx() { return ctx_; }
  const z3::sort& tensor() const { return tensor_; }

  // Encodes the tensors `outs` of `g`; records its inputs' shapes. Throws
  // pcgx::Error for an operator without an encoding.
  std::vector<z3::expr> encode(const Graph& g, const std::vector<TensorRef>& outs);
  // An input's state; int64 inputs hold indices in [0, index_range).
  // (Shapes computed before depend on the old state: they are forgotten.)
  void set_input(const std::string& name, const ParallelTensorShape& s, int64_t index_range = 0) {
    inputs_[name] = s;
    if (index_range > 0) index_ranges_[name] = index_range;
    else index_ranges_.erase(name);
    shapes_.clear();
  }
  void clear_inputs() {
    inputs_.clear();
    index_ranges_.clear();
    shapes_.clear();
  }

  // Parallel shape of a ground term, or nothing when it is not a legal PCG.
  std::optional<ParallelTensorShape> shape(const z3::expr& t);
  size_t size(const z3::expr& t) const;  // operators in the term tree

  bool match(const z3::expr& pattern, const z3::expr& t, Bindings& b);
  std::optional<z3::expr> instantiate(const z3::expr& e, const Bindings& b);
  std::optional<int64_t> eval_int(const z3::expr& e, const Bindings& b);
  std::optional<bool> eval_bool(const z3::expr& e, const Bindings& b);

  // Builds a graph computing `terms` (inputs named as the term constants).
  Graph to_graph(const std::vector<z3::expr>& terms, std::vector<TensorRef>& outs);

 private:
  z3::context& ctx_;
  z3::sort tensor_;
  std::map<std::string, ParallelTensorShape> inputs_;
  std::map<std::string, int64_t> index_ranges_;
  // By term id; the term is kept so that its id is not reused by another
  // term while the entry lives (Z3 recycles the ids of freed terms).
  std::unordered_map<unsigned, std::pair<z3::expr, std::optional<ParallelTensorShape>>> shapes_;
  std::vector<std::pair<z3::expr, int64_t>> deferred_;
  // An operator's output shape (or illegality) by symbol, integer arguments
  // and input shapes: a pure function, kept across inputs.
  std::unordered_map<std::string, std::optional<ParallelTensorShape>> op_shapes_;
};

}  // namespace pcgx::verify
