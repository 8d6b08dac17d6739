#include "verifier_worker/funnel/tensor_compare.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include <pthread.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace kforge {

// The bytes are little-endian and read as native values.
static_assert(std::endian::native == std::endian::little);

namespace {

constexpr double kMinReferenceNorm = 1e-12;
constexpr double kInf = std::numeric_limits<double>::infinity();

struct DTypeInfo {
  DType dtype;
  absl::string_view name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kFloat32, "float32", 4},   {DType::kFloat16, "float16", 2},
    {DType::kBFloat16, "bfloat16", 2}, {DType::kFloat64, "float64", 8},
    {DType::kInt64, "int64", 8},       {DType::kInt32, "int32", 4},
    {DType::kInt16, "int16", 2},       {DType::kInt8, "int8", 1},
    {DType::kUInt8, "uint8", 1},       {DType::kBool, "bool", 1},
};

struct DTypeAlias {
  absl::string_view alias;
  DType dtype;
};

constexpr DTypeAlias kAliases[] = {
    {"float", DType::kFloat32}, {"half", DType::kFloat16}, {"double", DType::kFloat64},
    {"long", DType::kInt64},    {"int", DType::kInt32},    {"short", DType::kInt16},
};

template <typename T>
T Load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

enum class MismatchKind { kValue, kCandidateNonFinite, kReferenceNaN, kReferenceInf };

// What one pass over the elements found.
struct Stats {
  double max_abs = 0;
  double sum_d2 = 0;  // sum of (c - r)^2
  double sum_r2 = 0;  // sum of r^2
  int64_t mismatched = 0;
  int64_t first = -1;
  MismatchKind first_kind = MismatchKind::kValue;
  double first_candidate = 0;  // floating dtypes
  double first_reference = 0;
  int64_t first_candidate_int = 0;  // integer and bool dtypes
  int64_t first_reference_int = 0;
};

// Classifies an element the fast test did not pass. Returns whether it
// matches after all; updates the error sums of `stats` either way.
bool SlowElement(double r, double c, Tolerance tol, Stats* stats, MismatchKind* kind) {
  if (std::isnan(r)) {
    *kind = MismatchKind::kReferenceNaN;
    return std::isnan(c);
  }
  if (std::isinf(r)) {
    *kind = MismatchKind::kReferenceInf;
    return c == r;
  }
  stats->sum_r2 += r * r;
  if (!std::isfinite(c)) {
    stats->max_abs = kInf;
    stats->sum_d2 = kInf;
    *kind = MismatchKind::kCandidateNonFinite;
    return false;
  }
  const double d = std::fabs(c - r);  // may overflow to inf for huge float64 values
  stats->max_abs = std::max(stats->max_abs, d);
  stats->sum_d2 += d * d;
  *kind = MismatchKind::kValue;
  return d <= tol.atol + tol.rtol * std::fabs(r);
}

// `Convert` maps the stored type to float or double.
template <typename Raw, typename Convert>
Stats CompareFloating(const char* ref, const char* cand, int64_t n, Tolerance tol,
                      Convert convert) {
  Stats stats;
  // Locals, so the hot loop keeps them in registers.
  double max_abs = 0, sum_d2 = 0, sum_r2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double r = convert(Load<Raw>(ref + i * sizeof(Raw)));
    const double c = convert(Load<Raw>(cand + i * sizeof(Raw)));
    const double d = std::fabs(c - r);
    // A finite d means both are finite.
    if (d <= tol.atol + tol.rtol * std::fabs(r) && std::isfinite(d)) [[likely]] {
      max_abs = std::max(max_abs, d);
      sum_d2 += d * d;
      sum_r2 += r * r;
      continue;
    }
    MismatchKind kind;
    if (SlowElement(r, c, tol, &stats, &kind)) continue;
    if (stats.mismatched++ == 0) {
      stats.first = i;
      stats.first_kind = kind;
      stats.first_candidate = c;
      stats.first_reference = r;
    }
  }
  stats.max_abs = std::max(stats.max_abs, max_abs);
  stats.sum_d2 += sum_d2;
  stats.sum_r2 += sum_r2;
  return stats;
}

// `Convert` maps the stored type to int64_t; equality is exact.
template <typename Raw, typename Convert>
Stats CompareIntegral(const char* ref, const char* cand, int64_t n, Convert convert) {
  Stats stats;
  double max_abs = 0, sum_d2 = 0, sum_r2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = convert(Load<Raw>(ref + i * sizeof(Raw)));
    const int64_t c = convert(Load<Raw>(cand + i * sizeof(Raw)));
    const double rd = static_cast<double>(r);
    const double d = std::fabs(static_cast<double>(c) - rd);
    max_abs = std::max(max_abs, d);
    sum_d2 += d * d;
    sum_r2 += rd * rd;
    if (c != r && stats.mismatched++ == 0) {
      stats.first = i;
      stats.first_candidate_int = c;
      stats.first_reference_int = r;
    }
  }
  stats.max_abs = max_abs;
  stats.sum_d2 = sum_d2;
  stats.sum_r2 = sum_r2;
  return stats;
}

Stats CompareElements(DType dtype, const char* ref, const char* cand, int64_t n, Tolerance tol) {
  const auto to_int = [](auto v) { return static_cast<int64_t>(v); };
  switch (dtype) {
    case DType::kFloat32:
      return CompareFloating<float>(ref, cand, n, tol, [](float v) { return v; });
    case DType::kFloat64:
      return CompareFloating<double>(ref, cand, n, tol, [](double v) { return v; });
    case DType::kFloat16:
      return CompareFloating<uint16_t>(ref, cand, n, tol, HalfToFloat);
    case DType::kBFloat16:
      return CompareFloating<uint16_t>(ref, cand, n, tol, BFloat16ToFloat);
    case DType::kInt64:
      return CompareIntegral<int64_t>(ref, cand, n, to_int);
    case DType::kInt32:
      return CompareIntegral<int32_t>(ref, cand, n, to_int);
    case DType::kInt16:
      return CompareIntegral<int16_t>(ref, cand, n, to_int);
    case DType::kInt8:
      return CompareIntegral<int8_t>(ref, cand, n, to_int);
    case DType::kUInt8:
      return CompareIntegral<uint8_t>(ref, cand, n, to_int);
    case DType::kBool:
      return CompareIntegral<uint8_t>(ref, cand, n, [](uint8_t v) { return int64_t{v != 0}; });
  }
  return Stats{};
}

// Large tensors are compared in chunks, one thread each (the verifier
// compares hundreds of megabytes a candidate); the chunking depends only on
// the element count, so a result is the same on every machine.
constexpr int64_t kElementsPerChunk = int64_t{1} << 21;
constexpr int64_t kMaxChunks = 4;

Stats CompareChunked(DType dtype, const char* ref, const char* cand, int64_t n, Tolerance tol) {
  const int64_t chunks = std::clamp<int64_t>(n / kElementsPerChunk, 1, kMaxChunks);
  if (chunks == 1) return CompareElements(dtype, ref, cand, n, tol);
  const size_t size = DTypeSize(dtype);
  const int64_t per_chunk = (n + chunks - 1) / chunks;
  std::vector<Stats> parts(chunks);
  {
    std::vector<std::jthread> threads;
    for (int64_t k = 1; k < chunks; ++k) {
      threads.emplace_back([&, k] {
        pthread_setname_np(pthread_self(), "kf-compare");
        const int64_t begin = k * per_chunk;
        parts[k] = CompareElements(dtype, ref + begin * size, cand + begin * size,
                                   std::min(n, begin + per_chunk) - begin, tol);
      });
    }
    parts[0] = CompareElements(dtype, ref, cand, per_chunk, tol);
  }  // joined
  Stats total;
  for (int64_t k = 0; k < chunks; ++k) {
    const Stats& part = parts[k];
    if (part.mismatched > 0 && total.mismatched == 0) {  // the first mismatch overall
      total.first = k * per_chunk + part.first;
      total.first_kind = part.first_kind;
      total.first_candidate = part.first_candidate;
      total.first_reference = part.first_reference;
      total.first_candidate_int = part.first_candidate_int;
      total.first_reference_int = part.first_reference_int;
    }
    total.max_abs = std::max(total.max_abs, part.max_abs);
    total.sum_d2 += part.sum_d2;
    total.sum_r2 += part.sum_r2;
    total.mismatched += part.mismatched;
  }
  return total;
}

bool IsFloating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

std::string FormatShape(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Row-major position of flat index `i`: "[3, 1]".
std::string FormatPosition(int64_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> position(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    position[d] = i % shape[d];
    i /= shape[d];
  }
  return FormatShape(position);
}

std::string FormatFloat(double v, DType dtype) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Inf" : "-Inf";
  return dtype == DType::kFloat64 ? absl::StrFormat("%.17g", v) : absl::StrFormat("%.9g", v);
}

std::string FormatInt(int64_t v, DType dtype) {
  if (dtype == DType::kBool) return v != 0 ? "True" : "False";
  return absl::StrCat(v);
}

// Elements, or a message when the shape is malformed or too large.
std::optional<std::string> CountElements(const std::vector<int64_t>& shape, int64_t* numel) {
  int64_t n = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return absl::StrCat("shape ", FormatShape(shape), " has a negative dimension");
    if (__builtin_mul_overflow(n, dim, &n)) {
      return absl::StrCat("shape ", FormatShape(shape), " has too many elements");
    }
  }
  *numel = n;
  return std::nullopt;
}

// Why the two cannot be compared element by element, if they cannot.
std::optional<std::string> StructureError(const TensorView& reference, const TensorView& candidate,
                                          Tolerance tol, int64_t* numel) {
  if (!(tol.atol >= 0) || !(tol.rtol >= 0)) {
    return absl::StrCat("tolerance atol ", tol.atol, ", rtol ", tol.rtol,
                        " must be non-negative numbers");
  }
  if (candidate.shape != reference.shape) {
    return absl::StrCat("shape ", FormatShape(candidate.shape), " != reference ",
                        FormatShape(reference.shape));
  }
  if (candidate.dtype != reference.dtype) {
    return absl::StrCat("dtype ", DTypeName(candidate.dtype), " != reference ",
                        DTypeName(reference.dtype));
  }
  if (auto error = CountElements(reference.shape, numel)) return error;
  const size_t size = DTypeSize(reference.dtype);
  size_t expected = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(*numel), size, &expected)) {
    return absl::StrCat("shape ", FormatShape(reference.shape), " has too many elements");
  }
  for (const auto& [role, view] :
       {std::pair<absl::string_view, const TensorView*>{"reference", &reference},
        {"candidate", &candidate}}) {
    if (view->bytes.size() != expected) {
      return absl::StrCat(role, " has ", view->bytes.size(), " bytes, but shape ",
                          FormatShape(view->shape), " of ", DTypeName(view->dtype), " needs ",
                          expected);
    }
  }
  return std::nullopt;
}

// The first mismatch, in words.
std::string DescribeFirst(const Stats& s, DType dtype, const std::vector<int64_t>& shape) {
  const std::string where = absl::StrCat("index ", s.first);
  const std::string position = FormatPosition(s.first, shape);
  if (!IsFloating(dtype)) {
    return absl::StrCat("first at ", where, " ", position, ": candidate ",
                        FormatInt(s.first_candidate_int, dtype), ", reference ",
                        FormatInt(s.first_reference_int, dtype));
  }
  const std::string c = FormatFloat(s.first_candidate, dtype);
  const std::string r = FormatFloat(s.first_reference, dtype);
  switch (s.first_kind) {
    case MismatchKind::kCandidateNonFinite:
      return absl::StrCat("candidate has ", c, " at ", where, " where the reference is ", r,
                          " (element ", position, ")");
    case MismatchKind::kReferenceNaN:
    case MismatchKind::kReferenceInf:
      return absl::StrCat("reference has ", r, " at ", where, " where the candidate is ", c,
                          " (element ", position, ")");
    case MismatchKind::kValue:
      break;
  }
  return absl::StrCat("first at ", where, " ", position, ": candidate ", c, ", reference ", r);
}

}  // namespace

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  absl::string_view bare = name;
  absl::ConsumePrefix(&bare, "torch.");
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == bare) return info.dtype;
  }
  for (const DTypeAlias& alias : kAliases) {
    if (alias.alias == bare) return alias.dtype;
  }
  std::vector<absl::string_view> known;
  for (const DTypeInfo& info : kDTypes) known.push_back(info.name);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "'; expected one of ", absl::StrJoin(known, ", ")));
}

absl::string_view DTypeName(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info.name;
  }
  return "unknown";
}

size_t DTypeSize(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info.size;
  }
  return 0;
}

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  uint32_t out;
  if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);  // Inf, or NaN keeping its payload
  } else {
    out = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(out);
}

float BFloat16ToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

CompareResult CompareTensors(const TensorView& reference, const TensorView& candidate,
                             Tolerance tol) {
  CompareResult result;
  int64_t numel = 0;
  if (std::optional<std::string> error = StructureError(reference, candidate, tol, &numel)) {
    result.message = *std::move(error);
    return result;
  }
  const DType dtype = reference.dtype;
  const Stats stats =
      CompareChunked(dtype, reference.bytes.data(), candidate.bytes.data(), numel, tol);
  result.passed = stats.mismatched == 0;
  result.max_abs_error = stats.max_abs;
  result.rel_l2_error =
      std::sqrt(stats.sum_d2) / std::max(std::sqrt(stats.sum_r2), kMinReferenceNorm);
  result.mismatched = stats.mismatched;
  result.first_mismatch_index = stats.first;

  const std::string criterion = IsFloating(dtype)
                                    ? absl::StrCat("atol ", tol.atol, ", rtol ", tol.rtol)
                                    : absl::StrCat("exact ", DTypeName(dtype), " comparison");
  const std::string errors =
      absl::StrCat("max abs error ", result.max_abs_error, ", rel l2 error ", result.rel_l2_error);
  if (result.passed) {
    result.message = absl::StrCat(numel, " elements match (", criterion, "); ", errors);
  } else {
    result.message =
        absl::StrCat(stats.mismatched, " of ", numel, " elements mismatch (", criterion, "); ",
                     DescribeFirst(stats, dtype, reference.shape), "; ", errors);
  }
  return result;
}

}  // namespace kforge
