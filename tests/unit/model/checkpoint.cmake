# Tests of model/checkpoint (included from tests/CMakeLists.txt): config.json,
# safetensors reading and writing, the BPE trainer and `kforge tiny-model`'s
# checkpoints. No LibTorch.
add_executable(kforge_checkpoint_tests
  unit/model/checkpoint/model_config_test.cc
  unit/model/checkpoint/safetensors_test.cc
  unit/model/checkpoint/weight_names_test.cc
  unit/model/checkpoint/bpe_trainer_test.cc
  unit/model/checkpoint/tiny_model_test.cc)
target_link_libraries(kforge_checkpoint_tests PRIVATE kforge_checkpoint kforge_tokenizer
                      kforge_test_support GTest::gtest_main)
gtest_discover_tests(kforge_checkpoint_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
