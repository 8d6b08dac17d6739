#include "model/transformer/rope.h"

#include <cmath>

namespace kforge {
namespace {

// Llama 3.1: frequencies whose wavelength exceeds the original context are
// divided by `factor`, those shorter than original/high_freq_factor are kept,
// and the band between is interpolated smoothly. Every step is a float32
// tensor op in the same order as transformers, so the values match bit for bit
// on the same hardware.
at::Tensor ScaleLlama3(const at::Tensor& inv_freq, const RopeScaling& s) {
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / s.low_freq_factor;
  const double high_freq_wavelen = old_context / s.high_freq_factor;
  const at::Tensor wavelen = (2 * M_PI) / inv_freq;
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  const at::Tensor smooth =
      (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const at::Tensor smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  const at::Tensor medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return at::where(medium, smoothed, scaled);
}

}  // namespace

at::Tensor RopeInverseFrequencies(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  // base ** (arange(0, dim, 2).float() / dim), then 1 / that, as transformers.
  const at::Tensor exponent = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(dim);
  const at::Tensor inv_freq = 1.0 / at::pow(config.rope_theta, exponent);
  if (config.rope_scaling.type == "llama3") return ScaleLlama3(inv_freq, config.rope_scaling);
  return inv_freq;
}

RopeTables MakeRopeTables(const at::Tensor& inv_freq, const at::Tensor& positions,
                          at::ScalarType dtype) {
  // [B, T, 1] * [D/2] -> [B, T, D/2]: the one-term product transformers forms
  // with a matmul, computed in float32 whatever the model dtype.
  const at::Tensor freqs = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;
  const at::Tensor emb = at::cat({freqs, freqs}, -1).unsqueeze(1);
  const at::Tensor sin = freqs.sin();
  const at::Tensor sin_signed = at::cat({-sin, sin}, -1).unsqueeze(1);
  return RopeTables{emb.cos().to(dtype), sin_signed.to(dtype)};
}

at::Tensor ApplyRope(const at::Tensor& x, const RopeTables& rope) {
  // transformers: x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1].
  // [-x2, x1] * sin = [x2, x1] * [-sin1, sin2], exactly (a sign flip), and
  // [x2, x1] is x rolled by half its width.
  const int64_t half = x.size(-1) / 2;
  return at::addcmul(x * rope.cos, x.roll(half, -1), rope.sin_signed);
}

}  // namespace kforge
