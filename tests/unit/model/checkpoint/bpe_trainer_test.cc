#include "model/checkpoint/bpe_trainer.h"

#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "common/config/json_config.h"
#include "model/checkpoint/chatml_tokenizer.h"
#include "model/checkpoint/tiny_model.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/tokenizer/chat_template.h"

namespace kforge {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using Merges = std::vector<std::pair<std::string, std::string>>;

const std::string kTasksDir = std::string(KFORGE_TEST_SOURCE_DIR) + "/tasks/kforge-mini";

std::unique_ptr<BpeTokenizer> Load(const TrainedBpe& bpe) {
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tok =
      BpeTokenizer::FromJson(ChatMlTokenizerJson(bpe));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

TEST(BpeTrainerTest, ByteTokensFollowGpt2Order) {
  const TrainedBpe bpe = TrainByteLevelBpe({}, {});
  ASSERT_EQ(bpe.tokens.size(), 256u);
  EXPECT_TRUE(bpe.merges.empty());
  // GPT-2's vocab.json: "!" 0, "A" 32, "Ā" (byte 0x00) 188, "Ġ" (space) 220.
  EXPECT_EQ(bpe.tokens[0], "!");
  EXPECT_EQ(bpe.tokens[32], "A");
  EXPECT_EQ(bpe.tokens[188], "\xC4\x80");
  EXPECT_EQ(bpe.tokens[220], "\xC4\xA0");
  EXPECT_EQ(ToByteAlphabet(" x\n"), "\xC4\xA0x\xC4\x8A");
}

TEST(BpeTrainerTest, MergesMostFrequentPairFirstWithTiesBrokenByBytes) {
  // Pieces "aaab", " aaab", " aaab": (a,a) occurs 6 times; then (a,b) and
  // (aa,a) tie at 3 and "a" < "aa" decides; then (aa,ab) 3; then (Ġ,aaab) 2.
  const TrainedBpe bpe = TrainByteLevelBpe({"aaab aaab aaab"}, {});
  EXPECT_THAT(bpe.merges, ElementsAre(Pair("a", "a"), Pair("a", "b"), Pair("aa", "ab"),
                                      Pair("\xC4\xA0", "aaab")));
  EXPECT_THAT(std::vector<std::string>(bpe.tokens.begin() + 256, bpe.tokens.end()),
              ElementsAre("aa", "ab", "aaab",
                          "\xC4\xA0"
                          "aaab"));
  std::unique_ptr<BpeTokenizer> tok = Load(bpe);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("aaab aaab"), ElementsAre(258, 259));
}

TEST(BpeTrainerTest, StopsAtMaxMergesAndAtPairsSeenTooRarely) {
  EXPECT_EQ(TrainByteLevelBpe({"aaab aaab aaab"}, {.max_merges = 2}).merges.size(), 2u);
  // (Ġ,aaab) occurs twice: a floor of 3 drops it.
  EXPECT_EQ(TrainByteLevelBpe({"aaab aaab aaab"}, {.min_pair_count = 3}).merges.size(), 3u);
  // Every pair once: nothing to learn.
  EXPECT_TRUE(TrainByteLevelBpe({"abcdef"}, {}).merges.empty());
}

TEST(BpeTrainerTest, SameCorpusInAnyOrderGivesSameTokenizer) {
  absl::StatusOr<std::vector<std::string>> corpus = ReadTaskSources(kTasksDir);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_GE(corpus->size(), 5u);
  const TrainedBpe first = TrainByteLevelBpe(*corpus, {});
  std::reverse(corpus->begin(), corpus->end());
  const TrainedBpe second = TrainByteLevelBpe(*corpus, {});
  EXPECT_EQ(first.merges, second.merges);
  EXPECT_EQ(first.tokens, second.tokens);
  EXPECT_GE(first.merges.size(), 150u);
}

TEST(BpeTrainerTest, TrainedTokenizerRoundTripsTextAndSpecialTokens) {
  absl::StatusOr<std::vector<std::string>> corpus = ReadTaskSources(kTasksDir);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  const TrainedBpe bpe = TrainByteLevelBpe(*corpus, {});
  std::unique_ptr<BpeTokenizer> tok = Load(bpe);
  ASSERT_NE(tok, nullptr);
  const ChatMlTokenIds ids = ChatMlIds(bpe);
  EXPECT_EQ(tok->vocab_size(), ids.vocab_size);
  absl::StatusOr<std::string> prompt = RenderChat(
      "chatml",
      {{"system", "You write Triton kernels."},
       {"user", "def forward(self, x):\n    return torch.relu(x)  # naïve, 日本語 ✓\r\n\t\x01"}},
      /*add_generation_prompt=*/true);
  ASSERT_TRUE(prompt.ok());
  const std::string text = *prompt + "@triton.jit\n<|endoftext|>";
  const std::vector<int32_t> encoded = tok->Encode(text);
  absl::StatusOr<std::string> decoded = tok->Decode(encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, text);
  EXPECT_EQ(std::count(encoded.begin(), encoded.end(), ids.im_start), 3);
  EXPECT_EQ(std::count(encoded.begin(), encoded.end(), ids.im_end), 2);
  EXPECT_EQ(encoded.back(), ids.endoftext);
  EXPECT_EQ(tok->TokenId("<|im_end|>"), ids.im_end);
  // Frequent task words became single tokens; fewer tokens than bytes.
  EXPECT_EQ(tok->Encode(" torch").size(), 1u);
  EXPECT_EQ(tok->Encode("def").size(), 1u);
  // The training text itself compresses well.
  EXPECT_LT(tok->Encode(corpus->front()).size(), corpus->front().size() / 3);
  // Special tokens are dropped on request.
  absl::StatusOr<std::string> plain = tok->Decode(tok->Encode("<|im_start|>hi<|im_end|>"), true);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, "hi");
}

TEST(BpeTrainerTest, TokenizerConfigCarriesChatTemplateAndEos) {
  const TrainedBpe bpe = TrainByteLevelBpe({"aaab aaab"}, {});
  ASSERT_EQ(bpe.tokens.size(), 259u);  // aa, ab, aaab: then <|endoftext|> 259, <|im_start|> 260
  google::protobuf::Struct config;
  ASSERT_TRUE(ParseJsonMessage(ChatMlTokenizerConfigJson(bpe), &config).ok());
  EXPECT_EQ(config.fields().at("eos_token").string_value(), "<|im_end|>");
  EXPECT_EQ(config.fields().at("pad_token").string_value(), "<|endoftext|>");
  const std::string& tmpl = config.fields().at("chat_template").string_value();
  EXPECT_NE(tmpl.find("'<|im_start|>' + message['role'] + '\\n'"), std::string::npos) << tmpl;
  const auto& decoder = config.fields().at("added_tokens_decoder").struct_value().fields();
  EXPECT_EQ(decoder.at("260").struct_value().fields().at("content").string_value(), "<|im_start|>");
}

}  // namespace
}  // namespace kforge
