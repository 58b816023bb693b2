#pragma once
// Plugins: shared libraries that add operators to pcgx without a rebuild.
//
// A plugin registers its operators as any library does, with a
// namespace-scope OpRegistration (registry.h), and may name one data
// directory with a PluginData registration; that directory's axioms/ and
// opsets/ subdirectories then join the axiom and opset search paths
// (resources.h), after the shipped ones:
//
//   static const pcgx::OpRegistration ops(&add_softplus);
//   static const pcgx::PluginData data("share/softplus");  // relative: to the library's directory
//
// A plugin is built against the installed headers (find_package(pcgx),
// target pcgx::plugin) and links no pcgx library: the pcgx executable that
// loads it provides them, so the plugin shares its registry.
// examples/softplus-plugin/ is a complete one.
//
// Plugins load before the registry's first use: `pcgx --plugin LIB.so`
// and $PCGX_PLUGIN_PATH, read by the pcgx executable before anything else.
#include <string>
#include <vector>

namespace pcgx {

struct Plugin {
  std::string path;          // as loaded
  int registrations = 0;     // the OpRegistrations it made
  std::string data_dir;      // its PluginData directory, absolute; empty if none
};

// Loads the shared library at `path` and runs its registrations; a library
// loaded already (by its canonical path) is not loaded again. Throws
// pcgx::Error naming the file: a missing file, one dlopen refuses (with its
// reason, e.g. an undefined symbol), a load after the operator registry's
// first use, an operator of a name registered already, a library that
// registers neither an operator nor a data directory, a PluginData
// directory that does not exist or a second one.
const Plugin& load_plugin(const std::string& path);

// Loads every plugin `path_list` names: entries separated by ':', each a
// shared library or a directory whose *.so files load in name order
// ($PCGX_PLUGIN_PATH's format). Empty entries are skipped.
void load_plugins(const std::string& path_list);

// The plugins loaded so far, in order.
const std::vector<Plugin>& loaded_plugins();

// A plugin's data directory (above). A relative `dir` is taken relative to
// the directory of the library making the registration.
class PluginData {
 public:
  explicit PluginData(const char* dir);
};

}  // namespace pcgx
