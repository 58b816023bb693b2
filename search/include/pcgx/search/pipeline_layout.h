#pragma once
// Megatron-LM's pipeline layout (--pipeline-model-parallel-layout,
// megatron/core/transformer/pipeline_parallel_layer_layout.py): what each
// chunk of a pipeline holds, as a string a user writes once for a whole
// model. `E` is the embeddings, `t` one transformer layer, `L` the head
// and the loss, `|` ends a chunk; `x*n` repeats one character n times,
// `(...)*n` a group (it may hold `|`); commas are cosmetic. The chunks are
// in model order, chunk c on stage c mod S (as Megatron-LM lays out its
// virtual stages), so "Et*3|(t*4|)*30,t*3L" is 126 layers over 32 chunks,
// the first and last one layer short (Llama 3 405B's pipeline).
#include <cstdint>
#include <string_view>
#include <vector>

namespace pcgx::search {

// The layers of each chunk, in model order. Throws FieldError naming
// PipelineOptions.layout for a character outside E, t, L, | and the
// repetitions, an unbalanced group or a missing count, an E that is not
// the first thing of the first chunk or an L not the last thing of the
// last (each exactly once), or a chunk between them with no layer.
std::vector<int64_t> parse_pipeline_layout(std::string_view text);

}  // namespace pcgx::search
