#pragma once
// A strategy file's boolean recipe field (overlap_grad_input,
// overlap_param_gather off by default, overlap_grad_reduce on): written
// where it is not its default, read back, absent read as the default (as
// strategies before it were priced), anything but a boolean an error
// naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/strategy_json.h"

namespace pcgx::search {

// The strategy file of `plan` mapped and priced by `cm` (its recipe cm's).
inline StrategyFile mapped_file(const CostModel& cm, const Graph& plan, const char* model, int64_t devices, const char* search = "data-parallel") {
  StrategyFile f;
  f.model = model, f.machine = cm.machine(), f.devices = devices, f.search = search, f.recipe = cm.recipe();
  f.strategy = MachineMapper(cm).map(plan);
  return f;
}

inline void expect_recipe_flag_round_trip(const StrategyFile& f, const char* field, bool TrainingRecipe::*flag, bool by_default = false) {
  ASSERT_NE(f.recipe.*flag, by_default) << field;
  nlohmann::json j = nlohmann::json::parse(strategy_to_json(f));
  EXPECT_EQ(j[field], !by_default);
  EXPECT_EQ(strategy_from_json(j.dump(), "s.json").recipe.*flag, !by_default);
  j.erase(field);
  EXPECT_EQ(strategy_from_json(j.dump(), "s.json").recipe.*flag, by_default) << "absent: the default, as strategies before it were priced";
  for (const nlohmann::json& bad : {nlohmann::json("yes"), nlohmann::json(1)}) {
    j[field] = bad;
    try {
      (void)strategy_from_json(j.dump(), "s.json");
      ADD_FAILURE() << bad.dump() << " accepted";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }
}

}  // namespace pcgx::search
