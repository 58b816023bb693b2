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

namespace {

// Refuses to replace anything but a regular file (as root, --plot
// /dev/null replaced the device).
void check_replaceable(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
    throw FileError(path, "", std::filesystem::is_directory(st) ? "is a directory, not a file"
                                                                : "is not a regular file (a device, pipe, socket or link); not replacing it");
}

// Writes `text` next to `path`; returns the temporary file's name.
std::string write_temporary(const std::string& path, const std::string& text) {
  check_replaceable(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw FileError(path, "", std::string("cannot write: ") + std::strerror(errno));
  out << text;
  out.flush();
  if (!out) {
    out.close();
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw FileError(path, "", "write failed");
  }
  return tmp;
}

void to_stdout(const std::string& text) {
  std::cout << text << std::flush;
  if (!std::cout) throw FileError("-", "", "cannot write to standard output");
}

}  // namespace

void check_output_path(const std::string& path) {
  if (path == "-") return;
  check_replaceable(path);
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::filesystem::path dir = parent.empty() ? std::filesystem::path(".") : parent;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw FileError(path, "", "cannot write: " + dir.string() + " is not a directory");
  if (::access(dir.c_str(), W_OK) != 0) throw FileError(path, "", std::string("cannot write: ") + std::strerror(errno));
}

void write_text_file_atomic(const std::string& path, const std::string& text) { write_text_files_atomic({{path, text}}); }

void write_text_files_atomic(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::string> tmps;
  std::error_code ec;
  try {
    for (const auto& [path, text] : files) tmps.push_back(path == "-" ? "" : write_temporary(path, text));
  } catch (const Error&) {
    for (const std::string& t : tmps)
      if (!t.empty()) std::filesystem::remove(t, ec);
    throw;
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (tmps[i].empty()) {
      to_stdout(files[i].second);
      continue;
    }
    std::filesystem::rename(tmps[i], files[i].first, ec);
    if (ec) {
      const std::string why = ec.message();  // before remove() reuses ec
      for (size_t j = i; j < tmps.size(); ++j)
        if (!tmps[j].empty()) std::filesystem::remove(tmps[j], ec);
      throw FileError(files[i].first, "", "cannot replace: " + why);
    }
  }
}

}  // namespace pcgx
