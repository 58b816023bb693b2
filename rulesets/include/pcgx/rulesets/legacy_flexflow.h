#pragma once
// The legacy FlexFlow/TASO rule format ("RuleCollection": rule[] of srcOp[],
// dstOp[], mappedOutput[]), as written by the original Unity generator
// (FlexFlow's substitutions/graph_subst_3_v2.json, a 640-rule database).
//
// Mapping to pcgx:
//   OP_PARTITION(dim, k) -> Repartition(dim', k)   OP_COMBINE(dim, k) -> Combine(dim', k)
//   OP_REPLICATE(_, k)   -> Replicate(k)           OP_REDUCE(_, k)    -> Reduce(k)
//     (pcgx has one replica dimension; the legacy PM_PARALLEL_DIM of these
//      two names a dimension pcgx does not need, and is dropped)
//   OP_LINEAR(x, w; PM_ACTI 0|2) -> Linear(x, w; activation none|relu)
//   OP_RELU, OP_EW_ADD, OP_EW_MUL -> Relu, EwAdd, EwMul
//   OP_CONCAT(axis) -> Concat(axis')               OP_SPLIT(axis, 2) -> Split(axis', two halves)
// Inputs: legacy tensor -1..-3 are activations of rank 3, -4 and below are
// weights of rank 2 (pcgx's Linear takes W[in, out]); every dimension has
// size 4 (`size`), nothing is partitioned. Dimension numbering dim' is
// `LegacyDims::kReversed` (FlexFlow stores dimensions innermost first:
// legacy d is pcgx rank-1-d) or kForward (d is d).
#include <string>
#include <vector>

#include "pcgx/rulesets/ruleset.h"

namespace pcgx {

enum class LegacyDims { kReversed, kForward };

struct LegacyRule {
  std::string name;
  bool expressible = false;
  std::string reason;  // why not, when not
  int index = -1;      // position in LegacyImport::rules when expressible
};

struct LegacyImport {
  Ruleset rules;                    // the expressible rules, ids = legacy names
  std::vector<LegacyRule> legacy;   // every legacy rule, in file order
};

LegacyImport import_flexflow(const std::string& text, const std::string& source, LegacyDims dims, int64_t size = 4);

// Writes the rules the legacy format can express; `skipped` receives the
// ids of the others with the reason.
std::string export_flexflow(const Ruleset& r, LegacyDims dims, std::vector<std::string>& skipped);

}  // namespace pcgx
