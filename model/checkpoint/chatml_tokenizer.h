// Hugging Face tokenizer files for a trained byte-level BPE with the ChatML
// special tokens, as Qwen2.5 ships them: tokenizer.json (model BPE, the
// Qwen2 split pattern then ByteLevel, ByteLevel decoder, no normalizer) and
// tokenizer_config.json (the ChatML chat_template, eos "<|im_end|>", pad
// "<|endoftext|>"). BpeTokenizer::FromFile and transformers both load them.
//
//   TrainedBpe bpe = TrainByteLevelBpe(texts, {});
//   KF_ASSIGN_OR_RETURN(ChatMlTokenIds ids, WriteChatMlTokenizer(dir, bpe));
//   ids.im_end;  // == bpe.tokens.size() + 2
#ifndef KFORGE_MODEL_CHECKPOINT_CHATML_TOKENIZER_H_
#define KFORGE_MODEL_CHECKPOINT_CHATML_TOKENIZER_H_

#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/status/statusor.h"
#include "model/checkpoint/bpe_trainer.h"

namespace kforge {

// The special tokens follow the trained vocabulary, in this order.
struct ChatMlTokenIds {
  int64_t endoftext = 0;   // "<|endoftext|>": pad, and the end of a document
  int64_t im_start = 0;    // "<|im_start|>"
  int64_t im_end = 0;      // "<|im_end|>": eos of a chat turn
  int64_t vocab_size = 0;  // one past the last id
};

ChatMlTokenIds ChatMlIds(const TrainedBpe& bpe);

// The text of tokenizer.json and tokenizer_config.json.
std::string ChatMlTokenizerJson(const TrainedBpe& bpe);
std::string ChatMlTokenizerConfigJson(const TrainedBpe& bpe);

// Writes both into `dir` (which must exist); errors name the file.
absl::StatusOr<ChatMlTokenIds> WriteChatMlTokenizer(const std::filesystem::path& dir,
                                                    const TrainedBpe& bpe);

}  // namespace kforge

#endif  // KFORGE_MODEL_CHECKPOINT_CHATML_TOKENIZER_H_
