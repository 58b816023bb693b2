// Explicit pipeline schedules in strategy files (strategy_json.h).
#include <gtest/gtest.h>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/strategy_json.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

// A strategy file keeps an explicit schedule's stage programs (written as
// one line of steps per stage) and reads them back; a malformed program is
// an error naming the field.
TEST(ExplicitSchedule, StrategyFilesKeepTheStagePrograms) {
  const Graph g = build_model("gpt-tiny", {{"batch", 4}});
  StrategyFile f;
  f.model = "gpt-tiny", f.machine = toy_machine().with_devices(2), f.devices = 2, f.search = "data-parallel";
  f.strategy = MachineMapper(CostModel(f.machine, toy_efficiency())).map(g);
  f.pipeline_stages = 2, f.micro_batches = 4, f.schedule = PipelineSchedule::kExplicit;
  f.programs = parse_pipeline_programs("F0 F1 F2 B0 F3 B1 B2 B3\nF0 B0 F1 B1 F2 B2 F3 B3\n", "order");
  const std::string text = strategy_to_json(f);
  EXPECT_NE(text.find("\"F0 F1 F2 B0 F3 B1 B2 B3\""), std::string::npos) << text;
  const StrategyFile back = strategy_from_json(text, "s.json");
  EXPECT_EQ(back.schedule, PipelineSchedule::kExplicit);
  EXPECT_EQ(back.programs, f.programs);
  std::string broken = text;
  broken.replace(broken.find("\"F0 B0 F1"), 9, "\"F0 Q0 F1");
  try {
    strategy_from_json(broken, "s.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("s.json: pipeline.programs: programs: line 2: 'Q0'", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace pcgx::search
