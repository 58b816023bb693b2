#pragma once
// ONNX's own test cases (Debian's libonnx-testdata: a folder per case with
// model.onnx and test_data_set_0/{input,output}_N.pb): whether pcgx
// imports a case's model, and whether pcgx's interpreter, given the case's
// inputs, reproduces its first output (to ONNX's test tolerance: 1e-3
// relative, 1e-7 absolute). bench/onnx_testdata.cpp tallies them.
#include <string>

namespace pcgx::importer {

struct TestCaseResult {
  bool imported = false;
  bool reproduced = false;
  std::string why;  // the error or mismatch, when not both
};

TestCaseResult run_onnx_test_case(const std::string& dir);

}  // namespace pcgx::importer
