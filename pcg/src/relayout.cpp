#include "pcgx/pcg/relayout.h"

#include <algorithm>

namespace pcgx {

std::optional<NodeId> layout_change_partner(const Graph& g, NodeId n, const std::vector<std::pair<NodeId, int>>& readers) {
  const Node& a = g.node(n);
  if ((a.op->name != "Combine" && a.op->name != "Reduce") || readers.size() != 1) return std::nullopt;
  const Node& b = g.node(readers[0].first);
  if ((b.op->name != "Repartition" && b.op->name != "Replicate") || b.inputs.size() != 1) return std::nullopt;
  if (b.attrs.get_int("degree") != a.attrs.get_int("degree")) return std::nullopt;
  return b.id;
}

int64_t Piece::elements() const {
  int64_t e = 1;
  for (int64_t x : extent) e *= x;
  return e;
}

std::pair<int64_t, int64_t> relayout_factors(const Node& first, const Node& second) {
  return {first.op->name == "Reduce" ? first.attrs.get_int("degree") : 1,
          second.op->name == "Replicate" ? second.attrs.get_int("degree") : 1};
}

std::vector<Piece> relayout_pieces(const ParallelTensorShape& from, const ParallelTensorShape& to, int64_t sum, int64_t copy) {
  std::vector<Piece> out;
  const size_t rank = static_cast<size_t>(from.rank());
  const auto in_shape = from.shard_shape(), out_shape = to.shard_shape();
  std::vector<int64_t> a, b;
  int64_t ca = 0, cb = 0;
  for (int64_t j = 0; j < to.num_shards(); ++j) {
    to.shard_coords(j, cb, b);
    for (int64_t i = 0; i < from.num_shards(); ++i) {
      from.shard_coords(i, ca, a);
      if (ca / sum != cb / copy) continue;
      Piece p{static_cast<int32_t>(i), static_cast<int32_t>(j), std::vector<int64_t>(rank), std::vector<int64_t>(rank),
              std::vector<int64_t>(rank)};
      bool overlap = true;
      for (size_t d = 0; d < rank && overlap; ++d) {
        const int64_t lo_a = a[d] * in_shape[d], lo_b = b[d] * out_shape[d];
        const int64_t lo = std::max(lo_a, lo_b), hi = std::min(lo_a + in_shape[d], lo_b + out_shape[d]);
        overlap = hi > lo;
        p.in_offset[d] = lo - lo_a, p.out_offset[d] = lo - lo_b, p.extent[d] = hi - lo;
      }
      if (overlap) out.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace pcgx
