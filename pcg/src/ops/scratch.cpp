#include "scratch.h"

#include <algorithm>
#include <array>
#include <new>

namespace pcgx::ops {
namespace {

constexpr std::align_val_t kAlign{64};

struct Buffer {
  float* data = nullptr;
  size_t capacity = 0;
  ~Buffer() { ::operator delete[](data, kAlign); }
};

}  // namespace

float* scratch_floats(ScratchSlot slot, size_t n) {
  thread_local std::array<Buffer, static_cast<size_t>(ScratchSlot::kCount)> buffers;
  Buffer& b = buffers[static_cast<size_t>(slot)];
  if (b.capacity < n) {
    // Grow geometrically so a slowly rising size settles after a few calls.
    const size_t cap = std::max(n, b.capacity * 2);
    ::operator delete[](b.data, kAlign);
    b.data = nullptr;
    b.data = static_cast<float*>(::operator new[](cap * sizeof(float), kAlign));
    b.capacity = cap;
  }
  return b.data;
}

}  // namespace pcgx::ops
