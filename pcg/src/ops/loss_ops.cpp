// Losses: SoftmaxCrossEntropy and MSELoss, both the mean over samples as a
// rank-0 tensor. Split along batch dimensions, each task returns its share of
// the mean: partial sums to be reduced.
#include "pcgx/pcg/ops/numeric.h"
#include "op_families.h"
#include "pcgx/pcg/ops/op_helpers.h"

namespace pcgx::ops {
namespace {

template <class T>
void cross_entropy_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  const Tensor<T>& labels = *a.in[1];
  const int64_t classes = x.shape.back(), rows = x.numel() / classes;
  const ParallelTensorShape& global = a.ctx.input_shapes[0];
  const int64_t global_rows = global.num_elements() / global.dims.back().size;
  T total = Num<T>::zero();
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x.data.data() + r * classes;
    T shift = Num<T>::zero();
    if constexpr (std::is_same_v<T, float>)
      shift = *std::max_element(row, row + classes);
    T sum = Num<T>::zero();
    for (int64_t c = 0; c < classes; ++c) sum += Num<T>::exp(row[c] - shift);
    const int64_t label = Num<T>::index(labels.data[static_cast<size_t>(r)]);
    const T picked = (label >= 0 && label < classes) ? row[label] : Num<T>::zero();
    total += Num<T>::log(sum) + shift - picked;
  }
  a.out[0].data[0] = Num<T>::div(total, Num<T>::from_int(global_rows));
}

template <class T>
void mse_k(const KernelArgs<T>& a) {
  const auto &p = a.in[0]->data, &t = a.in[1]->data;
  T total = Num<T>::zero();
  for (size_t i = 0; i < p.size(); ++i) total += (p[i] - t[i]) * (p[i] - t[i]);
  a.out[0].data[0] = Num<T>::div(total, Num<T>::from_int(a.ctx.input_shapes[0].num_elements()));
}

// Gradients, scaled by the loss's own gradient: d/dlogits = (softmax -
// onehot(label)) / rows; d/dpred = 2 (pred - target) / n = -d/dtarget.
void cross_entropy_grad(const GradArgs& a) {
  const Tensor<float>& x = *a.in[0];
  const int64_t classes = x.shape.back(), rows = x.numel() / classes;
  const ParallelTensorShape& global = a.ctx.input_shapes[0];
  const float scale = a.out_grad[0]->data[0] / static_cast<float>(global.num_elements() / global.dims.back().size);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data.data() + r * classes;
    float* d = a.in_grad[0].data.data() + r * classes;
    const float shift = *std::max_element(row, row + classes);
    float sum = 0.f;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(row[c] - shift);
    const auto label = static_cast<int64_t>(a.in[1]->data[static_cast<size_t>(r)]);
    for (int64_t c = 0; c < classes; ++c) d[c] += scale * (std::exp(row[c] - shift) / sum - (c == label ? 1.f : 0.f));
  }
}
void mse_grad(const GradArgs& a) {
  const auto &p = a.in[0]->data, &t = a.in[1]->data;
  const float scale = 2.f * a.out_grad[0]->data[0] / static_cast<float>(a.ctx.input_shapes[0].num_elements());
  for (size_t i = 0; i < p.size(); ++i) {
    a.in_grad[0].data[i] += scale * (p[i] - t[i]);
    a.in_grad[1].data[i] -= scale * (p[i] - t[i]);
  }
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  OpDef ce;
  ce.name = "SoftmaxCrossEntropy";
  ce.loss = LossKind::kClassification;
  ce.summary = "mean over samples of -log softmax(logits)[label]; logits[..., classes], labels[...]";
  ce.input_names = {"logits", "labels"};
  ce.min_inputs = ce.max_inputs = 2;
  ce.infer_types = [](const Attributes&, std::span<const TensorType> in) {
    require_min_rank(in[0], 1, "SoftmaxCrossEntropy logits");
    require_float(in[0], "SoftmaxCrossEntropy logits");
    PCGX_REQUIRE(in[1].dtype == DataType::kInt64, "labels must be int64");
    std::vector<int64_t> want(in[0].shape.begin(), in[0].shape.end() - 1);
    PCGX_REQUIRE(in[1].shape == want, "labels must have shape " + shape_str(want) + ", got " + shape_str(in[1].shape));
    return std::vector<TensorType>{{{}, DataType::kFloat32}};
  };
  ce.kinds = [](const Attributes&, std::span<const TensorType> in) {
    std::vector<ParallelKind> kinds;
    for (int d = 0; d + 1 < static_cast<int>(in[0].shape.size()); ++d)
      kinds.push_back({"batch" + std::to_string(d), {d, d}, {ParallelKind::kPartial}, 0});
    return kinds;
  };
  PCGX_KERNELS(ce, cross_entropy_k);
  ce.grad_f32 = &cross_entropy_grad;
  ce.backward_reads = reads(0b11, 0);
  ce.flops = [](const Attributes&, std::span<const TensorType> in, auto) { return 4.0 * static_cast<double>(product(in[0].shape)); };
  ce.smt = {{"softmax_cross_entropy", 2}};
  r.add(ce);

  OpDef mse;
  mse.name = "MSELoss";
  mse.loss = LossKind::kRegression;
  mse.summary = "mean of (pred - target)^2";
  mse.input_names = {"pred", "target"};
  mse.min_inputs = mse.max_inputs = 2;
  mse.infer_types = [](const Attributes&, std::span<const TensorType> in) {
    require_float(in[0], "MSELoss pred");
    require_same_shape(in[0], in[1], "MSELoss");
    return std::vector<TensorType>{{{}, DataType::kFloat32}};
  };
  mse.kinds = [](const Attributes&, std::span<const TensorType> in) {
    std::vector<ParallelKind> kinds;
    for (int d = 0; d < static_cast<int>(in[0].shape.size()); ++d)
      kinds.push_back({"dim" + std::to_string(d), {d, d}, {ParallelKind::kPartial}, 0});
    return kinds;
  };
  PCGX_KERNELS(mse, mse_k);
  mse.grad_f32 = &mse_grad;
  mse.backward_reads = reads(0b11, 0);
  mse.flops = [](const Attributes&, std::span<const TensorType> in, auto) { return 3.0 * static_cast<double>(product(in[0].shape)); };
  mse.smt = {{"mse_loss", 2}};
  r.add(mse);
}

}  // namespace pcgx::ops
