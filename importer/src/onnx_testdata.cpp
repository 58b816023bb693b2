#include "pcgx/importer/onnx_testdata.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "onnx_context.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/interpreter.h"

namespace pcgx::importer {
namespace {

namespace fs = std::filesystem;

onnx::TensorProto read_tensor(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  onnx::TensorProto t;
  if (!in || !t.ParseFromIstream(&in)) throw Error(p.string() + ": not a TensorProto");
  return t;
}

}  // namespace

TestCaseResult run_onnx_test_case(const std::string& dir) {
  TestCaseResult r;
  ImportedModel m;
  try {
    ImportOptions o;
    o.loss = LossHead::kNone;
    m = import_onnx((fs::path(dir) / "model.onnx").string(), o);
    r.imported = true;
    // The case's inputs by name (the .pb files name them; else in order).
    const fs::path data = fs::path(dir) / "test_data_set_0";
    std::map<std::string, Tensor<float>> inputs;
    std::vector<Tensor<float>> ordered;
    for (int i = 0; fs::exists(data / ("input_" + std::to_string(i) + ".pb")); ++i) {
      const onnx::TensorProto t = read_tensor(data / ("input_" + std::to_string(i) + ".pb"));
      Tensor<float> v = constant_of(t, dir).as_tensor();
      if (!t.name().empty()) inputs[t.name()] = v;
      ordered.push_back(std::move(v));
    }
    size_t next = 0;
    std::map<std::string, size_t> order;
    const auto values = evaluate<float>(m.graph, [&](const Node& n) -> Tensor<float> {
      if (n.op->is_weight) return m.weights.at(n.name);
      if (const auto it = inputs.find(n.name); it != inputs.end()) return it->second;
      if (!order.count(n.name)) order[n.name] = next++;
      if (order[n.name] >= ordered.size()) throw Error(dir + ": no test input for " + n.name);
      return ordered[order[n.name]];
    });
    const Tensor<float> want = constant_of(read_tensor(data / "output_0.pb"), dir).as_tensor();
    const TensorRef out = m.graph.outputs().at(0);
    const Tensor<float> got = gather_slot(values[static_cast<size_t>(out.node)][static_cast<size_t>(out.output)], 0);
    if (got.data.size() != want.data.size()) {
      r.why = "output has " + std::to_string(got.data.size()) + " elements, the reference " + std::to_string(want.data.size());
      return r;
    }
    for (size_t i = 0; i < got.data.size(); ++i)
      if (!(std::fabs(got.data[i] - want.data[i]) <= 1e-7 + 1e-3 * std::fabs(want.data[i]))) {
        r.why = "output element " + std::to_string(i) + ": " + std::to_string(got.data[i]) + ", the reference " + std::to_string(want.data[i]);
        return r;
      }
    r.reproduced = true;
  } catch (const std::exception& e) {
    r.why = e.what();
  }
  return r;
}

}  // namespace pcgx::importer
