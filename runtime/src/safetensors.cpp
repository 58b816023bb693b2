#include "pcgx/runtime/safetensors.h"

#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"

namespace pcgx::runtime {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

// A header larger than this is not a weights file (the format's own
// readers cap it at 100 MB).
constexpr uint64_t kMaxHeader = 100'000'000;

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000 | (man << 13);  // inf, nan
  } else if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400));
      bits = sign | ((127 - 15 - e) << 23) | ((man & 0x3FF) << 13);
    }
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

size_t dtype_size(const std::string& d) {
  if (d == "F32" || d == "I32") return 4;
  if (d == "F64" || d == "I64") return 8;
  if (d == "F16" || d == "BF16") return 2;
  return 0;
}

template <class T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

NamedTensors safetensors_from_bytes(const std::string& bytes, const std::string& source, std::map<std::string, std::string>* metadata) {
  if (bytes.size() < 8) throw Error(source + ": not a safetensors file (shorter than its 8-byte header length)");
  const uint64_t n = load<uint64_t>(bytes.data());
  if (n > kMaxHeader || n > bytes.size() - 8) throw Error(source + ": header length " + std::to_string(n) + " exceeds the file");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": header: not JSON (" + std::string(e.what()) + ")");
  }
  if (!header.is_object()) throw Error(source + ": header: not a JSON object");
  const size_t data_start = 8 + n, data_size = bytes.size() - data_start;
  NamedTensors out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw Error(source + ": __metadata__: not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw Error(source + ": __metadata__." + k + ": not a string");
        if (metadata) (*metadata)[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string at = source + ": " + name;
    if (!entry.is_object()) throw Error(at + ": not an object");
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) throw Error(at + ".dtype: missing");
    const std::string dtype = entry["dtype"].get<std::string>();
    const size_t size = dtype_size(dtype);
    if (size == 0) throw Error(at + ".dtype: '" + dtype + "' is not one pcgx reads (F32, F64, F16, BF16, I64, I32)");
    if (!entry.contains("shape") || !entry["shape"].is_array()) throw Error(at + ".shape: missing");
    std::vector<int64_t> shape;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) throw Error(at + ".shape: not a list of non-negative integers");
      shape.push_back(d.get<int64_t>());
    }
    const auto& off = entry.contains("data_offsets") ? entry["data_offsets"] : nlohmann::json();
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw Error(at + ".data_offsets: not [BEGIN, END]");
    const auto begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size) throw Error(at + ".data_offsets: [" + std::to_string(begin) + ", " + std::to_string(end) + "] beyond the " + std::to_string(data_size) + " bytes of data");
    Tensor<float> t(shape);
    if (end - begin != t.data.size() * size)
      throw Error(at + ".data_offsets: " + std::to_string(end - begin) + " bytes for " + std::to_string(t.data.size()) + " " + dtype + " elements");
    const char* p = bytes.data() + data_start + begin;
    for (size_t i = 0; i < t.data.size(); ++i, p += size) {
      if (dtype == "F32") t.data[i] = load<float>(p);
      else if (dtype == "F64") t.data[i] = static_cast<float>(load<double>(p));
      else if (dtype == "F16") t.data[i] = half_to_float(load<uint16_t>(p));
      else if (dtype == "BF16") t.data[i] = std::bit_cast<float>(static_cast<uint32_t>(load<uint16_t>(p)) << 16);
      else if (dtype == "I64") t.data[i] = static_cast<float>(load<int64_t>(p));
      else t.data[i] = static_cast<float>(load<int32_t>(p));
    }
    out.emplace(name, std::move(t));
  }
  return out;
}

NamedTensors read_safetensors(const std::string& path) { return safetensors_from_bytes(read_text_file(path), path); }

std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t at = 0;
  for (const auto& [name, t] : tensors) {
    const uint64_t size = t.data.size() * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {at, at + size}}};
    at += size;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  while ((8 + h.size()) % 8 != 0) h += ' ';  // the data starts aligned, as the format's writers pad
  std::string out(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  out += h;
  out.reserve(out.size() + at);
  for (const auto& [name, t] : tensors) out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
  return out;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  write_text_file_atomic(path, safetensors_bytes(tensors, metadata));
}

}  // namespace pcgx::runtime
