// CANDLE-Uno: one dense feature model per cell/drug input, concatenated with
// the doses, then a dense regression stack (FlexFlow examples/cpp/candle_uno).
#include "builders.h"

namespace pcgx::zoo {

ModelSpec candle_uno(bool tiny) {
  ModelSpec s = named(tiny, "candle-uno", "CANDLE-Uno drug response regression");
  s.source = "ECP-CANDLE Pilot1 Uno; FlexFlow examples/cpp/candle_uno: feature models 8 x 4192, dense 4 x 4192, "
             "inputs rnaseq 942, drug descriptors 5270, fingerprints 2048; Unity per-GPU batch 256";
  s.defaults = tiny ? ModelParams{{"batch", 8}, {"width", 16}, {"feature_layers", 2}, {"dense_layers", 2},
                                  {"rnaseq", 12}, {"descriptors", 20}, {"fingerprints", 16}}
                    : ModelParams{{"batch", 256}, {"width", 4192}, {"feature_layers", 8}, {"dense_layers", 4},
                                  {"rnaseq", 942}, {"descriptors", 5270}, {"fingerprints", 2048}};
  s.param_docs = {{"batch", "samples per step"}, {"width", "width of every dense layer"},
                  {"feature_layers", "dense layers per feature model"}, {"dense_layers", "layers after the concat"},
                  {"rnaseq", "cell RNA-seq features"}, {"descriptors", "drug descriptor features"},
                  {"fingerprints", "drug fingerprint features"}};
  s.build = [](const ModelParams& p) {
    GraphBuilder b("candle-uno");
    const int64_t batch = param(p, "batch"), w = param(p, "width");
    auto feature_model = [&](TensorRef x, const std::string& n) {
      for (int64_t i = 0; i < param(p, "feature_layers"); ++i) x = b.linear(x, w, "relu", false, n + ".dense" + std::to_string(i));
      return x;
    };
    // Inputs in FlexFlow's order (its std::map sorts feature names).
    const std::vector<std::pair<std::string, int64_t>> inputs{
        {"cell.rnaseq", param(p, "rnaseq")},       {"dose1", 1},
        {"dose2", 1},                              {"drug1.descriptors", param(p, "descriptors")},
        {"drug1.fingerprints", param(p, "fingerprints")}, {"drug2.descriptors", param(p, "descriptors")},
        {"drug2.fingerprints", param(p, "fingerprints")}};
    std::vector<TensorRef> encoded;
    for (const auto& [name, width] : inputs) {
      TensorRef x = b.input(name, {batch, width});
      encoded.push_back(name.rfind("dose", 0) == 0 ? x : feature_model(x, name));
    }
    TensorRef x = b.concat(encoded, 1, "concat");
    for (int64_t i = 0; i < param(p, "dense_layers"); ++i) x = b.linear(x, w, "relu", false, "dense" + std::to_string(i));
    x = b.linear(x, 1, "none", false, "output");
    b.graph().add_output(b.mse_loss(x, b.input("labels", {batch, 1})));
    return b.finish();
  };
  return s;
}

}  // namespace pcgx::zoo
