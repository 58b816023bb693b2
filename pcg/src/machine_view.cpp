#include "pcgx/pcg/machine_view.h"

namespace pcgx {

int64_t MachineView::device(int64_t t, std::span<const int64_t> extents) const {
  const int64_t base = start < 0 ? 0 : start;
  if (strides.empty()) return base + t * stride;
  int64_t d = base;
  for (size_t j = extents.size(); j-- > 0;) {
    const int64_t e = extents[j] > 0 ? extents[j] : 1;
    if (j < strides.size()) d += (t % e) * strides[j];
    t /= e;
  }
  return d;
}

int64_t MachineView::last_device(std::span<const int64_t> extents) const {
  const int64_t base = start < 0 ? 0 : start;
  int64_t tasks = 1;
  for (int64_t e : extents) tasks *= e > 0 ? e : 1;
  if (strides.empty()) return base + (tasks - 1) * stride;
  int64_t d = base;
  for (size_t j = 0; j < extents.size() && j < strides.size(); ++j) d += (extents[j] - 1) * strides[j];
  return d;
}

}  // namespace pcgx
