// Recommendation models: DLRM (bottom MLP on dense features, embedding bags
// on sparse features, concatenation interaction, top MLP) and XDL
// (embedding bags, concatenation, MLP). Configurations of FlexFlow's
// examples, which Unity's evaluation ran.
#include "builders.h"

namespace pcgx::zoo {
namespace {

TensorRef mlp_stack(GraphBuilder& b, TensorRef x, const std::vector<int64_t>& widths, const std::string& last_act,
                    const std::string& n) {
  for (size_t i = 0; i < widths.size(); ++i)
    x = b.linear(x, widths[i], i + 1 < widths.size() ? "relu" : last_act, false, n + std::to_string(i));
  return x;
}

std::vector<TensorRef> sparse_features(GraphBuilder& b, const ModelParams& p) {
  std::vector<TensorRef> out;
  for (int64_t t = 0; t < param(p, "tables"); ++t) {
    const std::string n = "sparse" + std::to_string(t);
    TensorRef idx = b.input(n, {param(p, "batch"), param(p, "bag")}, DataType::kInt64, param(p, "rows"));
    out.push_back(b.embedding_bag(idx, param(p, "rows"), param(p, "dim"), "embedding" + std::to_string(t)));
  }
  return out;
}

}  // namespace

ModelSpec dlrm(bool tiny) {
  ModelSpec s = named(tiny, "dlrm", "DLRM: embedding bags + bottom/top MLPs, concatenation interaction");
  s.source = "Naumov et al. 2019; FlexFlow examples/cpp/DLRM run_summit.sh: 8 tables x 1M rows, dim 64, "
             "bottom MLP 64-512-512-64, top MLP 576-1024-1024-1024-1; Unity per-GPU batch 1024";
  s.defaults = tiny ? ModelParams{{"batch", 8}, {"tables", 2}, {"rows", 64}, {"dim", 8}, {"bag", 1},
                                  {"dense_features", 8}, {"bottom_hidden", 16}, {"top_hidden", 16}}
                    : ModelParams{{"batch", 1024}, {"tables", 8}, {"rows", 1000000}, {"dim", 64}, {"bag", 1},
                                  {"dense_features", 64}, {"bottom_hidden", 512}, {"top_hidden", 1024}};
  s.param_docs = {{"batch", "samples per step"}, {"tables", "embedding tables (sparse features)"},
                  {"rows", "rows per table"}, {"dim", "embedding dimension"}, {"bag", "indices per bag"},
                  {"dense_features", "dense input features"}, {"bottom_hidden", "bottom MLP width"},
                  {"top_hidden", "top MLP width"}};
  s.build = [](const ModelParams& p) {
    GraphBuilder b("dlrm");
    const int64_t batch = param(p, "batch"), dim = param(p, "dim"), bh = param(p, "bottom_hidden"),
                  th = param(p, "top_hidden");
    TensorRef dense = b.input("dense", {batch, param(p, "dense_features")});
    std::vector<TensorRef> features{mlp_stack(b, dense, {bh, bh, dim}, "relu", "bottom")};
    for (TensorRef e : sparse_features(b, p)) features.push_back(e);
    TensorRef z = b.concat(features, 1, "interaction");
    TensorRef out = mlp_stack(b, z, {th, th, th, 1}, "sigmoid", "top");
    b.graph().add_output(b.mse_loss(out, b.input("labels", {batch, 1})));
    return b.finish();
  };
  return s;
}

ModelSpec xdl(bool tiny) {
  ModelSpec s = named(tiny, "xdl", "XDL: embedding bags, concatenation, MLP");
  s.source = "Jiang et al. 2019; FlexFlow examples/cpp/XDL: 4 tables x 1M rows, dim 64, MLP 256-256-256-2; "
             "Unity per-GPU batch 1024";
  s.defaults = tiny ? ModelParams{{"batch", 8}, {"tables", 2}, {"rows", 64}, {"dim", 8}, {"bag", 1}, {"hidden", 16}}
                    : ModelParams{{"batch", 1024}, {"tables", 4}, {"rows", 1000000}, {"dim", 64}, {"bag", 1},
                                  {"hidden", 256}};
  s.param_docs = {{"batch", "samples per step"}, {"tables", "embedding tables"}, {"rows", "rows per table"},
                  {"dim", "embedding dimension"}, {"bag", "indices per bag"}, {"hidden", "MLP width"}};
  s.build = [](const ModelParams& p) {
    GraphBuilder b("xdl");
    TensorRef z = b.concat(sparse_features(b, p), 1, "interaction");
    const int64_t h = param(p, "hidden");
    TensorRef out = mlp_stack(b, z, {h, h, 2}, "sigmoid", "mlp");
    b.graph().add_output(b.mse_loss(out, b.input("labels", {param(p, "batch"), 2})));
    return b.finish();
  };
  return s;
}

}  // namespace pcgx::zoo
