#pragma once
// Legal instances of one axiom, built rather than hoped for (internal).
//
// `pcgx axioms check` needs instances where the precondition holds and
// both sides are legal PCGs of one parallel shape. Drawing every variable
// independently finds some axioms' instances once in thousands of draws
// (Embedding's table split by rows needs a float table of rank 2 split on
// dimension 0 by the very degree an integer variable names, and an index
// tensor of int64 with one replica) and makes the instances that tell a
// guarded axiom from its unguarded version rare too. Here the variables
// are bound one at a time, in the order the terms use them, each trying
// its values in a random order, and every subterm and every conjunct of
// the precondition is checked as soon as its variables are bound: a
// randomized backtracking search whose first solution is the instance.
// Searches take turns with independent draws (operands often sharing one
// state), which reach operators of many operands that a search cannot.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "terms.h"

namespace pcgx::verify {

class AxiomInstances {
 public:
  // Integer variables take the values worth trying for the attribute they
  // first appear as (dimensions, degrees, activations, permutations, ...);
  // tensor variables every state of rank 1 to 4 with each size 4, each
  // dimension split 2 ways or not, replicated twice or not, float or int64
  // indices in [0, 4).
  AxiomInstances(Terms& terms, const Axiom& axiom);

  // Binds every variable to a legal instance drawn at random; false when
  // none was found within the search budget. `lhs`/`rhs` get both sides.
  bool draw(std::mt19937_64& rng, Bindings& b, std::string& description, z3::expr& lhs, z3::expr& rhs);

  struct State {  // a tensor variable's value
    ParallelTensorShape shape;
    int64_t index_range = 0;
  };

 private:
  struct Check {
    z3::expr e;
    bool tensor;  // a tensor subterm that must be legal; else a conjunct that must hold
  };
  bool bind(size_t k, std::mt19937_64& rng, Bindings& b);
  bool bind_independently(std::mt19937_64& rng, Bindings& b);
  void bind_tensor(unsigned v, const State& s, Bindings& b);
  bool sides_agree(const Bindings& b);
  bool holds(const Check& c, const Bindings& b);
  void collect(const z3::expr& e, bool top);

  Terms& T_;
  const Axiom& axiom_;
  std::vector<unsigned> order_;                     // variables, in binding order
  std::vector<std::vector<int64_t>> int_values_;    // per variable (integers only)
  std::vector<Check> checks_;
  std::vector<std::vector<size_t>> checks_at_;      // per position in order_: checks decidable from then on
  int64_t budget_ = 0;                              // values tried in the current search
  int64_t draws_ = 0;
  int64_t searches_ = 0, searches_found_ = 0;
  std::vector<int> state_of_;                       // per tensor variable: its state's index, -1 unbound
  // Per tensor variable: its rank and element type in the last instance
  // found (rank 0: none yet). Operand positions mostly fix both, so later
  // draws try them first.
  struct Kind {
    int rank = 0;
    DataType type = DataType::kFloat32;
  };
  std::vector<Kind> learned_;
  std::vector<State> drawn_;                        // per tensor variable, by the independent draw
};

}  // namespace pcgx::verify
