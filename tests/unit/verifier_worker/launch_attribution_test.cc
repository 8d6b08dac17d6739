// Attribution of what a candidate's forward ran. The names are as PyTorch's
// profiler reports them (GPU kernel names seen on an H100 with torch 2.11;
// host-side ATen ops as on any device).
#include "verifier_worker/funnel/launch_attribution.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kforge {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const std::vector<std::string> kOwn = {"relu_kernel", "softmax_fwd"};
const std::vector<std::string> kNone;

v1::LaunchOrigin Kernel(const std::string& name, const std::vector<std::string>& allowed = {}) {
  return ClassifyLaunch(LaunchKind::kKernel, name, kOwn, allowed);
}
v1::LaunchOrigin Op(const std::string& name, const std::vector<std::string>& allowed = {}) {
  return ClassifyLaunch(LaunchKind::kOp, name, kOwn, allowed);
}

google::protobuf::Value Row(const std::string& kind, const std::string& name, int calls,
                            double gpu_us) {
  google::protobuf::Value row;
  auto* list = row.mutable_list_value();
  list->add_values()->set_string_value(kind);
  list->add_values()->set_string_value(name);
  list->add_values()->set_number_value(calls);
  list->add_values()->set_number_value(gpu_us);
  return row;
}

google::protobuf::Value Record(std::initializer_list<google::protobuf::Value> rows) {
  google::protobuf::Value record;
  for (const auto& row : rows) *record.mutable_list_value()->add_values() = row;
  return record;
}

TEST(ClassifyLaunchTest, TheCandidatesTritonKernelsAreItsOwn) {
  EXPECT_EQ(Kernel("relu_kernel"), v1::LAUNCH_OWN_TRITON);
  EXPECT_EQ(Kernel("softmax_fwd_0d1d2de"), v1::LAUNCH_OWN_TRITON);  // Triton 2's suffixes
  EXPECT_EQ(Kernel("relu_kernel2"), v1::LAUNCH_LIBRARY_COMPUTE);    // not a prefix match
  EXPECT_EQ(Kernel("relu_kernel_gemm"), v1::LAUNCH_LIBRARY_COMPUTE);
}

TEST(ClassifyLaunchTest, AnOwnKernelNamedLikeALibraryKernelDoesNotAdoptIt) {
  const std::vector<std::string> own = {"sm90", "nvjet"};
  EXPECT_EQ(ClassifyLaunch(LaunchKind::kKernel,
                           "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", own, {}),
            v1::LAUNCH_LIBRARY_COMPUTE);
  EXPECT_EQ(ClassifyLaunch(LaunchKind::kKernel, "nvjet_tst_128x64_64x6_1x1_h_bz_TNT", own, {}),
            v1::LAUNCH_LIBRARY_COMPUTE);
  EXPECT_EQ(ClassifyLaunch(LaunchKind::kKernel, "sm90", own, {}), v1::LAUNCH_OWN_TRITON);
}

TEST(ClassifyLaunchTest, MoreLaunchesThanOneRecordNamesCountAsLibraryCompute) {
  EXPECT_EQ(Kernel("kforge: more distinct launches than one record names"),
            v1::LAUNCH_LIBRARY_COMPUTE);
}

TEST(ClassifyLaunchTest, AllocationFillCopyAndTransfersAreMemoryWork) {
  EXPECT_EQ(Kernel("void at::native::vectorized_elementwise_kernel<4, "
                   "at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, "
                   "at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"),
            v1::LAUNCH_MEMORY);
  EXPECT_EQ(Kernel("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_"
                   "cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}"
                   "::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >"),
            v1::LAUNCH_MEMORY);
  EXPECT_EQ(Kernel("Memcpy DtoD (Device -> Device)"), v1::LAUNCH_MEMORY);
  EXPECT_EQ(Kernel("Memset (Device)"), v1::LAUNCH_MEMORY);
  EXPECT_EQ(Kernel("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, "
                   "unsigned int, 2, 128, 1>(...)"),
            v1::LAUNCH_MEMORY);
  for (const char* op : {"aten::empty", "aten::empty_like", "aten::zeros", "aten::fill_",
                         "aten::copy_", "aten::_to_copy", "aten::contiguous", "aten::clone",
                         "aten::view", "aten::reshape", "aten::t", "aten::item",
                         "aten::empty.memory_format"}) {
    EXPECT_EQ(Op(op), v1::LAUNCH_MEMORY) << op;
  }
}

TEST(ClassifyLaunchTest, LibraryArithmeticReductionsAndGemmsAreCompute) {
  EXPECT_EQ(Kernel("void at::native::vectorized_elementwise_kernel<4, "
                   "at::native::BinaryFunctor<float, float, float, "
                   "at::native::binary_internal::MulFunctor<float> >, "
                   "at::detail::Array<char*, 3> >"),
            v1::LAUNCH_LIBRARY_COMPUTE);
  EXPECT_EQ(Kernel("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1"),
            v1::LAUNCH_LIBRARY_COMPUTE);
  EXPECT_EQ(Kernel("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
                   "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, "
                   "float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}> >"),
            v1::LAUNCH_LIBRARY_COMPUTE);
  // Inductor's kernels are Triton too, but not the candidate's.
  EXPECT_EQ(Kernel("triton_poi_fused_relu_0"), v1::LAUNCH_LIBRARY_COMPUTE);
  for (const char* op : {"aten::mul", "aten::gt", "aten::relu", "aten::mm", "aten::add_",
                         "aten::where", "aten::sum", "aten::softmax", "aten::clamp_min"}) {
    EXPECT_EQ(Op(op), v1::LAUNCH_LIBRARY_COMPUTE) << op;
  }
}

TEST(ClassifyLaunchTest, ATaskCanAllowNamedLibraryWork) {
  EXPECT_EQ(Op("aten::mm", {"aten::mm"}), v1::LAUNCH_ALLOWED_BY_TASK);
  EXPECT_EQ(Op("aten::mm.out", {"mm"}), v1::LAUNCH_ALLOWED_BY_TASK);
  EXPECT_EQ(Op("aten::mul", {"aten::mm"}), v1::LAUNCH_LIBRARY_COMPUTE);
  EXPECT_EQ(Kernel("sm90_xmma_gemm_f32f32", {"gemm"}), v1::LAUNCH_ALLOWED_BY_TASK);
}

TEST(LaunchAttributionTest, ADecoyKernelBesideTorchArithmeticIsLibraryCompute) {
  LaunchAttribution attribution(kOwn, kNone);
  attribution.Add(Record({Row("kernel", "relu_kernel", 1, 3.0),
                          Row("kernel", "void at::native::vectorized_elementwise_kernel<4, "
                                        "at::native::BinaryFunctor<MulFunctor<float>>>",
                              1, 40.0),
                          Row("op", "aten::mul", 1, 0), Row("op", "aten::gt", 1, 0),
                          Row("op", "aten::empty_like", 1, 0)}));
  EXPECT_TRUE(attribution.OwnKernelRan());
  EXPECT_THAT(attribution.LibraryCompute(LaunchKind::kKernel),
              ElementsAre("void at::native::vectorized_elementwise_kernel<4, "
                          "at::native::BinaryFunctor<MulFunctor<float>>>"));
  EXPECT_THAT(attribution.LibraryCompute(LaunchKind::kOp), ElementsAre("aten::gt", "aten::mul"));
  const v1::LaunchAttribution summary = attribution.Summary(true);
  EXPECT_NEAR(summary.own_gpu_share(), 3.0 / 43.0, 1e-9);
  EXPECT_TRUE(summary.enforced());
  EXPECT_EQ(summary.runs(), 1);
  EXPECT_EQ(summary.launches_size(), 5);
}

TEST(LaunchAttributionTest, AnHonestCandidateRunsOnlyItsKernelsAndMemoryWork) {
  LaunchAttribution attribution(kOwn, kNone);
  for (int run = 0; run < 3; ++run) {
    attribution.Add(Record({Row("kernel", "softmax_fwd", 2, 10.0),
                            Row("kernel", "Memcpy DtoD (Device -> Device)", 1, 1.0),
                            Row("op", "aten::empty", 1, 0), Row("op", "aten::contiguous", 1, 0)}));
  }
  EXPECT_THAT(attribution.LibraryCompute(LaunchKind::kKernel), IsEmpty());
  EXPECT_THAT(attribution.LibraryCompute(LaunchKind::kOp), IsEmpty());
  EXPECT_TRUE(attribution.OwnKernelRan());
  const v1::LaunchAttribution summary = attribution.Summary(false);
  EXPECT_EQ(summary.runs(), 3);
  EXPECT_EQ(summary.launches(0).name(), "Memcpy DtoD (Device -> Device)");
  EXPECT_EQ(summary.launches(0).calls(), 3);
  EXPECT_NEAR(summary.own_gpu_share(), 30.0 / 33.0, 1e-9);  // 3 runs of 10 + 1 us
}

TEST(LaunchAttributionTest, AKernelThatNeverRanIsSeenAsSuch) {
  LaunchAttribution attribution(kOwn, kNone);
  attribution.Add(Record({Row("kernel", "sm90_xmma_gemm_f32f32", 1, 50.0)}));
  EXPECT_TRUE(attribution.SawGpuWork());
  EXPECT_FALSE(attribution.OwnKernelRan());
  LaunchAttribution host_only(kOwn, kNone);
  host_only.Add(Record({Row("op", "aten::relu", 1, 0)}));
  EXPECT_FALSE(host_only.SawGpuWork());
}

TEST(LaunchAttributionTest, CopiesToAndFromTheHostAreMeasuredPerRun) {
  // A candidate computing in Python on x.tolist(): no library kernel, only
  // the transfers and its decoy.
  LaunchAttribution attribution(kOwn, kNone);
  const LaunchAttribution::RunFacts first =
      attribution.Add(Record({Row("kernel", "relu_kernel", 1, 4.0),
                              Row("kernel", "Memcpy DtoH (Device -> Pageable)", 1, 9000.0),
                              Row("kernel", "Memcpy HtoD (Pageable -> Device)", 1, 8000.0),
                              Row("kernel", "Memcpy DtoD (Device -> Device)", 1, 30.0),
                              Row("op", "aten::_local_scalar_dense", 1, 0)}));
  EXPECT_THAT(attribution.LibraryCompute(LaunchKind::kKernel), IsEmpty());
  EXPECT_DOUBLE_EQ(first.host_transfer_us, 17000.0);
  EXPECT_DOUBLE_EQ(first.gpu_us, 17034.0);
  // A later run's facts are its own, however long an earlier decoy ran.
  const LaunchAttribution::RunFacts second =
      attribution.Add(Record({Row("kernel", "relu_kernel", 1, 1e6)}));
  EXPECT_DOUBLE_EQ(second.host_transfer_us, 0.0);
}

TEST(LaunchAttributionTest, NonsenseCountsFromTheCandidateAreClamped) {
  LaunchAttribution attribution(kOwn, kNone);
  attribution.Add(Record({Row("kernel", "relu_kernel", 1e300, -5.0)}));
  const v1::LaunchAttribution summary = attribution.Summary(true);
  ASSERT_EQ(summary.launches_size(), 1);
  EXPECT_GE(summary.launches(0).gpu_us(), 0.0);
}

TEST(LaunchAttributionTest, MalformedRowsAreIgnored) {
  LaunchAttribution attribution(kOwn, kNone);
  google::protobuf::Value bad;
  bad.mutable_list_value()->add_values()->set_string_value("kernel");
  attribution.Add(Record({bad, Row("op", "aten::empty", 1, 0)}));
  EXPECT_THAT(attribution.LibraryCompute(LaunchKind::kOp), IsEmpty());
  EXPECT_EQ(attribution.Summary(true).launches_size(), 1);
}

}  // namespace
}  // namespace kforge
