// Plugin loading (plugin.h).
#include "pcgx/pcg/plugin.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>

#include "pcgx/pcg/error.h"
#include "registry_state.h"

namespace pcgx {
namespace fs = std::filesystem;
namespace {

std::vector<Plugin>& plugins() {
  static std::vector<Plugin> v;
  return v;
}
// The PluginData registrations made while a library loads.
std::vector<std::string>& pending_data() {
  static std::vector<std::string> v;
  return v;
}

}  // namespace

PluginData::PluginData(const char* dir) {
  fs::path p = dir ? dir : "";
  if (p.is_relative()) {
    // This object lives in the registering library: dladdr names its file.
    Dl_info info{};
    if (dladdr(static_cast<const void*>(this), &info) && info.dli_fname) p = fs::path(info.dli_fname).parent_path() / p;
  }
  pending_data().push_back(p.lexically_normal().string());
}

const Plugin& load_plugin(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw FileError(path, "", "no such plugin (a shared library that registers operators)");
  const std::string canonical = fs::canonical(path, ec).string();
  // The same library named twice ($PCGX_PLUGIN_PATH and --plugin) loads once.
  for (const Plugin& p : plugins())
    if (fs::canonical(p.path, ec).string() == canonical) return p;
  if (detail::registry_is_built())
    throw FileError(path, "", "a plugin loads before the operator registry is first used (pcgx --plugin, $PCGX_PLUGIN_PATH)");
  const size_t before = detail::registration_count();
  pending_data().clear();
  // Global: a later plugin may use an earlier one's symbols.
  void* handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    const char* why = dlerror();
    throw FileError(path, "", std::string("cannot load it: ") + (why ? why : "dlopen failed"));
  }
  Plugin p;
  p.path = path;
  p.registrations = static_cast<int>(detail::registration_count() - before);
  try {
    detail::check_registrations();
  } catch (const Error& e) {
    throw FileError(path, "", std::string(e.what()) + " (an operator of pcgx or of a plugin loaded before)");
  }
  if (pending_data().size() > 1) throw FileError(path, "", "registers " + std::to_string(pending_data().size()) + " data directories (PluginData): one at most");
  if (!pending_data().empty()) {
    p.data_dir = pending_data().front();
    if (!fs::is_directory(p.data_dir, ec)) throw FileError(path, "", "its data directory " + p.data_dir + " (PluginData) does not exist");
  }
  pending_data().clear();
  // A library loaded before as a dependency runs no registration again;
  // one with hidden symbols or its own copy of pcg registers nothing here.
  if (p.registrations == 0 && p.data_dir.empty())
    throw FileError(path, "", "registers no operator (a namespace-scope pcgx::OpRegistration, built against pcgx::plugin and linking no "
                              "pcgx library) and no data directory (pcgx::PluginData)");
  plugins().push_back(std::move(p));
  return plugins().back();
}

void load_plugins(const std::string& path_list) {
  size_t start = 0;
  while (start <= path_list.size()) {
    const size_t end = std::min(path_list.find(':', start), path_list.size());
    const std::string entry = path_list.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    std::error_code ec;
    if (fs::is_directory(entry, ec)) {
      std::vector<fs::path> libs;
      for (const auto& f : fs::directory_iterator(entry, ec))
        if (f.path().extension() == ".so" && f.is_regular_file(ec)) libs.push_back(f.path());
      std::sort(libs.begin(), libs.end());
      for (const fs::path& lib : libs) load_plugin(lib.string());
    } else {
      load_plugin(entry);
    }
  }
}

const std::vector<Plugin>& loaded_plugins() { return plugins(); }

}  // namespace pcgx
