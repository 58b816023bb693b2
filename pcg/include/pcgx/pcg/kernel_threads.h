#pragma once
// How many threads the float kernels (GEMM, activations, softmax, bias,
// batched products) and the runtime's optimizer may use when called from
// the current thread. The setting is per calling thread, so every virtual
// device of the runtime can have its own; it is 1 until set.
//
// Results never depend on it: a loop is cut into pieces by its sizes alone
// and each piece is computed the same way on whichever thread runs it, so
// one thread and sixteen give the same bits.
#include <cstdint>
#include <type_traits>

namespace pcgx {

// n >= 1.
void set_kernel_threads(int n);
int kernel_threads();

namespace detail {
void run_pieces(int64_t pieces, void (*call)(void* fn, int64_t piece), void* fn);
}

// fn(i) for every i in [0, pieces), shared among the kernel threads (OpenMP,
// static schedule: a thread gets the same pieces every time, so per-thread
// scratch settles in the first training step). Inside another parallel
// loop, and for a single piece, it runs serially on the caller. fn must not
// throw.
template <class F>
void parallel_pieces(int64_t pieces, F&& fn) {
  detail::run_pieces(pieces, [](void* f, int64_t i) { (*static_cast<std::remove_reference_t<F>*>(f))(i); },
                     const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace pcgx
