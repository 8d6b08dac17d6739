# Tests of learner/rewards (included from tests/CMakeLists.txt). The difflib
# comparison runs the system python3 and skips without one.
add_executable(kforge_rewards_tests
  unit/learner/rewards/sequence_matcher_test.cc
  unit/learner/rewards/completion_format_test.cc
  unit/learner/rewards/reward_test.cc
  unit/learner/rewards/turn_credit_test.cc)
target_link_libraries(kforge_rewards_tests PRIVATE kforge_rewards GTest::gtest GTest::gmock
                      GTest::gtest_main)
gtest_discover_tests(kforge_rewards_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
