#pragma once
// Named tensors in the safetensors format (Hugging Face's; PyTorch reads and
// writes it with the `safetensors` package): 8 bytes of little-endian
// header length N, N bytes of JSON {"NAME": {"dtype": "F32", "shape": [..],
// "data_offsets": [BEGIN, END]}, ..., "__metadata__": {string: string}},
// then the raw little-endian data, offsets relative to its start. pcgx
// writes F32; it reads F32, F64, F16 and BF16 (rounded to float32) and
// I64/I32 (converted, exact below 2^24). Malformed files are an error
// naming the file and the field.
#include <map>
#include <string>

#include "pcgx/pcg/tensor.h"

namespace pcgx::runtime {

using NamedTensors = std::map<std::string, Tensor<float>>;

NamedTensors read_safetensors(const std::string& path);
// The same from a file's bytes; errors name `source`.
NamedTensors safetensors_from_bytes(const std::string& bytes, const std::string& source,
                                    std::map<std::string, std::string>* metadata = nullptr);
// The file's bytes: tensors in name order, F32, with `metadata`.
std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata = {});
// Writes atomically (no partial file on failure).
void write_safetensors(const std::string& path, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata = {});

}  // namespace pcgx::runtime
