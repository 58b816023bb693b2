#include <exception>
#include <map>
#include <nlohmann/json.hpp>
#include <tbb/parallel_for.h>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/graph_json_value.h"
#include "pcgx/rulesets/ruleset.h"
#include "pcgx/rulesets/sha256.h"

namespace pcgx {

using nlohmann::json;

namespace {

json to_value(const Ruleset& r) {
  json root;
  root["format_version"] = kRulesetFormatVersion;
  root["kind"] = r.kind;
  root["name"] = r.name;
  root["version"] = r.version;
  root["opset"] = r.opset;
  root["operators"] = r.operators;
  root["generator"] = json::parse(r.generator_json);
  if (!r.axiom_digests.empty()) {
    json digests = json::object();
    for (const auto& [name, d] : r.axiom_digests) digests[name] = d;
    root["axioms"] = std::move(digests);
  }
  if (!r.axioms_hash.empty()) root["axioms_hash"] = r.axioms_hash;
  json stats = json::object();
  for (const auto& [k, v] : r.stats) stats[k] = v;
  root["stats"] = stats;
  json rules = json::array();
  for (const Rule& rule : r.rules) {
    json j;
    j["id"] = rule.id;
    j["source"] = graph_to_value(rule.source);
    j["target"] = graph_to_value(rule.target);
    json map = json::array();
    for (const auto& [a, b] : rule.output_map) map.push_back(json::array({a, b}));
    j["output_map"] = map;
    if (rule.proof) {
      j["proof"] = {{"result", rule.proof->result}, {"seconds", rule.proof->seconds}, {"axioms", rule.proof->axioms}};
      if (rule.proof->degree_generic) j["proof"]["degree_generic"] = true;
      if (!rule.proof->value_generic.empty()) j["proof"]["value_generic"] = rule.proof->value_generic;
      if (!rule.proof->note.empty()) j["proof"]["note"] = rule.proof->note;
    }
    rules.push_back(std::move(j));
  }
  root["rules"] = std::move(rules);
  return root;
}

// The hash covers everything but the solver times, which differ from run to
// run: a regenerated ruleset has the same hash when it has the same rules.
std::string content_hash(json without_hash) {
  if (auto rules = without_hash.find("rules"); rules != without_hash.end() && rules->is_array())
    for (auto& rule : *rules)
      if (auto p = rule.find("proof"); p != rule.end() && p->is_object()) p->erase("seconds");
  return sha256_hex(without_hash.dump());
}

[[noreturn]] void fail(const std::string& source, const std::string& field, const std::string& reason) {
  throw FileError(source, field, reason);
}

const json& field(const json& obj, const std::string& key, const std::string& source, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end()) fail(source, path.empty() ? key : path + "." + key, "missing required field");
  return *it;
}

std::string str(const json& v, const std::string& source, const std::string& path) {
  if (!v.is_string()) fail(source, path, std::string("must be a string, got ") + v.type_name());
  return v.get<std::string>();
}

}  // namespace

std::string ruleset_to_json(const Ruleset& r) {
  json root = to_value(r);
  root["content_hash"] = content_hash(root);
  // Compact: the shipped databases hold thousands of rules.
  return root.dump() + "\n";
}

// A rule's variables are its Input and Weight nodes, matched by name across
// the two sides: an unnamed one would be one constant "" to the prover
// whatever it stands for, and one declared differently on each side (another
// shape, another index_range) is two variables under one name. Z3 "proved"
// such rules and evaluation then refuted them, blaming the axioms.
namespace {
void check_rule_variables(const Rule& rule, const std::string& source, const std::string& path) {
  std::map<std::string, const Node*> seen;
  for (const auto& [side, g] : {std::pair<const char*, const Graph*>{"source", &rule.source}, {"target", &rule.target}})
    for (const Node& n : g->nodes()) {
      if (n.op->op_class != OpClass::kSource) continue;
      const std::string where = path + "." + side + ".nodes[" + std::to_string(n.id) + "]";
      if (n.name.empty()) fail(source, where, "a rule's " + n.op->name + " node needs a name (its variable)");
      auto [it, fresh] = seen.emplace(n.name, &n);
      if (!fresh && (it->second->op != n.op || !(it->second->attrs == n.attrs)))
        fail(source, where, "variable '" + n.name + "' is declared differently on the two sides");
    }
}

// One rule of the database at `path` ("rules[i]").
Rule rule_from_value(const json& j, const std::string& source, const std::string& path) {
  if (!j.is_object()) fail(source, path, "must be an object");
  Rule rule;
  rule.id = str(field(j, "id", source, path), source, path + ".id");
  rule.source = graph_from_value(field(j, "source", source, path), source, path + ".source");
  rule.target = graph_from_value(field(j, "target", source, path), source, path + ".target");
  check_rule_variables(rule, source, path);
  const json& map = field(j, "output_map", source, path);
  if (!map.is_array()) fail(source, path + ".output_map", "must be an array of [source, target] pairs");
  // Each output of either side is paired with one of the other.
  const size_t outs = rule.source.outputs().size();
  if (rule.target.outputs().size() != outs)
    fail(source, path, "the source has " + std::to_string(outs) + " outputs and the target " +
                           std::to_string(rule.target.outputs().size()) + ": a rule pairs each output with one of the other side");
  if (map.size() != outs)
    fail(source, path + ".output_map", "has " + std::to_string(map.size()) + " pairs for " + std::to_string(outs) + " outputs");
  std::vector<char> source_seen(outs, 0), target_seen(outs, 0);
  for (size_t k = 0; k < map.size(); ++k) {
    const std::string mp = path + ".output_map[" + std::to_string(k) + "]";
    if (!map[k].is_array() || map[k].size() != 2 || !map[k][0].is_number_integer() || !map[k][1].is_number_integer())
      fail(source, mp, "must be a [source output, target output] pair");
    const int64_t a = map[k][0].get<int64_t>(), b = map[k][1].get<int64_t>();  // 2^32 must not wrap to 0
    if (a < 0 || a >= static_cast<int64_t>(rule.source.outputs().size()) || b < 0 ||
        b >= static_cast<int64_t>(rule.target.outputs().size()))
      fail(source, mp, "refers to a missing graph output");
    if (source_seen[static_cast<size_t>(a)]++ || target_seen[static_cast<size_t>(b)]++)
      fail(source, mp, "pairs an output already paired (source " + std::to_string(a) + ", target " + std::to_string(b) + ")");
    rule.output_map.emplace_back(static_cast<int>(a), static_cast<int>(b));
  }
  if (auto p = j.find("proof"); p != j.end()) {
    ProofRecord rec;
    rec.result = str(field(*p, "result", source, path + ".proof"), source, path + ".proof.result");
    if (auto s = p->find("seconds"); s != p->end() && s->is_number()) rec.seconds = s->get<double>();
    if (auto g = p->find("degree_generic"); g != p->end() && g->is_boolean()) rec.degree_generic = g->get<bool>();
    if (auto a = p->find("axioms"); a != p->end() && a->is_array())
      for (const auto& x : *a) rec.axioms.push_back(x.is_string() ? x.get<std::string>() : x.dump());
    if (auto v = p->find("value_generic"); v != p->end()) {
      if (!v->is_array()) fail(source, path + ".proof.value_generic", "must be an array of \"Op.attr\" names");
      for (const auto& x : *v) {
        if (!x.is_string()) fail(source, path + ".proof.value_generic", "must be an array of \"Op.attr\" names");
        rec.value_generic.push_back(x.get<std::string>());
      }
    }
    if (auto n = p->find("note"); n != p->end() && n->is_string()) rec.note = n->get<std::string>();
    rule.proof = rec;
  }
  return rule;
}

}  // namespace

std::string axioms_hash_of(const std::vector<std::pair<std::string, std::string>>& digests) {
  std::string lines;
  for (const auto& [name, d] : digests) lines += name + " " + d + "\n";
  return sha256_hex(lines);
}

Ruleset ruleset_from_json(const std::string& text, const std::string& source) {
  json root = parse_json_document(text, source);
  if (!root.is_object()) fail(source, "", "must be an object");
  const json& version = field(root, "format_version", source, "");
  if (!version.is_number_integer()) fail(source, "format_version", "must be an integer");
  if (version.get<int64_t>() != kRulesetFormatVersion)
    fail(source, "format_version", "unsupported version " + std::to_string(version.get<int64_t>()) +
                                       " (this pcgx reads " + std::to_string(kRulesetFormatVersion) + ")");
  Ruleset r;
  r.kind = str(field(root, "kind", source, ""), source, "kind");
  if (r.kind != kCandidatesKind && r.kind != kRulesetKind)
    fail(source, "kind", "expected \"pcgx.candidates\" or \"pcgx.ruleset\", got \"" + r.kind + "\"");
  r.name = str(field(root, "name", source, ""), source, "name");
  const json& ver = field(root, "version", source, "");
  if (!ver.is_number_integer()) fail(source, "version", "must be an integer");
  r.version = ver.get<int64_t>();
  if (auto it = root.find("opset"); it != root.end()) r.opset = str(*it, source, "opset");
  if (auto it = root.find("operators"); it != root.end()) {
    if (!it->is_array()) fail(source, "operators", "must be an array of operator names");
    for (size_t i = 0; i < it->size(); ++i) r.operators.push_back(str((*it)[i], source, "operators[" + std::to_string(i) + "]"));
  }
  if (auto it = root.find("generator"); it != root.end()) r.generator_json = it->dump();
  if (auto it = root.find("axioms"); it != root.end()) {
    if (!it->is_object()) fail(source, "axioms", "must be an object of axiom name -> content digest");
    for (auto a = it->begin(); a != it->end(); ++a) r.axiom_digests.emplace_back(a.key(), str(a.value(), source, "axioms." + a.key()));
  }
  if (auto it = root.find("axioms_hash"); it != root.end()) r.axioms_hash = str(*it, source, "axioms_hash");
  if (!r.axiom_digests.empty() && r.axioms_hash != axioms_hash_of(r.axiom_digests))
    fail(source, "axioms_hash", "is not the hash of the axioms listed in \"axioms\"");
  if (auto it = root.find("stats"); it != root.end() && it->is_object())
    for (auto s = it->begin(); s != it->end(); ++s)
      if (s.value().is_number()) r.stats.emplace_back(s.key(), s.value().get<double>());
  const json& rules = field(root, "rules", source, "");
  if (!rules.is_array()) fail(source, "rules", "must be an array");
  // The rules are read on every core (most of loading is building their
  // graphs); a bad database names its first bad rule, as read in order.
  r.rules.resize(rules.size());
  std::vector<std::exception_ptr> failed(rules.size());
  tbb::parallel_for(size_t{0}, rules.size(), [&](size_t i) {
    try {
      r.rules[i] = rule_from_value(rules[i], source, "rules[" + std::to_string(i) + "]");
    } catch (...) {
      failed[i] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
  if (auto it = root.find("content_hash"); it != root.end()) r.stored_hash = str(*it, source, "content_hash");
  // The document is not read again: hashed without a copy.
  root.erase("content_hash");
  r.computed_hash = content_hash(std::move(root));
  return r;
}

Ruleset load_ruleset(const std::string& path) { return ruleset_from_json(read_text_file(path), path); }

void save_ruleset(const Ruleset& r, const std::string& path) { write_text_file_atomic(path, ruleset_to_json(r)); }

std::optional<std::string> unverified_reason(const Ruleset& r) {
  if (r.kind != kRulesetKind) return "kind: \"" + r.kind + "\" holds candidates, not proved rules";
  if (r.stored_hash.empty()) return "content_hash: missing";
  if (r.stored_hash != r.computed_hash) return "content_hash: stored " + r.stored_hash + ", but the content hashes to " + r.computed_hash;
  for (size_t i = 0; i < r.rules.size(); ++i) {
    const Rule& rule = r.rules[i];
    if (!rule.proof) return "rules[" + std::to_string(i) + "] (" + rule.id + "): no proof record";
    if (rule.proof->result != "proved")
      return "rules[" + std::to_string(i) + "] (" + rule.id + "): proof result \"" + rule.proof->result + "\", not \"proved\"";
  }
  return std::nullopt;
}

}  // namespace pcgx
