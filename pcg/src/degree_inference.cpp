#include "pcgx/pcg/degree_inference.h"

#include <algorithm>
#include <sstream>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph.h"

namespace pcgx {

int64_t TaskGrid::num_tasks() const {
  int64_t n = 1;
  for (int64_t e : extents) n *= e;
  return n;
}

int64_t shard_for_task(const TensorMapping& m, const ParallelTensorShape& shape,
                       std::span<const int64_t> coords, std::span<const int64_t> extents) {
  int64_t idx = 0;
  for (int t : m.replica_task) idx = idx * extents[static_cast<size_t>(t)] + coords[static_cast<size_t>(t)];
  for (size_t j = 0; j < shape.dims.size(); ++j) {
    const int t = m.dim_task[j];
    idx = idx * shape.dims[j].degree + (t >= 0 ? coords[static_cast<size_t>(t)] : 0);
  }
  return idx;
}

namespace {

std::string input_label(const OpDef& op, size_t i) {
  return "input " + std::to_string(i) + " (" + op.input_name(static_cast<int>(i)) + ")";
}

std::string kinds_splitting(const std::vector<ParallelKind>& kinds, size_t input) {
  std::string s;
  for (const auto& k : kinds)
    if (k.inputs[input] >= 0) s += (s.empty() ? "" : ", ") + std::to_string(k.inputs[input]);
  return s.empty() ? "none" : s;
}

}  // namespace

DegreeInference infer_degrees(const OpDef& op, const Attributes& attrs,
                              std::span<const ParallelTensorShape> inputs,
                              std::span<const TensorType> output_types) {
  std::vector<TensorType> in_types;
  in_types.reserve(inputs.size());
  for (const auto& s : inputs) in_types.push_back({s.logical_shape(), s.dtype});
  const std::vector<ParallelKind> kinds = op.kinds(attrs, in_types);
  const size_t nk = kinds.size(), ni = inputs.size(), no = output_types.size();

  // Degree (and pipeline degree) of each kind, read off the inputs it splits.
  std::vector<int64_t> degree(nk, 0), pipeline(nk, 0);
  for (size_t i = 0; i < ni; ++i) {
    const auto& dims = inputs[i].dims;
    for (size_t j = 0; j < dims.size(); ++j) {
      auto it = std::find_if(kinds.begin(), kinds.end(),
                             [&](const ParallelKind& k) { return k.inputs[i] == static_cast<int>(j); });
      if (it == kinds.end()) {
        if (dims[j].degree > 1)
          throw Error(input_label(op, i) + " is split along dimension " + std::to_string(j) + " (degree " +
                      std::to_string(dims[j].degree) + "), but " + op.name +
                      " can split that input only along dimensions " + kinds_splitting(kinds, i));
        if (dims[j].pipeline > 1)
          throw Error(input_label(op, i) + " is pipelined along dimension " + std::to_string(j) + ", but " +
                      op.name + " cannot process that dimension in slices");
        continue;
      }
      const size_t k = static_cast<size_t>(it - kinds.begin());
      if (degree[k] == 0) {
        degree[k] = dims[j].degree;
        pipeline[k] = dims[j].pipeline;
      } else if (degree[k] != dims[j].degree || pipeline[k] != dims[j].pipeline) {
        std::ostringstream os;
        os << "inputs disagree on " << kinds[k].name << " parallelism: " << input_label(op, i) << " dimension " << j
           << " has degree " << dims[j].degree;
        if (dims[j].pipeline != pipeline[k]) os << " and pipeline degree " << dims[j].pipeline;
        os << ", another input has degree " << degree[k];
        if (dims[j].pipeline != pipeline[k]) os << " and pipeline degree " << pipeline[k];
        throw Error(os.str());
      }
    }
  }
  for (size_t k = 0; k < nk; ++k) {
    if (degree[k] == 0) degree[k] = 1, pipeline[k] = 1;
    if (degree[k] > 1 && kinds[k].must_divide > 0 && kinds[k].must_divide % degree[k] != 0)
      throw Error(kinds[k].name + " parallelism of degree " + std::to_string(degree[k]) + " must divide " +
                  std::to_string(kinds[k].must_divide));
  }

  // The slot factor: what is left of each input's replica degree once the
  // kinds that replicate it are accounted for; it must agree across inputs.
  int64_t slots = 0;
  for (size_t i = 0; i < ni; ++i) {
    int64_t need = 1;
    for (size_t k = 0; k < nk; ++k)
      if (kinds[k].inputs[i] < 0) need *= degree[k];
    const int64_t r = inputs[i].replica;
    if (r % need != 0)
      throw Error(input_label(op, i) + " has replica degree " + std::to_string(r) + ", but the other inputs' split " +
                  "needs it replicated a multiple of " + std::to_string(need) + " times");
    const int64_t s = r / need;
    if (slots == 0) {
      slots = s;
    } else if (slots != s) {
      throw Error(input_label(op, i) + " has replica degree " + std::to_string(r) +
                  ", which does not match the other inputs (" + std::to_string(slots * need) + " expected)");
    }
  }
  if (slots == 0) slots = 1;

  DegreeInference result;
  TaskGrid& grid = result.grid;
  grid.extents.push_back(slots);
  grid.names.push_back("slot");
  std::vector<int> task_of_kind(nk, -1);
  for (size_t k = 0; k < nk; ++k)
    if (degree[k] > 1 && no > 0 && kinds[k].outputs[0] == ParallelKind::kPartial) {
      task_of_kind[k] = static_cast<int>(grid.extents.size());
      grid.extents.push_back(degree[k]);
      grid.names.push_back(kinds[k].name);
    }
  if (no > 0) {
    for (size_t d = 0; d < output_types[0].shape.size(); ++d)
      for (size_t k = 0; k < nk; ++k)
        if (degree[k] > 1 && kinds[k].outputs[0] == static_cast<int>(d)) {
          task_of_kind[k] = static_cast<int>(grid.extents.size());
          grid.extents.push_back(degree[k]);
          grid.names.push_back(kinds[k].name);
        }
  }

  auto replica_tasks = [&](auto&& replicated) {
    std::vector<int> tasks{0};
    for (size_t t = 1; t < grid.extents.size(); ++t)
      for (size_t k = 0; k < nk; ++k)
        if (task_of_kind[k] == static_cast<int>(t) && replicated(kinds[k])) tasks.push_back(static_cast<int>(t));
    return tasks;
  };

  for (size_t i = 0; i < ni; ++i) {
    TensorMapping m;
    m.dim_task.assign(inputs[i].dims.size(), -1);
    for (size_t k = 0; k < nk; ++k)
      if (kinds[k].inputs[i] >= 0 && task_of_kind[k] >= 0)
        m.dim_task[static_cast<size_t>(kinds[k].inputs[i])] = task_of_kind[k];
    m.replica_task = replica_tasks([&](const ParallelKind& k) { return k.inputs[i] < 0; });
    grid.inputs.push_back(std::move(m));
  }

  for (size_t o = 0; o < no; ++o) {
    ParallelTensorShape s;
    s.dtype = output_types[o].dtype;
    for (int64_t n : output_types[o].shape) s.dims.push_back({n, 1, 1});
    TensorMapping m;
    m.dim_task.assign(s.dims.size(), -1);
    int64_t replica = slots;
    for (size_t k = 0; k < nk; ++k) {
      const int od = kinds[k].outputs[o];
      if (od == ParallelKind::kPartial) {
        replica *= degree[k];
        continue;
      }
      auto& dim = s.dims[static_cast<size_t>(od)];
      if (dim.size % (degree[k] * pipeline[k]) != 0)
        throw Error(kinds[k].name + " parallelism of degree " + std::to_string(degree[k]) +
                    (pipeline[k] > 1 ? " with pipeline degree " + std::to_string(pipeline[k]) : "") +
                    " does not divide output dimension " + std::to_string(od) + " of size " +
                    std::to_string(dim.size));
      dim.degree = degree[k];
      dim.pipeline = pipeline[k];
      if (task_of_kind[k] >= 0) m.dim_task[static_cast<size_t>(od)] = task_of_kind[k];
    }
    s.replica = replica;
    m.replica_task = replica_tasks([&](const ParallelKind& k) { return k.outputs[o] == ParallelKind::kPartial; });
    grid.outputs.push_back(std::move(m));
    result.outputs.push_back(std::move(s));
  }
  return result;
}

TaskGrid task_grid(const Graph& g, const Node& n) {
  std::vector<ParallelTensorShape> in;
  for (const TensorRef& t : n.inputs) in.push_back(g.shape(t));
  std::vector<TensorType> out;
  for (const ParallelTensorShape& s : n.outputs) out.push_back({s.logical_shape(), s.dtype});
  return infer_degrees(*n.op, n.attrs, in, out).grid;
}

}  // namespace pcgx
