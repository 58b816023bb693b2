#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_common.h"
#include "pcgx/pcg/model_info.h"

namespace pcgx::cli {

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Print a model's operators, parameters, FLOPs and activation memory");
  static std::string model;
  static std::vector<std::string> sets;
  static bool as_json = false;
  cmd->add_option("MODEL", model, "zoo model name (see `pcgx models`) or graph JSON file")->required();
  cmd->add_option("--set", sets, "override a size parameter: key=value (repeatable)");
  cmd->add_flag("--json", as_json, "print the figures as JSON");
  cmd->callback([] {
    const Graph g = load_model(model, sets);
    const ModelInfo info = model_info(g);
    if (as_json) {
      nlohmann::json j{{"model", g.name()},
                       {"operators", info.operators},
                       {"op_counts", info.op_counts},
                       {"parameters", info.parameters},
                       {"batch_size", info.batch_size},
                       {"forward_flops", info.forward_flops},
                       {"forward_bytes", info.forward_bytes},
                       {"training_flops", info.training_flops},
                       {"activation_bytes", info.activation_bytes},
                       {"activation_bytes_per_sample", info.activation_bytes_per_sample}};
      std::cout << j.dump(2) << "\n";
      return;
    }
    auto row = [](const std::string& k, const std::string& v) { std::cout << std::left << std::setw(24) << k << v << "\n"; };
    row("model", g.name());
    if (const ModelSpec* spec = find_model(model)) {
      row("description", spec->description);
      row("source", spec->source);
      ModelParams p = spec->defaults;
      for (const auto& s : sets) p[s.substr(0, s.find('='))] = std::stoll(s.substr(s.find('=') + 1));
      std::ostringstream os;
      for (const auto& [k, v] : p) os << k << "=" << v << " ";
      row("size parameters", os.str());
    }
    row("parameters", with_commas(info.parameters) + " (" + human_count(static_cast<double>(info.parameters)) + ")");
    row("batch size", std::to_string(info.batch_size));
    row("FLOPs per step", human_flops(info.training_flops) + " (forward " + human_flops(info.forward_flops) +
                              "; training = 3 x forward)");
    row("memory traffic", human_bytes(info.forward_bytes) + " per forward pass");
    row("activation memory", human_bytes(info.activation_bytes_per_sample) + " per sample (" +
                                 human_bytes(info.activation_bytes) + " per step, float32)");
    row("operators", std::to_string(info.operators));
    std::vector<std::pair<int64_t, std::string>> counts;
    for (const auto& [op, n] : info.op_counts) counts.push_back({-n, op});
    std::sort(counts.begin(), counts.end());
    for (const auto& [n, op] : counts) row("  " + op, std::to_string(-n));
  });
}

}  // namespace pcgx::cli
