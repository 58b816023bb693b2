// Where a pipeline's chunks end (see pipeline_cuts.h and pipeline.h's
// balanced_cuts): single-tensor cuts of the model chosen by its layers, by
// name or by balancing per-node weight.
#include "pipeline_cuts.h"

#include <algorithm>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "graph_splitting.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_cuts.h"
#include "pcgx/search/pipeline.h"

namespace pcgx::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The model's single-tensor cuts and its layers: the repeating gaps
// between them (pcg/graph_cuts.h).
struct Layers {
  std::vector<std::pair<size_t, TensorRef>> cuts;
  RepeatingGaps gaps;
};
Layers layers_of(const Graph& g, const std::vector<NodeId>& order) {
  Layers l{valid_cuts(g, order), {}};
  std::vector<uint64_t> gaps;
  for (size_t c = 0; c + 1 < l.cuts.size(); ++c)
    gaps.push_back(gap_signature(g, std::span(order).subspan(l.cuts[c].first + 1, l.cuts[c + 1].first - l.cuts[c].first)));
  l.gaps = repeating_gaps(gaps);
  return l;
}

}  // namespace

namespace {

// The cuts after chunks holding `held` layers each, in model order; an
// empty first (last) chunk holds only what precedes (follows) the layers.
// Throws naming `field` where their sum is not the model's layers or
// nothing follows the last layer at a cut.
std::vector<std::pair<size_t, TensorRef>> cuts_holding(const Graph& g, const std::vector<NodeId>& order, const std::vector<int64_t>& held,
                                                       const std::string& field) {
  const auto [cuts, r] = layers_of(g, order);
  const auto layers = static_cast<int64_t>(r.layers());
  if (layers == 0) throw FieldError(field, "'" + g.name() + "' has no repeating layers to split over pipeline stages");
  int64_t stated = 0;
  for (const int64_t n : held) stated += n;
  if (stated != layers)
    throw FieldError(field, "'" + g.name() + "' has " + std::to_string(layers) + " layers, and the chunks hold " + std::to_string(stated));
  std::vector<std::pair<size_t, TensorRef>> out;
  size_t done = 0;
  for (size_t k = 0; k + 1 < held.size(); ++k) {
    done += static_cast<size_t>(held[k]);
    const size_t at = r.start + done * r.period;
    if (at >= cuts.size())
      throw FieldError(field, "nothing follows the last layer of '" + g.name() + "' at a single-tensor cut, so chunk " + std::to_string(k + 2) +
                                  " cannot hold the head alone");
    out.push_back(cuts[at]);
  }
  return out;
}

}  // namespace

// Megatron-LM's stages (its get_num_layers_to_build): the model's layers
// (the repeating gaps between its cuts, pcg/graph_cuts.h) split evenly
// over the chunks, what precedes the first layer (the embeddings) in the
// first chunk and what follows the last (the head and the loss) in the
// last. Uneven: the stated stages' layers, the rest evenly over the stages
// between, each stage's over its v chunks (chunk c on stage c mod S); or
// the embeddings and the loss counted as a layer each, the first and last
// chunks one layer short.
std::vector<std::pair<size_t, TensorRef>> even_layer_cuts(const Graph& g, const std::vector<NodeId>& order, int64_t stages,
                                                          int64_t virtual_stages, const LayerSplit& split) {
  const int64_t S = stages, v = virtual_stages, chunks = S * v, first = split.first, last = split.last;
  if (chunks <= 1) return {};
  const auto [cuts, r] = layers_of(g, order);
  const auto layers = static_cast<int64_t>(r.layers());
  if (layers == 0) throw Error("megatron: '" + g.name() + "' has no repeating layers to split over pipeline stages");
  std::vector<int64_t> held(static_cast<size_t>(chunks), 0);
  if (first > layers || last > layers || first + last > layers)
    throw FieldError(first > 0 ? "PipelineOptions.first_stage_layers" : "PipelineOptions.last_stage_layers",
                     "'" + g.name() + "' has " + std::to_string(layers) + " layers, fewer than the " + std::to_string(first + last) + " stated");
  if (split.embedding || split.loss) {
    const std::string field = split.embedding ? "PipelineOptions.embedding_as_layer" : "PipelineOptions.loss_as_layer";
    const int64_t counted = layers + split.embedding + split.loss;
    if (counted % chunks != 0)
      throw FieldError(field, "the " + std::to_string(layers) + " layers of '" + g.name() + "'" + (split.embedding ? ", the embeddings" : "") +
                                  (split.loss ? ", the loss" : "") + ": " + std::to_string(counted) + " in all, which " + std::to_string(chunks) +
                                  " chunks (stages x virtual stages) do not divide");
    std::fill(held.begin(), held.end(), counted / chunks);
    held.front() -= split.embedding, held.back() -= split.loss;
    return cuts_holding(g, order, held, field);
  }
  // Layers per stage: the stated ends, the rest evenly between.
  std::vector<int64_t> per_stage(static_cast<size_t>(S), 0);
  if (first > 0) per_stage.front() = first;
  if (last > 0) per_stage.back() = last;
  const int64_t between = S - (first > 0) - (last > 0), rest = layers - first - last;
  if (first > 0 || last > 0) {
    const std::string field = first > 0 ? "PipelineOptions.first_stage_layers" : "PipelineOptions.last_stage_layers";
    const std::string stated = (first > 0 ? std::to_string(first) + " in the first stage" : "") + (first > 0 && last > 0 ? " and " : "") +
                               (last > 0 ? std::to_string(last) + " in the last" : "");
    if (rest < between || (between == 0 && rest != 0) || (between > 0 && rest % between != 0))
      throw FieldError(field, "'" + g.name() + "' has " + std::to_string(layers) + " layers: " + stated + " leave " + std::to_string(rest) +
                                  ", which the " + std::to_string(between) + " stages between cannot share evenly (one layer or more each)");
    for (int64_t& n : per_stage)
      if (n == 0) n = rest / between;
    for (size_t k = 0; k < per_stage.size(); ++k)
      if (per_stage[k] % v != 0) {
        const bool end = (k == 0 && first > 0) || (k + 1 == per_stage.size() && last > 0);
        throw FieldError(!end ? field : k == 0 ? "PipelineOptions.first_stage_layers" : "PipelineOptions.last_stage_layers",
                         std::string(k == 0 ? "the first" : k + 1 == per_stage.size() ? "the last" : "each middle") + " stage's " +
                             std::to_string(per_stage[k]) + " layers do not split evenly over its " + std::to_string(v) + " virtual stages");
      }
  } else if (layers % chunks != 0) {
    throw FieldError("PipelineOptions.stages", "Megatron-LM splits the " + std::to_string(layers) + " layers of '" + g.name() +
                                                   "' evenly, and " + std::to_string(chunks) +
                                                   " chunks (stages x virtual stages) do not divide them (an uneven split states the first or last stage's layers)");
  } else {
    std::fill(per_stage.begin(), per_stage.end(), layers / S);
  }
  for (int64_t c = 0; c < chunks; ++c) held[static_cast<size_t>(c)] = per_stage[static_cast<size_t>(c % S)] / v;
  return cuts_holding(g, order, held, "PipelineOptions.stages");
}

std::vector<std::pair<size_t, TensorRef>> layout_cuts(const Graph& g, const std::vector<NodeId>& order, const std::vector<int64_t>& layout) {
  return cuts_holding(g, order, layout, "PipelineOptions.layout");
}

// An interlaced pipeline's cuts, unstated: the layers split evenly over
// the staged chunks, and an interlaced first chunk what precedes the first
// layer, an interlaced last one what follows the last.
std::vector<std::pair<size_t, TensorRef>> interlaced_cuts(const Graph& g, const std::vector<NodeId>& order, int64_t staged,
                                                          const std::vector<int64_t>& interlaced) {
  const int64_t C = staged + static_cast<int64_t>(interlaced.size());  // (each the first or the last: check_interlaced)
  const auto [cuts, r] = layers_of(g, order);
  if (r.layers() == 0) throw Error("pipeline: '" + g.name() + "' has no repeating layers to run as stages beside interlaced chunks");
  std::vector<std::pair<size_t, TensorRef>> out = even_layer_cuts(g, order, staged);
  if (std::find(interlaced.begin(), interlaced.end(), 0) != interlaced.end()) out.insert(out.begin(), cuts[r.start]);
  if (std::find(interlaced.begin(), interlaced.end(), C - 1) != interlaced.end()) {
    const size_t after = r.start + r.layers() * r.period;
    if (after >= cuts.size()) throw Error("pipeline: nothing follows the last layer of '" + g.name() + "' at a single-tensor cut to interlace");
    out.push_back(cuts[after]);
  }
  return out;
}

// The cuts after the operators `names` (PipelineOptions::boundaries).
std::vector<std::pair<size_t, TensorRef>> stated_cuts(const Graph& g, const std::vector<NodeId>& order, const std::vector<std::string>& names,
                                                      int64_t chunks) {
  if (static_cast<int64_t>(names.size()) != chunks - 1)
    throw FieldError("PipelineOptions.boundaries", std::to_string(names.size()) + " operators end chunks, and " + std::to_string(chunks) +
                                                       " chunks (stages x virtual stages) need " + std::to_string(chunks - 1));
  const auto cuts = valid_cuts(g, order);
  std::vector<std::pair<size_t, TensorRef>> out;
  for (const std::string& name : names) {
    const auto at = std::find_if(cuts.begin(), cuts.end(), [&](const auto& c) { return g.node(order[c.first]).name == name; });
    if (at == cuts.end()) {
      const bool exists = std::any_of(g.nodes().begin(), g.nodes().end(), [&](const Node& n) { return n.name == name; });
      throw FieldError("PipelineOptions.boundaries", "'" + name + "' " +
                                                         (exists ? "does not end a single-tensor cut of '" + g.name() + "' (more than one tensor crosses after it)"
                                                                 : "is no operator of '" + g.name() + "'"));
    }
    if (!out.empty() && at->first <= out.back().first)
      throw FieldError("PipelineOptions.boundaries", "'" + name + "' does not come after '" + g.node(order[out.back().first]).name + "'");
    out.push_back(*at);
  }
  return out;
}

std::vector<std::pair<size_t, TensorRef>> balanced_cuts(const Graph& g, const std::vector<double>& weight, int64_t stages) {
  const std::vector<NodeId> order = compute_order(g);
  const auto cuts = valid_cuts(g, order);
  const size_t c = cuts.size(), s = static_cast<size_t>(stages);
  if (stages <= 1 || c + 1 < s) return {};
  std::vector<double> prefix(order.size() + 1, 0.0);
  for (size_t i = 0; i < order.size(); ++i) prefix[i + 1] = prefix[i] + weight[static_cast<size_t>(order[i])];
  // Stage boundaries b_0 = 0 < b_1 < ... < b_s = order.size(), b_j one past a cut.
  auto end_of = [&](size_t j) { return cuts[j].first + 1; };
  // best[k][j]: the smallest largest stage for k stages ending at cut j.
  std::vector<std::vector<double>> best(s, std::vector<double>(c, kInf));
  std::vector<std::vector<size_t>> from(s, std::vector<size_t>(c, 0));
  for (size_t j = 0; j < c; ++j) best[1][j] = prefix[end_of(j)];
  for (size_t k = 2; k < s; ++k)
    for (size_t j = 0; j < c; ++j)
      for (size_t i = 0; i < j; ++i) {
        const double v = std::max(best[k - 1][i], prefix[end_of(j)] - prefix[end_of(i)]);
        if (v < best[k][j]) best[k][j] = v, from[k][j] = i;
      }
  size_t last = 0;
  double top = kInf;
  for (size_t j = 0; j < c; ++j) {
    const double v = std::max(best[s - 1][j], prefix[order.size()] - prefix[end_of(j)]);
    if (v < top) top = v, last = j;
  }
  if (top == kInf) return {};
  std::vector<std::pair<size_t, TensorRef>> out(s - 1);
  for (size_t k = s - 1; k-- > 0;) {
    out[k] = cuts[last];
    last = from[k + 1][last];
  }
  return out;
}

}  // namespace pcgx::search
