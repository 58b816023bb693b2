#include "pcgx/generator/small_graph.h"
#include "pcgx/pcg/stable_hash.h"

namespace pcgx::gen {

uint32_t InstanceTable::intern(const OpDef* op, const Attributes& normalized, int arity) {
  std::string key = op->name + "{";
  bool first = true;
  for (const auto& [k, v] : normalized.values()) {
    key += (first ? "" : ",") + k + "=" + to_string(v);
    first = false;
  }
  key += "}";
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(items_.size());
  items_.push_back({op, normalized, arity, key, hash_string(key)});
  ids_.emplace(std::move(key), id);
  return id;
}

}  // namespace pcgx::gen
