// Measuring a machine for the cost model (see calibrate.h).
#include "pcgx/runner/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/step_communication.h"
#include "pcgx/pcg/registry.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/in_process.h"
#include "pcgx/runtime/mpi.h"
#include "pcgx/runtime/op_profile.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/collectives.h"
#include "pcgx/search/search.h"

namespace pcgx::runner {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMessageBytes[] = {4, 64, 1024, 16 * 1024, 256 * 1024, 4 * 1024 * 1024};
constexpr int64_t kAllReduceBytes[] = {4, 4 * 1024, 256 * 1024, 4 * 1024 * 1024};
constexpr int64_t kChainLengths[] = {8, 16, 32, 64};
constexpr int64_t kChainWidths[] = {16, 128};

// Timed runs last about this long at least: a tiny model's 12 steps take
// ~0.1 ms, timed kernels of 0.2-0.5 us then came out 0.6x-1.6x what the
// same kernels take over the 0.2 s a measured run lasts (caches, branch
// predictors and the core's clock still warming up), from one calibration
// to the next.
constexpr double kTimedRunSeconds = 0.05;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Runs `body` on every device: threads in process, or this MPI rank.
void on_devices(const CalibrationOptions& o, const std::function<void(runtime::Communicator&)>& body) {
  if (o.world) {
    body(o.world->communicator());
    return;
  }
  runtime::InProcessWorld world(o.devices);
  world.run(body);
}

runtime::TrainResult train_on_devices(const CalibrationOptions& o, const Graph& g, std::span<const MachineView> views,
                                      runtime::TrainOptions t) {
  t.threads = o.threads;
  return o.world ? runtime::train(g, views, *o.world, t) : runtime::train(g, views, o.devices, t);
}

// Half a ping-pong between device 0 and `peer`, per message size (device 0
// records the median of `repeats` round trips after two for warm-up, each
// less its clock read: one stalled round trip must not move the figure).
std::vector<MessageSample> ping_pong(runtime::Communicator& c, int peer, int64_t repeats) {
  std::vector<MessageSample> out;
  if (c.rank() != 0 && c.rank() != peer) return out;
  const int other = c.rank() == 0 ? peer : 0;
  const double read = runtime::clock_read_seconds();
  std::vector<float> buffer(static_cast<size_t>(kMessageBytes[std::size(kMessageBytes) - 1] / 4));
  int64_t tag = 1;
  for (const int64_t bytes : kMessageBytes) {
    const std::span<float> data(buffer.data(), static_cast<size_t>(std::max<int64_t>(bytes / 4, 1)));
    std::vector<double> round_trips;
    round_trips.reserve(static_cast<size_t>(std::max<int64_t>(repeats, 0)));
    for (int64_t r = -2; r < repeats; ++r) {
      const auto t0 = Clock::now();
      if (c.rank() == 0) {
        c.send(other, tag, data);
        c.recv(other, tag, data);
      } else {
        c.recv(other, tag, data);
        c.send(other, tag, data);
      }
      if (r >= 0) round_trips.push_back(seconds_since(t0) - read);
    }
    if (c.rank() == 0) out.push_back({static_cast<double>(data.size() * sizeof(float)), std::max(0.0, median(round_trips)) / 2.0});
    ++tag;
  }
  return out;
}

// The communicator's all-reduce over devices 0 .. k-1, per size; device 0
// records the median of `repeats` calls, each less its clock read.
std::vector<CollectiveCheck> all_reduces(runtime::Communicator& c, int devices, int64_t repeats) {
  std::vector<CollectiveCheck> out;
  std::vector<int> group;
  const double read = runtime::clock_read_seconds();
  std::vector<float> buffer(static_cast<size_t>(kAllReduceBytes[std::size(kAllReduceBytes) - 1] / 4), 1.f);
  // One tag per (group, size), alike on every device, members or not (the
  // untagged all_reduce's counter would drift on devices sitting out a
  // group); repeats reuse it, as a training step reuses its node's tags.
  int64_t call = 0;
  for (int k = 2; k <= devices; ++k) {
    group.clear();
    for (int i = 0; i < k; ++i) group.push_back(i);
    for (const int64_t bytes : kAllReduceBytes) {
      const std::span<float> data(buffer.data(), static_cast<size_t>(std::max<int64_t>(bytes / 4, 1)));
      std::vector<double> calls;
      calls.reserve(static_cast<size_t>(std::max<int64_t>(repeats, 0)));
      ++call;
      for (int64_t r = -2; r < repeats && c.rank() < k; ++r) {
        const auto t0 = Clock::now();
        c.all_reduce(group, data, runtime::Communicator::kCollectiveTagBase - 2 * call);
        if (r >= 0) calls.push_back(seconds_since(t0) - read);
      }
      if (c.rank() == 0) out.push_back({k, static_cast<double>(bytes), std::max(0.0, median(calls)), 0});
    }
  }
  return out;
}

// x -> Relu^length -> MSELoss against a target, on [width, width]: one
// compute node per link.
Graph chain(int64_t length, int64_t width) {
  Graph g("chain-" + std::to_string(length));
  TensorRef x{g.add("Input", {{"shape", IntList{width, width}}}, {}, "x"), 0};
  for (int64_t i = 0; i < length; ++i) x = {g.add("Relu", {}, {x}), 0};
  const TensorRef t{g.add("Input", {{"shape", IntList{width, width}}}, {}, "target"), 0};
  g.add_output({g.add("MSELoss", {}, {x, t}), 0});
  return g;
}

}  // namespace

int64_t steps_lasting(double seconds, double step, int64_t least, int64_t most) {
  if (!(step > 0)) return least;
  return std::clamp<int64_t>(static_cast<int64_t>(seconds / step), least, most);
}

double median_step(const runtime::TrainResult& r) {
  const std::vector<double>& v = r.step_seconds;
  return v.size() < 2 ? (v.empty() ? 0 : v[0]) : median(std::vector<double>(v.begin() + 1, v.end()));
}

namespace {

// Kernel seconds per step of a timed run on one device.
double kernel_seconds(const runtime::TrainResult& r) {
  if (r.device_times.empty() || r.device_times[0].steps <= 0) return 0;
  return r.device_times[0].kernels / static_cast<double>(r.device_times[0].steps);
}

Graph load(const std::string& model) {
  if (find_model(model)) return build_model(model);
  if (!std::filesystem::exists(model)) throw Error(model + ": neither a zoo model (`pcgx models` lists them) nor an existing file");
  return load_graph(model);
}

// FLOPs and bytes of one task of `e`, as the roofline counts them.
std::pair<double, double> work_of(const ProfileEntry& e) {
  const OpDef* op = OpRegistry::global().find(e.op);
  if (!op || !op->infer_types) return {0, 0};
  std::vector<TensorType> in;
  for (const auto& s : e.inputs) in.push_back({s, DataType::kFloat32});
  try {
    const Attributes a;  // the default attributes: the count's scale is what the fit needs
    const auto out = op->infer_types(a, in);
    return {op->flops ? op->flops(a, in, out) : 0.0, memory_bytes(*op, a, in, out)};
  } catch (const Error&) {
    return {0, 0};
  }
}

// Each level's figures by least squares on the model's own formulas
// (collectives.h): the message latency and the bandwidth from its
// messages; then, that bandwidth kept, the step latency (a collective
// step: every member sends and receives at once) from the all-reduces
// whose widest crossed level it is, linearized at the current figures (a
// collective's time is piecewise linear in one level's step latency, so
// its slope in it is its steps there). The bandwidth is not refitted to
// the all-reduces: a large one also adds what it receives, at the speed of
// memory rather than of the link, and would pull the link's figures away
// from the messages the runtime sends. Levels in turn, a few rounds.
void fit_links(const Machine& m, Calibration& cal) {
  Machine fitted = m;
  auto level_of = [&](const std::string& name) {
    for (size_t l = 0; l < fitted.links.size(); ++l)
      if (fitted.links[l].name == name) return l;
    return fitted.links.size();
  };
  auto time_at = [&](const CollectiveCheck& x, size_t l, double step_latency, double inverse_bandwidth) {
    Machine probe = fitted;
    probe.links[l].step_latency = step_latency, probe.links[l].bandwidth = inverse_bandwidth > 0 ? 1.0 / inverse_bandwidth : 1e30;
    return search::collective_time(probe, search::Collective::kAllReduce, search::strided_group(probe, 0, 1, x.group), x.bytes);
  };
  for (LinkSamples& s : cal.links) {
    s.fit = fit_link(s.messages);
    const size_t l = level_of(s.level);
    if (s.fit.bandwidth > 0)
      fitted.links[l].latency = s.fit.latency, fitted.links[l].step_latency = s.fit.latency, fitted.links[l].bandwidth = s.fit.bandwidth;
  }
  for (int round = 0; round < 4; ++round)
    for (LinkSamples& s : cal.links) {
      const size_t l = level_of(s.level);
      // A level whose messages resolved no bandwidth keeps the machine's
      // figures and is left out of the profile (below): nothing to refit.
      if (fitted.links[l].bandwidth <= 0 || s.fit.bandwidth <= 0) continue;
      std::vector<MessageSample> steps;  // the all-reduces, less what the fitted bandwidth prices
      s.collectives = 0;
      for (const CollectiveCheck& x : cal.all_reduces) {
        const search::GroupShape g = search::strided_group(fitted, 0, 1, x.group);
        if (g.top() != l || x.measured <= 0) continue;
        const double a = fitted.links[l].collective_latency(), b = 1.0 / fitted.links[l].bandwidth;
        const double t = time_at(x, l, a, b), da = std::max(a, 1e-9) * 1e-4;
        const double n = (time_at(x, l, a + da, b) - t) / da;
        steps.push_back({0, x.measured, 0, std::max(0.0, t - n * a), n});
        ++s.collectives;
      }
      const LinkFit f = fit_link(steps);
      if (f.step_latency <= 0) continue;
      fitted.links[l].step_latency = s.fit.step_latency = f.step_latency;
      // The residual over every sample, messages and all-reduces.
      double sq = 0;
      for (const MessageSample& x : s.messages) {
        const double e = (s.fit.latency + x.bytes / s.fit.bandwidth - x.seconds) / x.seconds;
        sq += e * e;
      }
      for (const MessageSample& x : steps) {
        const double e = (x.other + x.steps * f.step_latency - x.seconds) / x.seconds;
        sq += e * e;
      }
      s.fit.residual = std::sqrt(sq / static_cast<double>(s.messages.size() + steps.size()));
    }
  for (CollectiveCheck& x : cal.all_reduces)
    x.predicted = search::collective_time(fitted, search::Collective::kAllReduce, search::strided_group(fitted, 0, 1, x.group), x.bytes);
}

}  // namespace

void measure_links(const CalibrationOptions& o, Calibration& cal) {
  const int devices = o.world ? o.world->size() : o.devices;
  if (devices < 2) throw Error("calibrate: needs at least 2 devices to time messages");
  const bool root = !o.world || o.world->rank() == 0;
  auto say = [&](const std::string& s) {
    if (root && o.progress) o.progress(s);
  };
  cal.links.clear();
  cal.all_reduces.clear();
  // Links: device 0 and the first device it reaches over each level.
  const Machine m = o.machine.num_devices() >= devices ? o.machine.with_devices(devices) : o.machine;
  for (size_t l = 0; l < m.links.size(); ++l) {
    int peer = -1;
    for (int d = 1; d < devices && peer < 0; ++d)
      if (&m.link_between(0, d) == &m.links[l]) peer = d;
    if (peer < 0) continue;
    say("timing messages over " + m.links[l].name + " (devices 0 and " + std::to_string(peer) + ")");
    LinkSamples s{m.links[l].name, peer, {}, 0, {}};
    on_devices(o, [&](runtime::Communicator& c) {
      auto got = ping_pong(c, peer, o.repeats);
      if (c.rank() == 0) s.messages = std::move(got);
    });
    cal.links.push_back(std::move(s));
  }

  // Collectives: the communicator's all-reduce over 2 .. N devices.
  say("timing all-reduces over 2.." + std::to_string(devices) + " devices");
  on_devices(o, [&](runtime::Communicator& c) {
    auto got = all_reduces(c, devices, std::max<int64_t>(o.repeats / 4, 4));
    if (c.rank() == 0) cal.all_reduces = std::move(got);
  });
  if (root) fit_links(m, cal);
}

Calibration calibrate(const CalibrationOptions& o) {
  Calibration cal;
  Profile& p = cal.profile;
  const int devices = o.world ? o.world->size() : o.devices;
  if (devices < 2) throw Error("calibrate: needs at least 2 devices to time messages");
  const bool root = !o.world || o.world->rank() == 0;
  auto say = [&](const std::string& s) {
    if (root && o.progress) o.progress(s);
  };

  // Inputs first: a bad name fails before minutes of timing.
  Ruleset rs;
  if (!o.models.empty() && !o.ruleset.empty()) rs = load_ruleset(o.ruleset);
  std::vector<std::pair<std::string, Graph>> models;
  for (const std::string& name : o.models) models.emplace_back(name, load(name));

  const Machine m = o.machine.num_devices() >= devices ? o.machine.with_devices(devices) : o.machine;
  measure_links(o, cal);
  // A link whose messages showed no cost per byte (on a loaded machine the
  // larger messages can come out no slower than the smallest, and the best
  // non-negative fit is a latency alone) has no bandwidth to state: it is
  // left out, and the machine file's figures stand for it, rather than
  // written as a bandwidth of 0 that no profile may hold.
  for (const LinkSamples& s : cal.links)
    if (s.fit.bandwidth > 0)
      p.links.push_back({s.level, s.fit.latency, s.fit.bandwidth, s.fit.step_latency, s.fit.residual,
                         static_cast<int64_t>(s.messages.size() + s.collectives)});

  const search::CostModel cost(m, search::default_efficiency());
  const search::MachineMapper mapper(cost);

  // Overhead per node and per byte held: chains of two widths on one
  // device (no messages), under MPI on rank 0 alone.
  if (root) {
    for (const int64_t width : kChainWidths)
      for (const int64_t length : kChainLengths) {
        say("timing a chain of " + std::to_string(length) + " operators on " + std::to_string(width) + "x" + std::to_string(width));
        const Graph g = chain(length, width);
        // The step untimed (timing kernels costs clock reads), the kernels timed.
        runtime::TrainOptions t;
        t.steps = steps_lasting(kTimedRunSeconds, mapper.map(g).estimate.time, 3 * o.steps, 300 * o.steps), t.batches = 1, t.threads = o.threads;
        const runtime::TrainResult plain = runtime::train(g, {}, 1, t);
        t.time_kernels = true;
        const runtime::TrainResult timed = runtime::train(g, {}, 1, t);
        const double step = median_step(plain);
        cal.overhead_samples.push_back({"chain of " + std::to_string(length) + " on " + std::to_string(width) + "x" + std::to_string(width),
                                        static_cast<double>(length + 1), held_bytes(Placement(g, {}, 1), 0), step,
                                        step - kernel_seconds(timed)});
      }
  }

  // Kernels of the models, under each plan the search would start from.
  const double clock_read = runtime::clock_read_seconds();
  const search::RuleLibrary rules(rs);
  double update_sum = 0;
  int64_t updates = 0;
  double copy_sum = 0;  // bucket copies, bytes per second, per run
  int64_t copies = 0;
  struct Timed {
    double forward = 0, backward = 0;
    int64_t runs = 0;
  };
  std::map<std::pair<std::string, std::vector<std::vector<int64_t>>>, Timed> timed;
  for (const auto& [name, model] : models) {
    std::vector<std::pair<std::string, Graph>> plans{{"unpartitioned", model}, {"data-parallel", search::best_data_parallel(model, mapper)}};
    if (!o.ruleset.empty()) {
      search::SearchOptions so;
      so.budget = 6;
      plans.push_back({"unity", search::optimize(model, rules, mapper, so).strategy.graph});
    }
    for (int64_t t : search::expert_tensor_degrees(m, devices, search::expert_family(model)))
      if (auto e = search::expert(model, m, devices, t)) plans.push_back({"expert t=" + std::to_string(t), std::move(*e)});
    for (const auto& [label, graph] : plans) {
      say("timing the kernels of " + name + " (" + label + ")");
      const search::Strategy st = mapper.map(graph);
      if (!st.estimate.feasible) continue;
      runtime::TrainOptions t;
      t.steps = steps_lasting(kTimedRunSeconds, st.estimate.time, o.steps, 100 * o.steps), t.batches = 1, t.time_kernels = true;
      const runtime::TrainResult r = train_on_devices(o, st.graph, st.views, t);
      if (!root) continue;
      if (!r.device_times.empty()) {
        // The busiest device measured (under MPI rank 0's, the one timed).
        size_t d = 0;
        for (size_t i = 1; i < r.device_times.size(); ++i)
          if (r.device_times[i].step - r.device_times[i].messages > r.device_times[d].step - r.device_times[d].messages) d = i;
        const runtime::DeviceTime& x = r.device_times[d];
        // Within the timed run (two runs differ by more than the overhead),
        // less its own clock reads: two around each kernel call (forward
        // and backward) and each message.
        const double steps = static_cast<double>(std::max<int64_t>(x.steps, 1));
        const int64_t device = o.world ? 0 : static_cast<int64_t>(d);
        int64_t nodes = 0;
        for (const Node& n : st.graph.nodes()) nodes += n.op->op_class != OpClass::kSource;
        const double reads = 4.0 * static_cast<double>(nodes) + 4.0 * static_cast<double>(x.sends) / steps;
        cal.overhead_samples.push_back({name + " (" + label + ")", static_cast<double>(nodes),
                                        held_bytes(Placement(st.graph, st.views, devices), device), x.step / steps,
                                        x.other() / steps - reads * clock_read});
      }
      const Profile run = runtime::profile_from_run(st.graph, r);
      for (const ProfileEntry& e : run.entries) {
        Timed& x = timed[{e.op, e.inputs}];
        x.forward += e.forward, x.backward += e.backward, ++x.runs;
      }
      if (run.update_bytes_per_second > 0) update_sum += run.update_bytes_per_second, ++updates, p.update_words = run.update_words;  // (one optimizer: t's)
      if (run.bucket_copy_bytes_per_second > 0) copy_sum += run.bucket_copy_bytes_per_second, ++copies;
      ++cal.runs;
    }
  }
  // A shape's time depends on what the other devices do meanwhile (they
  // share the cores and caches): the mean over the plans that ran it.
  for (const auto& [key, x] : timed)
    p.add({key.first, key.second, x.forward / static_cast<double>(x.runs), x.backward / static_cast<double>(x.runs)});
  if (updates > 0) p.update_bytes_per_second = update_sum / static_cast<double>(updates);
  if (copies > 0) p.bucket_copy_bytes_per_second = copy_sum / static_cast<double>(copies);
  if (root) {
    // Weighted by 1 / step^2: an error matters relative to the step it is
    // in (the error reported below), so a 5 us step weighs as much as a
    // 5 ms one.
    std::vector<double> nodes, bytes, beyond, weights;
    for (const Calibration::OverheadSample& x : cal.overhead_samples)
      nodes.push_back(x.nodes), bytes.push_back(x.bytes), beyond.push_back(x.beyond), weights.push_back(x.step > 0 ? 1 / (x.step * x.step) : 0);
    cal.overhead = fit_plane(nodes, bytes, beyond, weights);
    double sq = 0;
    for (const Calibration::OverheadSample& x : cal.overhead_samples) {
      const double e = x.step > 0 ? (cal.overhead.a + cal.overhead.b * x.nodes + cal.overhead.c * x.bytes - x.beyond) / x.step : 0;
      sq += e * e;
    }
    cal.overhead_error = cal.overhead_samples.empty() ? 0 : std::sqrt(sq / static_cast<double>(cal.overhead_samples.size()));
    p.node_overhead = cal.overhead.b, p.byte_overhead = cal.overhead.c;
  }

  // Device rates for shapes without an entry, as the roofline uses them
  // (its efficiencies applied): FLOP/s from the entries of more than the
  // median arithmetic intensity, bytes/s from the others.
  const search::Efficiency eff = search::default_efficiency();
  struct Rates {
    double intensity, flops, bytes;
  };
  std::vector<Rates> rates;
  for (const ProfileEntry& e : p.entries) {
    const auto [flops, bytes] = work_of(e);
    if (e.forward <= 0 || bytes <= 0 || flops <= 0) continue;
    const search::OpEfficiency& oe = eff.of(e.op);
    rates.push_back({flops / bytes, flops / (e.forward * oe.compute), bytes / (e.forward * oe.memory)});
  }
  if (rates.size() >= 2) {
    std::vector<double> intensity;
    for (const Rates& r : rates) intensity.push_back(r.intensity);
    const double cut = median(intensity);
    std::vector<double> flops_rate, byte_rate;
    for (const Rates& r : rates) (r.intensity > cut ? flops_rate : byte_rate).push_back(r.intensity > cut ? r.flops : r.bytes);
    if (flops_rate.empty()) flops_rate.push_back(rates.front().flops);
    cal.compute_bound = static_cast<int64_t>(flops_rate.size()), cal.memory_bound = static_cast<int64_t>(byte_rate.size());
    p.peak_flops = median(flops_rate), p.memory_bandwidth = median(byte_rate);
  }
  return cal;
}

}  // namespace pcgx::runner
