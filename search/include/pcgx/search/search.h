#pragma once
// The search's one entry point (docs/design.md "Search"): which algorithm,
// its options, its result. Every algorithm is a peer behind `optimize()`:
// unity's best-first search and the sequential and exhaustive searches that
// share its machinery (unity_search.h), FlexFlow's MCMC (mcmc_search.h),
// AutoDDL's coordinate descent (autoddl_search.h) and the data-parallel and
// expert baselines (baselines.h). Each includes this header for the options
// and none includes another's.
//
// Choices are enums; their text names ("unity", "data-parallel", ...) are
// what strategy files and reports record. Parsing text into them belongs to
// the front end; errors here name the field (`SearchOptions.budget`).
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pcgx/search/final_ranking.h"
#include "pcgx/search/layout_search.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/rule_library.h"

namespace pcgx::search {

struct UserPlan;  // user_plan.h

enum class Algorithm : uint8_t {
  kUnity,         // substitutions and parallelization jointly (Unity)
  kDataParallel,  // the data-parallel baseline
  kExpert,        // the expert baseline (Megatron for transformers, ...)
  kSequential,    // algebraic rules, then parallelization rules
  kExhaustive,    // every PCG of a bounded size (tiny models)
  kMcmc,          // FlexFlow's MCMC, costed by simulation
  kAutoddl,       // AutoDDL's coordinate descent over SBP signatures
  kMegatron,      // Megatron-LM's plan as stated: the expert's stages, layers split evenly over pipeline chunks
  kPlan,          // a plan a person wrote (user_plan.h, SearchOptions::plan), lowered as stated
};
inline constexpr std::array kAlgorithms{Algorithm::kUnity,      Algorithm::kDataParallel, Algorithm::kExpert,   Algorithm::kSequential,
                                        Algorithm::kExhaustive, Algorithm::kMcmc,         Algorithm::kAutoddl, Algorithm::kMegatron,
                                        Algorithm::kPlan};

// "unity", "data-parallel", "expert", "sequential", "exhaustive", "mcmc", "autoddl", "megatron", "plan".
std::string_view name(Algorithm a);

// Whether the algorithm applies a ruleset's substitutions (the others build
// their plans without rules). The one place that decides which searches
// load rules, so every front end loads the same rules for the same search.
bool uses_rules(Algorithm a);


struct SearchProgress {
  std::string phase;      // "piece 3/12", "search", ...
  int64_t explored = 0;   // candidates expanded so far
  int64_t evaluated = 0;  // candidates costed so far
  double best = 0;        // best predicted time so far (seconds)
  bool milestone = false; // a step of its own starts (the finalists' simulation): worth showing at once
};

struct SearchOptions {
  Algorithm algorithm = Algorithm::kUnity;
  double alpha = 1.05;
  int64_t budget = 12;              // candidates explored per search (per piece and layout), shared by the seeds
  int64_t split_min_ops = 10;       // k of graph splitting
  std::vector<int64_t> degrees;     // empty: powers of two below the device count, and the count
  int64_t exhaustive_limit = 5000;  // candidates the exhaustive search may visit
  int64_t proposals = 2000;         // mcmc: proposals in all (mcmc_search.h)
  int64_t evaluations = 3000;       // autoddl: PCGs costed in all, shared by its starts (autoddl_search.h)
  int64_t restarts = 4;             // autoddl: random starting points beside data parallelism and one task each
  uint64_t seed = 1;                // mcmc: random seed
  int64_t exhaustive_max_nodes = 0; // its space: PCGs of at most this many nodes (0: see unity_search.h)
  int64_t tensor_degree = 0;        // expert: its tensor-parallel degree, as a plan states it (0: the fastest that fits)
  bool sequence_parallel = false;   // expert: Megatron-LM's sequence parallelism inside each tensor-parallel group (baselines.h)
  // unity: among the baselines it starts from, the expert's plan at its
  // degree with sequence parallelism too; false: only the rules split a
  // sequence, from the expert's plan with the operators between the
  // halves on one device (BetweenHalves::kOneDevice) among the starts (a
  // post-norm's split, BERT's, is out of their reach one cheaper step at
  // a time: docs/search.md).
  bool seed_sequence_parallel = true;
  // unity: the graph is a pipeline chunk of a transformer (set by the
  // pipeline search, pipeline.h), so that a chunk holding only its
  // embeddings or only its head and loss starts from Megatron-LM's
  // vocabulary-parallel plan too (baselines.h's chunk_of_transformer), as
  // --search megatron and expert give it.
  bool transformer_chunk = false;
  std::shared_ptr<const UserPlan> plan;  // plan: what it lowers (user_plan.h)
  // plan: rewrite each conversion as its cheapest sequence of parallel
  // operators (layout_search.h). Off for a pipeline's chunks, whose
  // conversions are sliced into micro-batches after they are lowered.
  bool layout_search = true;
  // unity: how the result is chosen among the search's best and the
  // model's baselines (final_ranking.h): by simulation, or by the DP's
  // estimate alone (the search itself always costs candidates by the DP).
  enum class Rank : uint8_t { kSimulation, kEstimate };
  Rank rank = Rank::kSimulation;
  std::function<void(const SearchProgress&)> progress;
};

// Throws FieldError naming the first field out of range.
void validate(const SearchOptions& options);

// Whether the search's own figure is a simulation rather than the
// machine-mapping DP's estimate: mcmc's, and a plan's that places some
// operators itself (user_plan.h, PlanRule::devices).
bool predicts_by_simulation(const SearchOptions& options);

struct SearchResult {
  Strategy strategy;
  std::vector<std::string> applied;  // rule ids, in order (pieces concatenated)
  int64_t explored = 0;
  int64_t evaluated = 0;
  int64_t pieces = 1;
  double seconds = 0;
  Ranking ranking;  // unity with Rank::kSimulation: the finalists and the chosen one
  // A plan lowered as written (Algorithm::kPlan): the conversions the
  // layout search rewrote (layout_search.h), empty where none was cheaper.
  std::vector<LayoutChoice> relaid;
};

// The degrees tried for a free degree on `devices` devices.
std::vector<int64_t> candidate_degrees(int64_t devices);

// Runs options.algorithm on `model` (unpartitioned). Throws pcgx::Error for
// an exhaustive search over its limit or an expert strategy for a model of
// no family it covers, FieldError for options out of range.
SearchResult optimize(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options);

}  // namespace pcgx::search
