// The runtime against the reference: the gradients a distributed step
// computes equal the reference interpreter's, and training a strategy on 4
// devices ends at the same weights as the unpartitioned model on 1 device.
#include <gtest/gtest.h>

#include <cmath>

#include "model_param_name.h"
#include "tensor_compare.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/gradients.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/device_executor.h"
#include "pcgx/runtime/in_process.h"
#include "pcgx/runtime/synthetic_task.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/search.h"

namespace pcgx::runtime {
namespace {

using search::CostModel;
using search::MachineMapper;

const search::RuleLibrary& library() {
  static const Ruleset rs = load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json");
  static const search::RuleLibrary lib(rs);
  return lib;
}

struct Mapped {
  Graph graph;
  std::vector<MachineView> views;
};

Mapped strategy(const Graph& model, search::Algorithm algorithm, int devices) {
  const CostModel cm(search::find_machine("dgx-h100").with_devices(devices), search::default_efficiency());
  const MachineMapper mapper(cm);
  search::SearchOptions o;
  o.algorithm = algorithm;
  o.budget = 6;
  search::SearchResult r = search::optimize(model, library(), mapper, o);
  Mapped m{std::move(r.strategy.graph), {}};
  m.views.assign(r.strategy.views.begin(), r.strategy.views.end());
  return m;
}

using pcgx::testing::relative_difference;

// One forward and backward on 4 devices: every value and gradient shard the
// devices hold equals the reference interpreter's for the same PCG. Layouts
// sliced from a source (execution_plan.h) take no backward pass of their
// own: a stored weight layout's copies, after synchronize_gradients, hold
// the weight's whole gradient, block by block.
void expect_step_matches_reference(const std::string& model) {
  const Mapped m = strategy(build_model(model), search::Algorithm::kDataParallel, 4);
  ExecutionPlan plan = make_plan(m.graph, m.views, 4);
  plan.freed.clear();  // every value kept through the step, so each node's can be compared
  const SyntheticTask task(m.graph, 3, 1);
  auto source = [&](const Node& n) { return n.op->is_weight ? initial_weight(n, 3) : task.batch(0).at(n.name); };
  const auto values = evaluate<float>(m.graph, source);
  const std::vector<ShardedTensor<float>> seed{loss_seed(m.graph.shape(m.graph.outputs()[0]))};
  const auto want = evaluate_gradients(m.graph, values, seed);
  InProcessWorld world(4);
  double loss = 0;
  world.run([&](Communicator& c) {
    DeviceExecutor ex(plan, c);
    for (const Node& n : m.graph.nodes())
      if (n.op->op_class == OpClass::kSource) ex.set_source(n.id, source(n));
    const double l = ex.forward();
    if (c.rank() == 0) loss = l;
    ex.backward();
    ex.synchronize_gradients();
    int stored = 0;
    for (const Node& n : m.graph.nodes()) {
      if (n.op->op_class == OpClass::kSource && !n.op->is_weight) continue;
      const bool sliced = plan.layouts.sliced(n.id);
      const bool weight_moved = n.op->is_weight && plan.parameter[static_cast<size_t>(n.id)].node != n.id;
      // The first operator of a layout change in one step produces nothing of its own.
      const NodePlan& np = plan.nodes[static_cast<size_t>(n.id)];
      const bool intermediate = np.to >= 0 && np.to != n.id;
      for (size_t o = 0; o < n.outputs.size() && !intermediate; ++o)
        for (int64_t k = 0; k < n.outputs[o].num_shards(); ++k) {
          const TensorRef t{n.id, static_cast<int32_t>(o)};
          if (!ex.owns(t, k)) continue;
          const auto& ref = want[static_cast<size_t>(n.id)][o].shards[static_cast<size_t>(k)];
          if (!sliced && !weight_moved) {
            EXPECT_LT(relative_difference(ex.gradient(t, k), ref), 1e-5) << describe(n) << " shard " << k;
          }
          EXPECT_LT(relative_difference(ex.value(t, k), values[static_cast<size_t>(n.id)][o].shards[static_cast<size_t>(k)]), 1e-5)
              << describe(n) << " shard " << k;
        }
      if (!weight_moved) continue;
      // Every copy of the stored layout: the weight's gradient over its block.
      const TensorRef p = plan.parameter[static_cast<size_t>(n.id)];
      const ParallelTensorShape& ps = m.graph.shape(p);
      const Tensor<float> whole = gather_slot(want[static_cast<size_t>(n.id)][0], 0);
      std::vector<int64_t> block;
      int64_t slot = 0;
      for (int64_t k = 0; k < ps.num_shards(); ++k) {
        if (!ex.owns(p, k)) continue;
        ps.shard_coords(k, slot, block);
        Tensor<float> expected(ps.shard_shape());
        read_block(whole, ps.block_offset(block), expected);
        EXPECT_LT(relative_difference(ex.gradient(p, k), expected), 1e-5) << describe(n) << " copy " << k;
        ++stored;
      }
    }
    if (c.rank() == 0) {
      EXPECT_GT(stored, 0) << "no stored weight layout: the test would not exercise them";
    }
  });
  const TensorRef out = m.graph.outputs()[0];
  EXPECT_NEAR(loss, values[static_cast<size_t>(out.node)][static_cast<size_t>(out.output)].shards[0].data[0], 1e-5);
}

class Runtime : public ::testing::TestWithParam<std::string> {};

TEST_P(Runtime, GradientsMatchTheReferenceInterpreter) { expect_step_matches_reference(GetParam()); }

// K steps of unity on 4 devices, data parallelism on 4 and the plain model
// on one device reach the same weights; the loss goes down.
//
// The BatchNorm models need care, because comparing runs assumes training
// that does not amplify rounding. At their default batch of 2, BatchNorm
// normalizes over 2 samples and training is chaotic: on ONE device, changing
// the learning rate by 1e-6 (relative) moved resnext-50-tiny's loss by 4e-6
// after one update but 13% after three (lr 0.05), and the 4-device runs part
// the same way. Batch 16 is not enough at lr 0.05 either: there the same
// 1e-6 change moves the loss 6e-4 after three updates and 7% after four
// (measured with `pcgx run resnext-50-tiny --batch 16 --lr 0.05 --seed 5
// --batches 1`), so whether a 4-device run stays within 1e-4 over 6 steps
// depends on the last bits of the kernels' rounding. At lr 0.01 the same
// change moves no step's loss by more than 2e-6, and data parallelism on 4
// devices matches one device to 3e-6: resnext-50-tiny runs there.
// inception-v3-tiny stays chaotic even at batch 32 (a 1e-6 learning-rate
// change: 9e-5 after one update, 3.6e-3 after two) and at lr 0.01 (10%
// after three updates), so it is compared over 2 steps (one update).
//
// Data-parallel plans run BatchNorm synchronized (BatchSum, BatchSquares,
// BatchNormApply split by samples). Its backward pass sums, over the shards,
// terms that cancel exactly (each shard's sum of x - mean), in float: at
// inception-v3-tiny's steep first step (gradients up to 105) the plan's
// gradients part from BatchNorm's by 0.5% (measured with the reference
// interpreter on both graphs), and its chaotic training amplifies that. So
// such a plan is compared with the same PCG run on one device: the runtime
// must distribute it without changing it. That the PCG computes the model
// is the interpreter's business (Baselines tests, SynchronizedBatchNorm
// gradient test, the axiom batch_norm_is_statistics_applied). Even so,
// inception-v3-tiny's second update is chaotic: the same PCG on one device
// and on four (partial sums added in another order) is 5e-5 apart in the
// loss before it and 0.12 apart in a weight after it (lr 0.05; measured):
// its losses, which span one update, are compared, not its final weights.
struct Setting {
  int64_t batch = 0;  // 0: the zoo's
  int64_t steps = 6;
  double lr = 0.05;
  bool final_weights = true;  // compare the weights after the last update too
};
Setting setting_for(const std::string& model) {
  if (model == "resnext-50-tiny") return {16, 6, 0.01};
  if (model == "inception-v3-tiny") return {16, 2, 0.05, false};
  return {};
}

TEST_P(Runtime, ParallelTrainingMatchesOneDevice) {
  const Setting st = setting_for(GetParam());
  ModelParams params;
  if (st.batch > 0) params["batch"] = st.batch;
  const Graph model = build_model(GetParam(), params);
  TrainOptions o;
  o.steps = st.steps;
  o.seed = 5;
  o.optimizer.lr = st.lr;
  o.batches = 1;  // one batch: the loss must fall
  const TrainResult plain = train(model, {}, 1, o);
  EXPECT_LT(plain.losses.back(), plain.losses.front()) << "the loss does not decrease";
  for (const search::Algorithm algorithm : {search::Algorithm::kDataParallel, search::Algorithm::kUnity}) {
    SCOPED_TRACE(search::name(algorithm));
    const Mapped m = strategy(model, algorithm, 4);
    bool statistics = false;
    for (const Node& n : m.graph.nodes()) statistics |= n.op->name == "BatchSum";
    // Every task of the plan on device 0: stride 0.
    const std::vector<MachineView> together(m.graph.size(), MachineView{0, 0, {}});
    const TrainResult one = statistics ? train(m.graph, together, 1, o) : plain;
    const TrainResult par = train(m.graph, m.views, 4, o);
    ASSERT_EQ(par.losses.size(), one.losses.size());
    for (size_t s = 0; s < one.losses.size(); ++s) EXPECT_NEAR(par.losses[s], one.losses[s], 1e-4 * std::fabs(one.losses[s]) + 1e-6) << "step " << s;
    if (!st.final_weights) continue;
    size_t compared = 0;
    for (const auto& [name, w] : one.parameters) {
      auto it = par.parameters.find(name);
      if (it == par.parameters.end()) continue;  // rewritten by an algebraic rule
      ++compared;
      EXPECT_LT(relative_difference(it->second, w, 1e-2), 1e-4) << name << " (" << search::name(algorithm) << ")";
    }
    EXPECT_GT(compared, 0u);
    if (algorithm == search::Algorithm::kDataParallel) {
      EXPECT_EQ(compared, one.parameters.size());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, Runtime,
                         ::testing::Values("mlp-tiny", "dlrm-tiny", "xdl-tiny", "candle-uno-tiny", "bert-large-tiny",
                                           "gpt-tiny", "vgg-13-tiny", "resnext-50-tiny", "inception-v3-tiny"),
                         pcgx::testing::model_param_name);

// Kernel threads change who computes a piece, never how: data parallelism
// on 2 devices with 1 and with 3 kernel threads each ends with the same
// bits, with SGD and Adam, for an encoder block large enough that its
// products are tiled and its loops run in pieces, and an MLP with enough
// parameters (1.2 M) that the optimizer's update is shared.
TEST(Runtime, KernelThreadsDoNotChangeTraining) {
  for (const Graph& model : {encoder_block_regression("block", 8, 64, 128, 4, 512),
                             build_model("mlp", {{"batch", 32}, {"hidden", 640}, {"layers", 3}})}) {
    const Mapped dp = strategy(model, search::Algorithm::kDataParallel, 2);
    for (const OptimizerKind optimizer : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
      SCOPED_TRACE(model.name() + " " + name(optimizer));
      TrainOptions o;
      o.steps = 3, o.seed = 3, o.batches = 1, o.optimizer.kind = optimizer;
      const TrainResult one = train(dp.graph, dp.views, 2, o);
      o.threads = 3;
      const TrainResult three = train(dp.graph, dp.views, 2, o);
      EXPECT_EQ(three.losses, one.losses);
      for (const auto& [name, w] : one.parameters) EXPECT_EQ(three.parameters.at(name).data, w.data) << name;
    }
  }
}

// A pipelined strategy (2 stages of 2 devices, unity inside each stage,
// 2 micro-batches) is a PCG like any other: the runtime runs its
// micro-batches one at a time through both stages (the boundary's layout
// change per micro-batch), and must reach the one-device weights.
TEST(Runtime, PipelinedStrategyTrainsLikeOneDevice) {
  for (const char* name : {"mlp-tiny", "bert-large-tiny"}) {
    SCOPED_TRACE(name);
    const Graph model = build_model(name, {{"batch", 8}});
    const CostModel cm(search::find_machine("cpu-host").with_devices(4), search::default_efficiency());
    search::SearchOptions so;
    so.budget = 4;
    const search::PipelineResult pr = search::optimize_pipeline(model, library(), cm, so, {2, 2});
    std::vector<MachineView> views;
    views.assign(pr.search.strategy.views.begin(), pr.search.strategy.views.end());
    TrainOptions o;
    o.steps = 4, o.seed = 3, o.optimizer.lr = 0.05, o.batches = 1;
    const TrainResult one = train(model, {}, 1, o);
    const TrainResult par = train(pr.search.strategy.graph, views, 4, o);
    ASSERT_EQ(par.losses.size(), one.losses.size());
    for (size_t s = 0; s < one.losses.size(); ++s) EXPECT_NEAR(par.losses[s], one.losses[s], 1e-4 * std::fabs(one.losses[s]) + 1e-6) << "step " << s;
    size_t compared = 0;
    for (const auto& [pname, w] : one.parameters)
      if (auto it = par.parameters.find(pname); it != par.parameters.end()) {
        ++compared;
        EXPECT_LT(relative_difference(it->second, w, 1e-2), 1e-4) << pname;
      }
    EXPECT_GT(compared, 0u);
  }
}

// 4 steps of strategy `s` on 4 devices reach the losses and weights of the
// model on one device.
void expect_trains_like_one_device(const Graph& model, const search::Strategy& s) {
  TrainOptions o;
  o.steps = 4, o.seed = 3, o.optimizer.lr = 0.05, o.batches = 1;
  const TrainResult one = train(model, {}, 1, o);
  const TrainResult par = train(s.graph, s.views, 4, o);
  ASSERT_EQ(par.losses.size(), one.losses.size());
  for (size_t k = 0; k < one.losses.size(); ++k) EXPECT_NEAR(par.losses[k], one.losses[k], 1e-4 * std::fabs(one.losses[k]) + 1e-6) << "step " << k;
  for (const auto& [name, w] : one.parameters) EXPECT_LT(relative_difference(par.parameters.at(name), w, 1e-2), 1e-4) << name;
}

// Grouped-query attention under Megatron's tensor parallelism on 2
// devices (LLaMA-tiny, 2 key/value heads for 4 query heads): each device
// repeats its key/value head for its two query heads, and the gradients of
// the copies sum back into the one projection; the weights reach the
// one-device run's.
TEST(Runtime, GroupedQueryAttentionTrainsLikeOneDevice) {
  const Graph model = build_model("llama-tiny", {{"batch", 8}, {"kv_heads", 2}});
  const Machine m = search::find_machine("dgx-h100").with_devices(2);
  const CostModel cm(m, search::default_efficiency());
  const search::Strategy s = MachineMapper(cm).map(*search::expert(model, m, 2, 2));
  ASSERT_TRUE(s.estimate.feasible);
  expect_trains_like_one_device(model, s);
}

// Megatron on 2 nodes of 2 devices: tensor parallelism inside a node, data
// parallelism across, through views with one stride per grid dimension,
// the cross-entropy split by vocabulary with the logits (its shares of the
// loss summed, one number per row and device gathered). The runtime runs
// those views as the cost model placed them and must reach the one-device
// weights.
TEST(Runtime, StridedViewsTrainLikeOneDevice) {
  Machine m = search::find_machine("dgx-h100").with_devices(4);
  m.nodes = 2, m.devices_per_node = 2;
  m.links[0].span = 2;
  m.links.push_back({"network", 0, 5e10, 5e-6, 2});
  const Graph model = build_model("bert-large-tiny", {{"batch", 8}});
  const Graph e = *search::expert(model, m, 4, 2);
  const CostModel cm(m, search::default_efficiency());
  const search::Strategy s = MachineMapper(cm).map(e);
  ASSERT_TRUE(s.estimate.feasible);
  int strided = 0;
  for (const MachineView& v : s.views) strided += !v.strides.empty();
  EXPECT_GT(strided, 0) << "no view with per-dimension strides: the test would not exercise them";
  int split_loss = 0;
  for (const Node& n : s.graph.nodes()) split_loss += n.op->name == "CrossEntropyApply" && s.graph.shape(n.inputs[0]).dims.back().degree == 2;
  EXPECT_EQ(split_loss, 1) << "the loss is not split by vocabulary: the test would not exercise it";
  expect_trains_like_one_device(model, s);
}

// Megatron-LM's sequence parallelism on 4 devices (t = 2, d = 2): the
// LayerNorms, dropouts and residual sums split the sequence, the
// row-parallel Reduce becomes a reduce-scatter and the copy to the next
// column-parallel Linear an all-gather; GPT (causal attention, tied
// vocabulary-parallel embedding and head) and BERT train like one device.
TEST(Runtime, SequenceParallelTrainsLikeOneDevice) {
  const Machine m = search::find_machine("dgx-h100").with_devices(4);
  for (const char* name : {"gpt-tiny", "bert-large-tiny"}) {
    SCOPED_TRACE(name);
    const Graph model = build_model(name, {{"batch", 8}});
    const CostModel cm(m, search::default_efficiency());
    const search::Strategy s = MachineMapper(cm).map(*search::expert(model, m, 4, 2, true));
    int split = 0;
    for (const Node& n : s.graph.nodes()) split += n.op->name == "LayerNorm" && n.outputs[0].dims[1].degree == 2;
    ASSERT_GT(split, 0) << "no LayerNorm splits the sequence: the test would not exercise it";
    expect_trains_like_one_device(model, s);
  }
}

// DLRM's expert plan with every table split by columns over 2 of the 4
// devices that split the samples: each table's output changes layout
// between degrees (Combine 2 then Repartition 4), which runs as the pieces
// each pair of devices shares (pcg/relayout.h), and must train like one
// device.
TEST(Runtime, LayoutChangeBetweenDegreesTrainsLikeOneDevice) {
  const Graph model = build_model("dlrm-tiny", {{"batch", 8}});
  const CostModel cm(search::find_machine("dgx-h100").with_devices(4), search::default_efficiency());
  const search::Strategy s = MachineMapper(cm).map(*search::expert(model, cm.machine(), 4, 2));
  ASSERT_TRUE(s.estimate.feasible);
  const ExecutionPlan plan = make_plan(s.graph, {s.views.begin(), s.views.end()}, 4);
  int between = 0;
  for (const Node& n : s.graph.nodes()) {
    const NodePlan& np = plan.nodes[static_cast<size_t>(n.id)];
    if (np.run == NodePlan::Run::kPieces && n.attrs.get_int("degree") != s.graph.node(np.to).attrs.get_int("degree")) ++between;
  }
  std::printf("%d layout changes between degrees\n", between);
  EXPECT_GT(between, 0) << "no layout change between degrees: the test would not exercise one";
  TrainOptions o;
  o.steps = 4, o.seed = 3, o.optimizer.lr = 0.05, o.batches = 1;
  const TrainResult one = train(model, {}, 1, o);
  const TrainResult par = train(s.graph, {s.views.begin(), s.views.end()}, 4, o);
  ASSERT_EQ(par.losses.size(), one.losses.size());
  for (size_t k = 0; k < one.losses.size(); ++k) EXPECT_NEAR(par.losses[k], one.losses[k], 1e-4 * std::fabs(one.losses[k]) + 1e-6) << "step " << k;
  for (const auto& [name, w] : one.parameters) EXPECT_LT(relative_difference(par.parameters.at(name), w, 1e-2), 1e-4) << name;
  EXPECT_EQ(static_cast<double>(par.bytes_sent), 4 * step_bytes(s.graph, {s.views.begin(), s.views.end()}, 4));
}

// The bytes a step sends between devices are the plan's count
// (pcg/step_communication.h), which the cost model reports: gradient
// all-reduces, layout changes in one step, inputs received by tasks.
TEST(Runtime, BytesPerStepAreThePlansCount) {
  int plans = 0, stored = 0;
  std::map<NodePlan::Run, int> kinds;
  for (const std::string name : {"mlp-tiny", "dlrm-tiny", "bert-large-tiny", "resnext-50-tiny", "candle-uno-tiny"}) {
    const Graph model = build_model(name, {{"batch", 8}});
    std::vector<Mapped> strategies = {strategy(model, search::Algorithm::kDataParallel, 4), strategy(model, search::Algorithm::kUnity, 4)};
    const CostModel cm(search::find_machine("dgx-h100").with_devices(4), search::default_efficiency());
    if (auto e = search::expert(model, cm.machine(), 4, 2)) {
      const search::Strategy st = MachineMapper(cm).map(*e);
      strategies.push_back({st.graph, {st.views.begin(), st.views.end()}});
    }
    for (const Mapped& m : strategies) {
      SCOPED_TRACE(name + " plan " + std::to_string(plans));
      TrainOptions o;
      o.steps = 3, o.seed = 2, o.batches = 1;
      const TrainResult r = train(m.graph, m.views, 4, o);
      const double predicted = step_bytes(m.graph, m.views, 4);
      EXPECT_EQ(static_cast<double>(r.bytes_sent), 3 * predicted);
      plans += predicted > 0;
      const ExecutionPlan plan = make_plan(m.graph, m.views, 4);
      for (const NodePlan& np : plan.nodes) ++kinds[np.run];
      for (const Node& n : m.graph.nodes()) stored += plan.layouts.stored[static_cast<size_t>(n.id)];
    }
  }
  EXPECT_GE(plans, 12) << "plans that communicate";
  // Every way of running a layout ran somewhere.
  EXPECT_GT(kinds[NodePlan::Run::kPieces], 0);
  EXPECT_GT(kinds[NodePlan::Run::kAllReduce], 0);
  EXPECT_GT(kinds[NodePlan::Run::kMoves], 0);
  EXPECT_GT(stored, 0);
}

TEST(Runtime, RefusesAStrategyNeedingMoreDevices) {
  const Mapped m = strategy(build_model("mlp-tiny"), search::Algorithm::kDataParallel, 4);
  EXPECT_EQ(devices_needed(m.graph, m.views), 4);
  try {
    make_plan(m.graph, m.views, 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the strategy needs 4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pcgx::runtime
