// Megatron-LM's published runs priced by pcgx (issue 32): every row of the
// weak-scaling table of Narayanan et al., SC'21, "Efficient Large-Scale
// Language Model Training on GPU Clusters Using Megatron-LM", Table 1 (GPT,
// sequence 2048, vocabulary 51,200, FP16, full activation recomputation),
// with Megatron's own plan as the table states it (`--search megatron`):
// tensor parallelism t, p pipeline stages with the layers split evenly
// (1F1B, or interleaved 1F1B with the virtual stages the paper states),
// data parallelism over the rest, the global batch in micro-batches of the
// stated size, no sharded optimizer, on the `selene` machine file; the
// gradients all-reduced in FP16 (grad_precision compute), beside the
// backward pass where the paper's script runs PyTorch's DDP (the rows
// without stages) and after it where it runs Megatron-LM's own
// (overlap_grad_reduce off; the second table too).
//
// The published iteration time is the paper's FLOP count,
// 96 B s l h^2 (1 + s / (6 h) + V / (16 l h)), over its TFLOP/s per GPU and
// the GPUs. Nothing is fitted: the machine file and the efficiency table as
// they are, one set of constants for every row.
//
// Beside the prediction (the cost model's closed form), the simulator's
// time for the same plan: every micro-batch's steps through the schedule
// (search/simulator.h), its own ratio to the published time.
//
// With --unity, each row is searched again with unity for the same model,
// GPUs, global batch, micro-batches, precision and recomputation (stages
// as stated where p > 1): its predicted time beside Megatron's plan, and
// its search time.
//
// A second table prices Korthikanti et al., "Reducing Activation
// Recomputation in Large Transformer Models" (MLSys 2023), Table 4: the
// same GPT family a year later (Table 3's configurations: t = 8, p stages,
// micro-batches of one sequence, no data parallelism), each model with
// full recomputation and with sequence parallelism plus selective
// recomputation. Their Megatron-LM sends each Linear's input gradient
// while it computes its weight's (--async-tensor-model-parallel-allreduce,
// on by default since early 2022; under sequence parallelism the
// reduce-scatter), so those rows are priced with overlap_grad_input; the
// SC'21 rows ran before it existed (added September 2021) and are priced
// without. The schedule is 1F1B (Table 3 states no virtual stages).
//
// A third table prices Megatron-Core r0.8.0's H100 weak-scaling table
// (Megatron-LM's README, "Performance Benchmarking", images/model_table.png
// as of 2026): GPT models of 1.7B to 462B parameters, sequence 4096,
// vocabulary 131,072, t and p as stated, data parallelism 48, with the
// communication overlaps the README names: the gradient buckets beside
// the backward pass (--overlap-grad-reduce, pcgx's default), the
// distributed optimizer's weights gathered beside the next forward pass
// (--overlap-param-gather: overlap_param_gather, ZeRO 1), and tensor
// parallelism's collectives beside its products (--tp-comm-overlap, which
// overlaps more than pcgx prices: overlap_grad_input, with sequence
// parallelism wherever t > 1). BF16, FlashAttention (Transformer Engine's
// fused attention). What the table does not state is left to pcgx, one
// rule for every row: the fewest micro-batches that fit, recomputation
// only where nothing else fits, 1F1B with micro-batches of one sequence
// where p > 1. The machine: dgx-h100's nodes, as many as the row uses.
// The published time is Megatron-LM's FLOP count (num_floating_point_operations:
// 72 B s l h^2 (1 + s / (6 h) + V / (12 l h))) over its TFLOP/s per GPU.
//
// A fourth table prices runs of another framework and another plan:
// MosaicML's MPT models trained with Composer under PyTorch FSDP
// (FULL_SHARD: ZeRO 3, every weight block sharded, gathered before each
// use), llm-foundry's scripts/train/benchmarking/README.md, "A100 80GB",
// every row on 8 GPUs (one node): MPT-125M to 30B (hidden, heads and
// layers from its scripts/train/yamls/pretrain/mpt-*.yaml; vocabulary
// 50,368; FFN 4h), sequence 1024 to 8192, the micro-batch and gradient
// accumulation steps each row states, full activation recomputation
// where it states "Activation Checkpointing", BF16 (amp_bf16), the
// triton FlashAttention kernel, and PyTorch's cross_entropy under
// autocast (eager: the logits cast to FP32, the probabilities kept).
// pcgx prices the rows with its `mpt` model (GPT's block without biases
// or dropout, learned positions, tied head, as llm-foundry configures
// MPT). The published time is the row's global batch in tokens over its
// measured tokens per second.
//
// Usage: bench_published_runs [--rows N] [--table K] [--unity] [--attention eager|fused|flash] [--cross-entropy eager|fused]
//                             [--dropout-add eager|fused]
//        (the first N rows of each table; default all; --table: the K-th
//        table alone, 1-4; --attention: the kernel the first two tables
//        price, default eager (the others state theirs: flash);
//        --cross-entropy: every table's, default eager; --dropout-add:
//        the first three tables', default eager)
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runner/optimize.h"
#include "pcgx/search/machine_mapping.h"

using namespace pcgx;

namespace {

struct Row {
  const char* params;
  int64_t heads, hidden, layers, t, p, gpus, batch, micro_batch;
  double tflops;      // published, per GPU
  int64_t virtual_stages;  // interleaved schedule (1: none)
  // PyTorch's DDP (--DDP-impl torch: gradient buckets beside the backward
  // pass) rather than Megatron-LM's own (local: after it), as the paper's
  // script runs the row (examples/sc21/run_table_1.sh).
  bool torch_ddp = false;
};

// Narayanan et al. SC'21, Table 1. Virtual stages from the layers per
// virtual stage the paper states (5 for 76.1B and 145.6B, 3 for 310.1B, 1
// for 529.6B; the 1008B row's schedule is not stated: taken as none).
constexpr Row kRows[] = {
    {"1.7B", 24, 2304, 24, 1, 1, 32, 512, 16, 137, 1, true},       {"3.6B", 32, 3072, 30, 2, 1, 64, 512, 16, 138, 1, true},
    {"7.5B", 32, 4096, 36, 4, 1, 128, 512, 16, 142, 1, true},      {"18.4B", 48, 6144, 40, 8, 1, 256, 1024, 8, 135, 1, true},
    {"39.1B", 64, 8192, 48, 8, 2, 512, 1536, 4, 138, 1},     {"76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 2, 140, 3},
    {"145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 2, 148, 2},  {"310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 1, 155, 2},
    {"529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 1, 163, 3}, {"1008B", 160, 25600, 128, 8, 64, 3072, 3072, 1, 163, 1},
};

// Korthikanti et al. (2022), Tables 3 and 4 (as recorded from the paper:
// docs/results.md): iteration seconds with full
// recomputation and with sequence parallelism and selective recomputation.
struct Row2022 {
  const char* params;
  int64_t heads, hidden, layers, p, gpus, batch;
  double full, selective;
};
constexpr Row2022 kRows2022[] = {
    {"22B", 64, 6144, 48, 1, 8, 4, 1.42, 1.10},
    {"175B", 96, 12288, 96, 8, 64, 64, 18.13, 13.75},
    {"530B", 128, 20480, 105, 35, 280, 280, 49.05, 37.83},
    {"1T", 160, 25600, 128, 64, 512, 512, 94.42, 71.49},
};

// Megatron-Core r0.8.0 on H100 (Megatron-LM's README): t, p as stated, d = 48.
struct RowH100 {
  const char* params;
  int64_t heads, hidden, layers, t, p, gpus, batch;
  double tflops;  // published, per GPU
};
// MosaicML's MPT under FSDP on 8 A100-80GB GPUs (llm-foundry's benchmark README;
// of its two 125M rows at 2048 tokens, the first: micro-batches of 40, not 32).
struct RowMpt {
  const char* params;
  int64_t hidden, heads, layers, seq, batch, accumulation;
  bool recompute;          // "Activation Checkpointing"
  double tokens_per_gpu;   // published, per second
};
constexpr RowMpt kRowsMpt[] = {
    {"30B", 7168, 56, 48, 8192, 168, 21, true, 574},     {"30B", 7168, 56, 48, 4096, 168, 21, true, 814},
    {"30B", 7168, 56, 48, 2048, 504, 21, true, 916},     {"30B", 7168, 56, 48, 1024, 1008, 21, true, 946},
    {"13B", 5120, 40, 40, 8192, 120, 3, true, 1795},     {"13B", 5120, 40, 40, 4096, 240, 3, true, 2060},
    {"13B", 5120, 40, 40, 2048, 48, 3, false, 2262},     {"13B", 5120, 40, 40, 1024, 960, 3, true, 2330},
    {"7B", 4096, 32, 32, 8192, 128, 2, true, 3206},      {"7B", 4096, 32, 32, 4096, 256, 2, true, 3684},
    {"7B", 4096, 32, 32, 2048, 96, 2, false, 4641},      {"7B", 4096, 32, 32, 1024, 1024, 2, true, 4357},
    {"3B", 2560, 20, 32, 8192, 144, 6, false, 7695},     {"3B", 2560, 20, 32, 4096, 240, 6, false, 9457},
    {"3B", 2560, 20, 32, 2048, 160, 2, false, 10811},    {"3B", 2560, 20, 32, 1024, 960, 6, false, 11580},
    {"1B", 2048, 16, 24, 8192, 96, 4, false, 13814},     {"1B", 2048, 16, 24, 4096, 224, 4, false, 17807},
    {"1B", 2048, 16, 24, 2048, 448, 4, false, 20513},    {"1B", 2048, 16, 24, 1024, 576, 4, false, 22112},
    {"760M", 1536, 12, 24, 8192, 96, 2, false, 20933},   {"760M", 1536, 12, 24, 4096, 192, 2, false, 27351},
    {"760M", 1536, 12, 24, 2048, 384, 2, false, 32434},  {"760M", 1536, 12, 24, 1024, 768, 2, false, 29765},
    {"350M", 1024, 16, 24, 8192, 128, 2, false, 36569},  {"350M", 1024, 16, 24, 4096, 256, 2, false, 49555},
    {"350M", 1024, 16, 24, 2048, 512, 2, false, 58782},  {"350M", 1024, 16, 24, 1024, 1024, 2, false, 64813},
    {"125M", 768, 12, 12, 8192, 128, 2, false, 90392},   {"125M", 768, 12, 12, 4096, 256, 2, false, 118396},
    {"125M", 768, 12, 12, 2048, 640, 2, false, 142830},  {"125M", 768, 12, 12, 1024, 1024, 2, false, 156468},
};

constexpr RowH100 kRowsH100[] = {
    {"1.7B", 16, 2048, 24, 1, 1, 48, 192, 408.8},      {"7.1B", 32, 4096, 30, 2, 1, 96, 192, 465.9},
    {"16B", 48, 6144, 32, 4, 1, 192, 192, 489.1},      {"32B", 56, 7168, 48, 8, 1, 384, 192, 459.6},
    {"70B", 64, 8192, 84, 8, 2, 768, 384, 419.7},      {"119B", 80, 10240, 92, 8, 4, 1536, 768, 420.5},
    {"177B", 96, 12288, 96, 8, 6, 2304, 1152, 432.8},  {"314B", 128, 16384, 96, 8, 8, 3072, 1536, 474.4},
    {"462B", 144, 18432, 112, 8, 16, 6144, 3072, 459.9},
};

// Megatron-LM's plan for a GPT of the family (sequence 2048, vocabulary
// 51,200, FFN 4h) on `gpus` selene devices, in FP16 without a sharded
// optimizer: the caller adds the recomputation and the schedule.
// Megatron-LM's own cross-entropy unless `--cross-entropy` says otherwise:
// vocab_parallel_cross_entropy, eager (--cross-entropy-loss-fusion is off
// by default, and none of the runs names it).
CrossEntropyKernel cross_entropy = CrossEntropyKernel::kEager;
// Each dropout and its residual sum two kernels unless `--dropout-add
// fused` says one. Megatron-LM ran them as one (its bias-dropout-add
// fusion is on unless --no-bias-dropout-fusion, which none of the runs
// names), and its masked softmax fused (`--attention fused`); the tables
// default to pcgx's own default kernels, eager, so that their figures
// compare with every earlier run of this bench, and docs/results.md gives
// both.
DropoutAddKernel dropout_add = DropoutAddKernel::kEager;
runner::OptimizeRequest megatron_gpt(int64_t layers, int64_t hidden, int64_t heads, int64_t batch, int64_t gpus, int64_t t, int64_t micro_batch,
                                     AttentionKernel attention) {
  runner::OptimizeRequest q;
  q.model = build_model("gpt", {{"layers", layers}, {"hidden", hidden}, {"heads", heads}, {"ffn", 4 * hidden}, {"seq", 2048},
                                {"vocab", 51200}, {"batch", batch}});
  q.machine = search::find_machine("selene").with_devices(gpus);
  q.search.algorithm = search::Algorithm::kMegatron, q.search.tensor_degree = t;
  q.micro_batch_size = micro_batch;
  q.precision = Precision::kFp16, q.zero = ZeroStage::k0, q.attention = attention, q.cross_entropy = cross_entropy, q.dropout_add = dropout_add;
  // Megatron-LM's own DDP (--DDP-impl local, its default until Megatron-Core)
  // all-reduced the gradient buffer after the last micro-batch's backward
  // (training.py's train_step, 2021 and 2022 alike); with --fp16 and
  // without --accumulate-allreduce-grads-in-fp32 (neither paper's scripts
  // give it) its buffer, like PyTorch DDP's over the FP16 model, holds FP16
  // gradients.
  q.overlap_grad_reduce = false, q.grad_precision = GradPrecision::kCompute;
  return q;
}

// The plan's predicted and simulated seconds per iteration, and how long
// optimize took; an Error where it has no feasible plan.
struct Priced {
  double predicted = 0, simulated = 0, seconds = 0;
};
Priced price(const runner::OptimizeRequest& q) {
  const auto t0 = std::chrono::steady_clock::now();
  const runner::OptimizeReport rep = runner::optimize(q);
  const search::Estimate& e = rep.result.search.strategy.estimate;
  if (!e.feasible) throw Error(e.infeasible);
  return {e.time, rep.simulated, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

// argv's whole number, or -1 where it is not one (trailing characters too).
long whole_number(const char* s) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  return end != s && *end == '\0' ? v : -1;
}

double flops(const Row& r) {
  const double B = static_cast<double>(r.batch), s = 2048, l = static_cast<double>(r.layers), h = static_cast<double>(r.hidden), V = 51200;
  return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

}  // namespace

int main(int argc, char** argv) {
  size_t rows = SIZE_MAX;  // (--rows: the first N of each table)
  bool unity = false;
  int table = 0;  // (--table: that one alone; 0: all four)
  AttentionKernel attention = AttentionKernel::kEager;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rows" && i + 1 < argc && whole_number(argv[i + 1]) >= 1) rows = static_cast<size_t>(whole_number(argv[++i]));
    else if (a == "--unity") unity = true;
    else if (a == "--table" && i + 1 < argc && whole_number(argv[i + 1]) >= 1 && whole_number(argv[i + 1]) <= 4) table = static_cast<int>(whole_number(argv[++i]));
    else if (a == "--attention" && i + 1 < argc && attention_named(argv[i + 1])) attention = *attention_named(argv[++i]);
    else if (a == "--cross-entropy" && i + 1 < argc && cross_entropy_named(argv[i + 1])) cross_entropy = *cross_entropy_named(argv[++i]);
    else if (a == "--dropout-add" && i + 1 < argc && dropout_add_named(argv[i + 1])) dropout_add = *dropout_add_named(argv[++i]);
    else {
      if (a == "--attention") std::fprintf(stderr, "error: --attention: unknown attention kernel '%s' (eager, flash, fused)\n", i + 1 < argc ? argv[i + 1] : "");
      if (a == "--cross-entropy") std::fprintf(stderr, "error: --cross-entropy: unknown cross-entropy kernel '%s' (fused, eager)\n", i + 1 < argc ? argv[i + 1] : "");
      if (a == "--dropout-add") std::fprintf(stderr, "error: --dropout-add: unknown dropout-add kernel '%s' (eager, fused)\n", i + 1 < argc ? argv[i + 1] : "");
      if (a == "--rows") std::fprintf(stderr, "error: --rows: '%s' is not a positive whole number\n", i + 1 < argc ? argv[i + 1] : "");
      if (a == "--table") std::fprintf(stderr, "error: --table: '%s' is not a table (1-4)\n", i + 1 < argc ? argv[i + 1] : "");
      std::printf("usage: bench_published_runs [--rows N] [--table 1-4] [--unity] [--attention eager|fused|flash] [--cross-entropy eager|fused] [--dropout-add eager|fused]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  auto wanted = [&](int k) { return table == 0 || table == k; };
  const Machine selene = search::find_machine("selene");
  if (wanted(1)) {
    std::printf("Megatron-LM's plans (Narayanan et al. SC'21, Table 1) priced on %s, %s attention, %s cross-entropy, %s dropout-add; seconds per iteration\n",
                selene.name.c_str(), name(attention), name(cross_entropy), name(dropout_add));
    std::printf("%-7s %5s %3s %3s %5s %4s %10s %10s %10s %6s %6s %16s %8s  %s\n", "params", "GPUs", "t", "p", "batch", "M", "predicted",
                "simulated", "published", "ratio", "sim", "TFLOP/s pcgx/pub", "search", "note");
    double sum_abs = 0, sim_abs = 0;
    int priced = 0;
    for (size_t i = 0; i < std::min(rows, std::size(kRows)); ++i) {
      const Row& r = kRows[i];
      const int64_t d = r.gpus / (r.t * r.p), per_replica = r.batch / d, micro = per_replica / r.micro_batch;
      const double published = flops(r) / (r.tflops * 1e12 * static_cast<double>(r.gpus));
      runner::OptimizeRequest q = megatron_gpt(r.layers, r.hidden, r.heads, r.batch, r.gpus, r.t, r.micro_batch, attention);
      q.overlap_grad_reduce = r.torch_ddp;
      if (r.p > 1) q.pipeline = search::PipelineOptions{r.p, 0, r.virtual_stages};
      q.recompute = Recompute::kFull;
      std::string note = r.virtual_stages > 1 ? "interleaved, v = " + std::to_string(r.virtual_stages) : "";
      try {
        const Priced x = price(q);
        const double ratio = x.predicted / published, sim_ratio = x.simulated / published;
        sum_abs += std::fabs(ratio - 1), sim_abs += std::fabs(sim_ratio - 1), ++priced;
        std::printf("%-7s %5lld %3lld %3lld %5lld %4lld %10.3f %10.3f %10.3f %6.3f %6.3f %8.1f / %5.1f %7.1fs  %s\n", r.params,
                    static_cast<long long>(r.gpus), static_cast<long long>(r.t), static_cast<long long>(r.p), static_cast<long long>(r.batch),
                    static_cast<long long>(micro), x.predicted, x.simulated, published, ratio, sim_ratio,
                    flops(r) / (x.predicted * static_cast<double>(r.gpus)) / 1e12, r.tflops, x.seconds, note.c_str());
      } catch (const Error& err) {
        std::printf("%-7s %5lld %3lld %3lld %5lld %4lld %10s %10s %10.3f %6s %6s %16s %8s  not priced: %s\n", r.params,
                    static_cast<long long>(r.gpus), static_cast<long long>(r.t), static_cast<long long>(r.p), static_cast<long long>(r.batch),
                    static_cast<long long>(micro), "-", "-", published, "-", "-", "-", "-", err.what());
      }
      if (unity) {
        runner::OptimizeRequest u = q;
        u.search.algorithm = search::Algorithm::kUnity, u.search.tensor_degree = 0, u.micro_batch_size = 0;
        if (r.p > 1) u.pipeline = search::PipelineOptions{r.p, micro, r.virtual_stages};
        else if (micro > 1) u.pipeline = search::PipelineOptions{1, micro};
        u.accumulate = false;
        const auto t1 = std::chrono::steady_clock::now();
        try {
          const Priced x = price(u);
          std::printf("  unity: %.3f s predicted (%.3f of the published time), found in %.1f s\n", x.predicted, x.predicted / published, x.seconds);
        } catch (const Error& err) {
          const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
          std::printf("  unity: no plan after %.1f s: %s\n", seconds, err.what());
        }
      }
      std::fflush(stdout);
    }
    if (priced > 0)
      std::printf("\nrows priced: %d, mean |predicted/published - 1| = %.1f%% (goal: <= 8%%, every row within 15%%); simulated: %.1f%%\n",
                  priced, 100 * sum_abs / priced, 100 * sim_abs / priced);

  }
  if (wanted(2)) {
    std::printf("\nKorthikanti et al. 2022, Table 4, priced on %s, %s attention, %s cross-entropy, %s dropout-add, input gradients sent beside the weight products; "
                "seconds per iteration\n",
                selene.name.c_str(), name(attention), name(cross_entropy), name(dropout_add));
    std::printf("%-6s %5s %3s %5s  %-28s %10s %10s %10s %6s %6s %8s\n", "params", "GPUs", "p", "batch", "recipe", "predicted", "simulated",
                "published", "ratio", "sim", "search");
    double sum2 = 0, sim2 = 0;
    int priced2 = 0;
    for (size_t i = 0; i < std::min(rows, std::size(kRows2022)); ++i) {
      const Row2022& r = kRows2022[i];
      for (const bool selective : {false, true}) {
        runner::OptimizeRequest q = megatron_gpt(r.layers, r.hidden, r.heads, r.batch, r.gpus, 8, 1, attention);
        q.search.sequence_parallel = selective;
        if (r.p > 1) q.pipeline = search::PipelineOptions{r.p, 0, 1};
        q.recompute = selective ? Recompute::kSelective : Recompute::kFull, q.overlap_grad_input = true;
        const char* recipe = selective ? "sequence parallel, selective" : "full recomputation";
        const double published = selective ? r.selective : r.full;
        try {
          const Priced x = price(q);
          const double ratio = x.predicted / published, sim_ratio = x.simulated / published;
          sum2 += std::fabs(ratio - 1), sim2 += std::fabs(sim_ratio - 1), ++priced2;
          std::printf("%-6s %5lld %3lld %5lld  %-28s %10.3f %10.3f %10.3f %6.3f %6.3f %7.1fs\n", r.params, static_cast<long long>(r.gpus),
                      static_cast<long long>(r.p), static_cast<long long>(r.batch), recipe, x.predicted, x.simulated, published, ratio, sim_ratio,
                      x.seconds);
        } catch (const Error& err) {
          std::printf("%-6s %5lld %3lld %5lld  %-28s %10s %10s %10.3f %6s %6s %8s  not priced: %s\n", r.params, static_cast<long long>(r.gpus),
                      static_cast<long long>(r.p), static_cast<long long>(r.batch), recipe, "-", "-", published, "-", "-", "-", err.what());
        }
        std::fflush(stdout);
      }
    }
    if (priced2 > 0)
      std::printf("\nrows priced: %d, mean |predicted/published - 1| = %.1f%%; simulated: %.1f%%\n", priced2, 100 * sum2 / priced2, 100 * sim2 / priced2);

  }
  if (wanted(3)) {
    std::printf("\nMegatron-Core r0.8.0 on H100 (Megatron-LM's README), priced on dgx-h100 nodes: bf16, flash attention, sequence parallel, "
                "ZeRO 1 with its weights gathered beside the forward pass, input gradients sent beside the "
                "weight products, the gathered inputs gathered again in backward (recompute gathers where t > 1), %s cross-entropy, %s dropout-add; seconds per iteration\n", name(cross_entropy), name(dropout_add));
    std::printf("%-6s %5s %3s %3s %5s %-22s %10s %10s %10s %6s %6s %16s %8s\n", "params", "GPUs", "t", "p", "batch", "pcgx's choices", "predicted",
                "simulated", "published", "ratio", "sim", "TFLOP/s pcgx/pub", "search");
    double sum3 = 0, sim3 = 0;
    int priced3 = 0;
    const Machine h100 = search::find_machine("dgx-h100");
    for (size_t i = 0; i < std::min(rows, std::size(kRowsH100)); ++i) {
      const RowH100& r = kRowsH100[i];
      const double s = 4096, V = 131072, B = static_cast<double>(r.batch), l = static_cast<double>(r.layers), h = static_cast<double>(r.hidden);
      const double model_flops = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
      const double published = model_flops / (r.tflops * 1e12 * static_cast<double>(r.gpus));
      runner::OptimizeRequest q;
      q.model = build_model("gpt", {{"layers", r.layers}, {"hidden", r.hidden}, {"heads", r.heads}, {"ffn", 4 * r.hidden}, {"seq", 4096},
                                    {"vocab", 131072}, {"batch", r.batch}});
      Machine m = h100;
      m.nodes = std::max(m.nodes, r.gpus / m.devices_per_node);
      q.machine = m.with_devices(r.gpus);
      q.search.algorithm = search::Algorithm::kMegatron, q.search.tensor_degree = r.t, q.search.sequence_parallel = r.t > 1;
      q.precision = Precision::kBf16, q.zero = ZeroStage::k1, q.attention = AttentionKernel::kFlash, q.cross_entropy = cross_entropy;
      q.dropout_add = dropout_add;
      q.overlap_grad_input = true, q.overlap_param_gather = true;
      // Recomputation left to optimize: Megatron-LM's plan with sequence
      // parallelism starts from gathers (each Linear's sequence-split input
      // kept and gathered again in backward), at t = 1 from none.
      if (r.p > 1) q.pipeline = search::PipelineOptions{r.p, 0, 1}, q.micro_batch_size = 1;
      try {
        const auto t0 = std::chrono::steady_clock::now();
        const runner::OptimizeReport rep = runner::optimize(q);
        const search::Estimate& e = rep.result.search.strategy.estimate;
        if (!e.feasible) throw Error(e.infeasible);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double ratio = e.time / published, sim_ratio = rep.simulated / published;
        sum3 += std::fabs(ratio - 1), sim3 += std::fabs(sim_ratio - 1), ++priced3;
        const int64_t mb = std::max<int64_t>(1, rep.file.micro_batches);
        const std::string chose = std::to_string(mb) + " micro-batch" + (mb == 1 ? "" : "es") + ", " + name(rep.file.recipe.recompute);
        std::printf("%-6s %5lld %3lld %3lld %5lld %-22s %10.3f %10.3f %10.3f %6.3f %6.3f %8.1f / %5.1f %7.1fs\n", r.params,
                    static_cast<long long>(r.gpus), static_cast<long long>(r.t), static_cast<long long>(r.p), static_cast<long long>(r.batch),
                    chose.c_str(), e.time, rep.simulated, published, ratio, sim_ratio, model_flops / (e.time * static_cast<double>(r.gpus)) / 1e12,
                    r.tflops, seconds);
      } catch (const Error& err) {
        std::printf("%-6s %5lld %3lld %3lld %5lld %-22s %10s %10s %10.3f %6s %6s %16s %8s  not priced: %s\n", r.params, static_cast<long long>(r.gpus),
                    static_cast<long long>(r.t), static_cast<long long>(r.p), static_cast<long long>(r.batch), "-", "-", "-", published, "-", "-", "-",
                    "-", err.what());
      }
      std::fflush(stdout);
    }
    if (priced3 > 0)
      std::printf("\nrows priced: %d, mean |predicted/published - 1| = %.1f%%; simulated: %.1f%%\n", priced3, 100 * sum3 / priced3, 100 * sim3 / priced3);

  }
  if (wanted(4)) {
    std::printf("\nMosaicML's MPT under PyTorch FSDP (llm-foundry's benchmark README, A100 80GB), priced on 8 dgx-a100 devices: bf16, ZeRO 3 "
                "with every block sharded, flash attention, %s cross-entropy; seconds per step\n", name(cross_entropy));
    std::printf("%-5s %5s %5s %4s %-5s %10s %10s %10s %6s %6s %13s %8s\n", "model", "seq", "batch", "acc", "ckpt", "predicted", "simulated",
                "published", "ratio", "sim", "tokens/s/GPU", "search");
    double sum4 = 0, sim4 = 0;
    int priced4 = 0;
    for (size_t i = 0; i < std::min(rows, std::size(kRowsMpt)); ++i) {
      const RowMpt& r = kRowsMpt[i];
      const double published = static_cast<double>(r.batch * r.seq) / (r.tokens_per_gpu * 8);
      runner::OptimizeRequest q;
      q.model = build_model("mpt", {{"layers", r.layers}, {"hidden", r.hidden}, {"heads", r.heads}, {"ffn", 4 * r.hidden}, {"seq", r.seq},
                                    {"vocab", 50368}, {"batch", r.batch}});
      q.machine = search::find_machine("dgx-a100").with_devices(8);
      q.search.algorithm = search::Algorithm::kDataParallel;
      q.precision = Precision::kBf16, q.zero = ZeroStage::k3, q.zero_persistence_threshold = 0;
      q.recompute = r.recompute ? Recompute::kFull : Recompute::kNone;
      q.attention = AttentionKernel::kFlash, q.cross_entropy = cross_entropy;
      if (r.accumulation > 1) q.pipeline = search::PipelineOptions{1, r.accumulation};
      try {
        const Priced x = price(q);
        const double ratio = x.predicted / published, sim_ratio = x.simulated / published;
        sum4 += std::fabs(ratio - 1), sim4 += std::fabs(sim_ratio - 1), ++priced4;
        std::printf("%-5s %5lld %5lld %4lld %-5s %10.3f %10.3f %10.3f %6.3f %6.3f %5.0f / %5.0f %7.1fs\n", r.params, static_cast<long long>(r.seq),
                    static_cast<long long>(r.batch), static_cast<long long>(r.accumulation), r.recompute ? "full" : "none", x.predicted,
                    x.simulated, published, ratio, sim_ratio, static_cast<double>(r.batch * r.seq) / (x.predicted * 8), r.tokens_per_gpu, x.seconds);
      } catch (const Error& err) {
        std::printf("%-5s %5lld %5lld %4lld %-5s %10s %10s %10.3f %6s %6s %13s %8s  not priced: %s\n", r.params, static_cast<long long>(r.seq),
                    static_cast<long long>(r.batch), static_cast<long long>(r.accumulation), r.recompute ? "full" : "none", "-", "-", published, "-",
                    "-", "-", "-", err.what());
      }
      std::fflush(stdout);
    }
    if (priced4 > 0)
      std::printf("\nrows priced: %d, mean |predicted/published - 1| = %.1f%%; simulated: %.1f%%\n", priced4, 100 * sum4 / priced4, 100 * sim4 / priced4);
  }
  return 0;
}
