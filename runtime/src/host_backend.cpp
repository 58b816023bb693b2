#include "pcgx/runtime/host_backend.h"

#include <algorithm>
#include <cmath>

#include "pcgx/pcg/kernel_threads.h"
#include "pcgx/runtime/low_precision.h"

namespace pcgx::runtime {

Buffer HostBackend::allocate(std::span<const int64_t> shape) {
  Tensor<float>& t = store_.emplace_back(std::vector<int64_t>(shape.begin(), shape.end()));
  return {t.data.data(), t.numel(), static_cast<int32_t>(store_.size() - 1)};
}

bool HostBackend::release(Buffer& b) {
  pool_.push_back(std::move(store_[index(b)].data));
  store_[index(b)].data = {};
  b.data = nullptr;
  return true;
}

void HostBackend::reacquire(Buffer& b) {
  Tensor<float>& t = store_[index(b)];
  const auto n = static_cast<size_t>(b.numel);
  size_t best = pool_.size();
  for (size_t i = 0; i < pool_.size(); ++i)
    if (pool_[i].capacity() >= n && (best == pool_.size() || pool_[i].capacity() < pool_[best].capacity())) best = i;
  if (best < pool_.size()) {
    t.data = std::move(pool_[best]);
    std::swap(pool_[best], pool_.back());
    pool_.pop_back();
  }
  t.data.assign(n, 0.f);  // zeroed: the next write may add into it (a move)
  b.data = t.data.data();
}

void HostBackend::fill(const Buffer& b, float value) { std::fill_n(b.data, b.numel, value); }

void HostBackend::copy(const Buffer& to, const Buffer& from) { std::copy_n(from.data, to.numel, to.data); }

void HostBackend::add(const Buffer& into, const Buffer& x) {
  for (int64_t i = 0; i < into.numel; ++i) into.data[i] += x.data[i];
}

void HostBackend::read_block(const Buffer& full, std::span<const int64_t> offset, const Buffer& out) {
  pcgx::read_block(tensor(full), offset, tensor(out));
}

void HostBackend::add_block(const Buffer& full, std::span<const int64_t> offset, const Buffer& block) {
  pcgx::add_block(tensor(full), offset, tensor(block));
}

void HostBackend::add_from_block(const Buffer& out, const Buffer& full, std::span<const int64_t> offset) {
  pcgx::add_from_block(tensor(out), tensor(full), offset);
}

void HostBackend::add_range(const Buffer& flat, int64_t at, const Buffer& x) {
  float* f = flat.data + at;
  for (int64_t i = 0; i < x.numel; ++i) f[i] += x.data[i];
}

void HostBackend::set_range(const Buffer& flat, int64_t at, const Buffer& x) { std::copy_n(x.data, x.numel, flat.data + at); }

void HostBackend::copy_range(const Buffer& to, const Buffer& flat, int64_t at) { std::copy_n(flat.data + at, to.numel, to.data); }

void HostBackend::upload_block(const Tensor<float>& logical, std::span<const int64_t> offset, const Buffer& out) {
  pcgx::read_block(logical, offset, tensor(out));
}

void HostBackend::download(const Buffer& b, std::span<float> host) { std::copy_n(b.data, std::min<size_t>(host.size(), static_cast<size_t>(b.numel)), host.data()); }

std::string HostBackend::unsupported(const Node& n) const {
  if (!n.op->kernel_f32) return n.op->name + " has no CPU kernel";
  if (!n.op->grad_f32) return n.op->name + " has no CPU gradient";
  return "";
}

void HostBackend::forward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in,
                          std::span<const Buffer* const> out) {
  if (in_.size() < in.size()) in_.resize(in.size());
  if (out_.size() < out.size()) out_.resize(out.size());
  for (size_t i = 0; i < in.size(); ++i) in_[i] = &store_[index(*in[i])];
  for (size_t o = 0; o < out.size(); ++o) {
    out_[o] = std::move(store_[index(*out[o])]);
    std::fill(out_[o].data.begin(), out_[o].data.end(), 0.f);  // the kernels add into zeroed outputs
  }
  n.op->kernel_f32(KernelArgs<float>{n.attrs, std::span(in_.data(), in.size()), std::span(out_.data(), out.size()), ctx});
  for (size_t o = 0; o < out.size(); ++o) store_[index(*out[o])] = std::move(out_[o]);
}

void HostBackend::backward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in,
                           std::span<const Buffer* const> out, std::span<const Buffer* const> out_grad,
                           std::span<const Buffer* const> in_grad) {
  if (in_.size() < in.size()) in_.resize(in.size());
  if (din_.size() < in.size()) din_.resize(in.size());
  if (out_ptrs_.size() < out.size()) out_ptrs_.resize(out.size()), dout_.resize(out.size());
  for (size_t i = 0; i < in.size(); ++i) {
    in_[i] = &store_[index(*in[i])];
    if (in_grad[i]) din_[i] = std::move(store_[index(*in_grad[i])]);
    else din_[i] = Tensor<float>();  // an index input: an empty entry (no allocation)
  }
  for (size_t o = 0; o < out.size(); ++o) out_ptrs_[o] = &store_[index(*out[o])], dout_[o] = &store_[index(*out_grad[o])];
  n.op->grad_f32(GradArgs{n.attrs, std::span(in_.data(), in.size()), std::span(out_ptrs_.data(), out.size()),
                          std::span(dout_.data(), out.size()), std::span(din_.data(), in.size()), ctx});
  for (size_t i = 0; i < in.size(); ++i)
    if (in_grad[i]) store_[index(*in_grad[i])] = std::move(din_[i]);
}

namespace {
constexpr size_t kPiece = 16384;  // elements; a multiple of every SIMD width
// Below this many parameters on a device the update stays on one thread:
// for 262,144 (a 4 x 256 MLP) sharing it cost more in moving cache lines
// between cores than it saved (measured: 1,206 -> 1,014 steps/s on 2 threads).
constexpr size_t kParallelMin = size_t{1} << 20;
}  // namespace

void HostBackend::round(const Buffer& b, Precision p) { round_to(p, b.span()); }

bool HostBackend::unscale(const Buffer& b, float factor) { return runtime::unscale(b.span(), factor); }

void HostBackend::update(const UpdateRule& r, std::span<const ParameterSlot> slots) {
  if (slots_ != slots.size() || pieces_.empty()) {
    pieces_.clear(), total_ = 0, slots_ = slots.size();
    for (size_t i = 0; i < slots.size(); ++i) {
      const auto n = static_cast<size_t>(slots[i].w.numel);
      for (size_t b = 0; b < n; b += kPiece) pieces_.push_back({i, b, std::min(kPiece, n - b)});
      total_ += n;
    }
  }
  // Element-wise: any split gives the same bits.
  const auto pieces = [&](auto&& fn) {
    if (total_ < kParallelMin) {
      for (size_t p = 0; p < pieces_.size(); ++p) fn(static_cast<int64_t>(p));
    } else {
      parallel_pieces(static_cast<int64_t>(pieces_.size()), fn);
    }
  };
  if (r.kind == UpdateRule::Kind::kSgd) {
    pieces([&](int64_t p) {
      const Piece& piece = pieces_[static_cast<size_t>(p)];
      const ParameterSlot& s = slots[piece.slot];
      float* w = s.w.data + piece.begin;
      const float* g = s.g.data + piece.begin;
      float* v = s.m.data + piece.begin;
      for (size_t e = 0; e < piece.size; ++e) {
        v[e] = r.momentum * v[e] + g[e];
        w[e] -= r.lr * v[e];
      }
    });
    return;
  }
  pieces([&](int64_t p) {
    const Piece& piece = pieces_[static_cast<size_t>(p)];
    const ParameterSlot& s = slots[piece.slot];
    float* w = s.w.data + piece.begin;
    const float* g = s.g.data + piece.begin;
    float* m = s.m.data + piece.begin;
    float* v = s.v.data + piece.begin;
    for (size_t e = 0; e < piece.size; ++e) {
      m[e] = r.beta1 * m[e] + r.one_minus_beta1 * g[e];
      v[e] = r.beta2 * v[e] + r.one_minus_beta2 * g[e] * g[e];
      w[e] -= r.step * m[e] / (std::sqrt(v[e]) / r.root_c2 + r.eps);
    }
  });
}

}  // namespace pcgx::runtime
