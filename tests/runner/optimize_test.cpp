// runner::optimize choosing the recomputation, the precision and gradient
// accumulation: none where memory does not constrain the search, a recipe
// that fits where it does, and, where none fits, one reason naming the
// smallest need found and what would lower it. (The ZeRO stage:
// optimize_zero_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runner/optimize.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/user_plan.h"
#include "runner/optimize_requests.h"
#include "search/toy_machines.h"

namespace pcgx::runner {
namespace {

using pcgx::testing::request;
using pcgx::testing::sharded;

double need(Recompute r) {
  const OptimizeReport rep = optimize(request(1e12, r));
  return rep.result.search.strategy.estimate.max_memory();
}

TEST(OptimizeRecompute, NoneWhenMemoryDoesNotConstrain) {
  const OptimizeReport rep = optimize(request(1e12, std::nullopt));
  ASSERT_TRUE(rep.result.search.strategy.estimate.feasible);
  EXPECT_EQ(rep.file.recipe.recompute, Recompute::kNone);
  ASSERT_EQ(rep.tried.size(), 1u);  // nothing refused: recomputing could only add time
  EXPECT_TRUE(rep.tried[0].feasible);
}

// Megatron-LM's plan with sequence parallelism (the expert's, t = 2,
// stated as Megatron's or the expert's) keeps what Megatron-LM keeps:
// auto's least recomputation is gathers, the gathered inputs gathered
// again in backward; without sequence parallelism, or at t = 1 where there
// is nothing to gather, none.
TEST(OptimizeRecompute, MegatronsSequenceParallelPlanGathersAgain) {
  for (const auto algorithm : {search::Algorithm::kMegatron, search::Algorithm::kExpert})
    for (const int64_t t : {2, 1})
      for (const bool sp : {true, false}) {
        SCOPED_TRACE(std::string(search::name(algorithm)) + " t=" + std::to_string(t) + (sp ? " sequence parallel" : ""));
        runner::OptimizeRequest q = request(1e12, std::nullopt);
        q.machine = search::toy_machine().with_devices(2);
        q.machine.device.memory_capacity = 1e12;
        q.search.algorithm = algorithm, q.search.tensor_degree = t, q.search.sequence_parallel = sp;
        q.zero = ZeroStage::k0;
        const OptimizeReport rep = optimize(q);
        ASSERT_TRUE(rep.result.search.strategy.estimate.feasible);
        EXPECT_EQ(rep.file.recipe.recompute, sp && t > 1 ? Recompute::kGathers : Recompute::kNone);
        ASSERT_EQ(rep.tried.size(), 1u);
      }
}

// The same plan where only full recomputation fits: auto's full is
// full+gathers, the fewest layers that fit counted with the layers left
// whole gathering again, and no recipe tried keeps a gathered copy (none,
// full, kinds of operators). The count taken is the fewest that fit. At t = 1 nothing is
// gathered: full+gathers is full's plan, recorded as full.
TEST(OptimizeRecompute, MegatronsSequenceParallelPlanGathersAgainBesideFullLayers) {
  auto with = [](double capacity, std::optional<Recompute> r, std::optional<int32_t> layers) {
    OptimizeRequest q = request(capacity, r);
    q.model = build_model("gpt-tiny", {{"layers", 4}});
    q.machine = search::toy_machine().with_devices(2);
    q.machine.device.memory_capacity = capacity;
    q.search.algorithm = search::Algorithm::kMegatron, q.search.tensor_degree = 2, q.search.sequence_parallel = true;
    q.zero = ZeroStage::k0;
    q.recompute_layers = layers;
    q.recompute_kinds = true;  // (kinds of operators would keep the gathered copies: not tried)
    return q;
  };
  auto need_of = [&](Recompute r, std::optional<int32_t> layers) {
    return optimize(with(1e12, r, layers)).result.search.strategy.estimate.max_memory();
  };
  const double sel = need_of(Recompute::kSelective, std::nullopt), every = need_of(Recompute::kFullGathers, std::nullopt);
  ASSERT_LT(every, sel);
  ASSERT_LT(need_of(Recompute::kFullGathers, 2), need_of(Recompute::kFull, 2)) << "layers left whole keep no gathered copy";
  const double capacity = (every + sel) / 2;
  const OptimizeReport rep = optimize(with(capacity, std::nullopt, std::nullopt));
  ASSERT_TRUE(rep.result.search.strategy.estimate.feasible) << rep.result.search.strategy.estimate.infeasible;
  bool counted = false;
  for (const RecipeTried& t : rep.tried) {
    EXPECT_NE(t.recipe.recompute, Recompute::kNone);
    EXPECT_NE(t.recipe.recompute, Recompute::kFull);
    EXPECT_NE(t.recipe.recompute, Recompute::kOperators);
    counted = counted || (t.recipe.recompute == Recompute::kFullGathers && t.recipe.recompute_layers != kAllLayers && !t.searched);
  }
  EXPECT_TRUE(counted);
  const TrainingRecipe& chosen = rep.file.recipe;
  std::printf("capacity %.0f B: chosen %s\n", capacity, describe_recompute(chosen.recompute, chosen.recompute_layers).c_str());
  ASSERT_TRUE(chosen.recompute == Recompute::kFullGathers || chosen.recompute == Recompute::kFullSelective) << name(chosen.recompute);
  if (chosen.recompute == Recompute::kFullGathers && chosen.recompute_layers != kAllLayers) {
    const int32_t k = chosen.recompute_layers;
    EXPECT_LE(need_of(Recompute::kFullGathers, k), capacity);
    if (k > 1) {
      EXPECT_GT(need_of(Recompute::kFullGathers, k - 1), capacity);
    }
  }
  EXPECT_EQ(rep.cost->recipe().recompute, chosen.recompute);

  auto flat = [&](double c, std::optional<Recompute> r) {
    OptimizeRequest q = with(c, r, std::nullopt);
    q.search.tensor_degree = 1;
    return q;
  };
  const double flat_sel = optimize(flat(1e12, Recompute::kSelective)).result.search.strategy.estimate.max_memory();
  const double flat_full = optimize(flat(1e12, Recompute::kFullGathers)).result.search.strategy.estimate.max_memory();
  ASSERT_LT(flat_full, flat_sel);
  const OptimizeReport one = optimize(flat((flat_full + flat_sel) / 2, std::nullopt));
  ASSERT_TRUE(one.result.search.strategy.estimate.feasible) << one.result.search.strategy.estimate.infeasible;
  EXPECT_TRUE(std::any_of(one.tried.begin(), one.tried.end(), [](const RecipeTried& t) { return t.recipe.recompute == Recompute::kFullGathers; }));
  EXPECT_TRUE(one.file.recipe.recompute == Recompute::kFull || one.file.recipe.recompute == Recompute::kFullSelective)
      << name(one.file.recipe.recompute);
}

TEST(OptimizeRecompute, AutoRecomputesWhereNothingElseFits) {
  const double none = need(Recompute::kNone), sel = need(Recompute::kSelective), full = need(Recompute::kFull);
  ASSERT_LT(sel, none);
  ASSERT_LT(full, sel);
  // Between full's need and selective's: only full fits.
  const OptimizeReport rep = optimize(request((full + sel) / 2, std::nullopt));
  ASSERT_TRUE(rep.result.search.strategy.estimate.feasible) << rep.result.search.strategy.estimate.infeasible;
  EXPECT_EQ(rep.file.recipe.recompute, Recompute::kFull);
  EXPECT_EQ(rep.cost->recipe().recompute, Recompute::kFull);
  ASSERT_GE(rep.tried.size(), 3u);
  EXPECT_FALSE(rep.tried[0].feasible);
  EXPECT_DOUBLE_EQ(rep.tried[0].smallest_need, none);
  EXPECT_FALSE(rep.tried[1].feasible);
  EXPECT_TRUE(rep.tried[2].feasible);
  EXPECT_EQ(rep.tried[2].recipe.recompute_layers, kAllLayers);
  // Then fewer layers recomputed, each the searched plan re-priced
  // (OptimizeRecompute.FullOfTheFewestLayersThatFit), and the count kept
  // searched once more, last (OptimizeZero.TheStageKeptIsSearchedAgain).
  for (size_t i = 3; i < rep.tried.size(); ++i) {
    EXPECT_EQ(rep.tried[i].searched, i + 1 == rep.tried.size() && rep.tried[i].recipe.recompute_layers != kAllLayers);
    EXPECT_GT(rep.tried[i].recipe.recompute_layers, 0);
  }
  // Between selective's and none's: selective, and full is not searched
  // once selective met no memory limit.
  const OptimizeReport mid = optimize(request((sel + none) / 2, std::nullopt));
  EXPECT_EQ(mid.file.recipe.recompute, Recompute::kSelective);
  EXPECT_EQ(mid.tried.size(), 2u);
}

// Where full recomputation is what fits, auto also tries kinds of
// operators (the operators alike in every layer: "block*.mlp.intermediate"),
// the cheapest forward re-run per byte freed first, beside what selective
// re-runs, until the plan fits; the faster plan wins. On the 4-layer tiny
// GPT at a capacity only full recomputation's plans fit, that plan is
// faster than the fewest whole layers that fit, and it fits.
TEST(OptimizeRecompute, KindsOfOperators) {
  auto with = [](double capacity, std::optional<Recompute> r, bool kinds) {
    OptimizeRequest q = request(capacity, r);
    q.model = build_model("gpt-tiny", {{"layers", 4}});
    q.recompute_kinds = kinds;
    return q;
  };
  const double sel = optimize(with(1e12, Recompute::kSelective, false)).result.search.strategy.estimate.max_memory();
  const double full = optimize(with(1e12, Recompute::kFull, false)).result.search.strategy.estimate.max_memory();
  ASSERT_LT(full, sel);
  const double capacity = (full + sel) / 2;
  const OptimizeReport layers = optimize(with(capacity, std::nullopt, false)), kinds = optimize(with(capacity, std::nullopt, true));
  ASSERT_TRUE(layers.result.search.strategy.estimate.feasible && kinds.result.search.strategy.estimate.feasible);
  EXPECT_TRUE(recomputes_layers(layers.file.recipe.recompute));
  std::printf("capacity %.0f B: %s %.4f ms; %s (%zu operators) %.4f ms, %.0f B\n", capacity,
              describe_recompute(layers.file.recipe.recompute, layers.file.recipe.recompute_layers).c_str(),
              layers.result.search.strategy.estimate.time * 1e3, name(kinds.file.recipe.recompute), kinds.file.recipe.recompute_operators.size(),
              kinds.result.search.strategy.estimate.time * 1e3, kinds.result.search.strategy.estimate.max_memory());
  EXPECT_EQ(kinds.file.recipe.recompute, Recompute::kOperators);
  EXPECT_EQ(kinds.cost->recipe().recompute, Recompute::kOperators);
  EXPECT_FALSE(kinds.file.recipe.recompute_operators.empty());
  EXPECT_LT(kinds.result.search.strategy.estimate.time, layers.result.search.strategy.estimate.time);
  EXPECT_LE(kinds.result.search.strategy.estimate.max_memory(), capacity);
  // No kind beyond selective's is left to spare: without any one of them
  // the plan no longer fits (one device, so the views are the mapping's).
  std::map<std::string, std::vector<std::string>> by_kind;
  for (const std::string& n : kinds.file.recipe.recompute_operators) by_kind[search::layer_pattern(n).empty() ? n : search::layer_pattern(n)].push_back(n);
  const std::vector<std::string> selective{"block*.attn.scores", "block*.attn.scale", "block*.attn.softmax", "block*.attn.attn_dropout"};
  int64_t beyond = 0;
  for (const auto& [kind, names] : by_kind) {
    if (std::find(selective.begin(), selective.end(), kind) != selective.end()) continue;
    ++beyond;
    OptimizeRequest without = with(capacity, Recompute::kOperators, false);
    for (const std::string& n : kinds.file.recipe.recompute_operators)
      if (std::find(names.begin(), names.end(), n) == names.end()) without.recompute_operators.push_back(n);
    EXPECT_FALSE(optimize(without).result.search.strategy.estimate.feasible) << kind << " was not needed";
  }
  EXPECT_GT(beyond, 0);
  // Listed among the recipes, re-priced.
  bool listed = false;
  for (const RecipeTried& t : kinds.tried) listed = listed || (t.recipe.recompute == Recompute::kOperators && !t.searched && t.feasible);
  EXPECT_TRUE(listed);
  // Where no recomputation is needed, none is tried.
  EXPECT_EQ(optimize(with(1e12, std::nullopt, true)).file.recipe.recompute, Recompute::kNone);
}

// Where full recomputation is what fits, auto recomputes the fewest layers
// that fit (Megatron-LM's block method), faster than recomputing all of
// them; stated full recomputes every layer, or the layers stated.
TEST(OptimizeRecompute, FullOfTheFewestLayersThatFit) {
  auto with_layers = [](double capacity, std::optional<int32_t> layers) {
    OptimizeRequest q = request(capacity, Recompute::kFull);
    q.model = build_model("gpt-tiny", {{"layers", 4}});
    q.recompute_layers = layers;
    return q;
  };
  auto need_of = [&](std::optional<int32_t> layers) { return optimize(with_layers(1e12, layers)).result.search.strategy.estimate.max_memory(); };
  OptimizeRequest sel_q = with_layers(1e12, std::nullopt);
  sel_q.recompute = Recompute::kSelective;
  const double sel = optimize(sel_q).result.search.strategy.estimate.max_memory();
  std::vector<double> need{0};  // need[k]: the first k segments recomputed
  for (int32_t k = 1; k <= 5; ++k) need.push_back(need_of(k));
  EXPECT_DOUBLE_EQ(need_of(std::nullopt), need[5]);
  for (int32_t k = 2; k <= 4; ++k) EXPECT_LT(need[static_cast<size_t>(k)], need[static_cast<size_t>(k) - 1]) << k;
  EXPECT_DOUBLE_EQ(need[5], need[4]);  // the position embedding's segment frees nothing
  // The fewest layers keeping less than selective does.
  int32_t fewest = 1;
  while (fewest <= 5 && need[static_cast<size_t>(fewest)] >= sel) ++fewest;
  ASSERT_LT(fewest, 4) << "every layer must be recomputed to keep less than selective: nothing to choose";
  const double capacity = (need[static_cast<size_t>(fewest)] + std::min(sel, need[static_cast<size_t>(fewest) - 1])) / 2;

  OptimizeRequest q = with_layers(capacity, std::nullopt);
  q.recompute = std::nullopt;
  const OptimizeReport rep = optimize(q);
  ASSERT_TRUE(rep.result.search.strategy.estimate.feasible) << rep.result.search.strategy.estimate.infeasible;
  EXPECT_EQ(rep.file.recipe.recompute, Recompute::kFull);
  EXPECT_EQ(rep.file.recipe.recompute_layers, fewest);
  EXPECT_EQ(rep.cost->recipe().recompute_layers, fewest);
  const OptimizeReport all = optimize(with_layers(capacity, std::nullopt));
  ASSERT_TRUE(all.result.search.strategy.estimate.feasible);
  EXPECT_EQ(all.file.recipe.recompute_layers, kAllLayers);  // stated full: every layer
  EXPECT_LT(rep.result.search.strategy.estimate.time, all.result.search.strategy.estimate.time);
  // The count stated is the count priced; one that does not fit is refused.
  EXPECT_EQ(optimize(with_layers(capacity, fewest + 1)).file.recipe.recompute_layers, fewest + 1);
  if (fewest > 1) {
    EXPECT_FALSE(optimize(with_layers(capacity, fewest - 1)).result.search.strategy.estimate.feasible);
  }
  // A count is for full recomputation only, and at least one.
  OptimizeRequest bad = with_layers(capacity, 2);
  bad.recompute = Recompute::kSelective;
  EXPECT_THROW(validate(bad), FieldError);
  bad.recompute = std::nullopt;
  EXPECT_THROW(validate(bad), FieldError);
  EXPECT_THROW(validate(with_layers(capacity, 0)), FieldError);
}

// full+selective: the layers not recomputed whole recompute selectively,
// so fewer full layers fit where full alone needs more. Where it fits with
// fewer full layers than full does, auto takes it when it is faster, and
// a stated count of it is priced as stated.
TEST(OptimizeRecompute, FullAndSelectiveFitWithFewerFullLayers) {
  auto with = [](double capacity, std::optional<Recompute> r, std::optional<int32_t> layers) {
    OptimizeRequest q = request(capacity, r);
    q.model = build_model("gpt-tiny", {{"layers", 4}});
    q.recompute_layers = layers;
    return q;
  };
  auto need_of = [&](Recompute r, std::optional<int32_t> layers) {
    return optimize(with(1e12, r, layers)).result.search.strategy.estimate.max_memory();
  };
  auto time_of = [&](Recompute r, std::optional<int32_t> layers) {
    return optimize(with(1e12, r, layers)).result.search.strategy.estimate.time;
  };
  const double sel = need_of(Recompute::kSelective, std::nullopt);
  std::vector<double> full{0}, mixed{0};
  for (int32_t k = 1; k <= 4; ++k) full.push_back(need_of(Recompute::kFull, k)), mixed.push_back(need_of(Recompute::kFullSelective, k));
  for (int32_t k = 1; k <= 3; ++k) {
    // Each count keeps less with the other layers selective, and re-runs more.
    EXPECT_LT(mixed[static_cast<size_t>(k)], full[static_cast<size_t>(k)]) << k;
    EXPECT_GT(time_of(Recompute::kFullSelective, k), time_of(Recompute::kFull, k)) << k;
  }
  EXPECT_DOUBLE_EQ(mixed[4], full[4]);  // every layer whole: nothing left to recompute selectively
  // A capacity where k - 1 full layers fit only with the others selective,
  // and full needs k (selective alone does not fit).
  int32_t k = 2;
  auto lo = [&](int32_t c) { return std::max(mixed[static_cast<size_t>(c) - 1], full[static_cast<size_t>(c)]); };
  auto hi = [&](int32_t c) { return std::min(full[static_cast<size_t>(c) - 1], sel); };
  while (k <= 4 && !(lo(k) < hi(k))) ++k;
  ASSERT_LE(k, 4) << "no count where fewer full layers fit with the others selective";
  const double capacity = (lo(k) + hi(k)) / 2;
  const OptimizeReport rep = optimize(with(capacity, std::nullopt, std::nullopt));
  ASSERT_TRUE(rep.result.search.strategy.estimate.feasible) << rep.result.search.strategy.estimate.infeasible;
  const double full_time = time_of(Recompute::kFull, k), mixed_time = time_of(Recompute::kFullSelective, k - 1);
  std::printf("capacity %.0f B: full %d layers %.4f ms, full+selective %d layers %.4f ms; chosen %s\n", capacity, k, full_time * 1e3, k - 1,
              mixed_time * 1e3, describe_recompute(rep.file.recipe.recompute, rep.file.recipe.recompute_layers).c_str());
  // One layer fewer re-run whole costs less than the others' selective re-runs.
  ASSERT_LT(mixed_time, full_time);
  EXPECT_DOUBLE_EQ(rep.result.search.strategy.estimate.time, mixed_time);
  EXPECT_EQ(rep.file.recipe.recompute, Recompute::kFullSelective);
  EXPECT_EQ(rep.file.recipe.recompute_layers, k - 1);
  EXPECT_EQ(rep.cost->recipe().recompute, Recompute::kFullSelective);
  bool tried = false;
  for (const RecipeTried& t : rep.tried) tried = tried || (t.recipe.recompute == Recompute::kFullSelective && !t.searched);
  EXPECT_TRUE(tried);
  // Stated, it is priced as stated.
  const OptimizeReport stated = optimize(with(1e12, Recompute::kFullSelective, 1));
  EXPECT_EQ(stated.file.recipe.recompute, Recompute::kFullSelective);
  EXPECT_EQ(stated.file.recipe.recompute_layers, 1);
  EXPECT_EQ(recompute_named("full+selective"), Recompute::kFullSelective);
  EXPECT_EQ(describe_recompute(Recompute::kFullSelective, 2), "full, first 2 layers, selective in the others");
}

// Under pipeline stages the count is per chunk, and auto finds the fewest
// that fit the same way: each count re-prices the plan found (lowered as
// `pcgx plan show` writes it), no stage searched again.
TEST(OptimizeRecompute, FewestLayersOfEachChunkUnderAPipeline) {
  auto piped = [](double capacity, std::optional<Recompute> r, std::optional<int32_t> layers) {
    OptimizeRequest q = request(capacity, r);
    q.model = build_model("gpt-tiny", {{"layers", 4}, {"batch", 8}});
    q.machine = search::toy_machine().with_devices(2);
    q.machine.device.memory_capacity = capacity;
    q.pipeline = search::PipelineOptions{2, 4};
    q.recompute_layers = layers;
    return q;
  };
  auto need_of = [&](std::optional<Recompute> r, std::optional<int32_t> layers) {
    const OptimizeReport rep = optimize(piped(1e12, r, layers));
    EXPECT_TRUE(rep.result.search.strategy.estimate.feasible);
    return rep.result.search.strategy.estimate.max_memory();
  };
  const double sel = need_of(Recompute::kSelective, std::nullopt), all = need_of(Recompute::kFull, std::nullopt);
  const double one = need_of(Recompute::kFull, 1), two = need_of(Recompute::kFull, 2);
  ASSERT_LT(all, sel);
  ASSERT_LT(two, one) << "each chunk's second layer recomputed keeps less";
  ASSERT_LT(one, sel) << "one layer of each chunk must keep less than selective: nothing to choose";
  // Between one layer's need and selective's: one layer of each chunk is the fewest that fits.
  const double capacity = (one + sel) / 2;
  OptimizeRequest q = piped(capacity, std::nullopt, std::nullopt);
  const OptimizeReport rep = optimize(q);
  ASSERT_TRUE(rep.result.search.strategy.estimate.feasible) << rep.result.search.strategy.estimate.infeasible;
  EXPECT_EQ(rep.file.recipe.recompute, Recompute::kFull);
  EXPECT_EQ(rep.file.recipe.recompute_layers, 1);
  EXPECT_EQ(rep.cost->recipe().recompute_layers, 1);
  const OptimizeReport every = optimize(piped(capacity, Recompute::kFull, std::nullopt));
  ASSERT_TRUE(every.result.search.strategy.estimate.feasible);
  EXPECT_LT(rep.result.search.strategy.estimate.time, every.result.search.strategy.estimate.time);
  // The re-priced counts are in the list of recipes tried, none searched.
  bool repriced = false;
  for (const RecipeTried& t : rep.tried) repriced = repriced || (!t.searched && t.recipe.recompute_layers == 1 && t.feasible);
  EXPECT_TRUE(repriced);
}

TEST(OptimizeRecompute, NoPlanNamesTheSmallestNeed) {
  const double full = need(Recompute::kFull);
  const OptimizeReport rep = optimize(request(full / 2, std::nullopt));
  const search::Estimate& e = rep.result.search.strategy.estimate;
  ASSERT_FALSE(e.feasible);
  EXPECT_NE(e.infeasible.find("the smallest plan found needs"), std::string::npos) << e.infeasible;
  EXPECT_NE(e.infeasible.find("recompute full"), std::string::npos) << e.infeasible;
  EXPECT_NE(e.infeasible.find("mixed precision"), std::string::npos) << e.infeasible;
  EXPECT_NE(e.infeasible.find("gradient accumulation over micro-batches"), std::string::npos) << e.infeasible;
  // Accumulation searched, and no count fitting: more micro-batches named instead.
  OptimizeRequest acc = request(full / 2, std::nullopt);
  acc.accumulate = true;
  const OptimizeReport more = optimize(acc);
  ASSERT_FALSE(more.result.search.strategy.estimate.feasible);
  EXPECT_TRUE(more.accumulation_failed);
  EXPECT_NE(more.result.search.strategy.estimate.infeasible.find("more micro-batches of gradient accumulation (PipelineOptions.micro_batches 16)"),
            std::string::npos)
      << more.result.search.strategy.estimate.infeasible;
  // A policy asked for is the only one searched.
  const OptimizeReport one = optimize(request(full / 2, Recompute::kSelective));
  EXPECT_EQ(one.tried.size(), 1u);
  EXPECT_NE(one.result.search.strategy.estimate.infeasible.find("recompute selective"), std::string::npos);
}

// Unity splits the tiny GPT into pieces. Where no layout of some piece fits
// a device, its search comes back infeasible (as a search of one piece
// does) instead of ending optimize: every recipe is still tried, and the
// reason names the smallest need found. On one device it names no ZeRO
// stage and no pipeline stages (nothing to shard over or to split onto).
TEST(OptimizeRecompute, UnityGoesOnWhereAPieceFitsNoLayout) {
  OptimizeRequest q = request(4096, std::nullopt);
  q.search.algorithm = search::Algorithm::kUnity;
  const OptimizeReport rep = optimize(q);
  EXPECT_GT(rep.result.search.pieces, 1);
  const search::Estimate& e = rep.result.search.strategy.estimate;
  ASSERT_FALSE(e.feasible);
  EXPECT_GE(rep.tried.size(), 3u);  // none, selective, full
  EXPECT_NE(e.infeasible.find("the smallest plan found needs"), std::string::npos) << e.infeasible;
  EXPECT_EQ(e.infeasible.find("ZeRO stage"), std::string::npos) << e.infeasible;
  EXPECT_EQ(e.infeasible.find("pipeline stages"), std::string::npos) << e.infeasible;
  EXPECT_NE(e.infeasible.find("more devices"), std::string::npos) << e.infeasible;
}

// A plan placing its operators (stated devices) is priced by simulation,
// and refused by its own memory: the reason names its need, as the
// mapping's refusals name theirs. Co-sharded onto one of two devices it
// needs about twice what the mapping's plan (one half each) does, so only
// the simulation sees it over.
TEST(OptimizeRecompute, APlacedPlanOverMemoryNamesItsNeed) {
  OptimizeRequest roomy = request(1e12, Recompute::kNone);
  roomy.model = build_model("mlp-tiny", {});
  roomy.machine = search::toy_machine().with_devices(2);
  roomy.zero = ZeroStage::k0;
  roomy.search.algorithm = search::Algorithm::kPlan;
  roomy.search.plan = std::make_shared<const search::UserPlan>(search::plan_from_json(
      R"({"format": "pcgx.plan", "format_version": 1, "rules": [{"select": {}, "partition": {"samples": 2}, "devices": [1, 1]}]})", "p.json"));
  const double placed = optimize(roomy).result.search.strategy.estimate.max_memory();
  ASSERT_GT(placed, 0);
  OptimizeRequest tight = roomy;
  tight.machine.device.memory_capacity = placed * 0.75;
  const OptimizeReport rep = optimize(tight);
  const search::Estimate& e = rep.result.search.strategy.estimate;
  ASSERT_FALSE(e.feasible);
  EXPECT_NE(e.infeasible.find("the smallest plan found needs"), std::string::npos) << e.infeasible;
  ASSERT_EQ(rep.tried.size(), 1u);
  EXPECT_DOUBLE_EQ(rep.tried[0].smallest_need, placed);
}

// --precision auto: the machine's mixed precision (bf16 where it is as fast
// as fp16, which needs loss scaling; fp16 where only it has a figure) against
// tf32, each recipe search listed; a machine without a precision table has
// tf32 alone.
TEST(OptimizePrecision, AutoComparesTheMachinesMixedPrecisionWithTf32) {
  auto chosen = [](const std::string& machine, int64_t devices) {
    OptimizeRequest q;
    q.model = build_model("gpt-tiny", {{"batch", 16}});
    q.machine = search::find_machine(machine).with_devices(devices);
    q.search.algorithm = search::Algorithm::kDataParallel;
    q.precision = std::nullopt, q.recompute = Recompute::kNone, q.zero = ZeroStage::k0;
    return optimize(q);
  };
  const OptimizeReport a100 = chosen("dgx-a100", 8), v100 = chosen("summit", 6), cpu = chosen("cpu-host", 2);
  ASSERT_EQ(a100.tried.size(), 2u);
  EXPECT_EQ(a100.tried[0].recipe.precision, Precision::kBf16);
  EXPECT_EQ(a100.tried[1].recipe.precision, Precision::kTf32);
  EXPECT_LT(a100.tried[0].time, a100.tried[1].time);  // half the bytes, twice the peak
  EXPECT_EQ(a100.file.recipe.precision, Precision::kBf16);
  EXPECT_EQ(a100.cost->recipe().precision, Precision::kBf16);
  ASSERT_EQ(v100.tried.size(), 2u);
  EXPECT_EQ(v100.tried[0].recipe.precision, Precision::kFp16);
  ASSERT_EQ(cpu.tried.size(), 1u);
  EXPECT_EQ(cpu.file.recipe.precision, Precision::kTf32);
}


// Gradient accumulation with the number of micro-batches searched (1, 2,
// 4, 8): where the whole batch's activations do not fit, the fewest
// micro-batches that fit; where they do, one. With 64 samples every
// micro-batch count splits its samples over all 8 devices, so every count
// costs the same FLOPs and more only adds kernel launches.
TEST(OptimizeAccumulation, AutoAccumulatesOnlyWhereMemoryRequires) {
  OptimizeRequest q = sharded(1e12, ZeroStage::k0);
  q.model = build_model("gpt-tiny", {{"batch", 64}});
  q.search.algorithm = search::Algorithm::kDataParallel;
  q.pipeline = search::PipelineOptions{1, 0};
  auto need = [&](int64_t m) {
    OptimizeRequest one = q;
    one.pipeline->micro_batches = m;
    return optimize(one).result.stage.at(0).memory;
  };
  const double n1 = need(1), n2 = need(2);
  ASSERT_LT(n2, n1);
  const OptimizeReport roomy = optimize(q);
  ASSERT_TRUE(roomy.result.search.strategy.estimate.feasible);
  EXPECT_EQ(roomy.result.micro_batches, 1);
  q.machine.device.memory_capacity = (n1 + n2) / 2;
  const OptimizeReport tight = optimize(q);
  ASSERT_TRUE(tight.result.search.strategy.estimate.feasible) << tight.result.search.strategy.estimate.infeasible;
  EXPECT_EQ(tight.result.micro_batches, 2);
  EXPECT_EQ(tight.file.micro_batches, 2);
  EXPECT_EQ(tight.file.pipeline_stages, 1);
  EXPECT_LE(tight.result.stage.at(0).memory, q.machine.device.memory_capacity);
}

// Left open (no --micro-batches), accumulation is searched after the
// recipes when memory left the first (no recomputation) no plan: the fewest
// micro-batches that fit, listed last, chosen where fastest; asked for one
// batch, never.
TEST(OptimizeAccumulation, SearchedByDefaultWhereMemoryConstrainsTheFirstRecipe) {
  OptimizeRequest q = request(1e12, std::nullopt);
  q.model = build_model("gpt-tiny", {{"batch", 8}});
  q.accumulate = true;
  OptimizeRequest probe = q;
  probe.recompute = Recompute::kNone;
  const double n1 = optimize(probe).result.search.strategy.estimate.max_memory();
  probe.pipeline = search::PipelineOptions{1, 2};
  const double n2 = optimize(probe).result.stage.at(0).memory;
  ASSERT_LT(n2, n1);
  q.machine.device.memory_capacity = (n1 + n2) / 2;
  const OptimizeReport rep = optimize(q);
  ASSERT_TRUE(rep.result.search.strategy.estimate.feasible) << rep.result.search.strategy.estimate.infeasible;
  ASSERT_GE(rep.tried.size(), 2u);
  const RecipeTried& last = rep.tried.back();
  EXPECT_EQ(last.micro_batches, 2);
  EXPECT_TRUE(last.feasible);
  EXPECT_EQ(last.recipe.recompute, Recompute::kNone);
  double fastest = 1e300;
  for (const RecipeTried& t : rep.tried)
    if (t.feasible) fastest = std::min(fastest, t.time);
  EXPECT_DOUBLE_EQ(rep.result.search.strategy.estimate.time, fastest);
  EXPECT_EQ(rep.pipelined, last.time == fastest);
  if (rep.pipelined) {
    EXPECT_EQ(rep.file.micro_batches, 2);
  }
  q.accumulate = false;
  for (const RecipeTried& t : optimize(q).tried) EXPECT_EQ(t.micro_batches, 1);
}

}  // namespace
}  // namespace pcgx::runner
