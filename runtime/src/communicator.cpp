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

void Communicator::all_reduce(std::span<const int> group, std::span<float> data) {
  reduce(group, group[0], data);
  broadcast(group, group[0], data);
}

void Communicator::all_reduce(std::span<const int> group, std::span<float> data, int64_t tag) {
  // Two messages per member: the reduce's on tag, the broadcast's on tag - 1.
  reduce_tagged(group, group[0], data, tag);
  broadcast_tagged(group, group[0], data, tag - 1);
}

void Communicator::all_gather(std::span<const int> group, std::span<const float> in, std::span<float> out) {
  const int64_t tag = next_collective_tag();
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
  const int64_t tag = next_collective_tag();
  const int me = index_in(group, rank());
  const size_t n = out.size();
  for (size_t i = 0; i < group.size(); ++i)
    if (static_cast<int>(i) != me) send(group[i], tag, in.subspan(i * n, n));
  std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(me) * n), n, out.begin());
  std::vector<float> part(n);
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
