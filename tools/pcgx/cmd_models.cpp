#include <iomanip>
#include <iostream>

#include "cli_common.h"

namespace pcgx::cli {

void add_models_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("models", "List the bundled model zoo");
  cmd->callback([] {
    std::cout << std::left << std::setw(20) << "model" << "description\n";
    for (const auto& spec : model_zoo()) std::cout << std::setw(20) << spec.name << spec.description << "\n";
    std::cout << "\n`pcgx info MODEL` shows a model's size; `--set key=value` changes a size parameter.\n";
  });
}

}  // namespace pcgx::cli
