#pragma once
// Attribute values the generator tries for one operator, from the registry
// entry's GenDomain hints, the opset's restrictions and input 0's shape.
#include <vector>

#include "pcgx/generator/opset.h"
#include "pcgx/pcg/operator.h"

namespace pcgx::gen {

// Every normalized attribute combination (invalid ones dropped).
std::vector<Attributes> attribute_combinations(const OpDef& op, const OpChoice& choice,
                                               const ParallelTensorShape& input0,
                                               const std::vector<int64_t>& degrees);

}  // namespace pcgx::gen
