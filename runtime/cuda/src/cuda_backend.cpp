#include "pcgx/runtime/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <deque>
#include <cstring>
#include <set>
#include <unordered_map>

#include "cublas_loader.h"
#include "cudnn_conv.h"
#include "kernels.h"
#include "vision_kernels.h"
#include "pcgx/pcg/error.h"

namespace pcgx::runtime::cuda {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS) throw Error(std::string("cublas: ") + what + ": status " + std::to_string(static_cast<int>(e)));
}

// The operators with kernels of this backend; the rest run on the host.
enum class Kind : uint8_t {
  kHost, kEwAdd, kEwMul, kScalarMul, kRelu, kGelu, kSigmoid, kTanh, kDropout, kLinear, kMatMul, kBatchMatMul,
  kSoftmax, kLayerNorm, kMSELoss, kCrossEntropy, kReshape, kTranspose, kConcat, kSplit, kEmbedding, kEmbeddingBag,
  kConv2D, kPool2D, kBatchNorm, kBatchSum, kBatchSquares, kBatchNormApply
};

Kind kind_of(const OpDef& op) {
  static const std::pair<const char*, Kind> kinds[] = {
      {"EwAdd", Kind::kEwAdd}, {"EwMul", Kind::kEwMul},   {"ScalarMul", Kind::kScalarMul}, {"Relu", Kind::kRelu},
      {"Gelu", Kind::kGelu},   {"Sigmoid", Kind::kSigmoid}, {"Tanh", Kind::kTanh},         {"Dropout", Kind::kDropout},
      {"Linear", Kind::kLinear}, {"MatMul", Kind::kMatMul}, {"BatchMatMul", Kind::kBatchMatMul},
      {"Softmax", Kind::kSoftmax}, {"LayerNorm", Kind::kLayerNorm}, {"MSELoss", Kind::kMSELoss},
      {"SoftmaxCrossEntropy", Kind::kCrossEntropy}, {"Reshape", Kind::kReshape}, {"Transpose", Kind::kTranspose},
      {"Concat", Kind::kConcat}, {"Split", Kind::kSplit}, {"Embedding", Kind::kEmbedding}, {"EmbeddingBag", Kind::kEmbeddingBag},
#ifdef PCGX_HAVE_CUDNN
      {"Conv2D", Kind::kConv2D},
#endif
      {"Pool2D", Kind::kPool2D}, {"BatchNorm", Kind::kBatchNorm}, {"BatchSum", Kind::kBatchSum},
      {"BatchSquares", Kind::kBatchSquares}, {"BatchNormApply", Kind::kBatchNormApply}};
  for (const auto& [name, k] : kinds)
    if (op.name == name) return k;
  return Kind::kHost;
}

Act act_of(Kind k) {
  switch (k) {
    case Kind::kRelu: return Act::kRelu;
    case Kind::kGelu: return Act::kGelu;
    case Kind::kSigmoid: return Act::kSigmoid;
    case Kind::kTanh: return Act::kTanh;
    default: return Act::kNone;
  }
}

// Linear's "activation" attribute (the registry's names).
Act act_named(const std::string& a) {
  if (a == "relu") return Act::kRelu;
  if (a == "gelu") return Act::kGelu;
  if (a == "sigmoid") return Act::kSigmoid;
  if (a == "tanh") return Act::kTanh;
  return Act::kNone;
}

// Softmax's geometry (pcg/src/ops/norm_ops.cpp): the axis's length, the
// elements after it, the rows before it.
struct Axis {
  int64_t outer = 1, len = 1, inner = 1;
  size_t axis = 0;
};
Axis softmax_axis(const Attributes& a, const std::vector<int64_t>& shape) {
  const int64_t ax = a.get_int("axis");
  Axis r;
  r.axis = static_cast<size_t>(ax < 0 ? ax + static_cast<int64_t>(shape.size()) : ax);
  r.len = shape[r.axis];
  for (size_t d = r.axis + 1; d < shape.size(); ++d) r.inner *= shape[d];
  r.outer = product(shape) / (r.len * r.inner);
  return r;
}

// Transpose's: y's shape and, per y dimension, x's stride of perm[d].
PermuteGeometry permute_geometry(const std::vector<int64_t>& x, const std::vector<int64_t>& y, const IntList& perm) {
  PermuteGeometry g;
  g.rank = static_cast<int>(y.size());
  if (g.rank > kMaxRank) throw Error("cuda: Transpose of rank " + std::to_string(g.rank) + " is above " + std::to_string(kMaxRank));
  std::vector<int64_t> xs(x.size(), 1);
  for (size_t d = x.size(); d-- > 1;) xs[d - 1] = xs[d] * x[d];
  g.numel = 1;
  for (size_t d = 0; d < y.size(); ++d) g.extent[d] = y[d], g.x_strides[d] = xs[static_cast<size_t>(perm[d])], g.numel *= y[d];
  return g;
}

// Concat and Split along a data axis: piece i of the whole (Concat's
// output, Split's input) starts at the sum of the earlier pieces' extents.
// `f(piece, offset)` per piece.
template <class F>
void along_axis(const Attributes& a, std::span<const Buffer* const> pieces, const std::deque<std::vector<int64_t>>& shapes, F&& f) {
  const auto axis = static_cast<size_t>(a.get_int("axis"));
  std::array<int64_t, kMaxRank> offset{};
  for (const Buffer* p : pieces) {
    const auto& ps = shapes[static_cast<size_t>(p->id)];
    f(*p, std::span<const int64_t>(offset.data(), ps.size()));
    offset[axis] += ps[axis];
  }
}

// Conv2D's geometry from its shards' shapes and attributes.
ConvGeometry conv_geometry(const Attributes& a, const std::vector<int64_t>& x, const std::vector<int64_t>& w, const std::vector<int64_t>& y) {
  ConvGeometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.cg = w[1], g.kh = w[2], g.kw = w[3];
  g.ho = y[2], g.wo = y[3];
  g.sh = a.get_int("stride_h"), g.sw = a.get_int("stride_w"), g.ph = a.get_int("pad_h"), g.pw = a.get_int("pad_w");
  return g;
}

PoolGeometry pool_geometry(const Attributes& a, const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
  PoolGeometry g;
  g.planes = x[0] * x[1], g.h = x[2], g.w = x[3], g.ho = y[2], g.wo = y[3];
  g.kh = a.get_int("kernel_h"), g.kw = a.get_int("kernel_w");
  g.sh = a.get_int("stride_h") ? a.get_int("stride_h") : g.kh;
  g.sw = a.get_int("stride_w") ? a.get_int("stride_w") : g.kw;
  g.ph = a.get_int("pad_h"), g.pw = a.get_int("pad_w");
  g.max = a.get_string("mode") == "max";
  return g;
}

// x[N, C, S...] of a BatchNorm-family shard: statistics per `group`
// samples (BatchNorm's attribute; the whole shard for the others).
ChannelGeometry channel_geometry(const std::vector<int64_t>& x, int64_t group) {
  ChannelGeometry g;
  g.n = x[0], g.c = x[1], g.s = 1;
  for (size_t d = 2; d < x.size(); ++d) g.s *= x[d];
  g.group = group > 0 ? group : std::max<int64_t>(g.n, 1);  // an empty shard: no sets, no division by zero
  return g;
}

// The elements per channel of the whole (logical) x a statistic spans
// (batch_norm_ops.cpp's statistics_count).
int64_t statistics_count(const TaskContext& ctx) {
  const auto& dims = ctx.input_shapes[0].dims;
  int64_t n = dims[0].size;
  for (size_t d = 2; d < dims.size(); ++d) n *= dims[d].size;
  return n;
}

constexpr size_t kChunk = size_t{64} << 20;  // the arena's cudaMalloc granule
constexpr size_t kAlign = 256;

}  // namespace

struct CudaBackend::State {
  int device = 0;
  bool tf32 = true;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  // Arena: buffers live as long as the backend, so a bump allocator over
  // chunks is the whole caching allocator; nothing is freed before the end.
  std::vector<void*> chunks;
  char* next = nullptr;
  size_t left = 0;
  int64_t mallocs = 0;
  std::deque<std::vector<int64_t>> shapes;  // per buffer id
  std::deque<Tensor<float>> host;           // per buffer id: its host copy, made when first needed
  // Scratch per slot, grown to the largest asked (so nothing is allocated
  // after the first step): 0 and 1 for an operator's intermediates, 2 for
  // the partial sums of a reduction beside them, 3 for batch statistics.
  float* scratch[4] = {nullptr, nullptr, nullptr, nullptr};
  int* nonfinite = nullptr;  // unscale's flag, allocated at its first call
  size_t scratch_size[4] = {0, 0, 0, 0};
  std::unique_ptr<CudnnConv> conv;  // made at the first Conv2D
  CudnnConv& convolutions() {
    if (!conv) conv = std::make_unique<CudnnConv>(stream, tf32);
    return *conv;
  }
  double* scratch_doubles(size_t n) { return reinterpret_cast<double*>(scratch_floats(3, 2 * n)); }
  std::set<std::string> fallbacks;
  // Per input buffer: its pinned host copy and the event of the last
  // upload from it (waited for before it is written again).
  struct Pinned {
    float* host = nullptr;
    cudaEvent_t done = nullptr;
    bool pending = false;
  };
  std::unordered_map<int32_t, Pinned> pinned;
  // now(): two events recorded in turn; the time is the host's at the
  // first read plus the GPU's intervals between reads since.
  cudaEvent_t clock_events[2] = {nullptr, nullptr};
  int clock_next = 0;
  bool clock_started = false;
  Backend::Clock::time_point clock_time;
  // The host fallback's argument arrays (host_backend.cpp's).
  std::vector<const Tensor<float>*> in, out_ptrs, dout;
  std::vector<Tensor<float>> out, din;

  void* raw(size_t bytes) {
    bytes = (bytes + kAlign - 1) / kAlign * kAlign;
    if (bytes > left) {
      const size_t size = std::max(bytes, kChunk);
      void* p = nullptr;
      check(cudaMalloc(&p, size), "cudaMalloc");
      ++mallocs;
      chunks.push_back(p);
      next = static_cast<char*>(p), left = size;
    }
    void* p = next;
    next += bytes, left -= bytes;
    return p;
  }
  void copy(float* to, const float* from, int64_t n) {
    check(cudaMemcpyAsync(to, from, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, stream), "copy");
  }
  float* scratch_floats(int slot, size_t n) {
    if (scratch_size[slot] < n) {
      if (scratch[slot]) check(cudaFree(scratch[slot]), "cudaFree");
      check(cudaMalloc(reinterpret_cast<void**>(&scratch[slot]), n * sizeof(float)), "cudaMalloc");
      ++mallocs;
      scratch_size[slot] = n;
    }
    return scratch[slot];
  }
  // The host copy of a buffer, shaped; with its device values when `fetch`.
  Tensor<float>& staged(const Buffer& b, bool fetch) {
    Tensor<float>& t = host[static_cast<size_t>(b.id)];
    if (t.data.size() != static_cast<size_t>(b.numel)) t = Tensor<float>(shapes[static_cast<size_t>(b.id)]);
    if (fetch) {
      check(cudaMemcpyAsync(t.data.data(), b.data, static_cast<size_t>(b.numel) * sizeof(float), cudaMemcpyDeviceToHost, stream), "copy to host");
      check(cudaStreamSynchronize(stream), "synchronize");
    }
    return t;
  }
  void put(const Buffer& b) {
    const Tensor<float>& t = host[static_cast<size_t>(b.id)];
    check(cudaMemcpyAsync(b.data, t.data.data(), static_cast<size_t>(b.numel) * sizeof(float), cudaMemcpyHostToDevice, stream), "copy to device");
  }
  BlockGeometry geometry(const Buffer& full, std::span<const int64_t> offset, const Buffer& blk) const {
    const auto& fs = shapes[static_cast<size_t>(full.id)];
    const auto& bs = shapes[static_cast<size_t>(blk.id)];
    BlockGeometry g;
    g.rank = static_cast<int>(fs.size());
    if (g.rank > kMaxRank) throw Error("cuda: rank " + std::to_string(g.rank) + " is above " + std::to_string(kMaxRank));
    int64_t stride = 1;
    for (int d = g.rank - 1; d >= 0; --d) {
      g.extent[d] = std::min(bs[static_cast<size_t>(d)], fs[static_cast<size_t>(d)]);
      g.offset[d] = offset.empty() ? 0 : offset[static_cast<size_t>(d)];
      g.full_strides[d] = stride;
      stride *= fs[static_cast<size_t>(d)];
    }
    g.numel = 1;
    for (int d = 0; d < g.rank; ++d) g.numel *= g.extent[d];
    return g;
  }
  // A dropout shard's elements with the strides of the whole (logical)
  // tensor: the draws follow global indices, as the CPU's.
  BlockGeometry dropout_geometry(const Buffer& shard, const TaskContext& ctx) const {
    BlockGeometry g = geometry(shard, ctx.output_offsets[0], shard);
    int64_t stride = 1;
    for (int d = g.rank - 1; d >= 0; --d) g.full_strides[d] = stride, stride *= ctx.output_shapes[0].dims[static_cast<size_t>(d)].size;
    return g;
  }
  // Row-major y[m, n] (+)= x[m, k] w[k, n], batched with strides.
  void gemm(bool tx, bool tw, int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y, float beta,
            int64_t batches = 1) {
    // Column-major: y^T = op(w)^T op(x)^T; a row-major [r, c] matrix is a
    // column-major [c, r] one with leading dimension c.
    const float alpha = 1.f;
    const int lx = static_cast<int>(tx ? m : k), lw = static_cast<int>(tw ? k : n);
    const cublasOperation_t ow = tw ? CUBLAS_OP_T : CUBLAS_OP_N, ox = tx ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (batches == 1) {
      check(cublas().sgemm(blas, ow, ox, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, w, lw, x, lx, &beta, y,
                        static_cast<int>(n)),
            "sgemm");
    } else {
      check(cublas().sgemm_strided_batched(blas, ow, ox, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, w, lw, k * n,
                                      x, lx, m * k, &beta, y, static_cast<int>(n), m * n, static_cast<int>(batches)),
            "sgemm (batched)");
    }
  }
};

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) {
      if (e == cudaErrorNoDevice) *why = "no CUDA device is visible";
      else if (e == cudaErrorInsufficientDriver) *why = std::string("no NVIDIA driver is loaded, or it is older than this CUDA runtime (") + cudaGetErrorString(e) + ")";
      else *why = cudaGetErrorString(e);
    }
    cudaGetLastError();  // clear it
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device is visible";
  return n;
}

CudaBackend::CudaBackend(const CudaOptions& o) : s_(std::make_unique<State>()) {
  std::string why;
  const int n = device_count(&why);
  if (n == 0) throw Error("cuda: no GPU (" + why + ")");
  if (o.device < 0 || o.device >= n)
    throw Error("cuda: device " + std::to_string(o.device) + " is not one of the " + std::to_string(n) + " visible");
  s_->device = o.device, s_->tf32 = o.tf32;
  check(cudaSetDevice(o.device), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&s_->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cublas().create(&s_->blas), "cublasCreate");
  check(cublas().set_stream(s_->blas, s_->stream), "cublasSetStream");
  check(cublas().set_math_mode(s_->blas, o.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  for (cudaEvent_t& e : s_->clock_events) check(cudaEventCreate(&e), "cudaEventCreate");
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(s_->device);
  if (s_->stream) cudaStreamSynchronize(s_->stream);
  if (s_->blas) cublas().destroy(s_->blas);
  s_->conv.reset();
  for (float* p : s_->scratch)
    if (p) cudaFree(p);
  if (s_->nonfinite) cudaFree(s_->nonfinite);
  for (auto& [id, p] : s_->pinned) {
    if (p.host) cudaFreeHost(p.host);
    if (p.done) cudaEventDestroy(p.done);
  }
  for (cudaEvent_t e : s_->clock_events)
    if (e) cudaEventDestroy(e);
  for (void* p : s_->chunks) cudaFree(p);
  if (s_->stream) cudaStreamDestroy(s_->stream);
}

Buffer CudaBackend::allocate(std::span<const int64_t> shape) {
  const int64_t n = product(shape);
  auto* p = static_cast<float*>(s_->raw(static_cast<size_t>(n) * sizeof(float)));
  check(cudaMemsetAsync(p, 0, static_cast<size_t>(n) * sizeof(float), s_->stream), "cudaMemset");
  s_->shapes.emplace_back(shape.begin(), shape.end());
  s_->host.emplace_back();
  return {p, n, static_cast<int32_t>(s_->shapes.size() - 1)};
}

std::span<const int64_t> CudaBackend::shape(const Buffer& b) const { return s_->shapes[static_cast<size_t>(b.id)]; }

void CudaBackend::fill(const Buffer& b, float value) {
  if (value == 0.f) check(cudaMemsetAsync(b.data, 0, static_cast<size_t>(b.numel) * sizeof(float), s_->stream), "cudaMemset");
  else cuda::fill(b.data, b.numel, value, s_->stream);
}

void CudaBackend::copy(const Buffer& to, const Buffer& from) {
  check(cudaMemcpyAsync(to.data, from.data, static_cast<size_t>(to.numel) * sizeof(float), cudaMemcpyDeviceToDevice, s_->stream), "copy");
}

void CudaBackend::add(const Buffer& into, const Buffer& x) { cuda::add(into.data, x.data, into.numel, s_->stream); }

void CudaBackend::read_block(const Buffer& full, std::span<const int64_t> offset, const Buffer& out) {
  block(BlockOp::kRead, s_->geometry(full, offset, out), full.data, out.data, s_->stream);
}

void CudaBackend::add_block(const Buffer& full, std::span<const int64_t> offset, const Buffer& blk) {
  block(BlockOp::kAdd, s_->geometry(full, offset, blk), full.data, blk.data, s_->stream);
}

void CudaBackend::add_from_block(const Buffer& out, const Buffer& full, std::span<const int64_t> offset) {
  block(BlockOp::kAddFrom, s_->geometry(full, offset, out), full.data, out.data, s_->stream);
}

void CudaBackend::add_range(const Buffer& flat, int64_t at, const Buffer& x) { cuda::add(flat.data + at, x.data, x.numel, s_->stream); }

void CudaBackend::set_range(const Buffer& flat, int64_t at, const Buffer& x) {
  check(cudaMemcpyAsync(flat.data + at, x.data, static_cast<size_t>(x.numel) * sizeof(float), cudaMemcpyDeviceToDevice, s_->stream),
        "copy");
}

void CudaBackend::copy_range(const Buffer& to, const Buffer& flat, int64_t at) {
  check(cudaMemcpyAsync(to.data, flat.data + at, static_cast<size_t>(to.numel) * sizeof(float), cudaMemcpyDeviceToDevice, s_->stream),
        "copy");
}

void CudaBackend::upload_block(const Tensor<float>& logical, std::span<const int64_t> offset, const Buffer& out) {
  State::Pinned& p = s_->pinned[out.id];
  const size_t bytes = static_cast<size_t>(out.numel) * sizeof(float);
  if (!p.host) {
    check(cudaHostAlloc(reinterpret_cast<void**>(&p.host), std::max<size_t>(bytes, 1), cudaHostAllocDefault), "cudaHostAlloc");
    check(cudaEventCreateWithFlags(&p.done, cudaEventDisableTiming), "cudaEventCreate");
  }
  // The last upload from this pinned copy must be done before it is
  // written again; the rest of the queue goes on.
  if (p.pending) check(cudaEventSynchronize(p.done), "synchronize");
  const bool whole = logical.numel() == out.numel && std::all_of(offset.begin(), offset.end(), [](int64_t o) { return o == 0; });
  if (whole) {
    std::memcpy(p.host, logical.data.data(), bytes);
  } else {
    Tensor<float>& t = s_->staged(out, false);
    pcgx::read_block(logical, offset, t);
    std::memcpy(p.host, t.data.data(), bytes);
  }
  check(cudaMemcpyAsync(out.data, p.host, bytes, cudaMemcpyHostToDevice, s_->stream), "copy to device");
  check(cudaEventRecord(p.done, s_->stream), "cudaEventRecord");
  p.pending = true;
}

void CudaBackend::download(const Buffer& b, std::span<float> host) {
  check(cudaSetDevice(s_->device), "cudaSetDevice");
  to_host(b.span().first(std::min(host.size(), static_cast<size_t>(b.numel))), host);
}

float CudaBackend::element(const Buffer& b, int64_t index) {
  float v = 0;
  to_host(std::span<const float>(b.data + index, 1), std::span<float>(&v, 1));
  return v;
}

void CudaBackend::to_host(std::span<const float> from, std::span<float> to) {
  check(cudaGetLastError(), "a kernel's launch");
  check(cudaMemcpyAsync(to.data(), from.data(), from.size_bytes(), cudaMemcpyDeviceToHost, s_->stream), "copy to host");
  check(cudaStreamSynchronize(s_->stream), "synchronize");
}

void CudaBackend::from_host(std::span<const float> from, std::span<float> to) {
  // Synchronous: the caller reuses its host buffer at once.
  check(cudaMemcpyAsync(to.data(), from.data(), from.size_bytes(), cudaMemcpyHostToDevice, s_->stream), "copy to device");
  check(cudaStreamSynchronize(s_->stream), "synchronize");
}

bool CudaBackend::native(const OpDef& op) { return kind_of(op) != Kind::kHost; }

bool CudaBackend::overwrites_gradient(const Node& n, size_t input) const {
  // An embedding's table gradient is scattered into (rows may repeat);
  // every other gradient, the host fallback's included, is written whole.
  const Kind k = kind_of(*n.op);
  return !((k == Kind::kEmbedding || k == Kind::kEmbeddingBag) && input == 1);
}

std::string CudaBackend::unsupported(const Node& n) const {
  if (native(*n.op)) return "";
  // The host fallback runs the CPU's kernels.
  if (!n.op->kernel_f32) return n.op->name + " has no CPU kernel to fall back on";
  if (!n.op->grad_f32) return n.op->name + " has no CPU gradient to fall back on";
  return "";
}

std::vector<std::string> CudaBackend::host_fallbacks() const { return {s_->fallbacks.begin(), s_->fallbacks.end()}; }

std::string CudaBackend::remarks() const {
  std::string r = "loaded " + cublas().path + (s_->conv ? " and " + s_->conv->describe() : "");
  if (s_->fallbacks.empty()) return r;
  r += "; ran on the CPU's kernels through host copies (no CUDA kernel yet):";
  for (const std::string& f : s_->fallbacks) r += " " + f;
  return r;
}

int64_t CudaBackend::device_allocations() const { return s_->mallocs + (s_->conv ? s_->conv->device_allocations() : 0); }

void CudaBackend::forward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in, std::span<const Buffer* const> out) {
  State& s = *s_;
  const Kind k = kind_of(*n.op);
  float* y = out[0]->data;
  switch (k) {
    case Kind::kEwAdd: return ew_add(in[0]->data, in[1]->data, y, out[0]->numel, s.stream);
    case Kind::kEwMul: return ew_mul(in[0]->data, in[1]->data, y, out[0]->numel, s.stream);
    case Kind::kScalarMul:
      return scale(in[0]->data, static_cast<float>(n.attrs.get_float("scalar")), y, out[0]->numel, s.stream);
    case Kind::kRelu:
    case Kind::kGelu:
    case Kind::kSigmoid:
    case Kind::kTanh: return activate(act_of(k), in[0]->data, y, out[0]->numel, s.stream);
    case Kind::kDropout:
      return dropout(in[0]->data, y, s.dropout_geometry(*out[0], ctx), static_cast<uint64_t>(n.attrs.get_int("seed")),
                     n.attrs.get_float("rate"), false, s.stream);
    case Kind::kLinear:
    case Kind::kMatMul: {
      const auto& ws = s.shapes[static_cast<size_t>(in[1]->id)];
      const int64_t kk = ws[0], nn = ws[1], m = in[0]->numel / kk;
      s.gemm(false, false, m, nn, kk, in[0]->data, in[1]->data, y, 0.f);
      if (k == Kind::kLinear) {
        const bool bias = n.attrs.get_bool("use_bias");
        const Act act = act_named(n.attrs.get_string("activation"));
        if (bias || act != Act::kNone) bias_activate(act, y, bias ? in[2]->data : nullptr, m, nn, s.stream);
      }
      return;
    }
    case Kind::kBatchMatMul: {
      const auto& xs = s.shapes[static_cast<size_t>(in[0]->id)];
      const auto& ws = s.shapes[static_cast<size_t>(in[1]->id)];
      const size_t r = xs.size();
      const int64_t m = xs[r - 2], kk = xs[r - 1], nn = ws[r - 1];
      return s.gemm(false, false, m, nn, kk, in[0]->data, in[1]->data, y, 0.f, in[0]->numel / (m * kk));
    }
    case Kind::kSoftmax: {
      const auto& xs = s.shapes[static_cast<size_t>(in[0]->id)];
      const Axis ax = softmax_axis(n.attrs, xs);
      const bool causal = n.attrs.get_bool("causal");
      const size_t r = xs.size();
      return softmax(in[0]->data, y, ax.outer, ax.len, ax.inner, causal, causal ? xs[r - 2] : 1, causal ? ctx.output_offsets[0][r - 2] : 0,
                     s.stream);
    }
    case Kind::kLayerNorm: {
      const int64_t d = s.shapes[static_cast<size_t>(in[0]->id)].back();
      const bool affine = n.attrs.get_bool("affine");
      return layer_norm(in[0]->data, affine ? in[1]->data : nullptr, affine ? in[2]->data : nullptr, y, in[0]->numel / d, d,
                        static_cast<float>(n.attrs.get_float("eps")), s.stream);
    }
    case Kind::kMSELoss:
      return mse(in[0]->data, in[1]->data, y, in[0]->numel, ctx.input_shapes[0].num_elements(), s.scratch_floats(2, kLossPartials), s.stream);
    case Kind::kCrossEntropy: {
      const int64_t classes = s.shapes[static_cast<size_t>(in[0]->id)].back();
      const ParallelTensorShape& global = ctx.input_shapes[0];
      const int64_t rows = in[0]->numel / classes;
      return cross_entropy(in[0]->data, in[1]->data, y, rows, classes, global.num_elements() / global.dims.back().size,
                           s.scratch_floats(2, static_cast<size_t>(std::max<int64_t>(rows, 1))), s.stream);
    }
    case Kind::kReshape: return s.copy(y, in[0]->data, out[0]->numel);
    case Kind::kTranspose:
      return permute(permute_geometry(s.shapes[static_cast<size_t>(in[0]->id)], s.shapes[static_cast<size_t>(out[0]->id)],
                                      n.attrs.get_ints("perm")),
                     in[0]->data, y, PermuteOp::kGather, s.stream);
    case Kind::kConcat:
      return along_axis(n.attrs, in, s.shapes, [&](const Buffer& x, std::span<const int64_t> at) {
        block(BlockOp::kWrite, s.geometry(*out[0], at, x), y, x.data, s.stream);
      });
    case Kind::kSplit:
      return along_axis(n.attrs, out, s.shapes, [&](const Buffer& piece, std::span<const int64_t> at) {
        block(BlockOp::kRead, s.geometry(*in[0], at, piece), in[0]->data, piece.data, s.stream);
      });
    case Kind::kEmbedding:
    case Kind::kEmbeddingBag: {
      const auto& is = s.shapes[static_cast<size_t>(in[0]->id)];
      const auto& ts = s.shapes[static_cast<size_t>(in[1]->id)];
      const int64_t bag = k == Kind::kEmbeddingBag ? is[1] : 1;
      return gather_rows(in[0]->data, in[1]->data, y, in[0]->numel / bag, bag, ts[0], ts[1], ctx.input_offsets[1][0], s.stream);
    }
    case Kind::kConv2D: {
      const auto& ys = s.shapes[static_cast<size_t>(out[0]->id)];
      const ConvGeometry g = conv_geometry(n.attrs, s.shapes[static_cast<size_t>(in[0]->id)], s.shapes[static_cast<size_t>(in[1]->id)], ys);
      s.convolutions().forward(g, in[0]->data, in[1]->data, y);
      const bool bias = n.attrs.get_bool("use_bias");
      const Act act = act_named(n.attrs.get_string("activation"));
      if (bias || act != Act::kNone) channel_bias_activate(act, y, bias ? in[2]->data : nullptr, g.n, g.o, g.ho * g.wo, s.stream);
      return;
    }
    case Kind::kPool2D:
      return pool(pool_geometry(n.attrs, s.shapes[static_cast<size_t>(in[0]->id)], s.shapes[static_cast<size_t>(out[0]->id)]), in[0]->data,
                  y, s.stream);
    case Kind::kBatchNorm: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], n.attrs.get_int("group"));
      return batch_norm(g, in[0]->data, in[1]->data, in[2]->data, y, static_cast<float>(n.attrs.get_float("eps")),
                        s.scratch_doubles(static_cast<size_t>(batch_stat_doubles(g))), s.stream);
    }
    case Kind::kBatchSum: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], 0);
      return batch_sum(g, in[0]->data, y, s.scratch_doubles(static_cast<size_t>(batch_stat_doubles(g))), s.stream);
    }
    case Kind::kBatchSquares: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], 0);
      return batch_squares(g, in[0]->data, in[1]->data, statistics_count(ctx), y,
                           s.scratch_doubles(static_cast<size_t>(batch_stat_doubles(g))), s.stream);
    }
    case Kind::kBatchNormApply: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], 0);
      return batch_norm_apply(g, in[0]->data, in[1]->data, in[2]->data, in[3]->data, in[4]->data, statistics_count(ctx),
                              static_cast<float>(n.attrs.get_float("eps")), y, s.stream);
    }
    case Kind::kHost: break;
  }
  // The host fallback: the CPU's kernel on host copies.
  s.fallbacks.insert(n.op->name);
  if (s.in.size() < in.size()) s.in.resize(in.size());
  if (s.out.size() < out.size()) s.out.resize(out.size());
  for (size_t i = 0; i < in.size(); ++i) s.in[i] = &s.staged(*in[i], true);
  for (size_t o = 0; o < out.size(); ++o) {
    s.out[o] = std::move(s.staged(*out[o], false));
    std::fill(s.out[o].data.begin(), s.out[o].data.end(), 0.f);
  }
  n.op->kernel_f32(KernelArgs<float>{n.attrs, std::span(s.in.data(), in.size()), std::span(s.out.data(), out.size()), ctx});
  for (size_t o = 0; o < out.size(); ++o) s.host[static_cast<size_t>(out[o]->id)] = std::move(s.out[o]), s.put(*out[o]);
  check(cudaStreamSynchronize(s.stream), "synchronize");
}

void CudaBackend::backward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in, std::span<const Buffer* const> out,
                           std::span<const Buffer* const> out_grad, std::span<const Buffer* const> in_grad) {
  State& s = *s_;
  const Kind k = kind_of(*n.op);
  const float* dy = out_grad[0]->data;
  const int64_t size = out_grad[0]->numel;
  switch (k) {
    // Every gradient here is written whole (overwrites_gradient), except an
    // embedding table's, which is zeroed by the executor and added into.
    case Kind::kEwAdd:
      for (int i = 0; i < 2; ++i) s.copy(in_grad[static_cast<size_t>(i)]->data, dy, size);
      return;
    case Kind::kEwMul:
      ew_mul(dy, in[1]->data, in_grad[0]->data, size, s.stream);
      ew_mul(dy, in[0]->data, in_grad[1]->data, size, s.stream);
      return;
    case Kind::kScalarMul:
      return scale(dy, static_cast<float>(n.attrs.get_float("scalar")), in_grad[0]->data, size, s.stream);
    case Kind::kRelu:
    case Kind::kGelu:
    case Kind::kSigmoid:
    case Kind::kTanh:
      return activation_backward(act_of(k), in[0]->data, out[0]->data, dy, in_grad[0]->data, size, s.stream);
    case Kind::kDropout:
      return dropout(dy, in_grad[0]->data, s.dropout_geometry(*out[0], ctx), static_cast<uint64_t>(n.attrs.get_int("seed")),
                     n.attrs.get_float("rate"), false, s.stream);
    case Kind::kLinear:
    case Kind::kMatMul: {
      const auto& ws = s.shapes[static_cast<size_t>(in[1]->id)];
      const int64_t kk = ws[0], nn = ws[1], m = in[0]->numel / kk;
      const float* dz = dy;
      if (k == Kind::kLinear) {
        const bool bias = n.attrs.get_bool("use_bias");
        const Act act = act_named(n.attrs.get_string("activation"));
        if (act != Act::kNone) {
          const auto elems = static_cast<size_t>(m * nn);
          float* z = nullptr;
          if (act == Act::kGelu) {  // recompute z = x W + b
            z = s.scratch_floats(1, elems);
            s.gemm(false, false, m, nn, kk, in[0]->data, in[1]->data, z, 0.f);
            if (bias) bias_activate(Act::kNone, z, in[2]->data, m, nn, s.stream);
          }
          float* d = s.scratch_floats(0, elems);
          activation_backward(act, z, out[0]->data, dy, d, m * nn, s.stream);
          dz = d;
        }
        if (bias) column_sums(dz, m, nn, in_grad[2]->data, s.scratch_floats(2, static_cast<size_t>(column_chunks(m, nn) * nn)), s.stream);
      }
      s.gemm(false, true, m, kk, nn, dz, in[1]->data, in_grad[0]->data, 0.f);  // dx = dz W^T
      s.gemm(true, false, kk, nn, m, in[0]->data, dz, in_grad[1]->data, 0.f);  // dW = x^T dz
      return;
    }
    case Kind::kBatchMatMul: {
      const auto& xs = s.shapes[static_cast<size_t>(in[0]->id)];
      const auto& ws = s.shapes[static_cast<size_t>(in[1]->id)];
      const size_t r = xs.size();
      const int64_t m = xs[r - 2], kk = xs[r - 1], nn = ws[r - 1], batches = in[0]->numel / (m * kk);
      s.gemm(false, true, m, kk, nn, dy, in[1]->data, in_grad[0]->data, 0.f, batches);  // dx = dy w^T per item
      s.gemm(true, false, kk, nn, m, in[0]->data, dy, in_grad[1]->data, 0.f, batches);  // dw = x^T dy per item
      return;
    }
    case Kind::kSoftmax: {
      const Axis ax = softmax_axis(n.attrs, s.shapes[static_cast<size_t>(out[0]->id)]);
      return softmax_backward(out[0]->data, dy, in_grad[0]->data, ax.outer, ax.len, ax.inner, s.stream);
    }
    case Kind::kLayerNorm: {
      const int64_t d = s.shapes[static_cast<size_t>(in[0]->id)].back(), rows = in[0]->numel / d;
      const bool affine = n.attrs.get_bool("affine");
      float* stats = s.scratch_floats(0, static_cast<size_t>(2 * rows));
      float* partial = affine ? s.scratch_floats(2, static_cast<size_t>(2 * column_chunks(rows, d) * d)) : nullptr;
      return layer_norm_backward(in[0]->data, affine ? in[1]->data : nullptr, dy, in_grad[0]->data, affine ? in_grad[1]->data : nullptr,
                                     affine ? in_grad[2]->data : nullptr, stats, partial, rows, d, static_cast<float>(n.attrs.get_float("eps")),
                                     s.stream);
    }
    case Kind::kMSELoss:
      return mse_backward(in[0]->data, in[1]->data, dy, in_grad[0] ? in_grad[0]->data : nullptr, in_grad[1] ? in_grad[1]->data : nullptr,
                          in[0]->numel,
                              ctx.input_shapes[0].num_elements(), s.stream);
    case Kind::kCrossEntropy: {
      const int64_t classes = s.shapes[static_cast<size_t>(in[0]->id)].back();
      const ParallelTensorShape& global = ctx.input_shapes[0];
      return cross_entropy_backward(in[0]->data, in[1]->data, dy, in_grad[0]->data, in[0]->numel / classes, classes,
                                    global.num_elements() / global.dims.back().size, s.stream);
    }
    case Kind::kReshape: return s.copy(in_grad[0]->data, dy, in_grad[0]->numel);
    case Kind::kTranspose:
      return permute(permute_geometry(s.shapes[static_cast<size_t>(in[0]->id)], s.shapes[static_cast<size_t>(out[0]->id)],
                                      n.attrs.get_ints("perm")),
                     in_grad[0]->data, const_cast<float*>(dy), PermuteOp::kScatter, s.stream);
    case Kind::kConcat:  // each input's gradient is its piece of dy
      return along_axis(n.attrs, in_grad, s.shapes, [&](const Buffer& dx, std::span<const int64_t> at) {
        block(BlockOp::kRead, s.geometry(*out_grad[0], at, dx), out_grad[0]->data, dx.data, s.stream);
      });
    case Kind::kSplit:  // dx gathers the pieces' gradients (they tile it)
      return along_axis(n.attrs, out_grad, s.shapes, [&](const Buffer& piece, std::span<const int64_t> at) {
        block(BlockOp::kWrite, s.geometry(*in_grad[0], at, piece), in_grad[0]->data, piece.data, s.stream);
      });
    case Kind::kEmbedding:
    case Kind::kEmbeddingBag: {
      const auto& is = s.shapes[static_cast<size_t>(in[0]->id)];
      const auto& ts = s.shapes[static_cast<size_t>(in[1]->id)];
      const int64_t bag = k == Kind::kEmbeddingBag ? is[1] : 1;
      return scatter_rows_add(in[0]->data, dy, in_grad[1]->data, in[0]->numel / bag, bag, ts[0], ts[1], ctx.input_offsets[1][0], s.stream);
    }
    case Kind::kConv2D: {
      const ConvGeometry g = conv_geometry(n.attrs, s.shapes[static_cast<size_t>(in[0]->id)], s.shapes[static_cast<size_t>(in[1]->id)],
                                           s.shapes[static_cast<size_t>(out[0]->id)]);
      const bool bias = n.attrs.get_bool("use_bias");
      const Act act = act_named(n.attrs.get_string("activation"));
      const float* dz = dy;
      if (act != Act::kNone) {
        float* z = nullptr;
        if (act == Act::kGelu) {  // recompute z = conv(x, W) + b, as the CPU does
          z = s.scratch_floats(1, static_cast<size_t>(size));
          s.convolutions().forward(g, in[0]->data, in[1]->data, z);
          if (bias) channel_bias_activate(Act::kNone, z, in[2]->data, g.n, g.o, g.ho * g.wo, s.stream);
        }
        float* d = s.scratch_floats(0, static_cast<size_t>(size));
        activation_backward(act, z, out[0]->data, dy, d, size, s.stream);
        dz = d;
      }
      if (bias) channel_sums(dz, g.n, g.o, g.ho * g.wo, in_grad[2]->data, s.stream);
      s.convolutions().backward_data(g, dz, in[1]->data, in_grad[0]->data);
      s.convolutions().backward_filter(g, in[0]->data, dz, in_grad[1]->data);
      return;
    }
    case Kind::kPool2D:
      return pool_backward(pool_geometry(n.attrs, s.shapes[static_cast<size_t>(in[0]->id)], s.shapes[static_cast<size_t>(out[0]->id)]),
                           in[0]->data, dy, in_grad[0]->data, s.stream);
    case Kind::kBatchNorm: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], n.attrs.get_int("group"));
      return batch_norm_backward(g, in[0]->data, in[1]->data, dy, in_grad[0]->data, in_grad[1]->data, in_grad[2]->data,
                                 n.attrs.get_float("eps"), s.scratch_doubles(static_cast<size_t>(batch_stat_doubles(g))),
                                 s.stream);
    }
    case Kind::kBatchSum:
      return batch_sum_backward(channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], 0), dy, in_grad[0]->data, s.stream);
    case Kind::kBatchSquares: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], 0);
      return batch_squares_backward(g, in[0]->data, in[1]->data, dy, statistics_count(ctx), in_grad[0]->data, in_grad[1]->data,
                                    s.scratch_doubles(static_cast<size_t>(batch_stat_doubles(g))), s.stream);
    }
    case Kind::kBatchNormApply: {
      const ChannelGeometry g = channel_geometry(s.shapes[static_cast<size_t>(in[0]->id)], 0);
      return batch_norm_apply_backward(g, in[0]->data, in[1]->data, in[2]->data, in[3]->data, dy, statistics_count(ctx),
                                       n.attrs.get_float("eps"), in_grad[0]->data, in_grad[1]->data, in_grad[2]->data,
                                       in_grad[3]->data, in_grad[4]->data, s.scratch_doubles(static_cast<size_t>(batch_stat_doubles(g))),
                                       s.stream);
    }
    case Kind::kHost: break;
  }
  s.fallbacks.insert(n.op->name);
  if (s.in.size() < in.size()) s.in.resize(in.size());
  if (s.din.size() < in.size()) s.din.resize(in.size());
  if (s.out_ptrs.size() < out.size()) s.out_ptrs.resize(out.size()), s.dout.resize(out.size());
  for (size_t i = 0; i < in.size(); ++i) {
    s.in[i] = &s.staged(*in[i], true);
    if (in_grad[i]) {
      s.din[i] = std::move(s.staged(*in_grad[i], false));
      std::fill(s.din[i].data.begin(), s.din[i].data.end(), 0.f);  // in_grad holds zeros on entry
    } else {
      s.din[i] = Tensor<float>();
    }
  }
  for (size_t o = 0; o < out.size(); ++o) s.out_ptrs[o] = &s.staged(*out[o], true), s.dout[o] = &s.staged(*out_grad[o], true);
  n.op->grad_f32(GradArgs{n.attrs, std::span(s.in.data(), in.size()), std::span(s.out_ptrs.data(), out.size()),
                          std::span(s.dout.data(), out.size()), std::span(s.din.data(), in.size()), ctx});
  for (size_t i = 0; i < in.size(); ++i)
    if (in_grad[i]) s.host[static_cast<size_t>(in_grad[i]->id)] = std::move(s.din[i]), s.put(*in_grad[i]);
  check(cudaStreamSynchronize(s.stream), "synchronize");
}

void CudaBackend::update(const UpdateRule& r, std::span<const ParameterSlot> slots) {
  for (const ParameterSlot& p : slots) {
    if (r.kind == UpdateRule::Kind::kSgd) sgd(p.w.data, p.g.data, p.m.data, p.w.numel, r.lr, r.momentum, s_->stream);
    else adam(p.w.data, p.g.data, p.m.data, p.v.data, p.w.numel, r.beta1, r.beta2, r.one_minus_beta1, r.one_minus_beta2, r.step, r.eps,
              r.root_c2, s_->stream);
  }
}

void CudaBackend::round(const Buffer& b, Precision p) {
  if (is_mixed(p)) cuda::round_low(b.data, b.numel, p == Precision::kFp16, s_->stream);
}

bool CudaBackend::unscale(const Buffer& b, float factor) {
  if (!s_->nonfinite) check(cudaMalloc(&s_->nonfinite, sizeof(int)), "cudaMalloc");
  check(cudaMemsetAsync(s_->nonfinite, 0, sizeof(int), s_->stream), "cudaMemset");
  cuda::unscale(b.data, b.numel, factor, s_->nonfinite, s_->stream);
  int found = 0;
  check(cudaMemcpyAsync(&found, s_->nonfinite, sizeof(int), cudaMemcpyDeviceToHost, s_->stream), "copy to host");
  check(cudaStreamSynchronize(s_->stream), "synchronize");
  return found == 0;
}

Backend::Clock::time_point CudaBackend::now() {
  State& s = *s_;
  check(cudaGetLastError(), "a kernel's launch");
  const cudaEvent_t e = s.clock_events[s.clock_next];
  check(cudaEventRecord(e, s.stream), "cudaEventRecord");
  check(cudaEventSynchronize(e), "synchronize");
  if (!s.clock_started) {
    s.clock_time = Clock::now(), s.clock_started = true;
  } else {
    // The GPU's time between the two events: what the work queued between
    // the reads took (or the host's time, where the GPU waited for it),
    // without the host's wake-up after each wait.
    float ms = 0.f;
    check(cudaEventElapsedTime(&ms, s.clock_events[1 - s.clock_next], e), "cudaEventElapsedTime");
    s.clock_time += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
  }
  s.clock_next = 1 - s.clock_next;
  return s.clock_time;
}

}  // namespace pcgx::runtime::cuda
