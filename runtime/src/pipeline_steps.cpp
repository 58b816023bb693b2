// A step under a pipeline schedule (device_executor.h, "Pipeline
// schedules"): this device's stage program, one chunk per step, and the
// activation sets of the micro-batches in flight.
#include <algorithm>

#include "pcgx/pcg/error.h"
#include "pcgx/runtime/device_executor.h"

namespace pcgx::runtime {

void DeviceExecutor::init_slices() {
  slice_contexts_.clear(), slice_offsets_.clear();
  if (plan_.micro_batches == 1) return;
  const Graph& g = *plan_.graph;
  const int me = comm_.rank();
  const auto M = static_cast<size_t>(plan_.micro_batches);
  slice_contexts_.assign(M, std::vector<std::vector<TaskContext>>(g.size()));
  slice_offsets_.assign(M, std::vector<std::vector<int64_t>>(g.size()));
  for (const Node& n : g.nodes()) {
    const auto id = static_cast<size_t>(n.id);
    if (pass_[id] != 1) continue;
    // (A node with no pipelined input or output reads its whole shards.)
    bool sliced = false;
    for (const TensorRef& in : n.inputs) sliced = sliced || micro(in);
    for (size_t o = 0; o < n.outputs.size(); ++o) sliced = sliced || micro({n.id, static_cast<int32_t>(o)});
    for (size_t k = 0; k < M; ++k) {
      const auto slice = static_cast<int64_t>(k);
      // Where a Pipeline cuts (a Batch places) the micro-batch in the whole
      // shard, which spans the pipelined dimensions (make_plan checks).
      if (n.op->data_move == DataMove::kPipeline || n.op->data_move == DataMove::kBatch) {
        const ParallelTensorShape& s = n.op->data_move == DataMove::kPipeline ? n.outputs[0] : g.shape(n.inputs[0]);
        const std::vector<int64_t> zeros(s.dims.size(), 0);
        micro_batch_offset(s, zeros, slice, slice_offsets_[k][id]);
      }
      if (!sliced) continue;
      const NodePlan& np = plan_.nodes[id];
      for (int64_t t = 0; t < np.tasks.tasks; ++t) {
        if (np.task_device[static_cast<size_t>(t)] != me) continue;
        auto& tasks = slice_contexts_[k][id];
        if (tasks.empty()) tasks = contexts_[id];
        TaskContext& c = tasks[static_cast<size_t>(t)];
        const TaskContext& base = contexts_[id][static_cast<size_t>(t)];
        for (size_t i = 0; i < n.inputs.size(); ++i)
          if (micro(n.inputs[i])) micro_batch_offset(g.shape(n.inputs[i]), base.input_offsets[i], slice, c.input_offsets[i]);
        for (size_t o = 0; o < n.outputs.size(); ++o)
          if (micro({n.id, static_cast<int32_t>(o)})) micro_batch_offset(n.outputs[o], base.output_offsets[o], slice, c.output_offsets[o]);
      }
    }
  }
}

void DeviceExecutor::init_pipeline() {
  if (!plan_.pipeline) return init_slices();
  starts_freed_.assign(plan_.graph->size(), 0);
  for (const RecomputeSegment& seg : plan_.segments)
    for (NodeId n : seg.nodes) starts_freed_[static_cast<size_t>(n)] = 1;
  for (const FreedNode& f : plan_.freed) starts_freed_[static_cast<size_t>(f.node)] = 1;
  const Graph& g = *plan_.graph;
  const PipelineShape& p = *plan_.pipeline;
  const int64_t C = p.chunks(), stage = comm_.rank() / plan_.stage_devices;
  if (stage < p.stages) program_ = stage_programs(p)[static_cast<size_t>(stage)];  // else a device the strategy leaves idle
  auto here = [&](int64_t c) { return c >= 0 && p.runs_on(c, stage); };  // an interlaced chunk: every stage
  // A node of another stage belongs here to the latest chunk of this stage
  // it reads from (this device sends it what it reads), else to the first
  // chunk here that reads it (this device receives from it).
  const size_t N = g.size();
  std::vector<int64_t> up(N, -1), down(N, -1);
  for (const Node& n : g.nodes()) {
    int64_t& u = up[static_cast<size_t>(n.id)];
    u = here(plan_.chunk[static_cast<size_t>(n.id)]) ? plan_.chunk[static_cast<size_t>(n.id)] : -1;
    if (u < 0)
      for (const TensorRef& t : n.inputs) u = std::max(u, up[static_cast<size_t>(t.node)]);
  }
  const auto consumers = g.consumers();
  for (size_t k = N; k-- > 0;) {
    int64_t& d = down[k];
    d = here(plan_.chunk[k]) ? plan_.chunk[k] : -1;
    if (d >= 0) continue;
    for (const auto& [c, i] : consumers[k]) {
      const int64_t x = down[static_cast<size_t>(c)];
      if (x >= 0 && (d < 0 || x < d)) d = x;
    }
  }
  step_chunk_.assign(N, -1);
  chunk_nodes_.assign(static_cast<size_t>(C), {});
  chunk_tensors_.assign(static_cast<size_t>(C), {});
  chunk_shards_.assign(static_cast<size_t>(C), {});
  for (const Node& n : g.nodes()) {
    const auto id = static_cast<size_t>(n.id);
    const int64_t c = here(plan_.chunk[id]) ? plan_.chunk[id] : up[id] >= 0 ? up[id] : down[id];
    step_chunk_[id] = c;
    if (c < 0 || pass_of(n.id) != 1) continue;
    chunk_nodes_[static_cast<size_t>(c)].push_back(n.id);
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      const auto& v = values_[id][o];
      if (micro_[id][o] && std::any_of(v.begin(), v.end(), [](const Buffer& b) { return static_cast<bool>(b); }))
        chunk_tensors_[static_cast<size_t>(c)].push_back({n.id, static_cast<int32_t>(o)});
    }
  }
  // What a chunk's backward can write: its nodes' pipelined outputs and
  // inputs.
  chunk_grads_.assign(static_cast<size_t>(C), {});
  for (int64_t c = 0; c < C; ++c) {
    auto& list = chunk_grads_[static_cast<size_t>(c)];
    auto add = [&](TensorRef t) {
      if (micro(t) && std::find(list.begin(), list.end(), t) == list.end()) list.push_back(t);
    };
    for (NodeId id : chunk_nodes_[static_cast<size_t>(c)]) {
      const Node& n = g.node(id);
      for (int32_t o = 0; o < static_cast<int32_t>(n.outputs.size()); ++o) add({id, o});
      for (const TensorRef& t : n.inputs) add(t);
    }
  }
  init_slices();
  // Read across chunks here (an interlaced chunk beside one of this
  // stage's): the step of the reader swaps the producer's set in too.
  crosses_.assign(N, 0);
  for (const Node& n : g.nodes())
    for (const TensorRef& t : n.inputs) {
      const int64_t from = step_chunk_[static_cast<size_t>(t.node)], to = step_chunk_[static_cast<size_t>(n.id)];
      if (from >= 0 && to == from + 1 && pass_of(t.node) == 1 && pass_of(n.id) == 1) crosses_[static_cast<size_t>(t.node)] = 1;
    }
  // A value no backward reads is freed by the chunk step that last reads
  // it on this device: one written here in one step and read in another
  // (a stage boundary this device receives for a later chunk) stays with
  // its micro-batch's activation set. (A stage boundary this device sends
  // is read here, for the sending, in the step that writes it.)
  for (size_t k = 0; k < N; ++k)
    std::erase_if(free_nodes_after_forward_[k], [&](NodeId f) {
      const bool apart = step_chunk_[static_cast<size_t>(f)] != step_chunk_[k];
      if (apart) starts_freed_[static_cast<size_t>(f)] = 0;
      return apart;
    });
  for (const RecomputeSegment& seg : plan_.segments)  // (a recomputed one still starts freed)
    for (NodeId n : seg.nodes) starts_freed_[static_cast<size_t>(n)] = 1;
  // The buffers init() made become each chunk's first activation set.
  free_sets_.assign(static_cast<size_t>(C), {});
  sets_made_.assign(static_cast<size_t>(C), 0);
  for (int64_t c = 0; c < C; ++c) {
    ActivationSet s;
    s.received.resize(chunk_nodes_[static_cast<size_t>(c)].size());
    for (const TensorRef& t : chunk_tensors_[static_cast<size_t>(c)]) {
      auto& v = values(t);
      auto& held = chunk_shards_[static_cast<size_t>(c)].emplace_back();
      for (const Buffer& b : v) held.push_back(b ? 1 : 0);
      s.values.push_back(std::move(v));
      v.assign(s.values.back().size(), Buffer{});
    }
    for (NodeId n : chunk_nodes_[static_cast<size_t>(c)]) {
      s.released.push_back(released_[static_cast<size_t>(n)]);
      s.freed.push_back(freed_floats_[static_cast<size_t>(n)]);
    }
    free_sets_[static_cast<size_t>(c)].push_back(std::move(s));
  }
}

std::vector<int64_t> DeviceExecutor::activation_sets() const { return sets_made_; }

DeviceExecutor::ActivationSet DeviceExecutor::new_set(int64_t chunk) {
  const auto c = static_cast<size_t>(chunk);
  ActivationSet s;
  s.received.resize(chunk_nodes_[c].size());
  s.released.assign(chunk_nodes_[c].size(), 0);
  s.freed.assign(chunk_nodes_[c].size(), 0);
  // A recomputed or freed node's outputs start released, as
  // init_recompute() leaves the first set's: each is allocated when its
  // forward runs (so never counted here, where the backend frees it).
  std::vector<int64_t> freed_of(chunk_nodes_[c].size(), -1);
  for (size_t i = 0; i < chunk_nodes_[c].size(); ++i)
    if (starts_freed_[static_cast<size_t>(chunk_nodes_[c][i])]) freed_of[i] = 0;
  for (size_t k = 0; k < chunk_tensors_[c].size(); ++k) {
    const TensorRef t = chunk_tensors_[c][k];
    const auto at = static_cast<size_t>(std::find(chunk_nodes_[c].begin(), chunk_nodes_[c].end(), t.node) - chunk_nodes_[c].begin());
    int64_t* freed = at < freed_of.size() && freed_of[at] >= 0 ? &freed_of[at] : nullptr;
    const ParallelTensorShape& shape = plan_.graph->node(t.node).outputs[static_cast<size_t>(t.output)];
    const std::vector<char>& shards = chunk_shards_[c][k];
    auto& v = s.values.emplace_back(shards.size());
    for (size_t j = 0; j < v.size(); ++j) {
      if (!shards[j]) continue;
      if (!freed) {
        v[j] = allocate(shape.slice_shape());
        continue;
      }
      v[j] = backend_.allocate(shape.slice_shape());
      if (backend_.release(v[j])) *freed += v[j].numel;
      else held(v[j].numel);
    }
  }
  for (size_t i = 0; i < chunk_nodes_[c].size(); ++i)
    if (freed_of[i] >= 0) s.released[i] = 1, s.freed[i] = freed_of[i];
  backend_.trim();  // those blocks never held a value: the pool keeps only reused ones
  return s;
}

void DeviceExecutor::swap_set(int64_t chunk, ActivationSet& s) {
  const auto c = static_cast<size_t>(chunk);
  for (size_t k = 0; k < chunk_tensors_[c].size(); ++k) std::swap(values(chunk_tensors_[c][k]), s.values[k]);
  for (size_t k = 0; k < chunk_nodes_[c].size(); ++k) {
    const auto n = static_cast<size_t>(chunk_nodes_[c][k]);
    std::swap(received_[n], s.received[k]);
    std::swap(released_[n], s.released[k]);
    std::swap(freed_floats_[n], s.freed[k]);
  }
}

double DeviceExecutor::scheduled_step() {
  // What a step that failed part-way left in flight goes back to the pools.
  for (auto& [key, set] : in_flight_) free_sets_[static_cast<size_t>(key.first)].push_back(std::move(set));
  in_flight_.clear();
  clear_gradients(false);
  micro_batches_synced_ = 0;
  seed_loss();
  forward_pass(0);
  backward_pass(2);  // what follows the sum over micro-batches needs no forward value (execution_plan.h)
  std::vector<int64_t> in_use(sets_made_.size(), 0);
  const bool interlaced = !plan_.pipeline->interlaced.empty();
  for (const PipelineStep& x : program_) {
    const auto c = static_cast<size_t>(x.chunk);
    ActivationSet set;
    if (x.backward) {
      const auto it = in_flight_.find({x.chunk, x.micro_batch});
      if (it == in_flight_.end()) throw Error("pipeline: the " + describe(x) + " before its forward");
      set = std::move(it->second);
      in_flight_.erase(it);
    } else if (!free_sets_[c].empty()) {
      set = std::move(free_sets_[c].back());
      free_sets_[c].pop_back();
    } else {
      set = new_set(x.chunk);
    }
    if (!x.backward) sets_made_[c] = std::max(sets_made_[c], ++in_use[c]);
    swap_set(x.chunk, set);
    // The chunk before it, run here too (interlaced): its set of this
    // micro-batch, in flight, swapped in beside (what crosses_ reads).
    const auto before = in_flight_.find({x.chunk - 1, x.micro_batch});
    const bool beside = interlaced && before != in_flight_.end();
    if (beside) swap_set(x.chunk - 1, before->second);
    enter_slice(x.micro_batch, x.chunk, !x.backward);  // into the set's input layouts
    if (x.backward) {
      clear_chunk_gradients(x.chunk, interlaced ? std::optional<int64_t>(x.chunk - 1) : std::nullopt);
      chunk_backward(x.chunk);
    } else {
      chunk_forward(x.chunk);
    }
    if (beside) swap_set(x.chunk - 1, before->second);
    swap_set(x.chunk, set);
    // (ZeRO 2 and 3 run one stage of one chunk, micro-batches in order:
    // trainer.cpp; the last is synchronize_gradients()'.)
    if (x.backward && syncs_micro_batches() && x.micro_batch + 1 < plan_.micro_batches) reduce_scatter_micro_batch();
    if (x.backward) free_sets_[c].push_back(std::move(set)), --in_use[c];
    else if (!in_flight_.emplace(std::make_pair(x.chunk, x.micro_batch), std::move(set)).second)
      throw Error("pipeline: the " + describe(x) + " twice in one step");
  }
  forward_pass(2);
  backward_pass(0);
  return read_loss();
}

void DeviceExecutor::chunk_forward(int64_t chunk) {
  const Graph& g = *plan_.graph;
  for (NodeId c : sends_after_[0][g.size() + 1])
    if (step_chunk_[static_cast<size_t>(c)] == chunk) forward_sends(g.node(c));
  for (NodeId id : chunk_nodes_[static_cast<size_t>(chunk)]) forward_node(g.node(id));
}

void DeviceExecutor::chunk_backward(int64_t chunk) {
  const Graph& g = *plan_.graph;
  for (NodeId c : sends_after_[1][g.size() + 1])
    if (step_chunk_[static_cast<size_t>(c)] == chunk) backward_sends(g.node(c));
  const auto& nodes = chunk_nodes_[static_cast<size_t>(chunk)];
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) backward_node(g.node(*it));
}

}  // namespace pcgx::runtime
