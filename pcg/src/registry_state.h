#pragma once
// The registry's bookkeeping that plugin loading reads (registry.cpp).
#include <cstddef>

namespace pcgx::detail {

// OpRegistrations made so far (before the registry is built).
size_t registration_count();
// Whether OpRegistry::global() has been built: no registration after.
bool registry_is_built();
// Builds a registry of the built-in operators and every registration so
// far, and drops it: throws pcgx::Error as OpRegistry::global() would
// (an operator registered twice), without building it.
void check_registrations();

}  // namespace pcgx::detail
