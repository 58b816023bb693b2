#include "encoding.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/registry.h"

namespace pcgx::verify {
namespace {

const AttrSpec& spec_of(const Encoding& e, const std::string& name) {
  const OpDef& op = OpRegistry::global().get(e.op);
  for (const AttrSpec& s : op.attrs)
    if (s.name == name) return s;
  throw Error(e.op + " has no attribute " + name);
}

// d == num / den exactly, with den a power of two (every finite double is):
// a double's 53-bit significand over up to 2^62, so that a scale such as
// attention's 1/sqrt(d) is encoded exactly, not only small fractions.
std::pair<int64_t, int64_t> exact_fraction(double d) {
  int64_t den = 1;
  while (d != std::floor(d) && den < (int64_t{1} << 62)) d *= 2, den *= 2;
  if (d != std::floor(d) || std::fabs(d) > 9007199254740992.0) throw Error("scalar has no exact fraction of 64-bit integers");
  auto num = static_cast<int64_t>(d);
  while (num % 2 == 0 && den > 1) num /= 2, den /= 2;
  return {num, den};
}

}  // namespace

const std::vector<Encoding>& encodings() {
  static const std::vector<Encoding> table = [] {
    std::vector<Encoding> out;
    for (const OpDef* op : OpRegistry::global().all())
      for (const SmtForm& f : op->smt) out.push_back({op->name, f.symbol, f.tensors, f.args, f.output, f.fixed});
    return out;
  }();
  return table;
}

std::string declaration(const Encoding& e) {
  std::string s = "(declare-fun " + e.symbol + " (";
  const int n = e.tensors + int_args(e);
  for (int i = 0; i < n; ++i) s += std::string(i ? " " : "") + (i < e.tensors ? "Tensor" : "Int");
  return s + ") Tensor)";
}

std::string operator_declarations() {
  std::string out = "; The operators' symbols, derived from the registry's SmtForm entries:\n";
  for (const Encoding& e : encodings()) {
    const OpDef& op = OpRegistry::global().get(e.op);
    std::string args;
    for (int i = 0; i < e.tensors; ++i) args += (args.empty() ? "" : ", ") + op.input_name(i);
    for (const SmtArg& a : e.attrs) args += (args.empty() ? "" : ", ") + a.attr;
    std::string form = e.op;
    for (const auto& [name, value] : e.fixed) form += std::string(" ") + name + "=" + (value ? "true" : "false");
    if (e.output > 0 || std::count_if(encodings().begin(), encodings().end(), [&](const Encoding& o) { return o.op == e.op; }) > 1)
      form += ", output " + std::to_string(e.output);
    out += declaration(e) + "  ; " + form + ": " + args + "\n";
  }
  return out;
}

const Encoding* encoding_by_symbol(const std::string& symbol) {
  for (const auto& e : encodings())
    if (symbol == e.symbol) return &e;
  return nullptr;
}

const Encoding* encoding_for(const std::string& op, const Attributes& attrs, int output, int inputs) {
  for (const auto& e : encodings()) {
    if (op != e.op || e.output != output || e.tensors != inputs) continue;
    const bool fits = std::all_of(e.fixed.begin(), e.fixed.end(), [&](const auto& f) {
      return attrs.has(f.first) && attrs.get_bool(f.first) == f.second;
    });
    if (fits) return &e;
  }
  return nullptr;
}

int int_args(const Encoding& e) {
  int n = 0;
  for (const SmtArg& a : e.attrs) n += a.code == SmtCode::kFraction ? 2 : 1;
  return n;
}

std::vector<int64_t> encode_attrs(const Encoding& e, const Attributes& attrs, int64_t rank0) {
  std::vector<int64_t> out;
  for (const SmtArg& arg : e.attrs) {
    const std::string& a = arg.attr;
    const AttrSpec& spec = spec_of(e, a);
    if (arg.code == SmtCode::kFraction) {
      const auto [num, den] = exact_fraction(attrs.get_float(a));
      out.push_back(num);
      out.push_back(den);
    } else if (arg.code == SmtCode::kPermDigits) {
      const IntList& p = attrs.get_ints(a);
      if (p.size() > 9) throw Error(e.op + " of more than 9 dimensions has no SMT encoding");
      out.push_back(perm_code(p));
    } else if (arg.code == SmtCode::kShapeDigits) {
      const auto code = shape_code(attrs.get_ints(a));
      if (!code) throw Error(e.op + " to more than 4 dimensions or a size of 10000 or more has no SMT encoding");
      out.push_back(*code);
    } else if (spec.type == AttrType::kString) {
      const auto pos = std::find(spec.choices.begin(), spec.choices.end(), attrs.get_string(a));
      if (pos == spec.choices.end()) throw Error(a + " " + attrs.get_string(a) + " has no SMT encoding");
      out.push_back(pos - spec.choices.begin());
    } else if (spec.type == AttrType::kFloat) {
      out.push_back(std::bit_cast<int64_t>(attrs.get_float(a)));
    } else if (spec.type == AttrType::kBool) {
      out.push_back(attrs.get_bool(a) ? 1 : 0);
    } else if (spec.type == AttrType::kInt) {
      int64_t v = attrs.get_int(a);
      if (arg.code == SmtCode::kAxis && v < 0) v += rank0;
      out.push_back(v);
    } else {
      throw Error(e.op + "." + a + " has no SMT encoding");
    }
  }
  return out;
}

std::optional<Attributes> decode_attrs(const Encoding& e, const std::vector<int64_t>& ints) {
  if (static_cast<int>(ints.size()) != int_args(e)) return std::nullopt;
  Attributes out;
  for (const auto& [name, value] : e.fixed) out.set(name, value);
  size_t i = 0;
  for (const SmtArg& arg : e.attrs) {
    const std::string& a = arg.attr;
    const AttrSpec& spec = spec_of(e, a);
    const int64_t x = ints[i++];
    if (arg.code == SmtCode::kFraction) {
      const int64_t den = ints[i++];
      if (den <= 0) return std::nullopt;
      out.set(a, static_cast<double>(x) / static_cast<double>(den));
    } else if (arg.code == SmtCode::kPermDigits) {
      const auto p = perm_of(x);
      if (!p) return std::nullopt;
      out.set(a, *p);
    } else if (arg.code == SmtCode::kShapeDigits) {
      const auto s = shape_of(x);
      if (!s) return std::nullopt;
      out.set(a, *s);
    } else if (spec.type == AttrType::kString) {
      if (x < 0 || x >= static_cast<int64_t>(spec.choices.size())) return std::nullopt;
      out.set(a, spec.choices[static_cast<size_t>(x)]);
    } else if (spec.type == AttrType::kFloat) {
      const double d = std::bit_cast<double>(x);
      if (!std::isfinite(d)) return std::nullopt;
      out.set(a, d);
    } else if (spec.type == AttrType::kBool) {
      if (x != 0 && x != 1) return std::nullopt;
      out.set(a, x == 1);
    } else {
      out.set(a, x);
    }
  }
  return out;
}

namespace {

// A list as one integer: 1 followed by each element in base `base`.
int64_t digits_code(const IntList& v, int64_t base) {
  int64_t c = 1;
  for (int64_t x : v) c = c * base + x;
  return c;
}
std::optional<IntList> digits_of(int64_t code, int64_t base, size_t max_len) {
  IntList v;
  while (code >= base) {
    v.insert(v.begin(), code % base);
    code /= base;
  }
  if (code != 1 || v.empty() || v.size() > max_len) return std::nullopt;
  return v;
}

}  // namespace

int64_t perm_code(const IntList& p) { return digits_code(p, 10); }

std::optional<IntList> perm_of(int64_t code) {
  auto p = digits_of(code, 10, 9);
  if (!p) return std::nullopt;
  IntList sorted = *p;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int64_t>(i)) return std::nullopt;
  return p;
}

std::optional<int64_t> shape_code(const IntList& s) {
  if (s.empty() || s.size() > 4) return std::nullopt;
  for (int64_t x : s)
    if (x <= 0 || x >= 10000) return std::nullopt;
  return digits_code(s, 10000);
}

std::optional<IntList> shape_of(int64_t code) {
  auto s = digits_of(code, 10000, 4);
  if (!s || std::find(s->begin(), s->end(), 0) != s->end()) return std::nullopt;
  return s;
}

}  // namespace pcgx::verify
