// The MPI backend (see mpi.h). Without MPI at build time every entry point
// but mpi_built()/mpi_launched() throws.
#include "pcgx/runtime/mpi.h"

#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <utility>
#include <vector>

#include "pcgx/pcg/error.h"

#ifdef PCGX_HAVE_MPI
#include <mpi.h>
#endif

namespace pcgx::runtime {

bool mpi_launched() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"})
    if (const char* s = std::getenv(v); s && std::atoi(s) > 1) return true;
  return false;
}

int mpi_local_ranks(int world_size) {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char* s = std::getenv(v); s && std::atoi(s) > 0) return std::atoi(s);
  return world_size;
}

#ifdef PCGX_HAVE_MPI

bool mpi_built() { return true; }

namespace {

constexpr int kTag = 7;  // the one MPI tag every message travels on

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw Error(std::string("MPI: ") + what + " failed (code " + std::to_string(rc) + ")");
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  }
  ~MpiCommunicator() override { drain(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void send(int to, int64_t tag, std::span<const float> data) override {
    Pending& p = pending_.emplace_back();
    p.buffer.resize(sizeof(int64_t) + data.size_bytes());
    std::memcpy(p.buffer.data(), &tag, sizeof tag);
    if (!data.empty()) std::memcpy(p.buffer.data() + sizeof tag, data.data(), data.size_bytes());
    check(MPI_Isend(p.buffer.data(), static_cast<int>(p.buffer.size()), MPI_BYTE, to, kTag, MPI_COMM_WORLD, &p.request), "MPI_Isend");
    bytes_ += static_cast<int64_t>(data.size_bytes());
    reap();
  }

  void recv(int from, int64_t tag, std::span<float> data) override {
    if (auto it = stash_.find({from, tag}); it != stash_.end()) {
      take(it->second.front(), from, tag, data);
      it->second.pop_front();
      if (it->second.empty()) stash_.erase(it);
      return;
    }
    for (;;) {
      MPI_Status st;
      check(MPI_Probe(from, kTag, MPI_COMM_WORLD, &st), "MPI_Probe");
      int count = 0;
      check(MPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count");
      std::vector<char> msg(static_cast<size_t>(count));
      check(MPI_Recv(msg.data(), count, MPI_BYTE, from, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
      int64_t got = 0;
      if (msg.size() < sizeof got) throw Error("MPI: a message from rank " + std::to_string(from) + " has no header");
      std::memcpy(&got, msg.data(), sizeof got);
      if (got == tag) {
        take(msg, from, tag, data);
        reap();
        return;
      }
      stash_[{from, got}].push_back(std::move(msg));
    }
  }

  int64_t bytes() const { return bytes_; }

  // Completes every outstanding send.
  void drain() {
    for (Pending& p : pending_) MPI_Wait(&p.request, MPI_STATUS_IGNORE);
    pending_.clear();
  }

 private:
  struct Pending {
    std::vector<char> buffer;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  static void take(const std::vector<char>& msg, int from, int64_t tag, std::span<float> data) {
    if (msg.size() - sizeof(int64_t) != data.size_bytes())
      throw Error("MPI: message " + std::to_string(tag) + " from rank " + std::to_string(from) + " has " +
                  std::to_string(msg.size() - sizeof(int64_t)) + " bytes, " + std::to_string(data.size_bytes()) + " expected");
    if (!data.empty()) std::memcpy(data.data(), msg.data() + sizeof(int64_t), data.size_bytes());
  }

  // Frees the buffers of completed sends.
  void reap() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      it = done ? pending_.erase(it) : std::next(it);
    }
  }

  int rank_ = 0, size_ = 1;
  int64_t bytes_ = 0;
  std::list<Pending> pending_;  // stable addresses while MPI holds them
  std::map<std::pair<int, int64_t>, std::deque<std::vector<char>>> stash_;
};

}  // namespace

struct MpiWorld::Impl {
  std::unique_ptr<MpiCommunicator> comm;
};

MpiWorld::MpiWorld() : impl_(std::make_unique<Impl>()) {
  int ready = 0;
  MPI_Initialized(&ready);
  if (!ready) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  impl_->comm = std::make_unique<MpiCommunicator>();
}

MpiWorld::~MpiWorld() {
  impl_->comm->drain();
  impl_->comm.reset();
  MPI_Barrier(MPI_COMM_WORLD);
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

int MpiWorld::rank() const { return impl_->comm->rank(); }
int MpiWorld::size() const { return impl_->comm->size(); }
Communicator& MpiWorld::communicator() { return *impl_->comm; }
int64_t MpiWorld::bytes_sent() const { return impl_->comm->bytes(); }

void MpiWorld::broadcast_text(std::string& text, int root) {
  uint64_t n = text.size();
  check(MPI_Bcast(&n, 1, MPI_UINT64_T, root, MPI_COMM_WORLD), "MPI_Bcast");
  text.resize(n);
  if (n > 0) check(MPI_Bcast(text.data(), static_cast<int>(n), MPI_CHAR, root, MPI_COMM_WORLD), "MPI_Bcast");
}

int64_t MpiWorld::sum(int64_t value) {
  int64_t out = 0;
  check(MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  return out;
}

void MpiWorld::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

#else  // no MPI

bool mpi_built() { return false; }

struct MpiWorld::Impl {};

namespace {
[[noreturn]] void unavailable() {
  throw Error("mpi: this pcgx was built without MPI (install Debian's libopenmpi-dev and rebuild)");
}
}  // namespace

MpiWorld::MpiWorld() { unavailable(); }
MpiWorld::~MpiWorld() = default;
int MpiWorld::rank() const { unavailable(); }
int MpiWorld::size() const { unavailable(); }
Communicator& MpiWorld::communicator() { unavailable(); }
void MpiWorld::broadcast_text(std::string&, int) { unavailable(); }
int64_t MpiWorld::sum(int64_t) { unavailable(); }
int64_t MpiWorld::bytes_sent() const { unavailable(); }
void MpiWorld::abort(int code) { std::_Exit(code); }

#endif

}  // namespace pcgx::runtime
