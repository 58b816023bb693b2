// Losses: SoftmaxCrossEntropy and MSELoss, both the mean over samples as a
// rank-0 tensor. Split along batch dimensions, each task returns its share of
// the mean: partial sums to be reduced.
//
// The cross-entropy split by classes (Megatron-LM's vocabulary-parallel
// cross-entropy), exactly, in two parts like BatchNorm's statistics:
//
//   SoftmaxCrossEntropy(x, l) = CrossEntropyApply(x, l, ClassLogSumExp(x, B))
//
// ClassLogSumExp takes the log-sum-exp of each of B blocks of consecutive
// classes ([..., C] -> [..., B]); split by classes (a degree dividing B),
// each task takes its own blocks. CrossEntropyApply is the mean over rows
// of the log-sum-exp of the B block values less the label's logit; split by
// classes, with the B values copied to every task, each task picks the
// labels that fall in its classes and the task holding the first classes
// adds the normalizer: partial sums, reduced. So the logits never leave
// their devices: what crosses is B numbers per row (all-gathered) and the
// loss (Megatron-LM all-reduces a row's maximum, its sum of exponentials and
// its label's logit instead: three numbers per row).
//
// Exact surrogates (numeric.h): a block's value is held as the exponential
// of the real one, the sum of its classes' exp(x) with no log taken, and
// CrossEntropyApply takes the log of the sum of its B values; so the
// identity above holds in both number systems, as SoftmaxCrossEntropy's
// own surrogate is log(sum exp(x)) less the label's logit.
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

// out[..., j] = log sum exp(x[..., c]) over the classes c of block j (the
// block's largest logit shifted out, as SoftmaxCrossEntropy does).
template <class T>
void class_logsumexp_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  Tensor<T>& y = a.out[0];
  const int64_t classes = x.shape.back(), rows = x.numel() / classes, blocks = y.shape.back();
  const int64_t width = classes / blocks;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < blocks; ++j) {
      const T* block = x.data.data() + r * classes + j * width;
      T sum = Num<T>::zero(), value;
      if constexpr (std::is_same_v<T, float>) {
        const float shift = *std::max_element(block, block + width);
        for (int64_t c = 0; c < width; ++c) sum += std::exp(block[c] - shift);
        value = std::log(sum) + shift;
      } else {
        for (int64_t c = 0; c < width; ++c) sum += Num<T>::exp(block[c]);
        value = sum;
      }
      y.data[static_cast<size_t>(r * blocks + j)] = value;
    }
}

// The normalizer of a row from its blocks' values: log sum exp(lse_j).
inline float row_normalizer(const float* lse, int64_t blocks) {
  const float shift = *std::max_element(lse, lse + blocks);
  float sum = 0.f;
  for (int64_t j = 0; j < blocks; ++j) sum += std::exp(lse[j] - shift);
  return std::log(sum) + shift;
}

// This task's share of the mean: the normalizer where it holds the first
// classes, less the logits of the labels in its classes.
template <class T>
void cross_entropy_apply_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  const Tensor<T>& labels = *a.in[1];
  const Tensor<T>& lse = *a.in[2];
  const int64_t classes = x.shape.back(), rows = x.numel() / classes, blocks = lse.shape.back();
  const ParallelTensorShape& global = a.ctx.input_shapes[0];
  const int64_t global_rows = global.num_elements() / global.dims.back().size;
  const int64_t first = a.ctx.input_offsets[0].back();
  T total = Num<T>::zero();
  for (int64_t r = 0; r < rows; ++r) {
    if (first == 0) {
      const T* v = lse.data.data() + r * blocks;
      if constexpr (std::is_same_v<T, float>) {
        total += row_normalizer(v, blocks);
      } else {
        T sum = Num<T>::zero();
        for (int64_t j = 0; j < blocks; ++j) sum += v[j];
        total += Num<T>::log(sum);
      }
    }
    const int64_t label = Num<T>::index(labels.data[static_cast<size_t>(r)]) - first;
    if (label >= 0 && label < classes) total -= x.data[static_cast<size_t>(r * classes + label)];
  }
  a.out[0].data[0] = Num<T>::div(total, Num<T>::from_int(global_rows));
}

// d/dx = g exp(x - out_j) within block j: the block's softmax times its
// value's gradient.
void class_logsumexp_grad(const GradArgs& a) {
  const Tensor<float>& x = *a.in[0];
  const Tensor<float>& y = *a.out[0];
  const Tensor<float>& g = *a.out_grad[0];
  const int64_t classes = x.shape.back(), rows = x.numel() / classes, blocks = y.shape.back();
  const int64_t width = classes / blocks;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < blocks; ++j) {
      const size_t at = static_cast<size_t>(r * blocks + j);
      const float* xb = x.data.data() + r * classes + j * width;
      float* d = a.in_grad[0].data.data() + r * classes + j * width;
      for (int64_t c = 0; c < width; ++c) d[c] += g.data[at] * std::exp(xb[c] - y.data[at]);
    }
}

// d/dx = -1/rows at each label in this task's classes; d/dlse_j =
// softmax_j(lse) / rows on the task adding the normalizer. Reads the labels
// and the block values, not the logits.
void cross_entropy_apply_grad(const GradArgs& a) {
  const Tensor<float>& lse = *a.in[2];
  const int64_t classes = a.in_grad[0].shape.back(), rows = a.in_grad[0].numel() / classes, blocks = lse.shape.back();
  const ParallelTensorShape& global = a.ctx.input_shapes[0];
  const float scale = a.out_grad[0]->data[0] / static_cast<float>(global.num_elements() / global.dims.back().size);
  const int64_t first = a.ctx.input_offsets[0].back();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t label = static_cast<int64_t>(a.in[1]->data[static_cast<size_t>(r)]) - first;
    if (label >= 0 && label < classes) a.in_grad[0].data[static_cast<size_t>(r * classes + label)] -= scale;
    if (first != 0) continue;
    const float* v = lse.data.data() + r * blocks;
    const float norm = row_normalizer(v, blocks);
    float* d = a.in_grad[2].data.data() + r * blocks;
    for (int64_t j = 0; j < blocks; ++j) d[j] += scale * std::exp(v[j] - norm);
  }
}

// A classification loss's first two inputs: float logits [..., classes] and
// int64 labels [...]; the labels' shape.
std::vector<int64_t> require_logits_and_labels(std::span<const TensorType> in, const std::string& op) {
  require_min_rank(in[0], 1, op + " logits");
  require_float(in[0], op + " logits");
  PCGX_REQUIRE(in[1].dtype == DataType::kInt64, "labels must be int64");
  std::vector<int64_t> want(in[0].shape.begin(), in[0].shape.end() - 1);
  PCGX_REQUIRE(in[1].shape == want, "labels must have shape " + shape_str(want) + ", got " + shape_str(in[1].shape));
  return want;
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  OpDef ce;
  ce.name = "SoftmaxCrossEntropy";
  ce.loss = LossKind::kClassification;
  ce.cross_entropy = CrossEntropyPart::kSoftmax;
  ce.summary = "mean over samples of -log softmax(logits)[label]; logits[..., classes], labels[...]";
  ce.input_names = {"logits", "labels"};
  ce.min_inputs = ce.max_inputs = 2;
  ce.infer_types = [](const Attributes&, std::span<const TensorType> in) {
    require_logits_and_labels(in, "SoftmaxCrossEntropy");
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

  OpDef lse;
  lse.name = "ClassLogSumExp";
  lse.loss_part = true;
  lse.cross_entropy = CrossEntropyPart::kSoftmax;
  lse.summary = "log sum exp of each of `blocks` blocks of consecutive classes: x[..., classes] -> [..., blocks]";
  lse.attrs = {int_attr("blocks", 1, "blocks of consecutive classes (dividing the classes)",
                        [](const AttrValue& v) -> std::optional<std::string> {
                          if (std::get<int64_t>(v) < 1) return "must be at least 1";
                          return std::nullopt;
                        })};
  lse.input_names = {"logits"};
  lse.min_inputs = lse.max_inputs = 1;
  lse.infer_types = [](const Attributes& a, std::span<const TensorType> in) {
    require_min_rank(in[0], 1, "ClassLogSumExp logits");
    require_float(in[0], "ClassLogSumExp logits");
    const int64_t blocks = a.get_int("blocks"), classes = in[0].shape.back();
    PCGX_REQUIRE(classes % blocks == 0, "ClassLogSumExp: " + std::to_string(blocks) + " blocks do not divide " +
                                            std::to_string(classes) + " classes");
    std::vector<int64_t> out = in[0].shape;
    out.back() = blocks;
    return std::vector<TensorType>{{out, DataType::kFloat32}};
  };
  lse.kinds = [](const Attributes&, std::span<const TensorType> in) {
    const int last = static_cast<int>(in[0].shape.size()) - 1;
    std::vector<ParallelKind> kinds;
    for (int d = 0; d < last; ++d) kinds.push_back({"batch" + std::to_string(d), {d}, {d}, 0});
    kinds.push_back({"classes", {last}, {last}, 0});
    return kinds;
  };
  PCGX_KERNELS(lse, class_logsumexp_k);
  lse.grad_f32 = &class_logsumexp_grad;
  lse.backward_reads = reads(0b1, 0b1);
  lse.flops = [](const Attributes&, std::span<const TensorType> in, auto) { return 3.0 * static_cast<double>(product(in[0].shape)); };
  lse.smt = {{"class_logsumexp", 1, {"blocks"}}};
  r.add(lse);

  OpDef apply;
  apply.name = "CrossEntropyApply";
  apply.loss = LossKind::kClassification;
  apply.cross_entropy = CrossEntropyPart::kPick;
  apply.summary = "SoftmaxCrossEntropy from its blocks' log-sum-exp (ClassLogSumExp): mean over samples of "
                  "log sum exp(lse) - logits[label]; logits[..., classes], labels[...], lse[..., blocks]";
  apply.input_names = {"logits", "labels", "lse"};
  apply.min_inputs = apply.max_inputs = 3;
  apply.infer_types = [](const Attributes&, std::span<const TensorType> in) {
    const std::vector<int64_t> want = require_logits_and_labels(in, "CrossEntropyApply");
    require_float(in[2], "CrossEntropyApply lse");
    PCGX_REQUIRE(in[2].shape.size() == in[0].shape.size() &&
                     std::equal(want.begin(), want.end(), in[2].shape.begin()) && in[0].shape.back() % in[2].shape.back() == 0,
                 "CrossEntropyApply lse must have shape " + shape_str(want) + " and a block count dividing " +
                     std::to_string(in[0].shape.back()) + " classes, got " + shape_str(in[2].shape));
    return std::vector<TensorType>{{{}, DataType::kFloat32}};
  };
  apply.kinds = [](const Attributes&, std::span<const TensorType> in) {
    const int last = static_cast<int>(in[0].shape.size()) - 1;
    std::vector<ParallelKind> kinds;
    for (int d = 0; d < last; ++d) kinds.push_back({"batch" + std::to_string(d), {d, d, d}, {ParallelKind::kPartial}, 0});
    kinds.push_back({"classes", {last, ParallelKind::kCopy, ParallelKind::kCopy}, {ParallelKind::kPartial}, 0});
    return kinds;
  };
  PCGX_KERNELS(apply, cross_entropy_apply_k);
  apply.grad_f32 = &cross_entropy_apply_grad;
  apply.backward_reads = reads(0b110, 0);  // the labels and the blocks' values
  apply.flops = [](const Attributes&, std::span<const TensorType> in, auto) {
    return 3.0 * static_cast<double>(product(in[2].shape)) + 2.0 * static_cast<double>(product(in[1].shape));
  };
  apply.smt = {{"cross_entropy_apply", 3}};
  r.add(apply);

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
