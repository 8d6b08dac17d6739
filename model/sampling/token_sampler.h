// TokenSampler: the next token of every sequence in a decode batch, with the
// log-probabilities the learner needs for importance ratios.
//
//   TokenSampler sampler({.untruncated_logprobs = true});
//   KF_ASSIGN_OR_RETURN(SampledTokens out, sampler.Sample(logits, params, steps));
//   // out.token_ids[b] is row b's token; out.logprobs[b] is log q_b(token).
//
// THE DISTRIBUTIONS. For row b with logits z (converted to fp32), temperature
// T > 0, top_k, top_p:
//   l_v    = log_softmax(z / T)_v                    (fp32)
//   p_v    = exp(l_v)                                (fp64)
//   rank   = tokens by descending logit z_v, equal logits by ascending id
//            (the order of p_v whatever T; rank 0 is argmax's choice)
//   K      = the first top_k ranks (all when top_k is 0 or >= V)
//   N      = the shortest prefix of the ranking whose mass is >= top_p: rank
//            i is kept iff p_0 + ... + p_{i-1} < top_p (so rank 0 always is);
//            every token when top_p is 1
//   keep_v = v in K and v in N
//   q_v    = p_v * keep_v / sum_w p_w * keep_w       (the sampled law)
// Top-k and top-p both apply to the tempered distribution, and q is
// renormalised over their intersection.
//
// RETURNED LOG-PROBABILITIES (natural log, fp32), for the sampled token t:
//   logprobs[b]             = log q_t  = l_t - log(sum_w p_w * keep_w)
//                             (exactly l_t when the row keeps every token).
//                             This is the behaviour policy's log-probability,
//                             what kforge.v1.Sample.completion_logprobs holds.
//   untruncated_logprobs[b] = l_t = log softmax(z / T)_t, top-k and top-p
//                             ignored; filled only when requested.
//   A learner that recomputes log-probs from its own logits must apply the
//   same temperature and, to match logprobs, the same truncation; q_t < 1
//   under truncation, so the two differ by -log(kept mass) >= 0.
//   Greedy rows (T == 0) sample from a point mass: token = the first argmax
//   of z, and both log-probabilities are 0 by definition (the T -> 0 limit
//   for a unique maximum). Greedy output is not for policy-gradient updates.
//   top_k = 1 picks the same token at any T, with logprobs ~0 (within 1e-7)
//   and untruncated_logprobs = l_t.
//
// HOW A TOKEN IS CHOSEN. One uniform per row, u = SamplingUniform(seed,
// step) (sampling_params.h), inverts the CDF of q taken in token-id order:
// t = the first v with Q_v > u * Q_{V-1}, Q the fp64 cumulative sum of
// p * keep. A row's token therefore depends only on its own logits,
// parameters, seed and step, never on the other rows of the batch or on
// whether any of them truncates; bitwise so on one device and LibTorch build
// (GPU kernels may round differently from CPU ones, which can move a draw
// that lies within ~1e-7 of a boundary). fp64 keeps tokens of probability
// far below fp32's 6e-8 resolution near 1 sampled at their true rate.
// On CUDA with kforge's kernels (model/kernels/fused_kernels.h), rows that
// keep every token are drawn by two kernels for the batch, which read the
// logits in their own dtype: l_v in fp32 (z / T taken as z times the fp32
// 1 / T, within an ulp of the division), and the same inverse CDF
// at u taken chunk by chunk (each chunk's fp32 softmax partial weights the
// chunk, then an fp64 scan inside the chosen one; tempered_sample.cu), so a
// draw within rounding of a CDF step may differ from the tensor-op path
// above by a neighbouring token; truncating rows always take the tensor-op
// path.
//
// COST. The fused kernels: see bench/RESULTS.md (0.14 ms for [64, 151936]
// on an H100 with one block per row; ~0.5 ms for the tensor ops below).
// Otherwise all work is
// batched tensor ops on the logits' device with no host
// synchronisation: one stable descending sort of the [B, V] logits in their
// own dtype only when some row truncates (top-k and top-p share it), a
// scatter of the mask back to token order, fp64 cumulative sums and a
// batched binary search. The per-row parameters and uniforms travel in one
// small asynchronous host-to-device copy. Peak extra memory is about three
// [B, V] fp64 tensors. Measured on an H100 (LibTorch 2.11, bf16 logits,
// V = 151936, sorting an fp32 copy): B = 256 took 1.3 ms without truncation
// and 6.7 ms with top-p or top-k, 3.1 ms of it the sort, which the bf16 sort
// now used does in 1.5 ms; B = 32 took 0.5 and 1.5 ms; greedy 0.1-0.2 ms.
//
// Thread safety: Sample is const and keeps no state; call it from any thread.
#ifndef KFORGE_MODEL_SAMPLING_TOKEN_SAMPLER_H_
#define KFORGE_MODEL_SAMPLING_TOKEN_SAMPLER_H_

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/sampling/sampling_params.h"

namespace kforge {

struct TokenSamplerOptions {
  // Also return untruncated_logprobs (one more gather).
  bool untruncated_logprobs = false;
};

// On the logits' device; nothing is copied to the host.
struct SampledTokens {
  at::Tensor token_ids;             // [B] int64
  at::Tensor logprobs;              // [B] fp32, log q(token): see above
  at::Tensor untruncated_logprobs;  // [B] fp32, log softmax(z / T)(token);
                                    // undefined unless requested
};

class TokenSampler {
 public:
  explicit TokenSampler(TokenSamplerOptions options = {}) : options_(options) {}

  // logits: [B, V] floating point (fp32, bf16, fp16, fp64), any device,
  // any strides; B >= 1, V >= 1. params[b] and steps[b] belong to row b.
  // INVALID_ARGUMENT for a shape, dtype or count mismatch or invalid
  // parameters (the first offending row is named "rows[b]"); INTERNAL with
  // LibTorch's message if a tensor operation fails. NaN or +inf logits, and
  // rows whose logits are all -inf, give an unspecified token and a NaN
  // log-probability.
  absl::StatusOr<SampledTokens> Sample(const at::Tensor& logits,
                                       absl::Span<const RowSamplingParams> params,
                                       absl::Span<const uint64_t> steps) const;

 private:
  TokenSamplerOptions options_;
};

}  // namespace kforge

#endif  // KFORGE_MODEL_SAMPLING_TOKEN_SAMPLER_H_
