// The parallelization operators (docs/design.md table). They change how a tensor
// is distributed, never the logical value it stands for, except Reduce and
// AllReduce, which sum replica slots.
//
//   Repartition(dim, k): d_dim -> d_dim*k; shard i splits into i*k .. i*k+k-1
//   Combine(dim, k):     d_dim -> d_dim/k; shards i*k .. i*k+k-1 concatenate
//   Replicate(k):        r -> r*k; slot c is copied to slots c*k .. c*k+k-1
//   Reduce(k):           r -> r/k; slots c*k .. c*k+k-1 are summed into c
//   AllReduce(k):        Reduce(k) then Replicate(k)
//   Pipeline(dim, k) / Batch(dim, k): process dim in k sequential slices /
//                        gather them back (scheduling only: values unchanged)
#include "op_families.h"
#include "pcgx/pcg/ops/op_helpers.h"

namespace pcgx::ops {
namespace {

template <class T>
void repartition(const Attributes& a, std::span<const ShardedTensor<T>* const> in, std::span<ShardedTensor<T>> out) {
  const auto dim = static_cast<size_t>(a.get_int("dim"));
  const int64_t k = a.get_int("degree");
  const auto& is = in[0]->shape;
  auto& y = out[0];
  const auto extent = y.shape.shard_shape();
  y.shards.resize(static_cast<size_t>(y.shape.num_shards()));
  std::vector<int64_t> block, offset(extent.size(), 0);
  int64_t slot = 0;
  for (size_t s = 0; s < y.shards.size(); ++s) {
    y.shape.shard_coords(static_cast<int64_t>(s), slot, block);
    offset[dim] = (block[dim] % k) * extent[dim];
    block[dim] /= k;
    y.shards[s] = slice_block(in[0]->shards[static_cast<size_t>(is.shard_index(slot, block))], offset, extent);
  }
}

template <class T>
void combine(const Attributes& a, std::span<const ShardedTensor<T>* const> in, std::span<ShardedTensor<T>> out) {
  const auto dim = static_cast<size_t>(a.get_int("dim"));
  const int64_t k = a.get_int("degree");
  const auto& is = in[0]->shape;
  auto& y = out[0];
  const auto in_extent = is.shard_shape();
  y.shards.assign(static_cast<size_t>(y.shape.num_shards()), Tensor<T>(y.shape.shard_shape()));
  std::vector<int64_t> block, offset(in_extent.size(), 0);
  int64_t slot = 0;
  for (size_t s = 0; s < y.shards.size(); ++s) {
    y.shape.shard_coords(static_cast<int64_t>(s), slot, block);
    const int64_t base = block[dim] * k;
    for (int64_t m = 0; m < k; ++m) {
      block[dim] = base + m;
      offset[dim] = m * in_extent[dim];
      write_block(y.shards[s], offset, in[0]->shards[static_cast<size_t>(is.shard_index(slot, block))]);
    }
  }
}

template <class T>
void replicate(const Attributes& a, std::span<const ShardedTensor<T>* const> in, std::span<ShardedTensor<T>> out) {
  const int64_t k = a.get_int("degree");
  const int64_t blocks = in[0]->shape.num_blocks();
  auto& y = out[0];
  y.shards.clear();
  for (int64_t c = 0; c < y.shape.replica; ++c)
    for (int64_t b = 0; b < blocks; ++b) y.shards.push_back(in[0]->shards[static_cast<size_t>((c / k) * blocks + b)]);
}

// Sums groups of k consecutive slots; with `broadcast`, every slot of a group
// receives the group's sum (AllReduce), otherwise the group becomes one slot.
template <class T>
void reduce_slots(const ShardedTensor<T>& x, int64_t k, bool broadcast, ShardedTensor<T>& y) {
  const int64_t blocks = x.shape.num_blocks(), groups = x.shape.replica / k;
  y.shards.clear();
  std::vector<Tensor<T>> sums;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t b = 0; b < blocks; ++b) {
      Tensor<T> sum = x.shards[static_cast<size_t>(g * k * blocks + b)];
      for (int64_t m = 1; m < k; ++m) {
        const auto& part = x.shards[static_cast<size_t>((g * k + m) * blocks + b)].data;
        for (size_t i = 0; i < part.size(); ++i) sum.data[i] += part[i];
      }
      sums.push_back(std::move(sum));
    }
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t m = 0; m < (broadcast ? k : 1); ++m)
      for (int64_t b = 0; b < blocks; ++b) y.shards.push_back(sums[static_cast<size_t>(g * blocks + b)]);
}

template <class T>
void reduce(const Attributes& a, std::span<const ShardedTensor<T>* const> in, std::span<ShardedTensor<T>> out) {
  reduce_slots(*in[0], a.get_int("degree"), false, out[0]);
}
template <class T>
void all_reduce(const Attributes& a, std::span<const ShardedTensor<T>* const> in, std::span<ShardedTensor<T>> out) {
  reduce_slots(*in[0], a.get_int("degree"), true, out[0]);
}
template <class T>
void identity(const Attributes&, std::span<const ShardedTensor<T>* const> in, std::span<ShardedTensor<T>> out) {
  out[0].shards = in[0]->shards;
}

// Gradients: each operator's dual applied to the output's gradient.
void repartition_grad(const Attributes& a, std::span<const ShardedTensor<float>* const> dy, std::span<ShardedTensor<float>> dx) {
  combine<float>(a, dy, dx);
}
void combine_grad(const Attributes& a, std::span<const ShardedTensor<float>* const> dy, std::span<ShardedTensor<float>> dx) {
  repartition<float>(a, dy, dx);
}
void replicate_grad(const Attributes& a, std::span<const ShardedTensor<float>* const> dy, std::span<ShardedTensor<float>> dx) {
  reduce_slots(*dy[0], a.get_int("degree"), false, dx[0]);
}
void reduce_grad(const Attributes& a, std::span<const ShardedTensor<float>* const> dy, std::span<ShardedTensor<float>> dx) {
  replicate<float>(a, dy, dx);
}
void all_reduce_grad(const Attributes& a, std::span<const ShardedTensor<float>* const> dy, std::span<ShardedTensor<float>> dx) {
  all_reduce<float>(a, dy, dx);
}
void identity_grad(const Attributes& a, std::span<const ShardedTensor<float>* const> dy, std::span<ShardedTensor<float>> dx) {
  identity<float>(a, dy, dx);
}

OpDef parallel_op(const std::string& name, DataMove move, const std::string& summary, bool has_dim) {
  OpDef d;
  d.name = name;
  d.data_move = move;
  d.op_class = OpClass::kParallel;
  d.summary = summary;
  if (has_dim)
    d.attrs.push_back(with_domain(int_attr("dim", std::nullopt, "the tensor dimension", non_negative_int()), GenDomain::kDim));
  d.attrs.push_back(with_domain(int_attr("degree", std::nullopt, "the factor k", positive_int()), GenDomain::kDegree));
  d.input_names = {"x"};
  d.min_inputs = d.max_inputs = 1;
  d.infer_types = [name, has_dim](const Attributes& a, std::span<const TensorType> in) {
    if (has_dim)
      PCGX_REQUIRE(a.get_int("dim") < static_cast<int64_t>(in[0].shape.size()),
              "dim " + std::to_string(a.get_int("dim")) + " out of range for shape " + shape_str(in[0].shape));
    return std::vector<TensorType>{in[0]};
  };
  d.flops = [](const Attributes&, auto, auto) { return 0.0; };
  return d;
}

std::string dim_label(const ParallelTensorShape& s, size_t dim) {
  const auto& d = s.dims[dim];
  return "dimension " + std::to_string(dim) + " (size " + std::to_string(d.size) + ", degree " +
         std::to_string(d.degree) + (d.pipeline > 1 ? ", pipeline " + std::to_string(d.pipeline) : "") + ")";
}

}  // namespace

void register_parallel_ops(OpRegistry& r) {
  OpDef rep = parallel_op("Repartition", DataMove::kRepartition, "splits every shard of a dimension into k shards", true);
  rep.infer_parallel = [](const Attributes& a, std::span<const ParallelTensorShape> in) {
    ParallelTensorShape s = in[0];
    const auto dim = static_cast<size_t>(a.get_int("dim"));
    const int64_t k = a.get_int("degree");
    PCGX_REQUIRE(s.dims[dim].size % (s.dims[dim].degree * k * s.dims[dim].pipeline) == 0,
            "cannot split " + dim_label(s, dim) + " " + std::to_string(k) + " more ways");
    s.dims[dim].degree *= k;
    return std::vector<ParallelTensorShape>{s};
  };
  PCGX_SHARD_EVAL(rep, repartition);
  rep.shard_grad_f32 = &repartition_grad;
  rep.smt = {{"repartition", 1, {"dim", "degree"}}};
  rep.any_rank = true;
  r.add(rep);

  OpDef comb = parallel_op("Combine", DataMove::kCombine, "concatenates groups of k shards of a dimension", true);
  comb.infer_parallel = [](const Attributes& a, std::span<const ParallelTensorShape> in) {
    ParallelTensorShape s = in[0];
    const auto dim = static_cast<size_t>(a.get_int("dim"));
    const int64_t k = a.get_int("degree");
    PCGX_REQUIRE(s.dims[dim].degree % k == 0, "cannot combine " + dim_label(s, dim) + " by " + std::to_string(k));
    s.dims[dim].degree /= k;
    return std::vector<ParallelTensorShape>{s};
  };
  PCGX_SHARD_EVAL(comb, combine);
  comb.shard_grad_f32 = &combine_grad;
  comb.smt = {{"combine", 1, {"dim", "degree"}}};
  comb.any_rank = true;
  r.add(comb);

  OpDef repl = parallel_op("Replicate", DataMove::kReplicate, "copies every replica slot k times", false);
  repl.infer_parallel = [](const Attributes& a, std::span<const ParallelTensorShape> in) {
    ParallelTensorShape s = in[0];
    s.replica *= a.get_int("degree");
    return std::vector<ParallelTensorShape>{s};
  };
  PCGX_SHARD_EVAL(repl, replicate);
  repl.shard_grad_f32 = &replicate_grad;
  repl.smt = {{"replicate", 1, {"degree"}}};
  repl.any_rank = true;
  r.add(repl);

  auto reduce_shape = [](const Attributes& a, std::span<const ParallelTensorShape> in, bool keep) {
    ParallelTensorShape s = in[0];
    const int64_t k = a.get_int("degree");
    PCGX_REQUIRE(s.replica % k == 0, "cannot reduce replica degree " + std::to_string(s.replica) + " by " + std::to_string(k));
    if (!keep) s.replica /= k;
    return std::vector<ParallelTensorShape>{s};
  };
  OpDef red = parallel_op("Reduce", DataMove::kReduce, "sums groups of k replica slots", false);
  red.infer_parallel = [reduce_shape](const Attributes& a, std::span<const ParallelTensorShape> in) {
    return reduce_shape(a, in, false);
  };
  PCGX_SHARD_EVAL(red, reduce);
  red.shard_grad_f32 = &reduce_grad;
  red.smt = {{"reduce", 1, {"degree"}}};
  red.any_rank = true;
  r.add(red);

  OpDef ar = parallel_op("AllReduce", DataMove::kAllReduce, "sums groups of k replica slots into each of them", false);
  ar.infer_parallel = [reduce_shape](const Attributes& a, std::span<const ParallelTensorShape> in) {
    return reduce_shape(a, in, true);
  };
  PCGX_SHARD_EVAL(ar, all_reduce);
  ar.shard_grad_f32 = &all_reduce_grad;
  ar.smt = {{"all_reduce", 1, {"degree"}}};
  ar.any_rank = true;
  r.add(ar);

  OpDef pipe = parallel_op("Pipeline", DataMove::kPipeline, "processes a dimension in k sequential micro-slices", true);
  pipe.infer_parallel = [](const Attributes& a, std::span<const ParallelTensorShape> in) {
    ParallelTensorShape s = in[0];
    const auto dim = static_cast<size_t>(a.get_int("dim"));
    const int64_t k = a.get_int("degree");
    PCGX_REQUIRE((s.dims[dim].size / s.dims[dim].degree) % (s.dims[dim].pipeline * k) == 0,
            "cannot pipeline " + dim_label(s, dim) + " in " + std::to_string(k) + " more slices");
    s.dims[dim].pipeline *= k;
    return std::vector<ParallelTensorShape>{s};
  };
  PCGX_SHARD_EVAL(pipe, identity);
  pipe.shard_grad_f32 = &identity_grad;
  r.add(pipe);

  OpDef batch = parallel_op("Batch", DataMove::kBatch, "gathers k sequential micro-slices of a dimension", true);
  batch.infer_parallel = [](const Attributes& a, std::span<const ParallelTensorShape> in) {
    ParallelTensorShape s = in[0];
    const auto dim = static_cast<size_t>(a.get_int("dim"));
    const int64_t k = a.get_int("degree");
    PCGX_REQUIRE(s.dims[dim].pipeline % k == 0, "cannot batch " + dim_label(s, dim) + " by " + std::to_string(k));
    s.dims[dim].pipeline /= k;
    return std::vector<ParallelTensorShape>{s};
  };
  PCGX_SHARD_EVAL(batch, identity);
  batch.shard_grad_f32 = &identity_grad;
  r.add(batch);
}

}  // namespace pcgx::ops
