#include "pcgx/runtime/evaluate.h"

#include <algorithm>
#include <optional>

#include "pcgx/pcg/error.h"
#include "pcgx/runtime/execution_plan.h"
#include "pcgx/runtime/gather.h"
#include "pcgx/runtime/in_process.h"
#include "pcgx/runtime/mpi.h"
#include "pcgx/runtime/synthetic_task.h"
#include "pcgx/runtime/train_state.h"
#include "device_setup.h"

namespace pcgx::runtime {
namespace {

struct Setup {
  std::vector<NodeId> weights, inputs;
  ExecutionPlan plan;
  std::optional<SyntheticTask> synthetic;
  const BatchSource* data = nullptr;
  const BatchSource& source() const { return data ? *data : *synthetic; }
  // A classification loss's logits and labels (graph output 0's inputs).
  std::optional<std::pair<TensorRef, TensorRef>> classes;
};

Setup prepare(const Graph& g, std::span<const MachineView> views, int devices, const EvalOptions& o) {
  if (!o.weights) throw Error("evaluate: no weights given");
  Setup s;
  for (const Node& n : g.nodes()) {
    if (n.op->is_weight) s.weights.push_back(n.id);
    else if (n.op->op_class == OpClass::kSource) s.inputs.push_back(n.id);
  }
  check_weights(*o.weights, g, s.weights, "weights");
  s.plan = make_plan(g, views, devices);
  s.plan.precision = o.precision;
  s.data = o.data;
  if (!s.data) s.synthetic.emplace(g, o.seed, std::max<int64_t>(o.batches, 1));
  // The loss itself, beneath the parallel operators that combine its
  // partial sums (a data-parallel plan's Reduce).
  const Node* loss = &g.node(g.outputs().at(0).node);
  while (loss->op->op_class == OpClass::kParallel && !loss->inputs.empty()) loss = &g.node(loss->inputs[0].node);
  if (loss->op->loss == LossKind::kClassification) s.classes.emplace(loss->inputs[0], loss->inputs[1]);
  // Accuracy reads the whole batch's logits, which a plan with
  // micro-batches never holds at once.
  if (s.classes && s.plan.micro_batches > 1)
    throw Error("a plan with " + std::to_string(s.plan.micro_batches) +
                " micro-batches holds one micro-batch's logits at a time: evaluate the model (or a plan without "
                "micro-batches) for its accuracy");
  return s;
}

// One device's pass over the data; rank 0 fills `r`.
void run_device(const Graph& g, const Setup& s, Communicator& comm, const EvalOptions& o, EvalResult& r) {
  const KernelThreadsScope threads(o.threads);
  Device d = open_device(s.plan, comm, o.backend);
  DeviceExecutor& ex = *d.ex;
  for (NodeId w : s.weights) ex.set_source(w, o.weights->at(g.node(w).name));
  const BatchSource& data = s.source();
  double loss = 0;
  int64_t correct = 0, samples = 0;
  for (int64_t b = 0; b < data.batches(); ++b) {
    const auto& batch = data.batch(b);
    for (NodeId i : s.inputs) ex.set_source(i, batch.at(g.node(i).name));
    loss += ex.forward();
    if (!s.classes) continue;
    int64_t tag = kGatherTag;
    const Tensor<float> logits = gather_tensor(ex, s.classes->first, comm, tag);
    const Tensor<float> labels = gather_tensor(ex, s.classes->second, comm, tag);
    if (comm.rank() != 0) continue;
    const int64_t k = logits.shape.back(), rows = logits.numel() / k;
    for (int64_t i = 0; i < rows; ++i) {
      const float* row = logits.data.data() + i * k;
      const auto best = std::max_element(row, row + k) - row;
      correct += best == static_cast<int64_t>(labels.data[static_cast<size_t>(i)]);
    }
    samples += rows;
  }
  if (comm.rank() != 0) return;
  r.batches = data.batches();
  r.loss = loss / static_cast<double>(std::max<int64_t>(r.batches, 1));
  r.classification = s.classes.has_value();
  if (r.classification) r.samples = samples, r.accuracy = samples ? static_cast<double>(correct) / static_cast<double>(samples) : 0;
  else r.samples = r.batches * g.node(s.inputs.front()).outputs[0].logical_shape().front();
  r.data = data.describe();
}

}  // namespace

EvalResult evaluate(const Graph& g, std::span<const MachineView> views, int devices, const EvalOptions& options) {
  const Setup s = prepare(g, views, devices, options);
  EvalResult r;
  InProcessWorld world(devices);
  world.run([&](Communicator& comm) { run_device(g, s, comm, options, r); });
  return r;
}

EvalResult evaluate(const Graph& g, std::span<const MachineView> views, MpiWorld& world, const EvalOptions& options) {
  const Setup s = prepare(g, views, world.size(), options);
  EvalResult r;
  run_device(g, s, world.communicator(), options, r);
  return r;
}

}  // namespace pcgx::runtime
