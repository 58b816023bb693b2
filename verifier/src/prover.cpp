#include <algorithm>
#include <chrono>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <optional>

#include "pcgx/pcg/error.h"
#include "terms.h"
#include "value_generic.h"

namespace pcgx::verify {

struct Prover::Impl {
  z3::context ctx;
  Terms terms{ctx};
  std::vector<Axiom> axioms;
  ProverOptions options;
  // Patterns by head symbol: (axiom, side) pairs worth matching against a term.
  std::unordered_map<std::string, std::vector<std::pair<size_t, int>>> by_head;
  // One solver for every rule, each in its own push/pop scope: making a
  // solver per rule (its parameters parsed, its engines set up) was most
  // of a proof's time.
  std::optional<z3::solver> solver;
};

Prover::Prover(const AxiomSet& set, ProverOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->axioms = parse_axioms(impl_->ctx, set);
  impl_->options = options;
  for (size_t a = 0; a < impl_->axioms.size(); ++a)
    for (int side = 0; side < 2; ++side)
      if (impl_->axioms[a].usable[side]) {
        const z3::expr& pat = side == 0 ? impl_->axioms[a].lhs : impl_->axioms[a].rhs;
        impl_->by_head[pat.decl().name().str()].emplace_back(a, side);
      }
}

Prover::~Prover() = default;

Proof Prover::prove(const Rule& rule) { return prove_with(rule, {}); }

std::vector<std::string> Prover::value_generic(const Rule& rule, const std::vector<std::string>& proof_axioms) const {
  std::vector<std::string> out;
  for (const std::string& attr : value_attributes(rule)) {
    bool all = !proof_axioms.empty();
    for (const Axiom& ax : impl_->axioms)
      if (all && std::find(proof_axioms.begin(), proof_axioms.end(), ax.name) != proof_axioms.end())
        all = passes_through(ax, attr);
    if (all) out.push_back(attr);
  }
  return out;
}

Proof Prover::prove_with(const Rule& rule, const std::vector<std::string>& only) {
  const std::set<std::string> allowed(only.begin(), only.end());
  const auto start = std::chrono::steady_clock::now();
  Proof proof;
  auto done = [&](Result r, std::string reason) {
    proof.result = r;
    proof.reason = std::move(reason);
    proof.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return proof;
  };
  Impl& m = *impl_;
  Terms& T = m.terms;
  T.clear_inputs();
  std::vector<z3::expr> src, dst;
  try {
    std::vector<TensorRef> so, to;
    for (const auto& [i, j] : rule.output_map) {
      so.push_back(rule.source.outputs().at(static_cast<size_t>(i)));
      to.push_back(rule.target.outputs().at(static_cast<size_t>(j)));
    }
    src = T.encode(rule.source, so);
    dst = T.encode(rule.target, to);
  } catch (const MissingEncoding& e) {
    proof.unencoded = e.op;
    return done(Result::kError, e.what());
  } catch (const Error& e) {
    return done(Result::kError, e.what());
  }
  if (src.empty()) return done(Result::kError, "the rule maps no outputs");
  // Shapes and degrees must agree before any proof is attempted.
  for (size_t k = 0; k < src.size(); ++k) {
    const auto a = T.shape(src[k]), b = T.shape(dst[k]);
    if (!a || !b) return done(Result::kError, "output " + std::to_string(k) + " is not a legal PCG");
    if (!(*a == *b))
      return done(Result::kSat, "output " + std::to_string(k) + ": parallel shapes differ: " + a->to_string() + " vs " + b->to_string());
  }

  // Saturation: admit axiom instances reachable from the rule's terms. A
  // term equal to another by an instance also lends its parents a congruent
  // copy (the parent with the other term in its place), so that axioms can
  // match modulo the equalities found so far, as on an e-graph.
  std::vector<z3::expr> pool;
  std::unordered_set<unsigned> seen;
  std::unordered_map<unsigned, std::vector<std::pair<size_t, unsigned>>> parents;  // arg id -> (pool index, arg position)
  size_t limit = 0;
  std::function<void(const z3::expr&)> add = [&](const z3::expr& t) {
    if (!seen.insert(t.id()).second) return;
    const size_t idx = pool.size();
    pool.push_back(t);
    for (unsigned i = 0; i < t.num_args(); ++i)
      if (z3::eq(t.arg(i).get_sort(), T.tensor())) {
        parents[t.arg(i).id()].emplace_back(idx, i);
        add(t.arg(i));
      }
  };
  for (const auto& t : src) add(t), limit = std::max(limit, T.size(t));
  for (const auto& t : dst) add(t), limit = std::max(limit, T.size(t));
  limit += 2;
  struct Instance {
    size_t axiom;
    z3::expr lhs, rhs;
  };
  std::vector<Instance> instances;
  std::set<std::tuple<size_t, unsigned, unsigned>> have;
  auto lift = [&](const z3::expr& from, const z3::expr& to) {
    auto it = parents.find(from.id());
    if (it == parents.end()) return;
    const auto users = it->second;
    for (const auto& [idx, pos] : users) {
      if (pool.size() >= m.options.max_terms) return;
      const z3::expr parent = pool[idx];
      z3::expr_vector args(m.ctx);
      for (unsigned i = 0; i < parent.num_args(); ++i) args.push_back(i == pos ? to : parent.arg(i));
      const z3::expr copy = parent.decl()(args);
      if (T.size(copy) <= limit && T.shape(copy)) add(copy);
    }
  };
  for (int round = 0; round < m.options.rounds; ++round) {
    const size_t n = pool.size();
    const size_t first_instance = instances.size();
    for (size_t i = 0; i < n; ++i) {
      const z3::expr t = pool[i];
      if (!t.is_app()) continue;
      const auto heads = m.by_head.find(t.decl().name().str());
      if (heads == m.by_head.end()) continue;
      for (const auto& [a, side] : heads->second) {
        const Axiom& ax = m.axioms[a];
        if (!allowed.empty() && !allowed.count(ax.name)) continue;
        {
          Bindings b(ax.tensor_var.size());
          if (!T.match(side == 0 ? ax.lhs : ax.rhs, t, b)) continue;
          if (ax.pre) {
            const auto ok = T.eval_bool(*ax.pre, b);
            if (!ok || !*ok) continue;
          }
          const auto other = T.instantiate(side == 0 ? ax.rhs : ax.lhs, b);
          if (!other) continue;
          const auto s1 = T.shape(t), s2 = T.shape(*other);
          if (!s1 || !s2 || !(*s1 == *s2)) continue;
          if (!have.emplace(a, t.id(), other->id()).second) continue;
          instances.push_back({a, t, *other});
          if (pool.size() < m.options.max_terms && T.size(*other) <= limit) add(*other);
        }
      }
    }
    for (size_t k = first_instance; k < instances.size(); ++k) {
      const z3::expr l = instances[k].lhs, r = instances[k].rhs;
      lift(l, r);
      lift(r, l);
    }
    if (pool.size() == n) break;
  }
  proof.instances = instances.size();

  // Z3: do the instances imply every output equality?
  try {
    if (!m.solver) {
      m.solver.emplace(m.ctx);
      z3::params p(m.ctx);
      p.set("timeout", m.options.timeout_ms);
      m.solver->set(p);
    }
    z3::solver& s = *m.solver;
    struct Scope {
      std::optional<z3::solver>& owner;
      explicit Scope(std::optional<z3::solver>& o) : owner(o) { owner->push(); }
      ~Scope() {
        try {
          owner->pop();
        } catch (...) {
          owner.reset();  // the next rule starts a fresh solver
        }
      }
    } scope(m.solver);
    z3::expr_vector assumptions(m.ctx);
    for (size_t k = 0; k < instances.size(); ++k) {
      z3::expr lit = m.ctx.bool_const(("i" + std::to_string(k)).c_str());
      s.add(z3::implies(lit, instances[k].lhs == instances[k].rhs));
      assumptions.push_back(lit);
    }
    z3::expr differ = m.ctx.bool_val(false);
    for (size_t k = 0; k < src.size(); ++k) differ = differ || (src[k] != dst[k]);
    s.add(differ);
    switch (s.check(assumptions)) {
      case z3::unsat: {
        std::set<std::string> used;
        const z3::expr_vector core = s.unsat_core();
        for (unsigned k = 0; k < core.size(); ++k)
          used.insert(m.axioms[instances[std::stoul(core[k].decl().name().str().substr(1))].axiom].name);
        proof.axioms.assign(used.begin(), used.end());
        std::set<std::string> any;
        for (const Instance& in : instances) any.insert(m.axioms[in.axiom].name);
        proof.instantiated.assign(any.begin(), any.end());
        return done(Result::kUnsat, "");
      }
      case z3::sat:
        return done(Result::kSat, "the axioms do not imply it within " + std::to_string(m.options.rounds) +
                                      " instantiation rounds (" + std::to_string(instances.size()) + " instances)");
      default:
        return done(Result::kTimeout, "Z3 gave no answer within " + std::to_string(m.options.timeout_ms) + " ms");
    }
  } catch (const z3::exception& e) {
    m.solver.reset();  // whatever state the failure left, the next rule starts afresh
    return done(Result::kError, std::string("Z3: ") + e.msg());
  }
}

}  // namespace pcgx::verify
