#include <algorithm>
#include <iomanip>
#include <iostream>

#include "cli_common.h"
#include "pcgx/generator/opset.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/registry.h"
#include "pcgx/rulegen/regenerate.h"
#include "pcgx/verifier/op_coverage.h"

namespace pcgx::cli {
namespace {

// `pcgx ops check NAME`: what one operator has and lacks, for whoever adds it.
// `choice`: a name, or a name with attribute values for the generator, as
// --ops takes it ("Pool2D(kernel_h=2,kernel_w=2)").
int check_op(const std::string& choice, bool run_checks, const std::vector<std::string>& axiom_dirs) {
  const std::string name = choice.substr(0, choice.find('('));
  const OpDef* op = OpRegistry::global().find(name);
  if (!op) throw Error("ops check: unknown operator '" + name + "' (`pcgx ops` lists them)");
  std::vector<std::string> missing;
  auto yes = [](bool b) { return b ? "yes" : "NO"; };
  const bool compute = op->op_class == OpClass::kCompute;
  std::cout << op->name << " (" << (compute ? "compute" : op->op_class == OpClass::kParallel ? "parallel" : "source") << "): " << op->summary
            << "\n";
  if (op->op_class == OpClass::kSource) return 0;
  if (compute) {
    std::cout << "  kernels         float " << yes(op->kernel_f32 != nullptr) << ", exact (mod p) " << yes(op->kernel_mod != nullptr) << "\n"
              << "  gradient        " << yes(op->grad_f32 != nullptr) << "\n";
    if (!op->kernel_f32) missing.push_back("a float kernel (the runtime's)");
    if (!op->kernel_mod) missing.push_back("an exact kernel (the generator's fingerprints)");
    if (!op->grad_f32) missing.push_back("a gradient rule (training)");
  } else {
    std::cout << "  shard-level     evaluation " << yes(op->shard_f32 != nullptr) << ", gradient " << yes(op->shard_grad_f32 != nullptr) << "\n";
  }
  const verify::AxiomSet axioms = verify::load_axioms(verify::axiom_search_path(axiom_dirs));
  const verify::OpCoverage c = verify::op_coverage(op->name, axioms, run_checks);
  std::string symbols;
  for (const auto& s : c.symbols) symbols += (symbols.empty() ? "" : ", ") + s;
  std::cout << "  encoding        " << (symbols.empty() ? "NO (its registry entry has no OpDef::smt)" : symbols) << "\n";
  for (const auto& d : c.declarations) std::cout << "                  " << d << "\n";
  if (c.symbols.empty()) missing.push_back("an SMT encoding: no rule of it can be proved");
  std::map<std::string, int> per_file;
  int failing = 0, untested = 0;
  for (const auto& a : c.axioms) {
    ++per_file[a.file];
    if (a.checked && a.check.mismatches > 0) ++failing, std::cout << "  WRONG axiom     " << a.name << ": " << a.check.counterexample << "\n";
    if (a.checked && a.check.legal == 0) ++untested, std::cout << "  UNTESTED axiom  " << a.name << " (no legal instance)\n";
  }
  std::cout << "  axioms          " << c.axioms.size();
  for (const auto& [file, n] : per_file) std::cout << (file == per_file.begin()->first ? ": " : ", ") << n << " in " << file;
  if (run_checks && !c.axioms.empty())
    std::cout << (failing + untested == 0 ? "; every one holds on its instances" : "; " + std::to_string(failing + untested) + " fail the check");
  std::cout << "\n";
  if (c.axioms.empty() && !c.symbols.empty()) missing.push_back("axioms (an axioms/*.smt2 file): its parallel forms cannot be proved");
  if (failing) missing.push_back(std::to_string(failing) + " wrong axiom(s)");
  if (untested) missing.push_back(std::to_string(untested) + " axiom(s) without a legal instance");
  if (compute && run_checks && !c.symbols.empty() && failing == 0) {
    const rulegen::ParallelForms pf = rulegen::prove_parallel_forms(choice, axioms);
    const std::string family = "'" + choice + "," + rulegen::kParallelOperators + "'";
    if (!pf.not_generated.empty()) {
      std::cout << "  parallel forms  not generated: " << pf.not_generated << "\n";
    } else {
      std::cout << "  parallel forms  " << pf.proved << " of " << pf.candidates << " two-operator candidates with " << rulegen::kParallelOperators
                << " proved\n";
      if (pf.proved < pf.candidates)
        missing.push_back(std::to_string(pf.candidates - pf.proved) + " parallel form(s) unproved: pcgx regenerate --ops " + family +
                          " --max-ops 2 lists them");
    }
  }
  std::string sets;
  for (const auto& s : gen::named_opsets()) {
    const auto ops = s.operators();
    if (std::find(ops.begin(), ops.end(), op->name) != ops.end()) sets += (sets.empty() ? "" : ", ") + s.name;
  }
  std::cout << "  opsets          " << (sets.empty() ? "none (rulesets/opsets/*.json; or pcgx generate --ops)" : sets) << "\n";
  if (missing.empty()) {
    std::cout << "  missing         nothing\n";
    return 0;
  }
  for (const auto& m : missing) std::cout << "  missing         " << m << "\n";
  return 1;
}

}  // namespace

void add_ops_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("ops", "List the operator registry with attributes; `ops check NAME`: what one operator has and lacks");
  auto* check = cmd->add_subcommand(
      "check", "What one operator has and lacks: kernels, gradient, SMT encoding, axioms and their check, parallel forms proved, opsets");
  static std::string name;
  static bool no_check = false;
  static std::vector<std::string> axioms;
  check->add_option("NAME", name, "operator name (`pcgx ops` lists them), with attribute values where the generator needs them: 'Pool2D(kernel_h=2,kernel_w=2)'")->required();
  check->add_flag("--no-check", no_check, "list the axioms without checking them or proving the parallel forms (seconds)");
  check->add_option("--axioms", axioms, kAxiomsHelp)->check(CLI::ExistingDirectory);
  check->callback([] {
    if (const int rc = check_op(name, !no_check, axioms); rc != 0) throw CLI::RuntimeError(rc);
  });
  cmd->callback([cmd, check] {
    if (cmd->got_subcommand(check)) return;
    for (const OpDef* op : OpRegistry::global().all()) {
      const char* cls = op->op_class == OpClass::kSource ? "source" : op->op_class == OpClass::kParallel ? "parallel" : "compute";
      std::cout << std::left << std::setw(20) << op->name << std::setw(10) << cls << op->summary << "\n";
      for (const auto& a : op->attrs) {
        std::cout << "    " << std::setw(14) << a.name << std::setw(18) << to_string(a.type);
        std::cout << (a.default_value ? "default " + to_string(*a.default_value) : std::string("required"));
        std::cout << "  " << a.doc << "\n";
      }
    }
  });
}

}  // namespace pcgx::cli
