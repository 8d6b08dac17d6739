# Tests of deploy/ (Kubernetes manifests, alerts, dashboards). Included from
# tests/CMakeLists.txt:
#   include(${CMAKE_CURRENT_SOURCE_DIR}/deploy/deploy_tests.cmake)
#
# DeployManifests: no cluster, no build; node + npm (npm ci into
# deploy/tests/node_modules on first run), python3-yaml, promtool.
add_test(NAME DeployManifests COMMAND ${CMAKE_SOURCE_DIR}/deploy/tests/run_manifest_tests.sh)
set_tests_properties(DeployManifests PROPERTIES LABELS unit TIMEOUT 300)

if(NOT KFORGE_TEST_PYTHON)
  find_program(KFORGE_TEST_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
endif()
if(NOT KFORGE_TEST_PYTHON)
  find_program(KFORGE_TEST_PYTHON NAMES python3 REQUIRED)
endif()

# DeployPrometheus: a real Prometheus scraping `kforge local` built here;
# every dashboard and alert expression must return data.
add_test(NAME DeployPrometheus
         COMMAND ${KFORGE_TEST_PYTHON} ${CMAKE_SOURCE_DIR}/deploy/tests/prometheus_test.py
                 --bin ${CMAKE_RUNTIME_OUTPUT_DIRECTORY})
set_tests_properties(DeployPrometheus PROPERTIES LABELS integration TIMEOUT 600)

# DeployImages (label "slow"; off by default, so scripts/test.sh and CI do
# not run it): builds the CPU images without a daemon and boots each one
# (deploy/images/test-images.sh: root, mmdebstrap, umoci, Debian's mirror;
# about 3 minutes with the root filesystems cached, 15 without). Run it on
# its own with `deploy/images/test-images.sh`, or configure with
# -DKFORGE_IMAGE_TESTS=ON and `ctest -L slow`.
option(KFORGE_IMAGE_TESTS "Register the slow image build-and-boot test (DeployImages)" OFF)
if(KFORGE_IMAGE_TESTS)
  add_test(NAME DeployImages COMMAND ${CMAKE_SOURCE_DIR}/deploy/images/test-images.sh)
  set_tests_properties(DeployImages PROPERTIES LABELS slow TIMEOUT 3600 RUN_SERIAL TRUE)
endif()
