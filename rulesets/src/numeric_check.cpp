#include "pcgx/rulesets/numeric_check.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/interpreter.h"

namespace pcgx {
namespace {

template <class T>
std::string mismatch(const Rule& r, uint64_t seed) {
  const auto a = evaluate_sharded<T>(r.source, random_sharded_sources<T>(seed));
  const auto b = evaluate_sharded<T>(r.target, random_sharded_sources<T>(seed));
  for (const auto& [i, j] : r.output_map) {
    const TensorRef ta = r.source.outputs()[static_cast<size_t>(i)];
    const TensorRef tb = r.target.outputs()[static_cast<size_t>(j)];
    const auto& va = a[static_cast<size_t>(ta.node)][static_cast<size_t>(ta.output)];
    const auto& vb = b[static_cast<size_t>(tb.node)][static_cast<size_t>(tb.output)];
    const std::string where = "output " + std::to_string(i) + ": ";
    if (!(va.shape == vb.shape))
      return where + "parallel shapes differ: " + va.shape.to_string() + " vs " + vb.shape.to_string();
    for (size_t s = 0; s < va.shards.size(); ++s)
      for (size_t e = 0; e < va.shards[s].data.size(); ++e) {
        const T x = va.shards[s].data[e], y = vb.shards[s].data[e];
        bool differ = false;
        // A NaN on one side only differs (`>` alone would call it equal).
        if constexpr (std::is_same_v<T, float>) differ = std::isnan(x) != std::isnan(y) || std::fabs(x - y) > 1e-3f * (1.0f + std::fabs(y));
        else differ = !(x == y);
        if (!differ) continue;
        // Formatted only here: formatting every element compared was a
        // third of verification's time.
        std::string vx, vy;
        if constexpr (std::is_same_v<T, float>) vx = std::to_string(x), vy = std::to_string(y);
        else vx = std::to_string(x.value()), vy = std::to_string(y.value());
        return where + "shard " + std::to_string(s) + " element " + std::to_string(e) + ": " + vx + " vs " + vy +
               (std::is_same_v<T, float> ? " (float, seed " : " (exact mod p, seed ") + std::to_string(seed) + ")";
      }
  }
  return "";
}

}  // namespace

NumericCheck check_numerically(const Rule& r, int trials) {
  NumericCheck c;
  try {
    for (int t = 0; t < trials; ++t) {
      const uint64_t seed = 1000 + static_cast<uint64_t>(t);
      // Float is the real semantics, so its counterexample is the one to show.
      std::string m = mismatch<float>(r, seed);
      if (m.empty()) m = mismatch<ModP>(r, seed);
      if (!m.empty()) {
        c.counterexample = m;
        return c;
      }
    }
  } catch (const Error& e) {
    c.counterexample = std::string("evaluation failed: ") + e.what();
    return c;
  }
  c.holds = true;
  return c;
}

namespace {

// `g` with each node's attributes as `edit` gives them (inputs and names kept).
Graph rebuilt(const Graph& g, const std::function<Attributes(const Node&)>& edit) {
  Graph out(g.name());
  std::vector<NodeId> map;
  for (const Node& n : g.nodes()) {
    std::vector<TensorRef> ins;
    for (const TensorRef& t : n.inputs) ins.push_back({map[static_cast<size_t>(t.node)], t.output});
    map.push_back(out.add(*n.op, edit(n), ins, n.name));
  }
  for (const TensorRef& t : g.outputs()) out.add_output({map[static_cast<size_t>(t.node)], t.output});
  return out;
}

Graph rescale_graph(const Graph& g, int64_t factor, int64_t degree_from = 0, int64_t degree_to = 0) {
  return rebuilt(g, [&](const Node& n) {
    Attributes a = n.attrs;
    if (n.op->op_class == OpClass::kSource) {
      IntList shape = a.get_ints("shape");
      for (auto& x : shape) x *= factor;
      a.set("shape", shape);
      if (a.has("index_range") && a.get_int("index_range") > 0) a.set("index_range", a.get_int("index_range") * factor);
      if (degree_from > 0) {
        IntList degrees = a.get_ints("degrees");
        for (auto& d : degrees) d = d == degree_from ? degree_to : d;
        a.set("degrees", degrees);
        if (a.get_int("replica") == degree_from) a.set("replica", degree_to);
      }
    }
    const bool on_replicas = n.op->op_class == OpClass::kCompute && n.op->is_shard_level(a);
    for (const AttrSpec& spec : n.op->attrs) {
      if (spec.role == AttrRole::kExtentParts && !on_replicas) {
        IntList parts = a.get_ints(spec.name);
        for (auto& x : parts) x *= factor;
        a.set(spec.name, parts);
      } else if (spec.role == AttrRole::kShape) {
        throw Error("a " + n.op->name + "'s " + spec.name + " cannot be rescaled");
      } else if (spec.role == AttrRole::kDegree && degree_from > 0 && a.get_int(spec.name) == degree_from) {
        a.set(spec.name, degree_to);
      }
    }
    if (degree_from > 0 && on_replicas)
      throw Error("a replica-axis " + n.op->name + " fixes its replica degrees");
    return a;
  });
}

Graph with_values(const Graph& g, const std::vector<std::string>& attrs) {
  return rebuilt(g, [&](const Node& n) {
    Attributes a = n.attrs;
    for (const AttrSpec& spec : n.op->attrs) {
      if (!a.has(spec.name) || std::find(attrs.begin(), attrs.end(), n.op->name + "." + spec.name) == attrs.end())
        continue;
      if (spec.type == AttrType::kFloat) a.set(spec.name, a.get_float(spec.name) / 2 + 0.25);
      if (spec.type == AttrType::kInt) a.set(spec.name, a.get_int(spec.name) + 7);
    }
    return a;
  });
}

}  // namespace

Rule with_other_values(const Rule& r, const std::vector<std::string>& attrs) {
  return {r.id, with_values(r.source, attrs), with_values(r.target, attrs), r.output_map, r.proof};
}

Rule rescale(const Rule& r, int64_t factor) {
  return {r.id, rescale_graph(r.source, factor), rescale_graph(r.target, factor), r.output_map, r.proof};
}

Rule regrade(const Rule& r, int64_t from, int64_t to) {
  return {r.id, rescale_graph(r.source, to, from, to), rescale_graph(r.target, to, from, to), r.output_map, r.proof};
}

NumericCheck check_at_other_shapes(const Rule& r, int trials) {
  NumericCheck c = check_numerically(r, trials);
  if (!c.holds) return c;
  DegreeCheck at_degree_4 = DegreeCheck::kNotApplicable;
  try {
    at_degree_4 = check_numerically(regrade(r, 2, 4), trials).holds ? DegreeCheck::kHolds : DegreeCheck::kDegreeSpecific;
  } catch (const Error&) {
  }
  for (int64_t factor : {2, 3}) {
    Rule scaled;
    try {
      scaled = rescale(r, factor);
    } catch (const Error&) {
      continue;  // not legal at this size (a degree that no longer divides)
    }
    c = check_numerically(scaled, trials);
    if (!c.holds) {
      c.counterexample = "at " + std::to_string(factor) + "x the shapes: " + c.counterexample;
      return c;
    }
  }
  c.at_degree_4 = at_degree_4;
  return c;
}

}  // namespace pcgx
