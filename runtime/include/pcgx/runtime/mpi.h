#pragma once
// The MPI backend (docs/design.md "Runtime"): one process per device, started by
// `mpirun -np N`, on one machine or several. Each rank runs the same plan
// (SPMD) and exchanges shards through an MpiCommunicator.
//
// Messages. The executor's 64-bit tags do not fit MPI's int tags, so every
// message carries its tag in an 8-byte header and travels on one MPI tag;
// MPI keeps messages from one sender in order, and a receiver sets aside
// (in per-(source, tag) queues) those that arrive before they are asked
// for. Sends are non-blocking (MPI_Isend on a copy), as the Communicator
// contract requires; their buffers are released as they complete. The
// collectives are the portable ones over point-to-point (communicator.h),
// so the bytes moved match the in-process backend and the cost model.
//
// Built only when CMake finds MPI (Debian's OpenMPI); mpi_built() says so.
#include <cstdint>
#include <memory>
#include <string>

#include "pcgx/runtime/communicator.h"

namespace pcgx::runtime {

// Whether this pcgx was built with MPI.
bool mpi_built();
// Whether this process was started by an MPI launcher (mpirun / mpiexec /
// srun set these variables), with more than one rank.
bool mpi_launched();
// Ranks of this job on this machine, as the launcher tells them (Open MPI,
// MPICH), else `world_size`: the devices sharing this machine's cores.
int mpi_local_ranks(int world_size);

class MpiWorld {
 public:
  // Initializes MPI; throws pcgx::Error when pcgx was built without it.
  MpiWorld();
  // Waits for outstanding sends, then finalizes MPI.
  ~MpiWorld();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const;
  int size() const;
  Communicator& communicator();
  // rank `root`'s text, on every rank (a strategy found by rank 0 only).
  void broadcast_text(std::string& text, int root = 0);
  // Sum over ranks (bytes moved, for the run report).
  int64_t sum(int64_t value);
  // Bytes this rank sent.
  int64_t bytes_sent() const;
  // Ends every rank (after an error on one of them).
  [[noreturn]] void abort(int code);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace pcgx::runtime
