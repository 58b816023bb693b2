#include "pcgx/runner/fit.h"

#include <algorithm>
#include <cmath>

namespace pcgx::runner {

LinkFit fit_link(std::span<const MessageSample> samples) {
  // Relative error (o_i + h_i alpha + n_i beta - t_i) / t_i: weighted least
  // squares with weights 1 / t_i^2 on the 2x2 normal equations.
  double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
  for (const MessageSample& m : samples) {
    if (m.seconds <= 0) continue;
    const double w = 1.0 / (m.seconds * m.seconds), y = m.seconds - m.other;
    s00 += w * m.hops * m.hops, s01 += w * m.hops * m.bytes, s11 += w * m.bytes * m.bytes;
    r0 += w * m.hops * y, r1 += w * m.bytes * y;
  }
  LinkFit f;
  const double det = s00 * s11 - s01 * s01;
  if (det <= 0) return f;
  double alpha = (r0 * s11 - r1 * s01) / det, beta = (s00 * r1 - s01 * r0) / det;
  // Physical figures: neither may be negative (refit the other alone).
  if (beta <= 0) beta = 0, alpha = s00 > 0 ? std::max(r0 / s00, 0.0) : 0;
  if (alpha < 0) alpha = 0, beta = s11 > 0 ? std::max(r1 / s11, 0.0) : 0;
  f.latency = alpha;
  f.bandwidth = beta > 0 ? 1.0 / beta : 0;
  double sq = 0;
  int n = 0;
  for (const MessageSample& m : samples) {
    if (m.seconds <= 0) continue;
    const double e = (m.other + m.hops * alpha + beta * m.bytes - m.seconds) / m.seconds;
    sq += e * e, ++n;
  }
  f.residual = n ? std::sqrt(sq / n) : 0;
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
