#pragma once
// The built-in operator families, each registered by registry.cpp.
#include "pcgx/pcg/registry.h"

namespace pcgx::ops {

// Registration entry points, one per operator family.
void register_source_ops(OpRegistry& r);
void register_elementwise_ops(OpRegistry& r);
void register_linear_ops(OpRegistry& r);
void register_conv_ops(OpRegistry& r);
void register_norm_ops(OpRegistry& r);
void register_batch_norm_ops(OpRegistry& r);
void register_shape_ops(OpRegistry& r);
void register_embedding_ops(OpRegistry& r);
void register_loss_ops(OpRegistry& r);
void register_parallel_ops(OpRegistry& r);

}  // namespace pcgx::ops
