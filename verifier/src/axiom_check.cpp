#include <bit>
#include <cmath>
#include <map>
#include <random>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/interpreter.h"
#include "encoding.h"
#include "terms.h"

namespace pcgx::verify {
namespace {

// A random tensor state of the kinds rules meet: rank 1 to 4, every size 4,
// each dimension split 2 ways or not, replicated twice or not; one in five
// holds int64 indices in [0, 4) (for Embedding and the loss labels).
struct RandomState {
  ParallelTensorShape shape;
  int64_t index_range = 0;
};
RandomState random_state(std::mt19937_64& rng) {
  const int rank = 1 + static_cast<int>(rng() % 4);
  RandomState r{ParallelTensorShape::unpartitioned(std::vector<int64_t>(static_cast<size_t>(rank), 4)), 0};
  for (auto& d : r.shape.dims)
    if (rng() % 3 == 0) d.degree = 2;
  if (rng() % 3 == 0) r.shape.replica = 2;
  if (rng() % 5 == 0) {
    r.shape.dtype = DataType::kInt64;
    r.index_range = 4;
  }
  return r;
}

// What each integer variable of an axiom stands for: the attribute (or
// helper argument) it first appears as.
void integer_roles(const z3::expr& e, std::map<unsigned, std::string>& roles) {
  if (!e.is_app()) return;
  const std::string f = e.decl().name().str();
  const Encoding* enc = encoding_by_symbol(f);
  std::vector<std::string> slot(e.num_args());
  if (enc) {
    size_t k = static_cast<size_t>(enc->tensors);
    for (const char* a : enc->attrs) {
      if (std::string(a) == "scalar") {
        if (k < slot.size()) slot[k++] = "scalar_num";
        if (k < slot.size()) slot[k++] = "scalar_den";
      } else if (k < slot.size()) {
        slot[k++] = a;
      }
    }
  } else if (f == "perm_at" || f == "perm_pos" || f == "perm_compose" || f == "perm_is_identity") {
    slot[0] = "perm";
    if (slot.size() > 1) slot[1] = f == "perm_compose" ? "perm" : "dim";
  } else if (f == "shape_at" || f == "reshape_keeps") {
    slot[f == "shape_at" ? 0 : 1] = "shape";
  }
  for (unsigned i = 0; i < e.num_args(); ++i) {
    const z3::expr a = e.arg(i);
    if (is_var(a)) {
      const unsigned v = var_index(a);
      if (!slot[i].empty() && !roles.count(v)) roles[v] = slot[i];
    } else {
      integer_roles(a, roles);
    }
  }
}

// Values worth trying for an integer of a given role, on tensors of size 4.
const std::vector<int64_t>& domain_of(const std::string& role) {
  static const std::map<std::string, std::vector<int64_t>> domains = {
      {"dim", {-1, 0, 1, 2, 3}},
      {"axis", {-1, 0, 1, 2, 3}},
      {"degree", {1, 2, 2, 4}},
      {"activation", {0, 1, 2, 3, 4}},
      {"perm", {110, 1021, 1102, 1120, 1201, 1210, 101, 1012, 10123, 10132, 13210, 12301}},
      {"shape", {10016, 100020008, 100080002, 100040004, 1000200020004, 10064, 100160004, 100040016,
                 1000400040004, 1000200080004, 10256, 100160016, 1000400040016, 10004000400040004}},
      {"eps", {std::bit_cast<int64_t>(1e-5), std::bit_cast<int64_t>(0.5)}},
      {"rate", {std::bit_cast<int64_t>(0.1), std::bit_cast<int64_t>(0.5), std::bit_cast<int64_t>(0.0)}},
      {"seed", {0, 1, 7}},
      {"scalar_num", {-1, 1, 2, 3}},
      {"scalar_den", {1, 2, 4}},
      {"stride_h", {0, 1, 2}}, {"stride_w", {0, 1, 2}}, {"pad_h", {0, 1}}, {"pad_w", {0, 1}},
      {"kernel_h", {1, 2, 3}}, {"kernel_w", {1, 2, 3}}, {"groups", {1, 2}}, {"mode", {0, 1}},
  };
  static const std::vector<int64_t> other = {-1, 0, 1, 2};
  auto it = domains.find(role);
  return it == domains.end() ? other : it->second;
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
    std::map<unsigned, std::string> roles;
    integer_roles(ax.lhs, roles);
    integer_roles(ax.rhs, roles);
    if (ax.pre) integer_roles(*ax.pre, roles);
    AxiomCheck row;
    row.name = ax.name;
    // Sample until `attempts` legal instances, or 200 times as many tries.
    for (int n = 0; row.legal < attempts && n < 200 * attempts; ++n) {
      ++row.tried;
      T.clear_inputs();
      Bindings b(ax.tensor_var.size());
      std::string assignment;
      // Tensors often share a state (operands of one operator must agree).
      const RandomState shared = random_state(rng);
      for (size_t i = 0; i < b.size(); ++i) {
        if (ax.tensor_var[i]) {
          const std::string name = "v" + std::to_string(i);
          const RandomState s = rng() % 2 ? shared : random_state(rng);
          T.set_input(name, s.shape, s.index_range);
          b[i] = ctx.constant(name.c_str(), T.tensor());
          assignment += name + " = " + s.shape.to_string() + "; ";
        } else {
          auto role = roles.find(static_cast<unsigned>(i));
          const auto& values = domain_of(role == roles.end() ? "" : role->second);
          const int64_t v = values[rng() % values.size()];
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
