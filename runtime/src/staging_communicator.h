#pragma once
// A communicator for a backend whose buffers are not host memory
// (backend.h) over one that needs host memory (in-process, MPI): every
// message and collective is copied to the host, exchanged there, and
// copied back. Correct for any plan, and as slow as two copies per
// message: a device's own communicator (NCCL) replaces it where there is
// one. Host buffers are kept per device buffer, so steps after the first
// allocate nothing.
#include <unordered_map>
#include <vector>

#include "pcgx/runtime/backend.h"
#include "pcgx/runtime/communicator.h"

namespace pcgx::runtime {

class StagingCommunicator final : public Communicator {
 public:
  StagingCommunicator(Communicator& inner, Backend& backend) : inner_(inner), backend_(backend) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void send(int to, int64_t tag, std::span<const float> data) override {
    inner_.send(to, tag, out(data));
  }
  void recv(int from, int64_t tag, std::span<float> data) override {
    const std::span<float> h = host(data.data(), data.size());
    inner_.recv(from, tag, h);
    backend_.from_host(h, data);
  }
  void all_reduce(std::span<const int> group, std::span<float> data) override {
    const std::span<float> h = out(data);
    inner_.all_reduce(group, h);
    backend_.from_host(h, data);
  }
  void all_reduce(std::span<const int> group, std::span<float> data, int64_t tag) override {
    const std::span<float> h = out(data);
    inner_.all_reduce(group, h, tag);
    backend_.from_host(h, data);
  }
  void reduce(std::span<const int> group, int root, std::span<float> data) override {
    const std::span<float> h = out(data);
    inner_.reduce(group, root, h);
    if (rank() == root) backend_.from_host(h, data);
  }
  void broadcast(std::span<const int> group, int root, std::span<float> data) override {
    const std::span<float> h = rank() == root ? out(data) : host(data.data(), data.size());
    inner_.broadcast(group, root, h);
    if (rank() != root) backend_.from_host(h, data);
  }
  void all_gather(std::span<const int> group, std::span<const float> in, std::span<float> result) override {
    const std::span<float> h = host(result.data(), result.size());
    inner_.all_gather(group, out(in), h);
    backend_.from_host(h, result);
  }
  void reduce_scatter(std::span<const int> group, std::span<const float> in, std::span<float> result) override {
    const std::span<float> h = host(result.data(), result.size());
    inner_.reduce_scatter(group, out(in), h);
    backend_.from_host(h, result);
  }
  void all_gather(std::span<const int> group, std::span<const float> in, std::span<float> result, int64_t tag) override {
    const std::span<float> h = host(result.data(), result.size());
    inner_.all_gather(group, out(in), h, tag);
    backend_.from_host(h, result);
  }
  void reduce_scatter(std::span<const int> group, std::span<const float> in, std::span<float> result, int64_t tag) override {
    const std::span<float> h = host(result.data(), result.size());
    inner_.reduce_scatter(group, out(in), h, tag);
    backend_.from_host(h, result);
  }
  void all_to_all(std::span<const int> group, std::span<const float> in, std::span<float> result) override {
    const std::span<float> h = host(result.data(), result.size());
    inner_.all_to_all(group, out(in), h);
    backend_.from_host(h, result);
  }

 private:
  // The host buffer kept for device memory at `at` (grown, never shrunk).
  std::span<float> host(const float* at, size_t n) {
    std::vector<float>& v = staged_[at];
    if (v.size() < n) v.resize(n);
    return {v.data(), n};
  }
  // `data` copied to its host buffer.
  std::span<float> out(std::span<const float> data) {
    const std::span<float> h = host(data.data(), data.size());
    backend_.to_host(data, h);
    return h;
  }
  Communicator& inner_;
  Backend& backend_;
  std::unordered_map<const float*, std::vector<float>> staged_;
};

}  // namespace pcgx::runtime
