#include "pcgx/runtime/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace pcgx::runtime {

double RunSummary::mean_step_seconds() const {
  const auto& t = result.step_seconds;
  if (t.empty()) return 0;
  const size_t first = t.size() > 1 ? 1 : 0;
  double sum = 0;
  for (size_t i = first; i < t.size(); ++i) sum += t[i];
  return sum / static_cast<double>(t.size() - first);
}

std::string run_report_json(const RunSummary& s) {
  nlohmann::json j;
  j["format"] = "pcgx.run";
  j["format_version"] = 1;
  j["model"] = s.model;
  j["strategy"] = s.strategy;
  j["backend"] = s.backend;
  j["devices"] = s.result.devices;
  j["steps"] = s.options.steps;
  j["batch"] = s.batch;
  j["seed"] = s.options.seed;
  j["kernel_threads"] = s.options.threads;
  j["zero"] = std::stoi(name(s.options.zero));
  if (shards_weights(highest_zero(s.options.zero, s.options.zero_weights)) && s.options.zero_persistence_threshold > 0)
    j["zero_persistence_threshold"] = s.options.zero_persistence_threshold;
  for (const WeightZero& w : s.options.zero_weights)
    if (w.stage != s.options.zero) j["zero_weights"][w.weight] = std::stoi(name(w.stage));
  j["recompute"] = name(s.options.recompute);
  if (s.options.recompute_layers != kAllLayers) j["recompute_layers"] = s.options.recompute_layers;
  j["precision"] = name(s.options.precision);
  if (s.options.precision == Precision::kFp16)
    j["loss_scaling"] = {{"final_scale", s.result.loss_scale}, {"skipped_steps", s.result.skipped_steps}};
  j["optimizer"] = {{"kind", name(s.options.optimizer.kind)}, {"lr", s.options.optimizer.lr}, {"momentum", s.options.optimizer.momentum}};
  if (s.result.target.empty())
    j["task"] = {{"kind", "user data"}, {"data", s.result.data}};
  else
    j["task"] = {{"kind", "synthetic teacher"}, {"target", s.result.target}, {"batches", s.options.batches}};
  j["loss"] = s.result.losses;
  j["step_seconds"] = s.result.step_seconds;
  j["mean_step_seconds"] = s.mean_step_seconds();
  j["samples_per_second"] = s.samples_per_second();
  if (s.predicted_step_seconds > 0) j["predicted_step_seconds"] = s.predicted_step_seconds;
  j["bytes_between_devices"] = s.result.bytes_sent;
  j["bytes_per_step"] = s.step_bytes();
  j["predicted_bytes_per_step"] = s.predicted_step_bytes;
  j["buffer_bytes"] = s.result.buffer_bytes;
  if (s.options.pipeline && s.options.pipeline->in_flight()) {
    const PipelineShape& p = *s.options.pipeline;
    j["pipeline"] = {{"stages", p.stages}, {"micro_batches", p.micro_batches}, {"virtual_stages", p.virtual_stages},
                     {"schedule", name(p.schedule)}, {"activation_sets", s.result.activation_sets},
                     {"device_buffer_bytes", s.result.device_buffer_bytes},
                     {"devices_reported", s.result.activation_sets.size()}};  // under MPI, rank 0 alone
  }
  return j.dump(2) + "\n";
}

std::string loss_curve_svg(const RunSummary& s) {
  const auto& loss = s.result.losses;
  const double W = 640, H = 400, L = 70, R = 20, T = 40, B = 50;
  double lo = loss.empty() ? 0 : *std::min_element(loss.begin(), loss.end());
  double hi = loss.empty() ? 1 : *std::max_element(loss.begin(), loss.end());
  if (hi - lo < 1e-12) hi = lo + 1;
  const size_t n = std::max<size_t>(loss.size(), 2);
  auto x = [&](size_t i) { return L + (W - L - R) * static_cast<double>(i) / static_cast<double>(n - 1); };
  auto y = [&](double v) { return T + (H - T - B) * (1 - (v - lo) / (hi - lo)); };
  std::string out;
  char buf[256];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    out += buf;
  };
  add("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
  add("<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  out += "<text x=\"" + std::to_string(static_cast<int>(W / 2)) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" + s.model +
         " on " + std::to_string(s.result.devices) + " device(s), " + s.strategy + "</text>\n";
  add("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
  add("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", L, T, L, H - B);
  for (int k = 0; k <= 4; ++k) {
    const double v = lo + (hi - lo) * k / 4.0;
    add("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", L - 6, y(v) + 4, v);
    add("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, y(v), W - R, y(v));
  }
  add("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">1</text>\n", x(0), H - B + 16);
  add("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%zu</text>\n", x(n - 1), H - B + 16, loss.size());
  add("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">step</text>\n", (L + W - R) / 2, H - 12);
  add("<text x=\"16\" y=\"%.1f\" transform=\"rotate(-90 16 %.1f)\" text-anchor=\"middle\">loss</text>\n", (T + H - B) / 2, (T + H - B) / 2);
  out += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"";
  for (size_t i = 0; i < loss.size(); ++i) add("%.1f,%.1f ", x(i), y(loss[i]));
  out += "\"/>\n</svg>\n";
  return out;
}

}  // namespace pcgx::runtime
