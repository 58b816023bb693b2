#include <gtest/gtest.h>

#include <cmath>

#include "pcgx/pcg/modular.h"
#include "pcgx/pcg/parallel_tensor_shape.h"
#include "pcgx/pcg/tensor.h"

namespace pcgx {
namespace {

TEST(ParallelTensorShape, CanonicalShardOrderIsReplicaOutermost) {
  ParallelTensorShape s = ParallelTensorShape::unpartitioned(std::vector<int64_t>{4, 6});
  s.dims[0].degree = 2;
  s.dims[1].degree = 3;
  s.replica = 2;
  EXPECT_EQ(s.num_shards(), 12);
  EXPECT_EQ(s.shard_shape(), (std::vector<int64_t>{2, 2}));
  std::vector<int64_t> block;
  int64_t slot = 0;
  s.shard_coords(7, slot, block);
  EXPECT_EQ(slot, 1);
  EXPECT_EQ(block, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s.shard_index(1, block), 7);
  EXPECT_EQ(s.block_offset(block), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(s.to_string(), "f32[4/2, 6/3] r2");
}

TEST(ParallelTensorShape, InvalidShapesSayWhy) {
  ParallelTensorShape s = ParallelTensorShape::unpartitioned(std::vector<int64_t>{4, 6});
  EXPECT_FALSE(s.invalid_reason());
  s.dims[1].degree = 4;
  EXPECT_EQ(*s.invalid_reason(), "dimension 1: degree 4 does not divide size 6");
  s.dims[1].degree = 1;
  s.replica = 0;
  EXPECT_TRUE(s.invalid_reason());
}

TEST(Tensor, DistributeAndGatherRoundTrip) {
  Tensor<float> t({4, 6});
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<float>(i);
  ParallelTensorShape s = ParallelTensorShape::unpartitioned(t.shape);
  s.dims[0].degree = 2;
  s.dims[1].degree = 2;
  s.replica = 3;
  const auto d = distribute(t, s);
  ASSERT_EQ(d.shards.size(), 12u);
  EXPECT_EQ(d.shards[1].data, (std::vector<float>{3, 4, 5, 9, 10, 11}));
  for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(gather_slot(d, c), t);
}

TEST(ModP, FieldArithmetic) {
  const ModP a = ModP::from_int(-5), b = ModP::from_u64(7);
  EXPECT_EQ((a + b).value(), 2u);
  EXPECT_EQ((a * b).value(), ModP::kPrime - 35);
  EXPECT_EQ((b * b.inverse()).value(), 1u);
  EXPECT_EQ(ModP().inverse().value(), 0u);
  const ModP big = ModP::from_u64(ModP::kPrime - 1);
  EXPECT_EQ((big * big).value(), 1u);
}

TEST(ModP, DoublesMapExactlyAndMultiplicatively) {
  EXPECT_EQ(ModP::from_double(3.0).value(), 3u);
  EXPECT_EQ(ModP::from_double(-2.0).value(), ModP::kPrime - 2);
  EXPECT_EQ((ModP::from_double(0.5) * ModP::from_u64(2)).value(), 1u);
  EXPECT_EQ((ModP::from_double(0.375) * ModP::from_double(8.0)).value(), 3u);
  EXPECT_EQ(ModP::from_double(0.1 * 0.5).value(), (ModP::from_double(0.1) * ModP::from_double(0.5)).value());
}

// A double is m * 2^e; its image is m's times 2's e-th power, 2's inverse's
// for negative e, whatever the exponent (the shift it is computed by wraps
// at 31).
TEST(ModP, DoublesAreTheirMantissaTimesAPowerOfTwo) {
  const ModP two = ModP::from_u64(2), half = two.inverse();
  // Exponents after the mantissa's 53 bits: negative, 0 (2^52), 31 and 62
  // (multiples of 2's order), positive between them.
  for (double d : {1e-300, 3e-20, 1.0 / 3, 0.1, 1e-5, 7.0, 1e10, -2.5e15, 4.9e-324, 1.7e308, 0x1p52, 0x1.8p83, -0x1.4p114, 0x1p60 + 0x1p10}) {
    int e = 0;
    const double mant = std::frexp(d, &e);
    const auto m = static_cast<int64_t>(std::ldexp(mant, 53));
    e -= 53;
    const ModP expected = ModP::from_int(m) * (e >= 0 ? two.pow(static_cast<uint64_t>(e)) : half.pow(static_cast<uint64_t>(-e)));
    EXPECT_EQ(ModP::from_double(d).value(), expected.value()) << d;
  }
}

}  // namespace
}  // namespace pcgx
