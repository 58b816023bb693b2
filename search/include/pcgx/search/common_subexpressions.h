#pragma once
// Common-subexpression merging: a pass run after every substitution.
//
// Rules rewrite one match at a time, so two operators that read one tensor
// often end up behind two copies of the same parallel operator (x·A + x·B
// parallelized branch by branch reads Replicate(x) twice). The copies cost
// twice and, worse, hide matches: x·A + x·B = x·(A + B) needs both Linears
// to read the *same* tensor. Merging them makes those rules applicable.
//
// Likewise a round trip of layout changes (Combine(Repartition(x)) or
// Repartition(Combine(x)), one dimension and degree) is x, in x's layout,
// even where another reader keeps the first: a rule cannot remove it then
// (its match would replace a tensor read outside it), and BERT's residual
// sum read its stream gathered for the attention and split again, a
// message a step, where reading the split stream costs none.
//
// Preserves: every value. Two non-source nodes with the same operator,
// attributes and inputs compute the same tensors (every operator is a
// deterministic function of its attributes and inputs; Dropout's mask is
// fixed by its `seed` attribute). Sources are never merged: each is a
// distinct named input or weight.
#include <optional>

#include "pcgx/pcg/graph.h"

namespace pcgx::search {

// `g` with duplicates merged and round trips read at their start (and the
// nodes they leave unused dropped), or nothing when it has neither. The
// first of each set of duplicates stays.
std::optional<Graph> merge_common_subexpressions(const Graph& g);

}  // namespace pcgx::search
