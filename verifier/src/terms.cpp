#include "terms.h"

#include "encoding.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/registry.h"

namespace pcgx::verify {

bool is_var(const z3::expr& e) { return Z3_get_ast_kind(e.ctx(), e) == Z3_VAR_AST; }
unsigned var_index(const z3::expr& e) { return Z3_get_index_value(e.ctx(), e); }

namespace {

// The SMT symbols split into two halves: sets a Split's sizes from its
// input's extent along the axis; false when that extent has no halves.
bool set_halves(Attributes& a, const ParallelTensorShape& s) {
  const int64_t axis = a.get_int("axis");
  const int64_t extent = axis < 0 ? s.replica : (axis < s.rank() ? s.dims[static_cast<size_t>(axis)].size : 0);
  if (extent < 2 || extent % 2) return false;
  a.set("sizes", IntList{extent / 2, extent / 2});
  return true;
}

void collect_vars(const z3::expr& e, std::set<unsigned>& out) {
  if (is_var(e)) {
    out.insert(var_index(e));
    return;
  }
  if (e.is_app())
    for (unsigned i = 0; i < e.num_args(); ++i) collect_vars(e.arg(i), out);
}

}  // namespace

std::vector<Axiom> parse_axioms(z3::context& ctx, const AxiomSet& set) {
  z3::expr_vector asserts(ctx);
  try {
    asserts = ctx.parse_string(set.text.c_str());
  } catch (const z3::exception& e) {
    throw Error(set.dir + ": cannot parse the axioms: " + e.msg());
  }
  if (asserts.size() != set.names.size())
    throw Error(set.dir + ": " + std::to_string(asserts.size()) + " assertions but " + std::to_string(set.names.size()) + " names");
  std::vector<Axiom> out;
  for (unsigned i = 0; i < asserts.size(); ++i) {
    z3::expr a = asserts[i];
    const std::string& name = set.names[i];
    std::vector<bool> tensor_var;
    z3::expr body = a;
    if (a.is_quantifier()) {
      if (!a.is_forall()) throw Error("axiom " + name + ": only universal quantifiers are supported");
      const unsigned n = Z3_get_quantifier_num_bound(ctx, a);
      tensor_var.resize(n);
      for (unsigned j = 0; j < n; ++j) {
        z3::sort s(ctx, Z3_get_quantifier_bound_sort(ctx, a, j));
        tensor_var[n - 1 - j] = !s.is_int();
      }
      body = a.body();
    }
    std::optional<z3::expr> pre;
    if (body.is_app() && body.decl().decl_kind() == Z3_OP_IMPLIES) {
      pre = body.arg(0);
      body = body.arg(1);
    }
    if (!(body.is_app() && body.decl().decl_kind() == Z3_OP_EQ))
      throw Error("axiom " + name + ": expected an equality, optionally under an implication");
    Axiom ax{name, tensor_var, pre, body.arg(0), body.arg(1), {false, false}};
    for (int side = 0; side < 2; ++side) {
      const z3::expr& pat = side == 0 ? ax.lhs : ax.rhs;
      const z3::expr& other = side == 0 ? ax.rhs : ax.lhs;
      if (is_var(pat)) continue;
      std::set<unsigned> bound, needed;
      collect_vars(pat, bound);
      collect_vars(other, needed);
      if (pre) collect_vars(*pre, needed);
      ax.usable[side] = std::includes(bound.begin(), bound.end(), needed.begin(), needed.end());
    }
    out.push_back(std::move(ax));
  }
  return out;
}

Terms::Terms(z3::context& ctx) : ctx_(ctx), tensor_(ctx.uninterpreted_sort("Tensor")) {}

std::vector<z3::expr> Terms::encode(const Graph& g, const std::vector<TensorRef>& outs) {
  std::map<std::pair<NodeId, int>, z3::expr> memo;
  std::function<z3::expr(TensorRef)> term = [&](TensorRef t) -> z3::expr {
    auto it = memo.find({t.node, t.output});
    if (it != memo.end()) return it->second;
    const Node& n = g.node(t.node);
    std::optional<z3::expr> e;
    if (n.op->op_class == OpClass::kSource) {
      inputs_[n.name] = n.outputs[0];
      if (n.attrs.has("index_range")) index_ranges_[n.name] = n.attrs.get_int("index_range");
      e = ctx_.constant(n.name.c_str(), tensor_);
    } else {
      const Encoding* enc = encoding_for(n.op->name, n.attrs, t.output, static_cast<int>(n.inputs.size()));
      if (!enc) {
        const bool any_row = std::any_of(encodings().begin(), encodings().end(), [&](const Encoding& r) { return n.op->name == r.op; });
        if (!any_row) throw MissingEncoding(n.op->name);
        throw Error("operator " + n.op->name + " with these attributes has no SMT encoding");
      }
      // The SMT forms see parts of an extent only as equal parts, one per
      // form (split0, split1 are the two halves).
      for (const AttrSpec& spec : n.op->attrs) {
        if (spec.role != AttrRole::kExtentParts) continue;
        const IntList& s = n.attrs.get_ints(spec.name);
        const bool equal = std::all_of(s.begin(), s.end(), [&](int64_t x) { return x == s[0]; });
        if (!equal || s.size() != n.op->smt.size())
          throw Error(n.op->name + " into other than " + std::to_string(n.op->smt.size()) + " equal parts has no SMT encoding");
      }
      z3::expr_vector args(ctx_);
      z3::sort_vector domain(ctx_);
      for (const TensorRef& in : n.inputs) {
        args.push_back(term(in));
        domain.push_back(tensor_);
      }
      for (int64_t v : encode_attrs(*enc, n.attrs, g.shape(n.inputs[0]).rank())) {
        args.push_back(ctx_.int_val(v));
        domain.push_back(ctx_.int_sort());
      }
      e = ctx_.function(enc->symbol.c_str(), domain, tensor_)(args);
    }
    memo.emplace(std::make_pair(t.node, t.output), *e);
    return *e;
  };
  std::vector<z3::expr> out;
  for (const TensorRef& t : outs) out.push_back(term(t));
  return out;
}

std::optional<ParallelTensorShape> Terms::shape(const z3::expr& t) {
  auto it = shapes_.find(t.id());
  if (it != shapes_.end()) return it->second.second;
  std::optional<ParallelTensorShape> result;
  if (t.is_app() && t.num_args() == 0) {
    auto in = inputs_.find(t.decl().name().str());
    if (in != inputs_.end()) result = in->second;
  } else if (t.is_app()) {
    const Encoding* enc = encoding_by_symbol(t.decl().name().str());
    if (enc && static_cast<int>(t.num_args()) == enc->tensors + int_args(*enc)) {
      std::vector<ParallelTensorShape> ins;
      std::vector<int64_t> ints;
      bool ok = true;
      for (int i = 0; i < enc->tensors && ok; ++i) {
        auto s = shape(t.arg(static_cast<unsigned>(i)));
        ok = s.has_value();
        if (ok) ins.push_back(*s);
      }
      for (unsigned k = static_cast<unsigned>(enc->tensors); k < t.num_args() && ok; ++k) {
        ok = t.arg(k).is_numeral();
        if (ok) ints.push_back(t.arg(k).get_numeral_int64());
      }
      // Degree inference reports an illegal operator by throwing, which
      // costs more than the rest of a check: its verdicts are kept by
      // operator, attributes and input shapes, which decide it.
      std::string key;
      if (ok) {
        key = enc->symbol;
        for (int64_t v : ints) key += ' ' + std::to_string(v);
        for (const auto& s : ins) key += ' ' + s.to_string();
      }
      if (auto known = ok ? op_shapes_.find(key) : op_shapes_.end(); known != op_shapes_.end()) {
        result = known->second;
      } else if (ok) {
        std::optional<Attributes> a = decode_attrs(*enc, ints);
        if (a && std::string(enc->op) == "Split" && !set_halves(*a, ins[0])) a.reset();
        if (a) {
          try {
            const OpDef& op = OpRegistry::global().get(enc->op);
            const auto outs = infer_output_shapes(op, normalize_attributes(op.attrs, *a, enc->op), ins, enc->op);
            result = outs.at(static_cast<size_t>(enc->output));
          } catch (const Error&) {
          }
        }
        op_shapes_.emplace(std::move(key), result);
      }
    }
  }
  shapes_.emplace(t.id(), std::make_pair(t, result));
  return result;
}

size_t Terms::size(const z3::expr& t) const {
  if (!t.is_app() || t.num_args() == 0 || !z3::eq(t.get_sort(), tensor_)) return 0;
  size_t n = 1;
  for (unsigned i = 0; i < t.num_args(); ++i) n += size(t.arg(i));
  return n;
}

bool Terms::match(const z3::expr& p, const z3::expr& t, Bindings& b) {
  deferred_.clear();
  std::function<bool(const z3::expr&, const z3::expr&)> go = [&](const z3::expr& pp, const z3::expr& tt) -> bool {
    if (is_var(pp)) {
      auto& slot = b[var_index(pp)];
      if (slot) return z3::eq(*slot, tt);
      slot = tt;
      return true;
    }
    if (pp.is_numeral()) return tt.is_numeral() && pp.get_numeral_int64() == tt.get_numeral_int64();
    if (pp.get_sort().is_int()) {
      if (!tt.is_numeral()) return false;
      deferred_.emplace_back(pp, tt.get_numeral_int64());
      return true;
    }
    if (!pp.is_app() || !tt.is_app() || !z3::eq(pp.decl(), tt.decl()) || pp.num_args() != tt.num_args()) return false;
    for (unsigned i = 0; i < pp.num_args(); ++i)
      if (!go(pp.arg(i), tt.arg(i))) return false;
    return true;
  };
  if (!go(p, t)) return false;
  const auto deferred = deferred_;
  for (const auto& [expr, value] : deferred) {
    const auto v = eval_int(expr, b);
    if (!v || *v != value) return false;
  }
  return true;
}

std::optional<z3::expr> Terms::instantiate(const z3::expr& e, const Bindings& b) {
  if (is_var(e)) return b[var_index(e)];
  if (e.is_numeral()) return e;
  if (e.get_sort().is_int()) {
    const auto v = eval_int(e, b);
    if (!v) return std::nullopt;
    return ctx_.int_val(*v);
  }
  if (!e.is_app() || e.num_args() == 0) return e;
  z3::expr_vector args(ctx_);
  for (unsigned i = 0; i < e.num_args(); ++i) {
    auto a = instantiate(e.arg(i), b);
    if (!a) return std::nullopt;
    args.push_back(*a);
  }
  return e.decl()(args);
}

std::optional<int64_t> Terms::eval_int(const z3::expr& e, const Bindings& b) {
  if (is_var(e)) {
    const auto& v = b[var_index(e)];
    if (!v || !v->is_numeral()) return std::nullopt;
    return v->get_numeral_int64();
  }
  if (e.is_numeral()) return e.get_numeral_int64();
  if (!e.is_app()) return std::nullopt;
  const auto kind = e.decl().decl_kind();
  auto arg = [&](unsigned i) { return eval_int(e.arg(i), b); };
  switch (kind) {
    case Z3_OP_ADD:
    case Z3_OP_MUL: {
      int64_t acc = kind == Z3_OP_ADD ? 0 : 1;
      for (unsigned i = 0; i < e.num_args(); ++i) {
        auto v = arg(i);
        if (!v) return std::nullopt;
        acc = kind == Z3_OP_ADD ? acc + *v : acc * *v;
      }
      return acc;
    }
    case Z3_OP_SUB: {
      auto acc = arg(0);
      for (unsigned i = 1; acc && i < e.num_args(); ++i) {
        auto v = arg(i);
        if (!v) return std::nullopt;
        *acc -= *v;
      }
      return acc;
    }
    case Z3_OP_UMINUS: {
      auto v = arg(0);
      if (!v) return std::nullopt;
      return -*v;
    }
    case Z3_OP_UNINTERPRETED: {
      const std::string f = e.decl().name().str();
      if (f == "perm_is_identity") {
        const auto a0 = arg(0);
        if (!a0) return std::nullopt;
        const auto p = perm_of(*a0);
        if (!p) return std::nullopt;
        for (size_t i = 0; i < p->size(); ++i)
          if ((*p)[i] != static_cast<int64_t>(i)) return int64_t{0};
        return int64_t{1};
      }
      if (f == "perm_at" || f == "perm_pos" || f == "perm_compose") {
        const auto a0 = arg(0), a1 = arg(1);
        if (!a0 || !a1) return std::nullopt;
        const auto p = perm_of(*a0);
        if (!p) return std::nullopt;
        const auto n = static_cast<int64_t>(p->size());
        if (f == "perm_at") {
          if (*a1 < 0 || *a1 >= n) return std::nullopt;
          return (*p)[static_cast<size_t>(*a1)];
        }
        if (f == "perm_pos") {
          if (*a1 == -1) return int64_t{-1};  // the replica axis stays where it is
          for (int64_t i = 0; i < n; ++i)
            if ((*p)[static_cast<size_t>(i)] == *a1) return i;
          return std::nullopt;
        }
        const auto q = perm_of(*a1);  // transpose by p, then by q
        if (!q || q->size() != p->size()) return std::nullopt;
        IntList c(p->size());
        for (size_t i = 0; i < c.size(); ++i) c[i] = (*p)[static_cast<size_t>((*q)[i])];
        return perm_code(c);
      }
      if (f == "shape_at") {
        const auto a0 = arg(0), a1 = arg(1);
        if (!a0 || !a1) return std::nullopt;
        const auto s = shape_of(*a0);
        if (!s || *a1 < 0 || *a1 >= static_cast<int64_t>(s->size())) return std::nullopt;
        return (*s)[static_cast<size_t>(*a1)];
      }
      if (f == "reshape_keeps") {
        // 1 when Reshape to shape code a1 can split dimension a2 of x: the
        // sizes before it agree (Reshape's degree inference).
        const auto t = instantiate(e.arg(0), b);
        const auto a1 = arg(1), a2 = arg(2);
        if (!t || !a1 || !a2) return std::nullopt;
        const auto s = shape(*t);
        const auto out = shape_of(*a1);
        if (!s || !out || *a2 < 0 || *a2 >= s->rank() || *a2 >= static_cast<int64_t>(out->size())) return std::nullopt;
        for (int64_t j = 0; j < *a2; ++j)
          if (s->dims[static_cast<size_t>(j)].size != (*out)[static_cast<size_t>(j)]) return int64_t{0};
        return int64_t{1};
      }
      if (f != "rep" && f != "deg" && f != "rank" && f != "extent" && f != "deg_after") return std::nullopt;
      const auto t = instantiate(e.arg(0), b);
      if (!t) return std::nullopt;
      const auto s = shape(*t);
      if (!s) return std::nullopt;
      if (f == "rep") return s->replica;
      if (f == "rank") return s->rank();
      const auto d = arg(1);
      if (!d) return std::nullopt;
      if (f == "extent" && *d == -1) return s->replica;
      if (f == "deg_after") {
        if (*d < -1 || *d >= s->rank()) return std::nullopt;  // -1: the replica axis, before every dimension
        int64_t p = 1;
        for (int j = static_cast<int>(*d) + 1; j < s->rank(); ++j) p *= s->dims[static_cast<size_t>(j)].degree;
        return p;
      }
      if (*d < 0 || *d >= s->rank()) return std::nullopt;
      return f == "deg" ? s->dims[static_cast<size_t>(*d)].degree : s->dims[static_cast<size_t>(*d)].size;
    }
    default:
      return std::nullopt;
  }
}

std::optional<bool> Terms::eval_bool(const z3::expr& e, const Bindings& b) {
  if (!e.is_app()) return std::nullopt;
  const auto kind = e.decl().decl_kind();
  switch (kind) {
    case Z3_OP_TRUE: return true;
    case Z3_OP_FALSE: return false;
    case Z3_OP_NOT: {
      auto v = eval_bool(e.arg(0), b);
      if (!v) return std::nullopt;
      return !*v;
    }
    case Z3_OP_AND:
    case Z3_OP_OR: {
      const bool is_and = kind == Z3_OP_AND;
      for (unsigned i = 0; i < e.num_args(); ++i) {
        auto v = eval_bool(e.arg(i), b);
        if (!v) return std::nullopt;
        if (*v != is_and) return !is_and;
      }
      return is_and;
    }
    case Z3_OP_IMPLIES: {
      auto p = eval_bool(e.arg(0), b), q = eval_bool(e.arg(1), b);
      if (!p || !q) return std::nullopt;
      return !*p || *q;
    }
    case Z3_OP_EQ:
    case Z3_OP_DISTINCT:
    case Z3_OP_LT:
    case Z3_OP_LE:
    case Z3_OP_GT:
    case Z3_OP_GE: {
      std::vector<int64_t> v;
      for (unsigned i = 0; i < e.num_args(); ++i) {
        auto x = eval_int(e.arg(i), b);
        if (!x) return std::nullopt;
        v.push_back(*x);
      }
      if (kind == Z3_OP_DISTINCT) {
        std::sort(v.begin(), v.end());
        return std::adjacent_find(v.begin(), v.end()) == v.end();
      }
      if (v.size() != 2) return std::nullopt;
      switch (kind) {
        case Z3_OP_EQ: return v[0] == v[1];
        case Z3_OP_LT: return v[0] < v[1];
        case Z3_OP_LE: return v[0] <= v[1];
        case Z3_OP_GT: return v[0] > v[1];
        default: return v[0] >= v[1];
      }
    }
    default:
      return std::nullopt;
  }
}

Graph Terms::to_graph(const std::vector<z3::expr>& terms, std::vector<TensorRef>& outs) {
  Graph g;
  std::unordered_map<unsigned, NodeId> nodes;  // per term (Split: the Split node)
  std::function<TensorRef(const z3::expr&)> build = [&](const z3::expr& t) -> TensorRef {
    const Encoding* enc = t.num_args() ? encoding_by_symbol(t.decl().name().str()) : nullptr;
    const unsigned key = enc && std::string(enc->op) == "Split" ? t.arg(0).id() * 2 + 1 : t.id() * 2;
    auto it = nodes.find(key);
    const int output = enc ? enc->output : 0;
    if (it != nodes.end()) return {it->second, output};
    NodeId id;
    if (!enc) {
      const std::string name = t.decl().name().str();
      const auto s = inputs_.at(name);
      IntList degrees;
      for (const auto& d : s.dims) degrees.push_back(d.degree);
      Attributes a{{"shape", s.logical_shape()}, {"degrees", degrees}, {"replica", s.replica}, {"dtype", std::string(to_string(s.dtype))}};
      if (auto r = index_ranges_.find(name); r != index_ranges_.end()) a.set("index_range", r->second);
      id = g.add("Input", a, {}, name);
    } else {
      std::vector<TensorRef> ins;
      for (int i = 0; i < enc->tensors; ++i) ins.push_back(build(t.arg(static_cast<unsigned>(i))));
      std::vector<int64_t> ints;
      for (unsigned k = static_cast<unsigned>(enc->tensors); k < t.num_args(); ++k) ints.push_back(t.arg(k).get_numeral_int64());
      Attributes a = decode_attrs(*enc, ints).value();
      if (std::string(enc->op) == "Split") set_halves(a, shape(t.arg(0)).value());
      id = g.add(enc->op, a, ins);
    }
    nodes.emplace(key, id);
    return {id, output};
  };
  for (const z3::expr& t : terms) outs.push_back(build(t));
  for (const TensorRef& t : outs) g.add_output(t);
  return g;
}

}  // namespace pcgx::verify
