#include <iostream>

#include "cli_common.h"
#include "pcgx/pcg/graph_json.h"

namespace pcgx::cli {

void add_export_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "Write a model's PCG as JSON (the format `pcgx info FILE` reads)");
  static std::string model, out;
  static std::vector<std::string> sets;
  cmd->add_option("MODEL", model, "zoo model name or graph JSON file")->required();
  cmd->add_option("-o,--output", out, "output file")->required();
  cmd->add_option("--set", sets, "override a size parameter: key=value (repeatable)");
  cmd->callback([] {
    const Graph g = load_model(model, sets);
    save_graph(g, out);
    std::cerr << "wrote " << out << " (" << g.size() << " nodes)\n";
  });
}

}  // namespace pcgx::cli
