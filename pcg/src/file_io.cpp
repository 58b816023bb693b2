#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"

namespace pcgx {

std::string read_text_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw FileError(path, "", "is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "", std::string("cannot open: ") + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw FileError(path, "", "read failed");
  return ss.str();
}

void write_text_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw FileError(path, "", std::string("cannot write: ") + std::strerror(errno));
    out << text;
    out.flush();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw FileError(path, "", "write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw FileError(path, "", "cannot replace: " + ec.message());
  }
}

}  // namespace pcgx
