#include "pcgx/generator/generate.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "attr_domains.h"
#include "pcgx/pcg/error.h"

namespace pcgx::gen {

long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

std::string GeneratorConfig::to_json() const {
  nlohmann::json j;
  j["opset"] = opset.name;
  std::vector<std::string> ops;
  for (const auto& c : opset.ops) ops.push_back(gen::to_string(c));
  j["ops"] = ops;
  j["max_ops"] = max_ops;
  j["degrees"] = degrees;
  j["ndims"] = ndims;
  j["dimension_size"] = base_size();
  j["seed"] = seed;
  std::vector<std::string> pool;
  for (const auto& t : build_pool(*this)) pool.push_back(t.name + " " + t.shape.to_string());
  j["input_pool"] = pool;
  return j.dump();
}

Graph to_graph(const SmallGraph& g, const std::vector<PoolTensor>& pool, const InstanceTable& instances) {
  Graph out;
  std::map<int, NodeId> pool_node;
  auto source = [&](int p) -> TensorRef {
    auto it = pool_node.find(p);
    if (it == pool_node.end()) {
      const PoolTensor& t = pool[static_cast<size_t>(p)];
      IntList degrees;
      for (const auto& d : t.shape.dims) degrees.push_back(d.degree);
      Attributes a{{"shape", t.shape.logical_shape()}, {"degrees", degrees}, {"replica", t.shape.replica},
                   {"dtype", std::string(pcgx::to_string(t.shape.dtype))}};
      if (t.index_range > 0) a.set("index_range", t.index_range);
      it = pool_node.emplace(p, out.add(t.weight ? "Weight" : "Input", a, {}, t.name)).first;
    }
    return {it->second, 0};
  };
  std::vector<NodeId> node_of_op;
  auto ref = [&](const Ref& r) -> TensorRef {
    return r.op < 0 ? source(r.index) : TensorRef{node_of_op[static_cast<size_t>(r.op)], r.index};
  };
  for (const SmallOp& op : g.ops) {
    const Instance& inst = instances.at(op.inst);
    std::vector<TensorRef> ins;
    for (int k = 0; k < op.n_in; ++k) ins.push_back(ref(op.in[static_cast<size_t>(k)]));
    node_of_op.push_back(out.add(*inst.op, inst.attrs, ins));
  }
  for (const Ref& r : g.outputs) out.add_output(ref(r));
  return out;
}

Ruleset generate(const GeneratorConfig& config, GenerateReport& report,
                 const std::function<void(const std::string&)>& log) {
  auto say = [&](const std::string& s) {
    if (log) log(s);
  };
  for (const auto& c : config.opset.ops) check_enumerable(c);
  if (config.degrees.empty()) throw FieldError("GeneratorConfig.degrees", "give at least one degree");
  for (int64_t d : config.degrees)
    if (d < 2) throw FieldError("GeneratorConfig.degrees", std::to_string(d) + " is not a parallel degree (at least 2)");
  if (config.ndims < 1 || config.ndims > 4) throw FieldError("GeneratorConfig.ndims", std::to_string(config.ndims) + " is not in 1..4");

  Enumerator e(config, build_pool(config));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<GraphRecord> records = e.run(report.enumeration, [&](uint64_t graphs, size_t done, size_t total) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "enumerating: %llu graphs, %zu/%zu first operators done",
                  static_cast<unsigned long long>(graphs), done, total);
    say(buf);
  });
  const auto t1 = std::chrono::steady_clock::now();
  report.enumerate_seconds = std::chrono::duration<double>(t1 - t0).count();
  char buf[256];
  std::snprintf(buf, sizeof buf, "enumerated %llu graphs in %.1f s (%llu operator applications tried)",
                static_cast<unsigned long long>(report.enumeration.graphs), report.enumerate_seconds,
                static_cast<unsigned long long>(report.enumeration.attempts));
  say(buf);
  report.counts.graphs = report.enumeration.graphs;
  report.counts.fingerprints = report.enumeration.fingerprints;
  std::vector<CandidatePair> pairs = find_candidates(e, std::move(records), report.counts);
  report.prune_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  report.peak_rss_kb = peak_rss_kb();

  Ruleset r;
  r.kind = kCandidatesKind;
  r.name = config.opset.name;
  r.version = 1;
  r.opset = config.opset.name;
  r.operators = config.opset.operators();
  r.generator_json = config.to_json();
  const StageCounts& c = report.counts;
  r.stats = {{"graphs", static_cast<double>(c.graphs)},
             {"fingerprints", static_cast<double>(c.fingerprints)},
             {"classes", static_cast<double>(c.classes)},
             {"raw_pairs", static_cast<double>(c.raw_pairs)},
             {"after_common_subgraph", static_cast<double>(c.after_common_subgraph)},
             {"after_renaming", static_cast<double>(c.after_renaming)},
             {"after_implied", static_cast<double>(c.after_implied)}};
  int id = 0;
  for (const CandidatePair& p : pairs) {
    char name[64];
    std::snprintf(name, sizeof name, "%s-c%05d", config.opset.name.c_str(), ++id);
    r.rules.push_back({name, to_graph(p.source, e.pool(), e.instances()), to_graph(p.target, e.pool(), e.instances()),
                       p.output_map, std::nullopt});
  }
  return r;
}

}  // namespace pcgx::gen
