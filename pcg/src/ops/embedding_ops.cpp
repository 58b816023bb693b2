// Embedding (one row per index) and EmbeddingBag (sum of the rows of a bag).
// Tables split by rows give partial sums: a task contributes the rows it
// owns and zeros elsewhere. Split by columns, the output splits likewise.
#include "pcgx/pcg/ops/numeric.h"
#include "op_families.h"
#include "pcgx/pcg/ops/op_helpers.h"

namespace pcgx::ops {
namespace {

constexpr int kCopy = ParallelKind::kCopy;
constexpr int kPartial = ParallelKind::kPartial;

// Adds the rows of `table` named by idx[first..first+count) into out_row.
template <class T>
void gather_rows(const KernelArgs<T>& a, int64_t first, int64_t count, T* out_row) {
  const Tensor<T>& idx = *a.in[0];
  const Tensor<T>& table = *a.in[1];
  const int64_t rows = table.shape[0], cols = table.shape[1];
  const int64_t row0 = a.ctx.input_offsets[1][0];
  for (int64_t b = 0; b < count; ++b) {
    const int64_t v = Num<T>::index(idx.data[static_cast<size_t>(first + b)]) - row0;
    if (v < 0 || v >= rows) continue;
    const T* src = table.data.data() + v * cols;
    for (int64_t c = 0; c < cols; ++c) out_row[c] += src[c];
  }
}

template <class T>
void embedding_k(const KernelArgs<T>& a) {
  const int64_t n = a.in[0]->numel(), cols = a.in[1]->shape[1];
  for (int64_t i = 0; i < n; ++i) gather_rows(a, i, 1, a.out[0].data.data() + i * cols);
}

template <class T>
void embedding_bag_k(const KernelArgs<T>& a) {
  const int64_t batch = a.in[0]->shape[0], bag = a.in[0]->shape[1], cols = a.in[1]->shape[1];
  for (int64_t i = 0; i < batch; ++i) gather_rows(a, i * bag, bag, a.out[0].data.data() + i * cols);
}

// Gradients: each gathered row's gradient is added to the table row it came
// from (rows this task does not own contributed nothing and get nothing).
void scatter_rows(const GradArgs& a, int64_t first, int64_t count, const float* dy_row) {
  const Tensor<float>& idx = *a.in[0];
  Tensor<float>& dtable = a.in_grad[1];
  const int64_t rows = dtable.shape[0], cols = dtable.shape[1];
  const int64_t row0 = a.ctx.input_offsets[1][0];
  for (int64_t b = 0; b < count; ++b) {
    const int64_t v = static_cast<int64_t>(idx.data[static_cast<size_t>(first + b)]) - row0;
    if (v < 0 || v >= rows) continue;
    float* dst = dtable.data.data() + v * cols;
    for (int64_t c = 0; c < cols; ++c) dst[c] += dy_row[c];
  }
}
void embedding_grad(const GradArgs& a) {
  const int64_t n = a.in[0]->numel(), cols = a.in[1]->shape[1];
  for (int64_t i = 0; i < n; ++i) scatter_rows(a, i, 1, a.out_grad[0]->data.data() + i * cols);
}
void embedding_bag_grad(const GradArgs& a) {
  const int64_t batch = a.in[0]->shape[0], bag = a.in[0]->shape[1], cols = a.in[1]->shape[1];
  for (int64_t i = 0; i < batch; ++i) scatter_rows(a, i * bag, bag, a.out_grad[0]->data.data() + i * cols);
}

void check_table(std::span<const TensorType> in, const std::string& op) {
  PCGX_REQUIRE(in[0].dtype == DataType::kInt64, op + " indices must be int64, got " + std::string(to_string(in[0].dtype)));
  require_rank(in[1], 2, op + " table");
  require_float(in[1], op + " table");
}

// Indices in, gathered rows in, output out: the table is not read whole.
double gather_bytes(const Attributes&, std::span<const TensorType> in, std::span<const TensorType> out) {
  const double rows_read = static_cast<double>(product(in[0].shape)) * static_cast<double>(in[1].shape[1]);
  return static_cast<double>(tensor_bytes(in[0])) + 4.0 * rows_read + static_cast<double>(tensor_bytes(out[0]));
}

}  // namespace

void register_embedding_ops(OpRegistry& r) {
  OpDef emb;
  emb.name = "Embedding";
  emb.summary = "out[..., :] = table[idx[...], :]";
  emb.input_names = {"idx", "table"};
  emb.min_inputs = emb.max_inputs = 2;
  emb.infer_types = [](const Attributes&, std::span<const TensorType> in) {
    check_table(in, "Embedding");
    TensorType out{in[0].shape, DataType::kFloat32};
    out.shape.push_back(in[1].shape[1]);
    return std::vector<TensorType>{out};
  };
  emb.kinds = [](const Attributes&, std::span<const TensorType> in) {
    const int rank = static_cast<int>(in[0].shape.size());
    std::vector<ParallelKind> kinds;
    for (int d = 0; d < rank; ++d) kinds.push_back({"batch" + std::to_string(d), {d, kCopy}, {d}, 0});
    kinds.push_back({"columns", {kCopy, 1}, {rank}, 0});
    kinds.push_back({"rows", {kCopy, 0}, {kPartial}, 0});
    return kinds;
  };
  PCGX_KERNELS(emb, embedding_k);
  emb.grad_f32 = &embedding_grad;
  emb.backward_reads = reads(0b01, 0);  // the indices: rows of the table's gradient
  emb.bytes = gather_bytes;
  emb.flops = [](const Attributes&, auto, std::span<const TensorType> out) { return static_cast<double>(product(out[0].shape)); };
  emb.smt = {{"embedding", 2}};
  emb.pool_inputs = {PoolInput::kIndices};
  r.add(emb);

  OpDef bag;
  bag.name = "EmbeddingBag";
  bag.summary = "out[b, :] = sum over j of table[idx[b, j], :]";
  bag.input_names = {"idx", "table"};
  bag.min_inputs = bag.max_inputs = 2;
  bag.infer_types = [](const Attributes&, std::span<const TensorType> in) {
    check_table(in, "EmbeddingBag");
    require_rank(in[0], 2, "EmbeddingBag indices");
    return std::vector<TensorType>{{{in[0].shape[0], in[1].shape[1]}, DataType::kFloat32}};
  };
  bag.kinds = [](const Attributes&, std::span<const TensorType>) {
    return std::vector<ParallelKind>{{"batch", {0, kCopy}, {0}, 0},
                                     {"bag", {1, kCopy}, {kPartial}, 0},
                                     {"columns", {kCopy, 1}, {1}, 0},
                                     {"rows", {kCopy, 0}, {kPartial}, 0}};
  };
  PCGX_KERNELS(bag, embedding_bag_k);
  bag.grad_f32 = &embedding_bag_grad;
  bag.backward_reads = reads(0b01, 0);
  bag.bytes = gather_bytes;
  bag.flops = [](const Attributes&, std::span<const TensorType> in, std::span<const TensorType> out) {
    return static_cast<double>(product(out[0].shape) * in[0].shape[1]);
  };
  bag.smt = {{"embedding_bag", 2}};
  bag.pool_inputs = {PoolInput::kIndices};
  r.add(bag);
}

}  // namespace pcgx::ops
