#include "pcgx/pcg/shard_moves.h"

#include "pcgx/pcg/error.h"

namespace pcgx {

std::vector<Move> shard_moves(const Node& n, std::span<const ParallelTensorShape> in) {
  std::vector<Move> moves;
  const DataMove op = n.op->data_move;
  const ParallelTensorShape& out = n.outputs[0];
  std::vector<int64_t> block;
  int64_t slot = 0;
  auto copy = [&](int32_t output, int64_t j, int32_t input, int64_t s) {
    moves.push_back({output, static_cast<int32_t>(j), input, static_cast<int32_t>(s), Move::Kind::kCopy, {}});
  };
  if (op == DataMove::kRepartition || op == DataMove::kCombine) {
    const auto dim = static_cast<size_t>(n.attrs.get_int("dim"));
    const int64_t k = n.attrs.get_int("degree");
    for (int64_t j = 0; j < out.num_shards(); ++j) {
      out.shard_coords(j, slot, block);
      if (op == DataMove::kRepartition) {
        std::vector<int64_t> offset(block.size(), 0);
        offset[dim] = (block[dim] % k) * out.shard_shape()[dim];
        block[dim] /= k;
        moves.push_back({0, static_cast<int32_t>(j), 0, static_cast<int32_t>(in[0].shard_index(slot, block)), Move::Kind::kCut, offset});
      } else {
        const int64_t base = block[dim] * k;
        for (int64_t m = 0; m < k; ++m) {
          std::vector<int64_t> offset(block.size(), 0);
          offset[dim] = m * in[0].shard_shape()[dim];
          std::vector<int64_t> src = block;
          src[dim] = base + m;
          moves.push_back({0, static_cast<int32_t>(j), 0, static_cast<int32_t>(in[0].shard_index(slot, src)), Move::Kind::kPlace, offset});
        }
      }
    }
  } else if (op == DataMove::kReplicate || op == DataMove::kReduce || op == DataMove::kAllReduce) {
    const int64_t k = n.attrs.get_int("degree"), blocks = out.num_blocks();
    for (int64_t c = 0; c < out.replica; ++c)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t j = c * blocks + b;
        if (op == DataMove::kReplicate) copy(0, j, 0, (c / k) * blocks + b);
        if (op == DataMove::kReduce)
          for (int64_t m = 0; m < k; ++m) copy(0, j, 0, (c * k + m) * blocks + b);
        if (op == DataMove::kAllReduce)
          for (int64_t m = 0; m < k; ++m) copy(0, j, 0, ((c / k) * k + m) * blocks + b);
      }
  } else if (op == DataMove::kPipeline || op == DataMove::kBatch) {
    for (int64_t j = 0; j < out.num_shards(); ++j) copy(0, j, 0, j);
  } else if (op == DataMove::kConcatReplicas) {
    int64_t j = 0;
    for (size_t i = 0; i < in.size(); ++i)
      for (int64_t s = 0; s < in[i].num_shards(); ++s) copy(0, j++, static_cast<int32_t>(i), s);
  } else if (op == DataMove::kSplitReplicas) {
    int64_t s = 0;
    for (size_t o = 0; o < n.outputs.size(); ++o)
      for (int64_t j = 0; j < n.outputs[o].num_shards(); ++j) copy(static_cast<int32_t>(o), j, 0, s++);
  } else {
    throw Error(describe(n) + ": the runtime has no execution rule for shard-level " + n.op->name);
  }
  return moves;
}

}  // namespace pcgx
