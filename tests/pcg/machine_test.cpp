#include <gtest/gtest.h>

#include <filesystem>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/machine.h"

namespace pcgx {
namespace {

const std::string kMachines = std::string(PCGX_SOURCE_DIR) + "/data/machines/";

TEST(Machine, EveryBundledMachineLoadsAndRoundTrips) {
  int count = 0;
  for (const auto& e : std::filesystem::directory_iterator(kMachines)) {
    SCOPED_TRACE(e.path().string());
    const Machine m = load_machine(e.path().string());
    EXPECT_EQ(m.name + ".json", e.path().filename().string());
    EXPECT_GT(m.device.peak_flops, 0);
    const Machine again = machine_from_json(machine_to_json(m), "roundtrip");
    EXPECT_EQ(machine_to_json(again), machine_to_json(m));
    ++count;
  }
  EXPECT_GE(count, 4);
}

// Selene (Megatron-LM's published runs, issue 32): DGX A100 nodes as the
// dgx-a100 file has them, enough of them for the largest run (3,072 GPUs).
TEST(Machine, SeleneIsDgxA100NodesForMegatronsRuns) {
  const Machine selene = load_machine(kMachines + "selene.json"), dgx = load_machine(kMachines + "dgx-a100.json");
  EXPECT_GE(selene.num_devices(), 3072);
  Machine same = selene;  // but for its name, size and description
  same.name = dgx.name, same.nodes = dgx.nodes, same.description = dgx.description;
  EXPECT_EQ(machine_to_json(same), machine_to_json(dgx));
}

TEST(Machine, SummitLinkLevels) {
  const Machine m = load_machine(kMachines + "summit.json");
  EXPECT_EQ(m.num_devices(), 192);
  EXPECT_EQ(m.link_between(0, 2).name, "nvlink");
  EXPECT_EQ(m.link_between(2, 3).name, "xbus");
  EXPECT_EQ(m.link_between(5, 6).name, "infiniband-edr");
}

TEST(Machine, WithDevicesTakesWholeNodesFirst) {
  const Machine m = load_machine(kMachines + "dgx-h100.json");
  EXPECT_EQ(m.with_devices(4).num_devices(), 4);
  EXPECT_EQ(m.with_devices(4).nodes, 1);
  EXPECT_EQ(m.with_devices(64).nodes, 8);
  EXPECT_THROW(m.with_devices(12), Error);
  EXPECT_THROW(m.with_devices(1000), Error);
}

TEST(Machine, ErrorsNameTheField) {
  auto message = [](const std::string& text) {
    try {
      machine_from_json(text, "m.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = R"({"format_version": 1, "name": "x", "nodes": 1, "devices_per_node": 4, )";
  const std::string dev = R"("device": {"name": "d", "peak_flops": 1, "memory_bandwidth": 1, "memory_capacity": 1}, )";
  EXPECT_EQ(message(head + dev + R"("links": [{"name": "a", "span": 3, "bandwidth": 1, "latency": 0}, {"name": "b", "span": 0, "bandwidth": 1, "latency": 0}]})"),
            "m.json: links[0].span: must divide the machine's 4 devices");
  EXPECT_EQ(message(head + dev + R"("links": [{"name": "a", "span": 4, "bandwidth": 1, "latency": 0}, {"name": "b", "span": 2, "bandwidth": 1, "latency": 0}]})"),
            "m.json: links[1].span: must be larger than the previous level's span 4");
  EXPECT_EQ(message(head + R"("device": {"name": "d", "peak_flops": -1, "memory_bandwidth": 1, "memory_capacity": 1}, "links": []})"),
            "m.json: device.peak_flops: must be positive, got -1.000000");
  EXPECT_EQ(message(head + dev + R"("links": []})"), "m.json: links: must be a non-empty array of link levels");
  EXPECT_EQ(message(head + dev + R"("links": [{"name": "a", "span": 2, "bandwidth": 1, "latency": 0}]})"),
            "m.json: links[0].span: the last level must span the whole machine (0 or 4)");
  EXPECT_EQ(message(R"({"format_version": 1, "name": "x"})"), "m.json: nodes: missing required field");
}

// A level may give a collective step its own latency (machine.h); without
// one a step costs the message latency, and the JSON keeps it only when set.
TEST(Machine, StepLatencyIsOptionalAndRoundTrips) {
  const std::string text = R"({"format_version": 1, "name": "x", "nodes": 1, "devices_per_node": 2,
    "device": {"name": "d", "peak_flops": 1, "memory_bandwidth": 1, "memory_capacity": 1},
    "links": [{"name": "a", "span": 0, "bandwidth": 1e9, "latency": 1e-6, "step_latency": 3e-6}]})";
  const Machine m = machine_from_json(text, "m.json");
  EXPECT_DOUBLE_EQ(m.links[0].step_latency, 3e-6);
  EXPECT_DOUBLE_EQ(m.links[0].collective_latency(), 3e-6);
  EXPECT_DOUBLE_EQ(machine_from_json(machine_to_json(m), "again").links[0].step_latency, 3e-6);
  Machine plain = m;
  plain.links[0].step_latency = 0;
  EXPECT_DOUBLE_EQ(plain.links[0].collective_latency(), 1e-6);
  EXPECT_EQ(machine_to_json(plain).find("step_latency"), std::string::npos);
  std::string bad = text;
  bad.replace(bad.find("3e-6"), 4, "-1");
  try {
    machine_from_json(bad, "m.json");
    FAIL() << "a negative step latency was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("links[0].step_latency"), std::string::npos) << e.what();
  }
}

// Whether a device computes while it communicates is the device's: true
// unless the file says otherwise, kept in the JSON only when false, and a
// boolean or an error naming the field.
TEST(Machine, OverlappingCommunicationIsOptionalAndRoundTrips) {
  const std::string text = R"({"format_version": 1, "name": "x", "nodes": 1, "devices_per_node": 2,
    "device": {"name": "d", "peak_flops": 1, "memory_bandwidth": 1, "memory_capacity": 1, "overlaps_communication": false},
    "links": [{"name": "a", "span": 0, "bandwidth": 1e9, "latency": 1e-6}]})";
  const Machine m = machine_from_json(text, "m.json");
  EXPECT_FALSE(m.device.overlaps_communication);
  EXPECT_FALSE(machine_from_json(machine_to_json(m), "again").device.overlaps_communication);
  Machine plain = m;
  plain.device.overlaps_communication = true;
  EXPECT_EQ(machine_to_json(plain).find("overlaps_communication"), std::string::npos);
  EXPECT_TRUE(machine_from_json(machine_to_json(plain), "again").device.overlaps_communication);
  EXPECT_FALSE(load_machine(kMachines + "cpu-host.json").device.overlaps_communication);
  EXPECT_TRUE(load_machine(kMachines + "dgx-h100.json").device.overlaps_communication);
  std::string bad = text;
  bad.replace(bad.find("false"), 5, "\"no\"");
  try {
    machine_from_json(bad, "m.json");
    FAIL() << "a string was accepted for a boolean";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "m.json: device.overlaps_communication: must be a boolean, got string");
  }
}

// Peak FLOP/s per precision: optional, every key a precision, kept in the
// JSON when given; a precision the table leaves out cannot be priced.
TEST(Machine, PeakPerPrecisionIsOptionalAndRoundTrips) {
  const std::string text = R"({"format_version": 1, "name": "x", "nodes": 1, "devices_per_node": 2,
    "device": {"name": "d", "peak_flops": 2, "peak_flops_by_precision": {"tf32": 2, "bf16": 4}, "memory_bandwidth": 1, "memory_capacity": 1},
    "links": [{"name": "a", "span": 0, "bandwidth": 1e9, "latency": 1e-6}]})";
  const Machine m = machine_from_json(text, "m.json");
  EXPECT_DOUBLE_EQ(m.device.peak(Precision::kBf16), 4);
  EXPECT_DOUBLE_EQ(m.device.peak(Precision::kTf32), 2);
  EXPECT_THROW(m.device.peak(Precision::kFp16), FieldError);
  EXPECT_EQ(machine_to_json(machine_from_json(machine_to_json(m), "again")), machine_to_json(m));
  Machine plain = m;
  plain.device.peak_flops_by_precision = {};
  EXPECT_EQ(machine_to_json(plain).find("peak_flops_by_precision"), std::string::npos);
  EXPECT_DOUBLE_EQ(plain.device.peak(Precision::kFp16), 2);
  std::string bad = text;
  bad.replace(bad.find("\"bf16\""), 6, "\"fp8\"");
  try {
    machine_from_json(bad, "m.json");
    FAIL() << "an unknown precision was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "m.json: device.peak_flops_by_precision.fp8: unknown precision (fp32, tf32, bf16, fp16)");
  }
  // The bundled GPU machines price every precision but Volta's BF16.
  for (const char* name : {"dgx-a100", "dgx-h100", "dgx-h200", "selene", "jean-zay-a100"})
    for (const Precision p : kPrecisions) EXPECT_GT(load_machine(kMachines + name + ".json").device.peak(p), 0) << name;
  // The H200: the H100's processor, its memory faster and larger.
  const Machine h100 = load_machine(kMachines + "dgx-h100.json"), h200 = load_machine(kMachines + "dgx-h200.json");
  for (const Precision p : kPrecisions) EXPECT_DOUBLE_EQ(h200.device.peak(p), h100.device.peak(p));
  EXPECT_GT(h200.device.memory_bandwidth, h100.device.memory_bandwidth);
  EXPECT_GT(h200.device.memory_capacity, h100.device.memory_capacity);
  EXPECT_DOUBLE_EQ(load_machine(kMachines + "dgx-a100.json").device.peak(Precision::kBf16), 312e12);
  EXPECT_THROW(load_machine(kMachines + "summit.json").device.peak(Precision::kBf16), FieldError);
}

}  // namespace
}  // namespace pcgx
