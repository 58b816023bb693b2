// Conv2D (grouped, optional bias and fused activation) and Pool2D (max/avg)
// in NCHW layout. Spatial splits would need halo exchange, which is not a
// local-shard computation, so only batch and channel dimensions are split.
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

int64_t out_extent(int64_t in, int64_t k, int64_t stride, int64_t pad) { return (in + 2 * pad - k) / stride + 1; }

// The forward loop into y_data (shape of output 0, zeroed) with activation `act`.
template <class T>
void conv_into(const KernelArgs<T>& a, Act act, T* y_data, std::span<const int64_t> y_shape) {
  const Tensor<T>& x = *a.in[0];
  const Tensor<T>& w = *a.in[1];
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.shape[0], Cg = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  const int64_t HO = y_shape[2], WO = y_shape[3];
  const int64_t sh = a.attrs.get_int("stride_h"), sw = a.attrs.get_int("stride_w");
  const int64_t ph = a.attrs.get_int("pad_h"), pw = a.attrs.get_int("pad_w");
  const int64_t groups = C / Cg, per_group = O / groups;
  const bool bias = a.attrs.get_bool("use_bias");
  // For kernel row ky, the output rows whose input row ih = oh * sh - ph + ky
  // lies in [0, H); for kernel column kx, likewise the output columns: the
  // same products as testing each, without a branch in the inner loops.
  auto valid = [](int64_t k, int64_t stride, int64_t pad, int64_t in, int64_t out) {
    const int64_t lo = std::max<int64_t>(0, (pad - k + stride - 1) / stride);
    const int64_t hi = in - 1 + pad - k < 0 ? 0 : std::min<int64_t>(out, (in - 1 + pad - k) / stride + 1);
    return std::pair{lo, std::max(lo, hi)};
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / per_group;
      T* out = y_data + (n * O + o) * HO * WO;
      for (int64_t ic = 0; ic < Cg; ++ic) {
        const T* in = x.data.data() + (n * C + g * Cg + ic) * H * W;
        const T* ker = w.data.data() + (o * Cg + ic) * KH * KW;
        for (int64_t ky = 0; ky < KH; ++ky) {
          const auto [oh_lo, oh_hi] = valid(ky, sh, ph, H, HO);  // computed here: a kernel allocates nothing
          for (int64_t kx = 0; kx < KW; ++kx) {
            const T kv = ker[ky * KW + kx];
            const auto [ow_lo, ow_hi] = valid(kx, sw, pw, W, WO);
            for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
              T* o_row = out + oh * WO;
              const int64_t base = (oh * sh - ph + ky) * W - pw + kx;
              if (sw == 1)
                for (int64_t ow = ow_lo; ow < ow_hi; ++ow) o_row[ow] += in[base + ow] * kv;
              else
                for (int64_t ow = ow_lo; ow < ow_hi; ++ow) o_row[ow] += in[base + ow * sw] * kv;
            }
          }
        }
      }
      if (bias)
        for (int64_t i = 0; i < HO * WO; ++i) out[i] += a.in[2]->data[static_cast<size_t>(o)];
      if (act != Act::kNone)
        for (int64_t i = 0; i < HO * WO; ++i) out[i] = activate(act, out[i]);
    }
}

template <class T>
void conv_k(const KernelArgs<T>& a) {
  conv_into(a, activation_kind(a.attrs.get_string("activation")), a.out[0].data.data(), a.out[0].shape);
}

template <class T>
void pool_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  Tensor<T>& y = a.out[0];
  const int64_t NC = x.shape[0] * x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t HO = y.shape[2], WO = y.shape[3];
  const int64_t KH = a.attrs.get_int("kernel_h"), KW = a.attrs.get_int("kernel_w");
  const int64_t sh = a.attrs.get_int("stride_h") ? a.attrs.get_int("stride_h") : KH;
  const int64_t sw = a.attrs.get_int("stride_w") ? a.attrs.get_int("stride_w") : KW;
  const int64_t ph = a.attrs.get_int("pad_h"), pw = a.attrs.get_int("pad_w");
  const bool is_max = a.attrs.get_string("mode") == "max";
  const T inv_area = Num<T>::div(Num<T>::one(), Num<T>::from_int(KH * KW));
  for (int64_t c = 0; c < NC; ++c) {
    const T* in = x.data.data() + c * H * W;
    T* out = y.data.data() + c * HO * WO;
    for (int64_t oh = 0; oh < HO; ++oh)
      for (int64_t ow = 0; ow < WO; ++ow) {
        T acc = is_max ? Num<T>::max_init() : Num<T>::zero();
        for (int64_t ky = 0; ky < KH; ++ky) {
          const int64_t ih = oh * sh - ph + ky;
          if (ih < 0 || ih >= H) continue;
          for (int64_t kx = 0; kx < KW; ++kx) {
            const int64_t iw = ow * sw - pw + kx;
            if (iw < 0 || iw >= W) continue;
            acc = is_max ? Num<T>::max_step(acc, in[ih * W + iw]) : acc + in[ih * W + iw];
          }
        }
        out[oh * WO + ow] = is_max ? acc : acc * inv_area;
      }
  }
}

// Gradients. Conv2D: with dz = dy * act'(z), every product
// out += in * ker of the forward loop adds dz * ker to din and dz * in to
// dker; dbias is the sum of dz.
void conv_grad(const GradArgs& a) {
  const Tensor<float>& x = *a.in[0];
  const Tensor<float>& w = *a.in[1];
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.shape[0], Cg = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  const int64_t HO = a.out[0]->shape[2], WO = a.out[0]->shape[3];
  const int64_t sh = a.attrs.get_int("stride_h"), sw = a.attrs.get_int("stride_w");
  const int64_t ph = a.attrs.get_int("pad_h"), pw = a.attrs.get_int("pad_w");
  const int64_t per_group = O / (C / Cg);
  const bool bias = a.attrs.get_bool("use_bias");
  const Act act = activation_kind(a.attrs.get_string("activation"));
  const float* dz = a.out_grad[0]->data.data();
  if (act != Act::kNone) {
    const size_t size = a.out_grad[0]->data.size();  // the output's, which may be freed (gelu)
    float* z = nullptr;
    if (derivative_needs_input(act)) {  // gelu: recompute z with the forward loop, minus the activation
      z = scratch_floats(ScratchSlot::kB, size);
      std::fill(z, z + size, 0.f);
      conv_into(KernelArgs<float>{a.attrs, a.in, {}, a.ctx}, Act::kNone, z, a.out[0]->shape);
    }
    float* d = scratch_floats(ScratchSlot::kA, size);
    vec::activation_backward(act, z, a.out[0]->data.data(), dz, d, size);
    dz = d;
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / per_group;
      const float* d = dz + (n * O + o) * HO * WO;
      for (int64_t ic = 0; ic < Cg; ++ic) {
        const size_t in_base = static_cast<size_t>((n * C + g * Cg + ic) * H * W);
        const float* in = x.data.data() + in_base;
        float* din = a.in_grad[0].data.data() + in_base;
        const float* ker = w.data.data() + (o * Cg + ic) * KH * KW;
        float* dker = a.in_grad[1].data.data() + (o * Cg + ic) * KH * KW;
        for (int64_t ky = 0; ky < KH; ++ky)
          for (int64_t kx = 0; kx < KW; ++kx) {
            const float kv = ker[ky * KW + kx];
            float acc = 0.f;
            for (int64_t oh = 0; oh < HO; ++oh) {
              const int64_t ih = oh * sh - ph + ky;
              if (ih < 0 || ih >= H) continue;
              for (int64_t ow = 0; ow < WO; ++ow) {
                const int64_t iw = ow * sw - pw + kx;
                if (iw < 0 || iw >= W) continue;
                din[ih * W + iw] += d[oh * WO + ow] * kv;
                acc += d[oh * WO + ow] * in[ih * W + iw];
              }
            }
            dker[ky * KW + kx] += acc;
          }
      }
      if (bias)
        for (int64_t i = 0; i < HO * WO; ++i) a.in_grad[2].data[static_cast<size_t>(o)] += d[i];
    }
}

// Pool2D: max sends each window's gradient to its (first) largest input,
// average spreads it evenly over the window (padding counts as area, as
// in the forward pass).
void pool_grad(const GradArgs& a) {
  const Tensor<float>& x = *a.in[0];
  const int64_t NC = x.shape[0] * x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t HO = a.out[0]->shape[2], WO = a.out[0]->shape[3];
  const int64_t KH = a.attrs.get_int("kernel_h"), KW = a.attrs.get_int("kernel_w");
  const int64_t sh = a.attrs.get_int("stride_h") ? a.attrs.get_int("stride_h") : KH;
  const int64_t sw = a.attrs.get_int("stride_w") ? a.attrs.get_int("stride_w") : KW;
  const int64_t ph = a.attrs.get_int("pad_h"), pw = a.attrs.get_int("pad_w");
  const bool is_max = a.attrs.get_string("mode") == "max";
  const float inv_area = 1.f / static_cast<float>(KH * KW);
  for (int64_t c = 0; c < NC; ++c) {
    const float* in = x.data.data() + c * H * W;
    float* din = a.in_grad[0].data.data() + c * H * W;
    const float* dy = a.out_grad[0]->data.data() + c * HO * WO;
    for (int64_t oh = 0; oh < HO; ++oh)
      for (int64_t ow = 0; ow < WO; ++ow) {
        int64_t arg = -1;
        for (int64_t ky = 0; ky < KH; ++ky) {
          const int64_t ih = oh * sh - ph + ky;
          if (ih < 0 || ih >= H) continue;
          for (int64_t kx = 0; kx < KW; ++kx) {
            const int64_t iw = ow * sw - pw + kx;
            if (iw < 0 || iw >= W) continue;
            if (!is_max) din[ih * W + iw] += dy[oh * WO + ow] * inv_area;
            else if (arg < 0 || in[ih * W + iw] > in[arg]) arg = ih * W + iw;
          }
        }
        if (is_max && arg >= 0) din[arg] += dy[oh * WO + ow];
      }
  }
}

}  // namespace

void register_conv_ops(OpRegistry& r) {
  OpDef conv;
  conv.name = "Conv2D";
  conv.summary = "2-D convolution, NCHW, W[out, in/groups, kh, kw]";
  conv.attrs = {int_attr("stride_h", 1, "vertical stride", positive_int()),
                int_attr("stride_w", 1, "horizontal stride", positive_int()),
                int_attr("pad_h", 0, "zero padding top and bottom", non_negative_int()),
                int_attr("pad_w", 0, "zero padding left and right", non_negative_int()),
                int_attr("groups", 1, "channel groups", positive_int()),
                bool_attr("use_bias", false, "add a bias input"),
                activation_attr()};
  conv.input_names = {"x", "W", "bias"};
  conv.min_inputs = 2;
  conv.max_inputs = 3;
  conv.arity = [](const Attributes& a) { return a.get_bool("use_bias") ? 3 : 2; };
  conv.infer_types = [](const Attributes& a, std::span<const TensorType> in) {
    require_rank(in[0], 4, "Conv2D input x");
    require_float(in[0], "Conv2D input x");
    require_rank(in[1], 4, "Conv2D weight W");
    const int64_t C = in[0].shape[1], O = in[1].shape[0], g = a.get_int("groups");
    PCGX_REQUIRE(C % g == 0 && O % g == 0, "groups " + std::to_string(g) + " must divide input channels " +
                                          std::to_string(C) + " and output channels " + std::to_string(O));
    PCGX_REQUIRE(in[1].shape[1] == C / g, "W must have " + std::to_string(C / g) + " input channels per group, got " +
                                         std::to_string(in[1].shape[1]));
    if (a.get_bool("use_bias"))
      PCGX_REQUIRE(in[2].shape == std::vector<int64_t>{O}, "bias must have shape [" + std::to_string(O) + "]");
    const int64_t ho = out_extent(in[0].shape[2], in[1].shape[2], a.get_int("stride_h"), a.get_int("pad_h"));
    const int64_t wo = out_extent(in[0].shape[3], in[1].shape[3], a.get_int("stride_w"), a.get_int("pad_w"));
    PCGX_REQUIRE(ho > 0 && wo > 0, "kernel larger than the padded input " + shape_str(in[0].shape));
    return std::vector<TensorType>{{{in[0].shape[0], O, ho, wo}, DataType::kFloat32}};
  };
  conv.kinds = [](const Attributes& a, std::span<const TensorType>) {
    const bool bias = a.get_bool("use_bias");
    auto b = [&](std::vector<int> v, int x) {
      if (bias) v.push_back(x);
      return v;
    };
    std::vector<ParallelKind> kinds{{"batch", b({0, kCopy}, kCopy), {0}, 0}};
    const int64_t groups = a.get_int("groups");
    if (groups == 1) {
      kinds.push_back({"out", b({kCopy, 0}, 0), {1}, 0});
      if (a.get_string("activation") == "none") kinds.push_back({"reduce", b({1, 1}, kSum), {kPartial}, 0});
    } else {
      kinds.push_back({"group", b({1, 0}, 0), {1}, groups});
    }
    return kinds;
  };
  PCGX_KERNELS(conv, conv_k);
  conv.operand_products = true;
  conv.grad_f32 = &conv_grad;
  conv.backward_reads = &fused_activation_reads;
  conv.flops = [](const Attributes&, std::span<const TensorType> in, std::span<const TensorType> out) {
    const auto& w = in[1].shape;
    return 2.0 * static_cast<double>(product(out[0].shape)) * static_cast<double>(w[1] * w[2] * w[3]);
  };
  conv.smt = {{"conv2d", 2, {"stride_h", "stride_w", "pad_h", "pad_w", "groups", "activation"}, 0, {{"use_bias", false}}}};
  conv.pool_inputs = {PoolInput::kConvKernels};
  r.add(conv);

  OpDef pool;
  pool.name = "Pool2D";
  pool.summary = "max or average pooling, NCHW";
  pool.attrs = {int_attr("kernel_h", std::nullopt, "window height", positive_int()),
                int_attr("kernel_w", std::nullopt, "window width", positive_int()),
                int_attr("stride_h", 0, "vertical stride (0: the window height)", non_negative_int()),
                int_attr("stride_w", 0, "horizontal stride (0: the window width)", non_negative_int()),
                int_attr("pad_h", 0, "padding top and bottom", non_negative_int()),
                int_attr("pad_w", 0, "padding left and right", non_negative_int()),
                string_attr("mode", "max", {"max", "avg"}, "pooling function")};
  pool.input_names = {"x"};
  pool.min_inputs = pool.max_inputs = 1;
  pool.infer_types = [](const Attributes& a, std::span<const TensorType> in) {
    require_rank(in[0], 4, "Pool2D input x");
    require_float(in[0], "Pool2D input x");
    const int64_t kh = a.get_int("kernel_h"), kw = a.get_int("kernel_w");
    const int64_t sh = a.get_int("stride_h") ? a.get_int("stride_h") : kh;
    const int64_t sw = a.get_int("stride_w") ? a.get_int("stride_w") : kw;
    const int64_t ho = out_extent(in[0].shape[2], kh, sh, a.get_int("pad_h"));
    const int64_t wo = out_extent(in[0].shape[3], kw, sw, a.get_int("pad_w"));
    PCGX_REQUIRE(ho > 0 && wo > 0, "window larger than the padded input " + shape_str(in[0].shape));
    return std::vector<TensorType>{{{in[0].shape[0], in[0].shape[1], ho, wo}, DataType::kFloat32}};
  };
  pool.kinds = [](const Attributes&, std::span<const TensorType>) {
    return std::vector<ParallelKind>{{"batch", {0}, {0}, 0}, {"channel", {1}, {1}, 0}};
  };
  PCGX_KERNELS(pool, pool_k);
  pool.grad_f32 = &pool_grad;
  // max: each window's largest input; avg: nothing but shapes
  pool.backward_reads = [](const Attributes& a) { return BackwardReads{a.get_string("mode") == "max" ? 1u : 0u, 0}; };
  pool.flops = [](const Attributes& a, std::span<const TensorType>, std::span<const TensorType> out) {
    return static_cast<double>(product(out[0].shape) * a.get_int("kernel_h") * a.get_int("kernel_w"));
  };
  pool.smt = {{"pool2d", 1, {"kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w", "mode"}}};
  r.add(pool);
}

}  // namespace pcgx::ops
