#include "pcgx/pcg/relayout.h"

#include <algorithm>

namespace pcgx {

std::optional<NodeId> layout_change_partner(const Graph& g, NodeId n, const Readers& consumers) {
  const Node& a = g.node(n);
  const DataMove first = a.op->data_move;
  const auto& readers = consumers[static_cast<size_t>(n)];
  if ((first != DataMove::kCombine && first != DataMove::kReduce) || readers.size() != 1) return std::nullopt;
  const Node& b = g.node(readers[0].first);
  const DataMove second = b.op->data_move;
  if ((second != DataMove::kRepartition && second != DataMove::kReplicate) || b.inputs.size() != 1) return std::nullopt;
  if (first != DataMove::kReduce || second != DataMove::kRepartition) return b.id;
  // A sum splitting several dimensions before it merges: the splits that
  // follow, each read alone by the next, are the same step where the last
  // is read only by merges (its pieces regrouped, never read as a layout).
  auto is_output = [&](NodeId x) {
    return std::any_of(g.outputs().begin(), g.outputs().end(), [&](const TensorRef& o) { return o.node == x; });
  };
  NodeId last = b.id;
  for (;;) {
    const auto& r = consumers[static_cast<size_t>(last)];
    if (r.size() != 1 || is_output(last)) break;
    const Node& c = g.node(r[0].first);
    if (c.op->data_move != DataMove::kRepartition || c.inputs.size() != 1) break;
    last = c.id;
  }
  if (last == b.id) return b.id;
  const auto& r = consumers[static_cast<size_t>(last)];
  const bool merged = !r.empty() && !is_output(last) &&
                      std::all_of(r.begin(), r.end(), [&](const auto& x) { return g.node(x.first).op->data_move == DataMove::kCombine; });
  return merged ? last : b.id;
}

std::vector<NodeId> layout_change_inside(const Graph& g, NodeId first, NodeId last) {
  std::vector<NodeId> inside;
  for (NodeId x = g.node(last).inputs[0].node; x != first; x = g.node(x).inputs[0].node) inside.push_back(x);
  std::reverse(inside.begin(), inside.end());
  return inside;
}

int64_t Piece::elements() const {
  int64_t e = 1;
  for (int64_t x : extent) e *= x;
  return e;
}

std::pair<int64_t, int64_t> relayout_factors(const Node& first, const Node& second) {
  return {first.op->data_move == DataMove::kReduce ? first.attrs.get_int("degree") : 1,
          second.op->data_move == DataMove::kReplicate ? second.attrs.get_int("degree") : 1};
}

namespace {

// Calls f(in_shard, out_shard, a, b) for every piece, with a and b the
// input and output blocks' coordinates. Per output shard, only the input
// blocks that overlap it are visited (their coordinates form a box), so the
// work is the number of pieces, not the product of the shard counts
// (192 x 192 at 192 devices).
template <class F>
void for_each_piece(const ParallelTensorShape& from, const ParallelTensorShape& to, int64_t sum, int64_t copy,
                    const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape, F&& f) {
  const size_t rank = static_cast<size_t>(from.rank());
  std::vector<int64_t> b, first(rank), last(rank), a(rank);
  int64_t cb = 0;
  for (int64_t j = 0; j < to.num_shards(); ++j) {
    to.shard_coords(j, cb, b);
    for (size_t d = 0; d < rank; ++d) {
      const int64_t lo_b = b[d] * out_shape[d];
      first[d] = lo_b / in_shape[d], last[d] = (lo_b + out_shape[d] - 1) / in_shape[d];
    }
    const int64_t slot0 = cb / copy * sum;
    for (int64_t ca = slot0; ca < slot0 + sum && ca < from.replica; ++ca) {
      a = first;
      while (true) {
        f(from.shard_index(ca, a), j, a, b);
        size_t d = rank;  // the last dimension varies fastest: input shards in ascending order
        while (d > 0 && a[d - 1] == last[d - 1]) a[d - 1] = first[d - 1], --d;
        if (d == 0) break;
        ++a[d - 1];
      }
    }
  }
}

}  // namespace

std::vector<Piece> relayout_pieces(const ParallelTensorShape& from, const ParallelTensorShape& to, int64_t sum, int64_t copy) {
  std::vector<Piece> out;
  const size_t rank = static_cast<size_t>(from.rank());
  const auto in_shape = from.shard_shape(), out_shape = to.shard_shape();
  for_each_piece(from, to, sum, copy, in_shape, out_shape, [&](int64_t i, int64_t j, const auto& a, const auto& b) {
    Piece p{static_cast<int32_t>(i), static_cast<int32_t>(j), std::vector<int64_t>(rank), std::vector<int64_t>(rank),
            std::vector<int64_t>(rank)};
    for (size_t d = 0; d < rank; ++d) {
      const int64_t lo_a = a[d] * in_shape[d], lo_b = b[d] * out_shape[d];
      const int64_t lo = std::max(lo_a, lo_b), hi = std::min(lo_a + in_shape[d], lo_b + out_shape[d]);
      p.in_offset[d] = lo - lo_a, p.out_offset[d] = lo - lo_b, p.extent[d] = hi - lo;
    }
    out.push_back(std::move(p));
  });
  return out;
}

void for_each_relayout_piece(const ParallelTensorShape& from, const ParallelTensorShape& to, int64_t sum, int64_t copy,
                             const std::function<void(const PieceSize&)>& f) {
  const size_t rank = static_cast<size_t>(from.rank());
  const auto in_shape = from.shard_shape(), out_shape = to.shard_shape();
  for_each_piece(from, to, sum, copy, in_shape, out_shape, [&](int64_t i, int64_t j, const auto& a, const auto& b) {
    int64_t elements = 1;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t lo_a = a[d] * in_shape[d], lo_b = b[d] * out_shape[d];
      elements *= std::min(lo_a + in_shape[d], lo_b + out_shape[d]) - std::max(lo_a, lo_b);
    }
    f(PieceSize{static_cast<int32_t>(i), static_cast<int32_t>(j), elements});
  });
}

void relayout_piece_sizes(const ParallelTensorShape& from, const ParallelTensorShape& to, int64_t sum, int64_t copy,
                          std::vector<PieceSize>& out) {
  out.clear();
  for_each_relayout_piece(from, to, sum, copy, [&](const PieceSize& p) { out.push_back(p); });
}

}  // namespace pcgx
