#include <stdexcept>
#include <string>

#include "pcgx/pcg/kernel_threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace pcgx {
namespace {
thread_local int g_threads = 1;
}

void set_kernel_threads(int n) {
  if (n < 1) throw std::invalid_argument("kernel threads must be at least 1, got " + std::to_string(n));
  g_threads = n;
}

int kernel_threads() { return g_threads; }

namespace detail {

void run_pieces(int64_t pieces, void (*call)(void*, int64_t), void* fn) {
#ifdef _OPENMP
  // The whole team even for fewer pieces than threads: OpenMP reuses a
  // thread's last team only at the same size, and allocates a new one.
  const int threads = pieces > 1 && !omp_in_parallel() ? g_threads : 1;
  if (threads > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < pieces; ++i) call(fn, i);
    return;
  }
#endif
  for (int64_t i = 0; i < pieces; ++i) call(fn, i);
}

}  // namespace detail
}  // namespace pcgx
