// User data from .npy files (see dataset.h).
#include "pcgx/runtime/dataset.h"

#include <cmath>
#include <filesystem>

#include "pcgx/pcg/error.h"
#include "pcgx/runtime/npy.h"

namespace pcgx::runtime {

NpyDataset::NpyDataset(const Graph& g, const std::string& dir) : dir_(dir) {
  if (!std::filesystem::is_directory(dir)) throw FileError(dir, "", "not a directory (a data set is a directory of NAME.npy files, one per model input)");
  std::map<std::string, Tensor<float>> all;
  int64_t batch = 0;
  std::string first;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kSource || n.op->is_weight) continue;
    const std::string path = (std::filesystem::path(dir) / (n.name + ".npy")).string();
    if (!std::filesystem::exists(path)) throw FileError(path, "", "missing: input '" + n.name + "' of " + g.name() + " needs it");
    Tensor<float> t = read_npy(path);
    const std::vector<int64_t> want = n.outputs[0].logical_shape();
    auto shape_text = [](const std::vector<int64_t>& s, size_t from) {
      std::string o = "[N";
      for (size_t i = from; i < s.size(); ++i) o += ", " + std::to_string(s[i]);
      return o + "]";
    };
    if (want.empty() || t.shape.size() != want.size() || !std::equal(want.begin() + 1, want.end(), t.shape.begin() + 1))
      throw FileError(path, "shape", "expected " + shape_text(want, 1) + " for input '" + n.name + "'");
    const int64_t samples = t.shape[0];
    if (first.empty()) first = path, samples_ = samples, batch = want[0];
    if (samples != samples_) throw FileError(path, "shape", std::to_string(samples) + " samples, but " + first + " has " + std::to_string(samples_));
    if (const int64_t range = n.attrs.get_int("index_range"); range > 0)
      for (float v : t.data)
        if (v < 0 || v >= static_cast<float>(range) || v != std::floor(v))
          throw FileError(path, "data", "index " + std::to_string(v) + " is not an integer in [0, " + std::to_string(range) + ")");
    all[n.name] = std::move(t);
  }
  if (all.empty()) throw Error("model '" + g.name() + "' has no inputs to read");
  if (samples_ < batch || samples_ % batch != 0)
    throw FileError(first, "shape", std::to_string(samples_) + " samples is not a positive multiple of the batch " + std::to_string(batch));
  for (int64_t b = 0; b < samples_ / batch; ++b) {
    std::map<std::string, Tensor<float>> m;
    for (const auto& [name, t] : all) {
      std::vector<int64_t> shape = t.shape;
      shape[0] = batch;
      Tensor<float> slice(shape);
      const size_t per = slice.data.size();
      std::copy_n(t.data.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(b) * per), per, slice.data.begin());
      m[name] = std::move(slice);
    }
    batches_.push_back(std::move(m));
  }
}

const std::map<std::string, Tensor<float>>& NpyDataset::batch(int64_t step) const {
  return batches_[static_cast<size_t>(step % static_cast<int64_t>(batches_.size()))];
}

std::string NpyDataset::describe() const {
  return dir_ + " (" + std::to_string(samples_) + " samples, " + std::to_string(batches_.size()) + " batches)";
}

}  // namespace pcgx::runtime
