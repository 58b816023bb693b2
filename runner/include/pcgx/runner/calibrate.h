#pragma once
// `pcgx calibrate` (AutoDDL, Section 3; docs/design.md "Search": constants come
// from the machine file or from `pcgx calibrate` on the machine at hand):
// measures the machine as the runtime uses it and fits the profile
// (pcg/profile.h) the cost model reads.
//
//   - Links: one message between device 0 and a device of each link level,
//     4 B to 4 MiB, timed as half a ping-pong, and the communicator's
//     all-reduce of 4 B to 4 MiB over 2 ... N devices; per level, by
//     least squares on relative error, the message latency (from the
//     messages), the step latency of a collective (machine.h: every
//     member sends and receives at once, about twice a lone message on
//     threads; from the all-reduces, each through collectives.h's formula
//     for the level it crosses widest) and the bandwidth (from the
//     messages); every all-reduce reported beside the fitted formula's
//     time.
//   - Overhead: chains of L elementwise operators on 16x16 and 128x128
//     tensors, L = 8 ... 64, trained on one device, and every timed model
//     run below: the median step (untimed) less the kernels, messages and
//     optimizer of the busiest device (timed), fitted as a constant + a
//     cost per node (the executor's loops and bookkeeping, local copies;
//     on a GPU, launches) + a cost per byte a device holds (zeroing values
//     and gradients).
//   - Kernels: each given model trained under each plan (unpartitioned,
//     data parallel, unity, the expert's where one applies) with kernel
//     timing: an entry per (operator, task shapes), and the optimizer's
//     rate. Device rates are fitted to them for shapes without an entry:
//     the median FLOP/s of the entries above the median arithmetic
//     intensity and bytes/s of the others, as the roofline's efficiency
//     table would have them.
//
// In-process devices are threads sharing this machine's cores, under MPI
// one rank each; everything is measured as the training runs.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pcgx/pcg/machine.h"
#include "pcgx/pcg/profile.h"
#include "pcgx/runner/fit.h"
#include "pcgx/runtime/trainer.h"

namespace pcgx::runtime {
class MpiWorld;
}

namespace pcgx::runner {

struct CalibrationOptions {
  Machine machine;   // its link levels are fitted, by name
  int devices = 2;   // in-process devices (under MPI: the ranks)
  int threads = 1;   // kernel threads per device
  std::vector<std::string> models;  // zoo models or graph files whose kernels to time
  std::string ruleset;              // for unity plans
  int64_t steps = 12;               // training steps per timed run
  int64_t repeats = 40;             // ping-pongs per message size
  runtime::MpiWorld* world = nullptr;  // set: measure the MPI ranks
  std::function<void(const std::string&)> progress;
};

struct LinkSamples {
  std::string level;
  int peer = 1;  // the device device 0 talked to
  std::vector<MessageSample> messages;
  int64_t collectives = 0;  // all-reduces fitted with the messages
  LinkFit fit;
};

struct CollectiveCheck {
  int64_t group = 0;
  double bytes = 0, measured = 0, predicted = 0;
};

struct Calibration {
  Profile profile;  // the result
  std::vector<LinkSamples> links;
  std::vector<CollectiveCheck> all_reduces;
  // What a step costs beyond kernels, messages and the optimizer, per
  // chain and per timed model run (its busiest device): the samples of
  // `overhead` = a + node overhead x nodes + byte overhead x bytes held.
  struct OverheadSample {
    std::string what;
    double nodes = 0, bytes = 0;
    double step = 0, beyond = 0;  // seconds per step: the whole (median, untimed), beyond the rest
  };
  std::vector<OverheadSample> overhead_samples;
  PlaneFit overhead;
  double overhead_error = 0;  // RMS over the samples of (fitted - measured) / step
  int64_t runs = 0;           // timed training runs of the models
  int64_t compute_bound = 0, memory_bound = 0;  // entries behind the fitted rates
};

// Steps for a run of a graph predicted at `step` seconds each (roughly: the
// roofline's before a calibration exists) to last `seconds`, within
// [least, most]: short runs time caches and clocks still warming up.
int64_t steps_lasting(double seconds, double step, int64_t least, int64_t most);

// The median step of a run, its first left out: on a machine whose cores
// are shared (a VM), a step now and then stalls for milliseconds, and the
// mean would carry them.
double median_step(const runtime::TrainResult& r);

// The links alone, as calibrate() measures them first: messages and
// all-reduces timed and fitted into cal.links and cal.all_reduces. A bench
// calls it again after its measurements to see whether the machine stayed
// what the calibration saw (a VM's cores can be moved by its host).
void measure_links(const CalibrationOptions& options, Calibration& cal);

// Throws pcgx::Error for a model that cannot be loaded or trained. Under
// MPI every rank calls it; the result is complete on rank 0.
Calibration calibrate(const CalibrationOptions& options);

}  // namespace pcgx::runner
