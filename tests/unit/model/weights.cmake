# Tests of model/weights (included from tests/CMakeLists.txt). The stream and
# the flat buffers on the CPU; the NCCL tests need GPUs and skip elsewhere.
add_executable(kforge_weights_tests unit/model/weights/weight_stream_test.cc
               unit/model/weights/flat_parameters_test.cc)
target_link_libraries(kforge_weights_tests PRIVATE kforge_weights GTest::gtest GTest::gmock
                      GTest::gtest_main ${TORCH_LIBRARIES})
target_compile_options(kforge_weights_tests PRIVATE ${KFORGE_TORCH_CXX_FLAGS})
gtest_discover_tests(kforge_weights_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)

add_executable(kforge_nccl_tests unit/model/weights/nccl_communicator_test.cc
               unit/learner/weights/weight_broadcaster_gpu_test.cc)
target_link_libraries(kforge_nccl_tests PRIVATE kforge_weights kforge_learner GTest::gtest GTest::gmock
                      GTest::gtest_main ${TORCH_LIBRARIES})
target_compile_options(kforge_nccl_tests PRIVATE ${KFORGE_TORCH_CXX_FLAGS})
gtest_discover_tests(kforge_nccl_tests DISCOVERY_TIMEOUT 60
                     PROPERTIES LABELS "unit;gpu" TIMEOUT 300 RESOURCE_LOCK gpu)
