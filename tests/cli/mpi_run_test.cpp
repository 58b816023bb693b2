// The MPI backend end to end: `mpirun -np 4 pcgx run mlp-tiny --optimize`
// trains on four processes over loopback and reaches exactly what four
// in-process virtual devices reach. Skips (saying why) when pcgx was built
// without MPI.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;
using pcgx::testing::run_shell;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_mpi_test");
  return d;
}

#ifdef PCGX_MPIEXEC
// CI runs as root on 2 cores: OpenMPI refuses both unless told; in
// containers the shared-memory transport's single-copy mode is not allowed.
std::string mpirun(int ranks) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
         "OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mpi_yield_when_idle=1 " +
         std::string(PCGX_MPIEXEC) + " -np " + std::to_string(ranks) + " " + PCGX_BINARY;
}
#endif

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

TEST(MpiRun, FourRanksTrainLikeFourVirtualDevices) {
#ifndef PCGX_MPIEXEC
  GTEST_SKIP() << "pcgx was built without MPI (scripts/install_deps.sh installs libopenmpi-dev)";
#else
  const std::string common = " run mlp-tiny --optimize --steps 50 --batches 1";
  const auto m = run_shell(mpirun(4) + common + " --report " + (dir() / "mpi.json").string() + " --plot " + (dir() / "mpi.svg").string());
  ASSERT_EQ(m.code, 0) << m.out;
  EXPECT_NE(m.out.find("4 (cpu, MPI: one rank each)"), std::string::npos) << m.out;
  const auto t = run(common + " --devices 4 --report " + (dir() / "threads.json").string() + " --plot " + (dir() / "threads.svg").string());
  ASSERT_EQ(t.code, 0) << t.out;
  const auto a = read_json(dir() / "mpi.json"), b = read_json(dir() / "threads.json");
  EXPECT_EQ(a["devices"], 4);
  ASSERT_EQ(a["loss"].size(), 50u);
  ASSERT_EQ(b["loss"].size(), 50u);
  for (size_t i = 0; i < 50; ++i) EXPECT_NEAR(a["loss"][i].get<double>(), b["loss"][i].get<double>(), 1e-6 * b["loss"][i].get<double>()) << i;
  EXPECT_LT(a["loss"][49].get<double>(), a["loss"][0].get<double>());
  EXPECT_EQ(a["bytes_between_devices"], b["bytes_between_devices"]);
  // What the ranks sent per step is what the plan's count says.
  EXPECT_GT(a["bytes_per_step"].get<double>(), 0);
  EXPECT_EQ(a["bytes_per_step"].get<double>(), a["predicted_bytes_per_step"].get<double>());
#endif
}

// A ZeRO plan: the ranks reduce-scatter and all-gather over MPI as the
// threads do in-process.
TEST(MpiRun, ShardedOptimizerStateTrainsLikeFourVirtualDevices) {
#ifndef PCGX_MPIEXEC
  GTEST_SKIP() << "pcgx was built without MPI (scripts/install_deps.sh installs libopenmpi-dev)";
#else
  const std::string plan = (dir() / "zero1.json").string();
  const auto o = run("optimize mlp-tiny --machine cpu-host --devices 4 --search data-parallel --zero 1 -q -o " + plan);
  ASSERT_EQ(o.code, 0) << o.out;
  const std::string common = " run " + plan + " --steps 10 --batches 1 --optimizer adam --no-plot";
  const auto m = run_shell(mpirun(4) + common + " --report " + (dir() / "zmpi.json").string());
  ASSERT_EQ(m.code, 0) << m.out;
  EXPECT_NE(m.out.find("ZeRO stage            1"), std::string::npos) << m.out;
  const auto t = run(common + " --report " + (dir() / "zthreads.json").string());
  ASSERT_EQ(t.code, 0) << t.out;
  const auto a = read_json(dir() / "zmpi.json"), b = read_json(dir() / "zthreads.json");
  EXPECT_EQ(a["zero"], 1);
  EXPECT_EQ(a["loss"], b["loss"]);
  EXPECT_EQ(a["bytes_between_devices"], b["bytes_between_devices"]);
  EXPECT_EQ(a["bytes_per_step"].get<double>(), a["predicted_bytes_per_step"].get<double>());
#endif
}

// An interlaced pipeline (docs/plans.md): its joint steps run by every
// rank, the ranks' messages and collectives pair up as the threads' do.
TEST(MpiRun, AnInterlacedPipelineTrainsLikeFourVirtualDevices) {
#ifndef PCGX_MPIEXEC
  GTEST_SKIP() << "pcgx was built without MPI (scripts/install_deps.sh installs libopenmpi-dev)";
#else
  const std::string plan = (dir() / "interlaced.json").string();
  const auto o = run("optimize gpt-tiny --plan " + std::string(PCGX_SOURCE_DIR) + "/data/plans/gpt-interlaced-4.json --machine cpu-host --devices 4 -q -o " + plan);
  ASSERT_EQ(o.code, 0) << o.out;
  const std::string common = " run " + plan + " --steps 3 --no-plot";
  const auto m = run_shell(mpirun(4) + common + " --report " + (dir() / "imp.json").string());
  ASSERT_EQ(m.code, 0) << m.out;
  const auto t = run(common + " --report " + (dir() / "ithreads.json").string());
  ASSERT_EQ(t.code, 0) << t.out;
  const auto a = read_json(dir() / "imp.json"), b = read_json(dir() / "ithreads.json");
  EXPECT_EQ(a["loss"], b["loss"]);
  EXPECT_EQ(a["bytes_per_step"].get<double>(), a["predicted_bytes_per_step"].get<double>());
#endif
}

TEST(MpiRun, DevicesMustMatchTheRanks) {
#ifndef PCGX_MPIEXEC
  GTEST_SKIP() << "pcgx was built without MPI (scripts/install_deps.sh installs libopenmpi-dev)";
#else
  const auto r = run_shell(mpirun(2) + " run mlp-tiny --devices 4 --steps 2 --report " + (dir() / "x.json").string());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("error: --devices: 4 given, but there are 2 MPI ranks"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir() / "x.json"));
#endif
}

}  // namespace
