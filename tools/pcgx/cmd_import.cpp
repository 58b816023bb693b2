// pcgx import: an ONNX model into a pcgx graph file and a weights file
// (importer/onnx_import.h).
#include <iostream>

#include "cli_common.h"
#include "pcgx/importer/onnx_import.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/model_info.h"
#include "pcgx/runtime/safetensors.h"

namespace pcgx::cli {

void add_import_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("import", "Import an ONNX model as a pcgx graph (and its initializers as a weights file)");
  static std::string model, output, weights_out, loss = "auto";
  static int64_t batch = 0;
  cmd->add_option("MODEL", model, "ONNX model file (.onnx)")->required();
  cmd->add_option("-o,--output", output, "graph JSON to write (pcgx.graph)")->required();
  cmd->add_option("--weights-out", weights_out, "write the initializers, by Weight name, as safetensors (for --init-weights)");
  cmd->add_option("--loss", loss,
                  "loss head on the first output: auto (cross-entropy against an int64 input 'labels' for [N, classes], "
                  "else MSE against 'target'), cross-entropy, mse, or none (a forward graph)")
      ->capture_default_str();
  cmd->add_option("--batch", batch, "size of a symbolic batch dimension")->check(positive());
  cmd->callback([] {
    importer::ImportOptions o;
    if (loss == "auto") o.loss = importer::LossHead::kAuto;
    else if (loss == "none") o.loss = importer::LossHead::kNone;
    else if (loss == "mse") o.loss = importer::LossHead::kMse;
    else if (loss == "cross-entropy") o.loss = importer::LossHead::kCrossEntropy;
    else throw Error("--loss: unknown loss head '" + loss + "' (auto, cross-entropy, mse, none)");
    name_flags({{"ImportOptions.batch", "--batch"}});
    o.batch = batch;
    check_output_path(output);
    if (!weights_out.empty()) check_output_path(weights_out);
    const importer::ImportedModel m = importer::import_onnx(model, o);
    std::vector<std::pair<std::string, std::string>> files{{output, graph_to_json(m.graph)}};
    if (!weights_out.empty()) files.emplace_back(weights_out, runtime::safetensors_bytes(m.weights, {{"format", "pt"}}));
    write_text_files_atomic(files);
    const ModelInfo info = model_info(m.graph);
    std::cout << "imported " << model << " (opset " << m.opset << "): " << m.graph.size() << " nodes, " << m.weights.size()
              << " weights, " << with_commas(info.parameters) << " parameters\n"
              << "wrote " << output << (weights_out.empty() ? "" : " and " + weights_out) << "\n";
  });
}

}  // namespace pcgx::cli
