// Issue 17's integrity reproducers, through the pcgx binary: a ruleset
// edited and re-hashed must fail `pcgx audit`; the search must refuse a
// ruleset that is not verified unless told otherwise; the shipped axioms
// pass their check.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "cli/run_pcgx.h"
#include "pcgx/rulesets/ruleset.h"
#include "temp_dir.h"

namespace pcgx {
namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_integrity_test");
  return d;
}

const Ruleset& shipped() {
  static const Ruleset r = load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json");
  return r;
}

// The first shipped rule that `pick` accepts, edited, saved alone with a
// fresh content hash (what a forger would do).
std::string forged(const std::string& name, const std::function<bool(const Rule&)>& pick, const std::function<void(Rule&)>& edit,
                   std::string& id, const Ruleset& from = shipped()) {
  Ruleset r = from;
  auto it = std::find_if(r.rules.begin(), r.rules.end(), pick);
  EXPECT_NE(it, r.rules.end());
  Rule rule = *it;
  edit(rule);
  id = rule.id;
  r.rules = {rule};
  const std::string path = (dir() / name).string();
  save_ruleset(r, path);
  return path;
}

bool any_rule(const Rule&) { return true; }

void expect_audit_fails(const std::string& path, const std::string& line) {
  const auto r = run("audit " + path + " --threads 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("content hash   ok\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
}

// Setting degree_generic on a degree-specific rule and re-hashing passed
// audit, and the search then rewrote Reduce4(Replicate4(x)) into x + x.
TEST(Integrity, AuditRecomputesDegreeGenericity) {
  std::string id;
  const std::string path = forged("generic.json", [](const Rule& r) { return r.proof && !r.proof->degree_generic; },
                                  [](Rule& r) { r.proof->degree_generic = true; }, id);
  expect_audit_fails(path, "FAIL " + id + ": stored degree_generic true: evaluation with degree 4 does not hold");
}

// `pcgx ruleset stats` says how many rules claim to hold at any degree and
// at any value of each value attribute, as the file's proof records count
// them.
TEST(Integrity, StatsCountTheGenericClaims) {
  const std::string file = std::string(PCGX_SOURCE_DIR) + "/rulesets/dropout-v1.json";
  const Ruleset r = load_ruleset(file);
  int degree = 0, seed = 0;
  for (const Rule& rule : r.rules) {
    degree += rule.proof && rule.proof->degree_generic;
    seed += rule.proof && std::count(rule.proof->value_generic.begin(), rule.proof->value_generic.end(), "Dropout.seed");
  }
  ASSERT_GT(seed, 0);
  const auto got = run("ruleset stats " + file);
  ASSERT_EQ(got.code, 0) << got.out;
  EXPECT_NE(got.out.find("rules that hold at any degree (degree_generic): " + std::to_string(degree) + "\n"), std::string::npos) << got.out;
  EXPECT_NE(got.out.find("  Dropout.seed  " + std::to_string(seed) + "\n"), std::string::npos) << got.out;
}

// A rule claiming a value attribute generic that its proof does not pass
// through would let the search match it at any value: audit recomputes
// the claim from the stored core.
TEST(Integrity, AuditRecomputesValueGenericity) {
  static const Ruleset dropout = load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/dropout-v1.json");
  std::string id;
  const std::string path = forged("value_generic.json", [](const Rule& r) { return r.proof && !r.proof->value_generic.empty(); },
                                  [](Rule& r) { r.proof->value_generic = {"Dropout.rate", "Dropout.seed", "LayerNorm.eps"}; }, id, dropout);
  expect_audit_fails(path, "FAIL " + id + ": stored value_generic [Dropout.rate, Dropout.seed, LayerNorm.eps]: the stored core passes through [Dropout.rate, Dropout.seed]");
}

TEST(Integrity, AuditReprovesTheStoredCore) {
  std::string id;
  const std::string unknown = forged("core_unknown.json", any_rule, [](Rule& r) { r.proof->axioms = {"no_such_axiom"}; }, id);
  expect_audit_fails(unknown, "FAIL " + id + ": stored unsat core names no axiom of its operators: no_such_axiom");
  // A real axiom of the ruleset's operators, but one that proves nothing about this rule.
  const std::string wrong = forged("core_wrong.json", [](const Rule& r) {
    return r.proof && std::find(r.proof->axioms.begin(), r.proof->axioms.end(), "ew_mul_distributes") == r.proof->axioms.end();
  }, [](Rule& r) { r.proof->axioms = {"ew_mul_distributes"}; }, id);
  expect_audit_fails(wrong, "FAIL " + id + ": stored unsat core does not prove it: ");
  // An axiom of an operator the ruleset does not have (Gelu is not in unity):
  // proofs may use only the axioms of the ruleset's own operators.
  const std::string foreign = forged("core_foreign.json", any_rule, [](Rule& r) { r.proof->axioms = {"gelu_replicate"}; }, id);
  expect_audit_fails(foreign, "FAIL " + id + ": stored unsat core names no axiom of its operators: gelu_replicate");
}

// An unproved rule's FAIL line gave an empty reason.
TEST(Integrity, AuditFailuresGiveAReason) {
  std::string id;
  const std::string path = forged("timeout.json", any_rule, [](Rule& r) { r.proof->result = "timeout"; }, id);
  expect_audit_fails(path, "FAIL " + id + ": stored result \"timeout\": a ruleset holds proved rules only");
}

// Unnamed Input nodes were all one constant "" to Z3, and an input declared
// differently on the two sides two variables under one name: both were
// "proved". The loader refuses both, naming the node.
TEST(Integrity, RuleVariablesAreNamedAndDeclaredAlike) {
  std::string id;
  const std::string base = forged("variables.json", [](const Rule& x) {
    return std::any_of(x.target.nodes().begin(), x.target.nodes().end(), [](const Node& n) { return n.op->op_class == OpClass::kSource; });
  }, [](Rule&) {}, id);
  std::ifstream in(base);
  const auto j = nlohmann::json::parse(in);
  size_t k = 0;
  while (j["rules"][0]["target"]["nodes"][k]["op"] != "Input" && j["rules"][0]["target"]["nodes"][k]["op"] != "Weight") ++k;
  const std::string field = "rules[0].target.nodes[" + std::to_string(k) + "]";
  auto write_edit = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    auto e = j;
    edit(e["rules"][0]["target"]["nodes"][k]);
    const std::string path = (dir() / name).string();
    std::ofstream(path) << e.dump();
    return path;
  };
  const std::string unnamed = write_edit("unnamed.json", [](nlohmann::json& n) { n.erase("name"); });
  auto r = run("ruleset check " + unnamed);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out.rfind("error: " + unnamed + ": " + field + ": a rule's ", 0), 0u) << r.out;
  const std::string other = write_edit("declared_twice.json", [](nlohmann::json& n) { n["attrs"]["replica"] = 2; });
  r = run("ruleset check " + other);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(field + ": variable '"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("' is declared differently on the two sides"), std::string::npos) << r.out;
}

// optimize and run loaded any ruleset; now an unverified one is refused
// unless --allow-unverified, which is reported.
TEST(Integrity, TheSearchRefusesUnverifiedRulesets) {
  std::string id;
  const std::string unproved = forged("unproved.json", any_rule, [](Rule& r) { r.proof->result = "not proved"; }, id);
  const std::string out = (dir() / "never.json").string();
  auto r = run("optimize mlp-tiny --machine cpu-host --devices 2 -q --ruleset " + unproved + " -o " + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("error: " + unproved + ": not a verified ruleset: rules[0] (" + id + "): proof result \"not proved\""),
            std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
  r = run("run mlp-tiny --optimize --devices 2 --steps 1 --no-report --no-plot --ruleset " + unproved);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("not a verified ruleset"), std::string::npos) << r.out;
  r = run("optimize mlp-tiny --machine cpu-host --devices 2 -q --allow-unverified --ruleset " + unproved + " -o " + out);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: " + unproved + ": searching with an unverified ruleset (--allow-unverified)"), std::string::npos) << r.out;
}

// A content hash is no signature: a false rule with a proof record saying
// "proved" and the hash recomputed was searched with. Now a ruleset that
// is not a shipped one (pinned content hash) must pass the numeric check
// of every rule first: the false rule is refused with its id; a true rule
// with a forged unsat core passes it (audit catches that one), and the
// passing check is remembered by content hash.
TEST(Integrity, TheSearchChecksEveryRuleOfARulesetItDidNotShip) {
  const fs::path cache = dir() / "trust_cache";
  fs::remove_all(cache);
  const std::string env = "PCGX_CACHE_DIR=" + cache.string() + " ";
  auto optimize = [&](const std::string& ruleset, const std::string& more = "") {
    return pcgx::testing::run_shell(env + PCGX_BINARY + " optimize mlp-tiny --machine cpu-host --devices 2 -q " + more + " --ruleset " + ruleset +
                                    " -o " + (dir() / "trusted.json").string());
  };
  // A rule whose target's Relu became a Tanh, re-hashed: false, "proved".
  std::string id;
  const std::string base = forged("false_base.json", [](const Rule& r) {
    return std::any_of(r.target.nodes().begin(), r.target.nodes().end(), [](const Node& n) { return n.op->name == "Relu"; });
  }, [](Rule&) {}, id);
  std::string text;
  {
    std::ifstream in(base);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t target = text.find("\"target\"");
  ASSERT_NE(target, std::string::npos);
  const size_t relu = text.find("\"op\":\"Relu\"", target);
  ASSERT_NE(relu, std::string::npos);
  text.replace(relu, 11, "\"op\":\"Tanh\"");
  const std::string edited = (dir() / "false_edited.json").string();
  std::ofstream(edited) << text;
  Ruleset r = load_ruleset(edited);
  const std::string forged_false = (dir() / "false.json").string();
  save_ruleset(r, forged_false);  // the content hash recomputed
  ASSERT_EQ(run("ruleset show " + forged_false).code, 0);
  fs::remove(dir() / "trusted.json");
  auto got = optimize(forged_false);
  EXPECT_EQ(got.code, 2) << got.out;
  EXPECT_NE(got.out.find("error: " + forged_false + ": not a verified ruleset: rule " + id + ": "), std::string::npos) << got.out;
  EXPECT_NE(got.out.find("its numeric check refutes it"), std::string::npos) << got.out;
  EXPECT_FALSE(fs::exists(dir() / "trusted.json"));
  got = optimize(forged_false, "--allow-unverified");
  EXPECT_EQ(got.code, 0) << got.out;
  EXPECT_NE(got.out.find("warning: " + forged_false + ": searching with an unverified ruleset (--allow-unverified): rule " + id), std::string::npos)
      << got.out;
  // A true rule whose unsat core is another's: checked, passes, remembered.
  const std::string swapped = forged("core_swapped.json", any_rule, [](Rule& x) { x.proof->axioms = {"ew_mul_distributes"}; }, id);
  got = optimize(swapped);
  EXPECT_EQ(got.code, 0) << got.out;
  EXPECT_NE(got.out.find("from " + swapped + ": every rule checked numerically (1 rules)"), std::string::npos) << got.out;
  got = optimize(swapped);
  EXPECT_EQ(got.code, 0) << got.out;
  EXPECT_NE(got.out.find("from " + swapped + ": every rule checked numerically before (cached by content hash)"), std::string::npos) << got.out;
  // --reprove re-proves every rule as audit does: the swapped core fails.
  got = optimize(swapped, "--reprove");
  EXPECT_EQ(got.code, 2) << got.out;
  EXPECT_NE(got.out.find("error: " + swapped + ": not a verified ruleset: rule " + id + " fails its re-proof: "), std::string::npos) << got.out;
  // The shipped rules, copied anywhere: pinned, nothing to check.
  const fs::path copy = dir() / "copied-unity.json";
  fs::copy_file(std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json", copy, fs::copy_options::overwrite_existing);
  got = optimize(copy.string());
  EXPECT_EQ(got.code, 0) << got.out;
  EXPECT_NE(got.out.find("from " + copy.string() + ": shipped (content hash pinned)"), std::string::npos) << got.out;
  // And with --reprove even the shipped one is proved again (7 s on 2 cores).
  got = optimize(copy.string(), "--reprove");
  EXPECT_EQ(got.code, 0) << got.out;
  EXPECT_NE(got.out.find("from " + copy.string() + ": every rule re-proved (" + std::to_string(shipped().rules.size()) + " rules, pcgx audit's checks)"),
            std::string::npos) << got.out;
}

// `pcgx axioms check` exited 1 on the shipped axioms: one had no legal
// instance in 10,000 independent draws (UNTESTED).
TEST(Integrity, TheShippedAxiomsPassTheDefaultCheck) {
  const auto r = run("axioms check");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" 0 wrong, 0 untested\n"), std::string::npos) << r.out;
}

// regenerate ran to completion with a planted wrong axiom and shipped rules
// whose proofs cite it; it now checks the axioms first.
TEST(Integrity, RegenerateRefusesAxiomsThatFailTheirCheck) {
  // Searched after the shipped axioms: the planted file joins them.
  const fs::path axioms = dir() / "axioms_planted";
  fs::create_directories(axioms);
  std::ofstream(axioms / "planted.smt2")
      << "(assert (! (forall ((x Tensor) (k Int)) (= (relu (reduce x k)) (reduce (relu x) k))) :named relu_reduce_planted))\n";
  const fs::path out = dir() / "regenerated";
  fs::create_directories(out);
  const auto r = run("regenerate --axioms " + axioms.string() + " --out-dir " + out.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("\nerror: " + (axioms / "planted.smt2").string() + ": axiom relu_reduce_planted is wrong: "), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(out));
}

}  // namespace
}  // namespace pcgx
