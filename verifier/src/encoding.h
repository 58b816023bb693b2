#pragma once
// The operator table: pcgx operators <-> SMT function symbols (internal),
// gathered from the registry's SmtForm entries (pcg/operator.h), where each
// attribute's code is stated. The declarations of the symbols are derived
// from the same entries (operator_declarations()), so axioms/prelude.smt2
// declares only the sort and the shape functions.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/attributes.h"
#include "pcgx/pcg/operator.h"

namespace pcgx::verify {

struct Encoding {
  std::string op;
  std::string symbol;
  int tensors = 1;
  std::vector<SmtArg> attrs;
  int output = 0;
  std::vector<std::pair<std::string, bool>> fixed;
};

// Every registry operator's forms, in registry order.
const std::vector<Encoding>& encodings();
// "(declare-fun SYMBOL (Tensor ... Int ...) Tensor)" for one form: what an
// axiom file may use.
std::string declaration(const Encoding& e);
// The declarations of every form, one per line, each with a comment naming
// its arguments.
std::string operator_declarations();
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
