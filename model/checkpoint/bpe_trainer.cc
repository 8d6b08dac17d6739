#include "model/checkpoint/bpe_trainer.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "model/tokenizer/unicode.h"

namespace kforge {
namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves,
// the other 68 bytes for U+0100 onwards, in byte order.
std::array<char32_t, 256> ByteToChar() {
  std::array<char32_t, 256> table{};
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    table[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return table;
}

struct Word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// The training state: the vocabulary as raw bytes and the corpus's words as
// symbol sequences.
class Trainer {
 public:
  explicit Trainer(const BpeTrainerOptions& options) : options_(options) {
    // GPT-2 numbers the byte tokens in the order of the characters that spell them.
    const std::array<char32_t, 256> chars = ByteToChar();
    std::array<int, 256> order{};
    for (int b = 0; b < 256; ++b) order[b] = b;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return chars[a] < chars[b]; });
    for (int id = 0; id < 256; ++id) {
      byte_ids_[order[id]] = id;
      AddToken(std::string(1, static_cast<char>(order[id])));
    }
  }

  void AddText(absl::string_view text) {
    std::vector<absl::string_view> pieces;
    tokenizer::SplitPreTokens(options_.split, text, &pieces);
    for (absl::string_view piece : pieces) ++word_counts_[std::string(piece)];
  }

  TrainedBpe Train() {
    for (const auto& [bytes, count] : word_counts_) {
      Word word{.count = count};
      for (const unsigned char b : bytes) word.symbols.push_back(byte_ids_[b]);
      words_.push_back(std::move(word));
    }
    TrainedBpe out;
    for (int round = 0; round < options_.max_merges; ++round) {
      const std::optional<std::pair<int32_t, int32_t>> best = BestPair();
      if (!best.has_value()) break;
      const int32_t merged = AddToken(token_bytes_[best->first] + token_bytes_[best->second]);
      for (Word& word : words_) Merge(*best, merged, &word);
      out.merges.emplace_back(ToByteAlphabet(token_bytes_[best->first]),
                              ToByteAlphabet(token_bytes_[best->second]));
    }
    for (const std::string& bytes : token_bytes_) out.tokens.push_back(ToByteAlphabet(bytes));
    return out;
  }

 private:
  // The id of `bytes`, added if new (two merges can spell the same token).
  int32_t AddToken(const std::string& bytes) {
    const auto [it, inserted] =
        token_ids_.try_emplace(bytes, static_cast<int32_t>(token_bytes_.size()));
    if (inserted) token_bytes_.push_back(bytes);
    return it->second;
  }

  // The most frequent pair, ties to the smallest bytes; none below the floor.
  std::optional<std::pair<int32_t, int32_t>> BestPair() const {
    absl::flat_hash_map<uint64_t, int64_t> counts;
    for (const Word& word : words_) {
      for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
        counts[PairKey(word.symbols[i], word.symbols[i + 1])] += word.count;
      }
    }
    std::optional<std::pair<int32_t, int32_t>> best;
    int64_t best_count = options_.min_pair_count - 1;
    for (const auto& [key, count] : counts) {
      const std::pair<int32_t, int32_t> pair(static_cast<int32_t>(key >> 32),
                                             static_cast<int32_t>(key & 0xFFFFFFFFu));
      if (count > best_count || (count == best_count && best.has_value() && Before(pair, *best))) {
        best = pair;
        best_count = count;
      }
    }
    return best;
  }

  bool Before(std::pair<int32_t, int32_t> a, std::pair<int32_t, int32_t> b) const {
    return std::tie(token_bytes_[a.first], token_bytes_[a.second]) <
           std::tie(token_bytes_[b.first], token_bytes_[b.second]);
  }

  // Left to right, non-overlapping: "aaa" with (a, a) becomes "aa a".
  static void Merge(std::pair<int32_t, int32_t> pair, int32_t merged, Word* word) {
    std::vector<int32_t>& s = word->symbols;
    size_t out = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (i + 1 < s.size() && s[i] == pair.first && s[i + 1] == pair.second) {
        s[out++] = merged;
        ++i;
      } else {
        s[out++] = s[i];
      }
    }
    s.resize(out);
  }

  const BpeTrainerOptions options_;
  std::array<int32_t, 256> byte_ids_{};
  std::vector<std::string> token_bytes_;  // id -> raw bytes
  absl::flat_hash_map<std::string, int32_t> token_ids_;
  std::map<std::string, int64_t> word_counts_;  // ordered: training is reproducible
  std::vector<Word> words_;
};

}  // namespace

std::string ToByteAlphabet(absl::string_view bytes) {
  static const std::array<char32_t, 256> kChars = ByteToChar();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const unsigned char b : bytes) tokenizer::AppendUtf8(kChars[b], &out);
  return out;
}

TrainedBpe TrainByteLevelBpe(const std::vector<std::string>& texts,
                             const BpeTrainerOptions& options) {
  Trainer trainer(options);
  for (const std::string& text : texts) trainer.AddText(text);
  return trainer.Train();
}

}  // namespace kforge
