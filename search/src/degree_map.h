#pragma once
// How a rule's degrees map onto a graph's (internal; see substitution.h).
// A rule's degree 2^a stands for k^a; any other value stands for itself.
#include <cstdint>

namespace pcgx::search {

// The exponent a with v == 2^a, or -1 when v is not a power of two >= 2.
inline int log2_exact(int64_t v) {
  int a = 0;
  while (v > 1 && v % 2 == 0) v /= 2, ++a;
  return v == 1 && a > 0 ? a : -1;
}

inline int64_t power(int64_t k, int a) {
  int64_t r = 1;
  while (a-- > 0) r *= k;
  return r;
}

// Does the rule's value stand for the graph's? Binds k (0: unbound) on the
// first degree that needs it.
inline bool match_degree(int64_t rule_v, int64_t graph_v, bool generic, int64_t& k) {
  const int a = log2_exact(rule_v);
  if (!generic || a < 0) return rule_v == graph_v;
  if (k == 0) {
    int64_t c = 2;
    while (power(c, a) < graph_v) ++c;
    if (power(c, a) != graph_v) return false;
    k = c;
  }
  return power(k, a) == graph_v;
}

// The graph value a rule's degree stands for.
inline int64_t map_degree(int64_t rule_v, int64_t k) {
  const int a = log2_exact(rule_v);
  return a < 0 ? rule_v : power(k, a);
}

}  // namespace pcgx::search
