#pragma once
// How a plan trains beyond its graph (docs/training.md): the precision it
// computes in and which activations its backward pass recomputes instead of
// keeping. Both are part of the strategy: saved with it, priced by the cost
// model and the simulator, counted by the memory model, chosen by the
// search.
#include <cstdint>
#include <optional>
#include <string_view>

#include "pcgx/pcg/precision.h"

namespace pcgx {

// Activation recomputation (activation checkpointing), in Megatron-LM's
// vocabulary:
//
//   none       every operator's outputs are kept for the backward pass.
//   selective  the products of two activations that grow them (attention's
//              scores q k^T, [b, a, s, s] from [b, a, s, d]) and the
//              same-sized operators after them (scale, softmax, dropout)
//              are recomputed in backward, up to the product that reads
//              them (the attention-weighted sum): the sequence-quadratic
//              memory, cheap to recompute (Korthikanti et al. 2022,
//              "Reducing Activation Recomputation in Large Transformer
//              Models", Section 5).
//   full       only the tensors at the graph's single-tensor cuts are kept
//              (in a transformer the residual stream between blocks: two
//              per layer, where Megatron-LM keeps one); in backward each
//              segment between two cuts re-runs its forward, collectives
//              included, from its kept input. What precedes the first cut
//              (embeddings) and follows the last (the loss) is kept.
enum class Recompute : uint8_t { kNone, kSelective, kFull };
inline constexpr Recompute kRecomputes[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};

// none, selective, full.
const char* name(Recompute r);
std::optional<Recompute> recompute_named(std::string_view text);

struct TrainingRecipe {
  Precision precision = kDefaultPrecision;
  Recompute recompute = Recompute::kNone;
  bool operator==(const TrainingRecipe&) const = default;
};

}  // namespace pcgx
