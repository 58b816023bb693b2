// Structural hashes (see graph_hash.h).
#include "pcgx/search/graph_hash.h"

#include <bit>
#include <type_traits>

#include "pcgx/pcg/stable_hash.h"

namespace pcgx::search {
namespace {

uint64_t shape_hash(const ParallelTensorShape& s) {
  uint64_t h = hash_mix(static_cast<uint64_t>(s.dtype), static_cast<uint64_t>(s.replica));
  for (const auto& d : s.dims)
    h = hash_mix(hash_mix(hash_mix(h, static_cast<uint64_t>(d.size)), static_cast<uint64_t>(d.degree)), static_cast<uint64_t>(d.pipeline));
  return h;
}

// An attribute's value, hashed directly (formatting it as text first was
// 7% of a search).
uint64_t value_hash(const AttrValue& v) {
  return std::visit(
      [](const auto& x) -> uint64_t {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) return hash_mix(1, static_cast<uint64_t>(x));
        else if constexpr (std::is_same_v<T, double>) return hash_mix(2, std::bit_cast<uint64_t>(x));
        else if constexpr (std::is_same_v<T, bool>) return hash_mix(3, x ? 1 : 0);
        else if constexpr (std::is_same_v<T, std::string>) return hash_mix(4, hash_string(x));
        else {
          uint64_t h = hash_mix(5, x.size());
          for (int64_t e : x) h = hash_mix(h, static_cast<uint64_t>(e));
          return h;
        }
      },
      v);
}

}  // namespace

uint64_t local_hash(const Node& n, const Graph& g) {
  uint64_t h = hash_string(n.op->name);
  for (const auto& [k, v] : n.attrs.values()) h = hash_mix(hash_mix(h, hash_string(k)), value_hash(v));
  for (const TensorRef& t : n.inputs) h = hash_mix(h, shape_hash(g.shape(t)));
  for (const auto& s : n.outputs) h = hash_mix(h, shape_hash(s));
  return h;
}

std::vector<uint64_t> deep_hashes(const Graph& g) {
  std::vector<uint64_t> h(g.size());
  for (const Node& n : g.nodes()) {
    uint64_t x = local_hash(n, g);
    // Sources are told apart by name: two weights of equal shape are different tensors.
    if (n.op->op_class == OpClass::kSource) x = hash_mix(x, hash_string(n.name));
    for (const TensorRef& t : n.inputs) x = hash_mix(hash_mix(x, h[static_cast<size_t>(t.node)]), static_cast<uint64_t>(t.output));
    h[static_cast<size_t>(n.id)] = x;
  }
  return h;
}

uint64_t graph_hash(const Graph& g) {
  const auto h = deep_hashes(g);
  uint64_t sum = 0, x = 0;
  for (uint64_t v : h) sum += hash_mix(v, 0x51ED), x ^= hash_mix(v, 0xA11CE);
  uint64_t out = hash_mix(sum, x);
  for (const TensorRef& t : g.outputs()) out = hash_mix(hash_mix(out, h[static_cast<size_t>(t.node)]), static_cast<uint64_t>(t.output));
  return out;
}

}  // namespace pcgx::search
