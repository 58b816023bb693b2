// .npy files and user data (npy.h, dataset.h): round trips, the header
// variants NumPy writes, malformed files named with their field, and a
// model trained on data from files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/dataset.h"
#include "pcgx/runtime/npy.h"
#include "pcgx/runtime/trainer.h"
#include "temp_dir.h"

namespace pcgx::runtime {
namespace {

namespace fs = std::filesystem;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_npy_test");
  return d;
}

// A .npy file as NumPy lays it out, for any dtype and header version.
void write_raw(const fs::path& p, int version, const std::string& descr, const std::string& shape, const std::string& data,
               const std::string& order = "False") {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }\n";
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  const size_t n = header.size();
  for (int i = 0; i < (version == 1 ? 2 : 4); ++i) out += static_cast<char>((n >> (8 * i)) & 0xFF);
  out += header + data;
  std::ofstream(p, std::ios::binary) << out;
}

template <class T>
std::string raw(std::initializer_list<T> v) {
  std::string s(v.size() * sizeof(T), '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Npy, RoundTripAndNumPyVariants) {
  Tensor<float> t({2, 3});
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = 0.5f * static_cast<float>(i) - 1;
  write_npy((dir() / "t.npy").string(), t);
  const Tensor<float> back = read_npy((dir() / "t.npy").string());
  EXPECT_EQ(back.shape, t.shape);
  EXPECT_EQ(back.data, t.data);
  Tensor<float> v({4});
  write_npy((dir() / "v.npy").string(), v);
  EXPECT_EQ(read_npy((dir() / "v.npy").string()).shape, (std::vector<int64_t>{4}));

  write_raw(dir() / "i8.npy", 1, "<i8", "(3,)", raw<int64_t>({0, 7, 12}));
  EXPECT_EQ(read_npy((dir() / "i8.npy").string()).data, (std::vector<float>{0, 7, 12}));
  write_raw(dir() / "f8.npy", 2, "<f8", "(1, 2)", raw<double>({0.25, -3.5}));
  const Tensor<float> f8 = read_npy((dir() / "f8.npy").string());
  EXPECT_EQ(f8.shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(f8.data, (std::vector<float>{0.25f, -3.5f}));
  write_raw(dir() / "i4.npy", 3, "<i4", "(2,)", raw<int32_t>({-1, 5}));
  EXPECT_EQ(read_npy((dir() / "i4.npy").string()).data, (std::vector<float>{-1, 5}));
}

TEST(Npy, MalformedFilesNameTheField) {
  const std::string p = (dir() / "bad.npy").string();
  std::ofstream(p, std::ios::binary) << "PK\x03\x04 not numpy";
  EXPECT_NE(error_of([&] { read_npy(p); }).find(p + ": magic:"), std::string::npos);
  write_raw(p, 1, ">f4", "(2,)", raw<float>({1, 2}));
  EXPECT_NE(error_of([&] { read_npy(p); }).find(p + ": descr: unsupported dtype '>f4'"), std::string::npos);
  write_raw(p, 1, "<f4", "(2, 2)", raw<float>({1, 2, 3, 4}), "True");
  EXPECT_NE(error_of([&] { read_npy(p); }).find(p + ": fortran_order:"), std::string::npos);
  write_raw(p, 1, "<f4", "(3,)", raw<float>({1, 2}));
  EXPECT_NE(error_of([&] { read_npy(p); }).find(p + ": data: 8 bytes of data, the shape needs 12"), std::string::npos);
  EXPECT_NE(error_of([&] { read_npy((dir() / "absent.npy").string()); }).find("absent.npy"), std::string::npos);
}

// Headers made to break a reader: each is an error naming the file and
// the field, never a crash or a huge allocation (issue 17's reproducers).
TEST(Npy, HostileHeadersAreErrors) {
  const std::string p = (dir() / "hostile.npy").string();
  auto says = [&](const std::string& field_and_why) {
    const std::string e = error_of([&] { read_npy(p); });
    EXPECT_NE(e.find(p + ": " + field_and_why), std::string::npos) << e;
  };
  // A 40 KB header (std::regex recursed per character here).
  {
    std::string header = "{'descr': '<f4', 'comment': '" + std::string(40000, 'x') + "', 'fortran_order': False, 'shape': (2,), }\n";
    std::string out = "\x93NUMPY";
    out += '\x02', out += '\0';
    for (int i = 0; i < 4; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
    std::ofstream(p, std::ios::binary) << out + header + raw<float>({1, 2});
    EXPECT_EQ(read_npy(p).data, (std::vector<float>{1, 2}));
  }
  // Element counts that overflow, or that the file cannot hold: refused
  // before anything is allocated.
  write_raw(p, 1, "<f4", "(1152921504606846976, 16)", raw<float>({1, 2}));
  says("shape: the element count overflows");
  // A zero dimension hid the overflow of the others (fuzz_npy found it).
  write_raw(p, 1, "<f4", "(4, 0, 4303684769121936, 2222)", "");
  says("shape: the element count overflows");
  write_raw(p, 1, "<f4", "(20000000, 16)", raw<float>({1, 2}));
  says("data: 8 bytes of data, the shape needs 1280000000");
  write_raw(p, 1, "<f4", "(99999999999999999999, 16)", raw<float>({1, 2}));
  says("shape: a dimension is too large");
  write_raw(p, 1, "<f4", "(16, -16)", raw<float>({1, 2}));
  says("shape: a negative dimension");
  write_raw(p, 1, "<f4", "(2; 2)", raw<float>({1, 2}));
  says("shape: expected ',' or ')'");
  write_raw(p, 1, "<f4", "[2]", raw<float>({1, 2}));
  says("shape: expected '('");
  write_raw(p, 1, "<f4", "(2,)", raw<float>({1, 2}), "Maybe");
  says("fortran_order: expected True or False");
  std::ofstream(p, std::ios::binary) << std::string("\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'}", 26);
  says("fortran_order: missing");
  // Empty and scalar shapes are fine.
  write_raw(p, 1, "<f4", "(0, 3)", "");
  EXPECT_EQ(read_npy(p).shape, (std::vector<int64_t>{0, 3}));
  write_raw(p, 1, "<f4", "()", raw<float>({7}));
  EXPECT_EQ(read_npy(p).data, (std::vector<float>{7}));
}

// mlp-tiny (x [8, 16], target [8, 16]) on 16 samples: two batches, cycled.
TEST(NpyDataset, TrainsOnFilesAndCyclesThem) {
  const Graph g = build_model("mlp-tiny");
  const fs::path d = dir() / "mlp";
  fs::create_directories(d);
  Tensor<float> x({16, 16}), y({16, 16});
  for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = std::sin(0.1f * static_cast<float>(i)), y.data[i] = 0.5f * std::cos(0.07f * static_cast<float>(i));
  write_npy((d / "x.npy").string(), x);
  write_npy((d / "target.npy").string(), y);
  const NpyDataset data(g, d.string());
  EXPECT_EQ(data.samples(), 16);
  EXPECT_EQ(data.batch(0).at("x").shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(data.batch(1).at("x").data[0], x.data[8 * 16]);
  EXPECT_EQ(data.batch(2).at("target").data, data.batch(0).at("target").data);

  TrainOptions o;
  o.steps = 20, o.optimizer.lr = 0.05, o.data = &data;
  const TrainResult r = train(g, {}, 1, o);
  EXPECT_TRUE(r.target.empty());
  EXPECT_NE(r.data.find("16 samples, 2 batches"), std::string::npos) << r.data;
  EXPECT_LT(r.losses.back(), r.losses.front());
  EXPECT_TRUE(std::isfinite(r.losses.back()));
}

TEST(NpyDataset, FilesThatDoNotFitTheModelAreErrors) {
  const Graph g = build_model("mlp-tiny");
  const fs::path d = dir() / "bad";
  fs::create_directories(d);
  write_npy((d / "x.npy").string(), Tensor<float>({16, 16}));
  EXPECT_NE(error_of([&] { NpyDataset(g, d.string()); }).find("target.npy: missing"), std::string::npos);
  write_npy((d / "target.npy").string(), Tensor<float>({16, 15}));
  EXPECT_NE(error_of([&] { NpyDataset(g, d.string()); }).find("target.npy: shape: expected [N, 16]"), std::string::npos);
  write_npy((d / "target.npy").string(), Tensor<float>({8, 16}));
  EXPECT_NE(error_of([&] { NpyDataset(g, d.string()); }).find("8 samples, but"), std::string::npos);
  write_npy((d / "x.npy").string(), Tensor<float>({12, 16}));
  write_npy((d / "target.npy").string(), Tensor<float>({12, 16}));
  EXPECT_NE(error_of([&] { NpyDataset(g, d.string()); }).find("not a positive multiple of the batch 8"), std::string::npos);
  EXPECT_NE(error_of([&] { NpyDataset(g, (d / "nowhere").string()); }).find("not a directory"), std::string::npos);
}

}  // namespace
}  // namespace pcgx::runtime
