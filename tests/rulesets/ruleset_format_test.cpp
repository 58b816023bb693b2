#include <gtest/gtest.h>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph.h"
#include "pcgx/rulesets/ruleset.h"
#include "pcgx/rulesets/sha256.h"

namespace pcgx {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

Ruleset sample() {
  Ruleset r;
  r.name = "sample";
  r.opset = "custom";
  r.operators = {"Relu", "Repartition"};
  Graph src, dst;
  NodeId x = src.add("Input", {{"shape", IntList{4, 4}}}, {}, "x");
  NodeId p = src.add("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {{x, 0}});
  src.add_output({src.add("Relu", {}, {{p, 0}}), 0});
  NodeId y = dst.add("Input", {{"shape", IntList{4, 4}}}, {}, "x");
  NodeId q = dst.add("Relu", {}, {{y, 0}});
  dst.add_output({dst.add("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {{q, 0}}), 0});
  r.rules.push_back({"sample-1", src, dst, {{0, 0}}, std::nullopt});
  r.stats = {{"graphs", 12}};
  return r;
}

TEST(RulesetFormat, RoundTripKeepsContentAndHash) {
  const std::string text = ruleset_to_json(sample());
  const Ruleset back = ruleset_from_json(text, "mem");
  EXPECT_EQ(back.stored_hash, back.computed_hash);
  EXPECT_EQ(back.stored_hash.size(), 64u);
  EXPECT_EQ(ruleset_to_json(back), text);
  ASSERT_EQ(back.rules.size(), 1u);
  EXPECT_EQ(back.rules[0].source.size(), 3u);
  EXPECT_EQ(back.rules[0].output_map, (std::vector<std::pair<int, int>>{{0, 0}}));
}

TEST(RulesetFormat, EditedContentNoLongerMatchesItsHash) {
  std::string text = ruleset_to_json(sample());
  const auto pos = text.find("\"degree\":2");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 10, "\"degree\":4");
  const Ruleset back = ruleset_from_json(text, "mem");
  EXPECT_NE(back.stored_hash, back.computed_hash);
}

TEST(RulesetFormat, ErrorsNameTheRuleAndField) {
  std::string text = ruleset_to_json(sample());
  text.replace(text.find("\"Relu\"", text.find("\"rules\"")), 6, "\"Relux\"");
  try {
    ruleset_from_json(text, "r.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("r.json: rules[0].source.nodes[2].op: unknown operator 'Relux'", 0), 0u) << e.what();
  }
  EXPECT_THROW(ruleset_from_json("{\"format_version\": 1, \"kind\": \"x\"}", "r.json"), Error);
  EXPECT_THROW(ruleset_from_json("{", "r.json"), Error);
}

// A proof record's value_generic: kept through a round trip (and in the
// content hash); anything but an array of names is an error naming it.
TEST(RulesetFormat, ValueGenericIsKeptAndChecked) {
  Ruleset r = sample();
  r.rules[0].proof = ProofRecord{"proved", 0.001, {"relu_repartition"}, "", true, {"Dropout.seed"}};
  const std::string text = ruleset_to_json(r);
  const Ruleset back = ruleset_from_json(text, "mem");
  ASSERT_TRUE(back.rules[0].proof);
  EXPECT_EQ(back.rules[0].proof->value_generic, (std::vector<std::string>{"Dropout.seed"}));
  EXPECT_EQ(back.stored_hash, back.computed_hash);
  r.rules[0].proof->value_generic.clear();
  EXPECT_NE(ruleset_from_json(ruleset_to_json(r), "mem").computed_hash, back.computed_hash);
  for (const std::string& bad : {std::string("\"Dropout.seed\""), std::string("[1]")}) {
    std::string wrong = text;
    const std::string field = "\"value_generic\":[\"Dropout.seed\"]";
    ASSERT_NE(wrong.find(field), std::string::npos) << wrong;
    wrong.replace(wrong.find(field), field.size(), "\"value_generic\":" + bad);
    try {
      ruleset_from_json(wrong, "r.json");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("r.json: rules[0].proof.value_generic: must be an array of \"Op.attr\" names", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace pcgx
