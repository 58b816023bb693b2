// pcgx plan show: the plan a strategy amounts to (docs/plans.md).
#include <iostream>

#include "cli_common.h"
#include "pcgx/pcg/graph_json.h"  // write_text_file_atomic
#include "pcgx/search/strategy_json.h"
#include "pcgx/search/user_plan.h"

namespace pcgx::cli {

void add_plan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Plans written by hand (docs/plans.md): `plan show STRATEGY` prints the plan a strategy amounts to");
  cmd->require_subcommand(1);
  auto* show = cmd->add_subcommand("show", "The plan a strategy file amounts to, in the format `optimize --plan` reads");
  static std::string strategy, out;
  show->add_option("STRATEGY", strategy, "strategy file (pcgx optimize -o)")->required();
  show->add_option("-o,--output", out, "write the plan here instead of printing it");
  show->callback([] {
    const search::StrategyFile f = search::load_strategy(strategy);
    search::UserPlan plan = search::plan_of_strategy(f.strategy.graph);
    plan.description = "what " + strategy + " (" + f.search + ", " + std::to_string(f.devices) + " devices) runs";
    if (!f.applied.empty())
      std::cerr << "note: the strategy applies " << f.applied.size()
                << " substitution(s); a plan states how the model's own operators run, so those are not in it\n";
    if (f.pipeline_stages > 1) std::cerr << "note: the strategy is pipelined; a plan states no pipeline stages yet\n";
    const std::string text = search::plan_to_json(plan);
    if (out.empty()) {
      std::cout << text;
      return;
    }
    write_text_file_atomic(out, text);
    std::cerr << "wrote " << out << " (" << plan.rules.size() << (plan.rules.size() == 1 ? " rule" : " rules") << ")\n";
  });
}

}  // namespace pcgx::cli
