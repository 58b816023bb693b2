#pragma once
// One operator = one OpDef in the registry: its attributes, arity, shape and
// degree inference, reference kernels (float and modular), gradient, FLOP
// count, the properties other layers ask about (elementwise, any_rank) and
// its SMT forms (the symbols its axioms use). Adding an operator means
// writing one OpDef (pcg/src/ops/) and one axiom file; docs/adding-an-operator.md
// lists every step.
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "pcgx/pcg/attributes.h"
#include "pcgx/pcg/modular.h"
#include "pcgx/pcg/parallel_tensor_shape.h"
#include "pcgx/pcg/precision.h"
#include "pcgx/pcg/tensor.h"

namespace pcgx {

enum class OpClass : uint8_t {
  kSource,    // Input, Weight: no inputs, shape from attributes
  kCompute,   // runs as a grid of tasks on local shards
  kParallel,  // moves or combines shards: Repartition, Combine, ...
};

// What a shard-level operator does with shards (docs/design.md "Parallel
// tensors"), for the layers that move, fuse or price them without naming
// the operator: the shard moves the runtime executes (shard_moves.h), the
// collective the cost model prices, relayout fusion, the legacy format.
enum class DataMove : uint8_t {
  kNone,            // evaluated per task (compute) or a source
  kRepartition,     // splits each shard of a dimension into `degree` shards
  kCombine,         // concatenates groups of `degree` shards of a dimension
  kReplicate,       // copies each replica slot `degree` times
  kReduce,          // sums groups of `degree` replica slots
  kAllReduce,       // sums groups of `degree` slots into each of them
  kPipeline,        // cuts a dimension into sequential micro-slices
  kBatch,           // gathers the micro-slices back
  kConcatReplicas,  // (when shard-level) the inputs' replica slots, in order
  kSplitReplicas,   // (when shard-level) the input's slots dealt out in order
};

// Moves that keep the logical value and change only where its pieces sit
// (and when, for the micro-slices): a weight read through them is still
// the weight (source_layout.h).
bool keeps_value(DataMove m);

// A loss operator's target: the trainer, the synthetic task and the
// evaluator ask which loss a model ends in, not its name.
enum class LossKind : uint8_t {
  kNone,
  kRegression,      // target: real values of the prediction's shape (MSELoss)
  kClassification,  // target: class indices, prediction: logits (SoftmaxCrossEntropy)
};

// Logical (unpartitioned) type of a tensor.
struct TensorType {
  std::vector<int64_t> shape;
  DataType dtype = DataType::kFloat32;
  bool operator==(const TensorType&) const = default;
};

// One way a compute operator can be split across tasks (docs/design.md, degree
// inference). Along a task dimension of this kind, each input is split on
// one of its dimensions (index >= 0) or replicated: kCopy when each task
// needs the whole value, kSum when the replicas are summands of the value
// (e.g. a bias under reduction parallelism). Each output is split on one of
// its dimensions or becomes replica slots holding partial sums (kPartial).
// A kind is offered only where running the tasks and then combining (or
// reducing) their outputs equals running the operator once.
struct ParallelKind {
  static constexpr int kCopy = -1;
  static constexpr int kSum = -2;
  static constexpr int kPartial = -1;

  std::string name;          // "batch0", "out", "reduce", "rows", ...
  std::vector<int> inputs;   // per input: dimension index, kCopy or kSum
  std::vector<int> outputs;  // per output: dimension index or kPartial
  int64_t must_divide = 0;   // when > 0 the kind's degree must divide it (groups)
};

// Where a task's shards come from. Every task of an operator knows the global
// block offset of each of its input and output shards.
struct TaskContext {
  std::span<const ParallelTensorShape> input_shapes;
  std::span<const ParallelTensorShape> output_shapes;
  std::vector<std::vector<int64_t>> input_offsets;
  std::vector<std::vector<int64_t>> output_offsets;
};

template <class T>
struct KernelArgs {
  const Attributes& attrs;
  std::span<const Tensor<T>* const> in;  // local input shards
  std::span<Tensor<T>> out;              // local output shards, pre-shaped and zeroed
  const TaskContext& ctx;
};
template <class T>
using Kernel = void (*)(const KernelArgs<T>&);

// Shard-level evaluation for parallel operators (and replica-axis
// Concat/Split): sees every shard at once. Outputs come pre-shaped.
template <class T>
using ShardEval = void (*)(const Attributes&, std::span<const ShardedTensor<T>* const>,
                           std::span<ShardedTensor<T>>);

// Reverse-mode rule of a compute operator, run per task like its kernel:
// from the task's local input and output shards and the gradient of its
// output shards, the gradient of each float input shard into in_grad
// (pre-shaped and zeroed; index inputs have no gradient and an empty
// entry). Arithmetic rules add into it; data-movement rules (Reshape,
// Transpose, Concat, Split) write it, which is the same on a zeroed
// buffer. Callers sum contributions of several consumers themselves.
// Gradients of a value several tasks read (replica slots) come out per slot;
// summing them is the parallel operators' business (Replicate's dual is
// Reduce), so a rule never looks beyond its task.
struct GradArgs {
  const Attributes& attrs;
  std::span<const Tensor<float>* const> in;
  std::span<const Tensor<float>* const> out;
  std::span<const Tensor<float>* const> out_grad;
  std::span<Tensor<float>> in_grad;
  const TaskContext& ctx;
};
using GradKernel = void (*)(const GradArgs&);

// What a compute operator's reverse rule reads of its forward values
// besides its outputs' gradients: bit i of `inputs` for input i, bit o of
// `outputs` for output o. Every value no reverse rule reads is freed once
// its last forward reader has run (pcg/saved_tensors.h): Linear reads x and
// W but not its output, so a row-parallel Linear's partial sums never live
// into the backward pass; Softmax reads its output alone, Dropout nothing
// (it draws its mask again). A shape stays readable: a rule may ask a freed
// tensor for its shape, never for its data. Declared wrong, a gradient would
// read freed memory: tests/pcg/backward_reads_test.cpp runs every reverse
// rule with the values it says it does not read poisoned.
struct BackwardReads {
  uint64_t inputs = ~uint64_t{0};
  uint64_t outputs = ~uint64_t{0};
  bool input(size_t i) const { return i < 64 && ((inputs >> i) & 1u) != 0; }
  bool output(size_t o) const { return o < 64 && ((outputs >> o) & 1u) != 0; }
};

// Reverse rule of a shard-level operator: gradients of its inputs from
// gradients of its outputs, every shard at once. For a parallel operator
// this is its dual (docs/design.md table): the gradient of Replicate is Reduce.
using ShardGrad = void (*)(const Attributes&, std::span<const ShardedTensor<float>* const> out_grad,
                           std::span<ShardedTensor<float>> in_grad);

using TypeInference =
    std::function<std::vector<TensorType>(const Attributes&, std::span<const TensorType>)>;
using KindInference =
    std::function<std::vector<ParallelKind>(const Attributes&, std::span<const TensorType>)>;
using ParallelInference = std::function<std::vector<ParallelTensorShape>(
    const Attributes&, std::span<const ParallelTensorShape>)>;
using FlopCount = std::function<double(const Attributes&, std::span<const TensorType> in,
                                       std::span<const TensorType> out)>;

// How an attribute becomes an integer argument of an SMT symbol.
enum class SmtCode : uint8_t {
  kPlain,       // an int as itself, a string as its index in the choices, a
                // bool as 0/1, a float as its IEEE-754 bits (equal codes, equal values)
  kFraction,    // a float as two integers, an exact fraction num/den
  kAxis,        // an int axis, a negative one counted from the front
  kPermDigits,  // a permutation as 1 followed by its digits ([2, 0, 1] is 1201)
  kShapeDigits, // a shape as 1 then four decimal digits per size ([16, 4] is 100160004)
};
struct SmtArg {
  SmtArg(const char* a, SmtCode c = SmtCode::kPlain) : attr(a), code(c) {}  // NOLINT: {"dim", "degree"} reads best
  std::string attr;
  SmtCode code;
};
// The operator as the verifier sees it (axioms/*.smt2): one uninterpreted
// function symbol per form, taking the tensor inputs first and then `args`
// as integers; it returns output `output`. An operator whose boolean
// attribute changes its arity (LayerNorm's `affine`) has a form per value,
// chosen by `fixed`. The prelude's declaration of each symbol is derived
// from this (`pcgx ops check NAME` prints it).
struct SmtForm {
  std::string symbol;
  int tensors = 1;
  std::vector<SmtArg> args = {};
  int output = 0;
  std::vector<std::pair<std::string, bool>> fixed = {};
};

// Tensors an operator reads that the generator's input pool holds only for
// the operators that need them (generator/src/input_pool.cpp), besides its
// activations and square 2-d weights.
enum class PoolInput : uint8_t {
  kIndices,        // int64 indices (Embedding's rows)
  kConvKernels,    // 4-d convolution weights
  kVectorWeights,  // a 1-d weight (a norm's gamma); once per such input
};

enum class CrossEntropyPart : uint8_t { kNone, kSoftmax, kPick };
enum class DropoutAddPart : uint8_t { kNone, kDropout, kSum };

struct OpDef {
  std::string name;
  OpClass op_class = OpClass::kCompute;
  DataMove data_move = DataMove::kNone;
  LossKind loss = LossKind::kNone;
  // A part of a loss computed before it (ClassLogSumExp, the
  // cross-entropy's normalizer by blocks of classes): under mixed
  // precision it runs in FP32 as the loss does (its output is not rounded
  // to the compute precision), as autocast runs losses.
  bool loss_part = false;
  // Its part in a cross-entropy over logits (its first input, the classes
  // last), by which the cost and memory models price an eager
  // cross-entropy (cross_entropy_kernel.h): kSoftmax takes the softmax over
  // the classes (SoftmaxCrossEntropy, ClassLogSumExp: the eager passes run
  // there), kPick only the labels' logits (CrossEntropyApply: under eager
  // an index into the rows, the logits not read through).
  CrossEntropyPart cross_entropy = CrossEntropyPart::kNone;
  // Its part in a dropout-add kernel (dropout_add_kernel.h), by which the
  // cost model prices a fused one: kDropout a dropout, kSum the sum of two
  // tensors that may read its output (EwAdd).
  DropoutAddPart dropout_add = DropoutAddPart::kNone;
  std::string summary;
  std::vector<AttrSpec> attrs;
  std::vector<std::string> input_names;  // for messages; the last repeats when variadic
  int min_inputs = 0;
  int max_inputs = 0;  // -1: unbounded
  // Exact arity implied by attributes (e.g. Linear with use_bias), if any.
  std::function<int(const Attributes&)> arity;

  TypeInference infer_types;          // all operators: logical output types
  KindInference kinds;                // compute operators evaluated per task
  ParallelInference infer_parallel;   // source, parallel and shard-level operators
  // True when this instance is evaluated at shard level (parallel operators
  // always; Concat/Split along the replica axis).
  std::function<bool(const Attributes&)> shard_level;

  Kernel<float> kernel_f32 = nullptr;
  Kernel<ModP> kernel_mod = nullptr;
  ShardEval<float> shard_f32 = nullptr;
  ShardEval<ModP> shard_mod = nullptr;

  GradKernel grad_f32 = nullptr;       // compute operators (gradients.h)
  // What grad_f32 reads of the forward values; unset: every input and
  // output (always right, and keeps them all until the backward pass).
  std::function<BackwardReads(const Attributes&)> backward_reads;
  ShardGrad shard_grad_f32 = nullptr;  // shard-level operators
  // grad_f32 writes its inputs' gradients (a data-movement rule) instead
  // of adding into them. A rule that adds may be handed a gradient that
  // already holds a sum, and adds its part in place: the runtime sums a
  // weight's gradient over micro-batches so, as Megatron-LM's gradient-
  // accumulation fusion does (tests/pcg/gradient_adds_test.cpp checks
  // every operator's flag against its rule).
  bool grad_writes = false;

  FlopCount flops;      // forward FLOPs of the whole (logical) operator
  // Forward memory traffic in bytes when it is not "read every input, write
  // every output" (e.g. an embedding reads only the rows it gathers).
  FlopCount bytes;
  bool is_weight = false;
  // Applied to weights alone, its output is a stored form of them rather
  // than a computation per step: data movement (Concat, Split, Reshape,
  // Transpose) and scaling by a constant (ScalarMul).
  bool weight_layout = false;
  // Its output is its one input with the dimensions permuted: output
  // dimension d is input dimension permutes(attrs)[d] (Transpose). A
  // weight read through it still holds the weight's values, rearranged:
  // source_layout.h's weight_copy follows it.
  std::function<std::vector<int64_t>(const Attributes&)> permutes;
  // Output element i depends on element i of each input alone, and every
  // input has the output's shape (Relu, EwAdd, Dropout, ...).
  bool elementwise = false;
  // Its backward is one product per operand, each as costly as its
  // forward (a matrix product, a convolution): an input's gradient is
  // complete before the weight's product runs, so a runtime may send it
  // meanwhile (TrainingRecipe::overlap_grad_input).
  bool operand_products = false;
  // The same meaning at any rank, with `dim`/`axis` its only rank-dependent
  // attributes: a rule over such operators holds at rank 2 and 4 when it
  // holds at rank 3 (search/rank_adapt.h adapts the shipped rules).
  bool any_rank = false;
  // Empty: no SMT encoding, so no rule of the operator can be proved.
  std::vector<SmtForm> smt;
  // What the generator's input pool must hold for the operator to apply.
  std::vector<PoolInput> pool_inputs;

  bool is_shard_level(const Attributes& a) const {
    return op_class == OpClass::kParallel || (shard_level && shard_level(a));
  }
  std::string input_name(int i) const;
  const AttrSpec* attr_spec(const std::string& attr) const { return find_spec(attrs, attr); }
  AttrRole attr_role(const std::string& attr) const {
    const AttrSpec* s = attr_spec(attr);
    return s ? s->role : AttrRole::kPlain;
  }
};

// Forward memory traffic of an operator instance: `op.bytes` when given,
// else the bytes of every input and output; with elements stored as
// `precision` stores them (element_bytes: float tensors at 2 bytes under
// mixed precision). An `op.bytes` count is of FP32 data and scales alike.
double memory_bytes(const OpDef& op, const Attributes& attrs, std::span<const TensorType> in,
                    std::span<const TensorType> out, Precision precision = Precision::kFp32);
int64_t tensor_bytes(const TensorType& t);

// What the reverse rule of `op` with `attrs` reads (above): its declaration,
// everything when it has none, nothing for a shard-level instance (a
// parallel operator's dual moves gradients alone).
BackwardReads backward_reads(const OpDef& op, const Attributes& attrs);

}  // namespace pcgx
