// pcgx calibrate: measure the machine at hand and write a profile for the
// cost model (runner/calibrate.h).
#include <cstdio>
#include <iomanip>
#include <iostream>

#include "cli_common.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/resources.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/runner/calibrate.h"
#include "pcgx/runtime/in_process.h"
#include "pcgx/runtime/mpi.h"
#include "pcgx/search/cost_model.h"

namespace pcgx::cli {
namespace {

std::string us(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f us", s * 1e6);
  return b;
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "calibrate", "Measure this machine as the runtime uses it (messages, collectives, per-node overhead, kernels) and write a profile");
  static std::string machine_name = "cpu-host", out, backend = "auto", ruleset_path = shipped_dir(Shipped::kRulesets) + "/unity-v1.json";
  static std::vector<std::string> models;
  static int64_t devices = 2, threads = 1, steps = 12, repeats = 40;
  cmd->add_option("--machine", machine_name, "machine whose link levels are fitted (by name)")->capture_default_str();
  cmd->add_option("--devices", devices, "in-process devices (with --backend mpi: the ranks)")->capture_default_str();
  cmd->add_option("--threads", threads, "kernel threads per device")->capture_default_str();
  cmd->add_option("--model", models, "zoo model or graph file whose kernels to time, under data parallelism, unity and the expert's plans (repeatable)");
  cmd->add_option("--ruleset", ruleset_path, "ruleset for the unity plans")->capture_default_str();
  cmd->add_option("--steps", steps, "training steps per timed run")->capture_default_str();
  cmd->add_option("--repeats", repeats, "round trips per message size")->capture_default_str();
  cmd->add_option("--backend", backend, "cpu (in-process devices), mpi (one rank each), auto: mpi when started by mpirun")->capture_default_str();
  cmd->add_option("-o,--output", out, "profile to write (pcgx.profile JSON, for --profile of optimize and run)")->required();
  cmd->callback([] {
    if (backend == "auto") backend = runtime::mpi_launched() ? "mpi" : "cpu";
    if (backend != "cpu" && backend != "mpi") throw Error("--backend: unknown backend '" + backend + "' (cpu, mpi)");
    if (devices < 2) throw Error("--devices: must be at least 2 (messages are timed between two devices)");
    if (devices > runtime::kMaxInProcessDevices)
      throw Error("--devices: at most " + std::to_string(runtime::kMaxInProcessDevices) + " in-process devices (one thread each), got " +
                  std::to_string(devices));
    if (threads < 1) throw Error("--threads: must be at least 1");
    if (steps < 2) throw Error("--steps: must be at least 2");
    if (repeats < 1) throw Error("--repeats: must be at least 1");
    std::unique_ptr<runtime::MpiWorld> world;
    if (backend == "mpi") world = std::make_unique<runtime::MpiWorld>();
    const bool rank0 = !world || world->rank() == 0;
    runner::CalibrationOptions o;
    o.machine = search::find_machine(machine_name);
    o.devices = world ? world->size() : static_cast<int>(devices);
    o.threads = static_cast<int>(threads), o.models = models, o.ruleset = ruleset_path, o.steps = steps, o.repeats = repeats;
    o.world = world.get();
    o.progress = [](const std::string& s) { std::cerr << "  " << s << "\n"; };
    runner::Calibration c = runner::calibrate(o);
    if (!rank0) return;
    c.profile.device = machine_name + " (" + std::to_string(o.devices) + (world ? " MPI ranks, " : " in-process devices, ") +
                       std::to_string(threads) + " kernel thread" + (threads == 1 ? "" : "s") + " each)";
    std::cout << std::fixed << std::setprecision(2);
    std::cout << "links (latency fitted to one message, half a ping-pong; step latency to a collective's step, where every member\n"
                 "sends and receives at once, from the all-reduces below; bandwidth to the messages)\n";
    for (const auto& l : c.links) {
      if (!(l.fit.bandwidth > 0)) {
        std::cout << "  " << std::left << std::setw(16) << l.level << std::right
                  << " no cost per byte resolved (the larger messages were no slower): left out of the profile, the machine file's "
                     "figures stand for it\n";
        for (const auto& m : l.messages)
          std::cout << "      " << std::setw(10) << static_cast<int64_t>(m.bytes) << " B  " << us(m.seconds) << "\n";
        continue;
      }
      std::cout << "  " << std::left << std::setw(16) << l.level << std::right << " latency " << us(l.fit.latency) << ", step latency "
                << us(l.fit.step_latency > 0 ? l.fit.step_latency : l.fit.latency) << ", bandwidth " << l.fit.bandwidth / 1e9 << " GB/s, residual " << 100 * l.fit.residual << "% over " << l.messages.size() << " messages and " << l.collectives << " all-reduces\n";
      for (const auto& m : l.messages)
        std::cout << "      " << std::setw(10) << static_cast<int64_t>(m.bytes) << " B  " << us(m.seconds) << "\n";
    }
    std::cout << "all-reduce (the communicator's, against collectives.h under the fitted links)\n";
    for (const auto& x : c.all_reduces)
      std::cout << "  " << x.group << " devices " << std::setw(8) << static_cast<int64_t>(x.bytes) << " B  measured " << us(x.measured)
                << "  predicted " << us(x.predicted) << "  ratio " << x.measured / x.predicted << "\n";
    std::cout << "overhead per step     " << us(c.profile.node_overhead) << " per node + " << c.profile.byte_overhead * 1e12
              << " ns per KB held (fitted to " << c.overhead_samples.size() << " runs: RMS error " << 100 * c.overhead_error << "% of a step)\n";
    for (const auto& x : c.overhead_samples)
      std::cout << "      " << std::left << std::setw(40) << x.what << std::right << std::setw(6) << static_cast<int64_t>(x.nodes) << " nodes "
                << std::setw(10) << static_cast<int64_t>(x.bytes) << " B  step " << us(x.step) << ", beyond kernels and messages " << us(x.beyond)
                << "\n";
    std::cout << "kernels               " << c.profile.entries.size() << " operator shapes from " << c.runs << " timed run" << (c.runs == 1 ? "" : "s") << "\n";
    if (c.profile.peak_flops > 0)
      std::cout << "fitted roofline       " << c.profile.peak_flops / 1e9 << " GFLOP/s (" << c.compute_bound << " compute-bound entries), "
                << c.profile.memory_bandwidth / 1e9 << " GB/s (" << c.memory_bound << " memory-bound)\n";
    if (c.profile.update_bytes_per_second > 0) std::cout << "optimizer update      " << c.profile.update_bytes_per_second / 1e9 << " GB/s of parameters\n";
    write_text_file_atomic(out, profile_to_json(c.profile));
    std::cerr << "wrote " << out << "\n";
  });
}

}  // namespace pcgx::cli
