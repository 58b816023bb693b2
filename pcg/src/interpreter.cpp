#include "pcgx/pcg/interpreter.h"


#include "pcgx/pcg/tasks.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/stable_hash.h"

namespace pcgx {
namespace {

template <class T>
Kernel<T> kernel_of(const OpDef& op);
template <>
Kernel<float> kernel_of<float>(const OpDef& op) { return op.kernel_f32; }
template <>
Kernel<ModP> kernel_of<ModP>(const OpDef& op) { return op.kernel_mod; }

template <class T>
ShardEval<T> shard_eval_of(const OpDef& op);
template <>
ShardEval<float> shard_eval_of<float>(const OpDef& op) { return op.shard_f32; }
template <>
ShardEval<ModP> shard_eval_of<ModP>(const OpDef& op) { return op.shard_mod; }

// Sources are keyed by name, so graphs that name their inputs alike see the
// same values.
uint64_t source_seed(const Node& n, uint64_t seed) {
  return seed * 1000003ULL + (n.name.empty() ? static_cast<uint64_t>(n.id) : hash_string(n.name));
}

int64_t index_range_of(const Node& n) { return n.attrs.has("index_range") ? n.attrs.get_int("index_range") : 0; }

uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

template <class T>
std::vector<ShardedTensor<T>> evaluate_op(const OpDef& op, const Attributes& attrs,
                                          std::span<const ShardedTensor<T>* const> inputs,
                                          std::span<const ParallelTensorShape> output_shapes) {
  std::vector<ShardedTensor<T>> out(output_shapes.size());
  for (size_t o = 0; o < out.size(); ++o) out[o].shape = output_shapes[o];

  if (op.is_shard_level(attrs)) {
    ShardEval<T> eval = shard_eval_of<T>(op);
    if (!eval) throw Error(op.name + " has no shard-level evaluation");
    eval(attrs, inputs, out);
    return out;
  }
  Kernel<T> kernel = kernel_of<T>(op);
  if (!kernel) throw Error(op.name + " has no reference kernel");

  std::vector<ParallelTensorShape> in_shapes;
  for (const auto* x : inputs) in_shapes.push_back(x->shape);
  const TaskTable table = task_table(op, attrs, in_shapes, output_shapes);
  for (auto& o : out) o.shards.resize(static_cast<size_t>(o.shape.num_shards()));
  std::vector<const Tensor<T>*> in_ptrs(inputs.size());
  std::vector<Tensor<T>> local(out.size());
  for (int64_t t = 0; t < table.tasks; ++t) {
    const auto& shard = table.input_shard[static_cast<size_t>(t)];
    for (size_t i = 0; i < inputs.size(); ++i) in_ptrs[i] = &inputs[i]->shards[static_cast<size_t>(shard[i])];
    for (size_t o = 0; o < out.size(); ++o) local[o] = Tensor<T>(output_shapes[o].shard_shape());
    const TaskContext ctx = table.context(t);
    kernel(KernelArgs<T>{attrs, in_ptrs, local, ctx});
    for (size_t o = 0; o < out.size(); ++o)
      out[o].shards[static_cast<size_t>(table.output_shard[static_cast<size_t>(t)][o])] = std::move(local[o]);
  }
  return out;
}

template <class T>
GraphValues<T> evaluate_sharded(const Graph& g, const ShardedSourceFn<T>& sources) {
  GraphValues<T> values(g.size());
  std::vector<const ShardedTensor<T>*> ins;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class == OpClass::kSource) {
      ShardedTensor<T> v = sources(n);
      if (!(v.shape == n.outputs[0]) || v.shards.size() != static_cast<size_t>(n.outputs[0].num_shards()))
        throw Error(describe(n) + ": supplied value has the wrong shape");
      values[static_cast<size_t>(n.id)].push_back(std::move(v));
      continue;
    }
    ins.clear();
    for (const TensorRef& t : n.inputs)
      ins.push_back(&values[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)]);
    values[static_cast<size_t>(n.id)] = evaluate_op<T>(*n.op, n.attrs, ins, n.outputs);
  }
  return values;
}

template <class T>
GraphValues<T> evaluate(const Graph& g, const SourceFn<T>& sources) {
  return evaluate_sharded<T>(g, [&](const Node& n) {
    Tensor<T> full = sources(n);
    if (full.shape != n.outputs[0].logical_shape()) throw Error(describe(n) + ": supplied value has the wrong shape");
    return distribute(full, n.outputs[0]);
  });
}

template <class T>
ShardedSourceFn<T> random_sharded_sources(uint64_t seed) {
  return [seed](const Node& n) {
    const auto& s = n.outputs[0];
    ShardedTensor<T> v{s, {}};
    for (int64_t i = 0; i < s.num_shards(); ++i)
      v.shards.push_back(random_tensor<T>({s.shard_shape(), s.dtype}, hash_mix(source_seed(n, seed), static_cast<uint64_t>(i)),
                                          index_range_of(n)));
    return v;
  };
}

template <class T>
std::vector<Tensor<T>> evaluate_outputs(const Graph& g, const SourceFn<T>& sources) {
  GraphValues<T> values = evaluate(g, sources);
  std::vector<Tensor<T>> out;
  for (const TensorRef& t : g.outputs())
    out.push_back(gather_slot(values[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)], 0));
  return out;
}

template <class T>
Tensor<T> random_tensor(const TensorType& type, uint64_t seed, int64_t index_range) {
  Tensor<T> t(type.shape);
  uint64_t state = seed * 0xD1B54A32D192ED03ULL + 0x8CB92BA72F3D8DD7ULL;
  const bool index = type.dtype == DataType::kInt64;
  const uint64_t range = static_cast<uint64_t>(index_range > 0 ? index_range : 1);
  for (auto& v : t.data) {
    const uint64_t r = splitmix(state);
    if constexpr (std::is_same_v<T, float>) {
      v = index ? static_cast<float>(r % range) : static_cast<float>(static_cast<double>(r >> 11) * 0x1.0p-52 - 1.0);
    } else {
      v = index ? ModP::from_u64(r % range) : ModP::from_u64(r);
    }
  }
  return t;
}

template <class T>
SourceFn<T> random_sources(uint64_t seed) {
  return [seed](const Node& n) {
    const auto& s = n.outputs[0];
    return random_tensor<T>({s.logical_shape(), s.dtype}, source_seed(n, seed), index_range_of(n));
  };
}

#define PCGX_INSTANTIATE(T)                                                                                        \
  template std::vector<ShardedTensor<T>> evaluate_op<T>(const OpDef&, const Attributes&,                          \
                                                        std::span<const ShardedTensor<T>* const>,                 \
                                                        std::span<const ParallelTensorShape>);                    \
  template GraphValues<T> evaluate<T>(const Graph&, const SourceFn<T>&);                                           \
  template GraphValues<T> evaluate_sharded<T>(const Graph&, const ShardedSourceFn<T>&);                            \
  template ShardedSourceFn<T> random_sharded_sources<T>(uint64_t);                                                 \
  template std::vector<Tensor<T>> evaluate_outputs<T>(const Graph&, const SourceFn<T>&);                          \
  template Tensor<T> random_tensor<T>(const TensorType&, uint64_t, int64_t);                                       \
  template SourceFn<T> random_sources<T>(uint64_t);
PCGX_INSTANTIATE(float)
PCGX_INSTANTIATE(ModP)
#undef PCGX_INSTANTIATE

}  // namespace pcgx
