#pragma once
// Enumerates every graph of at most max_ops operators over the input pool,
// each exactly once: a graph is generated only in its canonical operator
// order (Kahn's algorithm taking the ready operator with the smallest
// structural key first), and a non-canonical prefix has no canonical
// extension, so the search prunes it. Graphs with two identical operators
// (a common subexpression) are skipped. Every graph is fingerprinted with
// the exact modular interpreter: the fingerprint hashes each output's
// parallel shape and every shard value, and combines the outputs as a
// multiset.
//
// The first operator splits the work: each root subtree runs on one thread
// in a fixed order, so the records are the same whatever the thread count.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "pcgx/generator/config.h"
#include "pcgx/generator/input_pool.h"
#include "pcgx/generator/small_graph.h"

namespace pcgx::gen {

struct GraphRecord {
  uint64_t fingerprint = 0;
  uint32_t root = 0;  // root subtree (0: the empty graphs)
  uint32_t seq = 0;   // position within it
  SmallGraph graph;
  // Value hash of output o of operator i at [i * kMaxOutputsPerOp + o].
  std::array<uint64_t, kMaxOps * kMaxOutputsPerOp> hashes{};
};

struct EnumerationStats {
  uint64_t graphs = 0;          // graphs recorded (including the empty ones)
  uint64_t fingerprints = 0;    // distinct fingerprints among them
  uint64_t attempts = 0;        // operator applications tried
  uint64_t illegal = 0;         // rejected by shape or degree inference
  uint64_t non_canonical = 0;   // pruned as a non-canonical order
  uint64_t duplicates = 0;      // pruned as a repeated operator
  size_t instances = 0;         // distinct operator instances
};

// Called about once a second with (graphs so far, roots done, roots).
using Progress = std::function<void(uint64_t, size_t, size_t)>;

class Enumerator {
 public:
  Enumerator(const GeneratorConfig& config, std::vector<PoolTensor> pool);
  ~Enumerator();

  // Runs the enumeration twice: the first pass only counts fingerprints,
  // the second keeps the records of graphs whose fingerprint another graph
  // shares (the only ones that can form candidates), so memory stays
  // proportional to the candidates' classes rather than to every graph.
  std::vector<GraphRecord> run(EnumerationStats& stats, const Progress& progress);

  const std::vector<uint64_t>& pool_hashes() const;
  uint64_t structural_key(const SmallGraph& g, size_t op) const;

  // Exact values of every tensor of `g` (pool tensors first, then each
  // operator's outputs), hashed; used to match outputs and subgraphs.
  struct TensorHashes {
    std::vector<uint64_t> pool;
    std::vector<std::vector<uint64_t>> ops;
    std::vector<std::vector<std::string>> op_shapes;  // parallel shape of each op output
  };
  TensorHashes hashes(const SmallGraph& g) const;

  const std::vector<PoolTensor>& pool() const { return pool_; }
  const InstanceTable& instances() const { return instances_; }

 private:
  struct Shared;
  class Worker;
  GeneratorConfig config_;
  std::vector<PoolTensor> pool_;
  mutable InstanceTable instances_;
  std::unique_ptr<Shared> shared_;
};

}  // namespace pcgx::gen
