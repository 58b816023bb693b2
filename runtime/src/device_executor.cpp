#include "pcgx/runtime/device_executor.h"

#include <algorithm>

#include "pcgx/pcg/error.h"

namespace pcgx::runtime {
namespace {

void zero(Tensor<float>& t) { std::fill(t.data.begin(), t.data.end(), 0.f); }

void add_into(Tensor<float>& into, const Tensor<float>& x) {
  for (size_t i = 0; i < into.data.size(); ++i) into.data[i] += x.data[i];
}

// into[offset + block] += x
void add_block(Tensor<float>& into, std::span<const int64_t> offset, const Tensor<float>& x) {
  Tensor<float> cur = slice_block(into, offset, x.shape);
  add_into(cur, x);
  write_block(into, offset, cur);
}

}  // namespace

DeviceExecutor::DeviceExecutor(const ExecutionPlan& plan, Communicator& comm) : plan_(plan), comm_(comm) {
  const Graph& g = *plan.graph;
  values_.resize(g.size());
  grads_.resize(g.size());
  received_.resize(g.size());
  for (const Node& n : g.nodes())
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      const ParallelTensorShape& s = n.outputs[o];
      auto& v = values_[static_cast<size_t>(n.id)].emplace_back(static_cast<size_t>(s.num_shards()));
      auto& d = grads_[static_cast<size_t>(n.id)].emplace_back(static_cast<size_t>(s.num_shards()));
      for (int64_t k = 0; k < s.num_shards(); ++k)
        if (owns({n.id, static_cast<int32_t>(o)}, k)) {
          v[static_cast<size_t>(k)] = Tensor<float>(s.shard_shape());
          d[static_cast<size_t>(k)] = Tensor<float>(s.shard_shape());
        }
    }
}

int64_t DeviceExecutor::tag(const Node& n, int64_t index, bool backward) const {
  return ((static_cast<int64_t>(n.id) << 32) | index) * 2 + (backward ? 1 : 0);
}

void DeviceExecutor::set_source(NodeId node, const Tensor<float>& logical) {
  const ParallelTensorShape& s = plan_.graph->node(node).outputs[0];
  if (logical.shape != s.logical_shape()) throw Error(describe(plan_.graph->node(node)) + ": value has the wrong shape");
  const auto extent = s.shard_shape();
  std::vector<int64_t> block;
  int64_t slot = 0;
  for (int64_t k = 0; k < s.num_shards(); ++k)
    if (owns({node, 0}, k)) {
      s.shard_coords(k, slot, block);
      values_[static_cast<size_t>(node)][0][static_cast<size_t>(k)] = slice_block(logical, s.block_offset(block), extent);
    }
}

double DeviceExecutor::forward() {
  for (const Node& n : plan_.graph->nodes()) {
    if (n.op->op_class == OpClass::kSource) continue;
    if (n.op->is_shard_level(n.attrs)) forward_moves(n);
    else forward_compute(n);
  }
  // The loss to device 0.
  const TensorRef out = plan_.graph->outputs().at(0);
  const int holder = plan_.owner(out, 0);
  const int64_t loss_tag = -(int64_t{1} << 62);
  float loss = 0.f;
  if (holder == comm_.rank()) {
    loss = values(out)[0].data.at(0);
    if (holder != 0) comm_.send(0, loss_tag, std::span<const float>(&loss, 1));
  } else if (comm_.rank() == 0) {
    comm_.recv(holder, loss_tag, std::span<float>(&loss, 1));
  }
  return comm_.rank() == 0 ? loss : 0.0;
}

void DeviceExecutor::forward_compute(const Node& n) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const TaskTable& tt = np.tasks;
  const int me = comm_.rank();
  const size_t ins = n.inputs.size();
  for (int64_t t = 0; t < tt.tasks; ++t) {
    const int dev = np.task_device[static_cast<size_t>(t)];
    if (dev == me) continue;
    for (size_t i = 0; i < ins; ++i) {
      const int64_t s = tt.input_shard[static_cast<size_t>(t)][i];
      if (plan_.owner(n.inputs[i], s) == me)
        comm_.send(dev, tag(n, t * static_cast<int64_t>(ins) + static_cast<int64_t>(i), false), values(n.inputs[i])[static_cast<size_t>(s)].data);
    }
  }
  std::vector<const Tensor<float>*> in(ins);
  std::vector<Tensor<float>> out(n.outputs.size());
  auto& received = received_[static_cast<size_t>(n.id)];
  for (int64_t t = 0; t < tt.tasks; ++t) {
    if (np.task_device[static_cast<size_t>(t)] != me) continue;
    for (size_t i = 0; i < ins; ++i) {
      const int64_t s = tt.input_shard[static_cast<size_t>(t)][i];
      const int from = plan_.owner(n.inputs[i], s);
      if (from == me) {
        in[i] = &values(n.inputs[i])[static_cast<size_t>(s)];
        continue;
      }
      Tensor<float>& r = received[{t, i}];
      if (r.shape.empty() && r.data.empty()) r = Tensor<float>(plan_.graph->shape(n.inputs[i]).shard_shape());
      comm_.recv(from, tag(n, t * static_cast<int64_t>(ins) + static_cast<int64_t>(i), false), r.data);
      in[i] = &r;
    }
    for (size_t o = 0; o < out.size(); ++o) {
      out[o] = std::move(values({n.id, static_cast<int32_t>(o)})[static_cast<size_t>(tt.output_shard[static_cast<size_t>(t)][o])]);
      zero(out[o]);
    }
    const TaskContext ctx = tt.context(t);
    n.op->kernel_f32(KernelArgs<float>{n.attrs, in, out, ctx});
    for (size_t o = 0; o < out.size(); ++o)
      values({n.id, static_cast<int32_t>(o)})[static_cast<size_t>(tt.output_shard[static_cast<size_t>(t)][o])] = std::move(out[o]);
  }
}

void DeviceExecutor::forward_moves(const Node& n) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const int me = comm_.rank();
  auto src_of = [&](const Move& m) { return plan_.owner(n.inputs[static_cast<size_t>(m.input)], m.in_shard); };
  auto dst_of = [&](const Move& m) { return np.owner[static_cast<size_t>(m.output)][static_cast<size_t>(m.out_shard)]; };
  // What travels: a cut is made before sending, a placement after.
  auto payload = [&](const Move& m) {
    const Tensor<float>& x = values(n.inputs[static_cast<size_t>(m.input)])[static_cast<size_t>(m.in_shard)];
    return m.kind == Move::Kind::kCut ? slice_block(x, m.offset, n.outputs[static_cast<size_t>(m.output)].shard_shape()) : x;
  };
  for (size_t k = 0; k < np.moves.size(); ++k) {
    const Move& m = np.moves[k];
    if (src_of(m) == me && dst_of(m) != me) comm_.send(dst_of(m), tag(n, static_cast<int64_t>(k), false), payload(m).data);
  }
  for (size_t o = 0; o < n.outputs.size(); ++o)
    for (auto& t : values({n.id, static_cast<int32_t>(o)})) zero(t);
  for (size_t k = 0; k < np.moves.size(); ++k) {
    const Move& m = np.moves[k];
    if (dst_of(m) != me) continue;
    Tensor<float> x;
    if (src_of(m) == me) {
      x = payload(m);
    } else {
      x = Tensor<float>(m.kind == Move::Kind::kCut ? n.outputs[static_cast<size_t>(m.output)].shard_shape()
                                                  : plan_.graph->shape(n.inputs[static_cast<size_t>(m.input)]).shard_shape());
      comm_.recv(src_of(m), tag(n, static_cast<int64_t>(k), false), x.data);
    }
    Tensor<float>& y = values({n.id, m.output})[static_cast<size_t>(m.out_shard)];
    if (m.kind == Move::Kind::kPlace) add_block(y, m.offset, x);
    else add_into(y, x);
  }
}

void DeviceExecutor::backward() {
  const Graph& g = *plan_.graph;
  for (auto& node : grads_)
    for (auto& out : node)
      for (auto& t : out) zero(t);
  const TensorRef out = g.outputs().at(0);
  const ParallelTensorShape& s = g.shape(out);
  for (int64_t b = 0; b < s.num_blocks(); ++b)  // replica slot 0 holds the loss
    if (owns(out, b)) std::fill(grads(out)[static_cast<size_t>(b)].data.begin(), grads(out)[static_cast<size_t>(b)].data.end(), 1.f);
  for (size_t k = g.size(); k-- > 0;) {
    const Node& n = g.node(static_cast<NodeId>(k));
    if (n.op->op_class == OpClass::kSource) continue;
    if (n.op->is_shard_level(n.attrs)) backward_moves(n);
    else backward_compute(n);
  }
}

void DeviceExecutor::backward_compute(const Node& n) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const TaskTable& tt = np.tasks;
  const int me = comm_.rank();
  const size_t ins = n.inputs.size();
  auto is_float = [&](size_t i) { return plan_.graph->shape(n.inputs[i]).dtype == DataType::kFloat32; };
  std::vector<const Tensor<float>*> in(ins), out(n.outputs.size()), dout(n.outputs.size());
  std::vector<Tensor<float>> din(ins);
  auto& received = received_[static_cast<size_t>(n.id)];
  for (int64_t t = 0; t < tt.tasks; ++t) {
    if (np.task_device[static_cast<size_t>(t)] != me) continue;
    for (size_t i = 0; i < ins; ++i) {
      const int64_t s = tt.input_shard[static_cast<size_t>(t)][i];
      in[i] = plan_.owner(n.inputs[i], s) == me ? &values(n.inputs[i])[static_cast<size_t>(s)] : &received.at({t, i});
      if (din[i].shape != in[i]->shape) din[i] = Tensor<float>(in[i]->shape);
      else zero(din[i]);
    }
    for (size_t o = 0; o < out.size(); ++o) {
      const auto j = static_cast<size_t>(tt.output_shard[static_cast<size_t>(t)][o]);
      out[o] = &values({n.id, static_cast<int32_t>(o)})[j];
      dout[o] = &grads({n.id, static_cast<int32_t>(o)})[j];
    }
    const TaskContext ctx = tt.context(t);
    n.op->grad_f32(GradArgs{n.attrs, in, out, dout, din, ctx});
    for (size_t i = 0; i < ins; ++i) {
      if (!is_float(i)) continue;
      const int64_t s = tt.input_shard[static_cast<size_t>(t)][i];
      const int owner = plan_.owner(n.inputs[i], s);
      if (owner == me) add_into(grads(n.inputs[i])[static_cast<size_t>(s)], din[i]);
      else comm_.send(owner, tag(n, t * static_cast<int64_t>(ins) + static_cast<int64_t>(i), true), din[i].data);
    }
  }
  for (int64_t t = 0; t < tt.tasks; ++t) {
    if (np.task_device[static_cast<size_t>(t)] == me) continue;
    for (size_t i = 0; i < ins; ++i) {
      const int64_t s = tt.input_shard[static_cast<size_t>(t)][i];
      if (!is_float(i) || plan_.owner(n.inputs[i], s) != me) continue;
      Tensor<float> part(plan_.graph->shape(n.inputs[i]).shard_shape());
      comm_.recv(np.task_device[static_cast<size_t>(t)], tag(n, t * static_cast<int64_t>(ins) + static_cast<int64_t>(i), true), part.data);
      add_into(grads(n.inputs[i])[static_cast<size_t>(s)], part);
    }
  }
}

void DeviceExecutor::backward_moves(const Node& n) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const int me = comm_.rank();
  auto src_of = [&](const Move& m) { return plan_.owner(n.inputs[static_cast<size_t>(m.input)], m.in_shard); };
  auto dst_of = [&](const Move& m) { return np.owner[static_cast<size_t>(m.output)][static_cast<size_t>(m.out_shard)]; };
  auto in_extent = [&](const Move& m) { return plan_.graph->shape(n.inputs[static_cast<size_t>(m.input)]).shard_shape(); };
  // The transpose of a move: a placement's gradient is cut before sending,
  // a cut's gradient is placed after receiving.
  auto apply = [&](const Move& m, const Tensor<float>& g) {
    Tensor<float>& into = grads(n.inputs[static_cast<size_t>(m.input)])[static_cast<size_t>(m.in_shard)];
    if (m.kind == Move::Kind::kCut) add_block(into, m.offset, g);
    else add_into(into, g);
  };
  for (size_t k = 0; k < np.moves.size(); ++k) {
    const Move& m = np.moves[k];
    if (dst_of(m) != me) continue;
    const Tensor<float>& dy = grads({n.id, m.output})[static_cast<size_t>(m.out_shard)];
    const Tensor<float> g = m.kind == Move::Kind::kPlace ? slice_block(dy, m.offset, in_extent(m)) : dy;
    if (src_of(m) == me) apply(m, g);
    else comm_.send(src_of(m), tag(n, static_cast<int64_t>(k), true), g.data);
  }
  for (size_t k = 0; k < np.moves.size(); ++k) {
    const Move& m = np.moves[k];
    if (src_of(m) != me || dst_of(m) == me) continue;
    Tensor<float> g(m.kind == Move::Kind::kCut ? n.outputs[static_cast<size_t>(m.output)].shard_shape() : in_extent(m));
    comm_.recv(dst_of(m), tag(n, static_cast<int64_t>(k), true), g.data);
    apply(m, g);
  }
}

}  // namespace pcgx::runtime
