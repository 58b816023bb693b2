#pragma once
// Where a pipeline's chunks end (internal to search/; pipeline.cpp): cuts
// of the model, each a position in its compute order after which one
// tensor crosses (pcg/graph_cuts.h's valid_cuts). pipeline.h's
// balanced_cuts is the searched choice; these are the stated ones.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/graph.h"

namespace pcgx::search {

// How Megatron-LM splits a model's layers over its chunks where they are
// not even (PipelineOptions' first_stage_layers and last_stage_layers,
// or embedding_as_layer and loss_as_layer).
struct LayerSplit {
  int64_t first = 0, last = 0;
  bool embedding = false, loss = false;
};

// Megatron-LM's stages: the model's layers split evenly over the `stages`
// x `virtual_stages` chunks, the embeddings in the first chunk and the
// head and loss in the last. Throws naming PipelineOptions.stages where
// the chunks do not divide the layers. Uneven (`split`): the first (last)
// stage holds `first` (`last`) layers and the rest split evenly over the
// stages between, each stage's over its virtual stages; or the embeddings
// (the loss) counted as a layer, the first (last) chunk one layer short.
// Throws naming the field where they do not split.
std::vector<std::pair<size_t, TensorRef>> even_layer_cuts(const Graph& g, const std::vector<NodeId>& order, int64_t stages,
                                                          int64_t virtual_stages = 1, const LayerSplit& split = {});
// The cuts a pipeline layout states (PipelineOptions::layout: each
// chunk's layers in model order, an empty first or last chunk holding
// only the embeddings or only the head and loss). Throws naming
// PipelineOptions.layout where its layers are not the model's or nothing
// follows the last layer at a cut.
std::vector<std::pair<size_t, TensorRef>> layout_cuts(const Graph& g, const std::vector<NodeId>& order, const std::vector<int64_t>& layout);
// An interlaced pipeline's cuts, unstated: the layers evenly over the
// `staged` chunks, an interlaced first chunk what precedes the first
// layer, an interlaced last one what follows the last.
std::vector<std::pair<size_t, TensorRef>> interlaced_cuts(const Graph& g, const std::vector<NodeId>& order, int64_t staged,
                                                          const std::vector<int64_t>& interlaced);
// The cuts after the operators `names` (PipelineOptions::boundaries), one
// per chunk but the last; throws naming that field otherwise.
std::vector<std::pair<size_t, TensorRef>> stated_cuts(const Graph& g, const std::vector<NodeId>& order, const std::vector<std::string>& names,
                                                      int64_t chunks);

}  // namespace pcgx::search
