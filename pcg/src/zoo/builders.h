#pragma once
// One function per model family, returning its published-size ModelSpec or
// its "-tiny" variant (same builder, small defaults).
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/zoo.h"

namespace pcgx::zoo {

ModelSpec mlp(bool tiny);
ModelSpec bert_large(bool tiny);
ModelSpec gpt(bool tiny);
ModelSpec mpt(bool tiny);
ModelSpec llama(bool tiny);
ModelSpec resnext50(bool tiny);
ModelSpec inception_v3(bool tiny);
ModelSpec dlrm(bool tiny);
ModelSpec xdl(bool tiny);
ModelSpec candle_uno(bool tiny);
ModelSpec vgg13(bool tiny);

inline int64_t param(const ModelParams& p, const std::string& k) { return p.at(k); }
// Appends "-tiny" and marks the description when `tiny`.
ModelSpec named(bool tiny, std::string name, std::string description);

}  // namespace pcgx::zoo
