// Which BatchNorms a plan runs in their statistics form (user_plan.h's
// plan_graph): only those it splits, so that one it leaves whole stays one
// operator, as the strategy it may have been read from (plan show) ran it.
#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "pcgx/pcg/degree_inference.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/user_plan.h"

namespace pcgx::search {
namespace {

// The BatchNorm a node of synchronized_batch_norm's graph is part of.
std::optional<std::string> batch_norm_of(const Node& n) {
  const auto stem = [&](std::string_view suffix) -> std::optional<std::string> {
    if (!n.name.ends_with(suffix)) return std::nullopt;
    return n.name.substr(0, n.name.size() - suffix.size());
  };
  if (n.op->name == "BatchNormApply") return n.name;
  if (n.op->name == "BatchSum") return stem(".sum");
  if (n.op->name == "BatchSquares") return stem(".squares");
  return std::nullopt;
}

}  // namespace

std::set<std::string> batch_norms_split(const Graph& model, const UserPlan& plan) {
  std::map<std::string, const Node*> whole;  // the model's BatchNorms, by name
  for (const Node& n : model.nodes())
    if (n.op->name == "BatchNorm" && !n.name.empty()) whole.emplace(n.name, &n);
  // Whether the BatchNorm itself runs as `p` says: every kind stated is
  // one of its own (it normalizes over the samples: it has none that
  // splits them).
  auto whole_runs = [&](const std::string& name, const NodePlan& p) {
    const Node& bn = *whole.at(name);
    const std::vector<ParallelKind> kinds = bn.op->kinds ? bn.op->kinds(bn.attrs, model.input_types(bn)) : std::vector<ParallelKind>{};
    for (const auto& [kind, degree] : p) {
      if (degree <= 1) continue;
      const bool has = kind == kSamplesKind ? sample_kind(kinds) != nullptr
                                            : std::any_of(kinds.begin(), kinds.end(), [&](const ParallelKind& k) { return k.name == kind; });
      if (!has) return false;
    }
    return true;
  };
  const Graph g = synchronized_batch_norm(model);
  const std::vector<WeightUse> uses = weight_uses(g);
  std::set<std::string> split;
  for (const Node& n : g.nodes()) {
    const auto bn = n.op->op_class == OpClass::kCompute ? batch_norm_of(n) : std::nullopt;
    if (!bn || !whole.contains(*bn)) continue;
    // The last rule selecting the part decides it (as plan_partitions).
    const PlanRule* last = nullptr;
    for (const PlanRule& r : plan.rules)
      if (selects(r.select, n, uses[static_cast<size_t>(n.id)])) last = &r;
    // Left to the search of the unstated; a statistic split or placed; the
    // part applying them (the BatchNorm's own name) run in a way the
    // BatchNorm itself cannot.
    const bool splits = !last                          ? plan.unstated == Unstated::kSearch
                        : n.op->name != "BatchNormApply" ? !last->partition.empty() || !last->devices.empty()
                                                         : !whole_runs(*bn, last->partition);
    if (splits) split.insert(*bn);
  }
  return split;
}

bool selects_a_statistics_part(const Graph& g, const PlanSelector& s) {
  // (Of the BatchNorms that run whole in `g`: a split one's parts are in it.)
  std::set<std::string> whole;
  for (const Node& n : g.nodes())
    if (n.op->name == "BatchNorm") whole.insert(n.name);
  const Graph parts = synchronized_batch_norm(g);
  const std::vector<WeightUse> uses = weight_uses(parts);
  return std::any_of(parts.nodes().begin(), parts.nodes().end(), [&](const Node& n) {
    const auto bn = batch_norm_of(n);
    return bn && whole.contains(*bn) && selects(s, n, uses[static_cast<size_t>(n.id)]);
  });
}

}  // namespace pcgx::search
