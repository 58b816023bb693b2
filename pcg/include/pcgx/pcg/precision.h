#pragma once
// The precision a plan trains in (docs/training.md "Precision"), in the
// vocabulary of PyTorch's autocast and Megatron-LM:
//
//   fp32  FP32 everywhere.
//   tf32  FP32 storage, matrix products on TF32 tensor cores where the
//         device has them (pcgx's default, as its CUDA backend runs; on a
//         CPU the same as fp32).
//   bf16  mixed precision: compute and activations in BF16, FP32 master
//         weights, FP32 gradients (accumulated and all-reduced in FP32, as
//         Megatron-LM's main_grad) and FP32 optimizer state; matrix
//         products and reductions (softmax, norms, losses) accumulate in FP32.
//   fp16  as bf16 in FP16, with dynamic loss scaling.
//
// It is part of the strategy: the machine's peak FLOP/s for it prices the
// compute, activations and the messages that carry them count its element
// size, and weights count the bytes mixed precision keeps (params_bytes).
#include <cstdint>
#include <optional>
#include <string_view>

#include "pcgx/pcg/optimizer_state.h"
#include "pcgx/pcg/parallel_tensor_shape.h"

namespace pcgx {

enum class Precision : uint8_t { kFp32, kTf32, kBf16, kFp16 };
inline constexpr Precision kPrecisions[] = {Precision::kFp32, Precision::kTf32, Precision::kBf16, Precision::kFp16};
inline constexpr Precision kDefaultPrecision = Precision::kTf32;

// fp32, tf32, bf16, fp16: what files and reports say.
const char* name(Precision p);
// From its name; nullopt for any other text (file formats; the command line
// parses its flags itself).
std::optional<Precision> precision_named(std::string_view text);

// Whether FP32 master weights sit beside a low-precision compute copy.
bool is_mixed(Precision p);
// Bytes of one activation element: what compute reads and writes, what the
// backward pass keeps, and what moves between devices.
int64_t activation_bytes(Precision p);
// Bytes of one element of a tensor of type `t` at precision `p`: float
// tensors at activation_bytes, others (indices) at their dtype's size.
int64_t element_bytes(DataType t, Precision p);

// What gradients are accumulated and reduced in under mixed precision:
//   fp32     FP32, the weight-gradient kernels adding into it
//            (Megatron-LM's main_grad with
//            --accumulate-allreduce-grads-in-fp32, which it forces for
//            BF16, and its gradient-accumulation fusion; pcgx's runtimes).
//   compute  the compute precision (Megatron-LM's FP16 default before
//            Megatron-Core, its --grad-reduce-in-bf16; DeepSpeed's FP16
//            engine; FSDP with reduce_dtype the compute type): half the
//            bytes kept and reduced.
//   fp32-cast  FP32, but not by the backward pass's own kernels: they
//            write each micro-batch's gradients in the compute precision,
//            and after that micro-batch's backward each is cast to FP32
//            and added into the FP32 one, a pass over every parameter per
//            micro-batch (DeepSpeed's BF16 optimizer, `update_hp_grads`:
//            `hp_grad.add_(lp.grad.to(float32))`, its pipeline engine
//            calling it after each backward); both gradients are kept.
// Without mixed precision all are FP32, accumulated by the kernels.
enum class GradPrecision : uint8_t { kFp32, kCompute, kFp32Cast };
inline constexpr GradPrecision kGradPrecisions[] = {GradPrecision::kFp32, GradPrecision::kCompute, GradPrecision::kFp32Cast};
const char* name(GradPrecision g);  // "fp32", "compute", "fp32-cast"
std::optional<GradPrecision> grad_precision_named(std::string_view text);

// What one trained parameter keeps on a device, by kind.
struct ParamBytes {
  int64_t weight = 0;     // in compute precision
  int64_t master = 0;     // the FP32 master copy, when mixed
  int64_t gradient = 0;   // FP32, or the compute precision's (GradPrecision): what is reduced and updated
  int64_t optimizer = 0;  // the optimizer's FP32 states (Adam's two moments: 8)
  int64_t written = 0;    // fp32-cast, mixed: the compute-precision gradient the backward writes beside it
  int64_t total() const { return weight + master + gradient + optimizer + written; }
};
// The bytes per parameter the fp32-cast pass streams after each
// micro-batch's backward: the compute-precision gradient read, its FP32
// cast written, then read with the FP32 gradient and the sum written
// (2 + 4 + 4 + 4 + 4 = 18 under BF16); 0 where gradients are not cast.
int64_t cast_pass_bytes(Precision p, GradPrecision g);
ParamBytes param_bytes(Precision p, OptimizerState o = kDefaultOptimizer, GradPrecision g = GradPrecision::kFp32);
// Their total: with Adam 16 in FP32/TF32; 2 + 4 + 4 + 8 = 18 mixed (the
// figure in Megatron-LM's distributed-optimizer notes).
int64_t param_state_bytes(Precision p, OptimizerState o = kDefaultOptimizer);
// The memory an update streams per parameter, in FP32 words: the
// optimizer's (update_words) and, when mixed, the compute copy it writes
// (2 bytes: half a word).
double update_stream_words(Precision p, OptimizerState o);

}  // namespace pcgx
