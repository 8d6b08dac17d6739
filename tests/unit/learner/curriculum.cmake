# Tests of learner/curriculum (included from tests/CMakeLists.txt).
add_executable(kforge_curriculum_tests unit/learner/curriculum/curriculum_test.cc)
target_link_libraries(kforge_curriculum_tests PRIVATE kforge_curriculum GTest::gtest GTest::gmock
                      GTest::gtest_main)
gtest_discover_tests(kforge_curriculum_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
