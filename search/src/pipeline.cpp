// Pipeline parallelism: stages, micro-batches, 1F1B timing (see pipeline.h); where the chunks end: pipeline_cuts.cpp.
#include "pcgx/search/pipeline.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include <tbb/parallel_for.h>

#include "graph_splitting.h"
#include "joined_pipeline.h"
#include "pipeline_cuts.h"
#include "stated_chunk.h"
#include "pcgx/pcg/attention_kernels.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/pipeline_chunks.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/stable_hash.h"
#include "pcgx/pcg/step_communication.h"
#include "pcgx/search/applied_rule.h"
#include "pcgx/search/gradient_sync.h"
#include "pcgx/search/graph_hash.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/user_plan.h"

namespace pcgx::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One stage of one candidate plan.
struct StagePlan {
  PieceGraph piece;       // the stage as a graph of its own (canonical names)
  Graph graph;            // its searched and pipelined PCG
  Strategy mapped;        // graph on the stage's devices (views from 0)
  std::vector<DeviceMemory> memory;  // per device of the stage, activations of the micro-batches in flight only
  PipelineStage info;
  std::vector<LayoutChoice> relaid;  // a written plan's conversions the layout search rewrote
};

struct Plan {
  int64_t stages = 0, micro = 0, virtual_stages = 1;
  std::vector<std::vector<DeviceMemory>> memory;  // per stage, per device: its chunks' sum
  std::vector<double> stage_time;           // per stage: one micro-batch through its chunks
  double time = kInf, slowest = 0, update = 0;
  double gather_wait = 0;  // under overlap_param_gather: what the stages' first forwards wait for their weights, in the step
  double steps = 0;  // (ScheduledTime::steps)
  std::vector<StagePlan> stage;
  std::vector<std::string> applied;
};

// A candidate's chunks joined into one PCG (joined_pipeline.h).
JoinedPlan join_stages(const std::string& name, const Plan& plan) {
  std::vector<JoinedChunk> chunks;
  for (const StagePlan& sp : plan.stage) chunks.push_back({&sp.graph, &sp.piece, &sp.mapped.views, sp.info.first_device});
  return join_chunks(name, chunks);
}

std::vector<int64_t> stage_counts(int64_t devices, size_t cuts, const PipelineOptions& o) {
  const int64_t v = std::max<int64_t>(o.virtual_stages, 1), joint = static_cast<int64_t>(o.interlaced.size());
  if (o.stages > 0) {
    if (o.stages < 1) throw FieldError("PipelineOptions.stages", "must be positive");
    if (devices % o.stages != 0)
      throw FieldError("PipelineOptions.stages", std::to_string(o.stages) + " stages do not divide the " + std::to_string(devices) + " devices");
    if (static_cast<size_t>(o.stages * v + joint) > cuts + 1)
      throw FieldError(v > 1 ? "PipelineOptions.virtual_stages" : "PipelineOptions.stages",
                       "the model has " + std::to_string(cuts) + " places where exactly one tensor crosses, so at most " +
                           std::to_string(cuts + 1) + (v > 1 || joint > 0 ? " chunks (stages x virtual stages + interlaced)" : " stages"));
    return {o.stages};
  }
  std::vector<int64_t> out;
  for (int64_t s : {2, 4, 8})
    if (devices % s == 0 && static_cast<size_t>(s * v) <= cuts + 1) out.push_back(s);
  return out;
}

// The virtual stages tried with S stages: the stated count, or with
// virtual_stages 0 each of 1, 2 and 4 whose S v chunks the model's cuts
// allow (more than 1 only where the stated micro-batches are a multiple
// of S).
std::vector<int64_t> virtual_counts(int64_t S, size_t cuts, const PipelineOptions& o) {
  if (o.virtual_stages > 0) return {o.virtual_stages};
  std::vector<int64_t> out;
  for (const int64_t v : {1, 2, 4})
    // (Interleaving runs a multiple of the stages' micro-batches.)
    if (static_cast<size_t>(S * v) <= cuts + 1 && (v == 1 || o.micro_batches == 0 || o.micro_batches % S == 0)) out.push_back(v);
  return out;
}

}  // namespace

void check_interlaced(const PipelineOptions& po, Algorithm algorithm) {
  if (po.interlaced.empty()) return;
  if (algorithm != Algorithm::kPlan && algorithm != Algorithm::kUnity)
    throw FieldError("PipelineOptions.interlaced", "a plan with interlaced chunks runs as it states them, or its unstated operators searched by unity, not with " +
                                                       std::string(name(algorithm)));
  if (po.stages < 2) throw FieldError("PipelineOptions.interlaced", "interlaced chunks need pipeline stages (more than 1)");
  const int64_t v = po.virtual_stages;
  const PipelineShape shape{po.stages, std::max<int64_t>(po.micro_batches, 1), v, po.schedule.value_or(PipelineShape::default_for(v)),
                            po.programs, po.interlaced};
  check(shape);
  check_paired_backwards(shape, stage_programs(shape));  // what the runtime runs, refused before it is priced
  if (po.boundaries.empty())
    for (const int64_t c : po.interlaced)
      if (c != 0 && c != shape.chunks() - 1)
        throw FieldError("PipelineOptions.interlaced", "chunk " + std::to_string(c) + " of " + std::to_string(shape.chunks()) +
                                                           " is neither the first nor the last: state where the chunks end (boundaries)");
}

void check_boundaries(const Graph& model, const PipelineOptions& po) {
  // What says where the chunks end, stated once: conflicts first, then each.
  const bool ends = po.first_stage_layers > 0 || po.last_stage_layers > 0, counted = po.embedding_as_layer || po.loss_as_layer;
  const int ways = (ends ? 1 : 0) + (counted ? 1 : 0) + (po.layout.empty() ? 0 : 1) + (po.boundaries.empty() ? 0 : 1);
  const std::string field = !po.layout.empty() ? "PipelineOptions.layout"
                            : counted          ? (po.embedding_as_layer ? "PipelineOptions.embedding_as_layer" : "PipelineOptions.loss_as_layer")
                            : ends             ? (po.first_stage_layers > 0 ? "PipelineOptions.first_stage_layers" : "PipelineOptions.last_stage_layers")
                                               : "PipelineOptions.boundaries";
  if (po.virtual_stages < 1 && (ways > 0 || !po.interlaced.empty()))
    throw FieldError("PipelineOptions.virtual_stages", "searched virtual stages, and chunks stated where they end: state the virtual stages");
  if (po.first_stage_layers < 0 || po.last_stage_layers < 0)
    throw FieldError(po.first_stage_layers < 0 ? "PipelineOptions.first_stage_layers" : "PipelineOptions.last_stage_layers", "must be positive");
  if (ways > 1 || (ways == 1 && po.boundaries.empty() && !po.interlaced.empty()))
    throw FieldError(field, "stated where the chunks end more than one way (first or last stage layers, the ends counted as layers, a layout, "
                            "boundaries or interlaced chunks): say it one way");
  if (ways == 0) return;
  if (po.boundaries.empty() && po.stages < 2) throw FieldError(field, "needs pipeline stages stated (more than 1)");
  const std::vector<NodeId> order = compute_order(model);
  if (counted) even_layer_cuts(model, order, po.stages, po.virtual_stages, LayerSplit{0, 0, po.embedding_as_layer, po.loss_as_layer});
  if (ends) even_layer_cuts(model, order, po.stages, po.virtual_stages, LayerSplit{po.first_stage_layers, po.last_stage_layers});
  if (!po.layout.empty()) {
    const auto chunks = static_cast<size_t>(po.stages * po.virtual_stages);
    if (po.layout.size() != chunks)
      throw FieldError(field, "the layout has " + std::to_string(po.layout.size()) + " chunks, and " + std::to_string(po.stages) + " stages x " +
                                  std::to_string(po.virtual_stages) + " virtual stages are " + std::to_string(chunks));
    layout_cuts(model, order, po.layout);
  }
  if (po.boundaries.empty()) return;
  if (po.stages == 0) throw FieldError("PipelineOptions.boundaries", "stated where the chunks end, the stages are stated too");
  stated_cuts(model, order, po.boundaries, po.stages * po.virtual_stages + static_cast<int64_t>(po.interlaced.size()));
}

namespace {

std::vector<int64_t> micro_counts(int64_t stages, const PipelineOptions& o) {
  if (o.micro_batches > 0) return {o.micro_batches};
  std::vector<int64_t> out;
  for (const int64_t m : {stages, 2 * stages, 4 * stages, 8 * stages})
    if (o.fewer_than <= 0 || m < o.fewer_than) out.push_back(m);
  return out;
}

PipelineResult search_pipeline(const Graph& model, const RuleLibrary& rules, const CostModel& cost, const SearchOptions& options,
                               const PipelineOptions& po) {
  const auto t0 = std::chrono::steady_clock::now();
  if (po.micro_batches < 0) throw FieldError("PipelineOptions.micro_batches", "must be positive");
  const int64_t v_stated = po.virtual_stages;  // 0: searched (virtual_counts)
  if (v_stated < 0) throw FieldError("PipelineOptions.virtual_stages", "must be positive");
  if (v_stated != 1 && po.stages == 1) throw FieldError("PipelineOptions.virtual_stages", "interleaving needs pipeline stages (more than 1)");
  if (v_stated == 0) {
    if (options.algorithm == Algorithm::kMegatron || options.algorithm == Algorithm::kPlan)
      throw FieldError("PipelineOptions.virtual_stages", std::string(options.algorithm == Algorithm::kMegatron ? "Megatron-LM's plan" : "a written plan") +
                                                             " states its virtual stages; they are searched with unity, data-parallel, expert or sequential");
    if (po.schedule) throw FieldError("PipelineOptions.virtual_stages", "searched virtual stages, and a schedule stated: state the virtual stages");
  }
  if (v_stated > 1 && po.stages > 1 && po.micro_batches > 0 && po.micro_batches % po.stages != 0)
    throw FieldError("PipelineOptions.micro_batches", "the interleaved schedule needs a multiple of the " + std::to_string(po.stages) +
                                                          " stages, not " + std::to_string(po.micro_batches));
  if (options.algorithm == Algorithm::kMegatron && po.stages == 0)
    throw FieldError("PipelineOptions.stages", "Megatron-LM's plan states its pipeline stages");
  check_boundaries(model, po);
  const int64_t joint = static_cast<int64_t>(po.interlaced.size());
  // (An interlaced chunk runs on every stage's devices, each stage's chain
  // of gathers reaching into it: not modelled.)
  const bool beside = gathers_beside_forward(cost);
  if (beside && joint > 0)
    throw FieldError("TrainingRecipe.overlap_param_gather", "ZeRO's weights gathered beside the forward pass are not modelled with interlaced chunks");
  check_interlaced(po, options.algorithm);
  if (options.plan && (po.stages == 0 || po.micro_batches == 0))
    throw FieldError(po.stages == 0 ? "PipelineOptions.stages" : "PipelineOptions.micro_batches", "a written plan is pipelined with its stages and micro-batches stated (in the plan, or both flags)");
  // Stated plans split the layers evenly; a written plan is applied stage
  // by stage, each on its own operators (two identical stages may differ
  // by the layers a rule selects, so none shares another's lowering).
  const bool stated = options.algorithm == Algorithm::kMegatron || options.algorithm == Algorithm::kPlan;
  // A written plan stating devices (numbered within each stage) is priced
  // by simulation, chunk by chunk and then whole.
  const bool placed = options.plan && assigns_devices(*options.plan);
  const int64_t devices = cost.devices();
  const std::vector<NodeId> order = compute_order(model);
  const size_t cuts = valid_cuts(model, order).size();
  const auto counts = stage_counts(devices, cuts, po);
  const bool transformer = expert_family(model) == "transformer";  // (its chunks: SearchOptions::transformer_chunk)
  try {  // an operator that cannot take micro-batches rules out every plan
    pipelined(model, po.micro_batches > 0 ? po.micro_batches : 2, true);
  } catch (const Error& e) {
    throw Error(std::string("pipeline: ") + e.what());
  }
  if (counts.empty())
    throw Error("pipeline: no stage count of 2, 4 or 8 divides the " + std::to_string(devices) + " devices and fits the model's " +
                std::to_string(cuts) + " single-tensor cuts");
  // What each operator weighs in the balanced cuts: its task's time, an
  // attention kernel's at its first operator (attention_kernels.h).
  std::vector<double> weight(model.size(), 0.0);
  const FusedKernels kernels = cost.fused_kernels(model, source_layouts(model));
  for (NodeId id : order)
    if (model.node(id).op->op_class == OpClass::kCompute) weight[static_cast<size_t>(id)] = cost.operator_time(model, kernels, id).total();

  PipelineResult result;
  std::mutex progress_mutex;  // chunks searched side by side report through one callback
  Plan best;
  std::optional<JoinedPlan> best_whole;  // best's stages joined, where a boundary was checked
  // Why each shape tried was refused, in the order tried (the error names
  // them all, so that a user sees what each stage count ran into).
  std::vector<std::string> refused;
  std::vector<std::pair<int64_t, int64_t>> shapes;  // (stages, virtual stages) tried
  for (const int64_t S : counts)
    for (const int64_t v : virtual_counts(S, cuts, po)) shapes.emplace_back(S, v);
  for (const auto& stages_and_virtual : shapes) {
    const int64_t S = stages_and_virtual.first, v = stages_and_virtual.second;
    const int64_t d = devices / S;
    const std::vector<int64_t> micro = micro_counts(S, po);
    const int64_t most = *std::max_element(micro.begin(), micro.end());
    const CostModel sub = cost.with_devices(d);
    const MachineMapper mapper(sub);
    const MachineMapper every(cost, d);  // an interlaced chunk's: on every device, each operator on several stages
    // A chunk is searched pipelined in the plan's micro-batches, so that
    // the plan found splits a micro-batch's samples, with 1/v of the
    // devices' memory (a stage's v chunks share its devices), holding as
    // many micro-batches at once as the first stage's chunks do: a plan
    // that fits there fits on every stage, so identical chunks share one
    // search. Where no plan fits, the chunk is searched again holding what
    // its own stage holds (the last chunk's head and loss may fit only
    // there). The exact memory of each stage is checked after.
    std::map<int64_t, CostModel> holding;  // by micro-batches held per chunk
    std::map<int64_t, MachineMapper> searchers;
    auto searcher = [&](int64_t k) -> const MachineMapper& {
      auto it = searchers.find(k);
      if (it == searchers.end()) {
        const CostModel& c =
            holding.emplace(k, sub.with_micro_batches_in_flight(k).with_memory_share(1.0 / static_cast<double>(v))).first->second;
        it = searchers.try_emplace(k, c).first;
      }
      return it->second;
    };
    // The stage boundaries: Megatron-LM's even layers for stated plans;
    // for searched ones the cuts balancing single-device time, and the
    // even layers too where the model has them (a balanced cut may fall
    // inside a layer, and a stage's parallel time need not follow its
    // single-device time).
    std::vector<std::vector<std::pair<size_t, TensorRef>>> cut_options;
    if (!po.layout.empty()) {
      cut_options.push_back(layout_cuts(model, order, po.layout));
    } else if (!po.boundaries.empty()) {
      cut_options.push_back(stated_cuts(model, order, po.boundaries, S * v + joint));
    } else if (joint > 0) {
      cut_options.push_back(interlaced_cuts(model, order, S * v, po.interlaced));
    } else if (const LayerSplit split{po.first_stage_layers, po.last_stage_layers, po.embedding_as_layer, po.loss_as_layer};
               stated || split.first > 0 || split.last > 0 || split.embedding || split.loss) {
      cut_options.push_back(even_layer_cuts(model, order, S, v, split));
    } else {
      cut_options.push_back(balanced_cuts(model, weight, S * v));
      try {
        auto even = even_layer_cuts(model, order, S, v);
        if (!even.empty() && even != cut_options[0]) cut_options.push_back(std::move(even));
      } catch (const Error&) {  // no repeating layers, or not a multiple of the chunks
      }
    }
    // (graph searched, micro-batches held): identical chunks searched once
    struct Solved {
      SearchResult result;  // infeasible where the search threw
      std::string error;
    };
    std::map<std::pair<uint64_t, int64_t>, Solved> solved;
    for (size_t c = 0; c < cut_options.size(); ++c) {
      const std::string cut_name = c == 0 ? "" : " (even layers)";
      // S v chunks, chunk j on the devices of stage j mod S (with
      // interlaced chunks, the staged ones counted without them).
      const auto pieces = pieces_at(order, cut_options[c]);
      // A stage boundary carries its samples split over the stage's
      // devices, or, where a micro-batch (the most tried) could not take
      // that, over the largest power-of-two share of them it can: none
      // where a micro-batch is one sample (data parallelism of 1).
      auto split_by = [&](TensorRef t) -> int64_t {
        if (t.node < 0 || model.shape(t).rank() == 0) return 1;
        const int64_t size = model.shape(t).dims[0].size;
        if (size % d != 0) return 1;
        if (size % (d * most) == 0) return d;
        for (int64_t k = d / 2; k > 1; k /= 2)
          if (d % k == 0 && size % (k * most) == 0) return k;
        return 1;
      };
      // Scatter-gather (Megatron-LM's, Narayanan et al. 2021, Section 4.1):
      // where the samples go fewer ways than the stage has devices, the
      // rest split another dimension, so that each device sends and
      // receives its own part of the boundary and the stage gathers it on
      // its own links: the sequence (a transformer's boundary is [samples,
      // sequence, hidden]) where it divides, else the last. Sequence
      // parallelism holds a stage's output split so already (by samples
      // over the data-parallel groups, by sequence inside each), and a
      // boundary split the same way crosses as each device's own shard,
      // nothing gathered or cut at the join (docs/simulator.md).
      const int64_t tp = options.sequence_parallel && options.tensor_degree > 1 ? options.tensor_degree : 1;
      auto boundary = [&](TensorRef t) -> BoundaryLayout {
        const int64_t k = split_by(t);
        if (t.node < 0 || model.shape(t).rank() < 2) return {k, 1, 1};
        const auto& dims = model.shape(t).dims;
        if (tp > 1 && dims.size() >= 3 && d % tp == 0 && dims[1].size % tp == 0 && dims[0].size % (d / tp * most) == 0) return {d / tp, tp, 1};
        const int64_t r = d / k;  // (k divides d)
        if (r <= 1) return {k, 1, 1};
        if (dims.size() >= 3 && dims[1].size % r == 0) return {k, r, 1};
        return {k, 1, dims.back().size % r == 0 ? r : 1};
      };
      std::vector<PieceGraph> graphs;
      for (const Piece& pc : pieces) {
        PieceGraph pg = piece_graph(model, pc, boundary(pc.in), boundary(pc.out));
        // A written plan selects operators by their names and layers,
        // recompute operators names what it recomputes, and ZeRO's weight
        // groups name their weights: its stages keep the model's names
        // (none shares another's lowering).
        const bool named = options.plan || cost.recipe().recompute == Recompute::kOperators || !cost.recipe().zero_weights.empty();
        graphs.push_back(named ? with_model_names(pg) : std::move(pg));
      }
      // The shape tried, as a refusal names it.
      auto tried = [&](int64_t M) {
        return std::to_string(S) + " stages" + (v > 1 ? " x " + std::to_string(v) + " virtual" : std::string()) + cut_name + ", " +
               std::to_string(M) + " micro-batches: ";
      };
      for (const int64_t M : micro) {
        const PipelineShape shape{S, M, v, po.schedule.value_or(PipelineShape::default_for(v)), po.programs, po.interlaced};
        std::vector<std::vector<int64_t>> held_sets;  // per stage, per chunk (activation_sets_held)
        // A staged chunk's sets on `stage` (each of a stage's chunks alike);
        // an interlaced chunk's are its own (held_sets[0][p]).
        auto chunk_holds = [&](int64_t stage) {
          const auto& h = held_sets[static_cast<size_t>(stage)];
          int64_t sets = 0;
          for (int64_t k = 0; k < shape.chunks(); ++k)
            if (shape.stage_of(k) == stage) sets = std::max(sets, h[static_cast<size_t>(k)]);
          return sets;
        };
        std::vector<const SearchResult*> searched;
        try {
          // Micro-batches in flight per stage, as the schedule's programs
          // hold them (pcg/pipeline_schedule.h), spread over a stage's v
          // chunks (a schedule that cannot run this M refuses it).
          held_sets = activation_sets_held(shape, stage_programs(shape));
          // What chunk p's search takes: its graph (pipelined in its
          // micro-batches, or a stated plan's as written), its key among
          // the searches done, its options (progress named by its stage).
          struct Chunk {
            Graph graph;
            uint64_t hash = 0;
            SearchOptions options;
          };
          auto chunk = [&](size_t p) {
            Chunk ch;
            ch.graph = stated ? graphs[p].graph : pipelined(graphs[p].graph, M, p + 1 == pieces.size());
            // A plan's chunks are each their own (a rule may select some
            // layers only), under each boundary option.
            ch.hash = options.plan ? hash_mix(hash_mix(graph_hash(ch.graph), p), c) : graph_hash(ch.graph);
            ch.options = options;
            ch.options.transformer_chunk = transformer;  // (a chunk of only its ends: the vocabulary-parallel seed)
            ch.options.layout_search = false;  // priced before the chunk is sliced
            const std::string phase = "pipeline " + std::to_string(S) + " stages" + (v > 1 ? " x " + std::to_string(v) + " virtual" : "") + ", " +
                                      std::to_string(M) + " micro-batches, stage " +
                                      std::to_string(p + 1);
            if (options.progress)
              ch.options.progress = [&, phase](const SearchProgress& pr) {
                SearchProgress q = pr;
                q.phase = phase + ": " + pr.phase;
                const std::lock_guard<std::mutex> lock(progress_mutex);
                options.progress(q);
              };
            return ch;
          };
          auto run = [&](const Chunk& ch, int64_t k, size_t p) {
            Solved s;
            try {
              s.result = optimize(ch.graph, rules, shape.is_interlaced(static_cast<int64_t>(p)) ? every : stated ? mapper : searcher(k), ch.options);
            } catch (const Error& e) {
              s.error = e.what();
            }
            return s;
          };
          auto keep = [&](std::pair<uint64_t, int64_t> key, Solved s) {
            result.search.explored += s.result.explored;
            result.search.evaluated += s.result.evaluated;
            return solved.emplace(key, std::move(s)).first;
          };
          // The chunks' first searches (holding what the first stage
          // holds) run side by side: a search is parallel inside but has
          // serial stretches (seeds, final ranking) another fills. They
          // are kept in chunk order, so the result is the same whatever
          // the threads.
          std::vector<Chunk> chunks;
          for (size_t p = 0; p < pieces.size(); ++p) chunks.push_back(chunk(p));
          {
            const int64_t first = chunk_holds(0), k = stated ? int64_t{0} : first;
            if (!stated) searcher(first);  // made here, read by every search below
            std::vector<size_t> todo;
            std::vector<std::pair<uint64_t, int64_t>> keys;
            for (size_t p = 0; p < pieces.size(); ++p) {
              const auto key = std::make_pair(chunks[p].hash, k);
              if (solved.count(key) || std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
              keys.push_back(key), todo.push_back(p);
            }
            std::vector<Solved> done(todo.size());
            tbb::parallel_for(size_t{0}, todo.size(), [&](size_t i) { done[i] = run(chunks[todo[i]], first, todo[i]); });
            for (size_t i = 0; i < todo.size(); ++i) keep(keys[i], std::move(done[i]));
          }
          for (size_t p = 0; p < pieces.size(); ++p) {
            const Chunk& ch = chunks[p];
            // A search that failed is kept as its error: an identical chunk
            // asking again gets the same answer, an infeasible result on a
            // first try and the error on the last.
            auto search_holding = [&](int64_t k, bool last_try) -> const SearchResult* {
              const auto key = std::make_pair(ch.hash, stated ? int64_t{0} : k);
              auto it = solved.find(key);
              if (it == solved.end()) it = keep(key, run(ch, k, p));
              if (!it->second.error.empty() && last_try) throw Error(it->second.error);
              return &it->second.result;
            };
            const int64_t first = chunk_holds(0), own = shape.is_interlaced(static_cast<int64_t>(p)) ? first : chunk_holds(shape.stage_of(static_cast<int64_t>(p)));
            const SearchResult* r = search_holding(first, stated || own == first);
            if (!stated && own != first && !r->strategy.estimate.feasible) r = search_holding(own, true);
            searched.push_back(r);
          }
        } catch (const Error& e) {
          refused.push_back(tried(M) + e.what());
          continue;
        }
        Plan plan;
        plan.stages = S, plan.micro = M, plan.virtual_stages = v;
        plan.memory.assign(static_cast<size_t>(S), std::vector<DeviceMemory>(static_cast<size_t>(d)));
        try {
          int64_t staged_seen = 0;
          for (size_t p = 0; p < pieces.size(); ++p) {
            // An interlaced chunk runs on every device (stage -1).
            const bool everywhere = shape.is_interlaced(static_cast<int64_t>(p));
            const int64_t stage = shape.stage_of(static_cast<int64_t>(p)), chunk = everywhere ? 0 : staged_seen++ / S;
            const MachineMapper& on = everywhere ? every : mapper;
            StagePlan sp{graphs[p], {}, {}, {}, {}, {}};
            if (stated) {
              // Cut into micro-batches; a placed plan's chunk at its stated
              // devices (the rest as mapped there), priced by simulation; a
              // plan's conversions searched (stated_chunk.h).
              SlicedChunk cut = slice_stated_chunk(searched[p]->strategy, M, p + 1 == pieces.size(), on, placed,
                                                   options.algorithm == Algorithm::kPlan && options.layout_search);
              sp.graph = std::move(cut.graph), sp.mapped = std::move(cut.mapped), sp.relaid = std::move(cut.relaid);
            } else {
              sp.graph = searched[p]->strategy.graph;
              sp.mapped = on.map(sp.graph);
            }
            const Estimate& e = sp.mapped.estimate;
            const std::string which = everywhere ? "interlaced chunk " + std::to_string(p) : "stage " + std::to_string(p + 1);
            // An interlaced chunk's operator left on one stage's devices,
            // refused naming the plan's rule that decided it.
            auto one_stage = [&]() -> std::string {
              const auto& views = sp.mapped.views;
              if (!everywhere || views.size() != sp.graph.size() ||
                  std::none_of(views.begin(), views.end(), [](const MachineView& m) { return m.placed(); }))
                return {};  // not mapped (an operator with more tasks than devices): the mapper's reason stands
              const Placement place(sp.graph, sp.mapped.views, devices);
              const auto one = one_stage_operator(place, source_layouts(sp.graph), d);
              if (!one) return {};
              const std::string rule = options.plan ? rule_selecting(model, *options.plan, devices, sp.graph.node(*one).name) : "";
              return one_stage_reason(place, *one, d) + (rule.empty() ? "" : "; " + rule);
            };
            if (e.time == kInf) {
              const std::string one = one_stage();
              throw Error(which + ": " + (one.empty() ? e.infeasible : one));
            }
            if (placed)  // the devices a plan states, each operator on several stages' too
              if (const std::string one = one_stage(); !one.empty()) throw Error(which + ": " + one);
            PipelineStage& info = sp.info;
            info.stage = stage, info.chunk = chunk;
            info.first_device = everywhere ? 0 : stage * d, info.devices = everywhere ? devices : d;
            for (NodeId id : pieces[p].nodes) info.operators += model.node(id).op->op_class == OpClass::kCompute;
            info.first = model.node(pieces[p].nodes.front()).name, info.last = model.node(pieces[p].nodes.back()).name;
            // (Under overlap_param_gather the gathers the chunk's first
            // forward waits for are replayed below, from when the first
            // micro-batch reaches it: not a once-per-step term.)
            info.update = beside ? e.once - e.gather : e.once;
            info.micro_batch = (e.time - e.once) / static_cast<double>(M);
            info.backward = e.backward / static_cast<double>(M);
            info.forward = info.micro_batch - info.backward;
            // (A plan stating devices prices its chunks by simulation,
            // which lists no gathers: ranked without them, then simulated
            // whole.)
            if (beside) info.param_gathers = e.param_gathers;
            if (pieces[p].in.node >= 0) {  // receive the boundary, send its gradient back
              const Node& in = *std::find_if(sp.graph.nodes().begin(), sp.graph.nodes().end(),
                                             [](const Node& n) { return n.name.starts_with(kPieceInputPrefix); });
              const ParallelTensorShape carried = sp.graph.node(sp.graph.consumers()[static_cast<size_t>(in.id)].at(0).first).outputs[0];
              const int64_t from = std::max<int64_t>(shape.stage_of(static_cast<int64_t>(p) - 1), 0) * d;  // the previous chunk's stage
              const double crossing = cost.move_time(carried, from, info.first_device) / static_cast<double>(M);
              info.micro_batch += 2 * crossing;
              plan.stage.back().info.crossing = crossing;
            }
            sp.memory = memory_breakdown(sp.graph, sp.mapped.views, info.devices, cost.recipe(),
                                         everywhere ? held_sets[0][p] : chunk_holds(stage));
            info.memory = fullest(sp.memory);
            // An interlaced chunk is every stage's: its share of each stage's devices.
            for (int64_t st = everywhere ? 0 : stage; st < (everywhere ? S : stage + 1); ++st) {
              auto& held = plan.memory[static_cast<size_t>(st)];
              const size_t off = everywhere ? static_cast<size_t>(st * d) : 0;
              for (size_t k = 0; k < held.size() && off + k < sp.memory.size(); ++k) held[k] += sp.memory[off + k];
            }
            for (const auto& a : searched[p]->applied) plan.applied.push_back(renamed_applied(a, [&](const std::string& x) { return real_name(graphs[p].names, x); }));
            plan.stage.push_back(std::move(sp));
          }
          for (int64_t st = 0; st < S; ++st) {
            const double need = fullest(plan.memory[static_cast<size_t>(st)]);
            if (need > cost.machine().device.memory_capacity)
              throw Error("stage " + std::to_string(st + 1) + " needs " + std::to_string(need / 1073741824.0) + " GiB per device");
          }
          std::vector<PipelineStage> chunks;
          for (const StagePlan& sp : plan.stage) chunks.push_back(sp.info);
          ScheduledTime t = scheduled_time(shape, chunks, beside);
          plan.time = t.time, plan.slowest = t.slowest, plan.update = t.update, plan.gather_wait = t.gather_wait;
          plan.stage_time = std::move(t.stage_time), plan.steps = t.steps;
        } catch (const Error& e) {
          refused.push_back(tried(M) + e.what());
          continue;
        }
        if (plan.time >= best.time) continue;
        // The search counted each chunk alone; joined, as simulated and run,
        // a boundary read by several operators is received once by each
        // (docs/training.md "What each device keeps"): over capacity either
        // way, a plan is never returned.
        std::optional<JoinedPlan> whole;  // (kept for the best: joined once)
        if (S > 1 || joint > 0) {
          try {
            whole = join_stages(model.name(), plan);
            const JoinedPeak peak = joined_peak(*whole, devices, cost.recipe(), shape);
            if (peak.bytes > cost.machine().device.memory_capacity)
              throw Error("device " + std::to_string(peak.device) + " needs " + std::to_string(peak.bytes / 1073741824.0) +
                          " GiB with the stages joined, as simulated and run");
          } catch (const Error& e) {
            refused.push_back(tried(M) + e.what());
            continue;
          }
        }
        best = std::move(plan), best_whole = std::move(whole);
      }
    }
  }
  if (best.time == kInf) {  // (a written plan's: named, as its other mistakes are)
    std::string why = refused.empty() ? "no stage count tried" : refused.front();
    constexpr size_t kListed = 6;
    for (size_t i = 1; i < refused.size() && i < kListed; ++i) why += "; " + refused[i];
    if (refused.size() > kListed) why += "; and " + std::to_string(refused.size() - kListed) + " more";
    throw Error((options.plan ? options.plan->source + ": " : std::string()) + "pipeline: no feasible pipelined strategy (" + why + ")");
  }

  // One PCG: the stages joined, views offset to each stage's devices.
  JoinedPlan whole = best_whole ? std::move(*best_whole) : join_stages(model.name(), best);
  Graph& joined = whole.graph;
  std::vector<MachineView>& views = whole.views;
  Estimate& e = result.search.strategy.estimate;
  const double M = static_cast<double>(best.micro);
  // The schedule's span in slots of the slowest stage's micro-batch: its
  // steps' makespan over it.
  const double slots = best.slowest > 0 ? best.steps / best.slowest : M;
  // The slowest stage's compute, over its chunks, and of it the calibrated
  // per-node overhead (a chunk's compute includes it, as a plan's does:
  // machine_mapping.h), scaled alike to the schedule's span.
  std::vector<double> stage_compute(static_cast<size_t>(best.stages), 0.0), stage_overhead(static_cast<size_t>(best.stages), 0.0);
  // (An interlaced chunk is every stage's.)
  auto stages_of = [&](const StagePlan& sp) {
    return sp.info.stage < 0 ? std::make_pair(int64_t{0}, best.stages) : std::make_pair(sp.info.stage, sp.info.stage + 1);
  };
  for (const StagePlan& sp : best.stage)
    for (auto [st, end] = stages_of(sp); st < end; ++st) {
      stage_compute[static_cast<size_t>(st)] += sp.mapped.estimate.compute - sp.mapped.estimate.update;  // (once: the update, and communication)
      stage_overhead[static_cast<size_t>(st)] += sp.mapped.estimate.overhead;
    }
  const auto& times = best.stage_time;
  const auto bottleneck = static_cast<size_t>(std::max_element(times.begin(), times.end()) - times.begin());
  e.feasible = true;
  e.time = best.time;
  e.once = best.update;
  // (The slowest stage alone runs M of its micro-batches in series: never
  // below zero.)
  e.bubble = std::max(0.0, (slots - M) * best.slowest);
  e.compute = stage_compute[bottleneck] * slots / M;
  e.overhead = stage_overhead[bottleneck] * slots / M;
  e.communication = e.time - e.once - e.compute;
  double busy = 0;
  for (const StagePlan& sp : best.stage) busy += M * sp.info.micro_batch * static_cast<double>(sp.info.stage < 0 ? best.stages : 1);
  for (const auto& held : best.memory)
    for (const DeviceMemory& m : held) e.memory.push_back(m.total());
  e.idle = std::max(0.0, slots * best.slowest - busy / static_cast<double>(best.stages));
  for (const StagePlan& sp : best.stage)
    if (const auto [st, end] = stages_of(sp); st <= static_cast<int64_t>(bottleneck) && static_cast<int64_t>(bottleneck) < end)
      e.backward += sp.mapped.estimate.backward;
  // The gradient synchronization: every stage synchronizes its own weights
  // at once, on its own devices, after its last micro-batch's backward; the
  // one whose once-per-step terms are longest sets e.once, so its buckets
  // are the ones reported. The devices computing and the bytes: the
  // joined plan's, placed as the runtime places it (an interleaved stage's
  // chunks may use different devices of it).
  std::vector<double> stage_once(static_cast<size_t>(best.stages), 0.0);
  for (const StagePlan& sp : best.stage) {
    for (auto [st, end] = stages_of(sp); st < end; ++st) stage_once[static_cast<size_t>(st)] += sp.info.update;  // (PipelineStage::update)
    e.gathered_for_use += sp.mapped.estimate.gathered_for_use;
  }
  const auto syncing = std::max_element(stage_once.begin(), stage_once.end()) - stage_once.begin();
  for (const StagePlan& sp : best.stage) {
    if (const auto [st, end] = stages_of(sp); syncing < st || syncing >= end) continue;
    const Estimate& c = sp.mapped.estimate;
    e.sync += c.sync, e.sync_hidden += c.sync_hidden, e.buckets += c.buckets, e.gather += c.gather, e.update += c.update;
  }
  if (beside) e.gather = best.gather_wait;
  const Placement place(joined, views, cost.devices());
  std::vector<char> computes(static_cast<size_t>(cost.devices()), 0);
  for (const Node& n : joined.nodes())
    if (n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs))
      for (const int64_t dev : place.task_devices(n.id))
        if (dev >= 0 && dev < cost.devices()) computes[static_cast<size_t>(dev)] = 1;
  e.devices_used = std::count(computes.begin(), computes.end(), 1);
  const SourceLayouts layouts = source_layouts(joined);
  const PipelineShape shape{best.stages, best.micro, best.virtual_stages, po.schedule.value_or(PipelineShape::default_for(best.virtual_stages)),
                            po.programs, po.interlaced};
  // What the recomputation re-runs send again, as the runtime runs the
  // schedule: with the plan's chunks where it counts layers per chunk.
  const TrainingRecipe& recipe = cost.recipe();
  std::vector<int64_t> chunk;
  if (plans_per_chunk(recipe.recompute, recipe.recompute_layers, shape)) try {
      chunk = pipeline_chunks(joined, views, cost.devices(), shape);
    } catch (const Error&) {
      chunk.clear();  // (the plan as one chunk)
    }
  const std::vector<NodeRun> runs = node_runs(place, layouts, RunDetail::kKinds);
  e.bytes = step_bytes(place, layouts, runs) + zero_extra_bytes(place, layouts, recipe) +
            recompute_step_bytes(place, runs, plan_recompute(joined, layouts, recipe, chunk), shape.in_flight());
  if (placed) {  // as a plan of one stage stating devices: the whole of it simulated, under its schedule
    const double bubble = e.bubble;
    e = simulated_estimate(Simulator(joined, views, cost, shape));
    e.bubble = bubble;
    result.simulated = true;
  }
  result.search.strategy.graph = std::move(joined);
  result.search.strategy.views = std::move(views);
  result.search.applied = std::move(best.applied);
  result.search.pieces = best.stages;
  result.stages = best.stages, result.micro_batches = best.micro, result.virtual_stages = best.virtual_stages;
  result.interlaced = po.interlaced;
  for (const StagePlan& sp : best.stage) {
    result.stage.push_back(sp.info);
    result.search.relaid.insert(result.search.relaid.end(), sp.relaid.begin(), sp.relaid.end());
  }
  result.search.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace

PipelineResult optimize_pipeline(const Graph& model, const RuleLibrary& rules, const CostModel& cost, const SearchOptions& options,
                                 const PipelineOptions& po) {
  if (options.algorithm != Algorithm::kUnity || !options.plan) return search_pipeline(model, rules, cost, options, po);
  // A plan whose unstated operators are searched: each chunk's search
  // starts from the plan as stated, but a chunk's time alone is a proxy
  // (its boundaries, its memory beside the other chunks of its stage), so
  // the plan as stated, its rest one task each, is a candidate too. The
  // faster joined plan wins; what neither gives is the search's error.
  const auto t0 = std::chrono::steady_clock::now();
  SearchOptions as_stated = options;
  as_stated.algorithm = Algorithm::kPlan;
  std::optional<PipelineResult> stated;
  try {
    stated = search_pipeline(model, rules, cost, as_stated, po);
  } catch (const Error&) {
  }
  std::optional<PipelineResult> searched;
  try {
    searched = search_pipeline(model, rules, cost, options, po);
  } catch (const Error&) {
    if (!stated) throw;
  }
  PipelineResult& best =
      !searched || (stated && stated->search.strategy.estimate.time < searched->search.strategy.estimate.time) ? *stated : *searched;
  if (searched && &best != &*searched)
    best.search.explored += searched->search.explored, best.search.evaluated += searched->search.evaluated;
  best.search.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::move(best);
}

}  // namespace pcgx::search
