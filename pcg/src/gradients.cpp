#include "pcgx/pcg/gradients.h"

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/tasks.h"

namespace pcgx {

ShardedTensor<float> zeros_like(const ParallelTensorShape& s) {
  return ShardedTensor<float>{s, std::vector<Tensor<float>>(static_cast<size_t>(s.num_shards()), Tensor<float>(s.shard_shape()))};
}

ShardedTensor<float> loss_seed(const ParallelTensorShape& s) {
  ShardedTensor<float> g = zeros_like(s);
  for (int64_t b = 0; b < s.num_blocks(); ++b) std::fill(g.shards[static_cast<size_t>(b)].data.begin(), g.shards[static_cast<size_t>(b)].data.end(), 1.f);
  return g;
}

std::vector<ShardedTensor<float>> backward_op(const OpDef& op, const Attributes& attrs,
                                              std::span<const ShardedTensor<float>* const> inputs,
                                              std::span<const ShardedTensor<float>* const> outputs,
                                              std::span<const ShardedTensor<float>* const> out_grads) {
  std::vector<ShardedTensor<float>> grads;
  for (const auto* x : inputs) grads.push_back(zeros_like(x->shape));
  if (op.is_shard_level(attrs)) {
    if (!op.shard_grad_f32) throw Error(op.name + " has no gradient rule");
    op.shard_grad_f32(attrs, out_grads, grads);
    return grads;
  }
  if (!op.grad_f32) throw Error(op.name + " has no gradient rule");
  std::vector<ParallelTensorShape> in_shapes, out_shapes;
  for (const auto* x : inputs) in_shapes.push_back(x->shape);
  for (const auto* y : outputs) out_shapes.push_back(y->shape);
  const TaskTable table = task_table(op, attrs, in_shapes, out_shapes);
  std::vector<const Tensor<float>*> in(inputs.size()), out(outputs.size()), dout(outputs.size());
  std::vector<Tensor<float>> din(inputs.size());
  for (int64_t t = 0; t < table.tasks; ++t) {
    const auto& is = table.input_shard[static_cast<size_t>(t)];
    const auto& os = table.output_shard[static_cast<size_t>(t)];
    for (size_t i = 0; i < inputs.size(); ++i) {
      in[i] = &inputs[i]->shards[static_cast<size_t>(is[i])];
      din[i] = Tensor<float>(in_shapes[i].shard_shape());
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      out[o] = &outputs[o]->shards[static_cast<size_t>(os[o])];
      dout[o] = &out_grads[o]->shards[static_cast<size_t>(os[o])];
    }
    const TaskContext ctx = table.context(t);
    op.grad_f32(GradArgs{attrs, in, out, dout, din, ctx});
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (in_shapes[i].dtype != DataType::kFloat32) continue;
      auto& acc = grads[i].shards[static_cast<size_t>(is[i])].data;
      for (size_t e = 0; e < acc.size(); ++e) acc[e] += din[i].data[e];
    }
  }
  return grads;
}

GraphValues<float> evaluate_gradients(const Graph& g, const GraphValues<float>& values,
                                      std::span<const ShardedTensor<float>> output_grads) {
  GraphValues<float> grads(g.size());
  for (const Node& n : g.nodes())
    for (const auto& s : n.outputs) grads[static_cast<size_t>(n.id)].push_back(zeros_like(s));
  auto accumulate = [](ShardedTensor<float>& into, const ShardedTensor<float>& add) {
    for (size_t s = 0; s < into.shards.size(); ++s)
      for (size_t e = 0; e < into.shards[s].data.size(); ++e) into.shards[s].data[e] += add.shards[s].data[e];
  };
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const TensorRef t = g.outputs()[o];
    accumulate(grads[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)], output_grads[o]);
  }
  std::vector<const ShardedTensor<float>*> in, out, dout;
  for (size_t k = g.size(); k-- > 0;) {
    const Node& n = g.node(static_cast<NodeId>(k));
    if (n.op->op_class == OpClass::kSource) continue;
    in.clear(), out.clear(), dout.clear();
    for (const TensorRef& t : n.inputs) in.push_back(&values[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)]);
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      out.push_back(&values[k][o]);
      dout.push_back(&grads[k][o]);
    }
    const auto din = backward_op(*n.op, n.attrs, in, out, dout);
    for (size_t i = 0; i < n.inputs.size(); ++i)
      accumulate(grads[static_cast<size_t>(n.inputs[i].node)][static_cast<size_t>(n.inputs[i].output)], din[i]);
  }
  return grads;
}

}  // namespace pcgx
