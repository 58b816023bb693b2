#include "pcgx/runtime/communicator.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace pcgx::runtime {
namespace {

int index_in(std::span<const int> group, int rank) {
  const auto it = std::find(group.begin(), group.end(), rank);
  if (it == group.end()) throw std::logic_error("collective called by a rank outside its group");
  return static_cast<int>(it - group.begin());
}

}  // namespace

void Communicator::reduce(std::span<const int> group, int root, std::span<float> data) {
  reduce_tagged(group, root, data, next_collective_tag());
}

void Communicator::reduce_tagged(std::span<const int> group, int root, std::span<float> data, int64_t tag) {
  if (rank() != root) {
    send(root, tag, data);
    return;
  }
  if (scratch_.size() < data.size()) scratch_.resize(data.size());  // grows once: steps allocate nothing
  const std::span<float> part(scratch_.data(), data.size());
  for (int m : group) {
    if (m == root) continue;
    recv(m, tag, part);
    for (size_t i = 0; i < data.size(); ++i) data[i] += part[i];
  }
}

void Communicator::broadcast(std::span<const int> group, int root, std::span<float> data) {
  broadcast_tagged(group, root, data, next_collective_tag());
}

void Communicator::broadcast_tagged(std::span<const int> group, int root, std::span<float> data, int64_t tag) {
  if (rank() == root) {
    for (int m : group)
      if (m != root) send(m, tag, data);
  } else {
    recv(root, tag, data);
  }
}

void Communicator::ring_all_reduce(std::span<const int> group, std::span<float> data, int64_t tag) {
  // Block b is [b n / k, (b+1) n / k). Step s of the reduce-scatter sends
  // block me - s on and adds block me - s - 1 from the previous member,
  // which leaves member me with block me + 1 summed; the all-gather then
  // passes the summed blocks around. No block is written after it is sent.
  const int k = static_cast<int>(group.size());
  const int me = index_in(group, rank());
  const int next = group[static_cast<size_t>((me + 1) % k)], prev = group[static_cast<size_t>((me + k - 1) % k)];
  const size_t n = data.size();
  auto block = [&](int b) {
    b = ((b % k) + k) % k;
    const size_t lo = n * static_cast<size_t>(b) / static_cast<size_t>(k), hi = n * static_cast<size_t>(b + 1) / static_cast<size_t>(k);
    return data.subspan(lo, hi - lo);
  };
  if (scratch_.size() < n / static_cast<size_t>(k) + 1) scratch_.resize(n / static_cast<size_t>(k) + 1);
  for (int s = 0; s + 1 < k; ++s) {
    send(next, tag, block(me - s));
    const std::span<float> into = block(me - s - 1);
    const std::span<float> part(scratch_.data(), into.size());
    recv(prev, tag, part);
    for (size_t i = 0; i < into.size(); ++i) into[i] += part[i];
  }
  for (int s = 0; s + 1 < k; ++s) {
    send(next, tag - 1, block(me + 1 - s));
    recv(prev, tag - 1, block(me - s));
  }
}

void Communicator::all_reduce_tagged(std::span<const int> group, std::span<float> data, int64_t tag) {
  if (group.size() == 2 || static_cast<int64_t>(data.size_bytes()) >= kRingBytes) {
    ring_all_reduce(group, data, tag);
    return;
  }
  reduce_tagged(group, group[0], data, tag);
  broadcast_tagged(group, group[0], data, tag - 1);
}

void Communicator::all_reduce(std::span<const int> group, std::span<float> data) {
  const int64_t tag = next_collective_tag();
  next_collective_tag();
  all_reduce_tagged(group, data, tag);
}

void Communicator::all_reduce(std::span<const int> group, std::span<float> data, int64_t tag) {
  // Two tags: the first phase's, then tag - 1.
  all_reduce_tagged(group, data, tag);
}

void Communicator::all_gather(std::span<const int> group, std::span<const float> in, std::span<float> out) {
  all_gather(group, in, out, next_collective_tag());
}

void Communicator::all_gather(std::span<const int> group, std::span<const float> in, std::span<float> out, int64_t tag) {
  const int me = index_in(group, rank());
  const size_t n = in.size();
  for (int m : group)
    if (m != rank()) send(m, tag, in);
  for (size_t i = 0; i < group.size(); ++i) {
    auto block = out.subspan(i * n, n);
    if (static_cast<int>(i) == me) for (size_t e = 0; e < n; ++e) block[e] = in[e];
    else recv(group[i], tag, block);
  }
}

void Communicator::reduce_scatter(std::span<const int> group, std::span<const float> in, std::span<float> out) {
  reduce_scatter(group, in, out, next_collective_tag());
}

void Communicator::reduce_scatter(std::span<const int> group, std::span<const float> in, std::span<float> out, int64_t tag) {
  // Every member's block i is summed on member i in group order, the
  // member's own block first: the same sum on every run.
  const int me = index_in(group, rank());
  const size_t n = out.size();
  for (size_t i = 0; i < group.size(); ++i)
    if (static_cast<int>(i) != me) send(group[i], tag, in.subspan(i * n, n));
  std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(me) * n), n, out.begin());
  if (scratch_.size() < n) scratch_.resize(n);  // grows once: steps allocate nothing
  const std::span<float> part(scratch_.data(), n);
  for (int m : group) {
    if (m == rank()) continue;
    recv(m, tag, part);
    for (size_t i = 0; i < n; ++i) out[i] += part[i];
  }
}

void Communicator::all_to_all(std::span<const int> group, std::span<const float> in, std::span<float> out) {
  const int64_t tag = next_collective_tag();
  const int me = index_in(group, rank());
  const size_t n = in.size() / group.size();
  for (size_t j = 0; j < group.size(); ++j)
    if (static_cast<int>(j) != me) send(group[j], tag, in.subspan(j * n, n));
  for (size_t i = 0; i < group.size(); ++i) {
    auto block = out.subspan(i * n, n);
    if (static_cast<int>(i) == me) for (size_t e = 0; e < n; ++e) block[e] = in[static_cast<size_t>(me) * n + e];
    else recv(group[i], tag, block);
  }
}

}  // namespace pcgx::runtime
