#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "onnx_context.h"
#include "pcgx/pcg/error.h"

namespace pcgx::importer {

Tensor<float> Constant::as_tensor() const {
  // (Built from the values, not zero-filled first: a model's weights are
  // most of its file.)
  Tensor<float> t;
  t.shape = shape;
  t.data.assign(values.begin(), values.end());
  return t;
}

std::string Context::where(const onnx::NodeProto& n) const {
  return path_ + ": node " + (n.name().empty() ? (n.output_size() ? n.output(0) : "?") : n.name()) + " (" + n.op_type() + ")";
}

void Context::alias(const std::string& to, const std::string& from) {
  if (const auto it = refs_.find(from); it != refs_.end()) refs_[to] = it->second;
  else if (const auto c = constants_.find(from); c != constants_.end()) constants_[to] = c->second;
  else refs_[to] = tensor(from);
}

const Constant* Context::constant(const std::string& name) const {
  const auto it = constants_.find(name);
  return it == constants_.end() ? nullptr : &it->second;
}

TensorRef Context::weight(const std::string& name, Tensor<float> value) {
  const TensorRef w = b_.weight(name, value.shape);
  weights_[name] = std::move(value);
  return w;
}

TensorRef Context::tensor(const std::string& name, int64_t index_range) {
  if (const auto it = refs_.find(name); it != refs_.end()) return it->second;
  if (const auto in = inputs_.find(name); in != inputs_.end()) {
    const auto& type = in->second.type().tensor_type();
    IntList shape;
    for (const auto& d : type.shape().dim()) {
      if (d.has_dim_value()) {
        shape.push_back(d.dim_value());
      } else if (options_.batch > 0) {
        shape.push_back(options_.batch);
        used_batch_ = true;
      } else {
        throw Error(path_ + ": input " + name + ": dimension '" + d.dim_param() + "' is symbolic: give its size (ImportOptions.batch)");
      }
    }
    DataType dtype = DataType::kFloat32;
    if (type.elem_type() == onnx::TensorProto::INT64 || type.elem_type() == onnx::TensorProto::INT32) dtype = DataType::kInt64;
    else if (type.elem_type() != onnx::TensorProto::FLOAT)
      throw Error(path_ + ": input " + name + ": element type " + std::to_string(type.elem_type()) + " (pcgx takes float32 and int64 inputs)");
    if (dtype == DataType::kInt64 && index_range <= 0) throw Error(path_ + ": input " + name + ": an integer input pcgx can only take as indices");
    return refs_[name] = b_.input(name, shape, dtype, dtype == DataType::kInt64 ? index_range : 0);
  }
  if (paddings_.count(name)) throw Error(path_ + ": " + name + ": pcgx folds a Pad only into the Conv or AveragePool that reads it");
  if (const auto c = constants_.find(name); c != constants_.end()) {
    if (c->second.integer) throw Error(path_ + ": " + name + ": an integer constant used as a tensor");
    return refs_[name] = weight(weight_name(name), c->second.as_tensor());
  }
  throw Error(path_ + ": value " + name + " is used before anything produces it");
}

bool Context::skipped(const onnx::NodeProto& n) const {
  return n.output_size() > 0 && std::find(skipped_.begin(), skipped_.end(), n.output(0)) != skipped_.end();
}

namespace {

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

template <class T>
T read_le(const std::string& raw, size_t i) {
  T v;
  std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  const auto* a = find_attr(n, name);
  return a ? a->i() : fallback;
}

double attr_float(const onnx::NodeProto& n, const std::string& name, double fallback) {
  const auto* a = find_attr(n, name);
  return a ? a->f() : fallback;
}

std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name, std::vector<int64_t> fallback) {
  const auto* a = find_attr(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}

namespace {

// n values of type T from the raw bytes, or else from the typed field.
template <class T, class Field>
void read_values(const onnx::TensorProto& t, const Field& field, size_t n, std::vector<double>& out, const std::string& where) {
  const std::string& raw = t.raw_data();
  const size_t have = t.has_raw_data() ? raw.size() / sizeof(T) : static_cast<size_t>(field.size());
  if (have != n) throw Error(where + ": " + std::to_string(have) + " values for a shape of " + std::to_string(n));
  out.clear();
  out.reserve(n);  // (appended, not zero-filled first: a model's weights are most of its file)
  for (size_t i = 0; i < n; ++i)
    out.push_back(t.has_raw_data() ? static_cast<double>(read_le<T>(raw, i)) : static_cast<double>(field.Get(static_cast<int>(i))));
}

}  // namespace

Constant constant_of(const onnx::TensorProto& t, const std::string& where) {
  Constant c;
  c.shape.assign(t.dims().begin(), t.dims().end());
  if (t.data_location() == onnx::TensorProto::EXTERNAL) throw Error(where + ": data in an external file (pcgx reads self-contained models)");
  const auto n = static_cast<size_t>(product(c.shape));
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: read_values<float>(t, t.float_data(), n, c.values, where); break;
    case onnx::TensorProto::DOUBLE: read_values<double>(t, t.double_data(), n, c.values, where); break;
    case onnx::TensorProto::INT64: read_values<int64_t>(t, t.int64_data(), n, c.values, where), c.integer = true; break;
    case onnx::TensorProto::INT32: read_values<int32_t>(t, t.int32_data(), n, c.values, where), c.integer = true; break;
    case onnx::TensorProto::BOOL: read_values<uint8_t>(t, t.int32_data(), n, c.values, where), c.integer = true; break;
    default: throw Error(where + ": element type " + std::to_string(t.data_type()) + " (pcgx reads float, double, int64, int32 and bool)");
  }
  return c;
}

bool onnx_available(std::string*) { return true; }

ImportedModel import_onnx(const std::string& path, const ImportOptions& options) {
  // Read whole, then parsed: from one buffer the parser sizes each tensor's
  // bytes at once, where from a stream it grows them chunk by chunk.
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error(path + ": cannot be read");
  std::string bytes(static_cast<size_t>(std::max<std::streamoff>(in.tellg(), 0)), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) throw Error(path + ": cannot be read");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) throw Error(path + ": not an ONNX model (the protobuf does not parse)");
  std::string().swap(bytes);
  const onnx::GraphProto& g = model.graph();
  ImportedModel out;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") out.opset = o.version();

  Context ctx(path, options, g, std::filesystem::path(path).stem().string());
  fuse_patterns(ctx);
  // Every unsupported operator first: one error lists them all.
  std::map<std::string, std::pair<int, std::string>> missing;  // type -> (count, first node)
  for (const auto& n : g.node()) {
    if (ctx.skipped(n) || (n.output_size() && ctx.fused(n.output(0)))) continue;
    const bool ours = n.domain().empty() || n.domain() == "ai.onnx";
    if (ours && handler_of(n.op_type())) continue;
    auto& m = missing[(ours ? "" : n.domain() + ".") + n.op_type()];
    if (m.first++ == 0) m.second = n.name().empty() ? (n.output_size() ? n.output(0) : "?") : n.name();
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& [type, m] : missing) list += (list.empty() ? "" : ", ") + type + " x" + std::to_string(m.first) + " (first: " + m.second + ")";
    throw Error(path + ": operators pcgx does not import: " + list);
  }

  for (const auto& t : g.initializer()) {
    Constant k = constant_of(t, path + ": initializer " + t.name());
    k.source = t.name();
    ctx.add_constant(t.name(), std::move(k));
  }
  for (const auto& v : g.input())
    if (!ctx.constant(v.name())) ctx.add_input(v);
  for (const auto& n : g.node())
    for (const auto& i : n.input()) ctx.count_consumer(i);
  for (const auto& n : g.node()) {
    if (ctx.skipped(n)) continue;
    if (n.output_size() && ctx.fused(n.output(0))) {
      emit_fused(ctx, n);
      continue;
    }
    if (fold_constant(ctx, n)) continue;
    handler_of(n.op_type())(ctx, n);
  }
  if (g.output_size() == 0) throw Error(path + ": the graph has no output");
  if (options.batch > 0 && !ctx.used_batch())
    throw Error(path + ": a batch of " + std::to_string(options.batch) + " given, but no input dimension is symbolic (the export fixed them)");
  GraphBuilder& b = ctx.builder();
  const TensorRef y = ctx.tensor(g.output(0).name());
  const auto& ys = b.shape(y);
  LossHead head = options.loss;
  if (head == LossHead::kAuto) head = ys.rank() == 2 ? LossHead::kCrossEntropy : LossHead::kMse;
  if (head == LossHead::kNone) {
    b.graph().add_output(y);
  } else if (head == LossHead::kCrossEntropy) {
    if (ys.rank() != 2) throw Error(path + ": output " + g.output(0).name() + ": cross-entropy needs [N, classes]");
    const int64_t classes = ys.dims[1].size;
    b.graph().add_output(b.softmax_cross_entropy(y, b.input("labels", {ys.dims[0].size}, DataType::kInt64, classes)));
  } else {
    b.graph().add_output(b.mse_loss(y, b.input("target", ys.logical_shape())));
  }
  out.weights = std::move(ctx.weights());
  out.graph = b.finish();
  return out;
}

}  // namespace pcgx::importer
