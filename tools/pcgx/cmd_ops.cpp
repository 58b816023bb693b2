#include <iomanip>
#include <iostream>

#include "cli_common.h"
#include "pcgx/pcg/registry.h"

namespace pcgx::cli {

void add_ops_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("ops", "List the operator registry with attributes");
  cmd->callback([] {
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
