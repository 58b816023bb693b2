#pragma once
// The registry's bookkeeping that plugin loading reads (registry.cpp).
#include <cstddef>

namespace pcgx::detail {

// OpRegistrations made so far (before the registry is built).
size_t registration_count();
// Whether OpRegistry::global() has been built: no registration after.
bool registry_is_built();

}  // namespace pcgx::detail
