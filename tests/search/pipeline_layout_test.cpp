// Megatron-LM's pipeline layout strings (pipeline_layout.h): what each
// chunk holds, repetitions unrolled, and a malformed string refused with
// the reason, naming the field.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/error.h"
#include "pcgx/search/pipeline_layout.h"

namespace pcgx::search {
namespace {

using Layers = std::vector<int64_t>;

TEST(PipelineLayout, ChunksAndRepetitions) {
  EXPECT_EQ(parse_pipeline_layout("EtttL"), Layers({3}));
  EXPECT_EQ(parse_pipeline_layout("Et|tt|tL"), Layers({1, 2, 1}));
  EXPECT_EQ(parse_pipeline_layout("E|t*4|L"), Layers({0, 4, 0}));  // the embeddings and the head alone
  EXPECT_EQ(parse_pipeline_layout("Et*3|(t*4|)*3,t*3L"), Layers({3, 4, 4, 4, 3}));
  EXPECT_EQ(parse_pipeline_layout("E(tt|)*2tL"), Layers({2, 2, 1}));
  EXPECT_EQ(parse_pipeline_layout("E((t|)*2)*2tL"), Layers({1, 1, 1, 1, 1}));  // nested groups
  EXPECT_EQ(parse_pipeline_layout(" E t*2 , | t L "), Layers({2, 1}));    // spaces and commas cosmetic
  // Llama 3 405B: 126 layers in 32 chunks, the first and last one short.
  const Layers llama3 = parse_pipeline_layout("Et*3|(t*4|)*30,t*3L");
  ASSERT_EQ(llama3.size(), 32u);
  int64_t sum = 0;
  for (const int64_t n : llama3) sum += n;
  EXPECT_EQ(sum, 126);
  EXPECT_EQ(llama3.front(), 3);
  EXPECT_EQ(llama3[1], 4);
  EXPECT_EQ(llama3.back(), 3);
}

TEST(PipelineLayout, MalformedIsAnErrorNamingTheField) {
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {"EtxL", "unknown character 'x' at position 2"},
           {"Et*|tL", "'*' at position 2 is not followed by a count"},
           {"E(t|*2tL", "a group '(' is not closed"},
           {"Et)|tL", "')' at position 2 closes no group"},
           {"E(t|)tL", "a group '(...)' must be followed by '*' and a count"},
           {"tE|tL", "'E' (the embeddings) must come first in the first chunk"},
           {"Et|Lt", "'L' (the head and loss) must come last in the last chunk"},
           {"Et|tL|", "'L' (the head and loss) must come last in the last chunk"},
           {"Et||tL", "chunk 2 of 3 holds no layer"},
           {"t|tL", "a layout states 'E' and 'L' once each"},
           {"Et*2000000L", "a repetition of more than"},
           {"E(t*1000|)*2000L", "characters once expanded"},
           {"", "chunk 1 of 1 holds no layer"},
           {"|", "chunk 1 of 2 holds no layer"},
           {"(", "a group '(' is not closed"},
           {"E*0L", "a layout states 'E' and 'L' once each"},
           {std::string(100, '(') + "t" + std::string(100, ')'), "groups nested more than 64 deep"},
           {"E" + [] { std::string r; for (int i = 0; i < 10000; ++i) r += "(t*1000000)*0"; return r; }() + "L", "characters once expanded"},
       }) {
    try {
      parse_pipeline_layout(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const FieldError& e) {
      EXPECT_EQ(e.field(), "PipelineOptions.layout") << text;
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << text << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace pcgx::search
