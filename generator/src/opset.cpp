#include "pcgx/generator/opset.h"

#include <algorithm>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/registry.h"

namespace pcgx::gen {
namespace {

std::vector<OpChoice> parse_list(const std::string& list, const std::string& what) {
  std::vector<OpChoice> out;
  size_t i = 0;
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    return s;
  };
  while (i < list.size()) {
    size_t end = i;
    int depth = 0;
    while (end < list.size() && (list[end] != ',' || depth > 0)) {
      depth += list[end] == '(' ? 1 : list[end] == ')' ? -1 : 0;
      ++end;
    }
    const std::string item = trim(list.substr(i, end - i));
    i = end + 1;
    if (item.empty()) continue;
    OpChoice c;
    const auto paren = item.find('(');
    c.op = trim(item.substr(0, paren));
    const OpDef* def = OpRegistry::global().find(c.op);
    if (!def) throw Error(what + ": unknown operator '" + c.op + "' (`pcgx ops` lists them)");
    if (def->op_class == OpClass::kSource) throw Error(what + ": " + c.op + " is a graph source, not an operator to enumerate");
    if (paren != std::string::npos) {
      if (item.back() != ')') throw Error(what + ": '" + item + "': expected Op(attr=v|v,...)");
      std::string body = item.substr(paren + 1, item.size() - paren - 2);
      size_t j = 0;
      while (j <= body.size()) {
        size_t stop = body.find(',', j);
        if (stop == std::string::npos) stop = body.size();
        const std::string kv = trim(body.substr(j, stop - j));
        j = stop + 1;
        if (kv.empty()) continue;
        const auto eq = kv.find('=');
        if (eq == std::string::npos) throw Error(what + ": '" + kv + "' in " + c.op + ": expected attr=value|value");
        const std::string name = trim(kv.substr(0, eq));
        auto spec = std::find_if(def->attrs.begin(), def->attrs.end(), [&](const AttrSpec& s) { return s.name == name; });
        if (spec == def->attrs.end()) throw Error(what + ": " + c.op + " has no attribute '" + name + "'");
        std::string values = kv.substr(eq + 1);
        size_t k = 0;
        while (k <= values.size()) {
          size_t b = values.find('|', k);
          if (b == std::string::npos) b = values.size();
          const std::string v = trim(values.substr(k, b - k));
          k = b + 1;
          try {
            switch (spec->type) {
              case AttrType::kInt: c.values[name].push_back(static_cast<int64_t>(std::stoll(v))); break;
              case AttrType::kFloat: c.values[name].push_back(std::stod(v)); break;
              case AttrType::kBool:
                if (v != "true" && v != "false") throw std::invalid_argument(v);
                c.values[name].push_back(v == "true");
                break;
              case AttrType::kString: c.values[name].push_back(v); break;
              case AttrType::kIntList: throw std::invalid_argument(v);
            }
          } catch (const std::exception&) {
            throw Error(what + ": " + c.op + "." + name + ": '" + v + "' is not a valid " +
                        std::string(to_string(spec->type)));
          }
          // Validate against the spec (choices, checks).
          Attributes probe;
          probe.set(name, c.values[name].back());
          try {
            normalize_attributes({*spec}, probe, c.op);
          } catch (const Error& e) {
            throw Error(what + ": " + e.what());
          }
        }
      }
    }
    out.push_back(std::move(c));
  }
  if (out.empty()) throw Error(what + ": no operators given");
  return out;
}

}  // namespace

std::string to_string(const OpChoice& c) {
  std::string s = c.op;
  if (c.values.empty()) return s;
  s += "(";
  bool first = true;
  for (const auto& [k, vs] : c.values) {
    s += (first ? "" : ",") + k + "=";
    first = false;
    for (size_t i = 0; i < vs.size(); ++i) s += (i ? "|" : "") + pcgx::to_string(vs[i]);
  }
  return s + ")";
}

const std::vector<Opset>& named_opsets() {
  static const std::vector<Opset> sets = [] {
    const std::string parallel = "Repartition,Combine,Replicate,Reduce";
    const std::string unity = "Linear(activation=none|relu),Relu,EwAdd,EwMul,Concat,Split," + parallel;
    std::vector<Opset> v;
    v.push_back({"unity", "the operator set of the original Unity generator", parse_list(unity, "opset unity"), 3,
                 false, false});
    v.push_back({"attention", "unity plus MatMul, BatchMatMul, Transpose, Softmax, ScalarMul",
                 parse_list(unity + ",MatMul,BatchMatMul,Transpose,Softmax,ScalarMul", "opset attention"), 3, false,
                 false});
    v.push_back({"recsys", "unity plus Embedding, EmbeddingBag", parse_list(unity + ",Embedding,EmbeddingBag", "opset recsys"),
                 3, true, false});
    v.push_back({"conv", "unity plus Conv2D (3x3, padding 1) and Pool2D (2x2)",
                 parse_list(unity + ",Conv2D(pad_h=1,pad_w=1),Pool2D(kernel_h=2,kernel_w=2,mode=max|avg)", "opset conv"),
                 4, false, true});
    return v;
  }();
  return sets;
}

const Opset* find_opset_or_null(const std::string& name) {
  for (const auto& s : named_opsets())
    if (s.name == name) return &s;
  return nullptr;
}

const Opset& find_opset(const std::string& name) {
  for (const auto& s : named_opsets())
    if (s.name == name) return s;
  std::string known;
  for (const auto& s : named_opsets()) known += (known.empty() ? "" : ", ") + s.name;
  throw Error("--opset " + name + ": unknown operator set (known: " + known + ")");
}

Opset parse_ops(const std::string& list) {
  Opset s;
  s.name = "custom";
  s.description = "operators given with --ops";
  s.ops = parse_list(list, "--ops");
  for (const auto& c : s.ops) {
    s.index_inputs = s.index_inputs || c.op == "Embedding" || c.op == "EmbeddingBag";
    s.conv_kernels = s.conv_kernels || c.op == "Conv2D";
  }
  return s;
}

}  // namespace pcgx::gen
