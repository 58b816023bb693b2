#pragma once
// Timing helpers for bench/: median of repeated runs, in milliseconds.
#include <algorithm>
#include <chrono>
#include <vector>

namespace pcgx::bench {

template <class F>
double median_ms(int repeats, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace pcgx::bench
