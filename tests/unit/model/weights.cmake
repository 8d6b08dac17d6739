# Tests of model/weights (included from tests/CMakeLists.txt). CPU only.
add_executable(kforge_weights_tests unit/model/weights/weight_stream_test.cc)
target_link_libraries(kforge_weights_tests PRIVATE kforge_weights GTest::gtest GTest::gmock
                      GTest::gtest_main ${TORCH_LIBRARIES})
target_compile_options(kforge_weights_tests PRIVATE ${KFORGE_TORCH_CXX_FLAGS})
gtest_discover_tests(kforge_weights_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
