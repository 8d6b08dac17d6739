# Tests of model/transformer (included from tests/CMakeLists.txt): attention,
# rotary embedding, weight loading, the decoder against an independent
# reference, and the KV cache against the uncached forward. CPU, float32.
# hf_reference_test compares with transformers' logits where
# KFORGE_HF_REFERENCE_DIR points at scripts/hf_reference_logits.py output.
add_executable(kforge_transformer_tests
  unit/model/transformer/attention_test.cc
  unit/model/transformer/rope_test.cc
  unit/model/transformer/weight_loading_test.cc
  unit/model/transformer/decoder_model_test.cc
  unit/model/transformer/kv_cache_test.cc)
if(TARGET kforge_checkpoint)  # as model/transformer/CMakeLists.txt
  target_sources(kforge_transformer_tests PRIVATE
    unit/model/transformer/checkpoint_loader_test.cc
    unit/model/transformer/hf_reference_test.cc)
endif()
target_link_libraries(kforge_transformer_tests PRIVATE kforge_transformer kforge_test_support
                      GTest::gtest_main ${TORCH_LIBRARIES})
target_compile_options(kforge_transformer_tests PRIVATE ${KFORGE_TORCH_CXX_FLAGS})
gtest_discover_tests(kforge_transformer_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
