// CudaBackend::forward: each operator on its kernels (cuda_backend.h).
#include "backend_state.h"
#include "op_kinds.h"

namespace pcgx::runtime::cuda {

void CudaBackend::forward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in, std::span<const Buffer* const> out) {
  State& s = *s_;
  const Kind k = kind_of(*n.op);
  float* y = out[0]->data;
  switch (k) {
    case Kind::kEwAdd: return ew_add(in[0]->data, in[1]->data, y, out[0]->numel, s.stream);
    case Kind::kEwMul: return ew_mul(in[0]->data, in[1]->data, y, out[0]->numel, s.stream);
    case Kind::kScalarMul:
      return scale(in[0]->data, static_cast<float>(n.attrs.get_float("scalar")), y, out[0]->numel, s.stream);
    case Kind::kRelu:
    case Kind::kGelu:
    case Kind::kSigmoid:
    case Kind::kTanh: return activate(act_of(k), in[0]->data, y, out[0]->numel, s.stream);
    case Kind::kDropout:
      return dropout(in[0]->data, y, s.dropout_geometry(*out[0], ctx), static_cast<uint64_t>(n.attrs.get_int("seed")),
                     n.attrs.get_float("rate"), false, s.stream);
    case Kind::kLinear:
    case Kind::kMatMul: {
      const auto& ws = s.shapes[static_cast<size_t>(in[1]->id)];
      const int64_t kk = ws[0], nn = ws[1], m = in[0]->numel / kk;
      s.gemm(false, false, m, nn, kk, in[0]->data, in[1]->data, y, 0.f);
      if (k == Kind::kLinear) {
        const bool bias = n.attrs.get_bool("use_bias");
        const Act act = act_named(n.attrs.get_string("activation"));
        if (bias || act != Act::kNone) bias_activate(act, y, bias ? in[2]->data : nullptr, m, nn, s.stream);
      }
      return;
    }
    case Kind::kBatchMatMul: {
      const auto& xs = s.shapes[static_cast<size_t>(in[0]->id)];
      const auto& ws = s.shapes[static_cast<size_t>(in[1]->id)];
      const size_t r = xs.size();
      const int64_t m = xs[r - 2], kk = xs[r - 1], nn = ws[r - 1];
      return s.gemm(false, false, m, nn, kk, in[0]->data, in[1]->data, y, 0.f, in[0]->numel / (m * kk));
    }
    case Kind::kSoftmax: {
      const auto& xs = s.shapes[static_cast<size_t>(in[0]->id)];
      const Axis ax = softmax_axis(n.attrs, xs);
      const bool causal = n.attrs.get_bool("causal");
      const size_t r = xs.size();
      return softmax(in[0]->data, y, ax.outer, ax.len, ax.inner, causal, causal ? xs[r - 2] : 1, causal ? ctx.output_offsets[0][r - 2] : 0,
                     s.stream);
    }
    case Kind::kLayerNorm: {
      const int64_t d = s.shapes[static_cast<size_t>(in[0]->id)].back();
      const bool affine = n.attrs.get_bool("affine");
      return layer_norm(in[0]->data, affine ? in[1]->data : nullptr, affine ? in[2]->data : nullptr, y, in[0]->numel / d, d,
                        static_cast<float>(n.attrs.get_float("eps")), s.stream);
    }
    case Kind::kMSELoss:
      return mse(in[0]->data, in[1]->data, y, in[0]->numel, ctx.input_shapes[0].num_elements(), s.scratch_floats(2, kLossPartials), s.stream);
    case Kind::kCrossEntropy: {
      const int64_t classes = s.shapes[static_cast<size_t>(in[0]->id)].back();
      const ParallelTensorShape& global = ctx.input_shapes[0];
      const int64_t rows = in[0]->numel / classes;
      return cross_entropy(in[0]->data, in[1]->data, y, rows, classes, global.num_elements() / global.dims.back().size,
                           s.scratch_floats(2, static_cast<size_t>(std::max<int64_t>(rows, 1))), s.stream);
    }
    case Kind::kReshape: return s.copy(y, in[0]->data, out[0]->numel);
    case Kind::kTranspose:
      return permute(permute_geometry(s.shapes[static_cast<size_t>(in[0]->id)], s.shapes[static_cast<size_t>(out[0]->id)],
                                      n.attrs.get_ints("perm")),
                     in[0]->data, y, PermuteOp::kGather, s.stream);
    case Kind::kConcat:
      return along_axis(n.attrs, in, s.shapes, [&](const Buffer& x, std::span<const int64_t> at) {
        block(BlockOp::kWrite, s.geometry(*out[0], at, x), y, x.data, s.stream);
      });
    case Kind::kSplit:
      return along_axis(n.attrs, out, s.shapes, [&](const Buffer& piece, std::span<const int64_t> at) {
        block(BlockOp::kRead, s.geometry(*in[0], at, piece), in[0]->data, piece.data, s.stream);
      });
    case Kind::kEmbedding:
    case Kind::kEmbeddingBag: {
      const auto& is = s.shapes[static_cast<size_t>(in[0]->id)];
      const auto& ts = s.shapes[static_cast<size_t>(in[1]->id)];
      const int64_t bag = k == Kind::kEmbeddingBag ? is[1] : 1;
      return gather_rows(in[0]->data, in[1]->data, y, in[0]->numel / bag, bag, ts[0], ts[1], ctx.input_offsets[1][0], s.stream);
    }
    case Kind::kConv2D: {
      const auto& ys = s.shapes[static_cast<size_t>(out[0]->id)];
      const ConvGeometry g = conv_geometry(n.attrs, s.shapes[static_cast<size_t>(in[0]->id)], s.shapes[static_cast<size_t>(in[1]->id)], ys);
      s.convolutions().forward(g, in[0]->data, in[1]->data, y);
      const bool bias = n.attrs.get_bool("use_bias");
      const Act act = act_named(n.attrs.get_string("activation"));
      if (bias || act != Act::kNone) channel_bias_activate(act, y, bias ? in[2]->data : nullptr, g.n, g.o, g.ho * g.wo, s.stream);
      return;
    }
    case Kind::kPool2D:
      return pool(pool_geometry(n.attrs, s.shapes[static_cast<size_t>(in[0]->id)], s.shapes[static_cast<size_t>(out[0]->id)]), in[0]->data,
                  y, s.stream);
    case Kind::kBatchNorm: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], n.attrs.get_int("group"));
      return batch_norm(g, in[0]->data, in[1]->data, in[2]->data, y, static_cast<float>(n.attrs.get_float("eps")),
                        s.scratch_doubles(static_cast<size_t>(batch_stat_doubles(g))), s.stream);
    }
    case Kind::kBatchSum: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], 0);
      return batch_sum(g, in[0]->data, y, s.scratch_doubles(static_cast<size_t>(batch_stat_doubles(g))), s.stream);
    }
    case Kind::kBatchSquares: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], 0);
      return batch_squares(g, in[0]->data, in[1]->data, statistics_count(ctx), y,
                           s.scratch_doubles(static_cast<size_t>(batch_stat_doubles(g))), s.stream);
    }
    case Kind::kBatchNormApply: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], 0);
      return batch_norm_apply(g, in[0]->data, in[1]->data, in[2]->data, in[3]->data, in[4]->data, statistics_count(ctx),
                              static_cast<float>(n.attrs.get_float("eps")), y, s.stream);
    }
    case Kind::kHost: break;
  }
  s.host_forward(n, ctx, in, out);
}

}  // namespace pcgx::runtime::cuda
