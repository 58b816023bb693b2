#pragma once
// The operator table: pcgx operators <-> SMT function symbols (internal).
//
// A symbol takes the operator's tensor arguments first, then its attributes
// as integers, in the order listed. Attribute codecs:
//   - integers as themselves (a negative Softmax axis is counted from the front);
//   - strings as their index in the attribute's choices (activation: 0 none,
//     1 relu, 2 gelu, 3 sigmoid, 4 tanh; pooling mode: 0 max, 1 avg);
//   - `scalar` as two integers, an exact fraction num/den;
//   - other numbers (eps, rate) as their IEEE-754 bit pattern, so that equal
//     codes mean equal values;
//   - `perm` as 1 followed by its digits ([2, 0, 1] is 1201);
//   - Reshape's `shape` as 1 followed by each size in four decimal digits
//     ([16, 4] is 100160004): at most four dimensions below 10000.
// Some operators have one symbol per value of a boolean attribute (LayerNorm
// with and without affine parameters); those attributes are `fixed`.
// The same table is spelled out in axioms/prelude.smt2.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/attributes.h"

namespace pcgx::verify {

struct Encoding {
  const char* op;
  const char* symbol;
  int tensors;
  std::vector<const char*> attrs;
  int output = 0;
  std::vector<std::pair<const char*, bool>> fixed = {};
};

const std::vector<Encoding>& encodings();
const Encoding* encoding_by_symbol(const std::string& symbol);
// The encoding of a node (operator, attributes, output index, input count), or nothing.
const Encoding* encoding_for(const std::string& op, const Attributes& attrs, int output, int inputs);

// Integer arguments an encoding takes after its tensors.
int int_args(const Encoding& e);
// A node's attributes as integers; throws pcgx::Error when one has no code.
// `rank0` is the rank of the first input (a negative Softmax axis needs it).
std::vector<int64_t> encode_attrs(const Encoding& e, const Attributes& attrs, int64_t rank0);
// The attributes behind integer arguments, or nothing when a code is invalid.
std::optional<Attributes> decode_attrs(const Encoding& e, const std::vector<int64_t>& ints);

int64_t perm_code(const IntList& p);
std::optional<IntList> perm_of(int64_t code);
std::optional<int64_t> shape_code(const IntList& s);
std::optional<IntList> shape_of(int64_t code);

}  // namespace pcgx::verify
