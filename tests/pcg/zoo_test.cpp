// Model zoo: published parameter counts and that every tiny model runs.
#include <gtest/gtest.h>

#include <cmath>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/model_info.h"
#include "pcgx/pcg/zoo.h"

namespace pcgx {
namespace {

struct Published {
  const char* model;
  double parameters;
  const char* source;
};

class PublishedSizes : public ::testing::TestWithParam<Published> {};

TEST_P(PublishedSizes, WithinTwoPercent) {
  const Published& p = GetParam();
  const ModelInfo info = model_info(build_model(p.model));
  EXPECT_NEAR(static_cast<double>(info.parameters), p.parameters, 0.02 * p.parameters) << p.source;
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, PublishedSizes,
    ::testing::Values(Published{"bert-large", 335e6, "BERT-Large without the pooler, ~335M"},
                      Published{"resnext-50", 25.0e6, "ResNeXt-50 32x4d, 25.0M"},
                      Published{"inception-v3", 23.8e6, "Inception-v3 without the auxiliary head, 23.8M"},
                      Published{"gpt", 124.4e6, "GPT-2 small, 124M"},
                      Published{"vgg-13", 133.0e6, "VGG-13, 133M"},
                      Published{"mlp", 16 * 8192.0 * 8192.0, "16 dense layers of 8192, no bias"},
                      Published{"llama", 6738415616.0, "LLaMA 7B, 6,738,415,616"}),
    [](const auto& param_info) {
      std::string n = param_info.param.model;
      for (auto& c : n)
        if (c == '-') c = '_';
      return n;
    });

// Not merely close: LLaMA 7B's count is known to the parameter (Hugging
// Face's LlamaForCausalLM, 32 layers of 4096 with SwiGLU 11008, untied head).
TEST(Zoo, LlamaHasLlama7BsExactParameterCount) {
  EXPECT_EQ(model_info(build_model("llama")).parameters, int64_t{6738415616});
}

// Grouped-query attention: LLaMA-2 70B (Touvron et al. 2023b; Hugging
// Face's config: 80 layers of 8192, 64 heads sharing 8 key/value heads,
// SwiGLU 28672, vocabulary 32000) to the parameter; key/value heads that
// do not divide the heads are refused naming the parameter.
TEST(Zoo, LlamaWithGroupedQueryAttentionHasLlama2_70BsParameterCount) {
  const ModelParams llama2_70b{{"layers", 80}, {"hidden", 8192}, {"heads", 64}, {"kv_heads", 8}, {"ffn", 28672}, {"vocab", 32000}};
  EXPECT_EQ(model_info(build_model("llama", llama2_70b)).parameters, int64_t{68976648192});
  try {
    build_model("llama-tiny", {{"kv_heads", 3}});
    FAIL() << "3 key/value heads for 4 heads were accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "ModelParams.kv_heads");
  }
}

// Grouped-query attention reads its key/value heads as Hugging Face's
// repeat_kv does: query head i reads key/value head i / (heads / kv). The
// same model with every head's own key and value projections, each made
// of the columns of the key/value head it would read, computes the same
// loss; with the heads read in another order (i % kv) it would not.
TEST(Zoo, GroupedQueryAttentionReadsItsHeadsAsRepeatKv) {
  const Graph mha = build_model("llama-tiny");  // hidden 32, 4 heads of 8
  for (const int64_t kv : {1, 2}) {
    SCOPED_TRACE(kv);
    const Graph gqa = build_model("llama-tiny", {{"kv_heads", kv}});
    const SourceFn<float> random = random_sources<float>(11);
    const SourceFn<float> repeated = [&](const Node& n) {
      const bool kv_weight = n.name.ends_with("self_attn.key.W") || n.name.ends_with("self_attn.value.W");
      if (!kv_weight) return random(n);
      const Node* grouped = nullptr;
      for (const Node& x : gqa.nodes())
        if (x.name == n.name) grouped = &x;
      EXPECT_NE(grouped, nullptr) << n.name;
      const Tensor<float> w = random(*grouped);  // [32, kv * 8]
      Tensor<float> out({32, 32});
      for (int64_t r = 0; r < 32; ++r)
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t e = 0; e < 8; ++e)
            out.data[static_cast<size_t>(r * 32 + h * 8 + e)] = w.data[static_cast<size_t>(r * kv * 8 + (h / (4 / kv)) * 8 + e)];
      return out;
    };
    const float a = evaluate_outputs<float>(gqa, random)[0].data[0], b = evaluate_outputs<float>(mha, repeated)[0].data[0];
    EXPECT_NEAR(a, b, 1e-5 * std::abs(b));
  }
}

TEST(Zoo, EveryModelHasATinyVariantThatTrainsOneForwardPass) {
  int models = 0;
  for (const auto& spec : model_zoo()) {
    if (spec.name.find("-tiny") != std::string::npos) continue;
    ++models;
    SCOPED_TRACE(spec.name);
    ASSERT_NE(find_model(spec.name + "-tiny"), nullptr);
    const Graph g = build_model(spec.name + "-tiny");
    ASSERT_EQ(g.outputs().size(), 1u);
    const auto loss = evaluate_outputs<float>(g, random_sources<float>(1));
    ASSERT_EQ(loss[0].numel(), 1);
    EXPECT_TRUE(std::isfinite(loss[0].data[0]));
    EXPECT_GT(model_info(g).forward_flops, 0);
  }
  EXPECT_EQ(models, 11);
}

TEST(Zoo, SizeParametersOverride) {
  const ModelInfo base = model_info(build_model("mlp", {{"layers", 2}, {"hidden", 64}}));
  EXPECT_EQ(base.parameters, 2 * 64 * 64);
  EXPECT_EQ(base.batch_size, 256);
  EXPECT_THROW(build_model("mlp", {{"depth", 2}}), Error);
  EXPECT_THROW(build_model("no-such-model"), Error);
}

TEST(Zoo, FlopsMatchAHandCount) {
  // mlp with 2 layers of 64 at batch 256: 2 * 256 * 64 * 64 per layer,
  // plus the fused relu on layer 0 and 3 FLOP per element in the loss.
  const ModelInfo info = model_info(build_model("mlp", {{"layers", 2}, {"hidden", 64}}));
  const double gemm = 2.0 * 256 * 64 * 64;
  EXPECT_DOUBLE_EQ(info.forward_flops, 2 * gemm + 256 * 64 + 3 * 256 * 64);
  EXPECT_DOUBLE_EQ(info.training_flops, 3 * info.forward_flops);
  // Bytes: each layer reads x and W and writes y; the loss reads two tensors.
  const double act = 256 * 64 * 4.0, w = 64 * 64 * 4.0;
  EXPECT_DOUBLE_EQ(info.forward_bytes, 2 * (2 * act + w) + 2 * act + 4);
}

TEST(Zoo, EmbeddingsReadOnlyTheRowsTheyGather) {
  // dlrm-tiny: 2 bags of 1 index per sample over 64-row tables of width 8.
  const Graph g = build_model("dlrm-tiny");
  for (const Node& n : g.nodes()) {
    if (n.op->name != "EmbeddingBag") continue;
    std::vector<TensorType> in{g.type(n.inputs[0]), g.type(n.inputs[1])};
    std::vector<TensorType> out{{n.outputs[0].logical_shape(), n.outputs[0].dtype}};
    EXPECT_DOUBLE_EQ(memory_bytes(*n.op, n.attrs, in, out), 8 * 8.0 + 8 * 8 * 4.0 + 8 * 8 * 4.0);
  }
}

}  // namespace
}  // namespace pcgx
