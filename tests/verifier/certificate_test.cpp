// Certificates of strategies (certificate.h): every operator and every
// conversion of a correct plan proved at its own shapes; a plan that
// computes something else named where it goes wrong.
#include "pcgx/verifier/certificate.h"

#include <gtest/gtest.h>

#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"

namespace pcgx::verify {
namespace {

const AxiomSet& axioms() {
  static const AxiomSet a = load_axioms(default_axioms_dir());
  return a;
}

std::string listed(const Certificate& c) {
  std::string s;
  for (const auto& u : c.unverified) s += u + "\n";
  return s;
}

int64_t computes(const Graph& g) {
  int64_t n = 0;
  for (const Node& x : g.nodes()) n += x.op->op_class == OpClass::kCompute && !x.op->is_shard_level(x.attrs);
  return n;
}

TEST(Certificate, DataParallelismIsProvedOperatorByOperator) {
  const Graph g = search::data_parallel(build_model("mlp-tiny", {{"batch", 8}}), 4);
  const Certificate c = certify(g, axioms());
  EXPECT_TRUE(c.verified()) << listed(c);
  EXPECT_EQ(c.operators, computes(g));
  ASSERT_FALSE(c.claims.empty());
  for (const CertifiedClaim& x : c.claims) {
    EXPECT_TRUE(x.proved()) << x.what << ": " << x.proof.reason;
    // A partitioned operator's proof uses axioms (its unsat core names them).
    if (x.kind == ClaimKind::kOperator) {
      EXPECT_FALSE(x.proof.axioms.empty()) << x.what;
    }
    EXPECT_FALSE(x.nodes.empty());
  }
  // Identical layers share one claim: fewer claims than operators.
  size_t covered = 0;
  for (const CertifiedClaim& x : c.claims) covered += x.kind == ClaimKind::kOperator ? x.nodes.size() : 0;
  EXPECT_EQ(static_cast<int64_t>(covered), c.operators);
  EXPECT_LT(c.claims.size(), covered + static_cast<size_t>(c.conversions));
}

// Megatron-LM's tensor parallelism of a feed-forward block: the first
// Linear split by columns, the second by rows, its partial sums
// all-reduced before the residual sum reads them.
TEST(Certificate, TensorParallelismProvesItsPartialSums) {
  Graph g("megatron-mlp");
  const TensorRef x{g.add("Input", {{"shape", IntList{8, 16}}}, {}, "x"), 0};
  const TensorRef w1{g.add("Weight", {{"shape", IntList{16, 64}}}, {}, "w1"), 0};
  const TensorRef w2{g.add("Weight", {{"shape", IntList{64, 16}}}, {}, "w2"), 0};
  const TensorRef xr{g.add("Replicate", {{"degree", int64_t{2}}}, {x}), 0};
  const TensorRef w1s{g.add("Repartition", {{"dim", int64_t{1}}, {"degree", int64_t{2}}}, {w1}), 0};
  const TensorRef h{g.add("Linear", {{"activation", std::string("relu")}}, {xr, w1s}, "fc1"), 0};
  const TensorRef w2s{g.add("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {w2}), 0};
  const TensorRef y{g.add("Linear", {}, {h, w2s}, "fc2"), 0};
  const TensorRef ys{g.add("AllReduce", {{"degree", int64_t{2}}}, {y}), 0};
  g.add_output({g.add("EwAdd", {}, {ys, xr}, "residual"), 0});
  const Certificate c = certify(g, axioms());
  EXPECT_TRUE(c.verified()) << listed(c);
  EXPECT_EQ(c.operators, 3);
  bool partial = false;
  for (const CertifiedClaim& claim : c.claims) partial = partial || (claim.partial && claim.nodes == std::vector<std::string>{"fc2"});
  EXPECT_TRUE(partial);
}

// The zoo's GPT under Megatron-LM's tensor parallelism, alone and beside
// data parallelism: every claim proved, the biases included (a
// row-parallel Linear's as summands, b/t in each of t slots, each copy of
// b its own summands beside data parallelism), the causal attention and
// its 1/sqrt(d) scale.
TEST(Certificate, GptUnderMegatronTensorParallelismIsVerified) {
  const Machine m = search::find_machine("cpu-host");
  const auto tp = search::expert(build_model("gpt-tiny", {{"batch", 4}}), m, 4, 4);
  ASSERT_TRUE(tp);
  const Certificate c = certify(*tp, axioms());
  EXPECT_TRUE(c.verified()) << listed(c);
  // Every operator but the plan's own scalings of the summands (unnamed),
  // which their Linears' claims state.
  int64_t scalings = 0;
  for (const Node& n : tp->nodes()) scalings += n.op->op_class == OpClass::kCompute && n.name.empty();
  EXPECT_GT(scalings, 0);
  EXPECT_EQ(c.operators + scalings, computes(*tp));
  const auto both = search::expert(build_model("gpt-tiny", {{"batch", 4}}), m, 4, 2);
  ASSERT_TRUE(both);
  const Certificate d = certify(*both, axioms());
  EXPECT_TRUE(d.verified()) << listed(d);
  bool copies_as_summands = false;
  for (const CertifiedClaim& claim : d.claims)
    for (const std::string& a : claim.proof.axioms) copies_as_summands = copies_as_summands || a == "linear_bias_reduction_parallel_copies";
  EXPECT_TRUE(copies_as_summands);
}

// LLaMA under Megatron-style tensor parallelism (no biases): every claim
// proved, the causal attention and its 1/sqrt(d) scale included.
TEST(Certificate, LlamaUnderTensorParallelismIsVerified) {
  const auto tp = search::expert(build_model("llama-tiny", {{"batch", 4}}), search::find_machine("cpu-host"), 4, 2);
  ASSERT_TRUE(tp);
  const Certificate c = certify(*tp, axioms());
  EXPECT_TRUE(c.verified()) << listed(c);
  EXPECT_EQ(c.operators, computes(*tp));
  bool causal = false, scale = false;
  for (const CertifiedClaim& claim : c.claims) {
    causal = causal || (claim.what.starts_with("Softmax") && claim.proved());
    scale = scale || (claim.what.starts_with("ScalarMul") && claim.proved());
  }
  EXPECT_TRUE(causal && scale) << listed(c);
}

// Grouped-query attention (2 key/value heads for 4 query heads, and 1)
// under the same plan (tensor parallel 2, and 1 with a single key/value
// head): each key/value head concatenated beside itself and reshaped
// into its query heads, every claim proved.
TEST(Certificate, GroupedQueryAttentionUnderTensorParallelismIsVerified) {
  for (const int64_t kv : {2, 1}) {  // each key/value head read by 2, by 4 (three copies, concatenated two at a time)
    SCOPED_TRACE(kv);
    const auto tp = search::expert(build_model("llama-tiny", {{"batch", 4}, {"kv_heads", kv}}), search::find_machine("cpu-host"), 4, 2 / kv);
    ASSERT_TRUE(tp);
    const Certificate c = certify(*tp, axioms());
    EXPECT_TRUE(c.verified()) << listed(c);
    bool repeated = false;
    for (const CertifiedClaim& claim : c.claims) repeated = repeated || (claim.what.starts_with("Concat") && claim.proved());
    EXPECT_TRUE(repeated) << listed(c);
  }
}

// y = x W computed on two copies of x and W and then summed: 2 x W, a
// legal PCG that is not the model. The sum is the conversion named.
TEST(Certificate, APlanComputingSomethingElseIsNamed) {
  Graph g("twice");
  const TensorRef x{g.add("Input", {{"shape", IntList{8, 16}}}, {}, "x"), 0};
  const TensorRef w{g.add("Weight", {{"shape", IntList{16, 4}}}, {}, "w"), 0};
  const TensorRef xr{g.add("Replicate", {{"degree", int64_t{2}}}, {x}), 0};
  const TensorRef wr{g.add("Replicate", {{"degree", int64_t{2}}}, {w}), 0};
  const TensorRef y{g.add("Linear", {}, {xr, wr}, "fc"), 0};
  const TensorRef s{g.add("Reduce", {{"degree", int64_t{2}}}, {y}), 0};
  g.add_output({g.add("Relu", {}, {s}, "act"), 0});
  const Certificate c = certify(g, axioms());
  ASSERT_FALSE(c.verified());
  ASSERT_EQ(c.unverified.size(), 1u) << listed(c);
  EXPECT_NE(c.unverified[0].find("Relu 'act' input 0"), std::string::npos) << listed(c);
  // The Linear on copies is itself right: its claim is proved.
  for (const CertifiedClaim& claim : c.claims)
    if (claim.kind == ClaimKind::kOperator && claim.nodes.at(0) == "fc") {
      EXPECT_TRUE(claim.proved()) << claim.what;
    }
}

// What reaches a graph output is claimed too: copies summed (2 x W as the
// output), a conversion with no operator at all, and partial sums left
// unsummed are each named; a loss's partial sums are what the trainer sums.
TEST(Certificate, OutputsAreClaimedToo) {
  auto linear_on_copies = [](Graph& g) {
    const TensorRef x{g.add("Input", {{"shape", IntList{8, 16}}}, {}, "x"), 0};
    const TensorRef w{g.add("Weight", {{"shape", IntList{16, 4}}}, {}, "w"), 0};
    const TensorRef xr{g.add("Replicate", {{"degree", int64_t{2}}}, {x}), 0};
    const TensorRef wr{g.add("Replicate", {{"degree", int64_t{2}}}, {w}), 0};
    return TensorRef{g.add("Linear", {}, {xr, wr}, "fc"), 0};
  };
  Graph doubled("doubled");
  doubled.add_output({doubled.add("Reduce", {{"degree", int64_t{2}}}, {linear_on_copies(doubled)}), 0});
  const Certificate d = certify(doubled, axioms());
  ASSERT_EQ(d.unverified.size(), 1u) << listed(d);
  EXPECT_NE(d.unverified[0].find("output 0"), std::string::npos) << listed(d);

  Graph nothing("nothing");
  const TensorRef x{nothing.add("Input", {{"shape", IntList{8, 16}}}, {}, "x"), 0};
  const TensorRef xr{nothing.add("Replicate", {{"degree", int64_t{2}}}, {x}), 0};
  nothing.add_output({nothing.add("Reduce", {{"degree", int64_t{2}}}, {xr}), 0});
  EXPECT_FALSE(certify(nothing, axioms()).verified());

  Graph unsummed("unsummed-output");
  const TensorRef a{unsummed.add("Input", {{"shape", IntList{8, 16}}}, {}, "x"), 0};
  const TensorRef w{unsummed.add("Weight", {{"shape", IntList{16, 4}}}, {}, "w"), 0};
  const TensorRef as{unsummed.add("Repartition", {{"dim", int64_t{1}}, {"degree", int64_t{2}}}, {a}), 0};
  const TensorRef ws{unsummed.add("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {w}), 0};
  unsummed.add_output({unsummed.add("Linear", {}, {as, ws}, "fc"), 0});
  const Certificate u = certify(unsummed, axioms());
  EXPECT_NE(listed(u).find("output 0: reads the partial sums of fc"), std::string::npos) << listed(u);

  // Data parallelism's loss: partial sums per slot, left for the trainer.
  const Graph dp = search::data_parallel(build_model("mlp-tiny", {{"batch", 8}}), 4);
  EXPECT_TRUE(certify(dp, axioms()).verified());
}

// The operators proved are compared with the model's: a strategy running
// Gelu where the model has Relu is told apart by name and operator.
TEST(Certificate, SameOperatorsComparesWithTheModel) {
  const Graph model = build_model("mlp-tiny", {{"batch", 8}});
  const Graph dp = search::data_parallel(model, 4);
  EXPECT_EQ(same_operators(dp, model), std::nullopt);
  Graph other("other");
  const TensorRef x{other.add("Input", {{"shape", IntList{8, 16}}}, {}, "x"), 0};
  other.add_output({other.add("Gelu", {}, {x}, "act"), 0});
  Graph mine("mine");
  const TensorRef y{mine.add("Input", {{"shape", IntList{8, 16}}}, {}, "x"), 0};
  mine.add_output({mine.add("Relu", {}, {y}, "act"), 0});
  const auto differ = same_operators(other, mine);
  ASSERT_TRUE(differ);
  EXPECT_NE(differ->find("'act' is a Relu in the model and runs as a Gelu"), std::string::npos) << *differ;
  EXPECT_TRUE(same_operators(dp, mine));
}

// Reading partial sums as if they were the value is refused by name.
TEST(Certificate, ReadingPartialSumsUnsummedIsNamed) {
  Graph g("unsummed");
  const TensorRef x{g.add("Input", {{"shape", IntList{8, 16}}}, {}, "x"), 0};
  const TensorRef w{g.add("Weight", {{"shape", IntList{16, 4}}}, {}, "w"), 0};
  const TensorRef xs{g.add("Repartition", {{"dim", int64_t{1}}, {"degree", int64_t{2}}}, {x}), 0};
  const TensorRef ws{g.add("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {w}), 0};
  const TensorRef y{g.add("Linear", {}, {xs, ws}, "fc"), 0};
  g.add_output({g.add("Relu", {}, {y}, "act"), 0});
  const Certificate c = certify(g, axioms());
  ASSERT_FALSE(c.verified());
  EXPECT_NE(listed(c).find("Relu 'act' input 0: reads the partial sums of fc"), std::string::npos) << listed(c);
}

}  // namespace
}  // namespace pcgx::verify
