#pragma once
// A PCG: a DAG of operator nodes. Nodes are appended with their inputs
// already present, so node ids are stable and id order is a topological
// order. Every node is validated (arity, attributes, shapes, degrees) when it
// is added: a Graph that exists is a valid graph.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pcgx/pcg/attributes.h"
#include "pcgx/pcg/operator.h"
#include "pcgx/pcg/parallel_tensor_shape.h"

namespace pcgx {

using NodeId = int32_t;

struct TensorRef {
  NodeId node = -1;
  int32_t output = 0;
  auto operator<=>(const TensorRef&) const = default;
};

struct Node {
  NodeId id = -1;
  const OpDef* op = nullptr;
  Attributes attrs;  // normalized: every declared attribute present
  std::vector<TensorRef> inputs;
  std::vector<ParallelTensorShape> outputs;
  std::string name;
};

// "node 4 'fc1' (Linear)": how messages name a node.
std::string describe(const Node& n);

class Graph {
 public:
  Graph() = default;
  explicit Graph(std::string name) : name_(std::move(name)) {}

  // Validates and appends a node; throws pcgx::Error naming the node, the
  // offending input and the reason.
  NodeId add(std::string_view op, Attributes attrs, std::vector<TensorRef> inputs,
             std::string name = "");
  NodeId add(const OpDef& op, Attributes attrs, std::vector<TensorRef> inputs,
             std::string name = "");
  // Appends a copy of node `id` of `src` reading `inputs`. When they have
  // the shapes its inputs have in `src`, the node was validated there and
  // its output shapes are reused (rewriting a graph copies most of it, and
  // inference was most of the copy's time); otherwise as add().
  NodeId add_like(const Graph& src, NodeId id, std::vector<TensorRef> inputs);

  const Node& node(NodeId id) const { return nodes_.at(static_cast<size_t>(id)); }
  std::span<const Node> nodes() const { return nodes_; }
  size_t size() const { return nodes_.size(); }
  const ParallelTensorShape& shape(TensorRef t) const;
  TensorType type(TensorRef t) const;
  // The logical types of a node's inputs, as its operator's inference reads them.
  std::vector<TensorType> input_types(const Node& n) const;

  void add_output(TensorRef t);
  const std::vector<TensorRef>& outputs() const { return outputs_; }

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  // For every node, the (consumer node, input index) pairs reading each output.
  std::vector<std::vector<std::pair<NodeId, int>>> consumers() const;

 private:
  std::string name_;
  std::vector<Node> nodes_;
  std::vector<TensorRef> outputs_;
};

// Output shapes of an operator instance given its input shapes (shape and
// degree inference together). Throws pcgx::Error prefixed with `what`.
std::vector<ParallelTensorShape> infer_output_shapes(const OpDef& op, const Attributes& attrs,
                                                     std::span<const ParallelTensorShape> inputs,
                                                     const std::string& what);

}  // namespace pcgx
