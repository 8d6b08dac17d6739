#include "model/checkpoint/chatml_tokenizer.h"

#include <google/protobuf/struct.pb.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"
#include "model/checkpoint/json_fields.h"
#include "model/tokenizer/pre_tokenizer.h"

namespace kforge {
namespace {

using checkpoint::JsonBool;
using checkpoint::JsonList;
using checkpoint::JsonNull;
using checkpoint::JsonNumber;
using checkpoint::JsonObjectOf;
using checkpoint::JsonObjectValue;
using checkpoint::JsonString;
using google::protobuf::Struct;
using google::protobuf::Value;

constexpr const char* kSpecialTokens[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

// Qwen2.5's template without its default system message, which is what
// RenderChat("chatml") renders.
constexpr const char* kChatTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

// An added token as tokenizer.json lists it (with its id) and as
// tokenizer_config.json's added_tokens_decoder maps it (keyed by id).
Value AddedToken(int64_t id, absl::string_view content, bool with_id) {
  Struct token = JsonObjectOf({{"content", JsonString(content)},
                               {"single_word", JsonBool(false)},
                               {"lstrip", JsonBool(false)},
                               {"rstrip", JsonBool(false)},
                               {"normalized", JsonBool(false)},
                               {"special", JsonBool(true)}});
  if (with_id) (*token.mutable_fields())["id"] = JsonNumber(static_cast<double>(id));
  return JsonObjectValue(std::move(token));
}

// The byte-level stages that pre-tokenizer, post-processor and decoder share.
Value ByteLevel() {
  return JsonObjectValue(JsonObjectOf({{"type", JsonString("ByteLevel")},
                                       {"add_prefix_space", JsonBool(false)},
                                       {"trim_offsets", JsonBool(false)},
                                       {"use_regex", JsonBool(false)}}));
}

Value BpeModel(const TrainedBpe& bpe) {
  Struct vocab;
  for (size_t id = 0; id < bpe.tokens.size(); ++id) {
    (*vocab.mutable_fields())[bpe.tokens[id]] = JsonNumber(static_cast<double>(id));
  }
  std::vector<Value> merges;
  merges.reserve(bpe.merges.size());
  for (const auto& [left, right] : bpe.merges) {
    merges.push_back(JsonString(absl::StrCat(left, " ", right)));
  }
  return JsonObjectValue(JsonObjectOf({{"type", JsonString("BPE")},
                                       {"dropout", JsonNull()},
                                       {"unk_token", JsonNull()},
                                       {"continuing_subword_prefix", JsonString("")},
                                       {"end_of_word_suffix", JsonString("")},
                                       {"fuse_unk", JsonBool(false)},
                                       {"byte_fallback", JsonBool(false)},
                                       {"ignore_merges", JsonBool(false)},
                                       {"vocab", JsonObjectValue(std::move(vocab))},
                                       {"merges", JsonList(std::move(merges))}}));
}

}  // namespace

ChatMlTokenIds ChatMlIds(const TrainedBpe& bpe) {
  const int64_t first = static_cast<int64_t>(bpe.tokens.size());
  return {.endoftext = first, .im_start = first + 1, .im_end = first + 2, .vocab_size = first + 3};
}

std::string ChatMlTokenizerJson(const TrainedBpe& bpe) {
  const ChatMlTokenIds ids = ChatMlIds(bpe);
  std::vector<Value> added;
  for (int i = 0; i < 3; ++i) {
    added.push_back(AddedToken(ids.endoftext + i, kSpecialTokens[i], /*with_id=*/true));
  }
  const Value pattern = JsonObjectValue(JsonObjectOf(
      {{"Regex", JsonString(tokenizer::SplitPatternRegex(tokenizer::SplitPattern::kQwen2))}}));
  const Value split = JsonObjectValue(JsonObjectOf({{"type", JsonString("Split")},
                                                    {"pattern", pattern},
                                                    {"behavior", JsonString("Isolated")},
                                                    {"invert", JsonBool(false)}}));
  return checkpoint::JsonText(JsonObjectOf(
      {{"version", JsonString("1.0")},
       {"truncation", JsonNull()},
       {"padding", JsonNull()},
       {"added_tokens", JsonList(std::move(added))},
       {"normalizer", JsonNull()},
       {"pre_tokenizer", JsonObjectValue(JsonObjectOf(
                             {{"type", JsonString("Sequence")},
                              {"pretokenizers", JsonList({split, ByteLevel()})}}))},
       {"post_processor", ByteLevel()},
       {"decoder", ByteLevel()},
       {"model", BpeModel(bpe)}}));
}

std::string ChatMlTokenizerConfigJson(const TrainedBpe& bpe) {
  const ChatMlTokenIds ids = ChatMlIds(bpe);
  Struct decoder;
  for (int i = 0; i < 3; ++i) {
    (*decoder.mutable_fields())[absl::StrCat(ids.endoftext + i)] =
        AddedToken(0, kSpecialTokens[i], /*with_id=*/false);
  }
  return checkpoint::JsonText(JsonObjectOf(
      {{"add_bos_token", JsonBool(false)},
       {"add_prefix_space", JsonBool(false)},
       {"added_tokens_decoder", JsonObjectValue(std::move(decoder))},
       {"additional_special_tokens",
        JsonList({JsonString("<|im_start|>"), JsonString("<|im_end|>")})},
       {"bos_token", JsonNull()},
       {"chat_template", JsonString(kChatTemplate)},
       {"clean_up_tokenization_spaces", JsonBool(false)},
       {"eos_token", JsonString("<|im_end|>")},
       {"errors", JsonString("replace")},
       {"model_max_length", JsonNumber(32768)},
       {"pad_token", JsonString("<|endoftext|>")},
       {"split_special_tokens", JsonBool(false)},
       {"tokenizer_class", JsonString("Qwen2Tokenizer")},
       {"unk_token", JsonNull()}}));
}

absl::StatusOr<ChatMlTokenIds> WriteChatMlTokenizer(const std::filesystem::path& dir,
                                                    const TrainedBpe& bpe) {
  KF_RETURN_IF_ERROR(
      WriteFileAtomically((dir / "tokenizer.json").string(), ChatMlTokenizerJson(bpe)));
  KF_RETURN_IF_ERROR(WriteFileAtomically((dir / "tokenizer_config.json").string(),
                                         ChatMlTokenizerConfigJson(bpe)));
  return ChatMlIds(bpe);
}

}  // namespace kforge
