#include "pcgx/pcg/graph.h"

#include "pcgx/pcg/degree_inference.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/registry.h"

namespace pcgx {

bool keeps_value(DataMove m) {
  switch (m) {
    case DataMove::kRepartition:
    case DataMove::kCombine:
    case DataMove::kReplicate:
    case DataMove::kPipeline:
    case DataMove::kBatch: return true;
    default: return false;
  }
}

std::string OpDef::input_name(int i) const {
  if (i < static_cast<int>(input_names.size())) return input_names[static_cast<size_t>(i)];
  std::string name = input_names.empty() ? std::string("x") : input_names.back();
  name += std::to_string(i);
  return name;
}

int64_t tensor_bytes(const TensorType& t) { return product(t.shape) * byte_size(t.dtype); }

double memory_bytes(const OpDef& op, const Attributes& attrs, std::span<const TensorType> in,
                    std::span<const TensorType> out, Precision precision) {
  if (op.bytes) return op.bytes(attrs, in, out) * static_cast<double>(activation_bytes(precision)) / 4.0;
  auto bytes = [&](const TensorType& t) { return static_cast<double>(product(t.shape) * element_bytes(t.dtype, precision)); };
  double b = 0;
  for (const auto& t : in) b += bytes(t);
  for (const auto& t : out) b += bytes(t);
  return b;
}

BackwardReads backward_reads(const OpDef& op, const Attributes& attrs) {
  if (op.is_shard_level(attrs) || op.op_class != OpClass::kCompute) return {0, 0};
  return op.backward_reads ? op.backward_reads(attrs) : BackwardReads{};
}

std::string describe(const Node& n) {
  std::string s = "node " + std::to_string(n.id);
  if (!n.name.empty()) s += " '" + n.name + "'";
  return s + " (" + (n.op ? n.op->name : "?") + ")";
}

std::vector<ParallelTensorShape> infer_output_shapes(const OpDef& op, const Attributes& attrs,
                                                     std::span<const ParallelTensorShape> inputs,
                                                     const std::string& what) {
  try {
    std::vector<TensorType> in_types;
    in_types.reserve(inputs.size());
    for (const auto& s : inputs) in_types.push_back({s.logical_shape(), s.dtype});
    std::vector<TensorType> types = op.infer_types(attrs, in_types);
    std::vector<ParallelTensorShape> out;
    if (op.op_class == OpClass::kSource || op.is_shard_level(attrs)) {
      out = op.infer_parallel(attrs, inputs);
    } else {
      out = infer_degrees(op, attrs, inputs, types).outputs;
    }
    for (size_t o = 0; o < out.size(); ++o)
      if (auto reason = out[o].invalid_reason()) throw Error("output " + std::to_string(o) + ": " + *reason);
    return out;
  } catch (const FileError&) {
    throw;
  } catch (const Error& e) {
    throw Error(what + ": " + e.what());
  }
}

NodeId Graph::add(std::string_view op, Attributes attrs, std::vector<TensorRef> inputs, std::string name) {
  const OpDef* def = OpRegistry::global().find(op);
  if (!def) throw Error("node " + std::to_string(nodes_.size()) + (name.empty() ? "" : " '" + name + "'") +
                        ": unknown operator '" + std::string(op) + "'");
  return add(*def, std::move(attrs), std::move(inputs), std::move(name));
}

NodeId Graph::add_like(const Graph& src, NodeId id, std::vector<TensorRef> inputs) {
  const Node& from = src.node(id);
  bool same = inputs.size() == from.inputs.size();
  for (size_t i = 0; i < inputs.size() && same; ++i) {
    const TensorRef t = inputs[i];
    same = t.node >= 0 && static_cast<size_t>(t.node) < nodes_.size() && t.output >= 0 &&
           static_cast<size_t>(t.output) < nodes_[static_cast<size_t>(t.node)].outputs.size() && shape(t) == src.shape(from.inputs[i]);
  }
  if (!same) return add(*from.op, from.attrs, std::move(inputs), from.name);
  Node n;
  n.id = static_cast<NodeId>(nodes_.size());
  n.op = from.op;
  n.name = from.name;
  n.attrs = from.attrs;
  n.inputs = std::move(inputs);
  n.outputs = from.outputs;
  nodes_.push_back(std::move(n));
  return nodes_.back().id;
}

NodeId Graph::add(const OpDef& op, Attributes attrs, std::vector<TensorRef> inputs, std::string name) {
  Node n;
  n.id = static_cast<NodeId>(nodes_.size());
  n.op = &op;
  n.name = std::move(name);
  const std::string what = describe(n);
  n.attrs = normalize_attributes(op.attrs, attrs, what);

  const int count = static_cast<int>(inputs.size());
  if (op.arity) {
    const int want = op.arity(n.attrs);
    if (count != want)
      throw Error(what + ": takes " + std::to_string(want) + " input" + (want == 1 ? "" : "s") + ", got " +
                  std::to_string(count));
  } else if (count < op.min_inputs || (op.max_inputs >= 0 && count > op.max_inputs)) {
    std::string want = op.max_inputs < 0 ? "at least " + std::to_string(op.min_inputs)
                       : op.min_inputs == op.max_inputs
                           ? std::to_string(op.min_inputs)
                           : std::to_string(op.min_inputs) + " to " + std::to_string(op.max_inputs);
    throw Error(what + ": takes " + want + " inputs, got " + std::to_string(count));
  }
  std::vector<ParallelTensorShape> in_shapes;
  in_shapes.reserve(inputs.size());
  for (int i = 0; i < count; ++i) {
    const TensorRef& t = inputs[static_cast<size_t>(i)];
    if (t.node < 0 || t.node >= n.id)
      throw Error(what + ": input " + std::to_string(i) + " (" + op.input_name(i) + ") refers to node " +
                  std::to_string(t.node) + ", which does not precede it");
    const Node& src = nodes_[static_cast<size_t>(t.node)];
    if (t.output < 0 || t.output >= static_cast<int>(src.outputs.size()))
      throw Error(what + ": input " + std::to_string(i) + " (" + op.input_name(i) + ") refers to output " +
                  std::to_string(t.output) + " of " + describe(src) + ", which has " +
                  std::to_string(src.outputs.size()));
    in_shapes.push_back(src.outputs[static_cast<size_t>(t.output)]);
  }
  n.outputs = infer_output_shapes(op, n.attrs, in_shapes, what);
  n.inputs = std::move(inputs);
  nodes_.push_back(std::move(n));
  return nodes_.back().id;
}

const ParallelTensorShape& Graph::shape(TensorRef t) const {
  return node(t.node).outputs.at(static_cast<size_t>(t.output));
}

TensorType Graph::type(TensorRef t) const {
  const auto& s = shape(t);
  return {s.logical_shape(), s.dtype};
}

std::vector<TensorType> Graph::input_types(const Node& n) const {
  std::vector<TensorType> t;
  for (const TensorRef& i : n.inputs) t.push_back(type(i));
  return t;
}

void Graph::add_output(TensorRef t) {
  if (t.node < 0 || t.node >= static_cast<NodeId>(nodes_.size()) ||
      t.output >= static_cast<int>(nodes_[static_cast<size_t>(t.node)].outputs.size()) || t.output < 0)
    throw Error("graph output refers to a missing tensor (node " + std::to_string(t.node) + ", output " +
                std::to_string(t.output) + ")");
  outputs_.push_back(t);
}

std::vector<std::vector<std::pair<NodeId, int>>> Graph::consumers() const {
  std::vector<std::vector<std::pair<NodeId, int>>> c(nodes_.size());
  for (const auto& n : nodes_)
    for (size_t i = 0; i < n.inputs.size(); ++i) c[static_cast<size_t>(n.inputs[i].node)].push_back({n.id, static_cast<int>(i)});
  return c;
}

}  // namespace pcgx
