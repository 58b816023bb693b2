#pragma once
// Exact arithmetic modulo the prime p = 2^31 - 1, the number system of the
// fingerprinting interpreter. Linear algebra is exact here, so two graphs that
// compute the same multilinear function agree bit for bit; non-linear
// operators get polynomial surrogates (see ops/*.cpp).
#include <cstdint>

namespace pcgx {

class ModP {
 public:
  static constexpr uint64_t kPrime = 2147483647ULL;

  constexpr ModP() = default;
  static constexpr ModP from_u64(uint64_t v) { return ModP(static_cast<uint32_t>(v % kPrime)); }
  static constexpr ModP from_int(int64_t v) {
    int64_t m = v % static_cast<int64_t>(kPrime);
    if (m < 0) m += static_cast<int64_t>(kPrime);
    return ModP(static_cast<uint32_t>(m));
  }
  // Exact image of a double: a finite double is m * 2^e with integer m, and
  // 2 is invertible mod p, so products of attribute constants stay exact.
  static ModP from_double(double d);

  constexpr uint32_t value() const { return v_; }
  constexpr int64_t as_index() const { return static_cast<int64_t>(v_); }

  friend constexpr ModP operator+(ModP a, ModP b) {
    uint32_t s = a.v_ + b.v_;
    return ModP(s >= kPrime ? s - static_cast<uint32_t>(kPrime) : s);
  }
  friend constexpr ModP operator-(ModP a, ModP b) {
    return ModP(a.v_ >= b.v_ ? a.v_ - b.v_ : static_cast<uint32_t>(a.v_ + kPrime - b.v_));
  }
  friend constexpr ModP operator-(ModP a) { return ModP() - a; }
  friend constexpr ModP operator*(ModP a, ModP b) {
    uint64_t p = static_cast<uint64_t>(a.v_) * b.v_;
    // p < 2^62: fold twice using 2^31 == 1 (mod p).
    p = (p & kPrime) + (p >> 31);
    p = (p & kPrime) + (p >> 31);
    return ModP(static_cast<uint32_t>(p >= kPrime ? p - kPrime : p));
  }
  ModP& operator+=(ModP b) { return *this = *this + b; }
  ModP& operator-=(ModP b) { return *this = *this - b; }
  ModP& operator*=(ModP b) { return *this = *this * b; }
  friend constexpr bool operator==(ModP a, ModP b) { return a.v_ == b.v_; }

  ModP pow(uint64_t e) const;
  // Multiplicative inverse; the inverse of 0 is defined as 0 so that
  // surrogate divisions stay total.
  ModP inverse() const;

 private:
  explicit constexpr ModP(uint32_t v) : v_(v) {}
  uint32_t v_ = 0;
};

}  // namespace pcgx
