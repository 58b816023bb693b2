#include "pcgx/runtime/op_profile.h"

#include <map>

#include "pcgx/pcg/error.h"

namespace pcgx::runtime {

Profile profile_from_run(const Graph& g, const TrainResult& run) {
  if (run.kernel_times.size() != g.size()) throw Error("profile: the run timed no kernels (TrainOptions::time_kernels)");
  struct Sum {
    double forward = 0, backward = 0;
    int64_t tasks = 0;
  };
  std::map<std::pair<std::string, std::vector<std::vector<int64_t>>>, Sum> sums;
  for (const Node& n : g.nodes()) {
    const KernelTime& k = run.kernel_times[static_cast<size_t>(n.id)];
    if (n.op->op_class != OpClass::kCompute || k.tasks == 0) continue;
    // One task's input slices, as the cost model keys them.
    std::vector<std::vector<int64_t>> shapes;
    for (const TensorRef& t : n.inputs) shapes.push_back(g.shape(t).slice_shape());
    Sum& x = sums[{n.op->name, shapes}];
    x.forward += k.forward, x.backward += k.backward, x.tasks += k.tasks;
  }
  Profile out;
  for (const auto& [key, x] : sums) {
    const auto tasks = static_cast<double>(x.tasks);
    out.add({key.first, key.second, x.forward / tasks, x.backward / tasks});
  }
  if (run.update_seconds > 0 && run.update_bytes > 0)
    out.update_bytes_per_second = run.update_bytes / run.update_seconds, out.update_words = run.update_words;
  if (run.bucket_copy_seconds > 0 && run.bucket_copy_bytes > 0)
    out.bucket_copy_bytes_per_second = run.bucket_copy_bytes / run.bucket_copy_seconds;
  return out;
}

}  // namespace pcgx::runtime
