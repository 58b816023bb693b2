#pragma once
// Rule databases (docs/design.md, "Rulesets"). One JSON format serves both the
// generator's candidates ("pcgx.candidates": rules without proofs) and
// verified rulesets ("pcgx.ruleset": every rule with its proof record).
//
//   { "format_version": 1, "kind": "pcgx.ruleset", "name": "unity", "version": 1,
//     "opset": "unity", "operators": ["Linear", ...],
//     "generator": { ...the configuration that produced the candidates... },
//     "axioms": { "linear_replicate": "sha256 of its content", ... } (rulesets only),
//     "axioms_hash": "sha256 of that list" (rulesets only),
//     "stats": { "graphs": 123, ... },
//     "rules": [ { "id": "unity-0001",
//                  "source": <pcgx.graph>, "target": <pcgx.graph>,
//                  "output_map": [[0, 0]],        // source output i -> target output j
//                  "proof": { "result": "proved", "seconds": 0.004, "axioms": [...],
//                             "degree_generic": true,
//                             "value_generic": ["Dropout.rate", ...] } } ],
//     "content_hash": "sha256 of the canonical JSON of everything above,
//                      less the solver times (they vary from run to run)" }
//
// A rule's two graphs use Input/Weight nodes for the rule's variables; nodes
// with the same name on both sides are the same variable.
//
// What the hashes promise. A ruleset records, by content, exactly the axioms
// its proofs use: the union of the rules' unsat cores, each with the digest
// of its assertion and of the declarations of the symbols it mentions
// (verify::AxiomInfo). Its proofs were found with only the axioms of its own
// operators (verify::restrict_to), so an axiom of another operator can
// neither enter a proof nor the file. The content hash therefore changes
// only when the rules, their proofs, or one of the axioms they use changes:
// adding an operator and its axioms leaves every existing ruleset's hash,
// and its file but for the solver times, as they were.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/graph.h"

namespace pcgx {

inline constexpr int kRulesetFormatVersion = 1;
inline constexpr const char* kCandidatesKind = "pcgx.candidates";
inline constexpr const char* kRulesetKind = "pcgx.ruleset";

struct ProofRecord {
  std::string result;                // "proved", "not proved", "timeout"
  double seconds = 0;                // solver time; not covered by the content hash
  std::vector<std::string> axioms;   // the unsat core
  std::string note;
  // Also holds with every degree 2 made any power of two k (evaluated at
  // k = 4 when verified): the search may apply it with degree k.
  bool degree_generic = false;
  // "Op.attr" of each value attribute (AttrRole::kValue) of the rule that
  // every axiom of the proof takes as any value, passed through unchanged
  // (verify::value_generic): the rule holds with any value there, the same
  // one wherever the rule has the same value, and the search matches it so.
  // Sorted.
  std::vector<std::string> value_generic;
};

struct Rule {
  std::string id;
  Graph source;
  Graph target;
  std::vector<std::pair<int, int>> output_map;
  std::optional<ProofRecord> proof;
};

struct Ruleset {
  std::string kind = kCandidatesKind;
  std::string name;
  int64_t version = 1;
  std::string opset;
  std::vector<std::string> operators;
  std::string generator_json = "{}";   // generator configuration, a JSON object
  // (name, digest) of every axiom a proof uses, sorted by name.
  std::vector<std::pair<std::string, std::string>> axiom_digests;
  std::string axioms_hash;  // axioms_hash_of(axiom_digests)
  std::vector<std::pair<std::string, double>> stats;
  std::vector<Rule> rules;
  // Set by load: the hash stored in the file and the one its content has.
  std::string stored_hash;
  std::string computed_hash;
};

// Why the search should not trust `r`, or nothing: it must be a verified
// ruleset (kind pcgx.ruleset) whose stored content hash matches its content
// and whose every rule carries a proof record with result "proved". This
// is what a file can promise by itself; `pcgx audit` re-proves it.
std::optional<std::string> unverified_reason(const Ruleset& r);

// sha256 of "name digest" lines in the given (sorted) order.
std::string axioms_hash_of(const std::vector<std::pair<std::string, std::string>>& digests);

std::string ruleset_to_json(const Ruleset& r);          // with a fresh content hash
Ruleset ruleset_from_json(const std::string& text, const std::string& source);
Ruleset load_ruleset(const std::string& path);
void save_ruleset(const Ruleset& r, const std::string& path);  // atomic

}  // namespace pcgx
