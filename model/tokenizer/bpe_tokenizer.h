// A byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (GPT-2,
// Qwen2/2.5/3, Llama 3): text <-> token ids, giving the ids that Hugging
// Face `tokenizers` gives with add_special_tokens=False.
//
//   KF_ASSIGN_OR_RETURN(std::unique_ptr<BpeTokenizer> tok,
//                       BpeTokenizer::FromFile(model_dir + "/tokenizer.json"));
//   std::vector<int32_t> ids = tok->Encode("<|im_start|>user\nWrite a kernel");
//   KF_ASSIGN_OR_RETURN(std::string text, tok->Decode(ids));  // the same text
//   std::optional<int32_t> eos = tok->TokenId("<|im_end|>");
//
// Encode: added tokens (special or not) are found first, leftmost-longest,
// and become single ids; the text between them is split by the file's
// pre-tokenizer pattern (see pre_tokenizer.h), each piece's bytes are mapped
// to GPT-2's byte alphabet and merged by rank. No BOS/EOS is added (the
// post_processor is not applied). Decode: ids -> bytes -> UTF-8, ill-formed
// sequences (a multi-byte character cut off by the last id) replaced by
// U+FFFD as Hugging Face does; for ids from Encode of UTF-8 text it returns
// the text exactly.
//
// Not exact: an NFC normalizer (Qwen2's) is accepted but not applied, so text
// that is not already in NFC (decomposed accents, say) may encode differently
// from Hugging Face; almost all text, and every ASCII text, is in NFC.
//
// Thread-safe: all methods are const; Encode's cache of merged words has its
// own lock.
#ifndef KFORGE_MODEL_TOKENIZER_BPE_TOKENIZER_H_
#define KFORGE_MODEL_TOKENIZER_BPE_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "model/tokenizer/added_tokens.h"
#include "model/tokenizer/pre_tokenizer.h"
#include "model/tokenizer/tokenizer_json.h"

namespace kforge {

class BpeTokenizer {
 public:
  // Errors name the file and the problem: NOT_FOUND for a missing file,
  // INVALID_ARGUMENT for malformed JSON or an unsupported tokenizer.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromFile(
      const std::string& tokenizer_json_path);
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromJson(absl::string_view json);

  BpeTokenizer(const BpeTokenizer&) = delete;
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;

  // Added tokens in the text ("<|im_end|>") are recognised. Never fails:
  // every byte has a token (checked at load).
  std::vector<int32_t> Encode(absl::string_view text) const;

  // INVALID_ARGUMENT naming the first id that is not a token.
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids,
                                     bool skip_special = false) const;

  // The id of a token as tokenizer.json spells it: an added token
  // ("<|im_end|>") or a vocabulary entry in the byte alphabet ("Ġthe").
  std::optional<int32_t> TokenId(absl::string_view token) const;

  // The raw bytes token `id` decodes to (byte-level pieces, not necessarily
  // UTF-8 on their own): what a stop-string matcher consumes token by token.
  // Empty for an id that is not a token.
  absl::string_view RawBytes(int32_t id) const {
    return id >= 0 && id < vocab_size() ? absl::string_view(id_to_bytes_[id]) : "";
  }

  // One past the largest id (vocabulary and added tokens): the smallest
  // embedding table that covers every id. Ids below it may be unused.
  int32_t vocab_size() const { return static_cast<int32_t>(id_to_bytes_.size()); }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };

  BpeTokenizer() = default;
  absl::Status Build(tokenizer::TokenizerJson spec);
  absl::Status BuildVocab(const tokenizer::TokenizerJson& spec);
  absl::Status BuildMerges(const tokenizer::TokenizerJson& spec);

  // Encodes text that holds no added tokens.
  void EncodeText(absl::string_view text, std::vector<int32_t>* ids) const;
  // One pre-token, through the cache.
  void EncodeWord(absl::string_view word, std::vector<int32_t>* ids) const;
  std::vector<int32_t> MergeWord(absl::string_view word) const;
  const Merge* FindMerge(int32_t left, int32_t right) const;

  // Model vocabulary and added tokens, keyed as tokenizer.json spells them.
  absl::flat_hash_map<std::string, int32_t> vocab_;
  absl::flat_hash_map<std::string, int32_t> added_;
  // Per id: the bytes it decodes to, and whether it is a token at all / a
  // special added token.
  std::vector<std::string> id_to_bytes_;
  std::vector<uint8_t> id_flags_;
  // (left id << 32 | right id) -> rank and result.
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};
  // Added tokens matched on the raw text first, then the "normalized" ones.
  std::unique_ptr<tokenizer::AddedTokenMatcher> raw_added_;
  std::unique_ptr<tokenizer::AddedTokenMatcher> normalized_added_;
  std::optional<tokenizer::SplitPattern> split_;
  // ByteLevel.add_prefix_space, applied to each pre-token or to each text
  // piece before splitting (see TokenizerJson).
  bool add_prefix_space_ = false;
  bool prefix_each_pre_token_ = false;
  bool ignore_merges_ = false;

  mutable absl::Mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_
      ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace kforge

#endif  // KFORGE_MODEL_TOKENIZER_BPE_TOKENIZER_H_
