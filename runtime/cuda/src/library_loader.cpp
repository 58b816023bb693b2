#include "library_loader.h"

#include <glob.h>

#include <cstdlib>
#include <sys/stat.h>

namespace pcgx::runtime::cuda {
namespace {

bool is_dir(const std::string& p) {
  struct stat s {};
  return stat(p.c_str(), &s) == 0 && S_ISDIR(s.st_mode);
}

void glob_into(const std::string& pattern, std::vector<std::string>& out) {
  glob_t g{};
  if (glob(pattern.c_str(), GLOB_ONLYDIR | GLOB_NOSORT, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
}

std::vector<std::string> split_path(const char* list) {
  std::vector<std::string> out;
  if (!list) return out;
  std::string s = list;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t colon = s.find(':', at);
    const std::string part = s.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
    if (!part.empty()) out.push_back(part);
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> library_folders() {
  std::vector<std::string> out;
  if (is_dir(PCGX_CUDA_LIBRARY_DIR)) out.emplace_back(PCGX_CUDA_LIBRARY_DIR);
  std::vector<std::string> envs;
  if (const char* v = std::getenv("VIRTUAL_ENV"); v && *v) envs.emplace_back(v);
  glob_into("/opt/*/.venv", envs);
  envs.emplace_back("/usr/local");
  envs.emplace_back("/usr");
  if (const char* h = std::getenv("HOME"); h && *h) envs.push_back(std::string(h) + "/.local");
  for (const std::string& e : envs)
    for (const char* packages : {"site-packages", "dist-packages"}) glob_into(e + "/lib/python3*/" + packages + "/nvidia/*/lib", out);
  return out;
}

LoadedLibrary load_library(const std::vector<std::string>& files, const std::string& what) {
  std::string tried;
  auto attempt = [&](const std::string& path) -> void* {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h && tried.size() < 600) tried += std::string(tried.empty() ? "" : "; ") + dlerror();
    return h;
  };
  // $PCGX_CUDA_LIBRARY_PATH first, then the loader's own search (bare
  // names), then the folders above.
  for (const std::string& dir : split_path(std::getenv("PCGX_CUDA_LIBRARY_PATH")))
    for (const std::string& f : files)
      if (void* h = attempt(dir + "/" + f)) return {h, dir + "/" + f};
  for (const std::string& f : files)
    if (void* h = attempt(f)) {
      // The file the loader chose, for the report.
      Dl_info info{};
      std::string path = f;
      for (const char* probe : {"cudnnGetVersion", "cublasCreate_v2", "ncclGetVersion"})
        if (void* sym = dlsym(h, probe); sym && dladdr(sym, &info) && info.dli_fname) {
          path = info.dli_fname;
          break;
        }
      return {h, path};
    }
  for (const std::string& dir : library_folders())
    for (const std::string& f : files)
      if (void* h = attempt(dir + "/" + f)) return {h, dir + "/" + f};
  std::string names;
  for (const std::string& f : files) names += (names.empty() ? "" : " or ") + f;
  throw Error("cuda: cannot load " + what + " (" + names + ") from $PCGX_CUDA_LIBRARY_PATH, the loader's path, " PCGX_CUDA_LIBRARY_DIR
              " or a Python environment's nvidia/*/lib: " + tried);
}

}  // namespace pcgx::runtime::cuda
