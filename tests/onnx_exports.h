#pragma once
// The small models of tests/python/onnx_models.py, exported by PyTorch
// once per test process into a scratch directory; null where
// /usr/bin/python3 with python3-torch cannot export them.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "temp_dir.h"

namespace pcgx::testing {

inline const std::filesystem::path* onnx_exports() {
  static const std::filesystem::path dir = temp_dir("pcgx_onnx_exports");
  static const bool ok = std::system(("/usr/bin/python3 " + std::string(PCGX_SOURCE_DIR) + "/tests/python/onnx_models.py " + dir.string() +
                                      " > /dev/null 2>&1").c_str()) == 0;
  return ok ? &dir : nullptr;
}

}  // namespace pcgx::testing
