#include "verifier_worker/funnel/tensor_compare.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Owns the bytes a TensorView points at.
struct Tensor {
  DType dtype;
  std::vector<int64_t> shape;
  std::string bytes;

  TensorView view() const { return {dtype, shape, bytes}; }
};

template <typename T>
Tensor Make(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  return {dtype, std::move(shape),
          std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T))};
}

Tensor F32(std::vector<int64_t> shape, const std::vector<float>& values) {
  return Make(DType::kFloat32, std::move(shape), values);
}

CompareResult Compare(const Tensor& reference, const Tensor& candidate, Tolerance tol = {}) {
  return CompareTensors(reference.view(), candidate.view(), tol);
}

TEST(TensorCompareTest, EqualTensorsPassWithZeroError) {
  const Tensor t = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  const CompareResult result = Compare(t, t);
  EXPECT_TRUE(result.passed) << result.message;
  EXPECT_EQ(result.max_abs_error, 0);
  EXPECT_EQ(result.rel_l2_error, 0);
  EXPECT_EQ(result.mismatched, 0);
  EXPECT_EQ(result.first_mismatch_index, -1);
  EXPECT_THAT(result.message, HasSubstr("6 elements match"));
}

TEST(TensorCompareTest, WithinAbsoluteAndRelativeTolerancePasses) {
  // 100.5 vs 100 is allowed by rtol alone: 0.5 <= 0.01 + 0.01 * 100.
  const CompareResult result =
      Compare(F32({3}, {1, 2, 100}), F32({3}, {1.005f, 2, 100.5f}), {.atol = 0.01, .rtol = 0.01});
  EXPECT_TRUE(result.passed) << result.message;
  EXPECT_DOUBLE_EQ(result.max_abs_error, 0.5);
}

TEST(TensorCompareTest, ToleranceBoundIsInclusive) {
  const auto f64 = [](double v) { return Make(DType::kFloat64, {1}, std::vector<double>{v}); };
  const Tolerance tol{.atol = 0.25, .rtol = 0.25};
  EXPECT_TRUE(Compare(f64(1.0), f64(1.5), tol).passed);
  EXPECT_FALSE(Compare(f64(1.0), f64(1.5 + std::ldexp(1.0, -40)), tol).passed);
}

TEST(TensorCompareTest, OutOfToleranceNamesCountIndexValuesAndError) {
  std::vector<float> reference(10, 0.25f);
  std::vector<float> candidate = reference;
  candidate[7] = 0.5f;  // [3, 1] in shape [5, 2]
  candidate[9] = 1.0f;
  const CompareResult result =
      Compare(F32({5, 2}, reference), F32({5, 2}, candidate), {.atol = 1e-3, .rtol = 1e-3});
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.mismatched, 2);
  EXPECT_EQ(result.first_mismatch_index, 7);
  EXPECT_DOUBLE_EQ(result.max_abs_error, 0.75);
  EXPECT_THAT(result.message, HasSubstr("2 of 10 elements mismatch (atol 0.001, rtol 0.001)"));
  EXPECT_THAT(result.message, HasSubstr("first at index 7 [3, 1]: candidate 0.5, reference 0.25"));
  EXPECT_THAT(result.message, HasSubstr("max abs error 0.75"));
}

TEST(TensorCompareTest, NaNWhereTheReferenceIsNaNPasses) {
  const CompareResult result = Compare(F32({2}, {kNaN, 1}), F32({2}, {kNaN, 1}));
  EXPECT_TRUE(result.passed) << result.message;
  EXPECT_EQ(result.max_abs_error, 0);
}

TEST(TensorCompareTest, CandidateNaNWhereTheReferenceIsFiniteFails) {
  std::vector<float> reference(20, 0.25f);
  std::vector<float> candidate = reference;
  candidate[17] = kNaN;
  const CompareResult result =
      Compare(F32({4, 5}, reference), F32({4, 5}, candidate), {.atol = 1e-2, .rtol = 1e-2});
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.mismatched, 1);
  EXPECT_EQ(result.first_mismatch_index, 17);
  EXPECT_TRUE(std::isinf(result.max_abs_error));
  EXPECT_THAT(
      result.message,
      HasSubstr("candidate has NaN at index 17 where the reference is 0.25 (element [3, 2])"));
}

TEST(TensorCompareTest, FiniteCandidateWhereTheReferenceIsNaNFails) {
  const CompareResult result =
      Compare(F32({3}, {1, kNaN, 2}), F32({3}, {1, 0.5f, 2}), {.atol = 1e9, .rtol = 1e9});
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.first_mismatch_index, 1);
  EXPECT_THAT(result.message, HasSubstr("reference has NaN at index 1 where the candidate is 0.5"));
  // The NaN element does not enter the error measures.
  EXPECT_EQ(result.max_abs_error, 0);
}

TEST(TensorCompareTest, InfinitiesMustMatchExactly) {
  const Tolerance loose{.atol = 1e30, .rtol = 1e30};
  EXPECT_TRUE(Compare(F32({2}, {kInf, -kInf}), F32({2}, {kInf, -kInf}), loose).passed);

  const CompareResult sign = Compare(F32({1}, {kInf}), F32({1}, {-kInf}), loose);
  EXPECT_FALSE(sign.passed);
  EXPECT_THAT(sign.message, HasSubstr("reference has Inf at index 0 where the candidate is -Inf"));

  EXPECT_FALSE(Compare(F32({1}, {kInf}), F32({1}, {3e38f}), loose).passed);

  const CompareResult overflow = Compare(F32({2}, {1, 2}), F32({2}, {1, kInf}), loose);
  EXPECT_FALSE(overflow.passed);
  EXPECT_THAT(overflow.message, HasSubstr("candidate has Inf at index 1 where the reference is 2"));
}

TEST(TensorCompareTest, ShapeMismatchFails) {
  const CompareResult result =
      Compare(F32({2, 4}, std::vector<float>(8)), F32({2, 3}, std::vector<float>(6)));
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.message, "shape [2, 3] != reference [2, 4]");
  EXPECT_EQ(result.first_mismatch_index, -1);
}

TEST(TensorCompareTest, DTypeMismatchFails) {
  const CompareResult result =
      Compare(F32({2}, {1, 2}), Make<uint16_t>(DType::kFloat16, {2}, {0x3C00, 0x4000}));
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.message, "dtype float16 != reference float32");
}

TEST(TensorCompareTest, ByteCountInconsistentWithShapeFails) {
  const Tensor reference = F32({2, 3}, std::vector<float>(6));
  Tensor candidate = F32({2, 3}, std::vector<float>(5));
  const CompareResult result = Compare(reference, candidate);
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.message, "candidate has 20 bytes, but shape [2, 3] of float32 needs 24");

  const CompareResult bad_reference = Compare(candidate, reference);
  EXPECT_FALSE(bad_reference.passed);
  EXPECT_THAT(bad_reference.message, HasSubstr("reference has 20 bytes"));
}

TEST(TensorCompareTest, HalfDecodesNormalsSubnormalsInfinitiesAndNaN) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // 5.96e-8
  EXPECT_NEAR(HalfToFloat(0x0001), 5.96e-8, 1e-10);
  EXPECT_EQ(HalfToFloat(0x03FF), 1023 * std::ldexp(1.0f, -24));  // largest subnormal
  EXPECT_EQ(HalfToFloat(0x8000), 0.0f);
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(HalfToFloat(0x7C00), kInf);
  EXPECT_EQ(HalfToFloat(0xFC00), -kInf);
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0xFC01)));
  // Every finite pattern against the definition of binary16.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const int exponent = (bits >> 10) & 0x1f;
    if (exponent == 0x1f) continue;
    const double mantissa = bits & 0x3ff;
    const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24)
                                           : std::ldexp(1.0 + mantissa / 1024, exponent - 15);
    ASSERT_EQ(HalfToFloat(static_cast<uint16_t>(bits)), (bits & 0x8000) ? -magnitude : magnitude)
        << std::hex << bits;
  }
}

TEST(TensorCompareTest, BFloat16DecodesByShiftingIntoTheHighBits) {
  EXPECT_EQ(BFloat16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0xC000), -2.0f);
  EXPECT_EQ(BFloat16ToFloat(0x7F80), kInf);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(0x7FC0)));
  EXPECT_EQ(BFloat16ToFloat(0x0001), std::ldexp(1.0f, -133));  // a float subnormal
}

TEST(TensorCompareTest, HalfAndBFloat16TensorsCompareDecodedValues) {
  // 0x3C01 is 1 + 2^-10.
  const Tensor one = Make<uint16_t>(DType::kFloat16, {1}, {0x3C00});
  const Tensor next = Make<uint16_t>(DType::kFloat16, {1}, {0x3C01});
  EXPECT_TRUE(Compare(one, next, {.atol = 1e-3, .rtol = 0}).passed);
  const CompareResult tight = Compare(one, next, {.atol = 5e-4, .rtol = 0});
  EXPECT_FALSE(tight.passed);
  EXPECT_DOUBLE_EQ(tight.max_abs_error, std::ldexp(1.0, -10));
  EXPECT_THAT(tight.message, HasSubstr("candidate 1.00097656, reference 1"));

  const CompareResult bf16 =
      Compare(Make<uint16_t>(DType::kBFloat16, {2}, {0x3F80, 0x4000}),
              Make<uint16_t>(DType::kBFloat16, {2}, {0x4000, 0x4000}), {.atol = 0.5, .rtol = 0});
  EXPECT_FALSE(bf16.passed);
  EXPECT_DOUBLE_EQ(bf16.max_abs_error, 1.0);
  EXPECT_THAT(bf16.message, HasSubstr("candidate 2, reference 1"));
}

TEST(TensorCompareTest, IntegersCompareExactlyWhateverTheTolerance) {
  const CompareResult ints =
      Compare(Make<int32_t>(DType::kInt32, {3}, {1, 2, 3}),
              Make<int32_t>(DType::kInt32, {3}, {1, 2, 4}), {.atol = 10, .rtol = 10});
  EXPECT_FALSE(ints.passed);
  EXPECT_EQ(ints.mismatched, 1);
  EXPECT_EQ(ints.first_mismatch_index, 2);
  EXPECT_DOUBLE_EQ(ints.max_abs_error, 1);
  EXPECT_THAT(ints.message, HasSubstr("exact int32 comparison"));
  EXPECT_THAT(ints.message, HasSubstr("candidate 4, reference 3"));

  // 2^53 and 2^53 + 1 are the same double but not the same int64.
  const int64_t big = int64_t{1} << 53;
  EXPECT_FALSE(Compare(Make<int64_t>(DType::kInt64, {1}, {big}),
                       Make<int64_t>(DType::kInt64, {1}, {big + 1}))
                   .passed);
  EXPECT_TRUE(Compare(Make<int8_t>(DType::kInt8, {2}, {-128, 127}),
                      Make<int8_t>(DType::kInt8, {2}, {-128, 127}))
                  .passed);

  const CompareResult bools =
      Compare(Make<uint8_t>(DType::kBool, {2}, {1, 0}), Make<uint8_t>(DType::kBool, {2}, {1, 1}));
  EXPECT_FALSE(bools.passed);
  EXPECT_THAT(bools.message, HasSubstr("candidate True, reference False"));
}

TEST(TensorCompareTest, RelativeL2ErrorIsTheNormOfTheDifferenceOverTheReference) {
  // ||(3, 5) - (3, 4)|| / ||(3, 4)|| = 1 / 5.
  const CompareResult result = Compare(F32({2}, {3, 4}), F32({2}, {3, 5}), {.atol = 10, .rtol = 0});
  EXPECT_TRUE(result.passed);
  EXPECT_DOUBLE_EQ(result.rel_l2_error, 0.2);

  // An all-zero reference divides by 1e-12 rather than 0.
  const CompareResult zero =
      Compare(Make<double>(DType::kFloat64, {2}, {0, 0}),
              Make<double>(DType::kFloat64, {2}, {1e-13, 0}), {.atol = 1, .rtol = 0});
  EXPECT_NEAR(zero.rel_l2_error, 0.1, 1e-12);
}

TEST(TensorCompareTest, EmptyTensorsOfEqualShapePass) {
  const Tensor empty = F32({0, 3}, {});
  const CompareResult result = Compare(empty, empty);
  EXPECT_TRUE(result.passed) << result.message;
  EXPECT_EQ(result.rel_l2_error, 0);
  EXPECT_FALSE(Compare(empty, F32({0}, {})).passed);
}

TEST(TensorCompareTest, ScalarsAndUnalignedBytesCompare) {
  // One byte of padding so the float starts at an odd address.
  const std::string padded = std::string(1, '\0') + F32({}, {2.5f}).bytes;
  const TensorView unaligned{DType::kFloat32, {}, absl::string_view(padded).substr(1)};
  const Tensor other = F32({}, {3.5f});
  const CompareResult result = CompareTensors(other.view(), unaligned, {.atol = 0.1, .rtol = 0});
  EXPECT_FALSE(result.passed);
  EXPECT_THAT(result.message, HasSubstr("first at index 0 []: candidate 2.5, reference 3.5"));
}

TEST(TensorCompareTest, NegativeToleranceIsRejected) {
  const Tensor t = F32({1}, {1});
  const CompareResult result = Compare(t, t, {.atol = -1, .rtol = 0});
  EXPECT_FALSE(result.passed);
  EXPECT_THAT(result.message, HasSubstr("must be non-negative"));
}

// Past 2^22 elements the comparison runs in chunks, one thread each: the
// result must be the whole tensor's (the first mismatch overall, every
// mismatch counted, the largest error), as a single pass would give it.
TEST(TensorCompareTest, ALargeTensorComparedInChunksReportsTheWholeTensor) {
  const int64_t n = (int64_t{1} << 23) + 7;  // 4 chunks, the last one shorter
  std::vector<float> reference(n), candidate(n);
  for (int64_t i = 0; i < n; ++i) reference[i] = candidate[i] = static_cast<float>(i % 1000);
  const int64_t per_chunk = (n + 3) / 4;
  // Mismatches in the second and fourth chunks; the largest in the fourth.
  const std::vector<int64_t> wrong = {per_chunk + 5, per_chunk + 6, 3 * per_chunk + 1, n - 1};
  for (int64_t i : wrong) candidate[i] = reference[i] + 2;
  candidate[n - 1] = reference[n - 1] + 9;
  const CompareResult result =
      Compare(F32({n}, reference), F32({n}, candidate), {.atol = 0.5, .rtol = 0});
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.mismatched, 4);
  EXPECT_EQ(result.first_mismatch_index, per_chunk + 5);
  EXPECT_DOUBLE_EQ(result.max_abs_error, 9);
  EXPECT_THAT(result.message, HasSubstr(absl::StrCat("first at index ", per_chunk + 5)));
  // The error norm counts every chunk: sqrt(3 * 2^2 + 9^2) over the
  // reference's norm.
  double ref_norm = 0;
  for (float r : reference) ref_norm += static_cast<double>(r) * r;
  EXPECT_NEAR(result.rel_l2_error, std::sqrt(3 * 4.0 + 81.0) / std::sqrt(ref_norm), 1e-12);

  const CompareResult same = Compare(F32({n}, reference), F32({n}, reference));
  EXPECT_TRUE(same.passed) << same.message;
  EXPECT_EQ(same.first_mismatch_index, -1);
}

TEST(TensorCompareTest, ParsesTorchDTypeNames) {
  const std::vector<std::pair<std::string, DType>> names = {
      {"float32", DType::kFloat32}, {"float16", DType::kFloat16}, {"bfloat16", DType::kBFloat16},
      {"float64", DType::kFloat64}, {"int64", DType::kInt64},     {"int32", DType::kInt32},
      {"int16", DType::kInt16},     {"int8", DType::kInt8},       {"uint8", DType::kUInt8},
      {"bool", DType::kBool}};
  for (const auto& [name, dtype] : names) {
    absl::StatusOr<DType> parsed = ParseDType(name);
    ASSERT_TRUE(parsed.ok()) << name;
    EXPECT_EQ(*parsed, dtype);
    EXPECT_EQ(DTypeName(dtype), name);
    EXPECT_EQ(*ParseDType("torch." + name), dtype);
  }
  EXPECT_EQ(*ParseDType("half"), DType::kFloat16);
  EXPECT_EQ(ParseDType("complex64").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ParseDType("complex64").status().message(), HasSubstr("'complex64'"));

  EXPECT_EQ(DTypeSize(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kFloat64), 8u);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8u);
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
}

}  // namespace
}  // namespace kforge
