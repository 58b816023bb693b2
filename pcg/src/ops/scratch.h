#pragma once
// Per-thread scratch memory for kernels (internal to pcg/src/ops). A
// training step runs the same kernels on the same shapes every time, so a
// buffer that only grows stops allocating after the first step: the
// runtime's "no allocation after warm-up" rests on kernels taking their
// temporaries from here rather than from std::vector.
#include <cstddef>

namespace pcgx::ops {

// Independent buffers; a kernel uses distinct slots for temporaries that
// are alive together. kGemm belongs to gemm.cpp (kernels call gemm while
// holding their own slots).
enum class ScratchSlot { kGemm, kA, kB, kC, kCount };

// At least n floats, 64-byte aligned, owned by the calling thread and valid
// until its next call with the same slot. Contents are unspecified.
float* scratch_floats(ScratchSlot slot, size_t n);

}  // namespace pcgx::ops
