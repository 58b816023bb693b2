#include "pcgx/generator/enumerator.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <numeric>
#include <unordered_map>

#include "attr_domains.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/registry.h"
#include "pcgx/pcg/stable_hash.h"

namespace pcgx::gen {

namespace {

uint64_t value_hash(uint64_t shape_hash, const ShardedTensor<ModP>& t) {
  uint64_t h = shape_hash;
  for (const auto& shard : t.shards)
    for (const ModP& v : shard.data) h = hash_mix(h, v.value());
  return h;
}

uint64_t combine_outputs(std::vector<uint64_t> hashes) {
  std::sort(hashes.begin(), hashes.end());
  uint64_t h = hash_mix(0x5EED, hashes.size());
  for (uint64_t x : hashes) h = hash_mix(h, x);
  return h;
}

// A map from well-mixed 64-bit keys, open addressing with linear probing:
// the legality memo is looked up for every operator application tried
// (hundreds of millions at four operators), where std::unordered_map
// follows a node per lookup. Lookups return copies: an insertion may move
// every entry.
template <class V>
class FlatMap {
 public:
  const V* find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    for (size_t i = key & mask_;; i = (i + 1) & mask_) {
      if (!used_[i]) return nullptr;
      if (keys_[i] == key) return &values_[i];
    }
  }
  void insert(uint64_t key, const V& v) {
    if (2 * (size_ + 1) > keys_.size()) grow();
    size_t i = key & mask_;
    while (used_[i] && keys_[i] != key) i = (i + 1) & mask_;
    size_ += !used_[i];
    used_[i] = 1, keys_[i] = key, values_[i] = v;
  }

 private:
  void grow() {
    std::vector<uint64_t> keys = std::move(keys_);
    std::vector<V> values = std::move(values_);
    std::vector<char> used = std::move(used_);
    const size_t n = std::max<size_t>(1024, 2 * keys.size());
    keys_.assign(n, 0), values_.assign(n, V{}), used_.assign(n, 0), mask_ = n - 1, size_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (used[i]) insert(keys[i], values[i]);
  }
  std::vector<uint64_t> keys_;
  std::vector<V> values_;
  std::vector<char> used_;
  size_t mask_ = 0, size_ = 0;
};

struct Candidate {
  uint32_t inst;
  uint8_t n_in;
  std::array<Ref, kMaxArity> in;
};

}  // namespace

// Shape interning and the pool's values, shared by every worker.
struct Enumerator::Shared {
  std::mutex mu;
  std::deque<ParallelTensorShape> shapes;
  std::vector<uint64_t> shape_hash;
  std::unordered_map<std::string, uint16_t> shape_ids;

  std::vector<ShardedTensor<ModP>> pool_values;
  std::vector<uint16_t> pool_shape;
  std::vector<uint64_t> pool_hash;
  std::vector<uint64_t> pool_key;

  std::atomic<uint64_t> graphs{0};
  std::atomic<size_t> roots_done{0};
  size_t roots_total = 0;
  std::mutex progress_mu;
  std::chrono::steady_clock::time_point last_progress = std::chrono::steady_clock::now();

  uint16_t intern(const ParallelTensorShape& s, uint64_t* hash_out = nullptr) {
    std::string key = s.to_string();
    std::lock_guard<std::mutex> lock(mu);
    auto it = shape_ids.find(key);
    if (it == shape_ids.end()) {
      if (shapes.size() >= 65535) throw Error("generator: more than 65535 distinct tensor shapes");
      it = shape_ids.emplace(key, static_cast<uint16_t>(shapes.size())).first;
      shapes.push_back(s);
      shape_hash.push_back(hash_string(key));
    }
    if (hash_out) *hash_out = shape_hash[it->second];
    return it->second;
  }
  std::pair<ParallelTensorShape, uint64_t> lookup(uint16_t id) {
    std::lock_guard<std::mutex> lock(mu);
    return {shapes[id], shape_hash[id]};
  }
};

class Enumerator::Worker {
 public:
  Worker(const Enumerator& e, Shared& sh) : e_(e), sh_(sh), cfg_(e.config_) {}

  EnumerationStats stats;

  // A candidate's legality and output shapes, memoized by its instance and input shapes.
  struct Memo {
    bool legal = false;
    uint8_t n_out = 0;
    std::array<uint16_t, 4> out{};
  };

  // Every candidate operator application on top of the current stack, in a
  // fixed order.
  template <class F>
  void for_each_candidate(F&& f) {
    std::vector<Ref> avail;
    for (size_t p = 0; p < sh_.pool_values.size(); ++p) avail.push_back({-1, static_cast<uint8_t>(p)});
    for (size_t i = 0; i < stack_.size(); ++i)
      for (size_t o = 0; o < stack_[i].shapes.size(); ++o) avail.push_back({static_cast<int8_t>(i), static_cast<uint8_t>(o)});
    Candidate c{};
    for (size_t choice = 0; choice < cfg_.opset.ops.size(); ++choice)
      for (const Ref& t0 : avail)
        for (uint32_t inst : instances_for(choice, shape_of(t0))) {
          c.inst = inst;
          c.n_in = static_cast<uint8_t>(arity_[inst]);
          c.in[0] = t0;
          rest(avail, c, f);
        }
  }

  // Tries `c` on the stack; when legal, canonical and new, pushes it.
  bool push(const Candidate& c) {
    uint64_t key = 0;
    Memo m;
    if (!admissible(c, key, m)) return false;
    push_admitted(c, key, m);
    return true;
  }

  // Would push(c) push? Its checks alone, nothing evaluated; where it
  // would, `m` holds its output shapes. `key` is c's structural key.
  bool admissible(const Candidate& c, uint64_t& key, Memo& m) {
    ++stats.attempts;
    key = inst_key(c.inst);
    for (int i = 0; i < c.n_in; ++i) key = hash_mix(key, key_of(c.in[static_cast<size_t>(i)]));
    for (const auto& s : stack_)
      if (s.key == key) {
        ++stats.duplicates;
        return false;
      }
    if (!canonical_with(c, key)) {
      ++stats.non_canonical;
      return false;
    }
    m = legality(c);
    if (!m.legal || m.n_out > kMaxOutputsPerOp) {
      ++stats.illegal;
      return false;
    }
    return true;
  }

  void push_admitted(const Candidate& c, uint64_t key, const Memo& m) {
    const Instance& inst = e_.instances_.at(c.inst);
    std::vector<const ShardedTensor<ModP>*> ins;
    for (int i = 0; i < c.n_in; ++i) ins.push_back(value_of(c.in[static_cast<size_t>(i)]));
    std::vector<ParallelTensorShape> out_shapes;
    Slot slot;
    for (int o = 0; o < m.n_out; ++o) {
      out_shapes.push_back(local_shape(m.out[static_cast<size_t>(o)]).first);
      slot.shapes.push_back(m.out[static_cast<size_t>(o)]);
    }
    slot.values = evaluate_op<ModP>(*inst.op, inst.attrs, ins, out_shapes);
    for (int o = 0; o < m.n_out; ++o)
      slot.hashes.push_back(value_hash(local_shape(m.out[static_cast<size_t>(o)]).second, slot.values[static_cast<size_t>(o)]));
    slot.op = SmallOp{c.inst, c.n_in, c.in};
    slot.key = key;
    stack_.push_back(std::move(slot));
  }
  void pop() { stack_.pop_back(); }

  // Pass 1 collects fingerprints; pass 2 (when `shared` is set) keeps the
  // full records of graphs with a shared fingerprint.
  void record(std::vector<GraphRecord>* out, std::vector<uint64_t>* fps, uint32_t root,
              const std::vector<uint64_t>* shared) {
    GraphRecord r;
    std::vector<uint64_t> sink_hashes;
    for (size_t i = 0; i < stack_.size(); ++i) {
      r.graph.ops.push_back(stack_[i].op);
      for (size_t o = 0; o < stack_[i].shapes.size(); ++o) {
        r.hashes[i * kMaxOutputsPerOp + o] = stack_[i].hashes[o];
        const Ref ref{static_cast<int8_t>(i), static_cast<uint8_t>(o)};
        bool used = false;
        for (size_t j = i + 1; j < stack_.size() && !used; ++j)
          for (int k = 0; k < stack_[j].op.n_in; ++k) used = used || stack_[j].op.in[static_cast<size_t>(k)] == ref;
        if (!used) {
          r.graph.outputs.push_back(ref);
          sink_hashes.push_back(stack_[i].hashes[o]);
        }
      }
    }
    r.fingerprint = combine_outputs(std::move(sink_hashes));
    ++stats.graphs;
    ++seq_;
    sh_.graphs.fetch_add(1, std::memory_order_relaxed);
    if (fps) fps->push_back(r.fingerprint);
    if (ends_out_) ends_out_->push_back(0);  // set once the subtree is done
    if (out && std::binary_search(shared->begin(), shared->end(), r.fingerprint)) {
      r.root = root;
      r.seq = seq_ - 1;
      out->push_back(r);
    }
  }

  // A root's subtree begins. Pass 1 gives `ends_out`, filled with each
  // graph's subtree end (the sequence number after its last descendant);
  // pass 2 gives those ends back with `shared_before`, the number of
  // graphs with a shared fingerprint before each sequence number, and
  // skips every subtree holding none of them, evaluating nothing there:
  // the numbering stays pass 1's.
  void begin_root(std::vector<uint32_t>* ends_out, const std::vector<uint32_t>* ends_in,
                  const std::vector<uint32_t>* shared_before) {
    seq_ = 0;
    ends_out_ = ends_out, ends_in_ = ends_in, shared_before_ = shared_before;
  }
  // Pass 2: does the subtree of the graph numbered `seq` hold a graph with a
  // shared fingerprint?
  bool subtree_needed(uint32_t seq) const {
    return !ends_in_ || (*shared_before_)[(*ends_in_)[seq]] > (*shared_before_)[seq];
  }

  void dfs(std::vector<GraphRecord>* out, std::vector<uint64_t>* fps, uint32_t root,
           const std::vector<uint64_t>* shared, const Progress& progress) {
    const uint32_t me = seq_;
    record(out, fps, root, shared);
    maybe_report(progress);
    if (static_cast<int>(stack_.size()) < cfg_.max_ops)
      for_each_candidate([&](const Candidate& c) {
        uint64_t key = 0;
        Memo m;
        if (!admissible(c, key, m)) return;
        if (!subtree_needed(seq_)) {  // pass 2: skipped whole, numbered as pass 1 numbered it
          const uint32_t end = (*ends_in_)[seq_];
          sh_.graphs.fetch_add(end - seq_, std::memory_order_relaxed);
          seq_ = end;
          return;
        }
        push_admitted(c, key, m);
        dfs(out, fps, root, shared, progress);
        pop();
      });
    if (ends_out_) (*ends_out_)[me] = seq_;
  }

  void maybe_report(const Progress& progress) {
    if (!progress || (stats.graphs & 1023) != 0) return;
    std::unique_lock<std::mutex> lock(sh_.progress_mu, std::try_to_lock);
    if (!lock.owns_lock()) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - sh_.last_progress < std::chrono::seconds(1)) return;
    sh_.last_progress = now;
    progress(sh_.graphs.load(), sh_.roots_done.load(), sh_.roots_total);
  }

 private:
  struct Slot {
    SmallOp op;
    uint64_t key = 0;
    std::vector<ShardedTensor<ModP>> values;
    std::vector<uint16_t> shapes;
    std::vector<uint64_t> hashes;
  };

  // Every choice of inputs 1..n_in-1 from `avail` (input 0 is set).
  template <class F>
  void rest(const std::vector<Ref>& avail, Candidate& c, F& f) {
    const size_t n = std::min<size_t>(c.n_in, kMaxArity);
    std::array<size_t, kMaxArity> idx{};
    while (true) {
      for (size_t k = 1; k < n; ++k) c.in[k] = avail[idx[k]];
      f(c);
      size_t k = n;
      while (k-- > 1) {
        if (++idx[k] < avail.size()) break;
        idx[k] = 0;
      }
      if (k == 0 || k > n) break;
    }
  }

  uint16_t shape_of(const Ref& r) const { return r.op < 0 ? sh_.pool_shape[r.index] : stack_[static_cast<size_t>(r.op)].shapes[r.index]; }
  const ShardedTensor<ModP>* value_of(const Ref& r) const {
    return r.op < 0 ? &sh_.pool_values[r.index] : &stack_[static_cast<size_t>(r.op)].values[r.index];
  }
  // The instance's structural key, cached here: the table locks.
  uint64_t inst_key(uint32_t inst) {
    if (inst >= inst_keys_.size()) inst_keys_.resize(inst + 1u, {0, false});
    auto& [k, known] = inst_keys_[inst];
    if (!known) k = e_.instances_.at(inst).key_hash, known = true;
    return k;
  }
  uint64_t key_of(const Ref& r) const {
    return r.op < 0 ? sh_.pool_key[r.index] : hash_mix(stack_[static_cast<size_t>(r.op)].key, r.index + 1u);
  }

  const std::pair<ParallelTensorShape, uint64_t>& local_shape(uint16_t id) {
    if (id >= shapes_.size()) shapes_.resize(id + 1u);
    if (!shapes_[id]) shapes_[id] = sh_.lookup(id);
    return *shapes_[id];
  }

  const std::vector<uint32_t>& instances_for(size_t choice, uint16_t shape0) {
    const uint64_t key = (static_cast<uint64_t>(choice) << 16) | shape0;
    auto it = inst_cache_.find(key);
    if (it != inst_cache_.end()) return it->second;
    std::vector<uint32_t> ids;
    const OpChoice& oc = cfg_.opset.ops[choice];
    const OpDef& def = OpRegistry::global().get(oc.op);
    for (const Attributes& a : attribute_combinations(def, oc, local_shape(shape0).first, cfg_.degrees)) {
      const int arity = def.arity ? def.arity(a) : (def.max_inputs < 0 ? 2 : def.min_inputs);
      if (arity > kMaxArity) continue;
      const uint32_t id = e_.instances_.intern(&def, a, arity);
      if (id > 65535) throw Error("generator: more than 65536 operator instances");
      if (arity_.size() <= id) arity_.resize(id + 1u, 0);
      arity_[id] = arity;
      ids.push_back(id);
    }
    return inst_cache_.emplace(key, std::move(ids)).first->second;
  }

  Memo legality(const Candidate& c) {
    uint64_t key = c.inst;
    for (int i = 0; i < c.n_in; ++i) key = (key << 16) | shape_of(c.in[static_cast<size_t>(i)]);
    key = hash_mix(key, c.n_in);
    if (const Memo* known = memo_.find(key)) return *known;
    Memo m;
    const Instance& inst = e_.instances_.at(c.inst);
    std::vector<ParallelTensorShape> ins;
    for (int i = 0; i < c.n_in; ++i) ins.push_back(local_shape(shape_of(c.in[static_cast<size_t>(i)])).first);
    try {
      const auto outs = infer_output_shapes(*inst.op, inst.attrs, ins, inst.op->name);
      if (outs.size() <= m.out.size()) {
        m.legal = true;
        m.n_out = static_cast<uint8_t>(outs.size());
        for (size_t o = 0; o < outs.size(); ++o) m.out[o] = sh_.intern(outs[o]);
      }
    } catch (const Error&) {
      m.legal = false;
    }
    memo_.insert(key, m);
    return m;
  }

  // Is the stack plus `c` in canonical order: does Kahn's algorithm,
  // smallest structural key first (ties to the lower position), reproduce
  // the sequence? The stack is canonical (everything on it passed this
  // test), and `c` changes Kahn's picks only from the step after its last
  // dependency, where it is taken instead of stack op j exactly when its
  // key is smaller; so the order holds when no op after that dependency
  // has a larger key than `c`'s.
  bool canonical_with(const Candidate& c, uint64_t key) const {
    int last_dep = -1;
    for (int k = 0; k < c.n_in; ++k) last_dep = std::max<int>(last_dep, c.in[static_cast<size_t>(k)].op);
    for (size_t j = static_cast<size_t>(last_dep + 1); j < stack_.size(); ++j)
      if (key < stack_[j].key) return false;
    return true;
  }

  const Enumerator& e_;
  Shared& sh_;
  const GeneratorConfig& cfg_;
  std::vector<Slot> stack_;
  FlatMap<Memo> memo_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> inst_cache_;
  std::vector<int> arity_;
  std::vector<std::pair<uint64_t, bool>> inst_keys_;
  std::vector<uint32_t>* ends_out_ = nullptr;
  const std::vector<uint32_t>*ends_in_ = nullptr, *shared_before_ = nullptr;
  std::vector<std::optional<std::pair<ParallelTensorShape, uint64_t>>> shapes_;
  uint32_t seq_ = 0;
};

Enumerator::Enumerator(const GeneratorConfig& config, std::vector<PoolTensor> pool)
    : config_(config), pool_(std::move(pool)), shared_(std::make_unique<Shared>()) {
  if (config_.max_ops < 0 || config_.max_ops > kMaxOps)
    throw FieldError("GeneratorConfig.max_ops", std::to_string(config_.max_ops) + " is not in 0.." + std::to_string(kMaxOps));
  for (const PoolTensor& t : pool_) {
    uint64_t h = 0;
    shared_->pool_shape.push_back(shared_->intern(t.shape, &h));
    shared_->pool_values.push_back(pool_values<ModP>(t, config_.seed));
    shared_->pool_hash.push_back(value_hash(h, shared_->pool_values.back()));
    shared_->pool_key.push_back(hash_mix(hash_string("pool"), hash_string(t.name)));
  }
}

Enumerator::~Enumerator() = default;

std::vector<GraphRecord> Enumerator::run(EnumerationStats& stats, const Progress& progress) {
  std::vector<Candidate> roots;
  if (config_.max_ops > 0) {
    Worker w(*this, *shared_);
    w.for_each_candidate([&](const Candidate& c) { roots.push_back(c); });
  }
  shared_->roots_total = roots.size();
  const int threads = config_.threads > 0 ? config_.threads : tbb::this_task_arena::max_concurrency();
  // One worker per thread, kept across roots: its legality memo and
  // attribute cache are what make the search fast.
  tbb::enumerable_thread_specific<Worker> workers([&] { return Worker(*this, *shared_); });
  tbb::task_arena arena(threads);
  // Per root: each graph's subtree end (pass 1), and how many graphs with a
  // shared fingerprint precede each sequence number (pass 2).
  std::vector<std::vector<uint32_t>> ends(roots.size()), shared_before;
  auto pass = [&](std::vector<std::vector<GraphRecord>>* out, std::vector<std::vector<uint64_t>>* fps,
                  const std::vector<uint64_t>* shared) {
    shared_->roots_done = 0;
    shared_->graphs = 0;
    arena.execute([&] {
      tbb::parallel_for(size_t{0}, roots.size(), [&](size_t i) {
        Worker& w = workers.local();
        if (shared)
          w.begin_root(nullptr, &ends[i], &shared_before[i]);
        else
          w.begin_root(&ends[i], nullptr, nullptr);
        if (shared && (ends[i].empty() || !w.subtree_needed(0))) {  // nothing of it is kept
          shared_->graphs.fetch_add(ends[i].size(), std::memory_order_relaxed);
        } else if (w.push(roots[i])) {
          w.dfs(out ? &(*out)[i] : nullptr, fps ? &(*fps)[i] : nullptr, static_cast<uint32_t>(i + 1), shared,
                progress);
          w.pop();
        }
        shared_->roots_done.fetch_add(1);
      });
    });
  };

  // Pass 1: fingerprints of every graph, the empty ones included.
  std::vector<std::vector<uint64_t>> fps(roots.size());
  pass(nullptr, &fps, nullptr);
  for (const Worker& w : workers) {
    stats.attempts += w.stats.attempts;
    stats.illegal += w.stats.illegal;
    stats.non_canonical += w.stats.non_canonical;
    stats.duplicates += w.stats.duplicates;
  }
  std::vector<uint64_t> all;
  for (size_t p = 0; p < pool_.size(); ++p) all.push_back(combine_outputs({shared_->pool_hash[p]}));
  for (const auto& v : fps) all.insert(all.end(), v.begin(), v.end());
  stats.graphs = all.size();
  std::sort(all.begin(), all.end());
  std::vector<uint64_t> shared_fps;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j] == all[i]) ++j;
    ++stats.fingerprints;
    if (j - i >= 2) shared_fps.push_back(all[i]);
    i = j;
  }
  all.clear();
  all.shrink_to_fit();
  shared_before.resize(roots.size());
  for (size_t i = 0; i < roots.size(); ++i) {
    std::vector<uint32_t>& b = shared_before[i];
    b.resize(fps[i].size() + 1);
    for (size_t k = 0; k < fps[i].size(); ++k) b[k + 1] = b[k] + std::binary_search(shared_fps.begin(), shared_fps.end(), fps[i][k]);
    std::vector<uint64_t>().swap(fps[i]);
  }

  // Pass 2: full records of the graphs whose fingerprint is shared.
  std::vector<std::vector<GraphRecord>> per_root(roots.size() + 1);
  for (size_t p = 0; p < pool_.size(); ++p) {
    GraphRecord r;
    r.seq = static_cast<uint32_t>(p);
    r.graph.outputs.push_back({-1, static_cast<uint8_t>(p)});
    r.fingerprint = combine_outputs({shared_->pool_hash[p]});
    if (std::binary_search(shared_fps.begin(), shared_fps.end(), r.fingerprint)) per_root[0].push_back(r);
  }
  {
    std::vector<std::vector<GraphRecord>> rest(roots.size());
    pass(&rest, nullptr, &shared_fps);
    for (size_t i = 0; i < rest.size(); ++i) per_root[i + 1] = std::move(rest[i]);
  }
  std::vector<GraphRecord> records;
  size_t count = 0;
  for (const auto& v : per_root) count += v.size();
  records.reserve(count);
  for (auto& v : per_root) {
    records.insert(records.end(), v.begin(), v.end());
    v.clear();
    v.shrink_to_fit();
  }
  stats.instances = instances_.size();
  return records;
}

const std::vector<uint64_t>& Enumerator::pool_hashes() const { return shared_->pool_hash; }

uint64_t Enumerator::structural_key(const SmallGraph& g, size_t op) const {
  const SmallOp& o = g.ops[op];
  uint64_t key = instances_.at(o.inst).key_hash;
  for (int k = 0; k < o.n_in; ++k) {
    const Ref r = o.in[static_cast<size_t>(k)];
    key = hash_mix(key, r.op < 0 ? shared_->pool_key[r.index]
                                 : hash_mix(structural_key(g, static_cast<size_t>(r.op)), r.index + 1u));
  }
  return key;
}

Enumerator::TensorHashes Enumerator::hashes(const SmallGraph& g) const {
  TensorHashes h;
  h.pool = shared_->pool_hash;
  std::vector<std::vector<ShardedTensor<ModP>>> values;
  for (const SmallOp& op : g.ops) {
    const Instance& inst = instances_.at(op.inst);
    std::vector<const ShardedTensor<ModP>*> ins;
    std::vector<ParallelTensorShape> in_shapes;
    for (int k = 0; k < op.n_in; ++k) {
      const Ref r = op.in[static_cast<size_t>(k)];
      ins.push_back(r.op < 0 ? &shared_->pool_values[r.index] : &values[static_cast<size_t>(r.op)][r.index]);
      in_shapes.push_back(ins.back()->shape);
    }
    const auto out_shapes = infer_output_shapes(*inst.op, inst.attrs, in_shapes, inst.op->name);
    values.push_back(evaluate_op<ModP>(*inst.op, inst.attrs, ins, out_shapes));
    std::vector<uint64_t> hs;
    std::vector<std::string> shapes;
    for (const auto& v : values.back()) {
      shapes.push_back(v.shape.to_string());
      hs.push_back(value_hash(hash_string(shapes.back()), v));
    }
    h.ops.push_back(std::move(hs));
    h.op_shapes.push_back(std::move(shapes));
  }
  return h;
}

}  // namespace pcgx::gen
