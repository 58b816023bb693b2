#include "pcgx/pcg/registry.h"

#include "ops/op_families.h"
#include "pcgx/pcg/error.h"
#include "registry_state.h"

namespace pcgx {
namespace {

// Function-local statics: registrations from other translation units run
// during static initialization, in no particular order relative to this one.
std::vector<void (*)(OpRegistry&)>& registrars() {
  static std::vector<void (*)(OpRegistry&)> v;
  return v;
}
bool& registry_built() {
  static bool built = false;
  return built;
}

}  // namespace

namespace detail {
size_t registration_count() { return registrars().size(); }
bool registry_is_built() { return registry_built(); }
}  // namespace detail

OpRegistration::OpRegistration(void (*registrar)(OpRegistry&)) {
  if (registry_built()) throw Error("an operator registration after the operator registry was first used");
  registrars().push_back(registrar);
}

namespace {

void register_all(OpRegistry& r) {
  ops::register_source_ops(r);
  ops::register_elementwise_ops(r);
  ops::register_linear_ops(r);
  ops::register_conv_ops(r);
  ops::register_norm_ops(r);
  ops::register_batch_norm_ops(r);
  ops::register_shape_ops(r);
  ops::register_embedding_ops(r);
  ops::register_loss_ops(r);
  ops::register_parallel_ops(r);
  for (auto* registrar : registrars()) registrar(r);
}

}  // namespace

void detail::check_registrations() {
  OpRegistry scratch;
  register_all(scratch);
}

const OpRegistry& OpRegistry::global() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_all(r);
    registry_built() = true;
    return r;
  }();
  return registry;
}

const OpDef* OpRegistry::find(std::string_view name) const {
  for (const auto& op : ops_)
    if (op->name == name) return op.get();
  return nullptr;
}

const OpDef& OpRegistry::get(std::string_view name) const {
  if (const OpDef* op = find(name)) return *op;
  throw Error("unknown operator '" + std::string(name) + "'");
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> v;
  for (const auto& op : ops_) v.push_back(op.get());
  return v;
}

void OpRegistry::add(OpDef def) {
  if (find(def.name)) throw Error("operator '" + def.name + "' registered twice");
  ops_.push_back(std::make_unique<OpDef>(std::move(def)));
}

}  // namespace pcgx
