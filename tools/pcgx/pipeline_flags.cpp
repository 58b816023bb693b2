// pcgx optimize's pipeline flags (see pipeline_flags.h).
#include "pipeline_flags.h"

#include "cli_common.h"
#include "pcgx/pcg/error.h"
#include "pcgx/search/pipeline_layout.h"

namespace pcgx::cli {

void add_pipeline_options(CLI::App* cmd, PipelineFlags& f) {
  cmd->add_flag("--pipeline", f.pipeline, "pipeline parallelism: stages on disjoint devices, 1F1B over micro-batches, each stage searched with --search");
  cmd->add_option("--stages", f.stages, "pipeline stages (default: the best of 2, 4, 8)")->check(positive());
  cmd->add_option("--pipeline-parallel", f.pipeline_parallel, "pipeline stages, Megatron-LM's way of saying --pipeline --stages P (1: none)")
      ->check(positive());
  cmd->add_option("--virtual-stages", f.virtual_stages,
                  "interleaved 1F1B: model chunks per device (Megatron-LM's virtual pipeline stages; default 1), or auto: the search "
                  "tries 1, 2 and 4 with each stage count and keeps the fastest (not with --search megatron or a plan, which state them, "
                  "nor with --first-stage-layers, --last-stage-layers, the --account-for-* flags or --pipeline-layout)");
  cmd->add_option("--first-stage-layers", f.first_stage_layers,
                  "the first pipeline stage holds this many of the model's layers (and the embeddings), the rest split evenly over the "
                  "stages between (after it, or up to the last stage's --last-stage-layers) (Megatron-LM's --decoder-first-pipeline-num-layers; a DeepSpeed pipeline that counts the embeddings "
                  "as a layer); stated stages; with --virtual-stages, each stage's layers split evenly over its chunks")->check(positive());
  cmd->add_option("--last-stage-layers", f.last_stage_layers,
                  "the last pipeline stage holds this many of the model's layers (and the head and loss), the rest split evenly over the "
                  "stages between (Megatron-LM's --decoder-last-pipeline-num-layers); stated stages; with --virtual-stages, each "
                  "stage's layers split evenly over its chunks")->check(positive());
  cmd->add_flag("--account-for-embedding-in-pipeline-split", f.embedding_as_layer,
                "the embeddings count as a layer when the layers split evenly over the pipeline's chunks: the first chunk holds one "
                "layer fewer (Megatron-LM's flag of that name; DeepSpeed's pipelines split so)");
  cmd->add_flag("--account-for-loss-in-pipeline-split", f.loss_as_layer,
                "the head and loss count as a layer when the layers split evenly over the pipeline's chunks: the last chunk holds one "
                "layer fewer (Megatron-LM's flag of that name)");
  cmd->add_option("--pipeline-layout", f.layout,
                  "what each pipeline chunk holds, in Megatron-LM's --pipeline-model-parallel-layout string: E the embeddings, t a "
                  "layer, L the head and loss, | the end of a chunk, x*n and (...)*n repeat (\"Et*3|(t*4|)*30,t*3L\": 126 layers in "
                  "32 chunks, the first and last one short; commas cosmetic); the chunks in model order, chunk c on stage c mod P; "
                  "more chunks than stages are virtual stages (--virtual-stages implied); stated stages; not with another way of "
                  "stating the chunks' ends");
  cmd->add_option("--micro-batches", f.micro_batches,
                  "micro-batches per iteration, or auto: with --pipeline, through the stages (default auto: the best of 1, 2, 4, 8 x "
                  "stages); without, gradient accumulation (one micro-batch's activations at a time, one synchronization and update; "
                  "auto: the best of 1, 2, 4, 8; default: searched as auto too where memory leaves the first recipe searched no plan; 1: never)");
  cmd->add_option("--micro-batch-size", f.micro_batch_size,
                  "megatron: samples per micro-batch on each data-parallel replica (Megatron-LM's --micro-batch-size); "
                  "the micro-batches follow from the batch")->check(positive());
}

void apply_pipeline_flags(PipelineFlags f, runner::OptimizeRequest& q) {
  if (f.pipeline_parallel > 0) {  // Megatron-LM's vocabulary for --pipeline --stages P
    if (f.pipeline || f.stages) throw Error("--pipeline-parallel: states the stages itself (leave out --pipeline and --stages)");
    if (f.pipeline_parallel > 1) f.pipeline = true, f.stages = f.pipeline_parallel;
  }
  if (!f.pipeline && (f.stages != 0 || !f.virtual_stages.empty())) throw Error(f.stages ? "--stages needs --pipeline" : "--virtual-stages needs --pipeline");
  int64_t virtual_stages = f.virtual_stages.empty() ? 1 : parse_count_or_auto("--virtual-stages", f.virtual_stages);
  if (f.micro_batch_size > 0 && !f.micro_batches.empty()) throw Error("--micro-batch-size: give it or --micro-batches, not both");
  // auto (0): the pipeline search tries S, 2S, 4S and 8S micro-batches for
  // S stages; without --pipeline, 1, 2, 4 and 8 (gradient accumulation).
  const int64_t micro = parse_count_or_auto("--micro-batches", f.micro_batches.empty() ? (f.pipeline ? "auto" : "1") : f.micro_batches);
  if (!f.pipeline && (f.first_stage_layers || f.last_stage_layers))
    throw Error(std::string(f.first_stage_layers ? "--first-stage-layers" : "--last-stage-layers") + " needs pipeline stages (--pipeline-parallel P)");
  if (!f.pipeline && (f.embedding_as_layer || f.loss_as_layer))
    throw Error(std::string(f.embedding_as_layer ? "--account-for-embedding-in-pipeline-split" : "--account-for-loss-in-pipeline-split") +
                " needs pipeline stages (--pipeline-parallel P)");
  std::vector<int64_t> layout;
  if (!f.layout.empty()) {
    if (!f.pipeline || f.stages == 0) throw Error("--pipeline-layout needs the pipeline stages stated (--pipeline-parallel P)");
    layout = search::parse_pipeline_layout(f.layout);
    // As Megatron-LM: the layout's chunks beyond the stages are virtual stages.
    const auto chunks = static_cast<int64_t>(layout.size());
    if (f.virtual_stages.empty() && f.stages > 1 && chunks % f.stages == 0) virtual_stages = chunks / f.stages;
  }
  if (f.pipeline) {
    q.pipeline = search::PipelineOptions{f.stages, micro, virtual_stages};
    q.pipeline->first_stage_layers = f.first_stage_layers, q.pipeline->last_stage_layers = f.last_stage_layers;
    q.pipeline->layout = std::move(layout);
    q.pipeline->embedding_as_layer = f.embedding_as_layer, q.pipeline->loss_as_layer = f.loss_as_layer;
  }
  else if (micro != 1) q.pipeline = search::PipelineOptions{1, micro};  // gradient accumulation
  q.accumulate = f.micro_batches.empty();  // given 1: one batch
  q.micro_batch_size = f.micro_batch_size;
}

}  // namespace pcgx::cli
