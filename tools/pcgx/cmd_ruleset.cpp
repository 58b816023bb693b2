// pcgx ruleset show|stats|diff|compare|check|import|export
#include <iomanip>
#include <iostream>
#include <map>
#include <set>

#include "cli_common.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/rulesets/legacy_flexflow.h"
#include "pcgx/rulesets/numeric_check.h"
#include "pcgx/rulesets/rule_form.h"
#include "pcgx/verifier/batch.h"

namespace pcgx::cli {
namespace {

// A ruleset in either format (legacy rules that pcgx cannot express are
// reported through `legacy`).
Ruleset load_any(const std::string& path, const std::string& format, const std::string& dims, LegacyImport* legacy = nullptr) {
  check_format(format);
  if (format == "pcgx") return load_ruleset(path);
  LegacyImport imp = import_flexflow(read_text_file(path), path, parse_dims(dims));
  Ruleset r = imp.rules;
  if (legacy) *legacy = std::move(imp);
  return r;
}

size_t ops_of(const Graph& g) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.op->op_class != OpClass::kSource;
  return n;
}

}  // namespace

void add_ruleset_command(CLI::App& app) {
  auto* rs = app.add_subcommand("ruleset", "Inspect, compare, check, import and export rule databases");
  rs->require_subcommand(1);
  static std::string file, file_b, out, format = "pcgx", io_format = "flexflow", dims = "forward";
  static int limit = 0;
  static bool list = false;

  auto* show = rs->add_subcommand("show", "Print a ruleset's header and its rules");
  show->add_option("FILE", file, "ruleset or candidates file")->required();
  show->add_option("--limit", limit, "print at most this many rules (0: all)");
  show->callback([] {
    const Ruleset r = load_ruleset(file);
    std::cout << "kind         " << r.kind << "\nname         " << r.name << " (version " << r.version << ")\n"
              << "opset        " << r.opset << "\nrules        " << r.rules.size() << "\n"
              << "content hash " << r.stored_hash << (r.stored_hash == r.computed_hash ? " (matches)" : " (DOES NOT MATCH the content)")
              << "\ngenerator    " << r.generator_json << "\n";
    for (const auto& [k, v] : r.stats) std::cout << "  " << std::left << std::setw(24) << k << static_cast<int64_t>(v) << "\n";
    int n = 0;
    for (const Rule& rule : r.rules) {
      if (limit > 0 && n++ >= limit) break;
      std::cout << rule.id << ": " << rule_text(rule);
      if (rule.proof) std::cout << "   [" << rule.proof->result << "]";
      std::cout << "\n";
    }
  });

  auto* stats = rs->add_subcommand("stats", "Count a ruleset's rules by size, operator and proof");
  stats->add_option("FILE", file, "ruleset or candidates file")->required();
  stats->callback([] {
    const Ruleset r = load_ruleset(file);
    std::map<std::pair<size_t, size_t>, int> sizes;
    std::map<std::string, int> ops, proofs;
    int multi = 0;
    for (const Rule& rule : r.rules) {
      ++sizes[{ops_of(rule.source), ops_of(rule.target)}];
      multi += rule.source.outputs().size() > 1;
      std::set<std::string> used;
      for (const Graph* g : {&rule.source, &rule.target})
        for (const Node& n : g->nodes())
          if (n.op->op_class != OpClass::kSource) used.insert(n.op->name);
      for (const auto& o : used) ++ops[o];
      ++proofs[rule.proof ? rule.proof->result : "no proof"];
    }
    std::cout << r.rules.size() << " rules, " << multi << " with several outputs\n\noperators (source, target) count\n";
    for (const auto& [k, v] : sizes) std::cout << "  (" << k.first << ", " << k.second << ")  " << v << "\n";
    std::cout << "\nrules using each operator\n";
    for (const auto& [k, v] : ops) std::cout << "  " << std::left << std::setw(14) << k << v << "\n";
    std::cout << "\nproofs\n";
    for (const auto& [k, v] : proofs) std::cout << "  " << std::left << std::setw(14) << k << v << "\n";
  });

  auto* diff = rs->add_subcommand("diff", "Rules in A but not in B and in B but not in A (same inputs, either direction)");
  diff->add_option("A", file, "first ruleset")->required();
  diff->add_option("B", file_b, "second ruleset")->required();
  diff->callback([] {
    const Ruleset a = load_ruleset(file), b = load_ruleset(file_b);
    std::map<std::string, const Rule*> ka, kb;
    for (const Rule& r : a.rules) ka.emplace(rule_key(r, false), &r);
    for (const Rule& r : b.rules) kb.emplace(rule_key(r, false), &r);
    int only_a = 0, only_b = 0;
    for (const auto& [k, r] : ka)
      if (!kb.count(k)) std::cout << "- " << r->id << ": " << rule_text(*r) << "\n", ++only_a;
    for (const auto& [k, r] : kb)
      if (!ka.count(k)) std::cout << "+ " << r->id << ": " << rule_text(*r) << "\n", ++only_b;
    std::cout << only_a << " rules only in " << file << ", " << only_b << " only in " << file_b << "\n";
    if (only_a || only_b) throw CLI::RuntimeError(1);
  });

  auto* compare = rs->add_subcommand("compare", "How many rules of B are in A, up to input renaming and direction");
  compare->add_option("A", file, "the reference ruleset")->required();
  compare->add_option("B", file_b, "the ruleset whose rules are looked up in A")->required();
  compare->add_option("--format-b", format, "format of B: pcgx or flexflow")->capture_default_str();
  compare->add_option("--dims", dims, "legacy dimension numbering: reversed or forward")->capture_default_str();
  compare->add_flag("--list", list, "list the rules of B that A lacks");
  static bool derive = false;
  compare->add_flag("--derive", derive,
                    "also count B's rules that A's rules derive (A's rules as the only axioms), among those the axioms prove");
  compare->callback([] {
    const Ruleset a = load_ruleset(file);
    const Ruleset b = load_any(file_b, format, dims);
    std::set<std::string> keys;
    for (const Rule& r : a.rules) keys.insert(rule_key(r, true));
    std::vector<const Rule*> missing;
    size_t found = 0;
    for (const Rule& r : b.rules) {
      if (keys.count(rule_key(r, true))) {
        ++found;
      } else {
        missing.push_back(&r);
      }
    }
    auto pct = [](size_t n, size_t d) { return d == 0 ? 100.0 : 100.0 * static_cast<double>(n) / static_cast<double>(d); };
    std::cout << std::fixed << std::setprecision(1) << found << " of " << b.rules.size() << " rules of " << file_b
              << " are in " << file << " (" << pct(found, b.rules.size()) << "%)\n";
    if (!derive) {
      if (list)
        for (const Rule* r : missing) std::cout << "missing " << r->id << ": " << rule_text(*r) << "\n";
      return;
    }
    // Which of B's rules hold by the axioms, and which of those A derives.
    const verify::AxiomSet axioms = verify::load_axioms(verify::default_axioms_dir());
    std::vector<std::string> skipped;
    const verify::AxiomSet from_a = verify::axioms_from_rules(a, axioms, skipped);
    std::vector<Rule> rest;
    for (const Rule* r : missing) rest.push_back(*r);
    const auto by_axioms = verify::prove_all(b.rules, axioms, {}, 0);
    const auto by_a = verify::prove_all(rest, from_a, {}, 0);
    size_t provable = 0, provable_found = 0, derived = 0;
    std::map<std::string, size_t> index_of;
    for (size_t i = 0; i < rest.size(); ++i) index_of[rest[i].id] = i;
    for (size_t i = 0; i < b.rules.size(); ++i) {
      if (by_axioms[i].proof.result != verify::Result::kUnsat) continue;
      ++provable;
      auto it = index_of.find(b.rules[i].id);
      if (it == index_of.end()) {
        ++provable_found;
      } else if (by_a[it->second].proof.result == verify::Result::kUnsat) {
        ++derived;
      } else if (list) {
        std::cout << "not derived " << b.rules[i].id << ": " << rule_text(b.rules[i]) << "\n";
      }
    }
    std::cout << provable << " of B's rules are proved by the axioms; of those " << provable_found << " are in A and "
              << derived << " more are derived from A's rules: " << provable_found + derived << " covered ("
              << pct(provable_found + derived, provable) << "%)\n";
    if (!skipped.empty()) std::cout << skipped.size() << " of A's rules could not serve as axioms\n";
  });

  auto* check = rs->add_subcommand("check", "Evaluate both sides of every rule in the reference interpreter; exit 1 if any rule is refuted");
  check->add_option("FILE", file, "ruleset, candidates or legacy file")->required();
  check->add_option("--format", format, "pcgx or flexflow")->capture_default_str();
  check->add_option("--dims", dims, "legacy dimension numbering: reversed or forward")->capture_default_str();
  check->add_flag("--list", list, "print every rule's verdict, not only refutations");
  check->callback([] {
    LegacyImport legacy;
    const Ruleset r = load_any(file, format, dims, &legacy);
    size_t holds = 0, refuted = 0, inexpressible = 0;
    std::map<std::string, int> reasons;
    for (const LegacyRule& lr : legacy.legacy)
      if (!lr.expressible) {
        ++inexpressible;
        ++reasons[lr.reason.substr(0, lr.reason.find(':') == std::string::npos ? lr.reason.size() : lr.reason.find(": ", 8))];
        if (list) std::cout << lr.name << ": not expressible: " << lr.reason << "\n";
      }
    for (const Rule& rule : r.rules) {
      const NumericCheck c = check_numerically(rule);
      if (c.holds) {
        ++holds;
        if (list) std::cout << rule.id << ": holds: " << rule_text(rule) << "\n";
      } else {
        ++refuted;
        std::cout << rule.id << ": REFUTED: " << rule_text(rule) << "\n    " << c.counterexample << "\n";
      }
    }
    std::cout << holds << " hold, " << refuted << " refuted";
    if (format == "flexflow") std::cout << ", " << inexpressible << " not expressible in pcgx";
    std::cout << " (of " << holds + refuted + inexpressible << ")\n";
    for (const auto& [k, v] : reasons) std::cout << "  not expressible, " << v << "x: " << k << "\n";
    if (refuted) throw CLI::RuntimeError(1);
  });

  auto* imp = rs->add_subcommand("import", "Convert a legacy FlexFlow rule collection to a pcgx candidates file");
  imp->add_option("FILE", file, "legacy JSON (RuleCollection)")->required();
  imp->add_option("--format", io_format, "source format: flexflow")->capture_default_str();
  imp->add_option("--dims", dims, "legacy dimension numbering: reversed or forward")->capture_default_str();
  imp->add_option("-o,--output", out, "pcgx candidates file to write")->required();
  imp->callback([] {
    if (io_format != "flexflow") throw Error("--format " + io_format + ": import reads flexflow");
    const LegacyImport li = import_flexflow(read_text_file(file), file, parse_dims(dims));
    save_ruleset(li.rules, out);
    std::cout << "imported " << li.rules.rules.size() << " of " << li.legacy.size() << " rules into " << out << "\n";
    for (const LegacyRule& lr : li.legacy)
      if (!lr.expressible) std::cout << "  " << lr.name << ": not expressible: " << lr.reason << "\n";
  });

  auto* exp = rs->add_subcommand("export", "Write a pcgx ruleset in the legacy FlexFlow format");
  exp->add_option("FILE", file, "pcgx ruleset or candidates file")->required();
  exp->add_option("--format", io_format, "target format: flexflow")->capture_default_str();
  exp->add_option("--dims", dims, "legacy dimension numbering: reversed or forward")->capture_default_str();
  exp->add_option("-o,--output", out, "legacy JSON to write")->required();
  exp->callback([] {
    if (io_format != "flexflow") throw Error("--format " + io_format + ": export writes flexflow");
    const Ruleset r = load_ruleset(file);
    std::vector<std::string> skipped;
    write_text_file_atomic(out, export_flexflow(r, parse_dims(dims), skipped));
    std::cout << "exported " << r.rules.size() - skipped.size() << " of " << r.rules.size() << " rules to " << out << "\n";
    for (const auto& s : skipped) std::cout << "  skipped " << s << "\n";
  });
}

}  // namespace pcgx::cli
