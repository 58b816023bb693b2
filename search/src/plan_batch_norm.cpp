// Which BatchNorms a plan runs in their statistics form (user_plan.h's
// plan_graph): only those it splits, so that one it leaves whole stays one
// operator, as the strategy it may have been read from (plan show) ran it.
#include <algorithm>
#include <string_view>

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
  const Graph g = synchronized_batch_norm(model);
  const std::vector<WeightUse> uses = weight_uses(g);
  std::set<std::string> split;
  for (const Node& n : g.nodes()) {
    const auto bn = n.op->op_class == OpClass::kCompute ? batch_norm_of(n) : std::nullopt;
    if (!bn) continue;
    // The last rule selecting the part decides it (as plan_partitions).
    const PlanRule* last = nullptr;
    for (const PlanRule& r : plan.rules)
      if (selects(r.select, n, uses[static_cast<size_t>(n.id)])) last = &r;
    // A part split or placed, or left to the search of the unstated.
    if (last ? !last->partition.empty() || !last->devices.empty() : plan.unstated == Unstated::kSearch) split.insert(*bn);
  }
  return split;
}

bool selects_a_statistics_part(const Graph& g, const PlanSelector& s) {
  const Graph parts = synchronized_batch_norm(g);
  const std::vector<WeightUse> uses = weight_uses(parts);
  return std::any_of(parts.nodes().begin(), parts.nodes().end(),
                     [&](const Node& n) { return batch_norm_of(n) && selects(s, n, uses[static_cast<size_t>(n.id)]); });
}

}  // namespace pcgx::search
