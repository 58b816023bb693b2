#pragma once
// The state of one import (internal to importer/): the graph being built,
// what each ONNX value name stands for, and the weights made so far.
#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pcgx/importer/onnx_import.h"
#include "pcgx/pcg/graph_builder.h"

namespace pcgx::importer {

// An initializer or Constant: its values, kept as doubles (float32 and
// int64 both fit the uses: weights, shapes, scalars).
struct Constant {
  std::vector<int64_t> shape;
  std::vector<double> values;
  bool integer = false;
  std::string source;  // the initializer it was computed from by data movement alone (a transposed weight)
  Tensor<float> as_tensor() const;
};

// An operator put back whole from an exporter's pieces (onnx_patterns.cpp).
struct Fused {
  std::string op;  // "Gelu" or "LayerNorm"
  std::string x, gamma, beta;  // ONNX value names (gamma empty: no affine)
  double eps = 0;
};

class Context {
 public:
  // The model is named after its file: exporters name graphs "torch_jit"
  // or "main_graph".
  Context(std::string path, const ImportOptions& options, const onnx::GraphProto& graph, std::string name)
      : path_(std::move(path)), options_(options), graph_(graph), b_(std::move(name)) {}

  // The ONNX graph, for a handler's look-ahead (a bias Add to fold).
  const onnx::GraphProto& graph() const { return graph_; }
  GraphBuilder& builder() { return b_; }
  const ImportOptions& options() const { return options_; }
  // "FILE: node NAME (TYPE)", for errors.
  std::string where(const onnx::NodeProto& n) const;
  std::string where() const { return path_; }

  void add_constant(const std::string& name, Constant c) { constants_[name] = std::move(c); }
  void add_input(const onnx::ValueInfoProto& v) { inputs_[v.name()] = v; }
  void bind(const std::string& name, TensorRef t) { refs_[name] = t; }
  void alias(const std::string& to, const std::string& from);

  const Constant* constant(const std::string& name) const;
  // The value as a graph tensor: a bound result, an input (made on first
  // use; `index_range` for an index input), or a float initializer made a
  // Weight named after it.
  TensorRef tensor(const std::string& name, int64_t index_range = 0);
  // A Weight named `name` holding `value` (an initializer reshaped or
  // transposed as the operator takes it).
  TensorRef weight(const std::string& name, Tensor<float> value);
  // The name a weight made of constant `name` takes: its initializer's.
  std::string weight_name(const std::string& name) const {
    const Constant* k = constant(name);
    return k && !k->source.empty() ? k->source : name;
  }
  bool is_constant(const std::string& name) const { return constants_.count(name) && !refs_.count(name); }
  int consumers(const std::string& name) const {
    const auto it = consumers_.find(name);
    return it == consumers_.end() ? 0 : it->second;
  }
  void count_consumer(const std::string& name) { ++consumers_[name]; }
  // A zero Pad of the spatial dimensions, kept for the Conv or
  // AveragePool that reads it to take as its own padding.
  struct Padding {
    std::string input;
    int64_t h = 0, w = 0;
  };
  void add_padding(const std::string& output, Padding p) { paddings_[output] = std::move(p); }
  const Padding* padding(const std::string& name) const {
    const auto it = paddings_.find(name);
    return it == paddings_.end() ? nullptr : &it->second;
  }
  // Nodes a handler took over (a bias Add folded into its Linear).
  void skip(const std::string& output) { skipped_.push_back(output); }
  bool skipped(const onnx::NodeProto& n) const;
  void fuse(const std::string& output, Fused f) { fused_[output] = std::move(f); }
  const Fused* fused(const std::string& output) const {
    const auto it = fused_.find(output);
    return it == fused_.end() ? nullptr : &it->second;
  }
  std::map<std::string, Tensor<float>>& weights() { return weights_; }
  // Whether some input dimension was symbolic (and took options().batch).
  bool used_batch() const { return used_batch_; }

 private:
  std::string path_;
  ImportOptions options_;
  const onnx::GraphProto& graph_;
  GraphBuilder b_;
  std::map<std::string, Constant> constants_;
  std::map<std::string, onnx::ValueInfoProto> inputs_;
  std::map<std::string, TensorRef> refs_;
  std::map<std::string, int> consumers_;
  std::vector<std::string> skipped_;
  std::map<std::string, Padding> paddings_;
  std::map<std::string, Fused> fused_;
  bool used_batch_ = false;
  std::map<std::string, Tensor<float>> weights_;
};

// Attributes of a node, by name, with defaults.
int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t fallback);
double attr_float(const onnx::NodeProto& n, const std::string& name, double fallback);
std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name, std::vector<int64_t> fallback = {});

// A TensorProto's values (raw or typed fields); throws naming `where`.
Constant constant_of(const onnx::TensorProto& t, const std::string& where);

// Computes a node of constants (and Shape of any tensor) into a constant,
// when it can: true when it did.
bool fold_constant(Context& c, const onnx::NodeProto& n);

// Finds the pieces of fused operators (before any node is mapped), and
// maps the last piece of one.
void fuse_patterns(Context& c);
void emit_fused(Context& c, const onnx::NodeProto& n);

// One ONNX operator onto the builder; throws pcgx::Error naming the node
// for attribute values pcgx cannot take.
using Handler = void (*)(Context&, const onnx::NodeProto&);
// The handler of an operator type of the default domain, or null.
Handler handler_of(const std::string& op_type);

}  // namespace pcgx::importer
