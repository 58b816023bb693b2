#pragma once
// What a front end names a model or a plan by (the driver's inputs): a zoo
// name ("bert-large"), a graph JSON file, an ONNX model (.onnx) or a
// strategy file from `optimize`.
#include <map>
#include <string>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/tensor.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/strategy_json.h"

namespace pcgx::runner {

struct LoadedModel {
  Graph graph;  // unpartitioned
  // An ONNX model's initializers by Weight name (empty for other sources):
  // the weights it trains and evaluates from unless given others.
  std::map<std::string, Tensor<float>> weights;
};

// A zoo model with `sizes` overriding its size parameters, a graph JSON
// file, or an ONNX model (imported with a loss head; sizes may hold only
// `batch`, the size of its symbolic batch dimension). Throws FieldError
// (ModelParams.KEY) for a size the source does not take.
LoadedModel load_model(const std::string& source, const ModelParams& sizes = {});

// `sizes` with a zoo model's default batch taken per device (Unity's
// evaluation): times `devices`, unless `sizes` sets the batch; unchanged
// for a model without a default batch or from a file.
ModelParams with_batch_per_device(const std::string& source, ModelParams sizes, int64_t devices);

// A strategy file is JSON whose "kind" says so; anything else is a model.
bool is_strategy_file(const std::string& path);

// The shipped ruleset of Unity's operator set (rulesets/unity-v1.json).
std::string default_ruleset_path();
// The rulesets the search applies by default: every shipped one
// (rulesets/MANIFEST.json), unity-v1 first, the others by name (llama-v1:
// RMSNorm and SiLU, whose rules split a LLaMA layer's sequence).
std::vector<std::string> default_rulesets();

}  // namespace pcgx::runner
