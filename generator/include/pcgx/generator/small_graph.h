#pragma once
// The generator's compact graph form: at most kMaxOps operators over the
// input pool. Operator instances (operator + attribute values) are interned
// in an InstanceTable shared by all threads.
#include <array>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "pcgx/pcg/attributes.h"
#include "pcgx/pcg/operator.h"

namespace pcgx::gen {

inline constexpr int kMaxOps = 4;
inline constexpr int kMaxArity = 3;

struct Instance {
  const OpDef* op = nullptr;
  Attributes attrs;   // normalized
  int arity = 0;
  std::string key;    // "Linear{activation=relu,use_bias=false}"
  uint64_t key_hash = 0;
};

class InstanceTable {
 public:
  uint32_t intern(const OpDef* op, const Attributes& normalized, int arity);
  const Instance& at(uint32_t id) const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_[id];
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size();
  }

 private:
  mutable std::mutex mu_;
  std::deque<Instance> items_;  // stable addresses
  std::unordered_map<std::string, uint32_t> ids_;
};

// A tensor of a small graph: pool tensor `index` (op < 0), or output `index`
// of operator `op`.
struct Ref {
  int8_t op = -1;
  uint8_t index = 0;
  bool operator==(const Ref&) const = default;
  auto operator<=>(const Ref&) const = default;
};

struct SmallOp {
  uint32_t inst = 0;
  uint8_t n_in = 0;
  std::array<Ref, kMaxArity> in{};
};

// A vector of at most N elements stored inline: graph records stay free of
// heap allocations.
template <class T, size_t N>
class SmallVec {
 public:
  void push_back(const T& v) { data_[n_++] = v; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  bool full() const { return n_ == N; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_.data(); }
  T* end() { return data_.data() + n_; }
  const T* begin() const { return data_.data(); }
  const T* end() const { return data_.data() + n_; }
  const T& back() const { return data_[n_ - 1]; }

 private:
  std::array<T, N> data_{};
  uint8_t n_ = 0;
};

inline constexpr int kMaxOutputsPerOp = 2;

struct SmallGraph {
  SmallVec<SmallOp, kMaxOps> ops;
  SmallVec<Ref, kMaxOps * kMaxOutputsPerOp> outputs;  // sinks, or the pool tensor of an empty graph
};

}  // namespace pcgx::gen
