#pragma once
// The verifier: proofs of candidate rules against the operator axioms
// (axioms/*.smt2), in the style of Alive2: an SMT layer with a Result type,
// an encoding of PCGs as terms, and thin tools on top. Z3 is included only
// inside verifier/src.
//
// How a rule is proved: both sides become ground terms over an
// uninterpreted Tensor sort. Axioms are instantiated E-matching style from
// those terms, in both directions, for a bounded number of rounds; an
// instance is admitted only when its precondition holds on the concrete
// shapes pcgx's degree inference computes and both sides are legal PCGs of
// the same parallel shape (the axioms' validity domains). Z3 then decides
// whether the admitted instances imply the rule: UNSAT of "instances and not
// (source = target)" is a proof, and its unsat core names the axioms used.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pcgx/rulesets/ruleset.h"

namespace pcgx::verify {

enum class Result { kUnsat, kSat, kTimeout, kError };
std::string_view to_string(Result r);

struct Proof {
  Result result = Result::kError;  // kUnsat: proved
  double seconds = 0;
  std::vector<std::string> axioms;  // names in the unsat core
  std::vector<std::string> instantiated;  // proved: every axiom with an admitted instance
  size_t instances = 0;             // axiom instances admitted
  std::string reason;               // why not proved
  std::string unencoded;            // an operator of the rule with no SMT encoding at all, when that is why
  std::vector<std::string> value_generic;  // proved: Prover::value_generic of the axioms kept
};

// One axiom: where it is written, the registry operators whose symbols it
// uses, and a digest of its content: the assertion and the declaration of
// every symbol it uses, comments and layout aside. A ruleset records the
// digests of the axioms its proofs use (Ruleset::axiom_digests).
struct AxiomInfo {
  std::string name;
  std::string file;
  int line = 0;
  std::vector<std::string> operators;
  std::string digest;
  std::string text;  // the assertion
  bool foreign = false;  // uses a tensor function of no registry operator (kept out of every restriction)
};

struct AxiomSet {
  std::string dir;
  // prelude.smt2, then a declaration of every operator's symbols derived
  // from the registry (OpDef::smt), then declarations in other files.
  std::string declarations;
  std::string text;                 // the declarations, then every assertion in `names` order
  std::vector<std::string> files;   // prelude first, then the files in name order
  std::vector<std::string> names;   // :named labels, in order
  std::vector<AxiomInfo> axioms;    // per name (empty for axioms_from_rules)
  std::string hash;                 // sha256 of `text`
};

// Reads DIR/prelude.smt2 and every other DIR/*.smt2; throws pcgx::Error on
// a missing directory, an unnamed assertion, a name used twice, a prelude
// that declares an operator's symbol itself, or a file Z3 cannot parse
// (named with its own line number; an unknown symbol is said to come from
// a registry entry).
AxiomSet load_axioms(const std::string& dir);
// The same over a search path: every *.smt2 file of every directory, a
// file of a later directory standing for an earlier one's of the same name
// (so an empty linear.smt2 takes Linear's axioms out); the prelude may
// come from any of them.
AxiomSet load_axioms(const std::vector<std::string>& dirs);
// The axioms shipped with pcgx (pcg/resources.h: installed, the source
// tree's axioms/, or $PCGX_AXIOMS).
std::string default_axioms_dir();
// The axioms' search path: the shipped directory, each plugin's
// (pcg/plugin.h), then `extra` (a command's --axioms DIR...).
std::vector<std::string> axiom_search_path(const std::vector<std::string>& extra = {});

// The axioms every operator of which is in `operators` (axioms of the
// shape functions alone included, foreign ones not): all that a proof of a rule over those
// operators may use, so that an unrelated operator's axioms never enter
// it. An empty list keeps every axiom.
AxiomSet restrict_to(const AxiomSet& set, const std::vector<std::string>& operators);
// `set` restricted to the operators `r` declares (Ruleset::operators).
AxiomSet axioms_for(const AxiomSet& set, const Ruleset& r);
// (name, digest) of the named axioms, sorted by name, each once; throws
// pcgx::Error for a name not in `set`.
std::vector<std::pair<std::string, std::string>> axiom_digests(const AxiomSet& set, const std::vector<std::string>& names);

// A ruleset's rules as axioms (after the prelude of `base`): each rule is an
// equality over its inputs, guarded by their parallel state (rank, degree of
// every dimension, replica degree), one axiom per mapped output. Rules the
// encoding cannot express are skipped and named in `skipped`. With these as
// the only axioms, a proof shows a rule derivable from the ruleset.
AxiomSet axioms_from_rules(const Ruleset& rules, const AxiomSet& base, std::vector<std::string>& skipped);

struct ProverOptions {
  unsigned timeout_ms = 2000;
  int rounds = 3;           // instantiation rounds
  size_t max_terms = 3000;  // ground terms per rule
};

// One Z3 context; use one Prover per thread.
class Prover {
 public:
  explicit Prover(const AxiomSet& axioms, ProverOptions options = {});
  ~Prover();
  Prover(const Prover&) = delete;
  Prover& operator=(const Prover&) = delete;

  Proof prove(const Rule& rule);
  // The same with only the axioms named (a stored unsat core): a proof
  // shows the core suffices.
  Proof prove_with(const Rule& rule, const std::vector<std::string>& only);
  // "Op.attr" of each value attribute of `rule` (AttrRole::kValue) that
  // every axiom named in `proof_axioms` (a proof's stored core) passes
  // through as any value, so that the rule holds with any value there
  // (verifier/src/value_generic.h says why). Sorted.
  std::vector<std::string> value_generic(const Rule& rule, const std::vector<std::string>& proof_axioms) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `pcgx axioms check`: every axiom instantiated on small shapes, degrees
// and attributes until `attempts` distinct instances are legal
// (precondition true, both sides legal PCGs of one parallel shape); both
// sides evaluated by the reference interpreter (exact and float) on
// independent random shards. Instances are built (axiom_instances.h): a
// randomized search binds one variable at a time and checks each subterm
// and each conjunct of the precondition as soon as it can, taking turns
// with independent draws. A draw ends the check after 200 x `attempts`
// (1,000 x while none was legal), or once 4 x `attempts` legal draws in a
// row were repeats (an axiom with fewer legal instances). Axioms are
// checked in parallel, each with its own random stream.
inline constexpr int kDefaultAxiomInstances = 50;
struct AxiomCheck {
  std::string name;
  int tried = 0;       // draws
  int legal = 0;       // distinct legal instances
  int mismatches = 0;
  std::string counterexample;
  // A Tensor-valued function of the axiom with no row in the encoding
  // table: why it has no legal instance (the row is missing, not the axiom wrong).
  std::string unencoded;
};
std::vector<AxiomCheck> check_axioms(const AxiomSet& axioms, int attempts, uint64_t seed);
// Only the axioms named in `only`, in the set's order: each row the one
// the whole check gives it (its random stream is its place in the set).
std::vector<AxiomCheck> check_axioms(const AxiomSet& axioms, int attempts, uint64_t seed, const std::vector<std::string>& only);
inline constexpr uint64_t kAxiomCheckSeed = 7;  // `pcgx axioms check`'s
// The default check (kDefaultAxiomInstances, kAxiomCheckSeed): the first
// axiom that is wrong or has no legal instance, named with its file, with
// its counterexample, or nothing when every axiom passes.
std::optional<std::string> axiom_check_failure(const AxiomSet& axioms);

}  // namespace pcgx::verify
