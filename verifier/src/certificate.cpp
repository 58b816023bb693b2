// A strategy's certificate: local claims built from its PCG and proved
// against the axioms (see certificate.h).
#include "pcgx/verifier/certificate.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "pcgx/pcg/degree_inference.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"

namespace pcgx::verify {

std::string_view to_string(ClaimKind k) { return k == ClaimKind::kOperator ? "operator" : "conversion"; }

namespace {

// Moves or joins shards (a parallel operator, or a compute operator at
// shard level): part of a conversion.
bool moves(const Node& n) { return n.op->is_shard_level(n.attrs); }
// Pipeline and Batch say when a micro-slice is computed, not what.
bool timing_only(const Node& n) { return n.op->data_move == DataMove::kPipeline || n.op->data_move == DataMove::kBatch; }

ParallelTensorShape unpipelined(ParallelTensorShape s) {
  for (ParallelDim& d : s.dims) d.pipeline = 1;
  return s;
}

// The source a value comes from through conversions, if any (an index
// input's range is part of what its axioms may assume).
const Node* source_of(const Graph& g, TensorRef t) {
  for (;;) {
    const Node& n = g.node(t.node);
    if (n.op->op_class == OpClass::kSource) return &n;
    if (!moves(n) || n.inputs.size() != 1) return nullptr;
    t = n.inputs[0];
  }
}

// An Input holding the logical value of a tensor laid out as `s`.
TensorRef logical_input(Graph& g, const ParallelTensorShape& s, const Node* source, const std::string& name) {
  Attributes a{{"shape", IntList(s.logical_shape())}, {"dtype", std::string(to_string(s.dtype))}};
  if (source && source->attrs.has("index_range") && source->attrs.get_int("index_range") > 0)
    a.set("index_range", source->attrs.get_int("index_range"));
  return {g.add("Input", a, {}, name), 0};
}

// A logical value laid out as `s`, its replica slots copies: each split
// dimension repartitioned, then the slots replicated.
TensorRef laid_out(Graph& g, TensorRef t, const ParallelTensorShape& s) {
  for (int64_t d = 0; d < s.rank(); ++d)
    if (const int64_t k = s.dims[static_cast<size_t>(d)].degree; k > 1) t = {g.add("Repartition", {{"dim", d}, {"degree", k}}, {t}), 0};
  if (s.replica > 1) t = {g.add("Replicate", {{"degree", s.replica}}, {t}), 0};
  return t;
}

ParallelTensorShape at_replica_one(ParallelTensorShape s) {
  s.replica = 1;
  return s;
}

std::string label(const Node& n) { return n.name.empty() ? "node " + std::to_string(n.id) : n.name; }

// An input a plan lays out as summands (the bias of a Linear split along
// its reduction: search/baselines.h): k slots of x/k, made by an unnamed
// ScalarMul(1/k) (the plan's, not the model's) and a Replicate(k) after
// it. The claim of the operator reading it states them from x itself, so
// the scaling belongs to that claim, not to the model's operators.
struct Summands {
  const Node* scale = nullptr;  // the ScalarMul(1/k)
  std::vector<TensorRef> after;  // the parallel operators from it to the reader, in order
};

std::optional<Summands> summands_of(const Graph& g, TensorRef read) {
  std::vector<TensorRef> chain;
  while (moves(g.node(read.node))) {
    const Node& m = g.node(read.node);
    if (m.inputs.size() != 1) return std::nullopt;
    if (!timing_only(m)) chain.push_back(read);
    read = m.inputs[0];
  }
  const Node& scale = g.node(read.node);
  if (!scale.name.empty() || !scale.op->elementwise || scale.inputs.size() != 1 || !scale.attrs.has("scalar") || chain.empty())
    return std::nullopt;
  const double s = scale.attrs.get_float("scalar");
  const Node& first = g.node(chain.back().node);
  if (!(s > 0) || first.op->data_move != DataMove::kReplicate) return std::nullopt;
  const int64_t k = first.attrs.get_int("degree");
  if (k < 2 || s * static_cast<double>(k) != 1.0) return std::nullopt;
  std::reverse(chain.begin(), chain.end());
  return Summands{&scale, std::move(chain)};
}

// The Reduces summing `replica` slots of n's partial sums, innermost
// first: one per kind of its task grid giving partial sums (the last such
// kind's shares sit in consecutive slots), then the slots left, so that
// each step is one kind's parallel form (a loss split by samples and by
// classes reduces its classes' shares, then its samples').
std::vector<int64_t> reduce_steps(const Graph& g, const Node& n, int64_t replica) {
  const TaskGrid grid = task_grid(g, n);
  const std::vector<ParallelKind> kinds = n.op->kinds ? n.op->kinds(n.attrs, g.input_types(n)) : std::vector<ParallelKind>{};
  std::vector<int64_t> steps;
  int64_t rest = replica;
  for (size_t k = grid.names.size(); k-- > 0;) {
    const int64_t e = grid.extents[k];
    const auto kind = std::find_if(kinds.begin(), kinds.end(), [&](const ParallelKind& x) { return x.name == grid.names[k]; });
    const bool partial = kind != kinds.end() && !kind->outputs.empty() && kind->outputs[0] == ParallelKind::kPartial;
    if (e > 1 && partial && rest % e == 0) steps.push_back(e), rest /= e;
  }
  if (rest > 1) steps.push_back(rest);
  return steps;
}

// op(conv_in(u)) = conv_out(op(u)); with `partial`, Reduces after each
// output whose replica slots (r of them) hold partial sums (reduce_steps).
// An input laid out as summands is stated from the value they sum to.
Rule operator_claim(const Graph& g, const Node& n, bool partial) {
  Rule r{"", Graph("claim"), Graph("claim"), {}, std::nullopt};
  std::vector<TensorRef> su, tu;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    if (const auto sum = summands_of(g, n.inputs[i])) {
      const TensorRef from = sum->scale->inputs[0];
      const ParallelTensorShape s = unpipelined(g.shape(from));
      const Node* src = source_of(g, from);
      su.push_back(logical_input(r.source, s, src, name));
      TensorRef t = laid_out(r.target, logical_input(r.target, s, src, name), s);
      t = {r.target.add(*sum->scale->op, sum->scale->attrs, {t}), 0};
      for (const TensorRef& c : sum->after) t = {r.target.add(*g.node(c.node).op, g.node(c.node).attrs, {t}), c.output};
      tu.push_back(t);
      continue;
    }
    const ParallelTensorShape s = unpipelined(g.shape(n.inputs[i]));
    const Node* src = source_of(g, n.inputs[i]);
    su.push_back(logical_input(r.source, s, src, name));
    tu.push_back(laid_out(r.target, logical_input(r.target, s, src, name), s));
  }
  const NodeId sn = r.source.add(*n.op, n.attrs, su, "op"), tn = r.target.add(*n.op, n.attrs, tu, "op");
  for (int32_t j = 0; j < static_cast<int32_t>(n.outputs.size()); ++j) {
    const ParallelTensorShape o = unpipelined(n.outputs[static_cast<size_t>(j)]);
    TensorRef t{tn, j};
    if (partial && o.replica > 1) {
      for (const int64_t k : reduce_steps(g, n, o.replica)) t = {r.target.add("Reduce", {{"degree", k}}, {t}), 0};
      r.source.add_output(laid_out(r.source, {sn, j}, at_replica_one(o)));
    } else {
      r.source.add_output(laid_out(r.source, {sn, j}, o));
    }
    r.target.add_output(t);
    r.output_map.emplace_back(j, j);
  }
  return r;
}

// The plan's summand scalings (summands_of) of every reader: part of the
// reader's claim, not operators of their own.
std::vector<char> summand_scalings(const Graph& g) {
  std::vector<char> out(g.size(), 0);
  for (const Node& n : g.nodes())
    if (n.op->op_class != OpClass::kSource && !moves(n))
      for (const TensorRef& t : n.inputs)
        if (const auto sum = summands_of(g, t)) out[static_cast<size_t>(sum->scale->id)] = 1;
  return out;
}

// The conversion reading `root` (a compute operator's output or a source)
// through `chain` (the tensors read along it, in order: each a parallel
// operator's output, timing-only ones left out) into a reader laid out as
// `wanted`: C(conv_root(u)) = conv_wanted(u). From partial sums (r slots)
// the chain's first operator must sum all r of them.
std::optional<Rule> conversion_claim(const Graph& g, TensorRef root, bool partial, const std::vector<TensorRef>& chain,
                                     const ParallelTensorShape& wanted, std::string& why) {
  Rule r{"", Graph("claim"), Graph("claim"), {}, std::nullopt};
  const ParallelTensorShape have = unpipelined(g.shape(root));
  const Node* src = source_of(g, root);
  r.source.add_output(laid_out(r.source, logical_input(r.source, have, src, "x"), unpipelined(wanted)));
  size_t first = 0;
  TensorRef t = logical_input(r.target, have, src, "x");
  if (partial && have.replica > 1) {
    const Node* sum = chain.empty() ? nullptr : &g.node(chain.front().node);
    const bool sums = sum && (sum->op->data_move == DataMove::kReduce || sum->op->data_move == DataMove::kAllReduce);
    if (!sums || sum->attrs.get_int("degree") != have.replica) {
      why = "reads the partial sums of its input (" + std::to_string(have.replica) + " slots) without summing all of them first";
      return std::nullopt;
    }
    // What the sum gives: the value laid out at one slot, copied again by an AllReduce.
    t = laid_out(r.target, t, at_replica_one(have));
    if (sum->op->data_move == DataMove::kAllReduce) t = {r.target.add("Replicate", {{"degree", have.replica}}, {t}), 0};
    first = 1;
  } else {
    t = laid_out(r.target, t, have);
  }
  for (size_t k = first; k < chain.size(); ++k) {
    const Node& m = g.node(chain[k].node);
    t = {r.target.add(*m.op, m.attrs, {t}), chain[k].output};
  }
  r.target.add_output(t);
  r.output_map.emplace_back(0, 0);
  return r;
}

// A claim's identity: its two sides, written out.
std::string key_of(const Rule& r) { return graph_to_json(r.source, -1) + "\n" + graph_to_json(r.target, -1); }

std::string inputs_text(const Graph& g, const Node& n) {
  std::string s;
  for (const TensorRef& i : n.inputs) s += (s.empty() ? "" : " x ") + unpipelined(g.shape(i)).to_string();
  s += " -> ";
  for (size_t j = 0; j < n.outputs.size(); ++j) s += (j ? ", " : "") + unpipelined(n.outputs[j]).to_string();
  return s;
}

}  // namespace

Certificate certify(const Graph& strategy, const AxiomSet& axioms, const ProverOptions& options, const CertifyProgress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const Graph& g = strategy;
  Certificate cert;
  // Every axiom: a claim is one operator at the strategy's shapes, and its
  // proof may pass through another operator's (MatMul through Linear's).
  Prover prover(axioms, options);
  // Proofs by claim (identical claims once), and the claims relied on.
  std::map<std::string, Proof> proofs;
  std::map<std::string, size_t> relied;  // claim key -> index in cert.claims
  auto proof_of = [&](const Rule& rule, const std::string& key) -> const Proof& {
    auto it = proofs.find(key);
    if (it == proofs.end()) {
      it = proofs.emplace(key, prover.prove(rule)).first;
      if (progress) progress(proofs.size());
    }
    return it->second;
  };
  auto rely_on = [&](ClaimKind kind, Rule rule, const std::string& key, std::string what, const std::string& node, bool partial) {
    auto it = relied.find(key);
    if (it == relied.end()) {
      const Proof proof = proof_of(rule, key);
      CertifiedClaim c{kind, std::move(what), {}, partial, std::move(rule), proof};
      c.rule.id = std::string(to_string(kind)) + "-" + std::to_string(cert.claims.size() + 1);
      if (!c.proved())
        cert.unverified.push_back(c.rule.id + " (" + c.what + "): " + (c.proof.reason.empty() ? std::string(to_string(c.proof.result)) : c.proof.reason));
      cert.claims.push_back(std::move(c));
      it = relied.emplace(key, cert.claims.size() - 1).first;
    }
    cert.claims[it->second].nodes.push_back(node);
    return cert.claims[it->second].proved();
  };
  // What a compute output's replica slots hold, as its proved claim says;
  // unknown where its claim is not proved (what reads it is then not
  // claimed either: that claim is already named). A source's: copies.
  enum class Form : uint8_t { kCopies, kPartial, kUnknown };
  std::map<TensorRef, Form> form;
  // The edge from a producer to a reader (an operator's input, or a graph
  // output) laid out as `wanted`: the chain of parallel operators between
  // them claimed as a conversion, or, read as it is, copies required.
  auto claim_edge = [&](TensorRef read, const ParallelTensorShape& wanted, const std::string& where, const std::string& node) {
    std::vector<TensorRef> chain;
    TensorRef t = read;
    while (moves(g.node(t.node))) {
      const Node& m = g.node(t.node);
      if (m.inputs.size() != 1) {
        cert.unverified.push_back(where + ": its conversion joins several producers, which no claim states");
        return;
      }
      if (!timing_only(m)) chain.push_back(t);
      t = m.inputs[0];
    }
    std::reverse(chain.begin(), chain.end());
    const auto f = form.find(t);
    const Form from = f == form.end() ? Form::kCopies : f->second;
    if (from == Form::kUnknown) return;
    if (chain.empty()) {
      if (from == Form::kPartial)
        cert.unverified.push_back(where + ": reads the partial sums of " + label(g.node(t.node)) + " without summing them");
      return;
    }
    ++cert.conversions;
    std::string why;
    std::optional<Rule> rule;
    try {
      rule = conversion_claim(g, t, from == Form::kPartial, chain, wanted, why);
    } catch (const Error& e) {
      why = std::string("its conversion is not a legal claim: ") + e.what();
    }
    if (!rule) {
      cert.unverified.push_back(where + ": " + why);
      return;
    }
    std::string what = where + ": " + unpipelined(g.shape(t)).to_string() + " -> " + unpipelined(wanted).to_string();
    const std::string key = key_of(*rule);
    rely_on(ClaimKind::kConversion, std::move(*rule), key, std::move(what), node, false);
  };
  const std::vector<char> scaling = summand_scalings(g);
  for (const Node& n : g.nodes()) {
    if (n.op->op_class == OpClass::kSource || moves(n) || scaling[static_cast<size_t>(n.id)]) continue;
    ++cert.operators;
    // The operator: its output slots copies, else partial sums.
    const std::string what = n.op->name + " '" + label(n) + "': " + inputs_text(g, n);
    bool replicated = false;
    for (const ParallelTensorShape& o : n.outputs) replicated = replicated || o.replica > 1;
    std::optional<Rule> chosen;
    std::string key, built_error;
    bool partial = false;
    for (const bool p : {false, true}) {
      if (p && !replicated) break;
      try {
        Rule r = operator_claim(g, n, p);
        std::string k = key_of(r);
        const bool ok = proof_of(r, k).result == Result::kUnsat;
        if (!chosen || ok) chosen = std::move(r), key = std::move(k), partial = p;
        if (ok) break;
      } catch (const Error& e) {
        if (!chosen) built_error = e.what();
      }
    }
    bool proved = false;
    if (chosen) proved = rely_on(ClaimKind::kOperator, std::move(*chosen), key, what + (partial ? " (partial sums)" : ""), label(n), partial);
    else cert.unverified.push_back(what + ": not a legal claim: " + built_error);
    for (int32_t j = 0; j < static_cast<int32_t>(n.outputs.size()); ++j)
      form[{n.id, j}] = !proved ? Form::kUnknown : partial && n.outputs[static_cast<size_t>(j)].replica > 1 ? Form::kPartial : Form::kCopies;
    if (!proved) continue;  // its inputs' conversions mean something only beside its claim
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      // Summands are claimed from what their scaling reads.
      const auto sum = summands_of(g, n.inputs[i]);
      const TensorRef read = sum ? sum->scale->inputs[0] : n.inputs[i];
      claim_edge(read, g.shape(read), n.op->name + " '" + label(n) + "' input " + std::to_string(i), label(n));
    }
  }
  // The graph's outputs: copies of the model's values in the layout they
  // have, or partial sums of a loss, which the trainer sums.
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const TensorRef o = g.outputs()[k];
    const Node& producer = g.node(o.node);
    const auto f = form.find(o);
    if (!moves(producer) && f != form.end() && f->second == Form::kPartial && producer.op->loss != LossKind::kNone) continue;
    claim_edge(o, g.shape(o), "output " + std::to_string(k), "output " + std::to_string(k));
  }
  cert.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return cert;
}

std::optional<std::string> same_operators(const Graph& strategy, const Graph& model) {
  // The plan's summand scalings are part of their readers' claims, so they
  // are read through here as the certificate reads them.
  const std::vector<char> scaling = summand_scalings(strategy), none(model.size(), 0);
  auto computes = [](const Graph& g, const std::vector<char>& skip) {
    std::map<std::string, const Node*> out;
    for (const Node& n : g.nodes())
      if (n.op->op_class != OpClass::kSource && !moves(n) && !skip[static_cast<size_t>(n.id)]) out.emplace(label(n), &n);
    return out;
  };
  // What an input is read from, through the parallel operators before it.
  auto producer = [](const Graph& g, TensorRef t, const std::vector<char>& skip) {
    while ((moves(g.node(t.node)) || skip[static_cast<size_t>(t.node)]) && g.node(t.node).inputs.size() == 1) t = g.node(t.node).inputs[0];
    return label(g.node(t.node)) + (t.output > 0 ? ":" + std::to_string(t.output) : "");
  };
  const auto mine = computes(strategy, scaling), theirs = computes(model, none);
  for (const auto& [name, n] : mine) {
    const auto it = theirs.find(name);
    if (it == theirs.end()) return "the strategy's " + n->op->name + " '" + name + "' is no operator of the model";
    const Node& m = *it->second;
    if (m.op != n->op || !(m.attrs == n->attrs))
      return "'" + name + "' is a " + m.op->name + " in the model and runs as a " + n->op->name + " with other attributes in the strategy";
    if (m.inputs.size() != n->inputs.size()) return "'" + name + "' reads " + std::to_string(n->inputs.size()) + " inputs, the model's " + std::to_string(m.inputs.size());
    for (size_t i = 0; i < m.inputs.size(); ++i)
      if (producer(strategy, n->inputs[i], scaling) != producer(model, m.inputs[i], none))
        return "'" + name + "' input " + std::to_string(i) + " reads '" + producer(strategy, n->inputs[i], scaling) + "', in the model '" +
               producer(model, m.inputs[i], none) + "'";
  }
  for (const auto& [name, m] : theirs)
    if (!mine.count(name)) return "the model's " + m->op->name + " '" + name + "' is not in the strategy";
  return std::nullopt;
}

}  // namespace pcgx::verify
