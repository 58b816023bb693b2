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

// An operator defined outside pcgx's sources (a user's library, a test)
// joins the global registry through a namespace-scope registration in its
// own translation unit, run before main:
//
//   static const pcgx::OpRegistration mine([](pcgx::OpRegistry& r) { r.add(my_op()); });
//
// Its SMT forms then declare its symbols for axiom files like any other's.
// A registration made after the registry's first use throws pcgx::Error.
class OpRegistration {
 public:
  explicit OpRegistration(void (*registrar)(OpRegistry&));
};

}  // namespace pcgx
