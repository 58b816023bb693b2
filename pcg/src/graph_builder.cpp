#include "pcgx/pcg/graph_builder.h"

#include <cmath>

#include "pcgx/pcg/error.h"

namespace pcgx {

int64_t GraphBuilder::dim(TensorRef t, int d) const {
  const auto& s = g_.shape(t);
  return s.dims.at(static_cast<size_t>(d < 0 ? d + s.rank() : d)).size;
}

std::string GraphBuilder::auto_name(const std::string& given, const std::string& stem) {
  if (!given.empty()) return given;
  return stem + std::to_string(counter_++);
}

TensorRef GraphBuilder::op(const std::string& op, Attributes attrs, std::vector<TensorRef> inputs,
                           const std::string& name) {
  return {g_.add(op, std::move(attrs), std::move(inputs), name), 0};
}

TensorRef GraphBuilder::input(const std::string& name, IntList shape, DataType dtype, int64_t index_range) {
  Attributes a{{"shape", std::move(shape)}, {"dtype", std::string(to_string(dtype))}};
  if (index_range > 0) a.set("index_range", index_range);
  return op("Input", std::move(a), {}, name);
}

TensorRef GraphBuilder::weight(const std::string& name, IntList shape, const std::string& init) {
  return op("Weight", {{"shape", std::move(shape)}, {"init", init}}, {}, name);
}

TensorRef GraphBuilder::linear(TensorRef x, int64_t out, const std::string& activation, bool bias,
                               const std::string& name) {
  const std::string n = auto_name(name, "linear");
  std::vector<TensorRef> ins{x, weight(n + ".W", {dim(x, -1), out})};
  if (bias) ins.push_back(weight(n + ".b", {out}, "zeros"));
  return op("Linear", {{"activation", activation}, {"use_bias", bias}}, std::move(ins), n);
}

TensorRef GraphBuilder::conv2d(TensorRef x, int64_t out_channels, int64_t kh, int64_t kw, int64_t stride_h,
                               int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t groups, bool bias,
                               const std::string& activation, const std::string& name) {
  const std::string n = auto_name(name, "conv");
  std::vector<TensorRef> ins{x, weight(n + ".W", {out_channels, dim(x, 1) / groups, kh, kw})};
  if (bias) ins.push_back(weight(n + ".b", {out_channels}, "zeros"));
  return op("Conv2D",
            {{"stride_h", stride_h}, {"stride_w", stride_w}, {"pad_h", pad_h}, {"pad_w", pad_w},
             {"groups", groups}, {"use_bias", bias}, {"activation", activation}},
            std::move(ins), n);
}

TensorRef GraphBuilder::batch_norm(TensorRef x, const std::string& name) {
  const std::string n = auto_name(name, "bn");
  const int64_t c = dim(x, 1);
  Attributes a;
  if (bn_group_ > 0) a.set("group", bn_group_);
  return op("BatchNorm", std::move(a), {x, weight(n + ".gamma", {c}, "ones"), weight(n + ".beta", {c}, "zeros")}, n);
}

TensorRef GraphBuilder::layer_norm(TensorRef x, const std::string& name) {
  const std::string n = auto_name(name, "ln");
  const int64_t d = dim(x, -1);
  return op("LayerNorm", {}, {x, weight(n + ".gamma", {d}, "ones"), weight(n + ".beta", {d}, "zeros")}, n);
}

TensorRef GraphBuilder::pool2d(TensorRef x, const std::string& mode, int64_t kh, int64_t kw, int64_t stride_h,
                               int64_t stride_w, int64_t pad_h, int64_t pad_w, const std::string& name) {
  return op("Pool2D",
            {{"mode", mode}, {"kernel_h", kh}, {"kernel_w", kw}, {"stride_h", stride_h}, {"stride_w", stride_w},
             {"pad_h", pad_h}, {"pad_w", pad_w}},
            {x}, auto_name(name, "pool"));
}

TensorRef GraphBuilder::embedding(TensorRef idx, int64_t vocab, int64_t d, const std::string& name) {
  const std::string n = auto_name(name, "embedding");
  return op("Embedding", {}, {idx, weight(n + ".table", {vocab, d})}, n);
}

TensorRef GraphBuilder::embedding_bag(TensorRef idx, int64_t vocab, int64_t d, const std::string& name) {
  const std::string n = auto_name(name, "embedding_bag");
  return op("EmbeddingBag", {}, {idx, weight(n + ".table", {vocab, d})}, n);
}

TensorRef GraphBuilder::unary(const std::string& o, TensorRef x, const std::string& name) {
  return op(o, {}, {x}, name);
}
TensorRef GraphBuilder::binary(const std::string& o, TensorRef a, TensorRef b, const std::string& name) {
  return op(o, {}, {a, b}, name);
}
TensorRef GraphBuilder::scalar_mul(TensorRef x, double s, const std::string& name) {
  return op("ScalarMul", {{"scalar", s}}, {x}, name);
}
TensorRef GraphBuilder::softmax(TensorRef x, bool causal, const std::string& name) {
  return op("Softmax", {{"causal", causal}}, {x}, name);
}
TensorRef GraphBuilder::dropout(TensorRef x, double rate, const std::string& name) {
  return op("Dropout", {{"rate", rate}, {"seed", static_cast<int64_t>(counter_++)}}, {x}, name);
}
TensorRef GraphBuilder::concat(std::vector<TensorRef> xs, int64_t axis, const std::string& name) {
  return op("Concat", {{"axis", axis}}, std::move(xs), name);
}
TensorRef GraphBuilder::reshape(TensorRef x, IntList shape, const std::string& name) {
  return op("Reshape", {{"shape", std::move(shape)}}, {x}, name);
}
TensorRef GraphBuilder::transpose(TensorRef x, IntList perm, const std::string& name) {
  return op("Transpose", {{"perm", std::move(perm)}}, {x}, name);
}
TensorRef GraphBuilder::matmul(TensorRef a, TensorRef b, const std::string& name) {
  return op("MatMul", {}, {a, b}, name);
}
TensorRef GraphBuilder::batch_matmul(TensorRef a, TensorRef b, const std::string& name) {
  return op("BatchMatMul", {}, {a, b}, name);
}
TensorRef GraphBuilder::softmax_cross_entropy(TensorRef logits, TensorRef labels, const std::string& name) {
  return op("SoftmaxCrossEntropy", {}, {logits, labels}, name.empty() ? "loss" : name);
}
TensorRef GraphBuilder::mse_loss(TensorRef pred, TensorRef target, const std::string& name) {
  return op("MSELoss", {}, {pred, target}, name.empty() ? "loss" : name);
}

TensorRef GraphBuilder::encoder_block(TensorRef x, int64_t heads, int64_t ffn, const std::string& prefix) {
  const int64_t B = dim(x, 0), S = dim(x, 1), H = dim(x, 2), dh = H / heads;
  if (H % heads != 0) throw Error("encoder_block: width " + std::to_string(H) + " is not a multiple of " + std::to_string(heads) + " heads");
  const std::string& p = prefix;
  auto split = [&](TensorRef t, const std::string& n, IntList perm) {
    return transpose(reshape(t, {B, S, heads, dh}, p + n + "_heads"), perm, p + n + "_t");
  };
  TensorRef q = split(linear(x, H, "none", true, p + "attn.query"), "q", {0, 2, 1, 3});
  TensorRef k = split(linear(x, H, "none", true, p + "attn.key"), "k", {0, 2, 3, 1});
  TensorRef v = split(linear(x, H, "none", true, p + "attn.value"), "v", {0, 2, 1, 3});
  TensorRef scores = scalar_mul(batch_matmul(q, k, p + "scores"), 1.0 / std::sqrt(static_cast<double>(dh)), p + "scale");
  TensorRef ctx = batch_matmul(softmax(scores, false, p + "softmax"), v, p + "context");
  ctx = reshape(transpose(ctx, {0, 2, 1, 3}, p + "context_t"), {B, S, H}, p + "context_merge");
  TensorRef x1 = layer_norm(binary("EwAdd", x, linear(ctx, H, "none", true, p + "attn.output"), p + "attn_residual"), p + "attn_ln");
  TensorRef f = linear(linear(x1, ffn, "gelu", true, p + "ffn.intermediate"), H, "none", true, p + "ffn.output");
  return layer_norm(binary("EwAdd", x1, f, p + "ffn_residual"), p + "ffn_ln");
}

Graph encoder_block_regression(const std::string& name, int64_t B, int64_t S, int64_t H, int64_t heads, int64_t ffn, int64_t layers) {
  GraphBuilder b(name);
  TensorRef y = b.input("x", {B, S, H});
  for (int64_t l = 0; l < layers; ++l) y = b.encoder_block(y, heads, ffn);
  b.graph().add_output(b.mse_loss(y, b.input("target", {B, S, H})));
  return b.finish();
}

}  // namespace pcgx
