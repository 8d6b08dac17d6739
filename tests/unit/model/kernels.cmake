# Tests of model/kernels (included from tests/CMakeLists.txt): the fused CUDA
# kernels against the LibTorch ops they replace, on a GPU; without the
# kernels (the CPU build), that every call says so.
add_executable(kforge_kernel_tests unit/model/kernels/fused_kernels_test.cc)
# kforge_sampling first: its proto include folder must come before
# LibTorch's, which carries protobuf headers of another version.
target_link_libraries(kforge_kernel_tests PRIVATE kforge_sampling kforge_transformer
                      kforge_cuda_kernels GTest::gmock GTest::gtest_main)
target_compile_options(kforge_kernel_tests PRIVATE ${KFORGE_TORCH_CXX_FLAGS})
gtest_discover_tests(kforge_kernel_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
