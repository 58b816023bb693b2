// Concat, Split, Reshape, Transpose. Concat and Split also work on the
// replica axis (axis = -1): concatenating replica slots moves no data, and
// makes Unity's hybrid rewrite Add(x, y) = Reduce(2)(Concat_replica(x, y))
// expressible.
#include <algorithm>
#include <array>
#include <numeric>

#include "op_families.h"
#include "pcgx/pcg/ops/op_helpers.h"

namespace pcgx::ops {
namespace {

constexpr int64_t kReplicaAxis = -1;

bool on_replica(const Attributes& a) { return a.get_int("axis") == kReplicaAxis; }

// Copies chunks of `len` elements in an outer loop: the shared core of
// concat and split along a data axis.
template <class T>
void concat_k(const KernelArgs<T>& a) {
  const auto axis = static_cast<size_t>(a.attrs.get_int("axis"));
  Tensor<T>& y = a.out[0];
  const int64_t inner = product(std::span(y.shape).subspan(axis + 1));
  const int64_t outer = product(std::span(y.shape).subspan(0, axis));
  T* dst = y.data.data();
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor<T>* x : a.in) {
      const int64_t chunk = x->shape[axis] * inner;
      dst = std::copy_n(x->data.data() + o * chunk, chunk, dst);
    }
}

template <class T>
void split_k(const KernelArgs<T>& a) {
  const auto axis = static_cast<size_t>(a.attrs.get_int("axis"));
  const Tensor<T>& x = *a.in[0];
  const int64_t inner = product(std::span(x.shape).subspan(axis + 1));
  const int64_t outer = product(std::span(x.shape).subspan(0, axis));
  const T* src = x.data.data();
  for (int64_t o = 0; o < outer; ++o)
    for (Tensor<T>& y : a.out) {
      const int64_t chunk = y.shape[axis] * inner;
      std::copy_n(src, chunk, y.data.data() + o * chunk);
      src += chunk;
    }
}

template <class T>
void concat_replica(const Attributes&, std::span<const ShardedTensor<T>* const> in, std::span<ShardedTensor<T>> out) {
  out[0].shards.clear();
  for (const auto* x : in) out[0].shards.insert(out[0].shards.end(), x->shards.begin(), x->shards.end());
}

template <class T>
void split_replica(const Attributes&, std::span<const ShardedTensor<T>* const> in, std::span<ShardedTensor<T>> out) {
  auto it = in[0]->shards.begin();
  for (auto& y : out) {
    const auto n = static_cast<std::ptrdiff_t>(y.shape.num_shards());
    y.shards.assign(it, it + n);
    it += n;
  }
}

template <class T>
void reshape_k(const KernelArgs<T>& a) {
  a.out[0].data = a.in[0]->data;
}

// y = x with its dimensions permuted (y's dimension d is x's perm[d]).
// Walks y in order, one run of its last dimension at a time, with the
// source offset kept incrementally; no allocation (ranks up to kMaxRank).
template <class T>
void permute(const Tensor<T>& x, std::span<const int64_t> perm, Tensor<T>& y) {
  const size_t r = y.shape.size();
  if (r > kMaxRank) throw Error("Transpose: rank " + std::to_string(r) + " is above " + std::to_string(kMaxRank));
  if (r == 0 || y.data.empty()) return;
  std::array<int64_t, kMaxRank> xs{}, step{}, idx{};
  int64_t stride = 1;
  for (size_t d = r; d-- > 0;) xs[d] = stride, stride *= x.shape[d];
  for (size_t d = 0; d < r; ++d) step[d] = xs[static_cast<size_t>(perm[d])];
  const int64_t run = y.shape[r - 1], inner = step[r - 1];
  const T* src = x.data.data();
  T* dst = y.data.data();
  const T* end = dst + y.data.size();
  while (dst < end) {
    if (inner == 1) {
      dst = std::copy_n(src, run, dst);
    } else {
      for (int64_t i = 0; i < run; ++i) *dst++ = src[i * inner];
    }
    for (size_t d = r - 1; d-- > 0;) {  // next index of the outer dimensions
      src += step[d];
      if (++idx[d] < y.shape[d]) break;
      src -= step[d] * y.shape[d];
      idx[d] = 0;
    }
  }
}

template <class T>
void transpose_k(const KernelArgs<T>& a) {
  permute(*a.in[0], a.attrs.get_ints("perm"), a.out[0]);
}

// Gradients: each operator's gradient is its inverse data movement.
void concat_grad(const GradArgs& a) {
  split_k<float>(KernelArgs<float>{a.attrs, a.out_grad, a.in_grad, a.ctx});
}
void split_grad(const GradArgs& a) {
  concat_k<float>(KernelArgs<float>{a.attrs, a.out_grad, a.in_grad, a.ctx});
}
void reshape_grad(const GradArgs& a) { a.in_grad[0].data = a.out_grad[0]->data; }
// dx is dy permuted back: dx's dimension perm[d] is dy's d.
void transpose_grad(const GradArgs& a) {
  const IntList& perm = a.attrs.get_ints("perm");
  std::array<int64_t, kMaxRank> inverse{};
  if (perm.size() > kMaxRank) throw Error("Transpose: rank " + std::to_string(perm.size()) + " is above " + std::to_string(kMaxRank));
  for (size_t d = 0; d < perm.size(); ++d) inverse[static_cast<size_t>(perm[d])] = static_cast<int64_t>(d);
  Tensor<float>& dx = a.in_grad[0];
  permute(*a.out_grad[0], std::span<const int64_t>(inverse.data(), perm.size()), dx);
}
void concat_replica_grad(const Attributes& a, std::span<const ShardedTensor<float>* const> dy,
                         std::span<ShardedTensor<float>> dx) {
  split_replica<float>(a, dy, dx);
}
void split_replica_grad(const Attributes& a, std::span<const ShardedTensor<float>* const> dy,
                        std::span<ShardedTensor<float>> dx) {
  concat_replica<float>(a, dy, dx);
}

void check_axis(const Attributes& a, const TensorType& t) {
  const int64_t axis = a.get_int("axis");
  PCGX_REQUIRE(axis == kReplicaAxis || (axis >= 0 && axis < static_cast<int64_t>(t.shape.size())),
          "axis " + std::to_string(axis) + " out of range for shape " + shape_str(t.shape) + " (-1: replica axis)");
}

std::vector<ParallelKind> kinds_except_axis(const Attributes& a, size_t rank, size_t inputs, size_t outputs) {
  std::vector<ParallelKind> kinds;
  for (size_t d = 0; d < rank; ++d)
    if (static_cast<int64_t>(d) != a.get_int("axis"))
      kinds.push_back({"dim" + std::to_string(d), std::vector<int>(inputs, static_cast<int>(d)),
                       std::vector<int>(outputs, static_cast<int>(d)), 0});
  return kinds;
}

double zero_flops(const Attributes&, std::span<const TensorType>, std::span<const TensorType>) { return 0.0; }

}  // namespace

void register_shape_ops(OpRegistry& r) {
  OpDef cat;
  cat.name = "Concat";
  cat.weight_layout = true;
  cat.grad_writes = true;  // (its rule writes the gradient: data movement)
  cat.data_move = DataMove::kConcatReplicas;
  cat.summary = "concatenates inputs along a dimension, or their replica slots (axis -1)";
  cat.attrs = {with_domain(int_attr("axis", std::nullopt, "dimension to concatenate; -1: the replica axis"),
                           GenDomain::kDimOrReplica)};
  cat.input_names = {"x"};
  cat.min_inputs = 1;
  cat.max_inputs = -1;
  cat.infer_types = [](const Attributes& a, std::span<const TensorType> in) {
    check_axis(a, in[0]);
    TensorType out = in[0];
    const int64_t axis = a.get_int("axis");
    for (size_t i = 1; i < in.size(); ++i) {
      PCGX_REQUIRE(in[i].dtype == in[0].dtype && in[i].shape.size() == in[0].shape.size(),
              "input " + std::to_string(i) + " has shape " + shape_str(in[i].shape) + ", input 0 " + shape_str(in[0].shape));
      for (size_t d = 0; d < in[0].shape.size(); ++d) {
        if (static_cast<int64_t>(d) == axis) continue;
        PCGX_REQUIRE(in[i].shape[d] == in[0].shape[d], "input " + std::to_string(i) + " has shape " +
                                                      shape_str(in[i].shape) + ", input 0 " + shape_str(in[0].shape));
      }
      if (axis != kReplicaAxis) out.shape[static_cast<size_t>(axis)] += in[i].shape[static_cast<size_t>(axis)];
    }
    return std::vector<TensorType>{out};
  };
  cat.kinds = [](const Attributes& a, std::span<const TensorType> in) {
    return kinds_except_axis(a, in[0].shape.size(), in.size(), 1);
  };
  cat.shard_level = on_replica;
  cat.infer_parallel = [](const Attributes&, std::span<const ParallelTensorShape> in) {
    ParallelTensorShape out = in[0];
    for (size_t i = 1; i < in.size(); ++i) {
      PCGX_REQUIRE(in[i].dims == in[0].dims, "replica concatenation needs identical partitioning: input " +
                                            std::to_string(i) + " is " + in[i].to_string() + ", input 0 " +
                                            in[0].to_string());
      out.replica += in[i].replica;
    }
    return std::vector<ParallelTensorShape>{out};
  };
  PCGX_KERNELS(cat, concat_k);
  PCGX_SHARD_EVAL(cat, concat_replica);
  cat.grad_f32 = &concat_grad;
  cat.backward_reads = reads(0, 0);
  cat.shard_grad_f32 = &concat_replica_grad;
  cat.flops = zero_flops;
  cat.smt = {{"concat", 2, {"axis"}}};
  cat.any_rank = true;
  r.add(cat);

  OpDef split;
  split.name = "Split";
  split.weight_layout = true;
  split.grad_writes = true;  // (its rule writes the gradient: data movement)
  split.data_move = DataMove::kSplitReplicas;
  split.summary = "splits a dimension (or the replica slots, axis -1) into pieces of the given sizes";
  split.attrs = {with_domain(int_attr("axis", std::nullopt, "dimension to split; -1: the replica axis"),
                             GenDomain::kDimOrReplica),
                 with_domain(ints_attr("sizes", std::nullopt, "size of each piece", positive_int_list()), GenDomain::kHalves)};
  split.input_names = {"x"};
  split.min_inputs = split.max_inputs = 1;
  split.infer_types = [](const Attributes& a, std::span<const TensorType> in) {
    check_axis(a, in[0]);
    const IntList& sizes = a.get_ints("sizes");
    PCGX_REQUIRE(!sizes.empty(), "attribute 'sizes' is empty");
    std::vector<TensorType> out(sizes.size(), in[0]);
    const int64_t axis = a.get_int("axis");
    if (axis != kReplicaAxis) {
      const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
      PCGX_REQUIRE(total == in[0].shape[static_cast<size_t>(axis)],
              "sizes sum to " + std::to_string(total) + ", dimension " + std::to_string(axis) + " has size " +
                  std::to_string(in[0].shape[static_cast<size_t>(axis)]));
      for (size_t i = 0; i < sizes.size(); ++i) out[i].shape[static_cast<size_t>(axis)] = sizes[i];
    }
    return out;
  };
  split.kinds = [](const Attributes& a, std::span<const TensorType> in) {
    return kinds_except_axis(a, in[0].shape.size(), 1, a.get_ints("sizes").size());
  };
  split.shard_level = on_replica;
  split.infer_parallel = [](const Attributes& a, std::span<const ParallelTensorShape> in) {
    const IntList& sizes = a.get_ints("sizes");
    const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
    PCGX_REQUIRE(total == in[0].replica, "sizes sum to " + std::to_string(total) + ", the input has replica degree " +
                                        std::to_string(in[0].replica));
    std::vector<ParallelTensorShape> out(sizes.size(), in[0]);
    for (size_t i = 0; i < sizes.size(); ++i) out[i].replica = sizes[i];
    return out;
  };
  PCGX_KERNELS(split, split_k);
  PCGX_SHARD_EVAL(split, split_replica);
  split.grad_f32 = &split_grad;
  split.backward_reads = reads(0, 0);
  split.shard_grad_f32 = &split_replica_grad;
  split.flops = zero_flops;
  split.smt = {{"split0", 1, {"axis"}, 0}, {"split1", 1, {"axis"}, 1}};
  split.any_rank = true;
  r.add(split);

  OpDef reshape;
  reshape.name = "Reshape";
  reshape.weight_layout = true;
  reshape.grad_writes = true;  // (its rule writes the gradient: data movement)
  reshape.summary = "reinterprets the row-major data with a new shape";
  reshape.attrs = {with_domain(ints_attr("shape", std::nullopt, "the new shape", positive_int_list()), GenDomain::kRegroup)};
  reshape.input_names = {"x"};
  reshape.min_inputs = reshape.max_inputs = 1;
  reshape.infer_types = [](const Attributes& a, std::span<const TensorType> in) {
    const IntList& shape = a.get_ints("shape");
    PCGX_REQUIRE(product(shape) == product(in[0].shape),
            "cannot reshape " + shape_str(in[0].shape) + " into " + shape_str(shape) + ": element counts differ");
    return std::vector<TensorType>{{shape, in[0].dtype}};
  };
  // Splitting dimension j of the input yields contiguous chunks of the data
  // below the shared prefix; so does splitting dimension j of the output,
  // for every j up to and including the first dimension where they differ.
  reshape.kinds = [](const Attributes& a, std::span<const TensorType> in) {
    const IntList& out = a.get_ints("shape");
    const auto& s = in[0].shape;
    std::vector<ParallelKind> kinds;
    for (size_t d = 0; d < std::min(s.size(), out.size()); ++d) {
      kinds.push_back({"dim" + std::to_string(d), {static_cast<int>(d)}, {static_cast<int>(d)}, 0});
      if (s[d] != out[d]) break;
    }
    return kinds;
  };
  PCGX_KERNELS(reshape, reshape_k);
  reshape.grad_f32 = &reshape_grad;
  reshape.backward_reads = reads(0, 0);
  reshape.flops = zero_flops;
  reshape.smt = {{"reshape", 1, {{"shape", SmtCode::kShapeDigits}}}};
  r.add(reshape);

  OpDef tr;
  tr.name = "Transpose";
  tr.weight_layout = true;
  tr.permutes = [](const Attributes& a) { return a.get_ints("perm"); };
  tr.grad_writes = true;  // (its rule writes the gradient: data movement)
  tr.summary = "permutes dimensions: output dimension d is input dimension perm[d]";
  tr.attrs = {with_domain(ints_attr("perm", std::nullopt, "the permutation"), GenDomain::kPermutation)};
  tr.input_names = {"x"};
  tr.min_inputs = tr.max_inputs = 1;
  tr.infer_types = [](const Attributes& a, std::span<const TensorType> in) {
    const IntList& perm = a.get_ints("perm");
    IntList sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    IntList iota(in[0].shape.size());
    std::iota(iota.begin(), iota.end(), 0);
    PCGX_REQUIRE(sorted == iota, "perm " + shape_str(perm) + " is not a permutation of the " +
                                std::to_string(in[0].shape.size()) + " dimensions");
    TensorType out = in[0];
    for (size_t d = 0; d < perm.size(); ++d) out.shape[d] = in[0].shape[static_cast<size_t>(perm[d])];
    return std::vector<TensorType>{out};
  };
  tr.kinds = [](const Attributes& a, std::span<const TensorType>) {
    const IntList& perm = a.get_ints("perm");
    std::vector<ParallelKind> kinds;
    for (size_t d = 0; d < perm.size(); ++d)
      kinds.push_back({"dim" + std::to_string(perm[d]), {static_cast<int>(perm[d])}, {static_cast<int>(d)}, 0});
    return kinds;
  };
  PCGX_KERNELS(tr, transpose_k);
  tr.grad_f32 = &transpose_grad;
  tr.backward_reads = reads(0, 0);
  tr.flops = zero_flops;
  tr.smt = {{"transpose", 1, {{"perm", SmtCode::kPermDigits}}}};
  r.add(tr);
}

}  // namespace pcgx::ops
