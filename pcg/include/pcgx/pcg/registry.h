#pragma once
// The operator registry: every operator pcgx knows, by name.
#include <memory>
#include <string_view>
#include <vector>

#include "pcgx/pcg/operator.h"

namespace pcgx {

class OpRegistry {
 public:
  // The registry with every built-in operator.
  static const OpRegistry& global();

  const OpDef* find(std::string_view name) const;
  // Throws pcgx::Error("unknown operator 'X'") when absent.
  const OpDef& get(std::string_view name) const;
  std::vector<const OpDef*> all() const;

  void add(OpDef def);

 private:
  std::vector<std::unique_ptr<OpDef>> ops_;
};

}  // namespace pcgx
