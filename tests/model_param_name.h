#pragma once
// A parameterized test's name from a zoo model name ("bert-large-tiny" ->
// "bert_large_tiny": GoogleTest names allow no '-').
#include <gtest/gtest.h>

#include <string>

namespace pcgx::testing {

inline std::string model_param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

}  // namespace pcgx::testing
