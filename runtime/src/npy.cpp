// .npy reading and writing (see npy.h).
#include "pcgx/runtime/npy.h"

#include <cstdint>
#include <cstring>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"

namespace pcgx::runtime {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

// The header: a Python dict literal of string keys and values that are
// quoted strings, True/False or tuples of integers. Read by hand, in one
// pass, with every number and count checked: a header is up to 4 GiB of
// anyone's text (std::regex recursed once per character and overflowed
// the stack on a 40 KB one).
struct Header {
  std::string descr;
  bool fortran_order = false, has_descr = false, has_order = false, has_shape = false;
  std::vector<int64_t> shape;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  Header parse() {
    Header h;
    expect('{', "header");
    while (true) {
      space();
      if (peek() == '}') break;
      const std::string key = quoted("header");
      space();
      expect(':', key);
      space();
      if (key == "descr") h.descr = quoted(key), h.has_descr = true;
      else if (key == "fortran_order") h.fortran_order = boolean(key), h.has_order = true;
      else if (key == "shape") h.shape = tuple(key), h.has_shape = true;
      else skip_value(key);
      space();
      if (peek() == ',') ++i_;
      else if (peek() != '}') fail("header", "expected ',' or '}' after '" + key + "'");
    }
    if (!h.has_descr) fail("descr", "missing from the .npy header");
    if (!h.has_order) fail("fortran_order", "missing from the .npy header");
    if (!h.has_shape) fail("shape", "missing from the .npy header");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& why) const { throw FileError(path_, field, why); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c, const std::string& field) {
    if (peek() != c) fail(field, std::string("expected '") + c + "' in the .npy header");
    ++i_;
  }
  std::string quoted(const std::string& field) {
    const char q = peek();
    if (q != '\'' && q != '"') fail(field, "expected a quoted string in the .npy header");
    const size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) fail(field, "unterminated string in the .npy header");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  bool boolean(const std::string& field) {
    if (s_.compare(i_, 4, "True") == 0) return i_ += 4, true;
    if (s_.compare(i_, 5, "False") == 0) return i_ += 5, false;
    fail(field, "expected True or False");
  }
  // Non-negative integers below 2^62, comma separated, a trailing comma allowed.
  std::vector<int64_t> tuple(const std::string& field) {
    expect('(', field);
    std::vector<int64_t> out;
    while (true) {
      space();
      if (peek() == ')') break;
      if (peek() == '-') fail(field, "a negative dimension");
      if (peek() < '0' || peek() > '9') fail(field, "expected a dimension (a non-negative integer)");
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (int64_t{1} << 58)) fail(field, "a dimension is too large");
        v = v * 10 + (peek() - '0');
        ++i_;
      }
      out.push_back(v);
      space();
      if (peek() == ',') ++i_;
      else if (peek() != ')') fail(field, "expected ',' or ')' in the shape");
    }
    ++i_;
    return out;
  }
  void skip_value(const std::string& field) {
    if (peek() == '\'' || peek() == '"') return void(quoted(field));
    if (peek() == '(') {
      const size_t end = s_.find(')', i_);
      if (end == std::string::npos) fail(field, "unterminated tuple in the .npy header");
      i_ = end + 1;
      return;
    }
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}') ++i_;
  }

  const std::string& s_;
  const std::string& path_;
  size_t i_ = 0;
};

template <class T>
void convert(const char* raw, std::vector<float>& out) {
  for (size_t i = 0; i < out.size(); ++i) {
    T v;
    std::memcpy(&v, raw + i * sizeof(T), sizeof(T));
    out[i] = static_cast<float>(v);
  }
}

}  // namespace

Tensor<float> read_npy(const std::string& path) { return npy_from_bytes(read_text_file(path), path); }

Tensor<float> npy_from_bytes(const std::string& bytes, const std::string& path) {
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

  const Header h = HeaderParser(header, path).parse();
  const std::string& descr = h.descr;
  if (h.fortran_order)
    throw FileError(path, "fortran_order", "Fortran-ordered arrays are not supported (save with numpy.ascontiguousarray)");
  const std::vector<int64_t>& shape = h.shape;

  size_t item = 0;
  void (*conv)(const char*, std::vector<float>&) = nullptr;
  if (descr == "<f4") item = 4, conv = &convert<float>;
  else if (descr == "<f8") item = 8, conv = &convert<double>;
  else if (descr == "<i4") item = 4, conv = &convert<int32_t>;
  else if (descr == "<i8") item = 8, conv = &convert<int64_t>;
  else if (descr == "|u1" || descr == "<u1") item = 1, conv = &convert<uint8_t>;
  else throw FileError(path, "descr", "unsupported dtype '" + descr + "' (little-endian float32/float64/int32/int64/uint8)");

  // The data's size, checked against the file before anything is
  // allocated (a 128-byte file may claim any shape).
  const size_t have = bytes.size() - at;
  // Zero dimensions are left out of the overflow check: (0, 2^40, 2^40) has
  // no elements, but its other dimensions' product would still wrap in
  // every later count (the fuzzer found that).
  size_t need = item, nonzero = 1;
  for (int64_t d : shape) {
    if (d != 0 && (__builtin_mul_overflow(nonzero, static_cast<size_t>(d), &nonzero) || nonzero > size_t{INT64_MAX}))
      throw FileError(path, "shape", "the element count overflows");
    need = d == 0 ? 0 : need;
  }
  if (need != 0 && __builtin_mul_overflow(nonzero, item, &need)) throw FileError(path, "shape", "the element count overflows");
  if (have != need) throw FileError(path, "data", std::to_string(have) + " bytes of data, the shape needs " + std::to_string(need));
  Tensor<float> t(shape);
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
