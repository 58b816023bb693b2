// pcgx run: flags into a runner::TrainRequest (run_flags.h), training, the
// report printed. Under MPI every rank runs this; rank 0 speaks for all.
#include <chrono>
#include <iostream>
#include <unistd.h>

#include "cli_common.h"
#include "print_reports.h"
#include "run_flags.h"

namespace pcgx::cli {

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Train a model (or a strategy file from `pcgx optimize`) on N devices with the runtime");
  static RunFlags f;
  add_run_options(cmd, f);
  cmd->callback([] {
    runner::ChosenBackend chosen = choose_backend(f.backend);
    runtime::MpiWorld* world = chosen.world.get();
    on_every_rank(world, [&] {
      runner::TrainRequest& q = run_request(f, chosen.kind);
      const bool tty = isatty(2);
      auto last = std::chrono::steady_clock::now() - std::chrono::hours(1);
      q.say = [](const std::string& line) { std::cerr << with_flags(line) << "\n"; };
      q.progress = [&](const runtime::StepReport& r, int64_t batch) { print_progress(r, batch, tty, last); };
      const runner::TrainReport rep = runner::train(q, world);
      if (!rep.rank0) return;
      print_train_report(std::cout, rep);
      for (const auto& [path, what] : rep.written) std::cerr << "wrote " << path << (what.empty() ? "" : " (" + what + ")") << "\n";
    });
  });
}

}  // namespace pcgx::cli
