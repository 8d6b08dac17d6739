#include "model/sampling/token_sampler.h"

#include <exception>
#include <limits>
#include <tuple>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/kernels/fused_kernels.h"

namespace kforge {
namespace {

// Columns of the per-row table the host builds and copies to the device once.
enum PlanColumn : int64_t {
  kTemperature = 0,  // T, or 1 for greedy rows (their sampled token is discarded)
  kTopP,             // top_p, or +inf when the row keeps every token by mass
  kKeepCount,        // top_k, or V when top-k is off
  kUniform,          // SamplingUniform(seed, step)
  kGreedy,           // 1 for T == 0
  kTruncates,        // 1 when top-k or top-p can drop a token
  kColumns,
};

// What the host knows about the batch before any device work.
struct BatchPlan {
  at::Tensor rows;  // [B, kColumns] fp64 on the logits' device
  bool any_greedy = false;
  bool all_greedy = true;
  bool any_truncates = false;
};

absl::Status CheckInputs(const at::Tensor& logits, absl::Span<const RowSamplingParams> params,
                         absl::Span<const uint64_t> steps) {
  if (!logits.defined()) return absl::InvalidArgumentError("logits: undefined tensor");
  if (logits.dim() != 2 || logits.size(0) < 1 || logits.size(1) < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("logits: shape ", c10::str(logits.sizes()), " is not [B >= 1, V >= 1]"));
  }
  if (!logits.is_floating_point()) {
    return absl::InvalidArgumentError(
        absl::StrCat("logits: dtype ", c10::str(logits.scalar_type()), " is not floating point"));
  }
  const int64_t batch = logits.size(0);
  if (static_cast<int64_t>(params.size()) != batch ||
      static_cast<int64_t>(steps.size()) != batch) {
    return absl::InvalidArgumentError(absl::StrCat("logits have ", batch, " rows but ",
                                                   params.size(), " params and ", steps.size(),
                                                   " steps were given"));
  }
  for (size_t row = 0; row < params.size(); ++row) {
    KF_RETURN_IF_ERROR(ValidateSamplingParams(params[row], absl::StrCat("rows[", row, "]")));
  }
  return absl::OkStatus();
}

BatchPlan MakePlan(absl::Span<const RowSamplingParams> params, absl::Span<const uint64_t> steps,
                   int64_t vocab, const at::Device& device) {
  const int64_t batch = static_cast<int64_t>(params.size());
  // Pinned so that the copy below is asynchronous and does not wait for the
  // forward pass still queued on the stream; pinning needs CUDA.
  at::Tensor host = at::empty(
      {batch, kColumns}, at::TensorOptions().dtype(at::kDouble).pinned_memory(device.is_cuda()));
  double* cell = host.data_ptr<double>();
  BatchPlan plan;
  for (int64_t row = 0; row < batch; ++row, cell += kColumns) {
    const RowSamplingParams& p = params[row];
    const bool greedy = p.temperature == 0;
    const bool keeps_all_by_mass = p.top_p >= 1;
    const int64_t keep_count = (p.top_k == 0 || p.top_k >= vocab) ? vocab : p.top_k;
    const bool truncates = !greedy && (!keeps_all_by_mass || keep_count < vocab);
    cell[kTemperature] = greedy ? 1.0 : p.temperature;
    // Not 1: the running sum of rounded probabilities can reach 1 before the
    // last token, and "mass before < 1" would then drop the tail.
    cell[kTopP] = keeps_all_by_mass ? std::numeric_limits<double>::infinity() : p.top_p;
    cell[kKeepCount] = static_cast<double>(keep_count);
    cell[kUniform] = SamplingUniform(p.seed, steps[row]);
    cell[kGreedy] = greedy ? 1.0 : 0.0;
    cell[kTruncates] = truncates ? 1.0 : 0.0;
    plan.any_greedy |= greedy;
    plan.all_greedy &= greedy;
    plan.any_truncates |= truncates;
  }
  plan.rows = host.to(device, /*non_blocking=*/true);
  return plan;
}

// [B] bool masks of the plan's rows, made only where a batch needs them (a
// kernel each: a decode step of untruncated rows needs neither).
at::Tensor GreedyRows(const BatchPlan& plan) { return plan.rows.select(1, kGreedy) > 0.5; }
at::Tensor TruncatingRows(const BatchPlan& plan) {
  return plan.rows.select(1, kTruncates) > 0.5;
}

at::Tensor Column(const BatchPlan& plan, PlanColumn column) {
  return plan.rows.select(1, column).unsqueeze(1);  // [B, 1]
}

// [B, V] bool in token order: top-k ∩ top-p of the tempered distribution.
// The rank order is that of the logits, descending, ties to the lower token
// id: the order of p for every temperature, and the one argmax uses, so
// top_k = 1 is exactly greedy. The logits are sorted in their own dtype
// (a bf16 sort takes half the time of an fp32 one: 1.5 against 3.1 ms for
// [256, 151936] on an H100); probs [B, V] fp64 supplies the mass.
at::Tensor KeepMask(const at::Tensor& logits, const at::Tensor& probs, const BatchPlan& plan) {
  // Stable, so the kept set is a function of the row alone.
  at::Tensor order =
      std::get<1>(at::sort(logits, /*stable=*/true, /*dim=*/1, /*descending=*/true));
  at::Tensor sorted = probs.gather(1, order);
  at::Tensor mass_before = sorted.cumsum(1) - sorted;  // exactly 0 at rank 0
  at::Tensor keep = mass_before < Column(plan, kTopP);
  at::Tensor rank = at::arange(probs.size(1), probs.options()).unsqueeze(0);
  keep.logical_and_(rank < Column(plan, kKeepCount));
  return at::zeros_like(keep).scatter_(1, order, keep);
}

// Every row is sampled with LibTorch ops: fp64 cumulative sums and a batched
// binary search, after the top-k/top-p mask where a row truncates.
SampledTokens SampleRowsWithTensorOps(const at::Tensor& logits, const BatchPlan& plan,
                                      bool untruncated) {
  const int64_t vocab = logits.size(1);
  at::Tensor z = logits.to(at::kFloat);
  at::Tensor log_probs = at::log_softmax(z / Column(plan, kTemperature).to(at::kFloat), 1);
  at::Tensor probs = log_probs.to(at::kDouble).exp();
  if (plan.any_truncates) {
    probs.mul_(KeepMask(logits, probs, plan));
  }
  at::Tensor cdf = probs.cumsum(1);
  at::Tensor total = cdf.narrow(1, vocab - 1, 1);  // [B, 1], the kept mass
  // First v with cdf_v > u * total. u <= 1 - 2^-52 keeps the target below
  // total, so v exists and has p_v > 0; the clamp only guards the impossible.
  at::Tensor target = Column(plan, kUniform) * total;
  at::Tensor token = at::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true)
                         .clamp_max(vocab - 1);  // [B, 1]
  at::Tensor chosen = log_probs.gather(1, token).squeeze(1);  // l_t
  SampledTokens out;
  out.token_ids = token.squeeze(1);
  // Rows that keep everything report l_t itself, so the two outputs agree
  // exactly there instead of differing by log(1 +- 1e-7).
  if (plan.any_truncates) {
    const at::Tensor log_mass =
        total.squeeze(1).log().masked_fill(TruncatingRows(plan).logical_not(), 0.0);
    out.logprobs = (chosen.to(at::kDouble) - log_mass).to(at::kFloat);
  } else {
    // Not an alias of untruncated_logprobs, which greedy rows fill again.
    out.logprobs = untruncated ? chosen.clone() : chosen;
  }
  if (untruncated) out.untruncated_logprobs = chosen;
  return out;
}

// The logits as the fused sampler reads them: in their own dtype when it is
// float32, bfloat16 or float16 (a decode step's bf16 logits are not copied to
// float32), with the vocabulary contiguous.
at::Tensor FusedSampleInput(const at::Tensor& logits) {
  const at::ScalarType type = logits.scalar_type();
  const bool readable = type == at::kFloat || type == at::kBFloat16 || type == at::kHalf;
  at::Tensor input = readable ? logits : logits.to(at::kFloat);
  return input.stride(1) == 1 ? input : input.contiguous();
}

// Every row is sampled; the caller overwrites the greedy ones.
SampledTokens SampleRows(const at::Tensor& logits, const BatchPlan& plan, bool untruncated) {
  // On CUDA with kforge's kernels the rows that keep every token are drawn by
  // one kernel, whatever the other rows do, so a row's draw never depends on
  // its batch (token_sampler.h).
  FusedDraws fused;
  if (UseFusedKernels(logits)) {
    fused = FusedTemperedSample(FusedSampleInput(logits), plan.rows.select(1, kTemperature),
                                plan.rows.select(1, kUniform));
    if (!plan.any_truncates) {
      SampledTokens out;
      out.token_ids = std::move(fused.tokens);
      out.logprobs = std::move(fused.logprobs);
      if (untruncated) out.untruncated_logprobs = out.logprobs.clone();
      return out;
    }
  }
  SampledTokens out = SampleRowsWithTensorOps(logits, plan, untruncated);
  if (fused.tokens.defined()) {
    const at::Tensor truncates = TruncatingRows(plan);
    out.token_ids = at::where(truncates, out.token_ids, fused.tokens);
    out.logprobs = at::where(truncates, out.logprobs, fused.logprobs);
    if (untruncated) {
      out.untruncated_logprobs = at::where(truncates, out.untruncated_logprobs, fused.logprobs);
    }
  }
  return out;
}

SampledTokens SampleBatch(const at::Tensor& logits, const BatchPlan& plan, bool untruncated) {
  if (plan.all_greedy) {
    SampledTokens out;
    out.token_ids = logits.argmax(1);
    out.logprobs = at::zeros({logits.size(0)}, logits.options().dtype(at::kFloat));
    if (untruncated) out.untruncated_logprobs = out.logprobs.clone();
    return out;
  }
  SampledTokens out = SampleRows(logits, plan, untruncated);
  if (plan.any_greedy) {
    // argmax returns the first maximum: ties go to the lower token id.
    const at::Tensor greedy = GreedyRows(plan);
    out.token_ids = at::where(greedy, logits.argmax(1), out.token_ids);
    out.logprobs.masked_fill_(greedy, 0.0);
    if (untruncated) out.untruncated_logprobs.masked_fill_(greedy, 0.0);
  }
  return out;
}

}  // namespace

absl::StatusOr<SampledTokens> TokenSampler::Sample(const at::Tensor& logits,
                                                   absl::Span<const RowSamplingParams> params,
                                                   absl::Span<const uint64_t> steps) const {
  KF_RETURN_IF_ERROR(CheckInputs(logits, params, steps));
  // LibTorch reports failures (device out of memory, ...) by throwing; no
  // exception leaves the sampler.
  auto context = [&] {
    return absl::StrCat("TokenSampler::Sample on ", c10::str(logits.sizes()), " ",
                        c10::str(logits.scalar_type()), " logits on ", logits.device().str());
  };
  try {
    BatchPlan plan = MakePlan(params, steps, logits.size(1), logits.device());
    return SampleBatch(logits, plan, options_.untruncated_logprobs);
  } catch (const c10::Error& error) {
    return absl::InternalError(absl::StrCat(context(), ": ", error.what_without_backtrace()));
  } catch (const std::exception& error) {
    return absl::InternalError(absl::StrCat(context(), ": ", error.what()));
  }
}

}  // namespace kforge
