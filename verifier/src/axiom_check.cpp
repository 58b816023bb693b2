#include <cmath>
#include <random>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/interpreter.h"
#include "terms.h"

namespace pcgx::verify {
namespace {

// A random tensor state of the kinds rules meet: rank 2 or 3, every size 4,
// each dimension split 2 ways or not, replicated twice or not.
ParallelTensorShape random_state(std::mt19937_64& rng) {
  const int rank = 2 + static_cast<int>(rng() % 2);
  ParallelTensorShape s = ParallelTensorShape::unpartitioned(std::vector<int64_t>(static_cast<size_t>(rank), 4));
  for (auto& d : s.dims)
    if (rng() % 3 == 0) d.degree = 2;
  if (rng() % 3 == 0) s.replica = 2;
  return s;
}

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

}  // namespace

std::vector<AxiomCheck> check_axioms(const AxiomSet& set, int attempts, uint64_t seed) {
  z3::context ctx;
  Terms T(ctx);
  const std::vector<Axiom> axioms = parse_axioms(ctx, set);
  std::vector<AxiomCheck> rows;
  std::mt19937_64 rng(seed);
  for (const Axiom& ax : axioms) {
    AxiomCheck row;
    row.name = ax.name;
    // Sample until `attempts` legal instances, or 50 times as many tries.
    for (int n = 0; row.legal < attempts && n < 50 * attempts; ++n) {
      ++row.tried;
      T.clear_inputs();
      Bindings b(ax.tensor_var.size());
      std::string assignment;
      // Tensors often share a state (operands of one operator must agree).
      const ParallelTensorShape shared = random_state(rng);
      for (size_t i = 0; i < b.size(); ++i) {
        if (ax.tensor_var[i]) {
          const std::string name = "v" + std::to_string(i);
          const ParallelTensorShape s = rng() % 2 ? shared : random_state(rng);
          T.set_input(name, s);
          b[i] = ctx.constant(name.c_str(), T.tensor());
          assignment += name + " = " + s.to_string() + "; ";
        } else {
          // Dimensions, degrees and activations, and permutation codes
          // (1 followed by the digits) of ranks 2 and 3.
          static const int64_t ints[] = {-1, 0, 1, 2, -1, 0, 1, 2, 110, 1021, 1102, 1120, 1201, 1210, 101, 1012, 1012, 101};
          const int64_t v = ints[rng() % (sizeof ints / sizeof ints[0])];
          b[i] = ctx.int_val(v);
          assignment += "i" + std::to_string(i) + " = " + std::to_string(v) + "; ";
        }
      }
      if (ax.pre) {
        const auto ok = T.eval_bool(*ax.pre, b);
        if (!ok || !*ok) continue;
      }
      const auto l = T.instantiate(ax.lhs, b), r = T.instantiate(ax.rhs, b);
      if (!l || !r) continue;
      const auto sl = T.shape(*l), sr = T.shape(*r);
      if (!sl || !sr || !(*sl == *sr)) continue;
      ++row.legal;
      std::vector<TensorRef> outs;
      const Graph g = T.to_graph({*l, *r}, outs);
      std::string m = compare<ModP>(g, outs, seed + static_cast<uint64_t>(n));
      if (m.empty()) m = compare<float>(g, outs, seed + static_cast<uint64_t>(n));
      if (!m.empty()) {
        if (row.mismatches++ == 0) row.counterexample = assignment + m;
      }
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace pcgx::verify
