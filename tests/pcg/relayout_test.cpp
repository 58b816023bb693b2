// relayout_pieces against the definition: every pair of an input and an
// output shard whose replica slots match and whose blocks overlap is one
// piece, in the order of output shard, then input shard.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

#include "pcgx/pcg/relayout.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/step_communication.h"

namespace pcgx {
namespace {

std::vector<Piece> by_definition(const ParallelTensorShape& from, const ParallelTensorShape& to, int64_t sum, int64_t copy) {
  std::vector<Piece> out;
  const auto in_shape = from.shard_shape(), out_shape = to.shard_shape();
  std::vector<int64_t> a, b;
  int64_t ca = 0, cb = 0;
  for (int64_t j = 0; j < to.num_shards(); ++j) {
    to.shard_coords(j, cb, b);
    for (int64_t i = 0; i < from.num_shards(); ++i) {
      from.shard_coords(i, ca, a);
      if (ca / sum != cb / copy) continue;
      Piece p{static_cast<int32_t>(i), static_cast<int32_t>(j), {}, {}, {}};
      bool overlap = true;
      for (size_t d = 0; d < a.size(); ++d) {
        const int64_t lo_a = a[d] * in_shape[d], lo_b = b[d] * out_shape[d];
        const int64_t lo = std::max(lo_a, lo_b), hi = std::min(lo_a + in_shape[d], lo_b + out_shape[d]);
        overlap = overlap && hi > lo;
        p.in_offset.push_back(lo - lo_a), p.out_offset.push_back(lo - lo_b), p.extent.push_back(hi - lo);
      }
      if (overlap) out.push_back(std::move(p));
    }
  }
  return out;
}

TEST(Relayout, PiecesAreEveryOverlapOfMatchingSlots) {
  std::mt19937 rng(7);
  const std::vector<int64_t> sizes{12, 8, 6};
  auto degree = [&](int64_t size) {
    std::vector<int64_t> ds;
    for (int64_t d = 1; d <= size; ++d)
      if (size % d == 0) ds.push_back(d);
    return ds[rng() % ds.size()];
  };
  for (int trial = 0; trial < 300; ++trial) {
    const size_t rank = 1 + rng() % 3;
    ParallelTensorShape from = ParallelTensorShape::unpartitioned(std::span(sizes.data(), rank)), to = from;
    for (size_t d = 0; d < rank; ++d) from.dims[d].degree = degree(sizes[d]), to.dims[d].degree = degree(sizes[d]);
    const int64_t sum = 1 + rng() % 3, copy = 1 + rng() % 3, groups = 1 + rng() % 2;
    from.replica = groups * sum, to.replica = groups * copy;
    const std::vector<Piece> got = relayout_pieces(from, to, sum, copy), want = by_definition(from, to, sum, copy);
    ASSERT_EQ(got.size(), want.size()) << from.to_string() << " -> " << to.to_string();
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].in_shard, want[k].in_shard);
      EXPECT_EQ(got[k].out_shard, want[k].out_shard);
      EXPECT_EQ(got[k].in_offset, want[k].in_offset);
      EXPECT_EQ(got[k].out_offset, want[k].out_offset);
      EXPECT_EQ(got[k].extent, want[k].extent);
    }
    std::vector<PieceSize> piece_sizes;
    relayout_piece_sizes(from, to, sum, copy, piece_sizes);
    ASSERT_EQ(piece_sizes.size(), got.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(piece_sizes[k].in_shard, got[k].in_shard);
      EXPECT_EQ(piece_sizes[k].out_shard, got[k].out_shard);
      EXPECT_EQ(piece_sizes[k].elements, got[k].elements());
    }
    // Every output shard's pieces cover it exactly `sum` times.
    int64_t elements = 0;
    for (const Piece& p : got) elements += p.elements();
    EXPECT_EQ(elements, to.num_shards() * to.shard_elements() * sum);
  }
}

// Which operators a layout change run in one step takes: a merge or sum
// and its reader; after a sum, the splits of several dimensions where the
// last is read only by merges (the layout search's split-first sequence),
// their pieces never read as a layout; not where a compute operator reads
// the splits.
TEST(Relayout, ASumSplittingSeveralDimensionsBeforeItMergesIsOneStep) {
  auto build = [](bool merged) {
    Graph g("run");
    const NodeId x = g.add("Input", {{"shape", IntList{8, 8, 8}}, {"degrees", IntList{2, 1, 1}}, {"replica", int64_t{2}}}, {});
    const NodeId sum = g.add("Reduce", {{"degree", int64_t{2}}}, {{g.add("Relu", {}, {{x, 0}}), 0}});
    const NodeId s1 = g.add("Repartition", {{"dim", int64_t{1}}, {"degree", int64_t{2}}}, {{sum, 0}});
    const NodeId s2 = g.add("Repartition", {{"dim", int64_t{2}}, {"degree", int64_t{2}}}, {{s1, 0}});
    const NodeId last = merged ? g.add("Combine", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {{s2, 0}}) : s2;
    g.add_output({g.add("Relu", {}, {{last, 0}}), 0});
    return std::tuple{g, sum, s1, s2};
  };
  const auto [g, sum, s1, s2] = build(true);
  const auto consumers = g.consumers();
  EXPECT_EQ(layout_change_partner(g, sum, consumers), s2);
  EXPECT_EQ(layout_change_inside(g, sum, s2), std::vector<NodeId>{s1});
  EXPECT_EQ(layout_change_partner(g, s1, consumers), std::nullopt);  // a split starts none
  // What the runtime and the memory model read: the sum writes the last
  // split's output, and neither it nor the split between holds anything.
  const SourceLayouts layouts = source_layouts(g);
  const std::vector<NodeId> partners = layout_change_partners(g, layouts);
  EXPECT_EQ(partners[static_cast<size_t>(sum)], s2);
  EXPECT_EQ(partners[static_cast<size_t>(s1)], s2);
  EXPECT_EQ(partners[static_cast<size_t>(s2)], -1);
  const std::vector<char> heads = layout_change_heads(g, layouts);
  EXPECT_TRUE(heads[static_cast<size_t>(sum)] && heads[static_cast<size_t>(s1)] && !heads[static_cast<size_t>(s2)]);
  const auto [h, hsum, h1, h2] = build(false);
  EXPECT_EQ(layout_change_partner(h, hsum, h.consumers()), h1);  // the pair, as before
  EXPECT_TRUE(layout_change_inside(h, hsum, h1).empty());
}

}  // namespace
}  // namespace pcgx
