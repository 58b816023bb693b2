// --bucket-mb: the gradient bucket size the cost model and the runtime
// use (PyTorch DDP's bucket_cap_mb); smaller buckets mean more of them, a
// value that is not a positive number is one error line, exit code 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_bucket_test");
  return d;
}

int64_t buckets(const std::string& extra) {
  const std::string s = (dir() / "dp.json").string();
  const auto r = run("optimize bert-large-tiny --machine dgx-h100 --devices 8 --search data-parallel -q -o " + s + extra);
  EXPECT_EQ(r.code, 0) << r.out;
  std::ifstream in(s);
  return nlohmann::json::parse(in)["predicted"]["buckets"].get<int64_t>();
}

TEST(BucketOption, SmallerBucketsAreMoreBuckets) {
  const int64_t standard = buckets(""), small = buckets(" --bucket-mb 0.01");
  EXPECT_GE(standard, 1);
  EXPECT_GT(small, standard);
}

TEST(BucketOption, NotAPositiveNumberIsExitCode2) {
  const std::string out = (dir() / "never.json").string();
  for (const char* v : {"0", "-1", "nan", "inf"}) {
    const auto r = run(std::string("optimize mlp-tiny --machine cpu-host --devices 2 -q --bucket-mb ") + v + " -o " + out);
    EXPECT_EQ(r.code, 2) << v << ": " << r.out;
    EXPECT_EQ(r.out.rfind("error: --bucket-mb: ", 0), 0u) << v << ": " << r.out;
    const auto t = run(std::string("run mlp-tiny --steps 1 --bucket-mb ") + v);
    EXPECT_EQ(t.code, 2) << v << ": " << t.out;
    EXPECT_EQ(t.out.rfind("error: --bucket-mb: ", 0), 0u) << v << ": " << t.out;
  }
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
