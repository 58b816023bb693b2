#include "loaders.h"

#include <exception>
#include <stdexcept>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/machine.h"
#include "pcgx/pcg/profile.h"
#include "pcgx/rulesets/ruleset.h"
#include "pcgx/runtime/npy.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/strategy_json.h"

namespace pcgx::fuzz {

const std::vector<std::pair<Loader, std::string>>& loaders() {
  static const std::vector<std::pair<Loader, std::string>> all = {
      {Loader::kGraph, "graph"},   {Loader::kMachine, "machine"},       {Loader::kStrategy, "strategy"}, {Loader::kRuleset, "ruleset"},
      {Loader::kProfile, "profile"}, {Loader::kEfficiency, "efficiency"}, {Loader::kNpy, "npy"},
  };
  return all;
}

void load_untrusted(Loader which, const std::string& bytes) {
  const std::string source = "input";
  try {
    switch (which) {
      case Loader::kGraph: (void)graph_from_json(bytes, source); break;
      case Loader::kMachine: (void)machine_from_json(bytes, source); break;
      case Loader::kStrategy: (void)search::strategy_from_json(bytes, source); break;
      case Loader::kRuleset: (void)ruleset_from_json(bytes, source); break;
      case Loader::kProfile: (void)profile_from_json(bytes, source); break;
      case Loader::kEfficiency: (void)search::efficiency_from_json(bytes, source); break;
      case Loader::kNpy: (void)runtime::npy_from_bytes(bytes, source); break;
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw std::logic_error(std::string("not a pcgx::Error: ") + e.what());
  }
}

}  // namespace pcgx::fuzz
