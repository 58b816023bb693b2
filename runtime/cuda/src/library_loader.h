#pragma once
// Loading the CUDA libraries the backend calls (cuBLAS, cuDNN) when the
// first GPU backend starts rather than linking them: linking cost every
// start of the pcgx binary ~70 ms of mapping (measured: an empty program
// linked with -lcublas starts in 72 ms, without it in 2 ms), GPU or not,
// and the CLI tests start pcgx hundreds of times. It also lets a machine
// whose cuDNN or NCCL came only with Python's nvidia-* packages use them.
#include <dlfcn.h>

#include <mutex>
#include <string>
#include <vector>

#include "pcgx/pcg/error.h"

namespace pcgx::runtime::cuda {

struct LoadedLibrary {
  void* handle = nullptr;
  std::string path;  // the file loaded, as found
};

// The folders searched for `file` after $PCGX_CUDA_LIBRARY_PATH's (a
// colon-separated list) and the dynamic loader's own search
// (LD_LIBRARY_PATH, the loader cache): the toolkit pcgx was built with,
// then every Python environment's nvidia/*/lib folders that exist
// ($VIRTUAL_ENV, /opt/*/.venv, /usr/local and /usr's dist- and
// site-packages, ~/.local).
std::vector<std::string> library_folders();

// Loads the first of `files` found (in that order at each place); throws
// pcgx::Error naming them and the places searched when none loads.
LoadedLibrary load_library(const std::vector<std::string>& files, const std::string& what);

// f = the symbol `name` of lib; throws pcgx::Error naming the file.
template <class F>
void bind(const LoadedLibrary& lib, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(lib.handle, name));
  if (!f) throw Error("cuda: " + lib.path + " has no " + name);
}

// The table of calls `load(table)` fills, filled once per process; what it
// threw (a library or a symbol missing) is thrown again at every call.
template <class Table, class Load>
const Table& load_once(Load&& load) {
  static Table table;
  static std::string failed;
  static std::once_flag once;
  std::call_once(once, [&] {
    try {
      load(table);
    } catch (const Error& e) {
      failed = e.what();
    }
  });
  if (!failed.empty()) throw Error(failed);
  return table;
}

}  // namespace pcgx::runtime::cuda
