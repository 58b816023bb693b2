#pragma once
// A small fluent API for writing models: each call appends one node (and the
// weights it owns) to a Graph. Used by the model zoo and the tests.
#include <string>

#include "pcgx/pcg/graph.h"

namespace pcgx {

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string graph_name) : g_(std::move(graph_name)) {}

  Graph& graph() { return g_; }
  Graph finish() { return std::move(g_); }
  const ParallelTensorShape& shape(TensorRef t) const { return g_.shape(t); }
  int64_t dim(TensorRef t, int d) const;

  TensorRef input(const std::string& name, IntList shape, DataType dtype = DataType::kFloat32,
                  int64_t index_range = 0);
  TensorRef weight(const std::string& name, IntList shape, const std::string& init = "normal");

  // Creates W[in, out] (and bias[out]) named after `name`.
  TensorRef linear(TensorRef x, int64_t out, const std::string& activation = "none",
                   bool bias = false, const std::string& name = "");
  TensorRef conv2d(TensorRef x, int64_t out_channels, int64_t kh, int64_t kw, int64_t stride_h,
                   int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t groups = 1,
                   bool bias = false, const std::string& activation = "none",
                   const std::string& name = "");
  // BatchNorm over the whole batch, or over groups of `bn_group` samples
  // when set_bn_group made it positive.
  TensorRef batch_norm(TensorRef x, const std::string& name = "");
  void set_bn_group(int64_t samples) { bn_group_ = samples; }
  TensorRef layer_norm(TensorRef x, const std::string& name = "");
  TensorRef pool2d(TensorRef x, const std::string& mode, int64_t kh, int64_t kw, int64_t stride_h,
                   int64_t stride_w, int64_t pad_h, int64_t pad_w, const std::string& name = "");
  TensorRef embedding(TensorRef idx, int64_t vocab, int64_t dim, const std::string& name = "");
  TensorRef embedding_bag(TensorRef idx, int64_t vocab, int64_t dim, const std::string& name = "");

  TensorRef unary(const std::string& op, TensorRef x, const std::string& name = "");
  TensorRef binary(const std::string& op, TensorRef a, TensorRef b, const std::string& name = "");
  TensorRef scalar_mul(TensorRef x, double s, const std::string& name = "");
  TensorRef softmax(TensorRef x, bool causal = false, const std::string& name = "");
  TensorRef dropout(TensorRef x, double rate, const std::string& name = "");
  TensorRef concat(std::vector<TensorRef> xs, int64_t axis, const std::string& name = "");
  TensorRef reshape(TensorRef x, IntList shape, const std::string& name = "");
  TensorRef transpose(TensorRef x, IntList perm, const std::string& name = "");
  TensorRef matmul(TensorRef a, TensorRef b, const std::string& name = "");
  TensorRef batch_matmul(TensorRef a, TensorRef b, const std::string& name = "");
  TensorRef softmax_cross_entropy(TensorRef logits, TensorRef labels, const std::string& name = "");
  TensorRef mse_loss(TensorRef pred, TensorRef target, const std::string& name = "");

  // A post-LN transformer encoder block on x[b, s, h], without dropout:
  // self-attention (query/key/value/output Linear with bias, heads split by
  // reshape and transpose, softmax of q·k^T / sqrt(h / heads)), residual and
  // LayerNorm, a gelu feed-forward of width `ffn`, residual and LayerNorm.
  // Weights: prefix + "attn.query.W", ... "attn.output.b", "attn_ln.gamma",
  // "ffn.intermediate.W", "ffn.output.b", "ffn_ln.beta" (the names
  // scripts/golden.py gives PyTorch's copy).
  TensorRef encoder_block(TensorRef x, int64_t heads, int64_t ffn, const std::string& prefix = "");

  // Any operator by name.
  TensorRef op(const std::string& op, Attributes attrs, std::vector<TensorRef> inputs,
               const std::string& name = "");

 private:
  std::string auto_name(const std::string& given, const std::string& stem);
  Graph g_;
  int counter_ = 0;
  int64_t bn_group_ = 0;
};

// `layers` encoder blocks (GraphBuilder::encoder_block) on an input
// x[B, S, H] regressing an input "target" of the same shape with MSELoss:
// the small transformer model of the PyTorch golden test, bench_runtime
// and the runtime's allocation test (one block), and bench_runtime_gpu's
// BERT-Large layers.
Graph encoder_block_regression(const std::string& name, int64_t B, int64_t S, int64_t H, int64_t heads, int64_t ffn,
                               int64_t layers = 1);

}  // namespace pcgx
