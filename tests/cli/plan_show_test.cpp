// pcgx plan show (docs/plans.md): the plan a found strategy amounts to,
// fed back with optimize --plan, is priced the same: its partitions, its
// recipe, its pipeline, its co-sharded devices and the algebraic rewrites
// the search applied.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/plan_test_helpers.h"
#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::expect_one_error_line;
using pcgx::testing::predicted_ms;
using pcgx::testing::run;

const std::string kPlans = std::string(PCGX_SOURCE_DIR) + "/data/plans/";

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_plan_show_test");
  return d;
}

// plan show: a unity strategy's plan, fed back with --plan, is priced the
// same (the issue's round trip; substitutions the strategy applied are
// named on stderr, and the plan states the model's own operators).
// On 2 CPU devices unity's plan rewrites the norms and dropouts by rules
// (layernorm-v1, dropout-v1) and splits the loss by vocabulary inside a
// searched piece: the rewritten operators keep the model's names, and the
// loss's part its own ("loss.lse"), or the plan could not state them.
// BERT's residual sums read the split stream, as the plan's lowering
// derives them, not the stream gathered for the attention and split again.
TEST(PlanShow, AUnityStrategysPlanFedBackPricesTheSame) {
  const fs::path found = dir() / "unity.json", plan = dir() / "shown.json", again = dir() / "again.json";
  for (const std::string machine : {"gpt-tiny --machine dgx-h100 --devices 4", "gpt-tiny --machine cpu-host --devices 2",
                                    "bert-large-tiny --machine cpu-host --devices 2"}) {
    SCOPED_TRACE(machine);
    const auto u = run("optimize " + machine + " -q -o " + found.string());
    ASSERT_EQ(u.code, 0) << u.out;
    const auto shown = run("plan show " + found.string() + " -o " + plan.string());
    ASSERT_EQ(shown.code, 0) << shown.out;
    ASSERT_TRUE(fs::exists(plan));
    const auto back = run("optimize " + machine + " --plan " + plan.string() + " -q -o " + again.string());
    ASSERT_EQ(back.code, 0) << back.out;
    EXPECT_GT(predicted_ms(u.out), 0);
    EXPECT_EQ(predicted_ms(back.out), predicted_ms(u.out)) << u.out << back.out;
  }
  // Printed when no file is given; a missing strategy is one error line.
  const auto printed = run("plan show " + found.string());
  EXPECT_EQ(printed.code, 0);
  EXPECT_NE(printed.out.find("\"format\": \"pcgx.plan\""), std::string::npos) << printed.out;
  expect_one_error_line(run("plan show " + (dir() / "none.json").string()), "none.json", dir() / "never.json");
}

// The same round trip where unity's strategy rewrote the model's operators
// by algebraic rules: LLaMA's query and key projections fused into one
// Linear (unity-c01643~), DLRM's fused ReLU split off and fused back
// through the operator the first rewrite made (named after it,
// "bottom2.relu"), ResNeXt's BatchNorms whole where unity left them whole
// (WholeBatchNormsTravelWithThePlan, apart to keep each test short). The
// plan states the rewrites ("rewrites", at the operators named) and fed
// back runs the same operators, priced the same. A rewrite the rulesets
// lack, or one that matches nothing where it says, is one error.
struct RoundTrip {
  std::string model, machine;
  bool rewrites;
};

// Optimizes c.model, shows its plan (kept at `keep` where given), feeds
// it back and expects the same price and the same operators.
void expect_round_trip(const RoundTrip& c, const std::string& tag, const fs::path* keep = nullptr) {
  SCOPED_TRACE(c.model + " " + c.machine);
  const fs::path found = dir() / (tag + ".json"), plan = dir() / (tag + "-plan.json"), again = dir() / (tag + "-again.json");
  const auto u = run("optimize " + c.model + " " + c.machine + " -q -o " + found.string());
  ASSERT_EQ(u.code, 0) << u.out;
  ASSERT_EQ(run("plan show " + found.string() + " -o " + plan.string()).code, 0);
  const nlohmann::json p = nlohmann::json::parse(std::ifstream(plan));
  EXPECT_EQ(p.contains("rewrites"), c.rewrites) << p.dump();
  if (keep) fs::copy_file(plan, *keep, fs::copy_options::overwrite_existing);
  const auto back = run("optimize " + c.model + " --plan " + plan.string() + " " + c.machine + " -q -o " + again.string());
  ASSERT_EQ(back.code, 0) << back.out;
  EXPECT_GT(predicted_ms(u.out), 0);
  EXPECT_EQ(predicted_ms(back.out), predicted_ms(u.out)) << u.out << back.out;
  // The same operators, by kind: those the rewrites and the whole
  // BatchNorms decide. (Unity's parallel rewrite of a residual sum, a
  // Concat of replicas then a Reduce for an EwAdd, is not stated.)
  auto kinds = [](const fs::path& f) {
    std::map<std::string, int> n;
    const nlohmann::json strategy = nlohmann::json::parse(std::ifstream(f));
    for (const auto& node : strategy.at("graph").at("nodes"))
      if (const std::string op = node.at("op"); op == "Linear" || op == "Split" || op == "Relu" || op == "BatchNorm" || op == "BatchSum")
        ++n[op];
    return n;
  };
  EXPECT_EQ(kinds(again), kinds(found));
}

TEST(PlanShow, WholeBatchNormsTravelWithThePlan) {
  expect_round_trip({"resnext-50-tiny", "--machine dgx-h100 --devices 4", false}, "bn-h100");
  expect_round_trip({"resnext-50-tiny", "--machine cpu-host --devices 2", false}, "bn-cpu");
}

TEST(PlanShow, AlgebraicRewritesTravelWithThePlan) {
  const fs::path found = dir() / "rw.json", again = dir() / "rw-again.json";
  const fs::path llama_plan = dir() / "rw-llama-kept.json";
  expect_round_trip({"llama-tiny", "--machine dgx-h100 --devices 4", true}, "rw-llama", &llama_plan);
  expect_round_trip({"dlrm-tiny", "--machine dgx-h100 --devices 4", true}, "rw-dlrm");
  ASSERT_FALSE(HasFatalFailure());
  // A plan with rewrites lowers into a strategy that records them (so its
  // plan states them again), pipelined too: each stage makes the rewrites
  // of its own operators.
  const nlohmann::json p = nlohmann::json::parse(std::ifstream(llama_plan));
  nlohmann::json piped = p;
  piped["pipeline"] = {{"stages", 2}, {"micro_batches", 2}};
  const fs::path piped_plan = dir() / "rw-piped.json", piped_again = dir() / "rw-piped-again.json";
  std::ofstream(piped_plan) << piped.dump();
  const auto lowered = run("optimize llama-tiny --plan " + piped_plan.string() + " --machine dgx-h100 --devices 4 -q -o " + found.string());
  ASSERT_EQ(lowered.code, 0) << lowered.out;
  EXPECT_NE(lowered.out.find("unity-c01643~ at layers1.self_attn.query, layers1.self_attn.key"), std::string::npos) << lowered.out;
  ASSERT_EQ(run("plan show " + found.string() + " -o " + piped_again.string()).code, 0);
  // Looked up in a ruleset without the fusion, the rewrites are left out
  // and the note says why.
  const auto elsewhere_shown = run("plan show " + found.string() + " --ruleset " + std::string(PCGX_SOURCE_DIR) + "/rulesets/dropout-v1.json");
  ASSERT_EQ(elsewhere_shown.code, 0) << elsewhere_shown.out;
  EXPECT_EQ(elsewhere_shown.out.find("\"rewrites\""), std::string::npos) << elsewhere_shown.out;
  EXPECT_NE(elsewhere_shown.out.find("whose rules are in none of the rulesets read"), std::string::npos) << elsewhere_shown.out;
  const nlohmann::json shown = nlohmann::json::parse(std::ifstream(piped_again));
  EXPECT_EQ(shown["rewrites"], p["rewrites"]);
  EXPECT_TRUE(shown.contains("pipeline"));
  const auto back = run("optimize llama-tiny --plan " + piped_again.string() + " --machine dgx-h100 --devices 4 -q -o " + again.string());
  ASSERT_EQ(back.code, 0) << back.out;
  EXPECT_EQ(predicted_ms(back.out), predicted_ms(lowered.out)) << lowered.out << back.out;
  // A plan with a rewrite to break: LLaMA's.
  ASSERT_TRUE(p.contains("rewrites"));
  const fs::path broken = dir() / "rw-broken.json";
  auto write = [&](const nlohmann::json& j) { std::ofstream(broken) << j.dump(); };
  nlohmann::json unknown = p;
  unknown["rewrites"][0]["rule"] = "unity-c99999";
  write(unknown);
  expect_one_error_line(run("optimize llama-tiny --plan " + broken.string() + " --machine dgx-h100 --devices 4 -o " + again.string() + ".x"),
                        "rewrites[0].rule: no rule 'unity-c99999' in the rulesets", fs::path(again.string() + ".x"));
  nlohmann::json parallel = p;
  parallel["rewrites"][0]["rule"] = "unity-c00014";  // Combine(Repartition(x)) => x
  write(parallel);
  expect_one_error_line(run("optimize llama-tiny --plan " + broken.string() + " --machine dgx-h100 --devices 4 -o " + again.string() + ".x"),
                        "rewrites[0].rule: 'unity-c00014' is no algebraic rule of the rulesets", fs::path(again.string() + ".x"));
  nlohmann::json elsewhere = p;
  elsewhere["rewrites"][0]["at"] = {"layers0.mlp.gate_proj", "layers0.self_attn.output"};
  write(elsewhere);
  expect_one_error_line(run("optimize llama-tiny --plan " + broken.string() + " --machine dgx-h100 --devices 4 -o " + again.string() + ".x"),
                        "rewrites[0] (unity-c01643~ at layers0.mlp.gate_proj, layers0.self_attn.output): the rule does not apply at those operators, in that order",
                        fs::path(again.string() + ".x"));
}

// Inception on 4 dgx-h100 devices: unity runs pairs of branch ReLUs as one
// ReLU over two replica slots, one operand in each (unity-c01106~, an
// algebraic rule). The plan states the rewrite and no partition for the
// slots (the model's own); fed back it is priced the same, and trained on
// 4 CPU devices it computes what one device computes.
TEST(PlanShow, AReluOverReplicaSlotsOfItsOwnTravelsAsItsRewrite) {
  const fs::path found = dir() / "inception.json", plan = dir() / "inception-plan.json", again = dir() / "inception-again.json";
  const std::string machine = "--machine dgx-h100 --devices 4";
  const auto u = run("optimize inception-v3-tiny " + machine + " -q -o " + found.string());
  ASSERT_EQ(u.code, 0) << u.out;
  ASSERT_NE(u.out.find("unity-c01106~@4d at "), std::string::npos) << u.out;
  const auto shown = run("plan show " + found.string() + " -o " + plan.string());
  ASSERT_EQ(shown.code, 0) << shown.out;
  const nlohmann::json p = nlohmann::json::parse(std::ifstream(plan));
  ASSERT_TRUE(p.contains("rewrites")) << p.dump();
  EXPECT_EQ(p.at("rewrites").at(0).at("rule"), "unity-c01106~@4d");
  const auto back = run("optimize inception-v3-tiny --plan " + plan.string() + " " + machine + " -q -o " + again.string());
  ASSERT_EQ(back.code, 0) << back.out;
  EXPECT_GT(predicted_ms(u.out), 0);
  EXPECT_EQ(predicted_ms(back.out), predicted_ms(u.out)) << u.out << back.out;
  pcgx::testing::trains_like("inception-v3-tiny --plan " + plan.string() + " --devices 4", "inception-v3-tiny --devices 1");
}

// An operator run in copies ("replicas", SuperScaler's replicate): the
// plan trains to data parallelism's losses with the bytes it predicts,
// and its strategy's plan states the copies and is priced the same.
TEST(PlanShow, ReplicasTrainAndTravel) {
  const fs::path plan = dir() / "replicas.json", found = dir() / "replicas-found.json", shown = dir() / "replicas-shown.json",
                 again = dir() / "replicas-again.json";
  std::ofstream(plan) << R"({"format": "pcgx.plan", "format_version": 1, "rules": [
    {"select": {}, "partition": {"samples": 2}},
    {"select": {"name": "block*.ln1"}, "partition": {"replicas": 2}},
    {"select": {"name": "ln_f"}, "partition": {"samples": 2, "replicas": 2}}]})";
  pcgx::testing::expect_bytes_as_predicted(
      pcgx::testing::trains_like("gpt-tiny --plan " + plan.string() + " --devices 4 --batch 8", "gpt-tiny --devices 4 --batch 8"));
  const std::string machine = " --machine cpu-host --devices 4";
  const auto u = run("optimize gpt-tiny --plan " + plan.string() + machine + " -q -o " + found.string());
  ASSERT_EQ(u.code, 0) << u.out;
  ASSERT_EQ(run("plan show " + found.string() + " -o " + shown.string()).code, 0);
  const nlohmann::json p = nlohmann::json::parse(std::ifstream(shown));
  int copies = 0;
  for (const auto& r : p.at("rules")) copies += r.at("partition").value("replicas", 0) == 2;
  EXPECT_EQ(copies, 2) << p.dump();  // block*.ln1 (both layers alike, by pattern) and ln_f
  const auto back = run("optimize gpt-tiny --plan " + shown.string() + machine + " -q -o " + again.string());
  ASSERT_EQ(back.code, 0) << back.out;
  EXPECT_EQ(predicted_ms(back.out), predicted_ms(u.out)) << u.out << back.out;
  // With pipeline stages, the last stage taking a first copy: the copy
  // left behind stays on its stage (placement.h), so the plan trains to
  // the same losses with the bytes it predicts (it used to hang there).
  nlohmann::json piped = nlohmann::json::parse(std::ifstream(plan));
  piped["pipeline"] = {{"stages", 2}, {"micro_batches", 2}};
  piped["rules"].erase(2);  // (ln_f's 4 tasks: more than a stage's 2 devices)
  const fs::path piped_plan = dir() / "replicas-piped.json";
  std::ofstream(piped_plan) << piped.dump();
  pcgx::testing::expect_bytes_as_predicted(
      pcgx::testing::trains_like("gpt-tiny --plan " + piped_plan.string() + " --devices 4 --batch 8", "gpt-tiny --devices 4 --batch 8"));
}

// A BatchNorm a plan leaves whole is written whole, its statistics parts
// with it, and stays whole fed back: where the first rule splits the
// samples (its parts written whole too), and split by its channels, which
// it does itself.
TEST(PlanShow, WholeBatchNormsStayWholeFedBack) {
  const fs::path plan = dir() / "bn.json", found = dir() / "bn-found.json", shown = dir() / "bn-shown.json", again = dir() / "bn-again.json";
  auto batch_norms = [](const fs::path& f) {
    int n = 0;
    const nlohmann::json strategy = nlohmann::json::parse(std::ifstream(f));
    for (const auto& node : strategy.at("graph").at("nodes")) n += node.at("op") == "BatchNorm";
    return n;
  };
  for (const auto& [rules, whole] : {std::pair<std::string, int>{R"({"select": {}, "partition": {"samples": 2}}, {"select": {"name": "stage2*"}, "partition": {}})", 4},
                                     std::pair<std::string, int>{R"({"select": {}, "partition": {}}, {"select": {"op": "BatchNorm"}, "partition": {"channel": 2}})", 17}}) {
    SCOPED_TRACE(rules);
    std::ofstream(plan) << R"({"format": "pcgx.plan", "format_version": 1, "rules": [)" + rules + "]}";
    const auto lowered = run("optimize resnext-50-tiny --plan " + plan.string() + " --machine cpu-host --devices 2 -q -o " + found.string());
    ASSERT_EQ(lowered.code, 0) << lowered.out;
    ASSERT_EQ(run("plan show " + found.string() + " -o " + shown.string()).code, 0);
    const auto back = run("optimize resnext-50-tiny --plan " + shown.string() + " --machine cpu-host --devices 2 -q -o " + again.string());
    ASSERT_EQ(back.code, 0) << back.out;
    EXPECT_EQ(predicted_ms(back.out), predicted_ms(lowered.out)) << lowered.out << back.out;
    EXPECT_EQ(batch_norms(found), whole);
    EXPECT_EQ(batch_norms(again), whole);
  }
}

// A pipelined strategy's plan states its stages: where each chunk ends
// ("boundaries", wherever the search cut them, here a 4-layer GPT whose
// balanced cut need not fall between even layers), its micro-batches and
// its written order; fed back, it is priced the same and cut at the same
// operators. A boundary that is no cut, or the wrong count, is one error.
TEST(PlanShow, APipelinedStrategysStagesFedBackPriceTheSame) {
  for (const std::string& how : {std::string("--pipeline --stages 2 --micro-batches 4"),
                                  std::string("--pipeline --stages 2 --micro-batches 4 --virtual-stages 2 --search data-parallel")}) {
    SCOPED_TRACE(how);
    const fs::path found = dir() / "piped.json", plan = dir() / "piped-plan.json", again = dir() / "piped-again.json";
    const std::string model = "gpt-tiny --set layers=4 --machine dgx-h100 --devices 4 -q ";
    const auto u = run("optimize " + model + how + " -o " + found.string());
    ASSERT_EQ(u.code, 0) << u.out;
    const auto shown = run("plan show " + found.string() + " -o " + plan.string());
    ASSERT_EQ(shown.code, 0) << shown.out;
    std::ifstream in(plan);
    const auto j = nlohmann::json::parse(in);
    const auto& p = j.at("pipeline");
    EXPECT_EQ(p.at("stages"), 2);
    EXPECT_EQ(p.at("micro_batches"), 4);
    const int64_t chunks = 2 * p.value("virtual_stages", 1);
    ASSERT_EQ(static_cast<int64_t>(p.at("boundaries").size()), chunks - 1) << p.dump();
    const auto back = run("optimize " + model + "--plan " + plan.string() + " -o " + again.string());
    ASSERT_EQ(back.code, 0) << back.out;
    EXPECT_GT(predicted_ms(u.out), 0);
    EXPECT_EQ(predicted_ms(back.out), predicted_ms(u.out)) << u.out << back.out;
    // Each stage's first and last operators, as found.
    auto stage_lines = [](const std::string& out) {
      std::string lines;
      for (size_t at = out.find("  stage "); at != std::string::npos; at = out.find("  stage ", at + 1))
        lines += out.substr(at, out.find(')', at) - at) + "\n";
      return lines;
    };
    EXPECT_FALSE(stage_lines(u.out).empty()) << u.out;
    EXPECT_EQ(stage_lines(back.out), stage_lines(u.out));
  }
  const fs::path bad = dir() / "bad-boundaries.json", out = dir() / "bad-b.json";
  const std::string base = "optimize gpt-tiny --machine dgx-h100 --devices 4 -o " + out.string() + " --plan " + bad.string();
  auto plan_with = [&](const std::string& boundaries) {
    std::ofstream(bad) << R"({"format": "pcgx.plan", "format_version": 1, "pipeline": {"stages": 2, "micro_batches": 2, "boundaries": )"
                       << boundaries << R"(}, "rules": [{"select": {}, "partition": {"samples": 2}}]})";
  };
  plan_with(R"(["block0.attn.query"])");
  expect_one_error_line(run(base), "'block0.attn.query' does not end a single-tensor cut of 'gpt-tiny'", out);
  plan_with(R"(["no.such"])");
  expect_one_error_line(run(base), "'no.such' is no operator of 'gpt-tiny'", out);
  plan_with(R"(["block0.mlp_residual", "block1.ln1"])");
  expect_one_error_line(run(base), "pipeline.boundaries: 2 names for 2 chunks (stages x virtual stages): one per chunk but the last", out);
  plan_with(R"("block0.mlp_residual")");
  expect_one_error_line(run(base), "pipeline.boundaries: expected an array of operator names", out);
}

// A co-sharding strategy's plan states the devices of the operators that
// co-shard (only a device list can say it), and fed back is priced the same.
TEST(PlanShow, ACoShardedStrategysPlanStatesItsDevices) {
  const fs::path found = dir() / "coshard-found.json", plan = dir() / "coshard-plan.json", again = dir() / "coshard-again.json";
  const std::string model = "gpt-tiny --machine dgx-h100 --devices 2 ";
  const auto u = run("optimize " + model + "--plan " + kPlans + "gpt-coshard-heads-2.json -o " + found.string());
  ASSERT_EQ(u.code, 0) << u.out;
  const auto shown = run("plan show " + found.string() + " -o " + plan.string());
  ASSERT_EQ(shown.code, 0) << shown.out;
  std::ifstream in(plan);
  const auto j = nlohmann::json::parse(in);
  int64_t placed = 0;
  for (const auto& rule : j.at("rules"))
    if (rule.contains("devices")) {
      ++placed;
      EXPECT_NE(rule.at("select").value("name", "").find("attn"), std::string::npos) << rule.dump();
    }
  EXPECT_GE(placed, 5) << j.dump();
  const auto back = run("optimize " + model + "--plan " + plan.string() + " -o " + again.string());
  ASSERT_EQ(back.code, 0) << back.out;
  EXPECT_NEAR(predicted_ms(back.out), predicted_ms(u.out), 1e-9) << u.out << back.out;
}

// plan show writes the strategy's recipe (here full recomputation of 2 of
// 3 layers, bf16, ZeRO 1, FlashAttention, input gradients sent beside the
// weight products, weights gathered beside the forward pass), so that the plan fed back
// without flags trains and is priced the same; recompute_layers beside
// another policy, and an unknown attention kernel, are one error line.
TEST(PlanShow, TheRecipeTravelsWithThePlan) {
  const fs::path found = dir() / "recipe-found.json", plan = dir() / "recipe-plan.json", again = dir() / "recipe-again.json";
  const std::string model = "gpt-tiny --set layers=3 --machine dgx-h100 --devices 4 -q ";
  const auto u = run("optimize " + model + "--search data-parallel --precision bf16 --zero 1 --recompute full --recompute-layers 2 " +
                     "--optimizer momentum --attention flash --cross-entropy eager --overlap-grad-input --overlap-param-gather -o " + found.string());
  ASSERT_EQ(u.code, 0) << u.out;
  const auto shown = run("plan show " + found.string() + " -o " + plan.string());
  ASSERT_EQ(shown.code, 0) << shown.out;
  std::ifstream in(plan);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("precision"), "bf16");
  EXPECT_EQ(j.at("recompute"), "full");
  EXPECT_EQ(j.at("recompute_layers"), 2);
  EXPECT_EQ(j.at("zero"), 1);
  EXPECT_EQ(j.at("optimizer"), "momentum");
  EXPECT_EQ(j.at("attention"), "flash");
  EXPECT_EQ(j.at("cross_entropy"), "eager");
  EXPECT_EQ(j.at("overlap_grad_input"), true);
  EXPECT_EQ(j.at("overlap_param_gather"), true);
  const auto back = run("optimize " + model + "--plan " + plan.string() + " -o " + again.string());
  ASSERT_EQ(back.code, 0) << back.out;
  EXPECT_NE(back.out.find("recompute             full, first 2 layers\n"), std::string::npos) << back.out;
  EXPECT_NE(back.out.find("precision             bf16"), std::string::npos) << back.out;
  EXPECT_NE(back.out.find("attention             flash"), std::string::npos) << back.out;
  EXPECT_NE(back.out.find("cross-entropy         eager"), std::string::npos) << back.out;
  EXPECT_NE(back.out.find("input gradients       sent while the weight gradients are computed"), std::string::npos) << back.out;
  EXPECT_NE(back.out.find("weights after update  gathered beside the next step's forward pass"), std::string::npos) << back.out;
  EXPECT_EQ(predicted_ms(back.out), predicted_ms(u.out)) << u.out << back.out;
  // A flag the plan states can be turned off.
  const auto without = run("optimize " + model + "--plan " + plan.string() + " --no-overlap-grad-input --no-overlap-param-gather -o " + again.string());
  ASSERT_EQ(without.code, 0) << without.out;
  EXPECT_EQ(without.out.find("input gradients"), std::string::npos) << without.out;
  EXPECT_EQ(without.out.find("weights after update"), std::string::npos) << without.out;
  const fs::path bad = dir() / "bad-layers.json", out = dir() / "bad-layers-s.json";
  std::ofstream(bad) << R"({"format": "pcgx.plan", "format_version": 1, "recompute": "selective", "recompute_layers": 2,
                           "rules": [{"select": {}, "partition": {"samples": 4}}]})";
  expect_one_error_line(run("optimize " + model + "--plan " + bad.string() + " -o " + out.string()),
                        "recompute_layers: applies to full recomputation (\"recompute\": \"full\", \"full+selective\" or \"full+gathers\")", out);
  std::ofstream(bad) << R"({"format": "pcgx.plan", "format_version": 1, "attention": "sdpa",
                           "rules": [{"select": {}, "partition": {"samples": 4}}]})";
  expect_one_error_line(run("optimize " + model + "--plan " + bad.string() + " -o " + out.string()), "attention: expected one of eager, flash", out);
  std::ofstream(bad) << R"({"format": "pcgx.plan", "format_version": 1, "overlap_grad_input": "on",
                           "rules": [{"select": {}, "partition": {"samples": 4}}]})";
  expect_one_error_line(run("optimize " + model + "--plan " + bad.string() + " -o " + out.string()), "overlap_grad_input: expected true or false", out);
  std::ofstream(bad) << R"({"format": "pcgx.plan", "format_version": 1, "overlap_param_gather": 1,
                           "rules": [{"select": {}, "partition": {"samples": 4}}]})";
  expect_one_error_line(run("optimize " + model + "--plan " + bad.string() + " -o " + out.string()), "overlap_param_gather: expected true or false", out);
}

}  // namespace
