#pragma once
// ONNX models into pcgx graphs (`pcgx import`, and `.onnx` files wherever a
// model is taken). Each ONNX node maps onto registry operators
// (onnx_ops.cpp lists them); initializers become Weight nodes named as in
// the ONNX file, with their values, where an operator takes them as
// weights, and stay constants where they are shapes or scalars. A model
// with operators pcgx does not map is one error listing every such
// operator type with its count and first node: never a partial graph.
//
// An exported model computes a forward pass; training needs a loss, so a
// loss head is added on the first output unless asked not to: softmax
// cross-entropy against an int64 input "labels" for a [N, classes] output,
// MSE against an input "target" of the output's shape otherwise.
#include <cstdint>
#include <map>
#include <string>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/tensor.h"

namespace pcgx::importer {

enum class LossHead : uint8_t { kAuto, kNone, kMse, kCrossEntropy };

struct ImportOptions {
  LossHead loss = LossHead::kAuto;
  // The value of every symbolic input dimension (an exported batch axis);
  // 0: a symbolic dimension is an error naming it.
  int64_t batch = 0;
};

struct ImportedModel {
  Graph graph;
  std::map<std::string, Tensor<float>> weights;  // by Weight name: the initializers' values
  int64_t opset = 0;                             // of the default domain
};

// Throws pcgx::Error naming the file (and node or field) for an unreadable
// or malformed file, unsupported operators, or shapes pcgx cannot take.
ImportedModel import_onnx(const std::string& path, const ImportOptions& options = {});
// Whether this build reads ONNX (libonnx-dev was found); `why` when not.
bool onnx_available(std::string* why = nullptr);

}  // namespace pcgx::importer
