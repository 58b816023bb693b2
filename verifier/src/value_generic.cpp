#include "value_generic.h"

#include <algorithm>
#include <map>
#include <set>

#include "encoding.h"
#include "pcgx/pcg/registry.h"

namespace pcgx::verify {

std::vector<std::string> value_attributes(const Rule& rule) {
  std::set<std::string> out;
  for (const Graph* g : {&rule.source, &rule.target})
    for (const Node& n : g->nodes())
      for (const AttrSpec& spec : n.op->attrs)
        if (spec.role == AttrRole::kValue && n.attrs.has(spec.name)) out.insert(n.op->name + "." + spec.name);
  return {out.begin(), out.end()};
}

namespace {

using Positions = std::set<std::pair<std::string, unsigned>>;  // (symbol, argument index)

// The SMT argument positions that carry `attr` of `op`, in every form.
Positions positions_of(const std::string& op, const std::string& attr) {
  Positions out;
  for (const Encoding& e : encodings()) {
    if (e.op != op) continue;
    auto at = static_cast<unsigned>(e.tensors);
    for (const SmtArg& a : e.attrs) {
      const unsigned width = a.code == SmtCode::kFraction ? 2 : 1;
      // A fraction's numerator and denominator are two arguments whose
      // pairing an axiom could break (one's numerator as another's
      // denominator) without the check below seeing it: no claim.
      if (a.attr == attr && width > 1) return {};
      if (a.attr == attr) out.insert({e.symbol, at});
      at += width;
    }
  }
  return out;
}

// Walks `e`, noting per variable whether it occurs at one of `positions`
// (`inside`) or anywhere else (`outside`); `ok` turns false when a position
// holds anything but a variable.
void walk(const z3::expr& e, const Positions& positions, std::set<unsigned>& inside, std::set<unsigned>& outside,
          bool& ok) {
  if (is_var(e)) {
    outside.insert(var_index(e));
    return;
  }
  if (!e.is_app()) return;
  const std::string symbol = e.decl().name().str();
  for (unsigned i = 0; i < e.num_args(); ++i) {
    const z3::expr arg = e.arg(i);
    if (positions.count({symbol, i})) {
      if (is_var(arg)) {
        inside.insert(var_index(arg));
      } else {
        ok = false;  // a literal value (dropout at rate 0): the axiom holds for that value only
      }
      continue;
    }
    walk(arg, positions, inside, outside, ok);
  }
}

}  // namespace

bool passes_through(const Axiom& axiom, const std::string& op_attr) {
  const size_t dot = op_attr.find('.');
  if (dot == std::string::npos) return false;
  const Positions positions = positions_of(op_attr.substr(0, dot), op_attr.substr(dot + 1));
  if (positions.empty()) return false;  // no SMT argument carries it: nothing is known of it
  std::set<unsigned> inside, outside;
  bool ok = true;
  walk(axiom.lhs, positions, inside, outside, ok);
  walk(axiom.rhs, positions, inside, outside, ok);
  if (axiom.pre) walk(*axiom.pre, positions, inside, outside, ok);
  if (!ok) return false;
  return std::none_of(inside.begin(), inside.end(), [&](unsigned v) { return outside.count(v) != 0; });
}

}  // namespace pcgx::verify
