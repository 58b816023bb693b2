#pragma once
// Hashes whose values are fixed by this header, not by the standard library,
// so fingerprints and generated files are the same on every build.
#include <cstdint>
#include <string_view>

namespace pcgx {

inline uint64_t hash_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  return h;
}

inline uint64_t hash_string(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ULL;  // FNV-1a
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return h;
}

}  // namespace pcgx
