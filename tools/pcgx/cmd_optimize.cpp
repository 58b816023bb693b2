// pcgx optimize: flags into a runner::OptimizeRequest (optimize_flags.h),
// one search, the report printed and the strategy written.
#include <chrono>
#include <iostream>
#include <unistd.h>

#include "cli_common.h"
#include "deferred_line.h"
#include "optimize_flags.h"
#include "print_reports.h"
#include "pcgx/pcg/graph_json.h"  // write_text_file_atomic
#include "pcgx/search/strategy_json.h"

namespace pcgx::cli {

void add_optimize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("optimize", "Find the fastest parallel strategy for a model on a machine (Unity's search)");
  static OptimizeFlags f;
  add_optimize_options(cmd, f);
  cmd->callback([] {
    runner::OptimizeRequest q = optimize_request(f);
    const bool tty = isatty(2);
    const auto start = std::chrono::steady_clock::now();
    auto last = start;
    DeferredLine header("optimizing " + q.model.name() + " (" + std::to_string(q.model.size()) + " nodes) on " +
                        std::to_string(q.machine.num_devices()) + " x " + q.machine.device.name + " (" + q.machine.name +
                        ") with --search " + std::string(search::name(q.search.algorithm)) + "\n");
    q.search.progress = [&](const search::SearchProgress& p) {
      // Decided here once: print_search_progress prints whenever this
      // clock reading says it is time (its own reading is later). A
      // milestone (a step of its own starts) at once, once the run has
      // taken a second.
      const auto now = std::chrono::steady_clock::now();
      if (p.milestone ? now - start < std::chrono::seconds(1) : now - last < std::chrono::milliseconds(tty ? 100 : 2000)) return;
      header.print();
      print_search_progress(p, tty, last);
    };
    const runner::OptimizeReport rep = runner::optimize(q);
    // Refused before anything is printed: the error line alone.
    if (const search::Estimate& e = rep.result.search.strategy.estimate; !e.feasible) throw Error("no feasible strategy: " + e.infeasible);
    header.print();
    if (tty) std::cerr << "\r\033[K";
    print_ruleset_notes(std::cerr, rep);
    print_optimize_report(std::cout, q, rep, f.quiet ? ReportDetail::kSummary : ReportDetail::kOperators);
    search::save_strategy(rep.file, f.out);
    std::cerr << "wrote " << f.out << "\n";
    if (!f.dot.empty()) write_text_file_atomic(f.dot, search::strategy_to_dot(rep.result.search.strategy)), std::cerr << "wrote " << f.dot << "\n";
  });
}

}  // namespace pcgx::cli
