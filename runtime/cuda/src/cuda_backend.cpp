// CudaBackend (cuda_backend.h): device, memory, uploads and downloads,
// the update, the clock and the host fallback; the operators are in
// cuda_forward.cpp and cuda_backward.cpp.
#include <cstring>

#include "backend_state.h"
#include "op_kinds.h"

namespace pcgx::runtime::cuda {

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

std::string device_name(int device) {
  cudaDeviceProp p{};
  if (device < 0 || device >= device_count() || cudaGetDeviceProperties(&p, device) != cudaSuccess) {
    cudaGetLastError();  // clear it
    return "";
  }
  return p.name;
}

CudaBackend::CudaBackend(const CudaOptions& o) : s_(std::make_unique<State>()) {
  std::string why;
  const int n = device_count(&why);
  if (n == 0) throw Error("cuda: no GPU (" + why + ")");
  if (o.device < 0 || o.device >= n)
    throw Error("cuda: device " + std::to_string(o.device) + " is not one of the " + std::to_string(n) + " visible");
  s_->device = o.device, s_->products = o.products;
  check(cudaSetDevice(o.device), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&s_->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cublas().create(&s_->blas), "cublasCreate");
  check(cublas().set_stream(s_->blas, s_->stream), "cublasSetStream");
  check(cublas().set_math_mode(s_->blas, o.products == Precision::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
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
  for (cudaEvent_t e : s_->marks) cudaEventDestroy(e);
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

void CudaBackend::State::host_forward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in,
                                      std::span<const Buffer* const> out) {
  fallbacks.insert(n.op->name);
  if (args_in.size() < in.size()) args_in.resize(in.size());
  if (args_out.size() < out.size()) args_out.resize(out.size());
  for (size_t i = 0; i < in.size(); ++i) args_in[i] = &staged(*in[i], true);
  for (size_t o = 0; o < out.size(); ++o) {
    args_out[o] = std::move(staged(*out[o], false));
    std::fill(args_out[o].data.begin(), args_out[o].data.end(), 0.f);
  }
  n.op->kernel_f32(KernelArgs<float>{n.attrs, std::span(args_in.data(), in.size()), std::span(args_out.data(), out.size()), ctx});
  for (size_t o = 0; o < out.size(); ++o) host[static_cast<size_t>(out[o]->id)] = std::move(args_out[o]), put(*out[o]);
  check(cudaStreamSynchronize(stream), "synchronize");
}

void CudaBackend::State::host_backward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in,
                                       std::span<const Buffer* const> out, std::span<const Buffer* const> out_grad,
                                       std::span<const Buffer* const> in_grad) {
  fallbacks.insert(n.op->name);
  if (args_in.size() < in.size()) args_in.resize(in.size());
  if (args_din.size() < in.size()) args_din.resize(in.size());
  if (args_out_ptrs.size() < out.size()) args_out_ptrs.resize(out.size()), args_dout.resize(out.size());
  for (size_t i = 0; i < in.size(); ++i) {
    args_in[i] = &staged(*in[i], true);
    if (in_grad[i]) {
      // Written whole (overwrites_gradient): zeros the CPU's rule adds into.
      args_din[i] = std::move(staged(*in_grad[i], false));
      std::fill(args_din[i].data.begin(), args_din[i].data.end(), 0.f);
    } else {
      args_din[i] = Tensor<float>();
    }
  }
  for (size_t o = 0; o < out.size(); ++o) args_out_ptrs[o] = &staged(*out[o], true), args_dout[o] = &staged(*out_grad[o], true);
  n.op->grad_f32(GradArgs{n.attrs, std::span(args_in.data(), in.size()), std::span(args_out_ptrs.data(), out.size()),
                          std::span(args_dout.data(), out.size()), std::span(args_din.data(), in.size()), ctx});
  for (size_t i = 0; i < in.size(); ++i)
    if (in_grad[i]) host[static_cast<size_t>(in_grad[i]->id)] = std::move(args_din[i]), put(*in_grad[i]);
  check(cudaStreamSynchronize(stream), "synchronize");
}

void CudaBackend::update(const UpdateRule& r, std::span<const ParameterSlot> slots) {
  for (const ParameterSlot& p : slots) {
    if (r.kind == UpdateRule::Kind::kSgd) sgd(p.w.data, p.g.data, p.m.data, p.w.numel, r.lr, r.momentum, s_->stream);
    else adam(p.w.data, p.g.data, p.m.data, p.v.data, p.w.numel, r.beta1, r.beta2, r.one_minus_beta1, r.one_minus_beta2, r.step, r.eps,
              r.root_c2, s_->stream);
  }
}

void CudaBackend::round(const Buffer& b, Precision p) {
  if (is_mixed(p)) cuda::round_low(b.data, b.data, b.numel, p == Precision::kFp16, s_->stream);
}

void CudaBackend::copy_rounded(const Buffer& to, const Buffer& from, Precision p) {
  if (is_mixed(p)) cuda::round_low(from.data, to.data, to.numel, p == Precision::kFp16, s_->stream);
  else s_->copy(to.data, from.data, to.numel);
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

int64_t CudaBackend::mark() {
  State& s = *s_;
  check(cudaGetLastError(), "a kernel's launch");
  if (s.marks_used == s.marks.size()) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "cudaEventCreate");
    s.marks.push_back(e);
  }
  check(cudaEventRecord(s.marks[s.marks_used], s.stream), "cudaEventRecord");
  return static_cast<int64_t>(s.marks_used++);
}

void CudaBackend::read_marks(std::vector<double>& seconds) {
  State& s = *s_;
  seconds.resize(s.marks_used);
  if (s.marks_used == 0) return;
  check(cudaEventSynchronize(s.marks[s.marks_used - 1]), "synchronize");
  // Summed from neighbours in double: each interval read as a float stays
  // as fine as the events' own resolution however long the step.
  seconds[0] = 0;
  for (size_t k = 1; k < s.marks_used; ++k) {
    float ms = 0.f;
    check(cudaEventElapsedTime(&ms, s.marks[k - 1], s.marks[k]), "cudaEventElapsedTime");
    seconds[k] = seconds[k - 1] + static_cast<double>(ms) * 1e-3;
  }
  s.marks_used = 0;
}

}  // namespace pcgx::runtime::cuda
