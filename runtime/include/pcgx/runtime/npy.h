#pragma once
// NumPy's .npy files (format versions 1.0, 2.0 and 3.0: a magic string, a
// little-endian header length, a Python-literal header giving 'descr',
// 'fortran_order' and 'shape', then the raw array). Read as float32, which
// is what the runtime computes in: float32 as is, float64 rounded, int32,
// int64 and uint8 converted (indices stay exact below 2^24). C order and
// little-endian only; anything else is an error naming the file and field.
#include <string>

#include "pcgx/pcg/tensor.h"

namespace pcgx::runtime {

Tensor<float> read_npy(const std::string& path);
// The same from a file's bytes; errors name `source`.
Tensor<float> npy_from_bytes(const std::string& bytes, const std::string& source);
// Writes a float32 .npy (version 1.0) atomically.
void write_npy(const std::string& path, const Tensor<float>& t);

}  // namespace pcgx::runtime
