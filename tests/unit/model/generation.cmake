# Tests of model/generation (included from tests/CMakeLists.txt): the
# continuous-batching generator on a tiny checkpoint, CPU float32.
add_executable(kforge_generation_tests unit/model/generation/generator_test.cc
  unit/model/generation/dense_decoder_test.cc)
target_link_libraries(kforge_generation_tests PRIVATE kforge_generation kforge_checkpoint
                      kforge_test_support GTest::gtest_main ${TORCH_LIBRARIES})
target_compile_options(kforge_generation_tests PRIVATE ${KFORGE_TORCH_CXX_FLAGS})
add_dependencies(kforge_generation_tests kforge_builtin_tasks)
gtest_discover_tests(kforge_generation_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
