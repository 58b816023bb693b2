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
  ModP r = from_int(m);
  ModP two = from_u64(2);
  if (exp > 0) return r * two.pow(static_cast<uint64_t>(exp));
  return r * two.inverse().pow(static_cast<uint64_t>(-exp));
}

}  // namespace pcgx
