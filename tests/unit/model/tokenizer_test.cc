#include "model/tokenizer/bpe_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <google/protobuf/struct.pb.h>

#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/json_config.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/pre_tokenizer.h"
#include "model/tokenizer/unicode.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tokenizer::SplitPattern;
using tokenizer::SplitPreTokens;

const std::string kFixtureDir = std::string(KFORGE_TEST_SOURCE_DIR) + "/tests/data/tokenizer";
constexpr int32_t kEndOfText = 50256;

// ---------------------------------------------------------------------------
// A hand-made tokenizer.json: the 256 byte tokens (ids 0-255, GPT-2's byte
// alphabet) plus a few merged tokens, small enough to check BPE by hand.

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

std::string ByteToken(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  char32_t cp = static_cast<char32_t>(b);
  if (!printable) {
    cp = 0x100;
    for (int other = 0; other < b; ++other) {
      const bool p = (other >= '!' && other <= '~') || (other >= 0xA1 && other <= 0xAC) ||
                     other >= 0xAE;
      if (!p) ++cp;
    }
  }
  std::string out;
  tokenizer::AppendUtf8(cp, &out);
  return out;
}

struct TinySpec {
  std::vector<std::string> extra_tokens;  // ids 256, 257, ...
  std::vector<std::string> merges;        // JSON values: "\"a b\"" or "[\"a\", \"b\"]"
  std::string pre_tokenizer = R"({"type": "ByteLevel", "add_prefix_space": false,
                                  "use_regex": true})";
  std::string added_tokens = "[]";
  std::string normalizer = "null";
  bool ignore_merges = false;
};

std::string TinyTokenizerJson(const TinySpec& spec) {
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.push_back(absl::StrCat(JsonQuote(ByteToken(b)), ": ", b));
  for (size_t i = 0; i < spec.extra_tokens.size(); ++i) {
    vocab.push_back(absl::StrCat(JsonQuote(spec.extra_tokens[i]), ": ", 256 + i));
  }
  return absl::StrCat(
      R"({"version": "1.0", "added_tokens": )", spec.added_tokens,
      R"(, "normalizer": )", spec.normalizer, R"(, "pre_tokenizer": )", spec.pre_tokenizer,
      R"(, "post_processor": null, "decoder": {"type": "ByteLevel"},
          "model": {"type": "BPE", "dropout": null, "unk_token": null,
                    "ignore_merges": )",
      spec.ignore_merges ? "true" : "false", R"(, "vocab": {)", absl::StrJoin(vocab, ", "),
      R"(}, "merges": [)", absl::StrJoin(spec.merges, ", "), "]}}");
}

std::unique_ptr<BpeTokenizer> TinyTokenizer(const TinySpec& spec) {
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tok =
      BpeTokenizer::FromJson(TinyTokenizerJson(spec));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

// e l (rank 0) beats h e (rank 1): "helo" -> h, el, o, where merging the
// leftmost pair first would give he, lo.
TinySpec RankedMerges() {
  TinySpec spec;
  spec.extra_tokens = {"el", "he", "lo", "helo"};  // 256, 257, 258, 259
  spec.merges = {R"("e l")", R"(["h", "e"])", R"("l o")"};
  return spec;
}

// ---------------------------------------------------------------------------
// The GPT-2 fixture, loaded once.

class BpeTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<BpeTokenizer>> tok =
        BpeTokenizer::FromFile(kFixtureDir + "/gpt2/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status();
    gpt2_ = tok->release();
  }
  static void TearDownTestSuite() {
    delete gpt2_;
    gpt2_ = nullptr;
  }

  struct Line {
    std::string text;
    std::vector<int32_t> ids;
  };
  static std::vector<Line> ExpectedLines() {
    absl::StatusOr<std::string> file = ReadFileToString(kFixtureDir + "/gpt2_expected.jsonl");
    EXPECT_TRUE(file.ok()) << file.status();
    std::vector<Line> lines;
    std::istringstream in(file.ok() ? *file : "");
    for (std::string json; std::getline(in, json);) {
      google::protobuf::Struct row;
      EXPECT_TRUE(ParseJsonMessage(json, &row).ok()) << json;
      Line line{row.fields().at("text").string_value(), {}};
      for (const auto& id : row.fields().at("ids").list_value().values()) {
        line.ids.push_back(static_cast<int32_t>(id.number_value()));
      }
      lines.push_back(std::move(line));
    }
    return lines;
  }

  static BpeTokenizer* gpt2_;
};

BpeTokenizer* BpeTokenizerTest::gpt2_ = nullptr;

TEST_F(BpeTokenizerTest, Gpt2CorpusEncodesToTheReferenceIds) {
  const std::vector<Line> lines = ExpectedLines();
  ASSERT_GT(lines.size(), 200u);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(gpt2_->Encode(lines[i].text), lines[i].ids)
        << "gpt2_expected.jsonl line " << i + 1 << ": \"" << lines[i].text << "\"";
  }
}

TEST_F(BpeTokenizerTest, Gpt2CorpusDecodesBackExactly) {
  for (const Line& line : ExpectedLines()) {
    absl::StatusOr<std::string> text = gpt2_->Decode(line.ids);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, line.text);
  }
}

TEST_F(BpeTokenizerTest, EncodingTwiceGivesTheSameIds) {  // the second from the cache
  const std::string text = "def kernel(x_ptr, y_ptr):\n    pass\n";
  EXPECT_EQ(gpt2_->Encode(text), gpt2_->Encode(text));
}

TEST_F(BpeTokenizerTest, SpecialTokenIsOneIdAndNeverSplit) {
  EXPECT_THAT(gpt2_->Encode("<|endoftext|>"), ElementsAre(kEndOfText));
  EXPECT_THAT(gpt2_->Encode("a<|endoftext|>b"), ElementsAre(64, kEndOfText, 65));
  EXPECT_EQ(gpt2_->TokenId("<|endoftext|>"), kEndOfText);
}

TEST_F(BpeTokenizerTest, DecodeSkipSpecialDropsSpecialTokens) {
  const std::vector<int32_t> ids = gpt2_->Encode("one<|endoftext|>two");
  EXPECT_EQ(*gpt2_->Decode(ids), "one<|endoftext|>two");
  EXPECT_EQ(*gpt2_->Decode(ids, /*skip_special=*/true), "onetwo");
}

TEST_F(BpeTokenizerTest, TokenIdTakesTheVocabularySpelling) {
  EXPECT_EQ(gpt2_->TokenId("Ġthe"), 262);
  EXPECT_EQ(gpt2_->TokenId("!"), 0);
  EXPECT_EQ(gpt2_->TokenId("no such token"), std::nullopt);
}

TEST_F(BpeTokenizerTest, VocabSizeIsOnePastTheLargestId) {
  EXPECT_EQ(gpt2_->vocab_size(), 50257);
}

TEST_F(BpeTokenizerTest, DecodeOfAnUnknownIdIsAnErrorNamingIt) {
  for (int32_t bad : {50257, -1}) {
    absl::StatusOr<std::string> text = gpt2_->Decode({262, bad});
    EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(text.status().message()), HasSubstr(absl::StrCat("id ", bad)));
  }
}

TEST_F(BpeTokenizerTest, DecodeOfACutCharacterGivesTheReplacementCharacter) {
  const std::vector<int32_t> ids = gpt2_->Encode("🚀");  // 4 bytes, more than one token
  ASSERT_GT(ids.size(), 1u);
  EXPECT_EQ(*gpt2_->Decode({ids[0]}), "\xEF\xBF\xBD");
}

TEST_F(BpeTokenizerTest, RandomValidUtf8RoundTrips) {
  std::mt19937 rng(7);
  // Mostly ASCII, with every UTF-8 length and the planes' edges.
  const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x01, 0x7F}, {0x01, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF},
      {0x10000, 0x10FFFF}, {0x1F300, 0x1F64F}};
  for (int n = 0; n < 300; ++n) {
    std::string text;
    const int length = std::uniform_int_distribution<int>(0, 60)(rng);
    for (int i = 0; i < length; ++i) {
      const auto& [lo, hi] = ranges[rng() % ranges.size()];
      tokenizer::AppendUtf8(std::uniform_int_distribution<char32_t>(lo, hi)(rng), &text);
    }
    absl::StatusOr<std::string> decoded = gpt2_->Decode(gpt2_->Encode(text));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, text);
  }
}

TEST(BpeTokenizerLoadTest, MissingFileIsNotFoundNamingThePath) {
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tok =
      BpeTokenizer::FromFile("/nonexistent/tokenizer.json");
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(tok.status().message()), HasSubstr("/nonexistent/tokenizer.json"));
}

// Loads `json` from a file and returns the error message, which must name the file.
std::string LoadError(const std::string& json) {
  testing::TempDir dir;
  const std::string path = dir.Sub("tokenizer.json");
  testing::WriteFile(path, json);
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tok = BpeTokenizer::FromFile(path);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tok.status().message()), HasSubstr(path));
  return std::string(tok.status().message());
}

TEST(BpeTokenizerLoadTest, MalformedJsonIsAnErrorNamingTheFile) {
  EXPECT_THAT(LoadError(R"({"model": {"type": "BPE",)"), HasSubstr("malformed JSON"));
}

TEST(BpeTokenizerLoadTest, MissingModelIsAnError) {
  EXPECT_THAT(LoadError(R"({"added_tokens": []})"), HasSubstr("missing \"model\""));
}

TEST(BpeTokenizerLoadTest, ModelTypeOtherThanBpeIsAnError) {
  EXPECT_THAT(LoadError(R"({"model": {"type": "WordPiece", "vocab": {}}})"),
              HasSubstr("type \"WordPiece\" is not BPE"));
}

TEST(BpeTokenizerLoadTest, BadMergesEntryNamesItsIndex) {
  TinySpec spec = RankedMerges();
  spec.merges.push_back(R"("a b c")");
  EXPECT_THAT(LoadError(TinyTokenizerJson(spec)), HasSubstr("model.merges entry index 3"));
  spec.merges.back() = R"("x yz")";  // "yz" is not a token
  EXPECT_THAT(LoadError(TinyTokenizerJson(spec)),
              HasSubstr("model.merges entry index 3: \"yz\" is not in model.vocab"));
}

TEST(BpeTokenizerLoadTest, UnknownSplitPatternIsAnErrorNamingIt) {
  TinySpec spec;
  spec.pre_tokenizer = R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\w+|\\W"}, "behavior": "Isolated",
       "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})";
  EXPECT_THAT(LoadError(TinyTokenizerJson(spec)),
              HasSubstr(R"(unsupported pre-tokenizer split pattern "\w+|\W")"));
}

TEST(BpeTokenizerLoadTest, UnsupportedPartsAreErrorsNamingThem) {
  TinySpec normalizer;
  normalizer.normalizer = R"({"type": "NFKC"})";
  EXPECT_THAT(LoadError(TinyTokenizerJson(normalizer)), HasSubstr("\"NFKC\""));
  TinySpec no_byte_level;
  no_byte_level.pre_tokenizer = R"({"type": "Whitespace"})";
  EXPECT_THAT(LoadError(TinyTokenizerJson(no_byte_level)), HasSubstr("\"Whitespace\""));
}

TEST(BpeTokenizerLoadTest, VocabularyWithoutEveryByteIsAnError) {
  const std::string json = R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
      "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}})";
  EXPECT_THAT(LoadError(json), HasSubstr("token of byte 0x00"));
}

// ---------------------------------------------------------------------------
// BPE on the hand-made vocabulary.

TEST(BpeTokenizerTinyTest, LowestRankMergesFirst) {
  auto tok = TinyTokenizer(RankedMerges());
  ASSERT_NE(tok, nullptr);
  // h e l o: "e l" (0) first; then no pair of h, el, o has a merge.
  EXPECT_THAT(tok->Encode("helo"), ElementsAre('h', 256, 'o'));
  // h e l l o: "e l" -> h el l o; then "l o" (2) -> h el lo.
  EXPECT_THAT(tok->Encode("hello"), ElementsAre('h', 256, 258));
  // h e: only "h e" applies.
  EXPECT_THAT(tok->Encode("he"), ElementsAre(257));
}

TEST(BpeTokenizerTinyTest, IgnoreMergesTakesAWholeWordFromTheVocabulary) {
  TinySpec spec = RankedMerges();
  spec.ignore_merges = true;
  auto tok = TinyTokenizer(spec);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("helo"), ElementsAre(259));
  EXPECT_THAT(tok->Encode("hello"), ElementsAre('h', 256, 258));
}

TEST(BpeTokenizerTinyTest, SpaceIsPartOfTheFollowingWord) {
  TinySpec spec = RankedMerges();
  spec.extra_tokens.push_back("Ġhe");  // 260
  spec.merges.push_back(R"("Ġ he")");
  auto tok = TinyTokenizer(spec);
  ASSERT_NE(tok, nullptr);
  const int32_t space = *tok->TokenId("Ġ");
  EXPECT_THAT(tok->Encode("he he  he"), ElementsAre(257, 260, space, 260));
}

TEST(BpeTokenizerTinyTest, AddPrefixSpaceAddsOneBeforeTheText) {
  TinySpec spec = RankedMerges();
  spec.pre_tokenizer = R"({"type": "ByteLevel", "add_prefix_space": true, "use_regex": true})";
  auto tok = TinyTokenizer(spec);
  ASSERT_NE(tok, nullptr);
  const int32_t space = *tok->TokenId("Ġ");
  EXPECT_THAT(tok->Encode("he"), ElementsAre(space, 257));
  EXPECT_THAT(tok->Encode(" he"), ElementsAre(space, 257));
}

// Qwen-style: NFC normalizer, Split + ByteLevel, ChatML markers as specials.
TEST(BpeTokenizerTinyTest, QwenStyleFileLoadsAndMatchesChatMarkers) {
  TinySpec spec = RankedMerges();
  spec.normalizer = R"({"type": "NFC"})";
  spec.pre_tokenizer = absl::StrCat(
      R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": )",
      JsonQuote(std::string(tokenizer::SplitPatternRegex(SplitPattern::kQwen2))),
      R"(}, "behavior": "Isolated", "invert": false},
          {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})");
  spec.added_tokens = R"([
      {"id": 300, "content": "<|im_start|>", "special": true, "normalized": false},
      {"id": 301, "content": "<|im_end|>", "special": true, "normalized": false},
      {"id": 302, "content": "<|im_end|>x", "special": false, "normalized": false}])";
  auto tok = TinyTokenizer(spec);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 303);
  EXPECT_EQ(tok->TokenId("<|im_end|>"), 301);
  const int32_t newline = *tok->TokenId("Ċ");
  EXPECT_THAT(tok->Encode("<|im_start|>he\n<|im_end|>"),
              ElementsAre(300, 257, newline, 301));
  // Longest match wins; a non-special added token survives skip_special.
  EXPECT_THAT(tok->Encode("<|im_end|>x<|im_end|>"), ElementsAre(302, 301));
  EXPECT_EQ(*tok->Decode({300, 257, 302, 301}, /*skip_special=*/true), "he<|im_end|>x");
}

TEST(BpeTokenizerTinyTest, LstripAndRstripSwallowWhitespace) {
  TinySpec spec;
  spec.added_tokens = R"([{"id": 300, "content": "<mask>", "special": true,
                           "lstrip": true, "rstrip": true, "normalized": false}])";
  auto tok = TinyTokenizer(spec);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("a  <mask>  b"), ElementsAre('a', 300, 'b'));
}

// ---------------------------------------------------------------------------
// The split patterns, on cases worked out by hand from the regexes.

std::vector<std::string> Split(SplitPattern pattern, absl::string_view text) {
  std::vector<absl::string_view> pieces;
  SplitPreTokens(pattern, text, &pieces);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

TEST(BpeTokenizerSplitTest, KnownPatternsAreRecognisedByTheirExactText) {
  EXPECT_EQ(*tokenizer::SplitPatternFromRegex(
                R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"),
            SplitPattern::kGpt2);
  EXPECT_EQ(*tokenizer::SplitPatternFromRegex(
                R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L})"
                R"(\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
            SplitPattern::kQwen2);
  EXPECT_EQ(*tokenizer::SplitPatternFromRegex(
                R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L})"
                R"(\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
            SplitPattern::kLlama3);
  EXPECT_FALSE(tokenizer::SplitPatternFromRegex(R"(\p{L}+|\p{N}+)").ok());
}

TEST(BpeTokenizerSplitTest, Gpt2PatternKeepsASpaceWithTheNextWord) {
  EXPECT_THAT(Split(SplitPattern::kGpt2, "Hello  world's 42!\n\n"),
              ElementsAre("Hello", " ", " world", "'s", " 42", "!", "\n\n"));
  EXPECT_THAT(Split(SplitPattern::kGpt2, "DON'T"), ElementsAre("DON", "'", "T"));
}

TEST(BpeTokenizerSplitTest, Qwen2PatternSplitsDigitsOneByOne) {
  EXPECT_THAT(Split(SplitPattern::kQwen2, "Hello world's 12345"),
              ElementsAre("Hello", " world", "'s", " ", "1", "2", "3", "4", "5"));
  EXPECT_THAT(Split(SplitPattern::kQwen2, "DON'T"), ElementsAre("DON", "'T"));
}

TEST(BpeTokenizerSplitTest, Llama3PatternSplitsDigitsByThrees) {
  EXPECT_THAT(Split(SplitPattern::kLlama3, "x=1234567"),
              ElementsAre("x", "=", "123", "456", "7"));
}

TEST(BpeTokenizerSplitTest, QwenPatternLineBreaksAndIndentation) {
  EXPECT_THAT(Split(SplitPattern::kQwen2, "foo\n\n  bar"),
              ElementsAre("foo", "\n\n", " ", " bar"));
  EXPECT_THAT(Split(SplitPattern::kQwen2, "x = (a);\n"),
              ElementsAre("x", " =", " (", "a", ");\n"));
  EXPECT_THAT(Split(SplitPattern::kQwen2, "\t\tfoo  \n"), ElementsAre("\t", "\tfoo", "  \n"));
  EXPECT_THAT(Split(SplitPattern::kQwen2, "😀x é"), ElementsAre("😀x", " é"));
}

TEST(BpeTokenizerSplitTest, IllFormedUtf8IsCoveredToo) {
  const std::string text = "ab\xFF\xC3 c";
  const std::vector<std::string> pieces = Split(SplitPattern::kQwen2, text);
  EXPECT_EQ(absl::StrJoin(pieces, ""), text);
}

// ---------------------------------------------------------------------------

TEST(ChatTemplateTest, ChatMlRendersEachMessageThenTheAssistantPrompt) {
  absl::StatusOr<std::string> text = RenderChat(
      "chatml", {{"system", "You write Triton."}, {"user", "Write a ReLU."}}, true);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text,
            "<|im_start|>system\nYou write Triton.<|im_end|>\n"
            "<|im_start|>user\nWrite a ReLU.<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, ChatMlWithoutGenerationPromptEndsAfterTheLastMessage) {
  EXPECT_EQ(*RenderChat("chatml", {{"user", "hi"}, {"assistant", "hello"}}, false),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n");
}

TEST(ChatTemplateTest, Llama3RendersHeadersAndTrimsContent) {
  EXPECT_EQ(*RenderChat("llama3", {{"system", "Be brief. "}, {"user", "\nWrite a ReLU."}}, true),
            "<|begin_of_text|>"
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWrite a ReLU.<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateTest, PlainJoinsContentsWithBlankLines) {
  EXPECT_EQ(*RenderChat("plain", {{"system", "a"}, {"user", "b\n"}, {"user", "c"}}, true),
            "a\n\nb\n\n\nc");
}

TEST(ChatTemplateTest, UnknownFormatIsAnErrorNamingIt) {
  absl::StatusOr<std::string> text = RenderChat("mistral", {{"user", "hi"}}, true);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("\"mistral\""));
}

TEST(ChatTemplateTest, RoleMustBeOneNonEmptyLine) {
  EXPECT_FALSE(RenderChat("chatml", {{"", "hi"}}, true).ok());
  EXPECT_FALSE(RenderChat("llama3", {{"user\nassistant", "hi"}}, true).ok());
}

TEST(ChatTemplateTest, EmptyConversationIsJustTheGenerationPrompt) {
  EXPECT_EQ(*RenderChat("chatml", {}, true), "<|im_start|>assistant\n");
}

}  // namespace
}  // namespace kforge
