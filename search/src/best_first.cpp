// The best-first search, its seeds and graph splitting's chain DP (see
// best_first.h and unity_search.h).
#include "best_first.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <queue>
#include <unordered_set>

#include <tbb/parallel_for.h>
#include <tbb/parallel_invoke.h>

#include "graph_splitting.h"
#include "pcgx/pcg/stable_hash.h"
#include "pcgx/pcg/error.h"
#include "pcgx/search/applied_rule.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/collectives.h"
#include "pcgx/search/graph_hash.h"

namespace pcgx::search {
namespace {

// One best-first search from one seed. Candidates within alpha x the best
// found from this seed are explored cheapest first; those beyond it are
// deferred, and explored (cheapest first) only when none within it is left
// and budget remains: the way from a rewrite to its payoff often passes
// through a slower graph (x·(A + B) is parallelized in two steps, and the
// first one costs more than the alternatives). Returns the best found and
// the budget used.
std::pair<Candidate, int64_t> best_first_from(Candidate seed, const Explorer& ex, Context& cx, int64_t budget,
                                              std::unordered_set<uint64_t>& seen) {
  std::vector<Candidate> store;
  auto cmp = [&](size_t a, size_t b) { return store[a].cost > store[b].cost; };
  using Queue = std::priority_queue<size_t, std::vector<size_t>, decltype(cmp)>;
  Queue queue(cmp), deferred(cmp);
  Candidate best = seed;
  store.push_back(std::move(seed));
  queue.push(0);
  int64_t explored = 0;
  while (explored < budget) {
    size_t i;
    if (!queue.empty()) {
      i = queue.top();
      queue.pop();
      if (store[i].cost > cx.options.alpha * best.cost) {
        deferred.push(i);
        continue;
      }
    } else if (!deferred.empty()) {
      i = deferred.top();
      deferred.pop();
    } else {
      break;
    }
    ++explored, ++cx.result.explored;
    const double before = best.cost;
    for (Candidate& ch : ex.expand(store[i], seen)) {
      if (ch.cost < best.cost) best = ch;
      store.push_back(std::move(ch));
      (store.back().cost < cx.options.alpha * best.cost ? queue : deferred).push(store.size() - 1);
    }
    // The step that set a new best is tried again elsewhere in the graph
    // (Explorer::repeat); the result is one more candidate.
    if (best.cost < before && best.step.rule) {
      Candidate r = ex.repeat(best, seen);
      if (r.cost < best.cost) {
        best = r;
        store.push_back(std::move(r));
        queue.push(store.size() - 1);
      }
    }

    cx.best_so_far = std::min(cx.best_so_far, best.cost);
    cx.report(ex.evaluated);
  }
  return {best, explored};
}

}  // namespace

Candidate best_first(std::vector<Seed> seeds, const Explorer& ex, Context& cx, int64_t budget, Candidate* best_start) {
  std::unordered_set<uint64_t> seen;
  std::vector<Candidate> starts;
  for (Seed& s : seeds) {
    Candidate c = ex.make(std::move(s.graph), std::move(s.applied));
    if (best_start && (best_start->graph.size() == 0 || c.cost < best_start->cost)) *best_start = c;
    if (seen.insert(c.hash).second) starts.push_back(std::move(c));
  }
  cx.best_so_far = kInf;
  Candidate best;
  best.cost = kInf;
  int64_t left = budget;
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t share = std::max<int64_t>(1, left / static_cast<int64_t>(starts.size() - k));
    auto [c, used] = best_first_from(std::move(starts[k]), ex, cx, share, seen);
    left -= used;
    if (best.graph.size() == 0 || c.cost < best.cost) best = std::move(c);
  }
  return best;
}

std::vector<Seed> seeds_for(const Graph& g, const Explorer& ex, Context& cx, bool with_baselines, bool algebraic) {
  std::vector<Seed> seeds{{g, {}}};
  if (!with_baselines) return seeds;
  auto add_baselines = [&](const Graph& from, const std::vector<std::string>& applied) {
    // The baselines are built and timed on their own (in parallel) and
    // added in one order after: the same seeds whatever the threads.
    std::optional<Graph> dp, expert, sequence_parallel, one_device;
    // Data parallelism over fewer devices than the machine's: the mapping
    // DP then runs parallel branches side by side, one group of devices
    // each (branch parallelism across groups, data parallelism inside).
    // The fastest such degree is the seed.
    std::vector<std::optional<Graph>> grouped(cx.degrees.size());
    std::vector<double> grouped_time(cx.degrees.size(), kInf);
    tbb::parallel_invoke(
        [&] {
          try {
            dp = ex.simplify(best_data_parallel(from, cx.mapper));
          } catch (const Error&) {
          }
        },
        [&] {
          try {
            auto e = tuned_expert_choice(from, cx.mapper, false, cx.options.transformer_chunk);
            if (!e) return;
            expert = ex.simplify(e->second);
            // And at its degree with Korthikanti et al.'s sequence
            // parallelism: the rules split a norm's sequence one reader's
            // edge at a time, which a post-norm (BERT's, read by the next
            // attention and the next residual sum) cannot reach one
            // cheaper step at a time.
            // Without that start, at its degree with the operators between
            // the halves on one device (BetweenHalves::kOneDevice), from
            // which the rules split a norm's sequence one cheaper step at a
            // time; from Megatron-LM's copies they would have to move each
            // copy's Replicate down past the dropout and the residual sum
            // first, steps that cost more.
            const CostModel& cost = cx.mapper.cost();
            if (e->first > 1 && cx.options.seed_sequence_parallel)
              if (auto s = search::expert(from, cost.machine(), cost.devices(), e->first, true, cx.options.transformer_chunk)) sequence_parallel = ex.simplify(*s);
            if (e->first > 1 && !cx.options.seed_sequence_parallel)
              if (auto s = search::expert(from, cost.machine(), cost.devices(), e->first, false, cx.options.transformer_chunk, BetweenHalves::kOneDevice))
                one_device = ex.simplify(*s);
          } catch (const Error&) {
          }
        },
        [&] {
          tbb::parallel_for(size_t{0}, cx.degrees.size(), [&](size_t i) {
            const int64_t d = cx.degrees[i];
            if (d >= cx.mapper.cost().devices()) return;
            try {
              grouped[i] = data_parallel(from, d);
              grouped_time[i] = cx.mapper.time(*grouped[i]);
            } catch (const Error&) {
              grouped[i].reset();
            }
          });
        });
    if (dp) seeds.push_back({std::move(*dp), applied});
    if (sequence_parallel && (!expert || graph_hash(*sequence_parallel) != graph_hash(*expert)))
      seeds.push_back({std::move(*sequence_parallel), applied});
    if (one_device && (!expert || graph_hash(*one_device) != graph_hash(*expert))) seeds.push_back({std::move(*one_device), applied});
    if (expert) seeds.push_back({std::move(*expert), applied});
    std::optional<size_t> fastest;
    for (size_t i = 0; i < grouped.size(); ++i)
      if (grouped[i] && grouped_time[i] < (fastest ? grouped_time[*fastest] : kInf)) fastest = i;
    if (fastest) seeds.push_back({ex.simplify(std::move(*grouped[*fastest])), applied});
  };
  add_baselines(g, {});
  if (algebraic && cx.algebraic && cx.algebraic->size() > 0) {
    const Explorer ax(*cx.algebraic, cx.mapper, cx.degrees);
    Candidate a = best_first({{g, {}}}, ax, cx, cx.options.budget);
    ex.evaluated += ax.evaluated.load();
    if (!a.applied.empty()) {
      seeds.push_back({a.graph, a.applied});
      add_baselines(a.graph, a.applied);
    }
  }
  return seeds;
}

Candidate search_graph(const Graph& g, const RuleLibrary& rules, Context& cx, bool with_baselines, bool layouts) {
  const Explorer ex(rules, cx.mapper, cx.degrees);
  const auto pieces = split(g, rules, cx.options.split_min_ops);
  cx.result.pieces = static_cast<int64_t>(pieces.size());
  if (pieces.size() == 1) {
    cx.phase = "search";
    Candidate c = best_first(seeds_for(g, ex, cx, with_baselines, true), ex, cx, cx.options.budget);
    cx.result.evaluated = ex.evaluated;
    return c;
  }
  // Boundary layouts: unpartitioned and the sample dimension split by each degree.
  // To bound the work, the layouts are unpartitioned, split by the whole
  // machine, and by one eighth of it; and where the expert's plan for the
  // model splits tensors t ways (Megatron-LM's degree), the samples split
  // by the rest with the second dimension split t ways: how a layer hands
  // its output on when the rules split its sequence (sequence
  // parallelism). Boundaries of rank 2 (an MLP's) do not take it.
  std::vector<BoundaryLayout> degrees{{}};
  const int64_t devs = cx.mapper.cost().devices();
  if (layouts && devs > 1) {
    if (devs % 8 == 0 && devs / 8 > 1) degrees.push_back({devs / 8});
    degrees.push_back({devs});
    if (with_baselines)
      if (const int64_t t = tuned_expert_degree(g, cx.mapper); t > 1 && t < devs && devs % t == 0) degrees.push_back({devs / t, t});
  }
  const size_t L = degrees.size();
  // (piece hash, layout) -> the best found, and the best seed
  std::map<std::pair<uint64_t, size_t>, std::pair<Candidate, Candidate>> solved;
  std::vector<std::vector<const std::pair<Candidate, Candidate>*>> best(pieces.size(),
                                                                        std::vector<const std::pair<Candidate, Candidate>*>(L, nullptr));
  std::vector<std::vector<PieceGraph>> graphs(pieces.size());
  std::vector<std::vector<ZeroWeights>> piece_zero(pieces.size());  // per piece and layout: its weights' ZeRO groups, by its names
  // Each piece under each boundary layout, and which of them are distinct
  // searches (identical pieces are searched once).
  struct Search {
    std::pair<uint64_t, size_t> key;
    size_t piece, layout;
  };
  std::vector<Search> searches;
  std::vector<std::vector<std::pair<uint64_t, size_t>>> keys(pieces.size());
  for (size_t p = 0; p < pieces.size(); ++p) {
    for (size_t l = 0; l < L; ++l) {
      const BoundaryLayout d = degrees[l];
      const Piece& pc = pieces[p];
      const TensorRef boundary = pc.in.node >= 0 ? pc.in : pc.out;
      if (d.degree() > 1 && g.shape(boundary).dims.empty()) break;
      // A pipelined boundary is split within each micro-batch's samples.
      auto takes = [&](TensorRef t) {
        if (t.node < 0) return true;
        const auto& dims = g.shape(t).dims;
        return dims.at(0).size % (d.samples * dims.at(0).pipeline) == 0 &&
               (d.second == 1 || (dims.size() > 2 && dims[1].size % (d.second * dims[1].pipeline) == 0));
      };
      if (!takes(pc.in) || !takes(pc.out)) {
        graphs[p].push_back({});
        keys[p].push_back({0, L});  // none
        continue;
      }
      PieceGraph pg = piece_graph(g, pc, pc.in.node >= 0 ? d : BoundaryLayout{}, pc.out.node >= 0 ? d : BoundaryLayout{});
      // Recompute operators names what it recomputes: the piece keeps the
      // model's names, and which of its operators are named joins its key
      // (two layers alike but named differently are two searches).
      uint64_t named = 0;
      if (const TrainingRecipe& r = cx.mapper.cost().recipe(); r.recompute == Recompute::kOperators) {
        pg = with_model_names(pg, false);
        for (const Node& n : pg.graph.nodes())
          if (std::binary_search(r.recompute_operators.begin(), r.recompute_operators.end(), n.name)) named = hash_mix(named, 0x9E + static_cast<uint64_t>(n.id));
      }
      // ZeRO's weight groups name weights, which a piece renames (so that
      // layers alike share a search): its own recipe names them as the
      // piece does, and their stages join its key.
      ZeroWeights& zero = piece_zero[p].emplace_back();
      if (const TrainingRecipe& r = cx.mapper.cost().recipe(); !r.zero_weights.empty()) {
        for (const Node& n : pg.graph.nodes())
          if (const auto it = pg.names.find(n.name); n.op->is_weight && it != pg.names.end())
            if (const ZeroStage z = zero_of(r, it->second); z != r.zero) zero.push_back({n.name, z});
        sort_zero_weights(zero);
        for (const WeightZero& w : zero) named = hash_mix(hash_mix(named, hash_string(w.weight)), 0x2E0 + static_cast<uint64_t>(w.stage));
      }
      graphs[p].push_back(std::move(pg));
      const uint64_t h = graph_hash(graphs[p].back().graph);
      const auto key = std::make_pair(named ? hash_mix(h, named) : h, l);
      keys[p].push_back(key);
      if (std::none_of(searches.begin(), searches.end(), [&](const Search& x) { return x.key == key; })) searches.push_back({key, p, l});
    }
  }
  // The distinct searches run side by side, each with its own context (its
  // progress reported through one lock), and are kept in order after: the
  // same result whatever the threads.
  std::mutex progress_mutex;
  SearchOptions options = cx.options;
  if (cx.options.progress)
    options.progress = [&](const SearchProgress& pr) {
      const std::lock_guard<std::mutex> lock(progress_mutex);
      cx.options.progress(pr);
    };
  std::vector<SearchResult> results(searches.size());
  std::vector<std::pair<Candidate, Candidate>> found(searches.size());
  std::atomic<int64_t> evaluated_apart{0};  // by the explorers of pieces with their own recipe
  tbb::parallel_for(size_t{0}, searches.size(), [&](size_t i) {
    const Search& s = searches[i];
    // A piece whose weights' groups its own names state: its own cost
    // model, mapper and explorer.
    const bool own = !cx.mapper.cost().recipe().zero_weights.empty();
    std::optional<CostModel> cost;
    std::optional<MachineMapper> mapper;
    std::optional<Explorer> explorer;
    if (own) {
      TrainingRecipe r = cx.mapper.cost().recipe();
      r.zero_weights = piece_zero[s.piece][s.layout];
      cost.emplace(cx.mapper.cost().with_recipe(r));
      mapper.emplace(*cost);
      explorer.emplace(cx.rules, *mapper, cx.degrees);
    }
    const Explorer& e = own ? *explorer : ex;
    Context local{cx.rules, cx.algebraic, own ? *mapper : cx.mapper, options, cx.degrees, results[i], "", kInf};
    const BoundaryLayout d = degrees[s.layout];
    local.phase = "piece " + std::to_string(s.piece + 1) + "/" + std::to_string(pieces.size()) + " layout " + std::to_string(d.samples) +
                  (d.second > 1 ? "x" + std::to_string(d.second) : "");
    std::vector<Seed> seeds = seeds_for(graphs[s.piece][s.layout].graph, e, local, with_baselines, true);
    Candidate start;
    Candidate best_found = best_first(std::move(seeds), e, local, cx.options.budget, &start);
    found[i] = {std::move(best_found), std::move(start)};
    if (own) evaluated_apart += explorer->evaluated.load();
  });
  for (size_t i = 0; i < searches.size(); ++i) {
    cx.result.explored += results[i].explored;
    solved.emplace(searches[i].key, std::move(found[i]));
  }
  for (size_t p = 0; p < pieces.size(); ++p)
    for (size_t l = 0; l < keys[p].size(); ++l)
      if (keys[p][l].second < L) best[p][l] = &solved.at(keys[p][l]);
  ex.evaluated += evaluated_apart.load();
  cx.result.evaluated = ex.evaluated;
  // Chain DP over layouts: piece costs plus the layout change between pieces.
  std::vector<std::vector<double>> dp(pieces.size(), std::vector<double>(L, kInf));
  std::vector<std::vector<size_t>> from(pieces.size(), std::vector<size_t>(L, 0));
  auto piece_cost = [&](size_t p, size_t l) { return l < best[p].size() && best[p][l] ? best[p][l]->first.cost : kInf; };
  auto change = [&](size_t p, size_t a, size_t b) {
    if (a == b) return 0.0;
    const TensorRef bt = pieces[p].out;
    const ParallelTensorShape s = g.shape(bt);
    // The boundary re-laid from one split to the other over the same first
    // devices: an all-to-all, forward and backward (each member sends what
    // the others need of its share).
    const CostModel& cm = cx.mapper.cost();
    const int64_t k = std::max(degrees[a].degree(), degrees[b].degree());
    const double share = static_cast<double>(s.total_bytes()) / static_cast<double>(std::min(degrees[a].degree(), degrees[b].degree()));
    return 2 * collective_time(cm.machine(), Collective::kAllToAll, strided_group(cm.machine(), 0, 1, k), share);
  };
  for (size_t l = 0; l < L; ++l) dp[0][l] = piece_cost(0, l);
  for (size_t p = 1; p < pieces.size(); ++p)
    for (size_t l = 0; l < L; ++l)
      for (size_t q = 0; q < L; ++q) {
        const double v = dp[p - 1][q] + change(p - 1, q, l) + piece_cost(p, l);
        if (v < dp[p][l]) dp[p][l] = v, from[p][l] = q;
      }
  size_t l = static_cast<size_t>(std::min_element(dp.back().begin(), dp.back().end()) - dp.back().begin());
  // Whole-model baselines are in the space too (the split may not reach
  // them: a piece alone may fit no layout, the head of a transformer
  // without its layers being no family the expert knows).
  auto whole_baselines = [&](Candidate out) {
    if (with_baselines)
      for (Seed& s : seeds_for(g, ex, cx, true)) {
        Candidate c = ex.make(std::move(s.graph), std::move(s.applied));
        if (c.cost < out.cost) out = std::move(c);
      }
    cx.result.evaluated = ex.evaluated;
    return out;
  };
  // Where no layout fits, the model itself comes back infeasible, as a
  // search of one piece returns its best: the caller prices it (the
  // mapping records how much memory the plans it refused needed) and may
  // try another recipe.
  if (dp.back()[l] == kInf) return whole_baselines(Candidate{g, kInf, {}, 0});
  std::vector<size_t> chosen(pieces.size());
  for (size_t p = pieces.size(); p-- > 0;) chosen[p] = l, l = from[p][l];

  // Join the pieces' best graphs. A piece's time alone is a proxy: its
  // gradient synchronization, for one, has no later backward pass to hide
  // behind, so a rewrite that shrinks it may cost the joined model more
  // than it saves. Each group of identical pieces is therefore tried again
  // with its best seed instead (the rewrites undone), kept where the
  // joined model is faster.
  std::vector<char> undone(pieces.size(), 0);
  auto join = [&] {
    std::vector<JoinPart> parts;
    std::vector<std::string> applied;
    for (size_t p = 0; p < pieces.size(); ++p) {
      const auto& solved_p = *best[p][chosen[p]];
      const Candidate& c = undone[p] ? solved_p.second : solved_p.first;
      for (const auto& a : c.applied) applied.push_back(renamed_applied(a, [&](const std::string& x) { return real_name(graphs[p][chosen[p]].names, x); }));
      parts.push_back({&c.graph, &graphs[p][chosen[p]]});
    }
    return ex.make(join_pieces(g.name(), parts), std::move(applied));
  };
  Candidate joined = join();
  std::vector<char> tried(pieces.size(), 0);
  for (size_t p = 0; p < pieces.size(); ++p) {
    const auto* group = best[p][chosen[p]];
    if (tried[p] || group->first.hash == group->second.hash) continue;
    for (size_t q = p; q < pieces.size(); ++q)
      if (best[q][chosen[q]] == group) tried[q] = 1, undone[q] = 1;
    Candidate without = join();
    if (without.cost < joined.cost) {
      joined = std::move(without);
      continue;
    }
    for (size_t q = p; q < pieces.size(); ++q)
      if (best[q][chosen[q]] == group) undone[q] = 0;
  }
  return whole_baselines(std::move(joined));
}

}  // namespace pcgx::search
