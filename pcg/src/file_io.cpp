#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
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
  if (path == "-") {
    std::cout << text << std::flush;
    if (!std::cout) throw FileError("-", "", "cannot write to standard output");
    return;
  }
  // The rename below replaces whatever `path` names; only a regular file
  // may be replaced (as root, --plot /dev/null replaced the device).
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
    throw FileError(path, "", std::filesystem::is_directory(st) ? "is a directory, not a file"
                                                                : "is not a regular file (a device, pipe, socket or link); not replacing it");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw FileError(path, "", std::string("cannot write: ") + std::strerror(errno));
    out << text;
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      throw FileError(path, "", "write failed");
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();  // before remove() reuses ec
    std::filesystem::remove(tmp, ec);
    throw FileError(path, "", "cannot replace: " + why);
  }
}

}  // namespace pcgx
