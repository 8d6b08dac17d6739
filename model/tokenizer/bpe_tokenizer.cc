#include "model/tokenizer/bpe_tokenizer.h"

#include <functional>
#include <queue>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"
#include "model/tokenizer/unicode.h"

namespace kforge {
namespace {

using tokenizer::AddedTokenMatcher;
using tokenizer::AddedTokenSpec;
using tokenizer::TextPiece;
using tokenizer::TokenizerJson;

// Words up to this many bytes are cached, and at most this many of them (the
// cache is emptied when full): enough for the working vocabulary of a corpus,
// a bounded few MB of memory.
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCachedWords = 1 << 16;

constexpr uint8_t kIsToken = 1;
constexpr uint8_t kIsSpecial = 2;

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves,
// the other 68 bytes for U+0100 onwards, in byte order.
struct ByteAlphabet {
  std::array<char32_t, 256> byte_to_char;
  std::array<int16_t, 0x144> char_to_byte;  // -1: not in the alphabet

  ByteAlphabet() {
    char_to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      byte_to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      char_to_byte[byte_to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& Alphabet() {
  static const ByteAlphabet* const alphabet = new ByteAlphabet();
  return *alphabet;
}

// The bytes a token stands for. As Hugging Face's ByteLevel decoder: a token
// with a character outside the alphabet (an added token like " <x>") stands
// for its own UTF-8 text.
std::string TokenBytes(absl::string_view token) {
  std::string bytes;
  size_t pos = 0;
  while (pos < token.size()) {
    const tokenizer::Utf8Char c = tokenizer::DecodeUtf8(token, pos);
    if (!c.valid || c.code_point >= Alphabet().char_to_byte.size() ||
        Alphabet().char_to_byte[c.code_point] < 0) {
      return std::string(token);
    }
    bytes.push_back(static_cast<char>(Alphabet().char_to_byte[c.code_point]));
    pos += c.length;
  }
  return bytes;
}

std::string ToAlphabet(absl::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) tokenizer::AppendUtf8(Alphabet().byte_to_char[b], &out);
  return out;
}

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
         static_cast<uint32_t>(right);
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromFile(
    const std::string& tokenizer_json_path) {
  KF_ASSIGN_OR_RETURN(std::string json, ReadFileToString(tokenizer_json_path));
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer = FromJson(json);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat(tokenizer_json_path, ": ", tokenizer.status().message()));
  }
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromJson(absl::string_view json) {
  KF_ASSIGN_OR_RETURN(TokenizerJson spec, tokenizer::ParseTokenizerJson(json));
  std::unique_ptr<BpeTokenizer> tokenizer(new BpeTokenizer());
  KF_RETURN_IF_ERROR(tokenizer->Build(std::move(spec)));
  return tokenizer;
}

absl::Status BpeTokenizer::Build(TokenizerJson spec) {
  KF_RETURN_IF_ERROR(BuildVocab(spec));
  KF_RETURN_IF_ERROR(BuildMerges(spec));
  std::vector<const AddedTokenSpec*> raw, normalized;
  for (const AddedTokenSpec& token : spec.added_tokens) {
    (token.normalized ? normalized : raw).push_back(&token);
  }
  raw_added_ = std::make_unique<AddedTokenMatcher>(raw);
  normalized_added_ = std::make_unique<AddedTokenMatcher>(normalized);
  split_ = spec.split;
  add_prefix_space_ = spec.add_prefix_space;
  prefix_each_pre_token_ = spec.split_before_byte_level;
  ignore_merges_ = spec.ignore_merges;
  return absl::OkStatus();
}

absl::Status BpeTokenizer::BuildVocab(const TokenizerJson& spec) {
  int32_t max_id = -1;
  for (const auto& [token, id] : spec.vocab) max_id = std::max(max_id, id);
  for (const AddedTokenSpec& token : spec.added_tokens) max_id = std::max(max_id, token.id);
  id_to_bytes_.resize(static_cast<size_t>(max_id) + 1);
  id_flags_.assign(id_to_bytes_.size(), 0);

  vocab_.reserve(spec.vocab.size());
  for (const auto& [token, id] : spec.vocab) {
    if (id_flags_[id] & kIsToken) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.vocab: id ", id, " is given to more than one token"));
    }
    vocab_.emplace(token, id);
    id_to_bytes_[id] = TokenBytes(token);
    id_flags_[id] = kIsToken;
  }
  // An added token may repeat a vocabulary entry (GPT-2's <|endoftext|>);
  // its own content is what it decodes to.
  for (const AddedTokenSpec& token : spec.added_tokens) {
    if (!added_.emplace(token.content, token.id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("added_tokens: \"", token.content, "\" appears twice"));
    }
    id_to_bytes_[token.id] = TokenBytes(token.content);
    id_flags_[token.id] = kIsToken | (token.special ? kIsSpecial : 0);
  }
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    tokenizer::AppendUtf8(Alphabet().byte_to_char[b], &symbol);
    const auto it = vocab_.find(symbol);
    if (it == vocab_.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "model.vocab lacks \"%s\", the token of byte 0x%02X (not a byte-level vocabulary)",
          symbol, b));
    }
    byte_ids_[b] = it->second;
  }
  return absl::OkStatus();
}

absl::Status BpeTokenizer::BuildMerges(const TokenizerJson& spec) {
  merges_.reserve(spec.merges.size());
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    const std::string merged = absl::StrCat(left, right);
    int32_t ids[3];
    const std::string* parts[3] = {&left, &right, &merged};
    for (int i = 0; i < 3; ++i) {
      const auto it = vocab_.find(*parts[i]);
      if (it == vocab_.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("model.merges entry index ", rank, ": \"", *parts[i],
                         "\" is not in model.vocab"));
      }
      ids[i] = it->second;
    }
    // A repeated pair keeps its first (best) rank, as Hugging Face does.
    merges_.try_emplace(PairKey(ids[0], ids[1]), Merge{static_cast<int32_t>(rank), ids[2]});
  }
  return absl::OkStatus();
}

std::vector<int32_t> BpeTokenizer::Encode(absl::string_view text) const {
  std::vector<TextPiece> raw_pieces, pieces;
  raw_added_->Split(text, &raw_pieces);
  for (const TextPiece& piece : raw_pieces) {
    if (piece.id >= 0) {
      pieces.push_back(piece);
    } else {
      normalized_added_->Split(piece.text, &pieces);
    }
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  for (const TextPiece& piece : pieces) {
    if (piece.id >= 0) {
      ids.push_back(piece.id);
    } else {
      EncodeText(piece.text, &ids);
    }
  }
  return ids;
}

void BpeTokenizer::EncodeText(absl::string_view text, std::vector<int32_t>* ids) const {
  std::string prefixed;
  if (add_prefix_space_ && !prefix_each_pre_token_ && !absl::StartsWith(text, " ")) {
    prefixed = absl::StrCat(" ", text);
    text = prefixed;
  }
  std::vector<absl::string_view> words;
  if (split_.has_value()) {
    tokenizer::SplitPreTokens(*split_, text, &words);
  } else {
    words.push_back(text);
  }
  for (absl::string_view word : words) {
    if (add_prefix_space_ && prefix_each_pre_token_ && !absl::StartsWith(word, " ")) {
      EncodeWord(absl::StrCat(" ", word), ids);
    } else {
      EncodeWord(word, ids);
    }
  }
}

void BpeTokenizer::EncodeWord(absl::string_view word, std::vector<int32_t>* ids) const {
  if (word.size() == 1) {
    ids->push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> merged = MergeWord(word);
  ids->insert(ids->end(), merged.begin(), merged.end());
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    if (cache_.size() >= kMaxCachedWords) cache_.clear();
    cache_.emplace(std::string(word), std::move(merged));
  }
}

const BpeTokenizer::Merge* BpeTokenizer::FindMerge(int32_t left, int32_t right) const {
  const auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

// Hugging Face's word merge: a heap of candidate pairs ordered by rank, then
// position; a popped candidate is stale when either symbol has changed since
// it was pushed. Same result as GPT-2's merge-the-best-pair loop, in
// O(n log n).
std::vector<int32_t> BpeTokenizer::MergeWord(absl::string_view word) const {
  if (ignore_merges_) {
    const auto it = vocab_.find(ToAlphabet(word));
    if (it != vocab_.end()) return {it->second};
  }
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;  // -1 at the ends
    bool alive;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t merged_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : pos > other.pos;
    }
  };
  const int32_t n = static_cast<int32_t>(word.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_ids_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1,
                  true};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto push = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    if (const Merge* merge = FindMerge(symbols[pos].id, symbols[next].id)) {
      queue.push({merge->rank, pos, merge->merged_id});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const Merge* merge = FindMerge(left.id, right.id);
    if (merge == nullptr || merge->merged_id != top.merged_id) continue;
    left.id = top.merged_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev);
    push(top.pos);
  }
  std::vector<int32_t> ids;
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
  return ids;
}

absl::StatusOr<std::string> BpeTokenizer::Decode(const std::vector<int32_t>& ids,
                                                 bool skip_special) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size() || !(id_flags_[id] & kIsToken)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Decode: id ", id, " at index ", i, " is not a token (vocab size ", vocab_size(), ")"));
    }
    if (skip_special && (id_flags_[id] & kIsSpecial)) continue;
    bytes += id_to_bytes_[id];
  }
  return tokenizer::Utf8Lossy(bytes);
}

std::optional<int32_t> BpeTokenizer::TokenId(absl::string_view token) const {
  if (const auto it = added_.find(token); it != added_.end()) return it->second;
  if (const auto it = vocab_.find(token); it != vocab_.end()) return it->second;
  return std::nullopt;
}

}  // namespace kforge
