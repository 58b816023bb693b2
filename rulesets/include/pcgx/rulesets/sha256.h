#pragma once
// SHA-256 (FIPS 180-4) for content hashes of rule databases.
#include <string>
#include <string_view>

namespace pcgx {

// Lower-case hex digest of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace pcgx
