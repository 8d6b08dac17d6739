# Tests of model/sampling (included from tests/CMakeLists.txt). CPU only.
add_executable(kforge_sampling_tests
  unit/model/sampling/sampling_params_test.cc
  unit/model/sampling/stop_matcher_test.cc
  unit/model/sampling/token_sampler_test.cc
  unit/model/sampling/token_sampler_distribution_test.cc)
target_link_libraries(kforge_sampling_tests PRIVATE kforge_sampling GTest::gtest GTest::gmock
                      GTest::gtest_main)
target_compile_options(kforge_sampling_tests PRIVATE ${KFORGE_TORCH_CXX_FLAGS})
gtest_discover_tests(kforge_sampling_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
