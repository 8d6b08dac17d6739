// A small, deterministic byte-level BPE trainer: learns merges from a corpus
// the way GPT-2's tokenizer was trained, for the tiny checkpoints kforge
// makes for tests (`kforge tiny-model`). Not meant for real vocabularies:
// each round rescans the corpus, which is fine for the few hundred merges
// over a few hundred kilobytes of text it is used for.
//
//   TrainedBpe bpe = TrainByteLevelBpe({task_source_1, task_source_2}, {});
//   bpe.tokens[0];   // "!", the first of the 256 byte tokens (GPT-2's order)
//   bpe.merges[0];   // {"Ġ", "Ġ"}, say: the most frequent pair
//
// The text is first cut into pre-tokens with the pre-tokenizer's split
// pattern (Qwen2's by default), so merges never cross a piece boundary,
// exactly as the BPE encoder will see them. Each round merges the most
// frequent adjacent pair, ties broken by the pair's bytes (smallest first),
// until max_merges or until no pair occurs min_pair_count times.
#ifndef KFORGE_MODEL_CHECKPOINT_BPE_TRAINER_H_
#define KFORGE_MODEL_CHECKPOINT_BPE_TRAINER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "model/tokenizer/pre_tokenizer.h"

namespace kforge {

struct BpeTrainerOptions {
  int max_merges = 400;
  int64_t min_pair_count = 2;  // a pair seen once is not worth a token
  tokenizer::SplitPattern split = tokenizer::SplitPattern::kQwen2;
};

struct TrainedBpe {
  // Token id -> token in GPT-2's byte alphabet ("Ġthe"). Ids 0-255 are the
  // single bytes in GPT-2's order (printable ones first); merged tokens follow
  // in the order they were learned.
  std::vector<std::string> tokens;
  // In rank order, in the byte alphabet. Two merges may make the same token.
  std::vector<std::pair<std::string, std::string>> merges;
};

TrainedBpe TrainByteLevelBpe(const std::vector<std::string>& texts,
                             const BpeTrainerOptions& options);

// Raw bytes spelled in GPT-2's byte alphabet: " the" -> "Ġthe".
std::string ToByteAlphabet(absl::string_view bytes);

}  // namespace kforge

#endif  // KFORGE_MODEL_CHECKPOINT_BPE_TRAINER_H_
