#pragma once
// Rules at other ranks. The shipped rules are stated for 3-d activations
// [b, s, h] (and 2-d weights); models also have 2-d activations (MLPs) and
// 4-d ones (images). A rule stays true when every rank-3 tensor in it gains
// or loses a *passive* dimension at position 1, one that no operator of the
// rule splits, concatenates, reduces or otherwise names:
//   - lowering (3 -> 2) is the rule at s = 1, where [b, 1, h] is [b, h];
//     it requires every rank-3 tensor to have degree 1 on dimension 1 and
//     no attribute to name that dimension;
//   - raising (3 -> 4) applies the rule independently at every index of the
//     new dimension, which every operator of the unity opset does for a
//     dimension it does not name.
// Attributes naming dimensions (Repartition/Combine dim, Concat/Split axis,
// Softmax axis, Transpose perm) are renumbered. Rules with operators outside
// that list of dimension-naming attributes but with rank-specific meaning
// (MatMul, BatchMatMul, Transpose, Conv2D, Pool2D, Embedding*, Reshape,
// LayerNorm, BatchNorm, losses) are not adapted.
#include <optional>

#include "pcgx/rulesets/ruleset.h"

namespace pcgx::search {

// The rule with its rank-3 tensors made rank `to` (2 or 4), or nothing when
// the rule cannot be adapted.
std::optional<Rule> adapt_rank(const Rule& rule, int to);

}  // namespace pcgx::search
