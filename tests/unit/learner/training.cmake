# Tests of learner/training and learner/checkpoint (included from
# tests/CMakeLists.txt): losses and AdamW against hand-computed values; the
# trainer learning and resuming on a tiny model; the job driver offering
# groups ahead in asynchronous GRPO. CPU, float32.
add_executable(kforge_training_tests
  unit/learner/training/policy_loss_test.cc
  unit/learner/training/adamw_test.cc
  unit/learner/training/policy_trainer_test.cc
  unit/learner/training/step_batches_test.cc
  unit/learner/training/sample_log_test.cc
  unit/learner/training/training_run_test.cc)
target_link_libraries(kforge_training_tests PRIVATE kforge_training kforge_generation kforge_model
                      kforge_test_support GTest::gtest_main ${TORCH_LIBRARIES})
target_compile_options(kforge_training_tests PRIVATE ${KFORGE_TORCH_CXX_FLAGS})
add_dependencies(kforge_training_tests kforge_builtin_tasks)
gtest_discover_tests(kforge_training_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit TIMEOUT 300)
