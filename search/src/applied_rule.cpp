// How a strategy records a rule application (see applied_rule.h).
#include "pcgx/search/applied_rule.h"

#include <regex>

namespace pcgx::search {
namespace {

constexpr const char* kAt = " at ";
constexpr const char* kBetween = ", ";

}  // namespace

std::vector<std::string> matched_names(const Graph& g, const Match& m) {
  std::vector<std::string> names;
  for (const Node& p : m.rule->source.nodes()) {
    if (p.op->op_class != OpClass::kCompute) continue;
    const std::string& name = g.node(m.nodes[static_cast<size_t>(p.id)]).name;
    if (name.empty()) return {};
    names.push_back(name);
  }
  return names;
}

std::string format_applied(const AppliedRule& a) {
  std::string s = a.rule;
  for (size_t i = 0; i < a.at.size(); ++i) s += (i ? kBetween : kAt) + a.at[i];
  return s;
}

std::string applied_label(const Graph& g, const Match& m) {
  return format_applied({m.rule->id + (m.degree != 2 ? "@k" + std::to_string(m.degree) : ""), matched_names(g, m)});
}

AppliedRule parse_applied(const std::string& label) {
  AppliedRule a;
  const size_t at = label.find(kAt);
  a.rule = label.substr(0, at);
  if (at == std::string::npos) return a;
  const std::string names = label.substr(at + std::char_traits<char>::length(kAt));
  for (size_t from = 0;;) {
    const size_t end = names.find(kBetween, from);
    a.at.push_back(names.substr(from, end - from));
    if (end == std::string::npos) break;
    from = end + std::char_traits<char>::length(kBetween);
  }
  return a;
}

std::string renamed_applied(const std::string& label, const std::function<std::string(const std::string&)>& rename) {
  AppliedRule a = parse_applied(label);
  for (std::string& name : a.at) {
    name = rename(name);
    if (name.empty()) return a.rule;  // an operator the model left unnamed
  }
  return format_applied(a);
}

std::string library_id(const std::string& rule) {
  static const std::regex degree("@k[0-9]+$");
  return std::regex_replace(rule, degree, "");
}

}  // namespace pcgx::search
