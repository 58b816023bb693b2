// CudaBackend::backward: each operator's gradient on its kernels, every
// gradient written whole but an embedding table's (cuda_backend.h).
#include "backend_state.h"
#include "op_kinds.h"

namespace pcgx::runtime::cuda {

bool CudaBackend::overwrites_gradient(const Node& n, size_t input) const {
  // An embedding's table gradient is scattered into (rows may repeat);
  // every other gradient, the host fallback's included, is written whole.
  const Kind k = kind_of(*n.op);
  return !((k == Kind::kEmbedding || k == Kind::kEmbeddingBag) && input == 1);
}

void CudaBackend::backward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in, std::span<const Buffer* const> out,
                           std::span<const Buffer* const> out_grad, std::span<const Buffer* const> in_grad) {
  State& s = *s_;
  const Kind k = kind_of(*n.op);
  const float* dy = out_grad[0]->data;
  const int64_t size = out_grad[0]->numel;
  switch (k) {
    // Every gradient here is written whole (overwrites_gradient), except an
    // embedding table's, which is zeroed by the executor and added into.
    case Kind::kEwAdd:
      for (int i = 0; i < 2; ++i) s.copy(in_grad[static_cast<size_t>(i)]->data, dy, size);
      return;
    case Kind::kEwMul:
      ew_mul(dy, in[1]->data, in_grad[0]->data, size, s.stream);
      ew_mul(dy, in[0]->data, in_grad[1]->data, size, s.stream);
      return;
    case Kind::kScalarMul:
      return scale(dy, static_cast<float>(n.attrs.get_float("scalar")), in_grad[0]->data, size, s.stream);
    case Kind::kRelu:
    case Kind::kGelu:
    case Kind::kSigmoid:
    case Kind::kTanh:
      return activation_backward(act_of(k), in[0]->data, out[0]->data, dy, in_grad[0]->data, size, s.stream);
    case Kind::kDropout:
      return dropout(dy, in_grad[0]->data, s.dropout_geometry(*out[0], ctx), static_cast<uint64_t>(n.attrs.get_int("seed")),
                     n.attrs.get_float("rate"), false, s.stream);
    case Kind::kLinear:
    case Kind::kMatMul: {
      const auto& ws = s.shapes[static_cast<size_t>(in[1]->id)];
      const int64_t kk = ws[0], nn = ws[1], m = in[0]->numel / kk;
      const float* dz = dy;
      if (k == Kind::kLinear) {
        const bool bias = n.attrs.get_bool("use_bias");
        const Act act = act_named(n.attrs.get_string("activation"));
        if (act != Act::kNone) {
          const auto elems = static_cast<size_t>(m * nn);
          float* z = nullptr;
          if (act == Act::kGelu) {  // recompute z = x W + b
            z = s.scratch_floats(1, elems);
            s.gemm(false, false, m, nn, kk, in[0]->data, in[1]->data, z, 0.f);
            if (bias) bias_activate(Act::kNone, z, in[2]->data, m, nn, s.stream);
          }
          float* d = s.scratch_floats(0, elems);
          activation_backward(act, z, out[0]->data, dy, d, m * nn, s.stream);
          dz = d;
        }
        if (bias) column_sums(dz, m, nn, in_grad[2]->data, s.scratch_floats(2, static_cast<size_t>(column_chunks(m, nn) * nn)), s.stream);
      }
      s.gemm(false, true, m, kk, nn, dz, in[1]->data, in_grad[0]->data, 0.f);  // dx = dz W^T
      s.gemm(true, false, kk, nn, m, in[0]->data, dz, in_grad[1]->data, 0.f);  // dW = x^T dz
      return;
    }
    case Kind::kBatchMatMul: {
      const auto& xs = s.shapes[static_cast<size_t>(in[0]->id)];
      const auto& ws = s.shapes[static_cast<size_t>(in[1]->id)];
      const size_t r = xs.size();
      const int64_t m = xs[r - 2], kk = xs[r - 1], nn = ws[r - 1], batches = in[0]->numel / (m * kk);
      s.gemm(false, true, m, kk, nn, dy, in[1]->data, in_grad[0]->data, 0.f, batches);  // dx = dy w^T per item
      s.gemm(true, false, kk, nn, m, in[0]->data, dy, in_grad[1]->data, 0.f, batches);  // dw = x^T dy per item
      return;
    }
    case Kind::kSoftmax: {
      const Axis ax = softmax_axis(n.attrs, s.shapes[static_cast<size_t>(out[0]->id)]);
      return softmax_backward(out[0]->data, dy, in_grad[0]->data, ax.outer, ax.len, ax.inner, s.stream);
    }
    case Kind::kLayerNorm: {
      const int64_t d = s.shapes[static_cast<size_t>(in[0]->id)].back(), rows = in[0]->numel / d;
      const bool affine = n.attrs.get_bool("affine");
      float* stats = s.scratch_floats(0, static_cast<size_t>(2 * rows));
      float* partial = affine ? s.scratch_floats(2, static_cast<size_t>(2 * column_chunks(rows, d) * d)) : nullptr;
      return layer_norm_backward(in[0]->data, affine ? in[1]->data : nullptr, dy, in_grad[0]->data, affine ? in_grad[1]->data : nullptr,
                                     affine ? in_grad[2]->data : nullptr, stats, partial, rows, d, static_cast<float>(n.attrs.get_float("eps")),
                                     s.stream);
    }
    case Kind::kMSELoss:
      return mse_backward(in[0]->data, in[1]->data, dy, in_grad[0] ? in_grad[0]->data : nullptr, in_grad[1] ? in_grad[1]->data : nullptr,
                          in[0]->numel,
                              ctx.input_shapes[0].num_elements(), s.stream);
    case Kind::kCrossEntropy: {
      const int64_t classes = s.shapes[static_cast<size_t>(in[0]->id)].back();
      const ParallelTensorShape& global = ctx.input_shapes[0];
      return cross_entropy_backward(in[0]->data, in[1]->data, dy, in_grad[0]->data, in[0]->numel / classes, classes,
                                    global.num_elements() / global.dims.back().size, s.stream);
    }
    case Kind::kReshape: return s.copy(in_grad[0]->data, dy, in_grad[0]->numel);
    case Kind::kTranspose:
      return permute(permute_geometry(s.shapes[static_cast<size_t>(in[0]->id)], s.shapes[static_cast<size_t>(out[0]->id)],
                                      n.attrs.get_ints("perm")),
                     in_grad[0]->data, const_cast<float*>(dy), PermuteOp::kScatter, s.stream);
    case Kind::kConcat:  // each input's gradient is its piece of dy
      return along_axis(n.attrs, in_grad, s.shapes, [&](const Buffer& dx, std::span<const int64_t> at) {
        block(BlockOp::kRead, s.geometry(*out_grad[0], at, dx), out_grad[0]->data, dx.data, s.stream);
      });
    case Kind::kSplit:  // dx gathers the pieces' gradients (they tile it)
      return along_axis(n.attrs, out_grad, s.shapes, [&](const Buffer& piece, std::span<const int64_t> at) {
        block(BlockOp::kWrite, s.geometry(*in_grad[0], at, piece), in_grad[0]->data, piece.data, s.stream);
      });
    case Kind::kEmbedding:
    case Kind::kEmbeddingBag: {
      const auto& is = s.shapes[static_cast<size_t>(in[0]->id)];
      const auto& ts = s.shapes[static_cast<size_t>(in[1]->id)];
      const int64_t bag = k == Kind::kEmbeddingBag ? is[1] : 1;
      return scatter_rows_add(in[0]->data, dy, in_grad[1]->data, in[0]->numel / bag, bag, ts[0], ts[1], ctx.input_offsets[1][0], s.stream);
    }
    case Kind::kConv2D: {
      const ConvGeometry g = conv_geometry(n.attrs, s.shapes[static_cast<size_t>(in[0]->id)], s.shapes[static_cast<size_t>(in[1]->id)],
                                           s.shapes[static_cast<size_t>(out[0]->id)]);
      const bool bias = n.attrs.get_bool("use_bias");
      const Act act = act_named(n.attrs.get_string("activation"));
      const float* dz = dy;
      if (act != Act::kNone) {
        float* z = nullptr;
        if (act == Act::kGelu) {  // recompute z = conv(x, W) + b, as the CPU does
          z = s.scratch_floats(1, static_cast<size_t>(size));
          s.convolutions().forward(g, in[0]->data, in[1]->data, z);
          if (bias) channel_bias_activate(Act::kNone, z, in[2]->data, g.n, g.o, g.ho * g.wo, s.stream);
        }
        float* d = s.scratch_floats(0, static_cast<size_t>(size));
        activation_backward(act, z, out[0]->data, dy, d, size, s.stream);
        dz = d;
      }
      if (bias) channel_sums(dz, g.n, g.o, g.ho * g.wo, in_grad[2]->data, s.stream);
      s.convolutions().backward_data(g, dz, in[1]->data, in_grad[0]->data);
      s.convolutions().backward_filter(g, in[0]->data, dz, in_grad[1]->data);
      return;
    }
    case Kind::kPool2D: {
      const PoolGeometry g = pool_geometry(n.attrs, s.shapes[static_cast<size_t>(in[0]->id)], s.shapes[static_cast<size_t>(out[0]->id)]);
      // Each window's argmax, as ints in an intermediate's scratch.
      int* args = g.max ? reinterpret_cast<int*>(s.scratch_floats(0, static_cast<size_t>(g.planes * g.ho * g.wo))) : nullptr;
      return pool_backward(g, in[0]->data, dy, in_grad[0]->data, args, s.stream);
    }
    case Kind::kBatchNorm: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], n.attrs.get_int("group"));
      return batch_norm_backward(g, in[0]->data, in[1]->data, dy, in_grad[0]->data, in_grad[1]->data, in_grad[2]->data,
                                 n.attrs.get_float("eps"), s.scratch_doubles(static_cast<size_t>(batch_stat_doubles(g))),
                                 s.stream);
    }
    case Kind::kBatchSum:
      return batch_sum_backward(channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], 0), dy, in_grad[0]->data, s.stream);
    case Kind::kBatchSquares: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], 0);
      return batch_squares_backward(g, in[0]->data, in[1]->data, dy, statistics_count(ctx), in_grad[0]->data, in_grad[1]->data,
                                    s.scratch_doubles(static_cast<size_t>(batch_stat_doubles(g))), s.stream);
    }
    case Kind::kBatchNormApply: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], 0);
      return batch_norm_apply_backward(g, in[0]->data, in[1]->data, in[2]->data, in[3]->data, dy, statistics_count(ctx),
                                       n.attrs.get_float("eps"), in_grad[0]->data, in_grad[1]->data, in_grad[2]->data,
                                       in_grad[3]->data, in_grad[4]->data, s.scratch_doubles(static_cast<size_t>(batch_stat_doubles(g))),
                                       s.stream);
    }
    case Kind::kHost: break;
  }
  s.host_backward(n, ctx, in, out, out_grad, in_grad);
}

}  // namespace pcgx::runtime::cuda
