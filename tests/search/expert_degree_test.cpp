// The expert's tensor-parallel degree: tuned (baselines.h: the fastest that
// fits; where none fits, the one needing the least memory, so that what
// starts from it, a pipeline's micro-batches or the no-plan message, starts
// from the closest miss rather than from the first degree tried), or stated
// as a Megatron-LM plan states it (SearchOptions::tensor_degree), also per
// pipeline stage.
#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/rulesets/ruleset.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/search.h"
#include "toy_machines.h"
#include "values.h"

namespace pcgx::search {
namespace {

TEST(TunedExpert, WhereNoDegreeFitsTheLeastMemory) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  Machine m = toy_machine();
  const int64_t n = m.num_devices();
  const CostModel roomy_cost(m, toy_efficiency());
  const MachineMapper roomy(roomy_cost);
  // Each degree's need, and the least of them.
  double least = std::numeric_limits<double>::infinity(), most = 0;
  for (int64_t t : expert_tensor_degrees(m, n, expert_family(g))) {
    const double need = roomy.map(*expert(g, m, n, t)).estimate.max_memory();
    least = std::min(least, need), most = std::max(most, need);
  }
  ASSERT_LT(least, most);  // the degrees differ, or the test proves nothing
  m.device.memory_capacity = least / 2;
  const CostModel tight_cost(m, toy_efficiency());
  const MachineMapper tight(tight_cost);
  const Strategy chosen = tight.map(*tuned_expert(g, tight));
  EXPECT_FALSE(chosen.estimate.feasible);
  EXPECT_DOUBLE_EQ(chosen.estimate.max_memory(), least);
}

// The Linear's split of its output features: the tensor-parallel degree.
int64_t feature_degree(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op->name == "Linear" && n.name.find("attn.query") != std::string::npos) return n.outputs[0].dims.back().degree;
  return 0;
}

const RuleLibrary& no_rules() {
  static const Ruleset empty;
  static const RuleLibrary rules(empty);
  return rules;
}

TEST(ExpertDegree, StatedAsThePlanSaysIt) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const CostModel cost(toy_machine().with_devices(4), toy_efficiency());
  const MachineMapper mapper(cost);
  SearchOptions o;
  o.algorithm = Algorithm::kExpert;
  for (int64_t t : {1, 2, 4}) {
    o.tensor_degree = t;
    EXPECT_EQ(feature_degree(optimize(g, no_rules(), mapper, o).strategy.graph), t) << t;
  }
  o.tensor_degree = 3;  // does not divide the 4 devices
  EXPECT_THROW(optimize(g, no_rules(), mapper, o), Error);
  o.algorithm = Algorithm::kUnity, o.tensor_degree = 2;  // the expert's alone
  EXPECT_THROW(validate(o), FieldError);
  o.algorithm = Algorithm::kExpert, o.tensor_degree = -1;
  EXPECT_THROW(validate(o), FieldError);
}

// Per pipeline stage: 2 stages of 4 devices, t = 2 (a data-parallel degree
// of 2 in each), 4 micro-batches of 2 samples. The samples crossing the
// stage boundary are split as a micro-batch can take them (2 ways), not
// over the stage's 4 devices, which no micro-batch of 2 could.
// The tiny GPT (batch 8) as Megatron's plan with t = 2 over 2 stages of 4
// toy devices, 4 micro-batches.
PipelineResult tiny_gpt_pipeline(const Graph& g) {
  const CostModel cost(toy_machine().with_devices(8), toy_efficiency());
  SearchOptions o;
  o.algorithm = Algorithm::kExpert, o.tensor_degree = 2;
  return optimize_pipeline(g, no_rules(), cost, o, PipelineOptions{2, 4});
}

TEST(ExpertDegree, PerPipelineStageWithMicroBatches) {
  const PipelineResult r = tiny_gpt_pipeline(build_model("gpt-tiny", {{"batch", 8}}));
  EXPECT_EQ(r.stages, 2);
  EXPECT_EQ(r.micro_batches, 4);
  EXPECT_EQ(feature_degree(r.search.strategy.graph), 2);
}

// Scatter-gather of a stage boundary (Megatron-LM's, Narayanan et al.
// 2021, Section 4.1): a micro-batch of 2 samples crosses into a stage of 4
// devices split 2 ways by samples and 2 by its sequence, so each device
// receives a quarter of it, not half; the joined strategy computes the
// model.
// The boundaries split `samples` ways by samples and 2 by their sequence
// (the second dimension: what sequence parallelism holds already), and
// what the joined strategy computes.
void expect_scattered_boundaries(const Graph& g, const PipelineResult& r, int64_t samples) {
  int scattered = 0;
  for (const Node& n : r.search.strategy.graph.nodes()) {
    const ParallelTensorShape& s = n.outputs[0];
    if (n.op->name == "Repartition" && s.rank() == 3 && s.dims[0].degree == samples && s.dims[1].degree == 2 && s.dims[2].degree == 1 &&
        s.replica == 1)
      ++scattered;
  }
  EXPECT_GE(scattered, 1);
  EXPECT_LT(max_difference(g, r.search.strategy.graph), 1e-5);
}

TEST(ExpertDegree, PipelineBoundariesAreScatteredAndGathered) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  expect_scattered_boundaries(g, tiny_gpt_pipeline(g), 2);
}

// With no data parallelism and a micro-batch of one sample (Megatron-LM's
// GPT-3 175B run in Korthikanti et al. 2022: t = 8, p = 8 on 64 GPUs,
// micro-batch 1), a boundary's samples cannot be split over a stage's
// devices: its sequence is, each device sending its own part, and the
// plan computes the model. (Until 2026-11-30 the boundary was split by
// samples whatever the micro-batch and no such plan was found: "cannot
// split dimension 0 (size 8, degree 1, pipeline 8) 2 more ways"; then by
// its last dimension until sequence parallelism showed that costs a
// gather and a cut at every boundary: SimulatedPipeline.
// SequenceParallelBoundariesCrossAsEachDevicesShard.)
TEST(ExpertDegree, AOneSampleMicroBatchScattersItsBoundaryBySequence) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  SearchOptions o;
  o.algorithm = Algorithm::kMegatron, o.tensor_degree = 2;
  const PipelineResult r = optimize_pipeline(g, no_rules(), CostModel(toy_machine().with_devices(4), toy_efficiency()), o, PipelineOptions{2, 8});
  ASSERT_EQ(r.micro_batches, 8);
  expect_scattered_boundaries(g, r, 1);
}

// Grouped-query attention (LLaMA-tiny with 2 key/value heads for 4):
// Megatron-LM's tensor parallelism splits the key/value projections with
// the query heads, each device repeating the key/value heads its query
// heads read; at 2 and 4 devices the plan computes the model.
TEST(ExpertDegree, GroupedQueryAttentionSplitsTheKeyValueHeads) {
  const Graph g = build_model("llama-tiny", {{"batch", 8}, {"kv_heads", 2}});
  const Machine m = toy_machine().with_devices(4);
  for (const int64_t t : {2, 4}) {
    SCOPED_TRACE(t);
    const Graph e = *expert(g, m, 4, t);
    EXPECT_EQ(feature_degree(e), t);
    // The key and value projections split with the query heads where the
    // key/value heads divide among the devices (2 of them at t = 2); at
    // t = 4 (fewer key/value heads than devices) they run unsplit, where
    // Megatron-LM refuses the plan.
    for (const Node& n : e.nodes()) {
      if (n.name.ends_with("self_attn.key") || n.name.ends_with("self_attn.value")) {
        EXPECT_EQ(n.outputs[0].dims.back().degree, t == 2 ? 2 : 1) << n.name;
      }
    }
    EXPECT_LT(max_difference(g, e), 1e-5);
  }
}

// Megatron-LM's vocabulary-parallel ends: the word table split by rows
// over t for the lookup (partial sums, then summed), the logits by
// vocabulary for the head (gathered for the loss); the position table
// stays whole. In a pipeline stage without the loss, the largest table
// looked up is the vocabulary's.
TEST(ExpertDegree, SplitsTheVocabularyOverTheTensorParallelDevices) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});  // vocabulary 100, 16 positions
  const Machine m = toy_machine().with_devices(4);
  auto table_rows_degree = [](const Graph& e, const std::string& lookup) {
    for (const Node& n : e.nodes())
      if (n.name == lookup) return e.shape(n.inputs[1]).dims[0].degree;
    return int64_t{0};
  };
  for (int64_t t : {2, 4}) {
    const Graph e = *expert(g, m, 4, t);
    EXPECT_EQ(table_rows_degree(e, "wte"), t);
    EXPECT_EQ(table_rows_degree(e, "wpe"), 1);
    for (const Node& n : e.nodes()) {
      if (n.name == "lm_logits") {
        EXPECT_EQ(n.outputs[0].dims.back().degree, t);
      }
    }
  }
  // The head reads the tied table's transpose split the same way: no
  // layout of the table is whole.
  for (const Node& n : expert(g, m, 4, 4)->nodes()) {
    if (n.op->op_class == OpClass::kParallel && n.outputs[0].rank() == 2 && n.outputs[0].logical_shape() == std::vector<int64_t>{100, 32}) {
      EXPECT_EQ(n.outputs[0].dims[0].degree, 4) << describe(n);
    }
  }
  // A stage holding the embeddings and the first layer alone.
  const PipelineResult r = optimize_pipeline(g, no_rules(), CostModel(toy_machine().with_devices(8), toy_efficiency()),
                                             [] {
                                               SearchOptions o;
                                               o.algorithm = Algorithm::kExpert, o.tensor_degree = 2;
                                               return o;
                                             }(),
                                             PipelineOptions{2, 4});
  EXPECT_EQ(table_rows_degree(r.search.strategy.graph, "wte"), 2);
}

// Megatron-LM's vocabulary-parallel cross-entropy: the loss splits by
// classes with the logits (vocabulary_parallel_loss), so no layout of the
// logits is whole on a device, only the t blocks' log-sum-exp are gathered,
// and the plan computes the model's loss.
TEST(ExpertDegree, TheLossSplitsByClassesWithTheLogits) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});  // vocabulary 100, 16 positions
  const Machine m = toy_machine().with_devices(4);
  for (int64_t t : {2, 4}) {
    SCOPED_TRACE(t);
    const Graph e = *expert(g, m, 4, t);
    int parts = 0;
    for (const Node& n : e.nodes()) {
      if (n.op->name == "SoftmaxCrossEntropy") ADD_FAILURE() << "the loss is not split: " << describe(n);
      if (n.op->name == "ClassLogSumExp" || n.op->name == "CrossEntropyApply") {
        ++parts;
        EXPECT_EQ(e.shape(n.inputs[0]).dims.back().degree, t) << describe(n);
      }
      for (const ParallelTensorShape& o : n.outputs)
        if (o.logical_shape() == std::vector<int64_t>{8, 16, 100}) {
          EXPECT_EQ(o.dims.back().degree, t) << describe(n);
        }
    }
    EXPECT_EQ(parts, 2);
    EXPECT_LT(max_difference(g, e), 1e-5);
  }
  // Without tensor parallelism the loss stays whole.
  for (const Node& n : expert(g, m, 4, 1)->nodes()) EXPECT_NE(n.op->name, "CrossEntropyApply");
}

// Sequence parallelism (Korthikanti et al. 2022): between the
// tensor-parallel halves the sequence is split over the t devices, which
// each keep 1/t of those activations; the PCG computes the model; it is
// the expert's alone.
TEST(ExpertDegree, SequenceParallelSplitsTheSequenceBetweenTheHalves) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const Machine m = toy_machine().with_devices(4);
  const Graph plain = *expert(g, m, 4, 2), sp = *expert(g, m, 4, 2, true);
  auto seq_degree = [](const Graph& e, const std::string& name) {
    for (const Node& n : e.nodes())
      if (n.name == name) return n.outputs[0].dims[1].degree;
    return int64_t{0};
  };
  for (const char* name : {"block0.ln1", "block0.attn_residual", "block1.mlp_dropout", "ln_f"}) {
    EXPECT_EQ(seq_degree(plain, name), 1) << name;
    EXPECT_EQ(seq_degree(sp, name), 2) << name;
  }
  for (const Node& n : sp.nodes())
    if (n.name == "block0.attn.softmax") {  // [b, heads, s, s]: split by heads, as without
      EXPECT_EQ(n.outputs[0].dims[1].degree, 2);
      EXPECT_EQ(n.outputs[0].dims[2].degree, 1);
    }
  EXPECT_LT(max_difference(g, sp), 1e-5);
  const CostModel cost(m, toy_efficiency());
  const MachineMapper mapper(cost);
  const Estimate a = mapper.map(plain).estimate, b = mapper.map(sp).estimate;
  EXPECT_LT(b.max_memory(), a.max_memory());
  SearchOptions o;
  o.sequence_parallel = true;  // unity's rules, not this flag, would find it there
  EXPECT_THROW(validate(o), FieldError);
}

// Megatron-LM's plan as stated (--search megatron): the layers split
// evenly over the chunks, the embeddings in the first and the head in the
// last, each stage the expert's at the stated degree; a split that does
// not divide the layers is refused, naming the stages.
TEST(Megatron, SplitsTheLayersEvenly) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}, {"layers", 4}});
  const CostModel cost(toy_machine().with_devices(8), toy_efficiency());
  SearchOptions o;
  o.algorithm = Algorithm::kMegatron, o.tensor_degree = 2;
  for (const int64_t v : {1, 2}) {
    const PipelineResult r = optimize_pipeline(g, no_rules(), cost, o, PipelineOptions{2, 4, v});
    ASSERT_EQ(static_cast<int64_t>(r.stage.size()), 2 * v);
    const int64_t per = 4 / (2 * v);  // layers per chunk
    for (size_t c = 0; c < r.stage.size(); ++c) {
      const std::string first = c == 0 ? "wte" : "block" + std::to_string(static_cast<int64_t>(c) * per) + ".ln1";
      EXPECT_EQ(r.stage[c].first, first) << "chunk " << c;
      if (c + 1 < r.stage.size())
        EXPECT_TRUE(r.stage[c].last.starts_with("block" + std::to_string((static_cast<int64_t>(c) + 1) * per - 1) + "."))
            << "chunk " << c << " ends at " << r.stage[c].last;
      else
        EXPECT_EQ(r.stage[c].last, "loss");
    }
    EXPECT_EQ(feature_degree(r.search.strategy.graph), 2);
    EXPECT_LT(max_difference(g, r.search.strategy.graph), 1e-5);
  }
  try {
    optimize_pipeline(g, no_rules(), cost, o, PipelineOptions{2, 4, 4});  // 8 chunks for 4 layers
    FAIL() << "8 chunks of 4 layers accepted";
  } catch (const FieldError& e) {
    EXPECT_NE(std::string(e.what()).find("PipelineOptions.stages"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("splits the 4 layers of 'gpt-tiny' evenly, and 8 chunks"), std::string::npos) << e.what();
  }
  o.algorithm = Algorithm::kUnity;  // the degree is megatron's or the expert's alone
  EXPECT_THROW(validate(o), FieldError);
}

}  // namespace
}  // namespace pcgx::search
