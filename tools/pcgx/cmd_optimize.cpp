// pcgx optimize: apply a ruleset to a model on a machine (search/).
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <unistd.h>

#include "cli_common.h"
#include "print_estimate.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "pcgx/search/unity_search.h"

namespace pcgx::cli {
namespace {

std::string view_strides(const MachineView& v) {
  if (v.strides.empty()) return std::to_string(v.stride);
  std::string s = "[";
  for (size_t i = 0; i < v.strides.size(); ++i) s += (i ? "," : "") + std::to_string(v.strides[i]);
  return s + "]";
}

}  // namespace

void add_optimize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("optimize", "Find the fastest parallel strategy for a model on a machine (Unity's search)");
  static std::string model, machine_name, ruleset_path = std::string(PCGX_RULESETS_DIR) + "/unity-v1.json", algorithm = "unity", rank = "simulation",
                     out, dot, profile, efficiency;
  static std::vector<std::string> sets;
  static int64_t devices = 0, budget = 12, split = 10, max_nodes = 0, exhaustive_limit = 5000, stages = 0, micro_batches = 0, proposals = 2000,
                 evaluations = 3000;
  static uint64_t seed = 1;
  static double alpha = 1.05, bucket_mb = 25;
  static bool quiet = false, per_device_batch = true, pipeline = false, allow_unverified = false;
  cmd->add_option("MODEL", model, "zoo model name or graph JSON file")->required();
  cmd->add_option("--machine", machine_name, "machine name (data/machines) or machine JSON file")->required();
  cmd->add_option("--devices", devices, "use the first N devices (whole nodes first); default: all")->check(positive());
  cmd->add_option("--ruleset", ruleset_path, "ruleset to apply")->capture_default_str();
  cmd->add_option("--search", algorithm, "unity, data-parallel, expert, sequential, exhaustive, mcmc (FlexFlow's MCMC, costed by simulation) or "
                  "autoddl (AutoDDL's coordinate descent over SBP signatures)")->capture_default_str();
  cmd->add_option("-o,--output", out, "strategy file to write (optimized PCG + machine mapping)")->required();
  cmd->add_option("--dot", dot, "also draw the optimized PCG (Graphviz)");
  cmd->add_option("--budget", budget, "candidate PCGs explored per search (per piece and layout)")->capture_default_str();
  cmd->add_option("--alpha", alpha, "prune candidates slower than alpha x the best")->capture_default_str();
  cmd->add_option("--split", split, "graph splitting: pieces of at least this many operators")->capture_default_str();
  cmd->add_option("--max-nodes", max_nodes, "exhaustive search: PCGs of at most this many nodes (default: model nodes + inputs and weights + 1)");
  cmd->add_option("--limit", exhaustive_limit, "exhaustive search: give up above this many candidate PCGs")->capture_default_str();
  cmd->add_option("--rank", rank,
                  "unity: choose the result among the search's best and the data-parallel and expert baselines by simulation "
                  "(each mapped, then run task by task as pcgx simulate does) or by the DP's estimate")
      ->capture_default_str();
  cmd->add_option("--proposals", proposals, "mcmc: proposals in all, shared by its chains")->capture_default_str()->check(positive());
  cmd->add_option("--evaluations", evaluations, "autoddl: PCGs costed in all, shared by its starting points")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--seed", seed, "mcmc and autoddl: random seed")->capture_default_str();
  cmd->add_option("--profile", profile, "measured operator times (pcgx.profile JSON) instead of the roofline");
  cmd->add_option("--efficiency", efficiency, "operator efficiency table (default data/cost/efficiency.json)");
  cmd->add_option("--bucket-mb", bucket_mb, "gradient buckets of this many MiB, all-reduced beside the backward pass (PyTorch DDP's bucket_cap_mb)")
      ->capture_default_str();
  cmd->add_option("--set", sets, "override a size parameter: key=value (repeatable)");
  cmd->add_flag("!--global-batch", per_device_batch,
                "take a zoo model's batch as the global batch (default: it is per device, times --devices, as in Unity's evaluation)");
  cmd->add_flag("--pipeline", pipeline,
                "pipeline parallelism: stages on disjoint devices, 1F1B over micro-batches, each stage searched with --search");
  cmd->add_option("--stages", stages, "pipeline stages (default: the best of 2, 4, 8)")->check(positive());
  cmd->add_option("--micro-batches", micro_batches, "micro-batches per iteration (default: the best of 1, 2, 4, 8 x stages)")
      ->check(positive());
  cmd->add_flag("-q,--quiet", quiet, "no per-operator table");
  cmd->add_flag("--allow-unverified", allow_unverified, kAllowUnverifiedHelp);
  cmd->callback([] {
    Machine m = search::find_machine(machine_name);
    if (devices < 0 || devices > m.num_devices())
      throw Error("--devices: " + std::to_string(devices) + " is not in 1.." + std::to_string(m.num_devices()) + " for machine " + m.name);
    if (devices > 0) m = m.with_devices(devices);
    if (budget < 1) throw Error("--budget: must be at least 1");
    if (!(alpha >= 1) || !std::isfinite(alpha)) throw Error("--alpha: must be a number of at least 1");
    if (split < 2) throw Error("--split: must be at least 2");
    if (!(bucket_mb > 0) || !std::isfinite(bucket_mb)) throw Error("--bucket-mb: must be a positive number");
    if (max_nodes < 0) throw Error("--max-nodes: must not be negative");
    if (rank != "simulation" && rank != "estimate") throw Error("--rank: unknown '" + rank + "' (simulation, estimate)");
    if (exhaustive_limit < 1) throw Error("--limit: must be at least 1");
    if (!pipeline && (stages != 0 || micro_batches != 0)) throw Error("--stages and --micro-batches need --pipeline");
    if (stages < 0) throw Error("--stages: must be positive");
    if (micro_batches < 0) throw Error("--micro-batches: must be positive");
    if (pipeline && algorithm == "exhaustive") throw Error("--pipeline: stages are searched with unity, data-parallel, expert or sequential, not exhaustive");
    const int64_t n = m.num_devices();
    std::vector<std::string> model_sets = sets;
    if (const ModelSpec* spec = find_model(model); spec && per_device_batch && spec->defaults.count("batch")) {
      bool given = false;
      for (const auto& s : sets) given |= s.rfind("batch=", 0) == 0;
      if (!given) model_sets.push_back("batch=" + std::to_string(spec->defaults.at("batch") * n));
    }
    const Graph g = load_model(model, model_sets);
    const search::Efficiency eff = efficiency.empty() ? search::default_efficiency() : search::load_efficiency(efficiency);
    Profile prof;
    if (!profile.empty()) prof = load_profile(profile);
    search::CommOptions comm;
    comm.bucket_bytes = bucket_mb * 1024 * 1024;
    const search::CostModel cm(m, eff, prof, comm);
    const search::MachineMapper mapper(cm);

    const bool needs_rules = algorithm == "unity" || algorithm == "sequential" || algorithm == "exhaustive" || algorithm == "mcmc";
    std::unique_ptr<search::RuleLibrary> rules;
    Ruleset rs;
    if (needs_rules) {
      rs = load_search_ruleset(ruleset_path, allow_unverified);
      rules = std::make_unique<search::RuleLibrary>(rs);
    } else {
      rules = std::make_unique<search::RuleLibrary>(rs);
    }
    std::cerr << "optimizing " << g.name() << " (" << g.size() << " nodes) on " << n << " x " << m.device.name << " (" << m.name
              << ") with --search " << algorithm;
    if (needs_rules) std::cerr << ", " << rules->size() << " rules (both directions, ranks 2-4) from " << ruleset_path;
    std::cerr << "\n";

    search::SearchOptions o;
    o.algorithm = algorithm, o.alpha = alpha, o.budget = budget, o.split_min_ops = split;
    o.exhaustive_max_nodes = max_nodes, o.exhaustive_limit = exhaustive_limit, o.proposals = proposals, o.seed = seed;
    o.evaluations = evaluations;
    o.rank = rank == "estimate" ? search::SearchOptions::Rank::kEstimate : search::SearchOptions::Rank::kSimulation;
    const bool tty = isatty(2);
    auto last = std::chrono::steady_clock::now();
    o.progress = [&](const search::SearchProgress& p) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::milliseconds(tty ? 100 : 2000)) return;
      last = now;
      std::cerr << (tty ? "\r\033[K" : "") << "  " << p.phase << ": " << p.explored << " explored, " << p.evaluated
                << " evaluated, best " << ms(p.best) << (tty ? "" : "\n") << std::flush;
    };
    search::PipelineResult pr;
    if (pipeline) pr = search::optimize_pipeline(g, *rules, cm, o, {stages, micro_batches});
    else pr.search = search::optimize(g, *rules, mapper, o);
    const search::SearchResult& r = pr.search;
    if (tty) std::cerr << "\r\033[K";
    const search::Strategy dp = mapper.map(search::best_data_parallel(g, mapper));
    const search::Estimate& e = r.strategy.estimate;

    std::cout << "model                 " << g.name() << "\n"
              << "machine               " << m.name << ", " << n << " devices\n"
              << "search                " << algorithm << " (" << std::fixed << std::setprecision(2) << r.seconds << " s, "
              << r.explored << " explored, " << r.evaluated << " evaluated, " << r.pieces << " piece" << (r.pieces == 1 ? "" : "s") << ")\n";
    if (!e.feasible) throw Error("no feasible strategy: " + e.infeasible);
    std::cout << "iteration time        " << ms(e.time) << (algorithm == "mcmc" ? " predicted (simulated)" : " predicted") << "\n";
    print_terms(std::cout, e);
    if (!pipeline && algorithm != "mcmc") {
      // The same plan run task by task (pcgx simulate): overlap, link
      // contention and buckets beside the backward pass, which the DP's sums do not see.
      const search::Simulator sim(r.strategy.graph, r.strategy.views, cm);
      std::cout << "simulated             " << ms(sim.time()) << " (pcgx simulate: the plan task by task; ratio to the prediction "
                << std::setprecision(2) << sim.time() / e.time << ")\n";
    }
    if (!pipeline && r.ranking.chosen >= 0) {
      std::cout << "chosen by simulation  ";
      for (size_t i = 0; i < r.ranking.finalists.size(); ++i) {
        const search::RankedFinalist& f = r.ranking.finalists[i];
        std::cout << (i ? ", " : "") << f.label << " "
                  << (f.feasible ? ms(f.simulated) + " (predicted " + ms(f.estimate) + ")" : std::string("infeasible"))
                  << (static_cast<int>(i) == r.ranking.chosen ? " *" : "");
      }
      std::cout << "\n";
    }
    print_profile_coverage(std::cout, cm, r.strategy.graph);
    if (pipeline) {
      std::cout << "pipeline              " << pr.stages << " stages x " << n / pr.stages << " devices, " << pr.micro_batches
                << " micro-batches, 1F1B with flush: bubble " << ms(e.bubble) << ", update " << ms(e.once) << "\n";
      for (size_t i = 0; i < pr.stage.size(); ++i) {
        const auto& st = pr.stage[i];
        std::cout << "  stage " << i + 1 << "  devices " << st.first_device << ".." << st.first_device + st.devices - 1 << "  "
                  << st.operators << " operators (" << st.first << " .. " << st.last << ")  " << ms(st.micro_batch)
                  << " per micro-batch, " << human_bytes(st.memory) << "\n";
      }
    }
    std::cout
              << "memory per device     " << human_bytes(e.max_memory()) << " max of " << human_bytes(m.device.memory_capacity) << "\n"
              << "data parallel         " << (dp.estimate.feasible ? ms(dp.estimate.time) : "infeasible: " + dp.estimate.infeasible) << "\n";
    if (dp.estimate.feasible)
      std::cout << "speedup over data parallel  " << std::setprecision(2) << dp.estimate.time / e.time << "x\n";
    std::cout << "substitutions applied " << r.applied.size() << "\n";
    for (size_t i = 0; i < r.applied.size() && i < 20; ++i) std::cout << "  " << r.applied[i] << "\n";
    if (r.applied.size() > 20) std::cout << "  ... (all in the strategy file)\n";
    if (!quiet) {
      std::cout << "operators (tasks, output layout, machine view start:stride or start:[strides])\n";
      for (const Node& nd : r.strategy.graph.nodes()) {
        if (nd.op->op_class == OpClass::kSource) continue;
        const auto v = r.strategy.views[static_cast<size_t>(nd.id)];
        std::cout << "  " << std::left << std::setw(28) << (nd.name.empty() ? "#" + std::to_string(nd.id) : nd.name) << std::setw(14)
                  << nd.op->name << std::right << std::setw(5) << nd.outputs[0].num_shards() << "  " << std::left << std::setw(30)
                  << nd.outputs[0].to_string() << std::right << " " << v.start << ":" << view_strides(v) << "\n";
      }
    }
    search::StrategyFile f{g.name(), m, n, algorithm, r.applied, r.strategy};
    if (pipeline) f.search += "+pipeline", f.pipeline_stages = pr.stages, f.micro_batches = pr.micro_batches;
    search::save_strategy(f, out);
    std::cerr << "wrote " << out << "\n";
    if (!dot.empty()) {
      write_text_file_atomic(dot, search::strategy_to_dot(r.strategy));
      std::cerr << "wrote " << dot << "\n";
    }
  });
}

}  // namespace pcgx::cli
