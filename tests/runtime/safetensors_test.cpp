// The safetensors reader and writer: round trips, the dtypes other tools
// write, and malformed files as one error naming the file and the field.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "pcgx/pcg/error.h"
#include "pcgx/runtime/safetensors.h"

namespace pcgx::runtime {
namespace {

// A file made by hand: `header` as JSON, then `data`.
std::string file_of(const nlohmann::json& header, const std::string& data) {
  const std::string h = header.dump();
  std::string out(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  return out + h + data;
}

template <class T>
std::string bytes_of(std::initializer_list<T> v) {
  std::string s;
  for (T x : v) s.append(reinterpret_cast<const char*>(&x), sizeof x);
  return s;
}

TEST(Safetensors, RoundTripKeepsNamesShapesValuesAndMetadata) {
  NamedTensors t;
  t["dense0"] = Tensor<float>({2, 3});
  for (size_t i = 0; i < 6; ++i) t["dense0"].data[i] = 0.25f * static_cast<float>(i) - 1.f;
  t["bias"] = Tensor<float>({3});
  t["bias"].data = {1e-30f, -0.f, 3.5e30f};
  t["scalar"] = Tensor<float>(std::vector<int64_t>{});
  t["scalar"].data = {7.f};
  const std::string bytes = safetensors_bytes(t, {{"format", "pt"}});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "data aligned to 8 bytes";
  std::map<std::string, std::string> meta;
  const NamedTensors back = safetensors_from_bytes(bytes, "t.safetensors", &meta);
  EXPECT_EQ(meta.at("format"), "pt");
  ASSERT_EQ(back.size(), t.size());
  for (const auto& [name, x] : t) {
    EXPECT_EQ(back.at(name).shape, x.shape) << name;
    EXPECT_EQ(std::memcmp(back.at(name).data.data(), x.data.data(), x.data.size() * 4), 0) << name;
  }
}

TEST(Safetensors, ReadsTheDtypesOtherWritersUse) {
  nlohmann::json h;
  std::string data;
  auto add = [&](const std::string& name, const std::string& dtype, const std::string& d) {
    h[name] = {{"dtype", dtype}, {"shape", {2}}, {"data_offsets", {data.size(), data.size() + d.size()}}};
    data += d;
  };
  add("f64", "F64", bytes_of<double>({1.5, -2.25}));
  add("f16", "F16", bytes_of<uint16_t>({0x3C00, 0xC500}));   // 1, -5
  add("bf16", "BF16", bytes_of<uint16_t>({0x3F80, 0x4040}));  // 1, 3
  add("i64", "I64", bytes_of<int64_t>({7, -3}));
  add("i32", "I32", bytes_of<int32_t>({12, 0}));
  add("sub", "F16", bytes_of<uint16_t>({0x0001, 0x7C00}));  // the smallest subnormal, +inf
  const NamedTensors t = safetensors_from_bytes(file_of(h, data), "x");
  EXPECT_EQ(t.at("f64").data, (std::vector<float>{1.5f, -2.25f}));
  EXPECT_EQ(t.at("f16").data, (std::vector<float>{1.f, -5.f}));
  EXPECT_EQ(t.at("bf16").data, (std::vector<float>{1.f, 3.f}));
  EXPECT_EQ(t.at("i64").data, (std::vector<float>{7.f, -3.f}));
  EXPECT_EQ(t.at("i32").data, (std::vector<float>{12.f, 0.f}));
  EXPECT_FLOAT_EQ(t.at("sub").data[0], 5.9604645e-08f);
  EXPECT_TRUE(std::isinf(t.at("sub").data[1]));
}

TEST(Safetensors, MalformedFilesNameTheFileAndField) {
  const std::string ok = bytes_of<float>({1.f, 2.f});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"abc", "w.st: not a safetensors file"},
      {std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8), "w.st: header length"},
      {file_of(nlohmann::json::array(), ok), "w.st: header: not a JSON object"},
      {file_of({{"a", {{"dtype", "Q8"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}}, ok), "w.st: a.dtype: 'Q8'"},
      {file_of({{"a", {{"dtype", "F32"}, {"data_offsets", {0, 8}}}}}, ok), "w.st: a.shape: missing"},
      {file_of({{"a", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 8}}}}}, ok), "w.st: a.data_offsets: 8 bytes for 3"},
      {file_of({{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 16}}}}}, ok), "w.st: a.data_offsets: [0, 16] beyond"},
      {file_of({{"a", {{"dtype", "F32"}, {"shape", {-1}}, {"data_offsets", {0, 8}}}}}, ok), "w.st: a.shape: not a list"},
  };
  for (const auto& [bytes, want] : cases) {
    try {
      safetensors_from_bytes(bytes, "w.st");
      ADD_FAILURE() << "accepted: " << want;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(want, 0), 0u) << e.what();
    }
  }
  std::string header_only = file_of({{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}}, ok);
  header_only[9] = '!';  // JSON broken
  EXPECT_THROW(safetensors_from_bytes(header_only, "w.st"), Error);
}

}  // namespace
}  // namespace pcgx::runtime
