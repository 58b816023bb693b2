#include "pcgx/runtime/execution_plan.h"

#include "pcgx/pcg/error.h"

namespace pcgx::runtime {
namespace {

DeviceView view_of(std::span<const DeviceView> views, NodeId n) {
  return static_cast<size_t>(n) < views.size() && views[static_cast<size_t>(n)].start >= 0 ? views[static_cast<size_t>(n)]
                                                                                             : DeviceView{};
}

// The moves building every output shard of a shard-level operator.
std::vector<Move> moves_of(const Node& n, std::span<const ParallelTensorShape> in) {
  std::vector<Move> moves;
  const std::string& op = n.op->name;
  const ParallelTensorShape& out = n.outputs[0];
  std::vector<int64_t> block;
  int64_t slot = 0;
  auto copy = [&](int32_t output, int64_t j, int32_t input, int64_t s) {
    moves.push_back({output, static_cast<int32_t>(j), input, static_cast<int32_t>(s), Move::Kind::kCopy, {}});
  };
  if (op == "Repartition" || op == "Combine") {
    const auto dim = static_cast<size_t>(n.attrs.get_int("dim"));
    const int64_t k = n.attrs.get_int("degree");
    for (int64_t j = 0; j < out.num_shards(); ++j) {
      out.shard_coords(j, slot, block);
      if (op == "Repartition") {
        std::vector<int64_t> offset(block.size(), 0);
        offset[dim] = (block[dim] % k) * out.shard_shape()[dim];
        block[dim] /= k;
        moves.push_back({0, static_cast<int32_t>(j), 0, static_cast<int32_t>(in[0].shard_index(slot, block)), Move::Kind::kCut, offset});
      } else {
        const int64_t base = block[dim] * k;
        for (int64_t m = 0; m < k; ++m) {
          std::vector<int64_t> offset(block.size(), 0);
          offset[dim] = m * in[0].shard_shape()[dim];
          std::vector<int64_t> src = block;
          src[dim] = base + m;
          moves.push_back({0, static_cast<int32_t>(j), 0, static_cast<int32_t>(in[0].shard_index(slot, src)), Move::Kind::kPlace, offset});
        }
      }
    }
  } else if (op == "Replicate" || op == "Reduce" || op == "AllReduce") {
    const int64_t k = n.attrs.get_int("degree"), blocks = out.num_blocks();
    for (int64_t c = 0; c < out.replica; ++c)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t j = c * blocks + b;
        if (op == "Replicate") copy(0, j, 0, (c / k) * blocks + b);
        if (op == "Reduce")
          for (int64_t m = 0; m < k; ++m) copy(0, j, 0, (c * k + m) * blocks + b);
        if (op == "AllReduce")
          for (int64_t m = 0; m < k; ++m) copy(0, j, 0, ((c / k) * k + m) * blocks + b);
      }
  } else if (op == "Pipeline" || op == "Batch") {
    for (int64_t j = 0; j < out.num_shards(); ++j) copy(0, j, 0, j);
  } else if (op == "Concat") {  // replica axis: the inputs' slots, in order
    int64_t j = 0;
    for (size_t i = 0; i < in.size(); ++i)
      for (int64_t s = 0; s < in[i].num_shards(); ++s) copy(0, j++, static_cast<int32_t>(i), s);
  } else if (op == "Split") {
    int64_t s = 0;
    for (size_t o = 0; o < n.outputs.size(); ++o)
      for (int64_t j = 0; j < n.outputs[o].num_shards(); ++j) copy(static_cast<int32_t>(o), j, 0, s++);
  } else {
    throw Error(describe(n) + ": the runtime has no execution rule for shard-level " + op);
  }
  return moves;
}

}  // namespace

int devices_needed(const Graph& g, std::span<const DeviceView> views) {
  int64_t need = 1;
  for (const Node& n : g.nodes()) {
    if (n.op->is_shard_level(n.attrs) || n.op->op_class == OpClass::kSource) continue;
    const DeviceView v = view_of(views, n.id);
    need = std::max(need, v.start + (n.outputs[0].num_shards() - 1) * v.stride + 1);
  }
  return static_cast<int>(need);
}

ExecutionPlan make_plan(const Graph& g, std::span<const DeviceView> views, int devices) {
  ExecutionPlan plan;
  plan.graph = &g;
  plan.devices = devices;
  plan.nodes.resize(g.size());
  for (const Node& n : g.nodes()) {
    NodePlan& np = plan.nodes[static_cast<size_t>(n.id)];
    for (const auto& s : n.outputs) np.owner.emplace_back(static_cast<size_t>(s.num_shards()), -1);
    if (n.op->op_class == OpClass::kSource) continue;
    std::vector<ParallelTensorShape> in;
    for (const TensorRef& t : n.inputs) in.push_back(g.shape(t));
    if (n.op->is_shard_level(n.attrs)) {
      np.moves = moves_of(n, in);
      continue;
    }
    if (!n.op->kernel_f32 || !n.op->grad_f32) throw Error(describe(n) + ": the runtime has no kernel or gradient rule for it");
    np.tasks = task_table(*n.op, n.attrs, in, n.outputs);
    const DeviceView v = view_of(views, n.id);
    for (int64_t t = 0; t < np.tasks.tasks; ++t) {
      const int64_t d = v.start + t * v.stride;
      if (d >= devices)
        throw Error(describe(n) + ": task " + std::to_string(t) + " runs on device " + std::to_string(d) +
                    ", but only " + std::to_string(devices) + " devices are available (the strategy needs " +
                    std::to_string(devices_needed(g, views)) + ")");
      np.task_device.push_back(static_cast<int>(d));
      for (size_t o = 0; o < n.outputs.size(); ++o)
        np.owner[o][static_cast<size_t>(np.tasks.output_shard[static_cast<size_t>(t)][o])] = static_cast<int>(d);
    }
  }
  // Everything else is owned by its first reader; readers come later in id
  // order, so a reverse sweep settles readers before what they read.
  for (size_t k = g.size(); k-- > 0;) {
    const Node& n = g.node(static_cast<NodeId>(k));
    NodePlan& np = plan.nodes[k];
    for (size_t o = 0; o < np.owner.size(); ++o)
      for (size_t s = 0; s < np.owner[o].size(); ++s)
        if (np.owner[o][s] < 0) np.owner[o][s] = static_cast<int>(s % static_cast<size_t>(devices));  // never read
    if (n.op->op_class == OpClass::kSource) continue;
    auto claim = [&](size_t input, int64_t shard, int device) {
      const TensorRef t = n.inputs[input];
      NodePlan& producer = plan.nodes[static_cast<size_t>(t.node)];
      if (!producer.task_device.empty()) return;  // a compute output stays with its task
      // Readers are visited last to first, so the first reader claims last.
      producer.owner[static_cast<size_t>(t.output)][static_cast<size_t>(shard)] = device;
    };
    if (!np.moves.empty()) {
      for (const Move& m : np.moves) claim(static_cast<size_t>(m.input), m.in_shard, np.owner[static_cast<size_t>(m.output)][static_cast<size_t>(m.out_shard)]);
    } else {
      for (int64_t t = 0; t < np.tasks.tasks; ++t)
        for (size_t i = 0; i < n.inputs.size(); ++i)
          claim(i, np.tasks.input_shard[static_cast<size_t>(t)][i], np.task_device[static_cast<size_t>(t)]);
    }
  }
  return plan;
}

}  // namespace pcgx::runtime
