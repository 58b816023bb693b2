#pragma once
// How devices exchange data (docs/design.md "Runtime"): one interface, with an
// in-process implementation for virtual devices (in_process.h) and room for
// MPI and NCCL ones. Every device runs the same execution plan (SPMD), so
// both ends of every exchange know it is coming: a message is identified by
// (source, destination, tag) and messages with equal keys arrive in order.
//
// Point-to-point is the primitive: send never blocks (messages are
// buffered), recv blocks until its message arrives. The collectives have
// portable implementations over point-to-point here; a backend with native
// ones (MPI, NCCL) overrides them. Every member of `group` must make the
// same collective call with buffers of the same size; ranks outside the
// group do not call.
//
// Algorithms, as the cost model prices them (search/collectives.h, NCCL's):
// all_reduce is a ring (a reduce-scatter then an all-gather around the
// members, 2(k-1) steps each moving size/k per member) on 2 members or
// from kRingBytes; below that on more members, where the ring's 2(k-1)
// latencies dominate, reduce-to-root then broadcast. Either way the
// members send 2(k-1) x size bytes in all. reduce_scatter, all_gather and
// all_to_all exchange k(k-1) blocks of size/k.
#include <cstdint>
#include <span>
#include <vector>

namespace pcgx::runtime {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual void send(int to, int64_t tag, std::span<const float> data) = 0;
  virtual void recv(int from, int64_t tag, std::span<float> data) = 0;

  // Sum of every member's buffer, on every member.
  virtual void all_reduce(std::span<const int> group, std::span<float> data);
  // The same where the members of a group call collectives in different
  // sequences (each device takes part in other groups): `tag` names this
  // call, the same on every member, at most kCollectiveTagBase.
  static constexpr int64_t kCollectiveTagBase = -(int64_t{1} << 48);
  // From this size the ring's bandwidth outweighs its latencies: a ring
  // costs about 2(k-1) (latency + size/k/bandwidth), the rooted form
  // 2 latency + 2(k-1) size/bandwidth; on this CPU's threads (22 us,
  // 10 GB/s, `pcgx calibrate`) they cross near 220 KB.
  static constexpr int64_t kRingBytes = 256 * 1024;
  virtual void all_reduce(std::span<const int> group, std::span<float> data, int64_t tag);
  // Sum of every member's buffer, on `root` (other members' buffers are unchanged).
  virtual void reduce(std::span<const int> group, int root, std::span<float> data);
  // root's buffer, on every member.
  virtual void broadcast(std::span<const int> group, int root, std::span<float> data);
  // Member i's `in` lands in block i of every member's `out` (size k*|in|).
  virtual void all_gather(std::span<const int> group, std::span<const float> in, std::span<float> out);
  // Block i of the sum of every member's `in` (size k*|out|), on member i.
  virtual void reduce_scatter(std::span<const int> group, std::span<const float> in, std::span<float> out);
  // The same two named by `tag` (one tag each), as all_reduce's tagged form.
  virtual void all_gather(std::span<const int> group, std::span<const float> in, std::span<float> out, int64_t tag);
  virtual void reduce_scatter(std::span<const int> group, std::span<const float> in, std::span<float> out, int64_t tag);
  // Block j of member i's `in` lands in block i of member j's `out`.
  virtual void all_to_all(std::span<const int> group, std::span<const float> in, std::span<float> out);

 protected:
  // Tags of collective messages: a separate space from the executor's.
  int64_t next_collective_tag() { return -(++collectives_); }

 private:
  void reduce_tagged(std::span<const int> group, int root, std::span<float> data, int64_t tag);
  void ring_all_reduce(std::span<const int> group, std::span<float> data, int64_t tag);
  void all_reduce_tagged(std::span<const int> group, std::span<float> data, int64_t tag);
  void broadcast_tagged(std::span<const int> group, int root, std::span<float> data, int64_t tag);
  int64_t collectives_ = 0;
  std::vector<float> scratch_;  // receive buffer of reduce and the ring
};

}  // namespace pcgx::runtime
