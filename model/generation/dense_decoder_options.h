// Options and figures of DenseDecoder (dense_decoder.h), apart from it so
// that generator.h, which names no LibTorch type, can carry them.
#ifndef KFORGE_MODEL_GENERATION_DENSE_DECODER_OPTIONS_H_
#define KFORGE_MODEL_GENERATION_DENSE_DECODER_OPTIONS_H_

#include <cstdint>
#include <string>

namespace kforge {

struct DenseDecoderOptions {
  // Replay decode steps from CUDA graphs on a CUDA device.
  bool cuda_graphs = true;
  // Keys read per step are rounded up to a multiple of this (fewer graphs,
  // a few more keys read).
  int64_t span_bucket = 256;
  // Graphs kept at once.
  int64_t max_graphs = 64;
};

struct DenseDecoderStats {
  int64_t graphs = 0;          // held now
  uint64_t captures = 0;       // since creation
  uint64_t replays = 0;
  uint64_t eager_steps = 0;
  std::string graphs_off;      // why graphs are off; empty while they are on
};

}  // namespace kforge

#endif  // KFORGE_MODEL_GENERATION_DENSE_DECODER_OPTIONS_H_
