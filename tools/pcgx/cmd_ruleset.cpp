// pcgx ruleset show|stats|diff|compare|check|import|export: flags in, one
// library call (rulesets/ruleset_compare.h, legacy_flexflow.h,
// verifier/derivation.h), the report printed (print_rulesets.h).
#include <iostream>

#include "cli_common.h"
#include "print_rulesets.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/rulesets/rule_form.h"

namespace pcgx::cli {

void add_ruleset_command(CLI::App& app) {
  auto* rs = app.add_subcommand("ruleset", "Inspect, compare, check, import and export rule databases");
  rs->require_subcommand(1);
  static std::string file, file_b, out, format = "pcgx", io_format = "flexflow", dims = "forward";
  static int limit = 0;
  static bool list = false;

  auto* show = rs->add_subcommand("show", "Print a ruleset's header and its rules");
  show->add_option("FILE", file, "ruleset or candidates file")->required();
  show->add_option("--limit", limit, "print at most this many rules (0: all)");
  show->callback([] { print_ruleset(std::cout, load_ruleset(file), limit); });

  auto* stats = rs->add_subcommand("stats", "Count a ruleset's rules by size, operator and proof");
  stats->add_option("FILE", file, "ruleset or candidates file")->required();
  stats->callback([] { print_stats(std::cout, ruleset_stats(load_ruleset(file))); });

  auto* diff = rs->add_subcommand("diff", "Rules in A but not in B and in B but not in A (same inputs, either direction)");
  diff->add_option("A", file, "first ruleset")->required();
  diff->add_option("B", file_b, "second ruleset")->required();
  diff->callback([] {
    const Ruleset a = load_ruleset(file), b = load_ruleset(file_b);
    const RulesetDiff d = diff_rulesets(a, b);
    print_diff(std::cout, d, file, file_b);
    if (!d.only_a.empty() || !d.only_b.empty()) throw CLI::RuntimeError(1);
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
    const Ruleset b = load_rules(file_b, parse_rule_format(format), parse_dims(dims));
    const RulesetCoverage c = coverage_of(a, b);
    print_coverage(std::cout, c, b.rules.size(), file, file_b);
    if (!derive) {
      if (list)
        for (const Rule* r : c.missing) std::cout << "missing " << r->id << ": " << rule_text(*r) << "\n";
      return;
    }
    const verify::Derivation d = verify::derive(a, b, c.missing, verify::load_axioms(verify::axiom_search_path()));
    if (list)
      for (const Rule* r : d.not_derived) std::cout << "not derived " << r->id << ": " << rule_text(*r) << "\n";
    print_derivation(std::cout, d);
  });

  auto* check = rs->add_subcommand("check", "Evaluate both sides of every rule in the reference interpreter; exit 1 if any rule is refuted");
  check->add_option("FILE", file, "ruleset, candidates or legacy file")->required();
  check->add_option("--format", format, "pcgx or flexflow")->capture_default_str();
  check->add_option("--dims", dims, "legacy dimension numbering: reversed or forward")->capture_default_str();
  check->add_flag("--list", list, "print every rule's verdict, not only refutations");
  check->callback([] {
    const RuleFormat f = parse_rule_format(format);
    LegacyImport legacy;
    const Ruleset r = load_rules(file, f, parse_dims(dims), &legacy);
    const RulesetCheck c = check_ruleset(r, &legacy);
    print_check(std::cout, c, f == RuleFormat::kFlexflow, list);
    if (c.refuted) throw CLI::RuntimeError(1);
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
