#include "pcgx/runtime/synthetic_task.h"

#include <algorithm>
#include <cmath>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/stable_hash.h"

namespace pcgx::runtime {
namespace {

// The node behind t through shard-level operators (layout only).
TensorRef through_layout(const Graph& g, TensorRef t) {
  while (g.node(t.node).op->op_class == OpClass::kParallel) t = g.node(t.node).inputs.at(0);
  return t;
}

constexpr uint64_t kTeacher = 0x7EAC4E5ULL;

}  // namespace

Tensor<float> initial_weight(const Node& w, uint64_t seed) {
  const ParallelTensorShape& s = w.outputs[0];
  const auto shape = s.logical_shape();
  const std::string& init = w.attrs.get_string("init");
  Tensor<float> t(shape);
  if (init == "zeros" || init == "ones") {
    std::fill(t.data.begin(), t.data.end(), init == "ones" ? 1.f : 0.f);
    return t;
  }
  int64_t fan_in = shape.empty() ? 1 : shape[0];
  if (shape.size() > 2) fan_in = product(std::span(shape).subspan(1));
  t = random_tensor<float>({shape, DataType::kFloat32}, hash_mix(seed, hash_string(w.name)));
  const auto a = static_cast<float>(std::sqrt(3.0 / static_cast<double>(std::max<int64_t>(fan_in, 1))));
  for (float& v : t.data) v *= a;
  return t;
}

SyntheticTask::SyntheticTask(const Graph& g, uint64_t seed, int64_t batches) {
  if (g.outputs().empty()) throw Error("model '" + g.name() + "' has no output");
  const Node& loss = g.node(through_layout(g, g.outputs()[0]).node);
  if (loss.op->loss == LossKind::kNone)
    throw Error("model '" + g.name() + "': output 0 is " + pcgx::describe(loss) + ", not a loss (MSELoss, SoftmaxCrossEntropy)");
  const TensorRef pred = loss.inputs[0];
  const Node& target = g.node(through_layout(g, loss.inputs[1]).node);
  if (target.op->op_class != OpClass::kSource || target.op->is_weight) throw Error(pcgx::describe(loss) + ": its target is not a graph input");
  target_ = target.name;
  int64_t batch_bytes = 0;
  for (const Node& n : g.nodes())
    if (n.op->op_class == OpClass::kSource && !n.op->is_weight) batch_bytes += n.outputs[0].num_elements() * int64_t{sizeof(float)};
  if (batches > kMaxSyntheticBatchBytes / std::max<int64_t>(batch_bytes, 1))
    throw Error("synthetic data: " + std::to_string(batches) + " batches of " + std::to_string(batch_bytes) + " bytes exceed the " +
                std::to_string(kMaxSyntheticBatchBytes >> 30) + " GiB kept in memory: use fewer batches");
  batches_.reserve(static_cast<size_t>(batches));
  for (int64_t b = 0; b < batches; ++b) {
    std::map<std::string, Tensor<float>> batch;
    const uint64_t bseed = hash_mix(seed, static_cast<uint64_t>(b) + 1);
    const auto teacher = evaluate<float>(g, [&](const Node& n) {
      if (n.op->is_weight) return initial_weight(n, seed ^ kTeacher);
      const ParallelTensorShape& s = n.outputs[0];
      if (n.name == target_) return Tensor<float>(s.logical_shape());
      const int64_t range = n.attrs.get_int("index_range");
      Tensor<float> x = random_tensor<float>({s.logical_shape(), s.dtype}, hash_mix(bseed, hash_string(n.name)), range);
      batch[n.name] = x;
      return x;
    });
    const ShardedTensor<float>& p = teacher[static_cast<size_t>(pred.node)][static_cast<size_t>(pred.output)];
    Tensor<float> y = gather_slot(p, 0);
    if (loss.op->loss == LossKind::kClassification) {
      const int64_t classes = y.shape.back(), rows = y.numel() / classes;
      Tensor<float> labels(std::vector<int64_t>(y.shape.begin(), y.shape.end() - 1));
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = y.data.data() + r * classes;
        labels.data[static_cast<size_t>(r)] = static_cast<float>(std::max_element(row, row + classes) - row);
      }
      y = std::move(labels);
    }
    batch[target_] = std::move(y);
    batches_.push_back(std::move(batch));
  }
}

const std::map<std::string, Tensor<float>>& SyntheticTask::batch(int64_t step) const {
  return batches_[static_cast<size_t>(step % static_cast<int64_t>(batches_.size()))];
}

std::string SyntheticTask::describe() const {
  return "synthetic teacher task (" + std::to_string(batches_.size()) + " batches, target '" + target_ + "')";
}

}  // namespace pcgx::runtime
