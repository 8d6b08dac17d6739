#include "model/checkpoint/chatml_tokenizer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"
#include "model/checkpoint/json_fields.h"
#include "model/tokenizer/pre_tokenizer.h"

namespace kforge {
namespace {

using checkpoint::JsonQuote;

constexpr const char* kSpecialTokens[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

// Qwen2.5's template without its default system message, which is what
// RenderChat("chatml") renders.
constexpr const char* kChatTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string AddedTokenJson(int64_t id, absl::string_view content, bool with_id) {
  return absl::StrCat("{", with_id ? absl::StrCat("\"id\": ", id, ", ") : "",
                      "\"content\": ", JsonQuote(content),
                      ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                      "\"normalized\": false, \"special\": true}");
}

}  // namespace

ChatMlTokenIds ChatMlIds(const TrainedBpe& bpe) {
  const int64_t first = static_cast<int64_t>(bpe.tokens.size());
  return {.endoftext = first, .im_start = first + 1, .im_end = first + 2, .vocab_size = first + 3};
}

std::string ChatMlTokenizerJson(const TrainedBpe& bpe) {
  const ChatMlTokenIds ids = ChatMlIds(bpe);
  std::vector<std::string> added;
  for (int i = 0; i < 3; ++i) {
    added.push_back(AddedTokenJson(ids.endoftext + i, kSpecialTokens[i], /*with_id=*/true));
  }
  std::vector<std::string> vocab;
  vocab.reserve(bpe.tokens.size());
  for (size_t id = 0; id < bpe.tokens.size(); ++id) {
    vocab.push_back(absl::StrCat(JsonQuote(bpe.tokens[id]), ": ", id));
  }
  std::vector<std::string> merges;
  merges.reserve(bpe.merges.size());
  for (const auto& [left, right] : bpe.merges) {
    merges.push_back(JsonQuote(absl::StrCat(left, " ", right)));
  }
  const std::string split =
      JsonQuote(tokenizer::SplitPatternRegex(tokenizer::SplitPattern::kQwen2));
  return absl::StrCat(
      "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n",
      "  \"added_tokens\": [\n    ", absl::StrJoin(added, ",\n    "), "\n  ],\n",
      "  \"normalizer\": null,\n",
      "  \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [\n",
      "    {\"type\": \"Split\", \"pattern\": {\"Regex\": ", split,
      "}, \"behavior\": \"Isolated\", \"invert\": false},\n",
      "    {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, "
      "\"use_regex\": false}]},\n",
      "  \"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
      "\"trim_offsets\": false, \"use_regex\": false},\n",
      "  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
      "\"trim_offsets\": false, \"use_regex\": false},\n",
      "  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
      "\"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", "
      "\"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": false,\n",
      "    \"vocab\": {\n      ", absl::StrJoin(vocab, ",\n      "), "\n    },\n",
      "    \"merges\": [\n      ", absl::StrJoin(merges, ",\n      "), "\n    ]\n  }\n}\n");
}

std::string ChatMlTokenizerConfigJson(const TrainedBpe& bpe) {
  const ChatMlTokenIds ids = ChatMlIds(bpe);
  std::vector<std::string> decoder;
  for (int i = 0; i < 3; ++i) {
    decoder.push_back(absl::StrCat(
        "\"", ids.endoftext + i, "\": ", AddedTokenJson(0, kSpecialTokens[i], /*with_id=*/false)));
  }
  return absl::StrCat(
      "{\n  \"add_bos_token\": false,\n  \"add_prefix_space\": false,\n",
      "  \"added_tokens_decoder\": {\n    ", absl::StrJoin(decoder, ",\n    "), "\n  },\n",
      "  \"additional_special_tokens\": [\"<|im_start|>\", \"<|im_end|>\"],\n",
      "  \"bos_token\": null,\n  \"chat_template\": ", JsonQuote(kChatTemplate), ",\n",
      "  \"clean_up_tokenization_spaces\": false,\n  \"eos_token\": \"<|im_end|>\",\n",
      "  \"errors\": \"replace\",\n  \"model_max_length\": 32768,\n",
      "  \"pad_token\": \"<|endoftext|>\",\n  \"split_special_tokens\": false,\n",
      "  \"tokenizer_class\": \"Qwen2Tokenizer\",\n  \"unk_token\": null\n}\n");
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
