// Baseline strategies (see baselines.h).
#include "pcgx/search/baselines.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include <tbb/parallel_for.h>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/registry.h"

namespace pcgx::search {
namespace {

// A tensor of the unpartitioned `g` as one task reads it whole: no
// dimension split, and the replica slots `g` itself gives it (a Concat
// along the replica axis holds its operands in slots of their own, which
// only a Split along that axis takes apart: summing them would change the
// value, as an algebraic rule's Relu(Concat_r(x, y)) shows), 1 elsewhere
// (a source's or a parallel operator's layout is not the model's).
ParallelTensorShape whole(const Graph& g, TensorRef t) {
  const ParallelTensorShape& s = g.shape(t);
  ParallelTensorShape w = ParallelTensorShape::unpartitioned(g.type(t).shape, s.dtype);
  if (g.node(t.node).op->op_class == OpClass::kCompute) w.replica = s.replica;
  return w;
}

// The layout a plan asks of each input, or nothing when the plan names an
// unknown kind. An input a kind needs as summands (kSum: the bias of a
// reduction-parallel Linear, added once in total) gets replica slots, and
// `summands[i]` says how many of them must add up to the value.
struct Required {
  std::vector<ParallelTensorShape> layout;
  std::vector<int64_t> summands;
};

std::optional<Required> required_inputs(const Graph& g, const Node& n, const NodePlan& plan) {
  const auto types = g.input_types(n);
  Required req;
  for (size_t i = 0; i < types.size(); ++i) req.layout.push_back(whole(g, n.inputs[i]));
  req.summands.assign(types.size(), 1);
  if (plan.empty()) return req;
  if (!n.op->kinds) return std::nullopt;
  const auto kinds = n.op->kinds(n.attrs, types);
  for (const auto& [name, degree] : plan) {
    if (degree <= 1) continue;
    if (name == kReplicasKind) {  // every input copied: the operator runs once per copy
      for (ParallelTensorShape& l : req.layout) l.replica *= degree;
      continue;
    }
    auto k = std::find_if(kinds.begin(), kinds.end(), [&name = name](const ParallelKind& x) { return x.name == name; });
    if (k == kinds.end()) return std::nullopt;
    for (size_t i = 0; i < req.layout.size() && i < k->inputs.size(); ++i) {
      const int d = k->inputs[i];
      if (d == ParallelKind::kSum) req.layout[i].replica *= degree, req.summands[i] *= degree;
      else if (d == ParallelKind::kCopy) req.layout[i].replica *= degree;
      else req.layout[i].dims[static_cast<size_t>(d)].degree *= degree;
    }
  }
  for (const auto& r : req.layout)
    if (r.invalid_reason()) return std::nullopt;
  return req;
}

struct Builder {
  const Graph& g;
  Graph out;
  std::vector<std::vector<TensorRef>> map;  // old tensor -> new
  std::map<std::pair<TensorRef, std::string>, TensorRef> converted;
  // Tensors whose innermost replica slots are partial sums, and how many
  // add up to the value (a kind with a kPartial output produced them).
  std::map<TensorRef, int64_t> partial;
  // Tensors an operator run in copies made (kReplicasKind): how many.
  std::map<TensorRef, int64_t> copies;

  TensorRef add(const std::string& op, Attributes a, TensorRef in) { return {out.add(op, std::move(a), {in}), 0}; }

  void note_partial_outputs(NodeId id, const NodePlan& plan) {
    const Node& n = out.node(id);
    if (const auto r = plan.find(kReplicasKind); r != plan.end() && r->second > 1)
      for (size_t o = 0; o < n.outputs.size(); ++o) copies[{id, static_cast<int32_t>(o)}] = r->second;
    if (plan.empty() || !n.op->kinds) return;
    std::vector<TensorType> types;
    for (const TensorRef& i : n.inputs) types.push_back(out.type(i));
    const auto kinds = n.op->kinds(n.attrs, types);
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      int64_t p = 1;
      for (const auto& [name, degree] : plan) {
        auto k = std::find_if(kinds.begin(), kinds.end(), [&name = name](const ParallelKind& x) { return x.name == name; });
        if (k != kinds.end() && o < k->outputs.size() && k->outputs[o] == ParallelKind::kPartial) p *= degree;
      }
      if (p > 1) partial[{id, static_cast<int32_t>(o)}] = p;
    }
  }

  // `t` (new graph) converted to layout `want`.
  TensorRef convert(TensorRef t, const ParallelTensorShape& want) {
    const auto key = std::make_pair(t, want.to_string());
    if (auto it = converted.find(key); it != converted.end()) return it->second;
    TensorRef cur = t;
    // Partial sums are summed first, whatever replicas the reader wants.
    if (auto p = partial.find(t); p != partial.end() && p->second > 1) cur = add("Reduce", {{"degree", p->second}}, cur);
    ParallelTensorShape s = out.shape(cur);
    // Copies a reader wants fewer of: the first. (Of an operator reading
    // the model's own slots, copies and slots interleave: not taken apart.)
    if (auto c = copies.find(t); c != copies.end() && s.replica == c->second && want.replica % s.replica != 0) {
      cur = {out.add("Split", {{"axis", int64_t{-1}}, {"sizes", IntList{1, s.replica - 1}}}, {cur}), 0};
      s = out.shape(cur);
    }
    // Slots that are no partial sums are the model's own (whole()): a
    // reader wanting copies of them gets copies of each, not their sum.
    const bool copies_of_slots = s.replica > 1 && want.replica % s.replica == 0;
    if (s.replica > 1 && s.replica != want.replica && !copies_of_slots) cur = add("Reduce", {{"degree", s.replica}}, cur), s = out.shape(cur);
    for (int j = 0; j < s.rank(); ++j) {
      const int64_t have = s.dims[static_cast<size_t>(j)].degree, need = want.dims[static_cast<size_t>(j)].degree;
      if (have > need) {
        const int64_t k = have % need == 0 ? have / need : have;
        cur = add("Combine", {{"dim", int64_t{j}}, {"degree", k}}, cur), s = out.shape(cur);
      }
    }
    for (int j = 0; j < s.rank(); ++j) {
      const int64_t have = s.dims[static_cast<size_t>(j)].degree, need = want.dims[static_cast<size_t>(j)].degree;
      if (need > have && need % have) cur = add("Combine", {{"dim", int64_t{j}}, {"degree", have}}, cur), s = out.shape(cur);
      const int64_t now = s.dims[static_cast<size_t>(j)].degree;
      if (need > now) cur = add("Repartition", {{"dim", int64_t{j}}, {"degree", need / now}}, cur), s = out.shape(cur);
    }
    if (want.replica > s.replica) cur = add("Replicate", {{"degree", want.replica / s.replica}}, cur);
    converted.emplace(key, cur);
    return cur;
  }
};

// The expert strategies are recipes written for named layers, as their
// authors state them (Megatron splits Linear layers column- then
// row-parallel; a recommendation plan splits embedding tables): they name
// operators the way a hand-written plan does, here and in has_op's callers.
bool is_projection(const Node& n) { return n.op->name == "Linear"; }
bool is_projection_without_activation(const Node& n) {
  return is_projection(n) && n.attrs.get_string("activation") == "none";
}
bool is_embedding_table(const Node& n) { return n.op->name == "EmbeddingBag" || n.op->name == "Embedding"; }

bool has_op(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes())
    if (n.op->name == name) return true;
  return false;
}

}  // namespace

const ParallelKind* sample_kind(const std::vector<ParallelKind>& kinds) {
  for (const auto& k : kinds) {
    if (std::find(k.inputs.begin(), k.inputs.end(), ParallelKind::kSum) != k.inputs.end()) continue;
    if (k.inputs.empty() || k.inputs[0] != 0 || k.outputs.empty()) continue;
    if (k.outputs[0] == 0 || k.outputs[0] == ParallelKind::kPartial) return &k;
  }
  return nullptr;
}

namespace {

// What a degree must divide along a dimension: one micro-slice of it,
// where a pipeline stage processes it in micro-batches.
int64_t splittable(const ParallelDim& d) { return d.size / d.pipeline; }

int64_t sample_size(const Graph& g, const Node& n, const ParallelKind& k) {
  if (k.outputs[0] == 0) return splittable(n.outputs[0].dims.at(0));
  return splittable(g.shape(n.inputs[0]).dims.at(0));
}

NodePlan sample_plan(const Graph& g, const Node& n, int64_t devices, bool split_unsampled = false) {
  if (!n.op->kinds) return {};
  const auto kinds = n.op->kinds(n.attrs, g.input_types(n));
  if (const ParallelKind* k = sample_kind(kinds)) {
    const int64_t d = largest_dividing_degree(devices, sample_size(g, n, *k));
    return d > 1 ? NodePlan{{k->name, d}} : NodePlan{};
  }
  // No sample kind (BatchNorm: its statistics span the batch). Running it
  // whole puts the entire batch on one device; or split it along the
  // output dimension that takes the largest degree.
  if (!split_unsampled) return {};
  NodePlan best;
  int64_t best_d = 1;
  for (const ParallelKind& k : kinds) {
    if (k.outputs.empty() || k.outputs[0] < 0 || k.must_divide > 0) continue;
    if (std::find(k.inputs.begin(), k.inputs.end(), ParallelKind::kSum) != k.inputs.end()) continue;
    const int64_t d = largest_dividing_degree(devices, splittable(n.outputs[0].dims[static_cast<size_t>(k.outputs[0])]));
    if (d > best_d) best = {{k.name, d}}, best_d = d;
  }
  return best;
}

}  // namespace

NodePlan spread_plan(const Graph& g, const Node& n, int64_t devices) {
  if (!n.op->kinds) return {};
  const auto kinds = n.op->kinds(n.attrs, g.input_types(n));
  NodePlan out;
  int64_t left = devices;
  const ParallelKind* samples = sample_kind(kinds);
  if (samples) {
    const int64_t d = largest_dividing_degree(left, sample_size(g, n, *samples));
    if (d > 1) out[samples->name] = d, left /= d;
  }
  for (const ParallelKind& k : kinds) {
    if (left == 1) break;
    if (&k == samples || k.outputs.empty() || k.outputs[0] < 0 || k.must_divide > 0) continue;
    if (std::find(k.inputs.begin(), k.inputs.end(), ParallelKind::kSum) != k.inputs.end()) continue;
    const int64_t d = largest_dividing_degree(left, splittable(n.outputs[0].dims[static_cast<size_t>(k.outputs[0])]));
    if (d > 1) out[k.name] = d, left /= d;
  }
  return out;
}

namespace {

// One input, elementwise (the registry says which): an activation, Dropout, a scaling.
bool unary(const Node& n) { return n.op->elementwise && n.inputs.size() == 1; }

}  // namespace

int64_t largest_dividing_degree(int64_t devices, int64_t n) {
  for (int64_t d = devices; d > 1; --d)
    if (devices % d == 0 && n % d == 0) return d;
  return 1;
}

Graph parallelize(const Graph& g, const std::function<NodePlan(const Graph&, const Node&)>& plan, std::vector<RefusedPlan>* refused,
                  std::vector<NodeId>* image) {
  Builder b{g, Graph(g.name()), std::vector<std::vector<TensorRef>>(g.size()), {}};
  if (image) image->assign(g.size(), -1);
  for (const Node& n : g.nodes()) {
    auto& outs = b.map[static_cast<size_t>(n.id)];
    if (n.op->op_class == OpClass::kSource) {
      const NodeId id = b.out.add(*n.op, n.attrs, {}, n.name);
      for (size_t o = 0; o < n.outputs.size(); ++o) outs.push_back({id, static_cast<int32_t>(o)});
      if (image) (*image)[static_cast<size_t>(n.id)] = id;
      continue;
    }
    std::vector<TensorRef> ins;
    for (const TensorRef& i : n.inputs) ins.push_back(b.map[static_cast<size_t>(i.node)][static_cast<size_t>(i.output)]);
    NodeId id = -1;
    if (n.op->op_class == OpClass::kCompute) {
      const NodePlan wanted = plan(g, n);
      auto req = required_inputs(g, n, wanted);
      if (!req && refused && !wanted.empty()) refused->push_back({n.id, "its parallel kinds do not combine as stated"});
      if (req) {
        std::vector<TensorRef> conv;
        for (size_t i = 0; i < ins.size(); ++i) {
          const int64_t k = req->summands[i];
          if (k == 1) {
            conv.push_back(b.convert(ins[i], req->layout[i]));
            continue;
          }
          // k slots of x/k add up to x.
          ParallelTensorShape copies = req->layout[i];
          copies.replica /= k;
          const TensorRef scaled = b.add("ScalarMul", {{"scalar", 1.0 / static_cast<double>(k)}}, b.convert(ins[i], copies));
          conv.push_back(b.add("Replicate", {{"degree", k}}, scaled));
        }
        try {
          id = b.out.add(*n.op, n.attrs, conv, n.name);
          b.note_partial_outputs(id, wanted);
        } catch (const Error& e) {
          if (refused) refused->push_back({n.id, e.what()});
          id = -1;
        }
      }
      if (id < 0) {
        std::vector<TensorRef> conv;
        for (const TensorRef& i : n.inputs) conv.push_back(b.convert(b.map[static_cast<size_t>(i.node)][static_cast<size_t>(i.output)], whole(g, i)));
        id = b.out.add(*n.op, n.attrs, conv, n.name);
      }
    } else if (n.op->data_move == DataMove::kRepartition || n.op->data_move == DataMove::kCombine) {
      // Layout only (the logical tensor is unchanged): readers convert what
      // they get to what they need, so a piece's split boundary (graph
      // splitting) flows into a data-parallel plan without a gather.
      outs.push_back(ins[0]);
      continue;
    } else {
      id = b.out.add(*n.op, n.attrs, ins, n.name);
    }
    for (size_t o = 0; o < b.out.node(id).outputs.size(); ++o) outs.push_back({id, static_cast<int32_t>(o)});
    if (image) (*image)[static_cast<size_t>(n.id)] = id;
  }
  for (const TensorRef& o : g.outputs())
    b.out.add_output(b.convert(b.map[static_cast<size_t>(o.node)][static_cast<size_t>(o.output)], g.shape(o)));
  return std::move(b.out);
}

namespace {

// `g` with the operators `expand` rewrites (given the output graph, the
// node and its inputs there, it adds their replacement and returns the
// node standing for the original's outputs, or nothing to copy it).
template <class Expand>
Graph expand_operators(const Graph& g, Expand expand) {
  Graph out(g.name());
  std::vector<std::vector<TensorRef>> map(g.size());
  for (const Node& n : g.nodes()) {
    std::vector<TensorRef> ins;
    for (const TensorRef& t : n.inputs) ins.push_back(map[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)]);
    const std::optional<NodeId> replaced = expand(out, n, ins);
    const NodeId id = replaced ? *replaced : out.add(*n.op, n.attrs, ins, n.name);
    for (size_t o = 0; o < out.node(id).outputs.size(); ++o) map[static_cast<size_t>(n.id)].push_back({id, static_cast<int32_t>(o)});
  }
  for (const TensorRef& o : g.outputs()) out.add_output(map[static_cast<size_t>(o.node)][static_cast<size_t>(o.output)]);
  return out;
}

std::string part_name(const Node& n, const char* suffix) { return n.name.empty() ? "" : n.name + suffix; }

}  // namespace

Graph synchronized_batch_norm(const Graph& g, const std::set<std::string>* only) {
  if (!has_op(g, "BatchNorm")) return g;
  return expand_operators(g, [only](Graph& out, const Node& n, const std::vector<TensorRef>& ins) -> std::optional<NodeId> {
    // The rewrite of this one operator into its synchronized form (BatchSum,
    // BatchSquares, BatchNormApply), so it names it.
    if (n.op->name != "BatchNorm" || n.attrs.get_int("group") != 0) return std::nullopt;
    if (only && !n.name.empty() && !only->contains(n.name)) return std::nullopt;
    const TensorRef sum{out.add("BatchSum", {}, {ins[0]}, part_name(n, ".sum")), 0};
    const TensorRef squares{out.add("BatchSquares", {}, {ins[0], sum}, part_name(n, ".squares")), 0};
    return out.add("BatchNormApply", {{"eps", n.attrs.get_float("eps")}}, {ins[0], sum, squares, ins[1], ins[2]}, n.name);
  });
}

Graph data_parallel(const Graph& g, int64_t devices, bool split_unsampled) {
  return parallelize(synchronized_batch_norm(g),
                     [=](const Graph& gr, const Node& n) { return sample_plan(gr, n, devices, split_unsampled); });
}

bool has_unsampled(const Graph& model) {
  const Graph g = synchronized_batch_norm(model);
  for (const Node& n : g.nodes())
    if (n.op->op_class == OpClass::kCompute && n.op->kinds && !sample_kind(n.op->kinds(n.attrs, g.input_types(n)))) return true;
  return false;
}

// A piece of a transformer cut before its first layer or after its last
// (a pipeline chunk holding only the embeddings, or only the final norm,
// the head and the loss): a word embedding, or a norm before a
// classification loss, and nothing a transformer's ends do not hold.
// (Asked only where the caller says the graph is a transformer's chunk,
// expert()'s `chunk_of_transformer`: --search megatron and expert.)
bool transformer_end(const Graph& g) {
  bool loss = false;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute) continue;
    if (n.op->loss == LossKind::kClassification) loss = true;
    else if (!n.op->elementwise && !is_projection(n) && !is_embedding_table(n) &&
             !(n.op->name == "MatMul" || n.op->name == "Transpose" || n.op->name == "Reshape" || n.op->name == "LayerNorm" || n.op->name == "RMSNorm"))
      return false;
  }
  return has_op(g, "Embedding") || (loss && (has_op(g, "LayerNorm") || has_op(g, "RMSNorm")));
}

std::string expert_family(const Graph& g) {
  if (has_op(g, "EmbeddingBag")) return "recommendation";
  if ((has_op(g, "LayerNorm") || has_op(g, "RMSNorm")) && has_op(g, "BatchMatMul")) return "transformer";
  // A stack of dense layers: Linears, activations and a loss, nothing else.
  bool linear = false;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute) continue;
    if (is_projection(n)) linear = true;
    else if (!unary(n) && n.op->loss == LossKind::kNone) return "";
  }
  return linear ? "mlp" : "";
}

Graph vocabulary_parallel_loss(const Graph& g, int64_t blocks) {
  if (!has_op(g, "SoftmaxCrossEntropy")) return g;
  return expand_operators(g, [&](Graph& out, const Node& n, const std::vector<TensorRef>& ins) -> std::optional<NodeId> {
    // The rewrite of this one operator into its parts, so it names it
    // (as synchronized_batch_norm names BatchNorm).
    if (n.op->name != "SoftmaxCrossEntropy") return std::nullopt;
    if (const int64_t classes = g.shape(n.inputs[0]).dims.back().size; classes % blocks != 0)
      throw Error(describe(n) + ": its " + std::to_string(classes) + " classes do not split into " + std::to_string(blocks) + " blocks");
    const TensorRef lse{out.add("ClassLogSumExp", {{"blocks", blocks}}, {ins[0]}, part_name(n, ".lse")), 0};
    return out.add("CrossEntropyApply", {}, {ins[0], ins[1], lse}, n.name);
  });
}

namespace {

// The first of n's parallel kinds that `pick` accepts; "" when none does.
template <class Pick>
std::string kind_named(const Graph& g, const Node& n, Pick pick) {
  if (!n.op->kinds) return {};
  for (const ParallelKind& k : n.op->kinds(n.attrs, g.input_types(n)))
    if (pick(k)) return k.name;
  return {};
}

// The kind splitting a projection's output columns over t (its input 0
// copied, its output's last dimension split), for the logits of a
// classification loss: "" when n has none, or its columns do not divide.
std::string logits_columns_kind(const Graph& g, const Node& n, int64_t t) {
  if (n.op->op_class != OpClass::kCompute || n.inputs.size() < 2 || n.outputs[0].logical_shape().back() % t != 0) return {};
  const int last = n.outputs[0].rank() - 1;
  return kind_named(g, n, [&](const ParallelKind& k) {
    return !k.inputs.empty() && k.inputs[0] == ParallelKind::kCopy && !k.outputs.empty() && k.outputs[0] == last;
  });
}

// Whether a classification loss reads, alone, logits the expert splits by
// vocabulary over t: then the loss splits with them
// (vocabulary_parallel_loss); else it stays whole.
bool splits_logits(const Graph& g, int64_t t) {
  const auto consumers = g.consumers();
  for (const Node& n : g.nodes()) {
    if (n.op->loss != LossKind::kClassification) continue;
    const Node& head = g.node(n.inputs[0].node);
    if (consumers[static_cast<size_t>(head.id)].size() == 1 && !logits_columns_kind(g, head, t).empty()) return true;
  }
  return false;
}

}  // namespace

std::optional<Graph> expert(const Graph& model, const Machine& machine, int64_t devices, int64_t tensor_degree, bool sequence_parallel,
                            bool chunk_of_transformer, BetweenHalves between) {
  const std::string family = chunk_of_transformer && expert_family(model).empty() && transformer_end(model) ? "transformer" : expert_family(model);
  if (family == "recommendation") {
    // Every table spread over `tensor_degree` devices (by default all of
    // them): by its embedding columns where they divide, else by its rows
    // (partial sums, reduce-scattered into the batch split the MLPs use).
    return parallelize(model, [devices, tensor_degree](const Graph& gr, const Node& n) {
      if (!is_embedding_table(n)) return sample_plan(gr, n, devices);
      const auto& table = gr.shape(n.inputs[1]).dims;
      const int64_t want = tensor_degree > 0 ? tensor_degree : devices;
      const int64_t by_columns = largest_dividing_degree(want, table[1].size);
      const int64_t by_rows = largest_dividing_degree(want, table[0].size);
      if (by_columns >= by_rows) return by_columns > 1 ? NodePlan{{"columns", by_columns}} : NodePlan{};
      return NodePlan{{"rows", by_rows}};
    });
  }
  if (family != "transformer" && family != "mlp") return std::nullopt;
  const int64_t t = tensor_degree > 0 ? tensor_degree : std::gcd(machine.devices_per_node, devices);
  if (devices % t != 0) throw Error("expert: tensor-parallel degree " + std::to_string(t) + " does not divide " + std::to_string(devices) + " devices");
  const int64_t d = devices / t;
  // The loss split by classes with the logits (Megatron-LM's
  // vocabulary-parallel cross-entropy): its t blocks' log-sum-exp
  // all-gathered, the logits never.
  const Graph g = t > 1 && splits_logits(model, t) ? vocabulary_parallel_loss(model, t) : model;
  const auto consumers = g.consumers();
  auto sole_consumer = [&](NodeId n) -> const Node* {
    const auto& cs = consumers[static_cast<size_t>(n)];
    return cs.size() == 1 ? &g.node(cs[0].first) : nullptr;
  };
  // Column-parallel Linears: the first of a feed-forward pair (Linear ->
  // elementwise ops -> Linear without activation), and the query/key/value
  // projections (a Linear whose output is reshaped into heads).
  // In a plain MLP every Linear is column-parallel (activations fused into
  // a Linear rule out the row-parallel half, except where one has none).
  std::set<NodeId> column;
  for (const Node& n : g.nodes()) {
    if (!is_projection(n)) continue;
    const int64_t width = n.outputs[0].logical_shape().back();
    if (width % t) continue;
    if (family == "mlp") {
      column.insert(n.id);
      continue;
    }
    NodeId cur = n.id;
    while (const Node* c = sole_consumer(cur)) {
      // Through activations, and through a gate (SwiGLU's silu(gate) * up):
      // both Linears feeding it are the column half.
      if (c->op->elementwise) {
        cur = c->id;
        continue;
      }
      if (is_projection_without_activation(*c) && c->inputs[0].node == cur) column.insert(n.id);
      // Reshaped into heads: the projection's output feeds attention.
      if (c->op->attr_role("shape") == AttrRole::kShape && cur == n.id) {
        const auto out = c->outputs[0].logical_shape();
        const size_t last = n.outputs[0].logical_shape().size() - 1;
        if (out.size() > last + 1 && out[last] % t == 0) column.insert(n.id);
      }
      break;
    }
  }
  // Megatron-LM's vocabulary-parallel ends (VocabParallelEmbedding, the
  // LM head's output split by vocabulary, and the cross-entropy on the
  // split logits): the word-embedding lookup (a table with a row per word
  // of the vocabulary; position and segment tables stay whole, as in
  // Megatron-LM) splits its table by rows over t (each device looks up the
  // ids in its rows, the partial results summed), the projection producing
  // a classification loss's logits splits its output columns over t, and
  // the loss's parts (vocabulary_parallel_loss) split by classes alike.
  // So a tied table is held as 1/t per device in each of its two layouts,
  // not whole, and the logits stay split.
  // The vocabulary: the classification loss's classes, or in a pipeline
  // stage without the loss, the rows of the largest table looked up.
  int64_t classes = 0;
  for (const Node& n : g.nodes())
    if (n.op->loss == LossKind::kClassification) classes = g.shape(n.inputs[0]).dims.back().size;
  if (classes == 0)
    for (const Node& n : g.nodes())
      if (is_embedding_table(n) && n.inputs.size() == 2 && g.node(n.inputs[1].node).op->is_weight)
        classes = std::max(classes, g.shape(n.inputs[1]).dims[0].size);
  std::set<NodeId> vocabulary_logits;  // projections whose logits are split by vocabulary
  auto vocabulary_split = [&](const Node& n) -> std::optional<NodePlan> {
    if (t <= 1 || n.op->op_class != OpClass::kCompute) return std::nullopt;
    if (is_embedding_table(n) && n.inputs.size() == 2 && g.node(n.inputs[1].node).op->is_weight &&
        g.shape(n.inputs[1]).dims[0].size == classes && classes % t == 0) {
      const std::string rows = kind_named(g, n, [](const ParallelKind& k) {
        return k.inputs.size() == 2 && k.inputs[1] == 0 && !k.outputs.empty() && k.outputs[0] == ParallelKind::kPartial;
      });
      if (!rows.empty()) return NodePlan{{rows, t}};
    }
    // The loss's parts reading split logits: split by classes with them.
    const std::string classes_kind = kind_named(g, n, [](const ParallelKind& k) { return k.name == kClassesKind; });
    if (!classes_kind.empty() && vocabulary_logits.count(n.inputs[0].node)) return NodePlan{{classes_kind, t}};
    // The logits: read by the loss, or by its parts, as their input 0.
    const auto& readers = consumers[static_cast<size_t>(n.id)];
    const bool read_as_logits = !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](const auto& r) {
      const Node& reader = g.node(r.first);
      return r.second == 0 && (reader.op->loss == LossKind::kClassification ||
                               !kind_named(g, reader, [](const ParallelKind& k) { return k.name == kClassesKind; }).empty());
    });
    if (read_as_logits) {
      const std::string columns = logits_columns_kind(g, n, t);
      if (!columns.empty()) {
        vocabulary_logits.insert(n.id);
        return NodePlan{{columns, t}};
      }
    }
    return std::nullopt;
  };
  // Propagate the split from the column Linears: each operator reading a
  // tensor split by t takes the parallel kind that keeps that split (the
  // heads through reshape, transpose, batched matmuls and softmax) until a
  // Linear reads it split on its reduction dimension (the row-parallel
  // half: partial sums, then a Reduce).
  std::vector<std::vector<int>> split(g.size());
  std::map<NodeId, NodePlan> extra;
  for (const Node& n : g.nodes()) {
    split[static_cast<size_t>(n.id)].assign(n.outputs.size(), -1);
    if (n.op->op_class != OpClass::kCompute || t <= 1) continue;
    if (const auto v = vocabulary_split(n)) {
      extra[n.id] = *v;  // its output is partial sums or split logits: read as converted
      continue;
    }
    std::vector<int> in;
    for (const TensorRef& i : n.inputs) in.push_back(split[static_cast<size_t>(i.node)][static_cast<size_t>(i.output)]);
    const int last_in = n.inputs.empty() ? -1 : g.shape(n.inputs[0]).rank() - 1;
    if (is_projection_without_activation(n) && in[0] == last_in && in[0] >= 0) {
      extra[n.id] = {{"reduce", t}};
      continue;
    }
    if (column.count(n.id)) {
      extra[n.id] = {{"out", t}};
      split[static_cast<size_t>(n.id)][0] = n.outputs[0].rank() - 1;
      continue;
    }
    if (std::all_of(in.begin(), in.end(), [](int x) { return x < 0; }) || !n.op->kinds) continue;
    for (const ParallelKind& k : n.op->kinds(n.attrs, g.input_types(n))) {
      bool keeps = !k.outputs.empty() && k.outputs[0] >= 0 && k.must_divide == 0;
      for (size_t i = 0; keeps && i < in.size(); ++i) keeps = in[i] < 0 || (i < k.inputs.size() && k.inputs[i] == in[i]);
      if (keeps && splittable(n.outputs[0].dims[static_cast<size_t>(k.outputs[0])]) % t == 0) {
        extra[n.id] = {{k.name, t}};
        split[static_cast<size_t>(n.id)][0] = k.outputs[0];
        break;
      }
    }
  }
  // What runs between the tensor-parallel halves on the whole [b, s, h]
  // activation (dropout, residual sums, LayerNorm) runs on every one of
  // the t devices, as Megatron-LM runs it: each device on its copy of the
  // summed halves (the Reduce and the copies after it one all-reduce,
  // each device's copy read by its column-parallel half), or on one
  // (BetweenHalves). With sequence parallelism it splits the sequence
  // over them instead, each activation input split alike and each weight
  // copied.
  if (t > 1 && family == "transformer" && (sequence_parallel || between == BetweenHalves::kCopies))
    for (const Node& n : g.nodes()) {
      if (n.op->op_class != OpClass::kCompute || n.op->loss != LossKind::kNone || extra.count(n.id) || !n.op->kinds) continue;
      if (n.outputs.size() != 1 || n.outputs[0].rank() < 3) continue;
      if (std::any_of(n.inputs.begin(), n.inputs.end(), [&](const TensorRef& i) { return split[static_cast<size_t>(i.node)][static_cast<size_t>(i.output)] >= 0; }))
        continue;  // reads a tensor-parallel split
      if (!sequence_parallel) {
        extra[n.id] = {{kReplicasKind, t}};
        continue;
      }
      if (n.outputs[0].dims[1].size % t != 0) continue;
      for (const ParallelKind& k : n.op->kinds(n.attrs, g.input_types(n))) {
        if (k.outputs.empty() || k.outputs[0] != 1 || k.must_divide != 0) continue;
        bool fits = k.inputs.size() >= n.inputs.size();
        for (size_t i = 0; fits && i < n.inputs.size(); ++i) fits = k.inputs[i] == 1 || k.inputs[i] == ParallelKind::kCopy;
        if (fits) {
          extra[n.id] = {{k.name, t}};
          break;
        }
      }
    }
  return parallelize(g, [&, d](const Graph& gr, const Node& n) {
    NodePlan p = sample_plan(gr, n, d);
    if (auto e = extra.find(n.id); e != extra.end())
      for (const auto& [kind, degree] : e->second) p[kind] = p.count(kind) ? p[kind] * degree : degree;
    return p;
  });
}

std::vector<int64_t> expert_tensor_degrees(const Machine& machine, int64_t devices, const std::string& family) {
  std::vector<int64_t> out;
  const int64_t most = family == "recommendation" ? devices : std::gcd(machine.devices_per_node, devices);
  for (int64_t t = 1; t <= most; t *= 2)
    if (most % t == 0) out.push_back(t);
  if (out.back() != most) out.push_back(most);
  return out;
}

Graph best_data_parallel(const Graph& g, const MachineMapper& mapper) {
  const int64_t n = mapper.cost().devices();
  Graph whole = data_parallel(g, n);
  if (!has_unsampled(g)) return whole;
  Graph split = data_parallel(g, n, true);
  return mapper.time(split) < mapper.time(whole) ? split : whole;
}

std::optional<std::pair<int64_t, Graph>> tuned_expert_choice(const Graph& g, const MachineMapper& mapper, bool sequence_parallel,
                                                             bool chunk_of_transformer) {
  const Machine& m = mapper.cost().machine();
  const int64_t n = mapper.cost().devices();
  const std::string family = chunk_of_transformer && expert_family(g).empty() && transformer_end(g) ? "transformer" : expert_family(g);
  const std::vector<int64_t> degrees = expert_tensor_degrees(m, n, family);
  // Each degree built and mapped on its own (in parallel), compared after
  // in order: the same choice whatever the threads.
  std::vector<std::optional<Graph>> built(degrees.size());
  std::vector<Estimate> est(degrees.size());
  tbb::parallel_for(size_t{0}, degrees.size(), [&](size_t i) {
    built[i] = expert(g, m, n, degrees[i], sequence_parallel, chunk_of_transformer);
    if (built[i]) est[i] = mapper.map(*built[i]).estimate;
  });
  std::optional<std::pair<int64_t, Graph>> best;
  const double inf = std::numeric_limits<double>::infinity();
  double best_time = inf, best_memory = inf;
  for (size_t i = 0; i < degrees.size(); ++i) {
    if (!built[i]) return std::nullopt;
    const double time = est[i].feasible ? est[i].time : inf, memory = est[i].max_memory();
    if (!best || time < best_time || (time == inf && best_time == inf && memory < best_memory))
      best.emplace(degrees[i], std::move(*built[i])), best_time = time, best_memory = memory;
  }
  return best;
}

std::optional<Graph> tuned_expert(const Graph& g, const MachineMapper& mapper, bool sequence_parallel, bool chunk_of_transformer) {
  auto t = tuned_expert_choice(g, mapper, sequence_parallel, chunk_of_transformer);
  if (!t) return std::nullopt;
  return std::move(t->second);
}

int64_t tuned_expert_degree(const Graph& g, const MachineMapper& mapper) {
  const auto t = tuned_expert_choice(g, mapper, false);
  return t ? t->first : 0;
}

}  // namespace pcgx::search
