// Which backend trains: names, what auto means on this machine, and a
// CUDA choice without a GPU saying why.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/runner/backend_choice.h"

namespace pcgx::runner {
namespace {

TEST(BackendChoice, NamesAreDistinct) {
  std::set<std::string> names;
  for (const BackendKind k : kBackendKinds) names.insert(backend_name(k));
  EXPECT_EQ(names.size(), std::size(kBackendKinds));
  EXPECT_EQ(names, (std::set<std::string>{"auto", "cpu", "mpi", "cuda"}));
}

TEST(BackendChoice, AutoTakesAGpuWhereThereIsOne) {
  std::string why;
  const bool gpu = cuda_devices(&why) > 0;
  EXPECT_EQ(resolve(BackendKind::kAuto, false), gpu ? BackendKind::kCuda : BackendKind::kCpu);
  EXPECT_EQ(resolve(BackendKind::kAuto, true), gpu ? BackendKind::kCuda : BackendKind::kMpi);
  EXPECT_EQ(resolve(BackendKind::kCpu, true), BackendKind::kCpu);
  EXPECT_FALSE(backend_factory({BackendKind::kCpu, false, Precision::kTf32}));  // the host's: no factory
  if (gpu) {
    EXPECT_TRUE(backend_factory({BackendKind::kCuda, false, Precision::kTf32}));
    return;
  }
  EXPECT_FALSE(why.empty());
  try {
    backend_factory({BackendKind::kCuda, false, Precision::kTf32});
    ADD_FAILURE() << "a CUDA backend without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pcgx::runner
