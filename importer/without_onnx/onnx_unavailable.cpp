// pcgx built without libonnx-dev: importing says how to get it.
#include "pcgx/importer/onnx_import.h"
#include "pcgx/importer/onnx_testdata.h"
#include "pcgx/pcg/error.h"

namespace pcgx::importer {

namespace {
constexpr const char* kWhy = "this pcgx was built without ONNX (install libonnx-dev and libprotobuf-dev, then rebuild)";
}

bool onnx_available(std::string* why) {
  if (why) *why = kWhy;
  return false;
}

ImportedModel import_onnx(const std::string& path, const ImportOptions&) { throw Error(path + ": " + kWhy); }

TestCaseResult run_onnx_test_case(const std::string&) { return {false, false, kWhy}; }

}  // namespace pcgx::importer
