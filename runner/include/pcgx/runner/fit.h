#pragma once
// The least-squares fits of a calibration (AutoDDL, Section 3: "we use the
// least squares method to estimate the values of alpha and beta").
#include <cstdint>
#include <span>
#include <vector>

namespace pcgx::runner {

// A timed exchange, as the model prices it with one link level's figures:
// t = other + hops x latency + steps x step latency + bytes / bandwidth.
// One message: hops 1, steps 0, its bytes. A collective: hops 0, its
// steps and bytes on the critical path, `other` the part priced on other
// levels (collectives.h).
struct MessageSample {
  double bytes = 0, seconds = 0;
  double hops = 1, other = 0;
  double steps = 0;
};

// The link's latency, step latency and bandwidth minimizing the squared
// relative error of the samples (they span six orders of magnitude: plain
// least squares would fit the largest alone); none negative, the step
// latency 0 when no sample has steps. `residual`: RMS of
// (fitted - measured) / measured.
struct LinkFit {
  double latency = 0, bandwidth = 0, residual = 0;
  double step_latency = 0;
};
LinkFit fit_link(std::span<const MessageSample> samples);

// y = a + b x by least squares; `residual`: RMS of y - fitted, relative to
// the mean of y.
struct LineFit {
  double a = 0, b = 0, residual = 0;
};
LineFit fit_line(std::span<const double> x, std::span<const double> y);

// y = a + b x + c z by least squares, each sample weighted by w (none:
// all 1); b and c are kept non-negative (a cost per unit), refitting the
// other alone. `residual`: weighted RMS of y - fitted over the weighted
// mean of |y|.
struct PlaneFit {
  double a = 0, b = 0, c = 0, residual = 0;
};
PlaneFit fit_plane(std::span<const double> x, std::span<const double> z, std::span<const double> y, std::span<const double> w = {});

// The median (0 for none).
double median(std::vector<double> v);

}  // namespace pcgx::runner
