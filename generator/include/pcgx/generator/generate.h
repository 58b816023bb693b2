#pragma once
// `pcgx generate`: enumerate, fingerprint, pair and prune, and write the
// candidates as a rule database (kind "pcgx.candidates").
#include <functional>
#include <string>

#include "pcgx/generator/candidates.h"
#include "pcgx/generator/config.h"
#include "pcgx/rulesets/ruleset.h"

namespace pcgx::gen {

struct GenerateReport {
  StageCounts counts;
  EnumerationStats enumeration;
  double enumerate_seconds = 0;
  double prune_seconds = 0;
  long peak_rss_kb = 0;
};

// `log` receives progress lines (about once a second) and stage summaries.
Ruleset generate(const GeneratorConfig& config, GenerateReport& report,
                 const std::function<void(const std::string&)>& log = nullptr);

// A rule graph: Input/Weight nodes named after the pool tensors it uses.
Graph to_graph(const SmallGraph& g, const std::vector<PoolTensor>& pool, const InstanceTable& instances);

long peak_rss_kb();

}  // namespace pcgx::gen
