// Linear (x * W + bias, optional fused activation), MatMul and BatchMatMul.
// Their parallel kinds are data (batch dims), model (output columns) and
// reduction (the contraction dimension, output as partial sums).
#include "gemm.h"
#include "pcgx/pcg/kernel_threads.h"
#include "pcgx/pcg/ops/numeric.h"
#include "op_families.h"
#include "pcgx/pcg/ops/op_helpers.h"
#include "scratch.h"
#include "vector_math.h"

namespace pcgx::ops {
namespace {

constexpr int kCopy = ParallelKind::kCopy;
constexpr int kSum = ParallelKind::kSum;
constexpr int kPartial = ParallelKind::kPartial;

template <class T>
void linear_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  const Tensor<T>& w = *a.in[1];
  Tensor<T>& y = a.out[0];
  const int64_t k = w.shape[0], n = w.shape[1], m = x.numel() / k;
  // Outputs come zeroed (KernelArgs), so the products accumulate into them.
  gemm(x.data.data(), w.data.data(), y.data.data(), m, k, n, true);
  const bool bias = a.attrs.get_bool("use_bias");
  const Act act = activation_kind(a.attrs.get_string("activation"));
  if constexpr (std::is_same_v<T, float>) {
    if (bias) vec::add_bias(y.data.data(), a.in[2]->data.data(), m, n);
    vec::activate(act, y.data.data(), y.data.size());
  } else {
    if (bias) {
      const auto& b = a.in[2]->data;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) y.data[static_cast<size_t>(i * n + j)] += b[static_cast<size_t>(j)];
    }
    if (act != Act::kNone)
      for (auto& v : y.data) v = activate(act, v);
  }
}

template <class T>
void matmul_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  const Tensor<T>& w = *a.in[1];
  const int64_t k = w.shape[0], n = w.shape[1], m = x.numel() / k;
  gemm(x.data.data(), w.data.data(), a.out[0].data.data(), m, k, n, true);
}

template <class T>
void batch_matmul_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  const Tensor<T>& w = *a.in[1];
  const int r = x.rank();
  const int64_t m = x.shape[static_cast<size_t>(r - 2)], k = x.shape[static_cast<size_t>(r - 1)],
                n = w.shape[static_cast<size_t>(r - 1)];
  const int64_t batches = x.numel() / (m * k);
  // One product per batch item, the items shared by the kernel threads.
  parallel_pieces(batches, [&](int64_t b) {
    gemm(x.data.data() + b * m * k, w.data.data() + b * k * n, a.out[0].data.data() + b * m * n, m, k, n, true);
  });
}

// Gradients. With z = x W + b and y = act(z): dz = dy * act'(z),
// dx = dz W^T, dW = x^T dz, db = column sums of dz.
void linear_grad(const GradArgs& a) {
  const Tensor<float>& x = *a.in[0];
  const Tensor<float>& w = *a.in[1];
  const Tensor<float>& y = *a.out[0];
  const int64_t k = w.shape[0], n = w.shape[1], m = x.numel() / k;
  const Act act = activation_kind(a.attrs.get_string("activation"));
  const bool bias = a.attrs.get_bool("use_bias");
  const auto size = static_cast<size_t>(m * n);
  const float* dz = a.out_grad[0]->data.data();
  if (act != Act::kNone) {
    float* z = nullptr;
    if (derivative_needs_input(act)) {  // gelu: recompute z = x W + b
      z = scratch_floats(ScratchSlot::kB, size);
      gemm(x.data.data(), w.data.data(), z, m, k, n, false);
      if (bias) vec::add_bias(z, a.in[2]->data.data(), m, n);
    }
    float* d = scratch_floats(ScratchSlot::kA, size);
    vec::activation_backward(act, z, y.data.data(), dz, d, size);
    dz = d;
  }
  gemm_add(dz, false, w.data.data(), true, a.in_grad[0].data.data(), m, n, k);
  gemm_add(x.data.data(), true, dz, false, a.in_grad[1].data.data(), k, m, n);
  if (bias) vec::add_column_sums(dz, m, n, a.in_grad[2].data.data());
}

void matmul_grad(const GradArgs& a) {
  const Tensor<float>& x = *a.in[0];
  const Tensor<float>& w = *a.in[1];
  const float* dy = a.out_grad[0]->data.data();
  const int64_t k = w.shape[0], n = w.shape[1], m = x.numel() / k;
  gemm_add(dy, false, w.data.data(), true, a.in_grad[0].data.data(), m, n, k);
  gemm_add(x.data.data(), true, dy, false, a.in_grad[1].data.data(), k, m, n);
}

void batch_matmul_grad(const GradArgs& a) {
  const Tensor<float>& x = *a.in[0];
  const Tensor<float>& w = *a.in[1];
  const int r = x.rank();
  const int64_t m = x.shape[static_cast<size_t>(r - 2)], k = x.shape[static_cast<size_t>(r - 1)],
                n = w.shape[static_cast<size_t>(r - 1)];
  const int64_t batches = x.numel() / (m * k);
  const float* dy = a.out_grad[0]->data.data();
  parallel_pieces(batches, [&](int64_t b) {
    gemm_add(dy + b * m * n, false, w.data.data() + b * k * n, true, a.in_grad[0].data.data() + b * m * k, m, n, k);
    gemm_add(x.data.data() + b * m * k, true, dy + b * m * n, false, a.in_grad[1].data.data() + b * k * n, k, m, n);
  });
}

double gemm_flops(std::span<const TensorType> in, std::span<const TensorType> out, int contraction_input, int dim) {
  return 2.0 * static_cast<double>(product(out[0].shape)) *
         static_cast<double>(in[static_cast<size_t>(contraction_input)].shape[static_cast<size_t>(dim)]);
}

}  // namespace

void register_linear_ops(OpRegistry& r) {
  OpDef lin;
  lin.name = "Linear";
  lin.summary = "y = act(x W + bias) with x[..., in], W[in, out], bias[out]";
  lin.attrs = {activation_attr(), bool_attr("use_bias", false, "add a bias input")};
  lin.input_names = {"x", "W", "bias"};
  lin.min_inputs = 2;
  lin.max_inputs = 3;
  lin.arity = [](const Attributes& a) { return a.get_bool("use_bias") ? 3 : 2; };
  lin.infer_types = [](const Attributes& a, std::span<const TensorType> in) {
    require_min_rank(in[0], 1, "Linear input x");
    require_float(in[0], "Linear input x");
    require_rank(in[1], 2, "Linear weight W");
    PCGX_REQUIRE(in[0].shape.back() == in[1].shape[0],
            "x's last dimension (" + std::to_string(in[0].shape.back()) + ") does not match W's rows (" +
                std::to_string(in[1].shape[0]) + ")");
    if (a.get_bool("use_bias")) {
      PCGX_REQUIRE(in[2].shape == std::vector<int64_t>{in[1].shape[1]},
              "bias must have shape [" + std::to_string(in[1].shape[1]) + "], got " + shape_str(in[2].shape));
    }
    TensorType out = in[0];
    out.shape.back() = in[1].shape[1];
    return std::vector<TensorType>{out};
  };
  lin.kinds = [](const Attributes& a, std::span<const TensorType> in) {
    const bool bias = a.get_bool("use_bias");
    const int rank = static_cast<int>(in[0].shape.size());
    auto with_bias = [&](std::vector<int> v, int b) {
      if (bias) v.push_back(b);
      return v;
    };
    std::vector<ParallelKind> kinds;
    for (int d = 0; d + 1 < rank; ++d)
      kinds.push_back({"batch" + std::to_string(d), with_bias({d, kCopy}, kCopy), {d}, 0});
    kinds.push_back({"out", with_bias({kCopy, 1}, 0), {rank - 1}, 0});
    if (a.get_string("activation") == "none") kinds.push_back({"reduce", with_bias({rank - 1, 0}, kSum), {kPartial}, 0});
    return kinds;
  };
  PCGX_KERNELS(lin, linear_k);
  lin.operand_products = true;
  lin.grad_f32 = &linear_grad;
  lin.backward_reads = &fused_activation_reads;
  lin.flops = [](const Attributes& a, std::span<const TensorType> in, std::span<const TensorType> out) {
    double f = gemm_flops(in, out, 1, 0);
    const double n = static_cast<double>(product(out[0].shape));
    if (a.get_bool("use_bias")) f += n;
    if (a.get_string("activation") != "none") f += n;
    return f;
  };
  lin.smt = {{"linear", 2, {"activation"}, 0, {{"use_bias", false}}}, {"linear_bias", 3, {"activation"}, 0, {{"use_bias", true}}}};
  lin.any_rank = true;
  r.add(lin);

  OpDef mm;
  mm.name = "MatMul";
  mm.summary = "A[..., m, k] * B[k, n]";
  mm.input_names = {"A", "B"};
  mm.min_inputs = mm.max_inputs = 2;
  mm.infer_types = [](const Attributes&, std::span<const TensorType> in) {
    require_min_rank(in[0], 2, "MatMul input A");
    require_float(in[0], "MatMul input A");
    require_rank(in[1], 2, "MatMul input B");
    PCGX_REQUIRE(in[0].shape.back() == in[1].shape[0], "inner dimensions differ: " + shape_str(in[0].shape) + " * " +
                                                      shape_str(in[1].shape));
    TensorType out = in[0];
    out.shape.back() = in[1].shape[1];
    return std::vector<TensorType>{out};
  };
  mm.kinds = [](const Attributes&, std::span<const TensorType> in) {
    const int rank = static_cast<int>(in[0].shape.size());
    std::vector<ParallelKind> kinds;
    for (int d = 0; d + 1 < rank; ++d) kinds.push_back({d + 2 == rank ? "m" : "batch" + std::to_string(d), {d, kCopy}, {d}, 0});
    kinds.push_back({"n", {kCopy, 1}, {rank - 1}, 0});
    kinds.push_back({"reduce", {rank - 1, 0}, {kPartial}, 0});
    return kinds;
  };
  PCGX_KERNELS(mm, matmul_k);
  mm.operand_products = true;
  mm.grad_f32 = &matmul_grad;
  mm.backward_reads = reads(0b11, 0);
  mm.flops = [](const Attributes&, std::span<const TensorType> in, std::span<const TensorType> out) {
    return gemm_flops(in, out, 1, 0);
  };
  mm.smt = {{"matmul", 2}};
  r.add(mm);

  OpDef bmm;
  bmm.name = "BatchMatMul";
  bmm.summary = "A[b..., m, k] * B[b..., k, n], one product per batch index";
  bmm.input_names = {"A", "B"};
  bmm.min_inputs = bmm.max_inputs = 2;
  bmm.infer_types = [](const Attributes&, std::span<const TensorType> in) {
    require_min_rank(in[0], 3, "BatchMatMul input A");
    require_float(in[0], "BatchMatMul input A");
    PCGX_REQUIRE(in[1].shape.size() == in[0].shape.size(), "inputs must have the same rank: " + shape_str(in[0].shape) +
                                                          " * " + shape_str(in[1].shape));
    const size_t rank = in[0].shape.size();
    for (size_t d = 0; d + 2 < rank; ++d)
      PCGX_REQUIRE(in[0].shape[d] == in[1].shape[d], "batch dimensions differ: " + shape_str(in[0].shape) + " * " +
                                                    shape_str(in[1].shape));
    PCGX_REQUIRE(in[0].shape[rank - 1] == in[1].shape[rank - 2],
            "inner dimensions differ: " + shape_str(in[0].shape) + " * " + shape_str(in[1].shape));
    TensorType out = in[0];
    out.shape[rank - 1] = in[1].shape[rank - 1];
    return std::vector<TensorType>{out};
  };
  bmm.kinds = [](const Attributes&, std::span<const TensorType> in) {
    const int rank = static_cast<int>(in[0].shape.size());
    std::vector<ParallelKind> kinds;
    for (int d = 0; d + 2 < rank; ++d) kinds.push_back({"batch" + std::to_string(d), {d, d}, {d}, 0});
    kinds.push_back({"m", {rank - 2, kCopy}, {rank - 2}, 0});
    kinds.push_back({"n", {kCopy, rank - 1}, {rank - 1}, 0});
    kinds.push_back({"reduce", {rank - 1, rank - 2}, {kPartial}, 0});
    return kinds;
  };
  PCGX_KERNELS(bmm, batch_matmul_k);
  bmm.operand_products = true;
  bmm.grad_f32 = &batch_matmul_grad;
  bmm.backward_reads = reads(0b11, 0);
  bmm.flops = [](const Attributes&, std::span<const TensorType> in, std::span<const TensorType> out) {
    return gemm_flops(in, out, 0, static_cast<int>(in[0].shape.size()) - 1);
  };
  bmm.smt = {{"batch_matmul", 2}};
  r.add(bmm);
}

}  // namespace pcgx::ops
