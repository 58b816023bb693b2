// .npy reading and writing (see npy.h).
#include "pcgx/runtime/npy.h"

#include <cstdint>
#include <cstring>
#include <regex>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"

namespace pcgx::runtime {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

// The value of `key` in the header dict, as written (a quoted string,
// True/False, or a parenthesized tuple).
std::string header_value(const std::string& header, const std::string& key, const std::string& path) {
  const std::regex re("['\"]" + key + "['\"]\\s*:\\s*('[^']*'|\"[^\"]*\"|True|False|\\([^)]*\\))");
  std::smatch m;
  if (!std::regex_search(header, m, re)) throw FileError(path, key, "missing from the .npy header");
  return m[1].str();
}

template <class T>
void convert(const char* raw, std::vector<float>& out) {
  for (size_t i = 0; i < out.size(); ++i) {
    T v;
    std::memcpy(&v, raw + i * sizeof(T), sizeof(T));
    out[i] = static_cast<float>(v);
  }
}

}  // namespace

Tensor<float> read_npy(const std::string& path) {
  const std::string bytes = read_text_file(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) throw FileError(path, "magic", "not a NumPy .npy file");
  const auto major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) throw FileError(path, "version", "unsupported .npy version " + std::to_string(major));
  size_t at = 8, len = 0;
  const size_t width = major == 1 ? 2 : 4;
  if (bytes.size() < at + width) throw FileError(path, "header", "truncated");
  for (size_t i = 0; i < width; ++i) len |= static_cast<size_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  at += width;
  if (bytes.size() < at + len) throw FileError(path, "header", "truncated");
  const std::string header = bytes.substr(at, len);
  at += len;

  std::string descr = header_value(header, "descr", path);
  descr = descr.substr(1, descr.size() - 2);
  if (header_value(header, "fortran_order", path) != "False")
    throw FileError(path, "fortran_order", "Fortran-ordered arrays are not supported (save with numpy.ascontiguousarray)");
  const std::string tuple = header_value(header, "shape", path);
  if (tuple.front() != '(') throw FileError(path, "shape", "expected a tuple");
  std::vector<int64_t> shape;
  const std::regex num("\\d+");
  for (auto it = std::sregex_iterator(tuple.begin(), tuple.end(), num); it != std::sregex_iterator(); ++it)
    shape.push_back(std::stoll(it->str()));

  size_t item = 0;
  void (*conv)(const char*, std::vector<float>&) = nullptr;
  if (descr == "<f4") item = 4, conv = &convert<float>;
  else if (descr == "<f8") item = 8, conv = &convert<double>;
  else if (descr == "<i4") item = 4, conv = &convert<int32_t>;
  else if (descr == "<i8") item = 8, conv = &convert<int64_t>;
  else if (descr == "|u1" || descr == "<u1") item = 1, conv = &convert<uint8_t>;
  else throw FileError(path, "descr", "unsupported dtype '" + descr + "' (little-endian float32/float64/int32/int64/uint8)");

  Tensor<float> t(shape);
  if (bytes.size() - at != t.data.size() * item)
    throw FileError(path, "data", std::to_string(bytes.size() - at) + " bytes of data, the shape needs " + std::to_string(t.data.size() * item));
  conv(bytes.data() + at, t.data);
  return t;
}

void write_npy(const std::string& path, const Tensor<float>& t) {
  std::string shape = "(";  // Python's tuple syntax: (), (3,), (2, 3)
  for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape[i]);
  shape += t.shape.size() == 1 ? ",)" : ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so the data starts at a multiple of 64 bytes, ending in a newline.
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>((header.size() >> 8) & 0xFF);
  out += header;
  out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
  write_text_file_atomic(path, out);
}

}  // namespace pcgx::runtime
