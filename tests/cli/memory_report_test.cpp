// What `pcgx optimize` and `pcgx simulate` print of memory: under "memory
// per device", one line per distinct breakdown by kind (weights, master,
// gradients, optimizer, activations, transient), busiest first, naming its
// devices, for plans in one batch, accumulating and pipelined alike.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_memory_report_test");
  return d;
}

struct BreakdownLine {
  std::vector<int64_t> devices;
  std::string total;  // "13.50 KiB"
};

// The lines after "memory per device" indented by `indent` plus two:
// "  devices 0..1, 4..5   60.25 KiB: weights ...".
std::vector<BreakdownLine> breakdown(const std::string& out, const std::string& indent) {
  std::vector<BreakdownLine> lines;
  const size_t at = out.find(indent + "memory per device");
  EXPECT_NE(at, std::string::npos) << out;
  if (at == std::string::npos) return lines;
  std::istringstream in(out.substr(at));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line) && line.rfind(indent + "  device", 0) == 0) {
    BreakdownLine b;
    // "<indent>  devices 0..1, 4..5   60.25 KiB: weights ...": the total the
    // two words before the colon, the devices the words before them.
    const size_t colon = line.find(": weights ");
    EXPECT_NE(colon, std::string::npos) << line;
    const std::string head = line.substr(0, colon);
    const size_t unit = head.rfind(' '), number = head.rfind(' ', unit - 1);
    b.total = head.substr(number + 1);
    std::istringstream words(head.substr(head.find("device"), number - head.find("device")));
    std::string word;
    words >> word;  // "device" or "devices"
    while (words >> word) {
      if (!word.empty() && word.back() == ',') word.pop_back();
      const size_t dots = word.find("..");
      if (dots == std::string::npos) {
        b.devices.push_back(std::stoll(word));
        continue;
      }
      for (int64_t d = std::stoll(word.substr(0, dots)); d <= std::stoll(word.substr(dots + 2)); ++d) b.devices.push_back(d);
    }
    EXPECT_NE(line.find(", master "), std::string::npos) << line;
    EXPECT_NE(line.find(", gradients "), std::string::npos) << line;
    EXPECT_NE(line.find(", optimizer "), std::string::npos) << line;
    EXPECT_NE(line.find(", activations "), std::string::npos) << line;
    EXPECT_NE(line.find(", transient "), std::string::npos) << line;
    lines.push_back(b);
  }
  return lines;
}

// "13.50 KiB" in bytes.
double bytes(const std::string& figure) {
  const double x = std::stod(figure);
  const std::string unit = figure.substr(figure.find(' ') + 1);
  return unit == "GiB" ? x * 1073741824.0 : unit == "MiB" ? x * 1048576.0 : unit == "KiB" ? x * 1024.0 : x;
}

const char* const kJoined = "the plan joined, as simulated and run: ";

// The figures "memory per device" states: the search's max, and for a
// pipelined plan whose joined count differs, the joined plan's ("" if not).
struct Headline {
  std::string search, joined;
};
Headline headline(const std::string& out) {
  const size_t at = out.find("memory per device     ");
  if (at == std::string::npos) return {"(no memory line)", ""};
  const std::string line = out.substr(at, out.find('\n', at) - at);
  Headline h{line.substr(22, line.find(" max of ") - 22), ""};
  if (const size_t j = line.find(kJoined); j != std::string::npos) {
    const std::string rest = line.substr(j + std::string(kJoined).size());
    h.joined = rest.substr(0, rest.find_first_of(",)"));
  }
  return h;
}

// The busiest device's figure: the joined plan's where stated, as the lines count it.
std::string headline_max(const std::string& out) {
  const Headline h = headline(out);
  return h.joined.empty() ? h.search : h.joined;
}

// Every device in exactly one line, the busiest first and each line's
// total no more than the one before.
void expect_every_device_once(const std::vector<BreakdownLine>& lines, int64_t devices, const std::string& busiest) {
  ASSERT_FALSE(lines.empty());
  for (size_t l = 1; l < lines.size(); ++l) EXPECT_GE(bytes(lines[l - 1].total), bytes(lines[l].total)) << l;
  std::multiset<int64_t> seen;
  for (const BreakdownLine& b : lines) seen.insert(b.devices.begin(), b.devices.end());
  EXPECT_EQ(static_cast<int64_t>(seen.size()), devices);
  for (int64_t d = 0; d < devices; ++d) EXPECT_EQ(seen.count(d), 1u) << "device " << d;
  EXPECT_EQ(lines[0].total, busiest);
}

TEST(MemoryReport, EveryDeviceByKindInOneBatchAccumulatingAndPipelined) {
  const struct {
    std::string flags;
    int64_t devices;
    size_t least_lines;  // distinct breakdowns at least
    std::string says;    // what the plan is
  } plans[] = {
      // (Where the search's count and the joined plan's differ:
      // TheTwoCountsDifferByHowABoundaryCrosses.)
      {"mlp-tiny --machine cpu-host --devices 2", 2, 1, "gradient accumulation none"},
      {"mlp-tiny --machine cpu-host --devices 4 --micro-batches 2", 4, 1, "gradient accumulation 2 micro-batches"},
      // Two stages keep different layers and 1F1B's in-flight counts.
      // (Its boundary read by one Linear alone: both counts agree.)
      {"mlp-tiny --set batch=64 --machine cpu-host --devices 4 --pipeline --stages 2 --micro-batches 4 --search data-parallel", 4, 2,
       "pipeline              2 stages"},
  };
  for (size_t i = 0; i < std::size(plans); ++i) {
    SCOPED_TRACE(plans[i].flags);
    const std::string s = (dir() / ("plan" + std::to_string(i) + ".json")).string();
    const auto o = run("optimize " + plans[i].flags + " -q -o " + s);
    ASSERT_EQ(o.code, 0) << o.out;
    EXPECT_NE(o.out.find(plans[i].says), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find(kJoined), std::string::npos) << o.out;
    const std::vector<BreakdownLine> lines = breakdown(o.out, "");
    EXPECT_GE(lines.size(), plans[i].least_lines) << o.out;
    expect_every_device_once(lines, plans[i].devices, headline_max(o.out));
    // simulate counts the same plan the same way, line for line.
    const auto sim = run("simulate " + s);
    ASSERT_EQ(sim.code, 0) << sim.out;
    const std::vector<BreakdownLine> simulated = breakdown(sim.out, "  ");
    ASSERT_EQ(simulated.size(), lines.size()) << sim.out;
    for (size_t l = 0; l < lines.size(); ++l) {
      EXPECT_EQ(simulated[l].devices, lines[l].devices) << l;
      EXPECT_EQ(simulated[l].total, lines[l].total) << l;
    }
  }
}

// Past eight distinct breakdowns, one line counts the rest. Megatron-LM's
// plan over 16 stages of one device: each stage holds another count of
// micro-batches, so sixteen distinct breakdowns. (With t = 2 the two
// devices of a group keep alike: a layer's unsplit operators run on both.)
TEST(MemoryReport, ManyBreakdownsEndInACount) {
  const auto o = run("optimize gpt-tiny --set layers=16 --machine dgx-a100 --devices 16 --search megatron --tensor-parallel 1 "
                     "--pipeline-parallel 16 --micro-batch-size 1 -q -o " + (dir() / "megatron.json").string());
  ASSERT_EQ(o.code, 0) << o.out;
  const std::vector<BreakdownLine> lines = breakdown(o.out, "");
  ASSERT_FALSE(lines.empty()) << o.out;
  EXPECT_EQ(lines.size(), 8u) << o.out;
  for (size_t l = 1; l < lines.size(); ++l) EXPECT_GE(bytes(lines[l - 1].total), bytes(lines[l].total)) << l;
  EXPECT_EQ(lines[0].total, headline_max(o.out)) << o.out;
  std::set<int64_t> named;
  for (const BreakdownLine& b : lines) named.insert(b.devices.begin(), b.devices.end());
  EXPECT_EQ(named.size(), 8u) << o.out;  // one device a line
  const size_t at = o.out.find("  ... ", o.out.find("memory per device"));
  ASSERT_NE(at, std::string::npos) << o.out;
  const std::string most = ", each at most ";
  const size_t m = o.out.find("  ... 8 more breakdowns on 8 devices" + most, at);
  ASSERT_EQ(m, at) << o.out;
  const size_t figure = o.out.find(most, m) + most.size();
  EXPECT_LE(bytes(o.out.substr(figure, o.out.find('\n', figure) - figure)), bytes(lines.back().total)) << o.out;
}

// The search counts each stage alone, the lines count the plan joined; they
// differ by how a stage boundary crosses (docs/training.md "What each
// device keeps"): through a layout change (Megatron-LM's plan) the joined
// plan frees the sender's copy, below the search's count; read directly by
// a layer's norm and its residual add (data parallelism in each stage) it
// keeps a received copy per reader, above.
TEST(MemoryReport, TheTwoCountsDifferByHowABoundaryCrosses) {
  const auto megatron = run("optimize gpt-tiny --set layers=8 --machine dgx-a100 --devices 16 --search megatron --tensor-parallel 2 "
                            "--pipeline-parallel 8 --micro-batch-size 1 -q -o " + (dir() / "crossing-layout.json").string());
  ASSERT_EQ(megatron.code, 0) << megatron.out;
  const Headline a = headline(megatron.out);
  ASSERT_FALSE(a.joined.empty()) << megatron.out;
  EXPECT_LT(bytes(a.joined), bytes(a.search)) << megatron.out;
  const auto direct = run("optimize gpt-tiny --machine dgx-a100 --devices 16 --pipeline --stages 8 --micro-batches 8 --search data-parallel -q -o " +
                          (dir() / "crossing-direct.json").string());
  ASSERT_EQ(direct.code, 0) << direct.out;
  const Headline b = headline(direct.out);
  ASSERT_FALSE(b.joined.empty()) << direct.out;
  EXPECT_GT(bytes(b.joined), bytes(b.search)) << direct.out;
}

}  // namespace
