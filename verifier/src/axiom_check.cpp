#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <random>
#include <memory>
#include <set>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/interpreter.h"
#include "axiom_instances.h"
#include "encoding.h"
#include "terms.h"

namespace pcgx::verify {
namespace {

template <class T>
std::string compare(const Graph& g, const std::vector<TensorRef>& outs, uint64_t seed) {
  const auto v = evaluate_sharded<T>(g, random_sharded_sources<T>(seed));
  const auto& a = v[static_cast<size_t>(outs[0].node)][static_cast<size_t>(outs[0].output)];
  const auto& b = v[static_cast<size_t>(outs[1].node)][static_cast<size_t>(outs[1].output)];
  for (size_t s = 0; s < a.shards.size(); ++s)
    for (size_t e = 0; e < a.shards[s].data.size(); ++e) {
      const T x = a.shards[s].data[e], y = b.shards[s].data[e];
      if constexpr (std::is_same_v<T, float>) {
        if (std::fabs(x - y) > 1e-3f * (1 + std::fabs(y)))
          return "shard " + std::to_string(s) + " element " + std::to_string(e) + ": " + std::to_string(x) + " vs " +
                 std::to_string(y) + " (float)";
      } else if (!(x == y)) {
        return "shard " + std::to_string(s) + " element " + std::to_string(e) + " differs (exact mod p)";
      }
    }
  return "";
}

// One thread's Z3 context, with the axioms parsed in it.
struct Worker {
  explicit Worker(const AxiomSet& set) : T(ctx), axioms(parse_axioms(ctx, set)) {}
  z3::context ctx;
  Terms T;
  std::vector<Axiom> axioms;
};

// The first Tensor-valued function of `e` without an encoding row.
std::string unencoded_symbol(const z3::expr& e) {
  if (!e.is_app() || is_var(e)) return "";
  if (e.num_args() > 0 && e.get_sort().name().str() == "Tensor" && !encoding_by_symbol(e.decl().name().str()))
    return e.decl().name().str();
  for (unsigned i = 0; i < e.num_args(); ++i)
    if (std::string s = unencoded_symbol(e.arg(i)); !s.empty()) return s;
  return "";
}

AxiomCheck check_one(Worker& w, size_t index, int attempts, uint64_t seed) {
  z3::context& ctx = w.ctx;
  Terms& T = w.T;
  const Axiom& ax = w.axioms[index];
  // Each axiom its own random stream: the same rows whatever the threads.
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + index);
  AxiomInstances instances(T, ax);
  AxiomCheck row;
  row.name = ax.name;
  row.unencoded = unencoded_symbol(ax.lhs);
  if (row.unencoded.empty()) row.unencoded = unencoded_symbol(ax.rhs);
  if (!row.unencoded.empty()) return row;  // nothing to instantiate it with
  // Distinct instances only: a repeat tests nothing new. An axiom with
  // fewer legal instances than `attempts` ends when 4 x `attempts` legal
  // draws in a row were repeats (or after 200 x `attempts` draws).
  std::set<std::string> seen;
  Bindings b;
  std::string assignment;
  z3::expr l(ctx), r(ctx);
  // An axiom none of whose instances was found yet gets 1,000 x `attempts`.
  for (int repeats = 0; row.legal < attempts && row.tried < (row.legal ? 200 : 1000) * attempts && repeats < 4 * attempts;) {
    ++row.tried;
    if (!instances.draw(rng, b, assignment, l, r)) continue;
    if (!seen.insert(assignment).second) {
      ++repeats;
      continue;
    }
    repeats = 0;
    ++row.legal;
    std::vector<TensorRef> outs;
    Graph g;
    try {
      g = T.to_graph({l, r}, outs);
    } catch (const Error& e) {
      throw Error(ax.name + ": " + assignment + e.what());
    }
    const uint64_t values = seed + static_cast<uint64_t>(row.tried);
    std::string m = compare<ModP>(g, outs, values);
    if (m.empty()) m = compare<float>(g, outs, values);
    if (!m.empty() && row.mismatches++ == 0) row.counterexample = assignment + m;
  }
  return row;
}

std::vector<AxiomCheck> checked(const AxiomSet& set, int attempts, uint64_t seed, const std::vector<size_t>& which) {
  std::vector<AxiomCheck> rows(which.size());
  tbb::enumerable_thread_specific<std::unique_ptr<Worker>> workers;
  tbb::parallel_for(size_t{0}, which.size(), [&](size_t i) {
    auto& w = workers.local();
    if (!w) w = std::make_unique<Worker>(set);
    rows[i] = check_one(*w, which[i], attempts, seed);
  }, tbb::simple_partitioner());
  return rows;
}

}  // namespace

std::vector<AxiomCheck> check_axioms(const AxiomSet& set, int attempts, uint64_t seed) {
  std::vector<size_t> all(Worker(set).axioms.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return checked(set, attempts, seed, all);
}

std::vector<AxiomCheck> check_axioms(const AxiomSet& set, int attempts, uint64_t seed, const std::vector<std::string>& only) {
  const Worker probe(set);
  std::vector<size_t> which;
  for (size_t i = 0; i < probe.axioms.size(); ++i)
    if (std::find(only.begin(), only.end(), probe.axioms[i].name) != only.end()) which.push_back(i);
  return checked(set, attempts, seed, which);
}

std::optional<std::string> axiom_check_failure(const AxiomSet& axioms) {
  for (const AxiomCheck& row : check_axioms(axioms, kDefaultAxiomInstances, kAxiomCheckSeed)) {
    // Named with its file: the set may come from several directories.
    const auto info = std::find_if(axioms.axioms.begin(), axioms.axioms.end(), [&](const AxiomInfo& a) { return a.name == row.name; });
    const std::string where = info == axioms.axioms.end() ? axioms.dir : info->file;
    if (row.mismatches) return where + ": axiom " + row.name + " is wrong: " + row.counterexample;
    if (!row.unencoded.empty())
      return where + ": axiom " + row.name + " uses '" + row.unencoded + "', which no registry operator declares (OpDef::smt)";
    if (row.legal == 0) return where + ": axiom " + row.name + " has no legal instance (untested)";
  }
  return std::nullopt;
}

}  // namespace pcgx::verify
