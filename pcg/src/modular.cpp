#include "pcgx/pcg/modular.h"

#include <cmath>

namespace pcgx {

ModP ModP::pow(uint64_t e) const {
  ModP base = *this, r = ModP::from_u64(1);
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return r;
}

ModP ModP::inverse() const { return pow(kPrime - 2); }

ModP ModP::from_double(double d) {
  if (!std::isfinite(d) || d == 0.0) return ModP();
  int exp = 0;
  double mant = std::frexp(d, &exp);  // d = mant * 2^exp, 0.5 <= |mant| < 1
  auto m = static_cast<int64_t>(std::ldexp(mant, 53));
  exp -= 53;
  // 2^31 = 1 (mod 2^31 - 1), so 2^exp = 2^(exp mod 31) for any integer exp:
  // a shift, where a power (and 2's inverse by Fermat) took ~90 products
  // on every scalar an operator reads.
  static_assert(kPrime == (uint64_t{1} << 31) - 1);
  const int shift = static_cast<int>(((exp % 31) + 31) % 31);
  return from_int(m) * from_u64(uint64_t{1} << shift);
}

}  // namespace pcgx
