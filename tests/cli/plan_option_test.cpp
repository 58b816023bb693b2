// optimize --plan FILE and plan show (docs/plans.md): a plan written by hand lowered as
// stated, written as an ordinary strategy that run and simulate take; a
// mistake in it is one error line, exit code 2, no strategy written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "cli/plan_test_helpers.h"
#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::expect_bytes_as_predicted;
using pcgx::testing::expect_one_error_line;
using pcgx::testing::loss_line;
using pcgx::testing::trains_like;
using pcgx::testing::predicted_ms;
using pcgx::testing::run;
using pcgx::testing::run_predicted_ms;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_plan_option_test");
  return d;
}

const std::string kPlans = std::string(PCGX_SOURCE_DIR) + "/data/plans/";

TEST(PlanOption, LowersThePlanAndTheStrategyRuns) {
  const fs::path out = dir() / "tp.json";
  const auto r = run("optimize gpt-tiny --plan " + kPlans + "gpt-megatron-2x2.json --machine dgx-h100 --devices 4 -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("with --search plan"), std::string::npos) << r.out;
  // The query projection's output features split 2 ways.
  const size_t at = r.out.find("attn.query");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NE(r.out.substr(at, r.out.find('\n', at) - at).find("/2]"), std::string::npos) << r.out;
  const auto trained = run("run " + out.string() + " --steps 3 --no-report --no-plot");
  EXPECT_EQ(trained.code, 0) << trained.out;
  const auto simulated = run("simulate " + out.string());
  EXPECT_EQ(simulated.code, 0) << simulated.out;
  // run MODEL --plan: lowered as optimize lowers it, then trained.
  const auto direct = run("run gpt-tiny --plan " + kPlans + "gpt-megatron-2x2.json --devices 4 --steps 2 --no-report --no-plot");
  EXPECT_EQ(direct.code, 0) << direct.out;
  EXPECT_NE(direct.out.find("training gpt-tiny (plan) on 4 cpu devices"), std::string::npos) << direct.out;
}

// Megatron's 3-D plan written by hand: its pipeline field splits the layers
// over 2 stages of 4 devices, the rules apply in each; it trains and
// simulates. Gradient accumulation (--micro-batches alone) takes a plan too.
TEST(PlanOption, APlanWithPipelineStagesTrainsAndSimulates) {
  const fs::path out = dir() / "3d.json";
  const auto r = run("optimize gpt-tiny --plan " + kPlans + "gpt-megatron-pipeline-8.json --machine dgx-h100 --devices 8 -q -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 stages x 4 devices, 4 micro-batches"), std::string::npos) << r.out;
  EXPECT_EQ(run("run " + out.string() + " --steps 2 --no-report --no-plot").code, 0);
  EXPECT_EQ(run("simulate " + out.string()).code, 0);
  const auto direct = run("run gpt-tiny --plan " + kPlans + "gpt-megatron-pipeline-8.json --devices 8 --batch 8 --steps 2 --no-report --no-plot");
  EXPECT_EQ(direct.code, 0) << direct.out;
  const auto acc = run("optimize gpt-tiny --micro-batches 2 --plan " + kPlans + "data-parallel-4.json --machine dgx-h100 --devices 4 -q -o " +
                       (dir() / "acc.json").string());
  ASSERT_EQ(acc.code, 0) << acc.out;
  EXPECT_NE(acc.out.find("gradient accumulation 2 micro-batches"), std::string::npos) << acc.out;
}

// plan check: what each rule decides, the communication derived (the
// row-parallel projections' partial sums reduced, the column-parallel
// inputs broadcast), the prediction beside data parallelism; a mistake is
// one error line.
TEST(PlanCheck, PrintsWhatEachRuleDecidesAndTheCommunicationDerived) {
  const fs::path out = dir() / "checked.json";
  const auto r = run("plan check gpt-tiny " + kPlans + "gpt-megatron-2x2.json --machine dgx-h100 --devices 4 -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("rules[1]         decides 6 of the 58 operators"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("communication derived 9 layout changes of activations"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("block0.attn.output -> block0.attn_dropout"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("data parallel"), std::string::npos) << r.out;
  // Unity's search of the whole model beside it, and the plan's time over unity's.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("\nunity +([0-9.]+) ms \\(the whole model searched in [0-9.]+ s\\); the plan takes ([0-9.]+)x unity's time")))
      << r.out;
  EXPECT_GT(std::stod(m[1].str()), 0);
  EXPECT_GT(std::stod(m[2].str()), 1.0);  // on the tiny GPT, splitting the layers only adds work: unity's plan is faster
  EXPECT_TRUE(fs::exists(out));
  const fs::path plan = dir() / "nothing.json";
  std::ofstream(plan) << R"({"format": "pcgx.plan", "format_version": 1, "rules": [{"select": {"name": "decoder.*"}, "partition": {}}]})";
  expect_one_error_line(run("plan check gpt-tiny " + plan.string() + " --machine dgx-h100 --devices 4"), "selects no operator", dir() / "never.json");
}

// plan check --certify and plan certify: data parallelism of an MLP is
// proved operator by operator, and the strategy written certifies again
// from its file (with no model at hand, which it says); a file that is not
// a strategy is one error line.
TEST(PlanCheck, CertifiesAPlan) {
  const fs::path out = dir() / "dp-certified.json";
  const auto r = run("plan check mlp-tiny " + kPlans + "data-parallel-4.json --machine cpu-host --devices 4 --certify -v --no-unity -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("certificate           verified: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("by linear_data_parallel_split"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("operators           the model's own"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("unverified:"), std::string::npos) << r.out;
  const auto again = run("plan certify " + out.string());
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("certificate           verified: "), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("operators           not compared with the model"), std::string::npos) << again.out;
  expect_one_error_line(run("plan certify " + (dir() / "absent.json").string()), "absent.json", dir() / "never.json");
}

// Every shipped plan certifies against its model (GPT's, LLaMA's for
// llama-*): data parallelism, Megatron's 2 x 2 (biases as summands beside
// data parallelism) for both, its pipeline of 8, the first layer alone,
// co-shard and the hidden split.
// A plan's operators are compared with the model as the plan states it:
// a ResNeXt split by samples runs its BatchNorms in their statistics form
// (a proved identity), a LLaMA plan fuses two projections by a rewrite;
// both certify and say so. A rule written for the statistics parts of
// BatchNorms that then run whole is told apart from one overridden.
TEST(PlanCheck, CertifiesAgainstTheModelAsThePlanStatesIt) {
  const fs::path dp = dir() / "cnn-dp.json", parts = dir() / "cnn-parts.json";
  std::ofstream(dp) << R"({"format": "pcgx.plan", "format_version": 1, "rules": [{"select": {}, "partition": {"samples": 2}}]})";
  const auto r = run("plan check resnext-50-tiny " + dp.string() + " --machine cpu-host --devices 2 --certify --no-unity");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("certificate           verified: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("operators           the model's, its BatchNorms split in their statistics form (axiom batch_norm_is_statistics_applied)"),
            std::string::npos) << r.out;
  const fs::path fused = dir() / "llama-fused.json";
  std::ofstream(fused) << R"({"format": "pcgx.plan", "format_version": 1,
    "rewrites": [{"rule": "unity-c01643~", "at": ["layers0.self_attn.query", "layers0.self_attn.key"]}],
    "rules": [{"select": {}, "partition": {"samples": 2}}, {"select": {"name": "layers0.self_attn.query.linear"}, "partition": {"out": 2}}]})";
  const auto f = run("plan check llama-tiny " + fused.string() + " --machine dgx-h100 --devices 2 --certify --no-unity");
  ASSERT_EQ(f.code, 0) << f.out;
  EXPECT_NE(f.out.find("certificate           verified: "), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("operators           the model's, after the 1 rewrite the plan states"), std::string::npos) << f.out;
  std::ofstream(parts) << R"({"format": "pcgx.plan", "format_version": 1,
    "rules": [{"select": {}, "partition": {}}, {"select": {"name": "*.bn.sum"}, "partition": {}}, {"select": {"name": "fc"}, "partition": {}},
              {"select": {}, "partition": {}}]})";
  const auto w = run("plan check resnext-50-tiny " + parts.string() + " --machine cpu-host --devices 2 --no-unity");
  ASSERT_EQ(w.code, 0) << w.out;
  EXPECT_NE(w.out.find("rules[1]         decides 0 of the 56 operators (it selects statistics parts of BatchNorms that run whole)"), std::string::npos)
      << w.out;
  EXPECT_NE(w.out.find("rules[2]         decides 0 of the 56 operators (later rules override it everywhere)"), std::string::npos) << w.out;
  // Overridden parts of BatchNorms that are split are overridden, nothing else.
  std::ofstream(parts) << R"({"format": "pcgx.plan", "format_version": 1,
    "rules": [{"select": {"name": "stem.bn*"}, "partition": {"samples": 2}}, {"select": {}, "partition": {"samples": 2}}]})";
  const auto o = run("plan check resnext-50-tiny " + parts.string() + " --machine cpu-host --devices 2 --no-unity");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("rules[0]         decides 0 of the 90 operators (later rules override it everywhere)"), std::string::npos) << o.out;
}

TEST(PlanCheck, EveryShippedPlanCertifies) {
  for (const auto& [plan, devices] : std::vector<std::pair<std::string, int>>{
           {"data-parallel-4.json", 4}, {"gpt-megatron-2x2.json", 4}, {"gpt-megatron-pipeline-8.json", 8}, {"gpt-first-layer-only.json", 4},
           {"gpt-pipeline-three-forwards-8.json", 8}, {"gpt-coshard-heads-2.json", 2},
           {"gpt-coshard-pipeline-4.json", 4}, {"gpt-hidden-split-4.json", 4}, {"llama-megatron-2x2.json", 4},
           {"gpt-interlaced-4.json", 4}}) {
    const std::string model = plan.rfind("llama-", 0) == 0 ? "llama-tiny" : "gpt-tiny";
    const auto r = run("plan check " + model + " " + kPlans + plan + " --machine dgx-h100 --devices " + std::to_string(devices) + " --certify --no-unity");
    ASSERT_EQ(r.code, 0) << plan << "\n" << r.out;
    EXPECT_NE(r.out.find("certificate           verified: "), std::string::npos) << plan << "\n" << r.out;
    // (The interlaced plan splits its loss by classes: the model's loss as its blocks'.)
    EXPECT_NE(r.out.find(plan == "gpt-interlaced-4.json" ? "operators           the model's, its loss as its blocks' log-sum-exp applied"
                                                         : "operators           the model's own"),
              std::string::npos)
        << plan << "\n" << r.out;
  }
}

// What the axioms cannot prove is reported, not refused: without
// Linear's axioms (--axioms, a directory whose empty linear.smt2 stands for
// the shipped one) the data-parallel plan's Linears are named, and the
// command succeeds.
TEST(PlanCheck, AnUnprovedPlanIsReportedNotRefused) {
  const fs::path axioms = dir() / "axioms-less-linear";
  fs::create_directories(axioms);
  std::ofstream(axioms / "linear.smt2") << "; Linear's axioms taken out\n";
  const auto r = run("plan check mlp-tiny " + kPlans + "data-parallel-4.json --machine cpu-host --devices 4 --certify --no-unity --axioms " + axioms.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("certificate           UNVERIFIED: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unverified: operator-1 (Linear 'dense0'"), std::string::npos) << r.out;
}

// A pipelined plan's rules select by name and layer in every stage: each
// stage's query projection split by output columns as in the 2 x 2 plan
// (the stages are lowered with the model's names, not a piece's).
TEST(PlanOption, APipelinedPlansRulesHoldInEveryStage) {
  const auto r = run("optimize gpt-tiny --plan " + kPlans + "gpt-megatron-pipeline-8.json --machine dgx-h100 --devices 8 -o " +
                     (dir() / "pp8.json").string());
  ASSERT_EQ(r.code, 0) << r.out;
  for (const std::string layer : {"block0", "block1"}) {
    const size_t at = r.out.find("  " + layer + ".attn.query ");
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_NE(line.find("Linear                4  f32[16/2|p4, 16, 32/2]"), std::string::npos) << line;
  }
}

// A plan's own stage order: recorded in the strategy (explicit, with its
// programs), said in the report, simulated as written; one that deadlocks
// is one error line with its cycle.
TEST(PlanOption, APlanStatesItsSchedule) {
  const fs::path out = dir() / "three-forwards.json";
  const auto r = run("optimize gpt-tiny --plan " + kPlans + "gpt-pipeline-three-forwards-8.json --machine dgx-h100 --devices 8 -q -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("  schedule            explicit, the plan's: priced as written (its steps' makespan)"), std::string::npos) << r.out;
  // Priced as written: the simulation of the order agrees with it.
  const size_t sim_at = r.out.find("simulated             ");
  ASSERT_NE(sim_at, std::string::npos) << r.out;
  const double simulated = std::stod(r.out.substr(sim_at + 22));
  const double predicted = std::stod(r.out.substr(r.out.find_first_of("0123456789", r.out.find("iteration time"))));
  EXPECT_NEAR(simulated / predicted, 1.0, 0.02) << r.out;
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("pipeline").at("schedule"), "explicit");
  EXPECT_EQ(j.at("pipeline").at("programs").at(0), "F0 F1 F2 B0 F3 B1 B2 B3");
  const auto sim = run("simulate " + out.string() + " --show 0");
  EXPECT_NE(sim.out.find("explicit schedule"), std::string::npos) << sim.out;
  // Memory counts what the written order holds: the first stage three
  // micro-batches' activations where 1F1B holds two; the second the same.
  const auto one_f = run("optimize gpt-tiny --plan " + kPlans + "gpt-megatron-pipeline-8.json --machine dgx-h100 --devices 8 -o " +
                         (dir() / "1f1b.json").string());
  const auto full = run("optimize gpt-tiny --plan " + kPlans + "gpt-pipeline-three-forwards-8.json --machine dgx-h100 --devices 8 -o " +
                        (dir() / "three.json").string());
  auto stage_memory = [](const std::string& o, const std::string& stage) {
    const size_t at = o.find("  stage " + stage + "  devices");
    const size_t kib = o.find(" KiB", at);
    const size_t comma = o.rfind(", ", kib);
    return std::stod(o.substr(comma + 2, kib - comma - 2));
  };
  EXPECT_GT(stage_memory(full.out, "1"), stage_memory(one_f.out, "1")) << full.out << one_f.out;
  EXPECT_EQ(stage_memory(full.out, "2"), stage_memory(one_f.out, "2"));
  expect_one_error_line(run("plan check gpt-tiny " + kPlans + "gpt-pipeline-deadlock-8.json --machine dgx-h100 --devices 8 -o " +
                            (dir() / "dead.json").string()),
                        "pipeline.programs: pipeline schedule deadlocks: stage 0 waits", dir() / "dead.json");
}

// A plan's recipe fields are what optimize uses where its flags state none.
TEST(PlanOption, TheRecipeInThePlanUnlessAFlagSaysOtherwise) {
  const fs::path plan = dir() / "recipe.json", out = dir() / "recipe-s.json";
  std::ofstream(plan) << R"({"format": "pcgx.plan", "format_version": 1, "precision": "bf16", "recompute": "selective", "zero": 1,
                            "optimizer": "sgd", "rules": [{"select": {}, "partition": {"samples": 4}}]})";
  const std::string base = "optimize gpt-tiny --plan " + plan.string() + " --machine dgx-h100 --devices 4 -q -o " + out.string();
  const auto r = run(base);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("precision             bf16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recompute             selective"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ZeRO stage            1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("optimizer             sgd"), std::string::npos) << r.out;
  const auto flags = run(base + " --precision tf32 --zero 0 --optimizer adam");
  ASSERT_EQ(flags.code, 0) << flags.out;
  EXPECT_NE(flags.out.find("precision             tf32"), std::string::npos) << flags.out;
  EXPECT_NE(flags.out.find("ZeRO stage            0"), std::string::npos) << flags.out;
  EXPECT_NE(flags.out.find("optimizer             adam"), std::string::npos) << flags.out;
  // run --plan trains with its own optimizer (its --optimizer, sgd by
  // default) and says so where the plan states another, as for a strategy.
  std::ofstream(plan) << R"({"format": "pcgx.plan", "format_version": 1, "optimizer": "adam", "rules": [{"select": {}, "partition": {"samples": 2}}]})";
  const auto trained = run("run mlp-tiny --plan " + plan.string() + " --devices 2 --steps 2 --no-report --no-plot");
  ASSERT_EQ(trained.code, 0) << trained.out;
  EXPECT_NE(trained.out.find("note: the plan " + plan.string() + " was planned with adam; this run trains with sgd"), std::string::npos)
      << trained.out;
  const auto as_planned = run("run mlp-tiny --plan " + plan.string() + " --devices 2 --steps 2 --optimizer adam --no-report --no-plot");
  ASSERT_EQ(as_planned.code, 0) << as_planned.out;
  EXPECT_EQ(as_planned.out.find("was planned with"), std::string::npos) << as_planned.out;
}

TEST(PlanOption, MistakesAreOneErrorLine) {
  const fs::path out = dir() / "bad.json";
  const fs::path plan = dir() / "plan.json";
  std::ofstream(plan) << R"({"format": "pcgx.plan", "format_version": 1, "rules": [{"select": {"name": "block0.attn.query"}, "partition": {"heads": 2}}]})";
  const std::string base = " --machine dgx-h100 --devices 4 -o " + out.string();
  expect_one_error_line(run("optimize gpt-tiny --plan " + plan.string() + base), "has no parallel kind 'heads'", out);
  expect_one_error_line(run("optimize gpt-tiny --plan " + (dir() / "missing.json").string() + base), "missing.json", out);
  expect_one_error_line(run("optimize gpt-tiny --search mcmc --plan " + kPlans + "data-parallel-4.json" + base),
                        "--plan: a plan is lowered as stated (--search plan), or its unstated operators searched (unity), not searched with mcmc", out);
  expect_one_error_line(run("optimize gpt-tiny --pipeline --plan " + kPlans + "data-parallel-4.json" + base),
                        "--stages: a written plan is pipelined with its stages and micro-batches stated (in the plan, or both flags)", out);
  expect_one_error_line(run("optimize gpt-tiny --plan " + kPlans + "gpt-megatron-pipeline-8.json --machine dgx-h100 --devices 6 -o " + out.string()),
                        "its degrees multiply to 2, which does not divide the 3 devices", out);
  expect_one_error_line(run("optimize gpt-tiny --search plan" + base), "--plan: the plan algorithm lowers a plan, and none is given", out);
  expect_one_error_line(run("optimize gpt-tiny --search sequential --plan " + kPlans + "data-parallel-4.json" + base),
                        "not searched with sequential", out);  // (unity searches what a plan does not state: TheUnstatedRestIsSearched)

}

// How many Linear operators of a strategy file have a view starting on `device`.
int64_t linears_starting_on(const fs::path& strategy, int64_t device) {
  const nlohmann::json st = nlohmann::json::parse(std::ifstream(strategy));
  int64_t on = 0;
  for (const auto& node : st.at("graph").at("nodes"))
    if (node.at("op") == "Linear")
      for (const auto& v : st.at("views"))
        if (v.at("node") == node.at("id")) on += v.at("start") == device;
  return on;
}

// How many of a strategy file's sums (Reduce) are read by a split of the
// hidden dimension 4 ways: the layout search's sequence for the hidden
// split plan, once per layer.
int splits_of_sums(const fs::path& strategy) {
  const nlohmann::json st = nlohmann::json::parse(std::ifstream(strategy));
  std::map<int64_t, std::string> op;
  for (const auto& n : st["graph"]["nodes"]) op[n["id"].get<int64_t>()] = n["op"].get<std::string>();
  int found = 0;
  for (const auto& n : st["graph"]["nodes"])
    found += n["op"] == "Repartition" && n["attrs"]["dim"] == 2 && n["attrs"]["degree"] == 4 && op[n["inputs"][0][0].get<int64_t>()] == "Reduce";
  return found;
}

// The shipped plan whose conversions the layout search rewrites: plan
// check lists each with both sequences and their times, the strategy it
// writes holds the rewritten sequence, and that strategy trains to data
// parallelism's losses (the sequence moves the values, it does not change
// them) with the bytes it predicts.
TEST(PlanCheck, ListsTheConversionsTheLayoutSearchRewrote) {
  const std::string plan = kPlans + "gpt-hidden-split-4.json";
  const fs::path out = dir() / "hidden-split.json";
  const auto r = run("plan check gpt-tiny " + plan + " --machine dgx-h100 --devices 4 --no-unity -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("layout search         2 conversions rewritten"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("block0.mlp.ffn_output -> block0.mlp_dropout: Reduce(2) Repartition2(4) Combine0(2) ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" for Reduce(2) Combine0(2) Repartition2(4) ("), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\nunity "), std::string::npos) << r.out;  // --no-unity
  // Listed once: the summary below the list does not point to itself.
  EXPECT_EQ(r.out.find("(`pcgx plan check` lists them)"), std::string::npos) << r.out;
  const auto o = run("optimize gpt-tiny --plan " + plan + " --machine dgx-h100 --devices 4 -q -o " + (dir() / "hidden-opt.json").string());
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("layout search         2 conversions rewritten as a cheaper sequence of parallel operators (`pcgx plan check` lists them)"),
            std::string::npos) << o.out;
  // Per layer, the strategy's sum is read by the hidden dimension's split.
  EXPECT_EQ(splits_of_sums(out), 2);
  // A strategy file trains from its own graph's weights: the reference is
  // data parallelism's file, whose values are the model's.
  const fs::path dp = dir() / "hidden-split-dp.json";
  ASSERT_EQ(run("plan check gpt-tiny " + kPlans + "data-parallel-4.json --machine dgx-h100 --devices 4 --no-unity -o " + dp.string()).code, 0);
  expect_bytes_as_predicted(trains_like(out.string(), dp.string()));
}

// The dropout split along two dimensions instead (V(2) D0(2) -> D1(2)
// D2(2)): the sum and both splits run as one exchange (relayout.h), and
// the strategy trains to data parallelism's losses with the bytes it
// predicts.
TEST(PlanCheck, ASumSplittingTwoDimensionsTrainsAsOneExchange) {
  nlohmann::json plan = nlohmann::json::parse(std::ifstream(kPlans + "gpt-hidden-split-4.json"));
  plan["rules"][3]["partition"] = {{"dim1", 2}, {"dim2", 2}};
  // The plan checked on `devices` (its strategy written to NAME.json), the
  // conversion into `dropout` listed as the one exchange.
  auto checked = [&](const std::string& name, int devices, const std::string& dropout) {
    const fs::path file = dir() / (name + "-plan.json"), out = dir() / (name + ".json");
    std::ofstream(file) << plan.dump();
    const auto r = run("plan check gpt-tiny " + file.string() + " --machine dgx-h100 --devices " + std::to_string(devices) + " --no-unity -o " +
                       out.string());
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find(dropout + ".mlp.ffn_output -> " + dropout + ".mlp_dropout: Reduce(2) Repartition1(2) Repartition2(2) Combine0(2) ("),
              std::string::npos)
        << r.out;
    return out;
  };
  const fs::path out = checked("two-splits", 4, "block0");
  const fs::path dp = dir() / "two-splits-dp.json";
  ASSERT_EQ(run("plan check gpt-tiny " + kPlans + "data-parallel-4.json --machine dgx-h100 --devices 4 --no-unity -o " + dp.string()).code, 0);
  expect_bytes_as_predicted(trains_like(out.string(), dp.string()));
  // In 2 pipeline stages of 4 devices, its micro-batches each one exchange
  // too: one device's losses, the bytes predicted.
  plan["pipeline"] = {{"stages", 2}, {"micro_batches", 4}};
  const fs::path pout = checked("two-splits-pipelined", 8, "block1");
  expect_bytes_as_predicted(trains_like(pout.string(), "gpt-tiny --set batch=16 --devices 1"));
}

// The same plan in 2 pipeline stages of 4 devices: each stage's chunk
// gets the cheaper sequence (plan check says each is priced on the
// chunk's whole batch), the strategy holds it in the micro-batches, and
// it trains to one device's losses with the bytes it predicts.
TEST(PlanCheck, APipelinedPlansConversionsAreSearchedToo) {
  nlohmann::json plan = nlohmann::json::parse(std::ifstream(kPlans + "gpt-hidden-split-4.json"));
  plan["pipeline"] = {{"stages", 2}, {"micro_batches", 4}};
  const fs::path file = dir() / "hidden-split-pipelined-plan.json", out = dir() / "hidden-split-pipelined.json";
  std::ofstream(file) << plan.dump();
  const auto r = run("plan check gpt-tiny " + file.string() + " --machine dgx-h100 --devices 8 --no-unity -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("layout search         2 conversions rewritten"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("each on its chunk's whole batch at once"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("block1.mlp.ffn_output -> block1.mlp_dropout: Reduce(2) Repartition2(4) Combine0(2) ("), std::string::npos) << r.out;
  EXPECT_EQ(splits_of_sums(out), 2);
  expect_bytes_as_predicted(trains_like(out.string(), "gpt-tiny --set batch=16 --devices 1"));
}

// The shipped LLaMA plan (Megatron-LM's t = 2 inside each layer, SwiGLU's
// three projections included, beside data parallelism 2) trains to
// 4-device data parallelism's losses with the bytes it predicts.
TEST(PlanOption, TheShippedLlamaPlanTrainsAsDataParallelism) {
  expect_bytes_as_predicted(trains_like("llama-tiny --plan " + kPlans + "llama-megatron-2x2.json --devices 4", "llama-tiny --devices 4"));
}

// The shipped co-shard plan (4 attention tasks per layer on 2 devices, more
// than the mapping places) trains as data parallelism on the same devices.
TEST(PlanOption, TheShippedCoShardPlanTrainsAsDataParallelism) {
  const auto coshard = run("run gpt-tiny --plan " + kPlans + "gpt-coshard-heads-2.json --devices 2 --steps 3 --no-report --no-plot");
  const auto plain = run("run gpt-tiny --devices 2 --steps 3 --no-report --no-plot");
  ASSERT_EQ(coshard.code, 0) << coshard.out;
  ASSERT_EQ(plain.code, 0) << plain.out;
  EXPECT_EQ(loss_line(coshard.out), loss_line(plain.out));
  EXPECT_NE(coshard.out.find("predicted"), std::string::npos) << coshard.out;
  // Under every ZeRO stage too (the plan's "zero"): each device keeps one
  // share of a block whatever the replicas of it it holds.
  nlohmann::json shipped = nlohmann::json::parse(std::ifstream(kPlans + "gpt-coshard-heads-2.json"));
  for (int zero : {1, 2, 3}) {
    shipped["zero"] = zero;
    const fs::path p = dir() / ("coshard-zero" + std::to_string(zero) + ".json");
    std::ofstream(p) << shipped.dump();
    const auto z = run("run gpt-tiny --plan " + p.string() + " --devices 2 --steps 3 --no-report --no-plot");
    ASSERT_EQ(z.code, 0) << z.out;
    EXPECT_EQ(loss_line(z.out), loss_line(plain.out)) << zero;
  }
}

// A rule's devices: its operators run there (the strategy's views say
// so), the plan is priced by simulation, and it trains as the same plan
// placed by the mapping does (the same arithmetic, elsewhere).
TEST(PlanOption, StatedDevicesPlaceTheOperators) {
  const fs::path placed = dir() / "placed.json", mapped = dir() / "mapped.json";
  const fs::path with = dir() / "with_devices.json", without = dir() / "without_devices.json";
  std::ofstream(with) << R"({"format": "pcgx.plan", "format_version": 1, "rules": [{"select": {}, "partition": {"samples": 2}, "devices": [2, 3]}]})";
  std::ofstream(without) << R"({"format": "pcgx.plan", "format_version": 1, "rules": [{"select": {}, "partition": {"samples": 2}}]})";
  const auto r = run("optimize mlp-tiny --plan " + with.string() + " --machine dgx-h100 --devices 4 -o " + placed.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("predicted (simulated)"), std::string::npos) << r.out;
  ASSERT_EQ(run("optimize mlp-tiny --plan " + without.string() + " --machine dgx-h100 --devices 4 -o " + mapped.string()).code, 0);
  EXPECT_EQ(linears_starting_on(placed, 2), 4);  // every dense layer starts on device 2
  const auto a = run("run " + placed.string() + " --steps 3 --no-report --no-plot");
  const auto b = run("run " + mapped.string() + " --steps 3 --no-report --no-plot");
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_EQ(loss_line(a.out), loss_line(b.out));
  // run predicts what it runs: the placed plan's simulation, as optimize priced it.
  EXPECT_NEAR(run_predicted_ms(a.out), predicted_ms(r.out), 1e-3) << a.out << r.out;
  // Co-shard: both halves of every operator's samples on device 1, one
  // after the other, train as the two halves on devices 0 and 1 do.
  const fs::path coshard = dir() / "coshard.json", cosharded = dir() / "cosharded.json", apart = dir() / "apart.json";
  std::ofstream(coshard) << R"({"format": "pcgx.plan", "format_version": 1, "rules": [{"select": {}, "partition": {"samples": 2}, "devices": [1, 1]}]})";
  ASSERT_EQ(run("optimize mlp-tiny --plan " + coshard.string() + " --machine dgx-h100 --devices 2 -o " + cosharded.string()).code, 0);
  ASSERT_EQ(run("optimize mlp-tiny --plan " + without.string() + " --machine dgx-h100 --devices 2 -o " + apart.string()).code, 0);
  const auto c = run("run " + cosharded.string() + " --steps 3 --no-report --no-plot");
  const auto d = run("run " + apart.string() + " --steps 3 --no-report --no-plot");
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_EQ(loss_line(c.out), loss_line(d.out));
  const fs::path bad = dir() / "bad_devices.json", out = dir() / "never_placed.json";
  std::ofstream(bad) << R"({"format": "pcgx.plan", "format_version": 1, "rules": [{"select": {}, "partition": {"samples": 2}, "devices": [2, 9]}]})";
  expect_one_error_line(run("optimize mlp-tiny --plan " + bad.string() + " --machine dgx-h100 --devices 4 -o " + out.string()),
                        "device 9 is not one of the 4 devices", out);
  // A search of the unstated rest keeps the stated devices (and prices by simulation).
  const fs::path searched = dir() / "placed_searched.json";
  const auto u = run("optimize mlp-tiny --plan " + with.string() + " --search unity --machine dgx-h100 --devices 4 -o " + searched.string());
  ASSERT_EQ(u.code, 0) << u.out;
  EXPECT_NE(u.out.find("predicted (simulated)"), std::string::npos) << u.out;
  EXPECT_EQ(linears_starting_on(searched, 2), 4);
}

// Devices in a pipelined plan are numbered within each stage: the shipped
// co-shard pipeline (2 stages of 2 devices, the attention's heads run one
// after the other on each device) places stage 2's attention on devices 2
// and 3, trains as the same pipeline data parallel in each stage, runs
// what optimize simulated, and plan show writes the devices back within
// their stage, priced the same when fed back.
TEST(PlanOption, DevicesInAPipelinedPlanCountWithinTheStage) {
  const fs::path placed = dir() / "coshard_pipeline.json", shown = dir() / "coshard_pipeline_plan.json", again = dir() / "again_pipeline.json";
  const auto r = run("optimize gpt-tiny --plan " + kPlans + "gpt-coshard-pipeline-4.json --machine dgx-h100 --devices 4 -o " + placed.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("predicted (simulated)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 stages x 2 devices, 2 micro-batches"), std::string::npos) << r.out;
  {
    std::ifstream in(placed);
    const nlohmann::json st = nlohmann::json::parse(in);
    std::map<int64_t, std::string> names;
    for (const auto& node : st.at("graph").at("nodes")) names[node.at("id")] = node.value("name", "");
    int64_t checked = 0;
    for (const auto& v : st.at("views")) {
      const std::string name = names[v.at("node")];
      if (name != "block0.attn.softmax" && name != "block1.attn.softmax") continue;
      EXPECT_EQ(v.at("start"), name == "block0.attn.softmax" ? 0 : 2) << v.dump();
      EXPECT_EQ(v.at("strides"), nlohmann::json::parse("[1, 1, 0]")) << v.dump();  // samples over the stage's two devices, heads on one
      ++checked;
    }
    EXPECT_EQ(checked, 2);
  }
  const fs::path dp = dir() / "dp_pipeline.json";
  std::ofstream(dp) << R"({"format": "pcgx.plan", "format_version": 1, "pipeline": {"stages": 2, "micro_batches": 2},
                          "rules": [{"select": {}, "partition": {"samples": 2}}]})";
  const auto a = run("run " + placed.string() + " --steps 3 --no-report --no-plot");
  const auto b = run("run gpt-tiny --plan " + dp.string() + " --devices 4 --batch 8 --steps 3 --no-report --no-plot");
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  // (The co-sharded heads' weight gradients are summed over the two
  // micro-batches in place, by products of other shapes than whole heads':
  // the last losses differ by about 2e-7 relative.)
  pcgx::testing::expect_close_losses(a.out, b.out);
  EXPECT_NEAR(run_predicted_ms(a.out), predicted_ms(r.out), 1e-3) << a.out << r.out;
  ASSERT_EQ(run("plan show " + placed.string() + " -o " + shown.string()).code, 0);
  {
    std::ifstream in(shown);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\"devices\": [0,0,1,1]"), std::string::npos) << text;
    EXPECT_EQ(text.find("[2,2,3,3]"), std::string::npos) << text;
  }
  const auto fed = run("optimize gpt-tiny --plan " + shown.string() + " --machine dgx-h100 --devices 4 -o " + again.string());
  ASSERT_EQ(fed.code, 0) << fed.out;
  EXPECT_NEAR(predicted_ms(fed.out), predicted_ms(r.out), 1e-9) << fed.out;
  // Beside a written stage order too: priced by simulating the order as written, trained alike.
  nlohmann::json written = nlohmann::json::parse(std::ifstream(kPlans + "gpt-coshard-pipeline-4.json"));
  written["pipeline"]["programs"] = {"F0 F1 B0 B1", "F0 B0 F1 B1"};
  const fs::path written_plan = dir() / "coshard_written.json", written_out = dir() / "coshard_written.strategy.json";
  std::ofstream(written_plan) << written.dump();
  const auto w = run("optimize gpt-tiny --plan " + written_plan.string() + " --machine dgx-h100 --devices 4 -o " + written_out.string());
  ASSERT_EQ(w.code, 0) << w.out;
  EXPECT_NE(w.out.find("explicit, the plan's"), std::string::npos) << w.out;
  const auto ws = run("simulate " + written_out.string());
  ASSERT_EQ(ws.code, 0) << ws.out;
  EXPECT_NE(ws.out.find("ratio 1.00"), std::string::npos) << ws.out;
  const auto wt = run("run " + written_out.string() + " --steps 3 --no-report --no-plot");
  ASSERT_EQ(wt.code, 0) << wt.out;
  EXPECT_EQ(loss_line(wt.out), loss_line(a.out));
  // A device outside the stage is named as one of the stage's.
  const fs::path bad = dir() / "bad_stage_devices.json", out = dir() / "never_stage.json";
  std::ofstream(bad) << R"({"format": "pcgx.plan", "format_version": 1, "pipeline": {"stages": 2, "micro_batches": 2},
                           "rules": [{"select": {}, "partition": {"samples": 2}, "devices": [2, 3]}]})";
  expect_one_error_line(run("optimize gpt-tiny --plan " + bad.string() + " --machine dgx-h100 --devices 4 -o " + out.string()),
                        "device 2 is not one of the 2 devices", out);
}

}  // namespace

// The operators a plan does not state searched by unity: "unstated":
// "search" in the file, or --search unity with any plan. The stated one runs
// as stated, and the whole trains to one device's losses.
TEST(PlanOption, TheUnstatedRestIsSearched) {
  const fs::path plan = dir() / "partial.json", out = dir() / "partial.strategy.json";
  std::ofstream(plan) << R"({"format": "pcgx.plan", "format_version": 1, "unstated": "search",
    "rules": [{"select": {"name": "dense0"}, "partition": {"out": 2}}]})";
  const auto r = run("optimize mlp-tiny --plan " + plan.string() + " --machine dgx-h100 --devices 4 --global-batch -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("with --search unity"), std::string::npos) << r.out;
  const size_t at = r.out.find("dense0");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NE(r.out.substr(at, r.out.find('\n', at) - at).find("/2]"), std::string::npos) << r.out;
  const fs::path one = dir() / "partial-one.json", four = dir() / "partial-four.json";
  ASSERT_EQ(run("run mlp-tiny --steps 4 --no-plot --report " + one.string()).code, 0);
  const auto trained = run("run " + out.string() + " --steps 4 --no-plot --report " + four.string());
  ASSERT_EQ(trained.code, 0) << trained.out;
  const auto a = nlohmann::json::parse(std::ifstream(one)).at("loss"), b = nlohmann::json::parse(std::ifstream(four)).at("loss");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i].get<double>(), a[i].get<double>(), 1e-5 * std::abs(a[i].get<double>())) << i;
  // --search unity does the same for a plan that does not say so: faster
  // than the plan as stated, its rest one task each (at a size where
  // splitting pays: 1.008 against 1.899 ms).
  const fs::path plain = dir() / "partial-plain.json";
  std::ofstream(plain) << R"({"format": "pcgx.plan", "format_version": 1,
    "rules": [{"select": {"name": "dense0"}, "partition": {"out": 2}}]})";
  auto predicted = [](const std::string& text) {
    const size_t where = text.find("iteration time");
    return where == std::string::npos ? 0.0 : std::stod(text.substr(text.find_first_of("0123456789", where)));
  };
  const std::string common = " --set hidden=4096 --set batch=1024 --machine dgx-h100 --devices 4 --global-batch -o " +
                             (dir() / "partial-plain.strategy.json").string();
  const auto stated = run("optimize mlp-tiny --plan " + plain.string() + common);
  const auto flag = run("optimize mlp-tiny --plan " + plain.string() + " --search unity" + common);
  ASSERT_EQ(stated.code, 0) << stated.out;
  ASSERT_EQ(flag.code, 0) << flag.out;
  EXPECT_NE(stated.out.find("with --search plan"), std::string::npos) << stated.out;
  EXPECT_NE(flag.out.find("with --search unity"), std::string::npos) << flag.out;
  EXPECT_GT(predicted(stated.out), 0);
  EXPECT_LT(predicted(flag.out), predicted(stated.out)) << flag.out;
}

// A pipelined plan's unstated operators are searched too, chunk by chunk,
// the plan as stated (its rest one task each) a candidate beside them:
// faster than that where splitting pays, and trained to one device's
// losses; gradient accumulation takes such a plan as well.
TEST(PlanOption, APipelinedPlansUnstatedRestIsSearched) {
  const fs::path plan = dir() / "partial-pipelined.json", searched = dir() / "partial-pipelined.strategy.json",
                 stated = dir() / "partial-pipelined-stated.strategy.json";
  std::ofstream(plan) << R"({"format": "pcgx.plan", "format_version": 1, "unstated": "search", "pipeline": {"stages": 2, "micro_batches": 2},
    "rules": [{"select": {"name": "block*.attn.query"}, "partition": {"samples": 2, "out": 2}}]})";
  const std::string big = " --set hidden=512 --set batch=64 --global-batch --machine dgx-h100 --devices 8 -o ";
  const auto s = run("optimize gpt-tiny --plan " + plan.string() + big + searched.string());
  const auto t = run("optimize gpt-tiny --plan " + plan.string() + " --search plan" + big + stated.string());
  ASSERT_EQ(s.code, 0) << s.out;
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(s.out.find("with --search unity"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("2 stages x 4 devices, 2 micro-batches"), std::string::npos) << s.out;
  EXPECT_LT(predicted_ms(s.out), predicted_ms(t.out)) << s.out << t.out;
  for (const char* name : {"block0.attn.query", "block1.attn.query"}) {  // as stated
    const size_t at = s.out.find(std::string("  ") + name);
    ASSERT_NE(at, std::string::npos) << s.out;
    EXPECT_NE(s.out.substr(at, s.out.find('\n', at) - at).find("f32[64/2|p2, 16, 512/2]"), std::string::npos) << s.out;
  }
  const fs::path small = dir() / "partial-pipelined-small.strategy.json", one = dir() / "pipelined-one.json", eight = dir() / "pipelined-eight.json";
  const std::string tiny = " --set batch=16 --global-batch --machine dgx-h100 --devices 8 -o ";
  const auto small_searched = run("optimize gpt-tiny --plan " + plan.string() + tiny + small.string());
  const auto small_stated = run("optimize gpt-tiny --plan " + plan.string() + " --search plan" + tiny + (dir() / "small-stated.json").string());
  ASSERT_EQ(small_searched.code, 0) << small_searched.out;
  ASSERT_EQ(small_stated.code, 0) << small_stated.out;
  // Never slower than the plan as stated (here its chunks searched alone join slower: 1.018 against 1.010 ms).
  EXPECT_LE(predicted_ms(small_searched.out), predicted_ms(small_stated.out)) << small_searched.out << small_stated.out;
  ASSERT_EQ(run("run gpt-tiny --batch 16 --steps 4 --no-plot --report " + one.string()).code, 0);
  const auto trained = run("run " + small.string() + " --steps 4 --no-plot --report " + eight.string());
  ASSERT_EQ(trained.code, 0) << trained.out;
  const auto a = nlohmann::json::parse(std::ifstream(one)).at("loss"), b = nlohmann::json::parse(std::ifstream(eight)).at("loss");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i].get<double>(), a[i].get<double>(), 1e-5 * std::abs(a[i].get<double>())) << i;
  const fs::path flat = dir() / "partial-flat.json", accumulated = dir() / "partial-accumulated.strategy.json";
  std::ofstream(flat) << R"({"format": "pcgx.plan", "format_version": 1, "unstated": "search",
    "rules": [{"select": {"name": "dense0"}, "partition": {"out": 2}}]})";
  const auto acc = run("optimize mlp-tiny --plan " + flat.string() + " --micro-batches 2 --machine dgx-h100 --devices 4 -o " + accumulated.string());
  ASSERT_EQ(acc.code, 0) << acc.out;
  EXPECT_NE(acc.out.find("gradient accumulation 2 micro-batches"), std::string::npos) << acc.out;
}
