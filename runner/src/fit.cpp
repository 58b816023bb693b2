#include "pcgx/runner/fit.h"

#include <algorithm>
#include <cmath>

namespace pcgx::runner {

LinkFit fit_link(std::span<const MessageSample> samples) {
  // Relative error (o_i + h_i alpha + s_i gamma + n_i beta - t_i) / t_i:
  // weighted least squares with weights 1 / t_i^2. Physical figures are
  // never negative: the best fit over the subsets of the three unknowns
  // whose solution is non-negative (an active-set search, 7 subsets).
  auto column = [](const MessageSample& m, int c) { return c == 0 ? m.hops : c == 1 ? m.steps : m.bytes; };
  double a[3][3] = {}, r[3] = {};
  bool present[3] = {};
  for (const MessageSample& m : samples) {
    if (m.seconds <= 0) continue;
    const double w = 1.0 / (m.seconds * m.seconds), y = m.seconds - m.other;
    for (int i = 0; i < 3; ++i) {
      present[i] = present[i] || column(m, i) > 0;
      r[i] += w * column(m, i) * y;
      for (int j = 0; j < 3; ++j) a[i][j] += w * column(m, i) * column(m, j);
    }
  }
  auto error = [&](const double x[3]) {
    double sq = 0;
    int n = 0;
    for (const MessageSample& m : samples) {
      if (m.seconds <= 0) continue;
      const double e = (m.other + m.hops * x[0] + m.steps * x[1] + m.bytes * x[2] - m.seconds) / m.seconds;
      sq += e * e, ++n;
    }
    return n ? std::sqrt(sq / n) : 0.0;
  };
  double best[3] = {}, best_error = -1;
  for (int subset = 1; subset < 8; ++subset) {
    int idx[3], k = 0;
    bool usable = true;
    for (int i = 0; i < 3; ++i)
      if (subset >> i & 1) usable = usable && present[i], idx[k++] = i;
    if (!usable) continue;
    // Gaussian elimination on the k x k system (k <= 3).
    double m[3][4];
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < k; ++j) m[i][j] = a[idx[i]][idx[j]];
      m[i][k] = r[idx[i]];
    }
    bool singular = false;
    for (int c = 0; c < k && !singular; ++c) {
      int p = c;
      for (int i = c + 1; i < k; ++i)
        if (std::abs(m[i][c]) > std::abs(m[p][c])) p = i;
      if (std::abs(m[p][c]) < 1e-300) {
        singular = true;
        break;
      }
      for (int j = 0; j <= k; ++j) std::swap(m[c][j], m[p][j]);
      for (int i = 0; i < k; ++i) {
        if (i == c) continue;
        const double f = m[i][c] / m[c][c];
        for (int j = c; j <= k; ++j) m[i][j] -= f * m[c][j];
      }
    }
    if (singular) continue;
    double x[3] = {};
    bool feasible = true;
    for (int i = 0; i < k; ++i) {
      x[idx[i]] = m[i][k] / m[i][i];
      feasible = feasible && x[idx[i]] >= 0;
    }
    if (!feasible) continue;
    const double e = error(x);
    if (best_error < 0 || e < best_error) best_error = e, std::copy(x, x + 3, best);
  }
  LinkFit f;
  if (best_error < 0) return f;
  f.latency = best[0], f.step_latency = best[1];
  f.bandwidth = best[2] > 0 ? 1.0 / best[2] : 0;
  f.residual = best_error;
  return f;
}

LineFit fit_line(std::span<const double> x, std::span<const double> y) {
  LineFit f;
  const size_t n = std::min(x.size(), y.size());
  if (n == 0) return f;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i], my += y[i];
  mx /= static_cast<double>(n), my /= static_cast<double>(n);
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; ++i) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
  f.b = sxx > 0 ? sxy / sxx : 0;
  f.a = my - f.b * mx;
  double sq = 0;
  for (size_t i = 0; i < n; ++i) sq += (f.a + f.b * x[i] - y[i]) * (f.a + f.b * x[i] - y[i]);
  f.residual = my != 0 ? std::sqrt(sq / static_cast<double>(n)) / std::fabs(my) : 0;
  return f;
}

PlaneFit fit_plane(std::span<const double> x, std::span<const double> z, std::span<const double> y, std::span<const double> w) {
  const size_t n = std::min({x.size(), z.size(), y.size()});
  auto weight = [&](size_t i) { return i < w.size() ? w[i] : 1.0; };
  PlaneFit f;
  double sw = 0, mx = 0, mz = 0, my = 0;
  for (size_t i = 0; i < n; ++i) sw += weight(i), mx += weight(i) * x[i], mz += weight(i) * z[i], my += weight(i) * y[i];
  if (sw <= 0) return f;
  mx /= sw, mz /= sw, my /= sw;
  double sxx = 0, szz = 0, sxz = 0, sxy = 0, szy = 0;
  for (size_t i = 0; i < n; ++i) {
    const double dx = x[i] - mx, dz = z[i] - mz, dy = y[i] - my, k = weight(i);
    sxx += k * dx * dx, szz += k * dz * dz, sxz += k * dx * dz, sxy += k * dx * dy, szy += k * dz * dy;
  }
  const double det = sxx * szz - sxz * sxz;
  if (det > 0) f.b = (sxy * szz - szy * sxz) / det, f.c = (szy * sxx - sxy * sxz) / det;
  if (det <= 0 || f.b < 0) f.b = 0, f.c = szz > 0 ? std::max(szy / szz, 0.0) : 0;
  if (f.c < 0) f.c = 0, f.b = sxx > 0 ? std::max(sxy / sxx, 0.0) : 0;
  f.a = my - f.b * mx - f.c * mz;
  double sq = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    const double e = f.a + f.b * x[i] + f.c * z[i] - y[i];
    sq += weight(i) * e * e, scale += weight(i) * std::fabs(y[i]);
  }
  f.residual = scale > 0 ? std::sqrt(sq / sw) / (scale / sw) : 0;
  return f;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace pcgx::runner
