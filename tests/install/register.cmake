# SPDX-License-Identifier: MIT
#
# Registers the out-of-tree install test (tools/install-test.sh): install
# this build into a temporary prefix, then build and run tests/install/hello.c
# against it with pkg-config and with find_package(weft), shared and static.
# Included from tests/CMakeLists.txt.
#
# Skipped in sanitizer builds: the installed library would need the same
# -fsanitize flags in every consumer, which is not what the test checks.
if(WEFT_SANITIZE STREQUAL "")
  add_test(NAME install_out_of_tree
    COMMAND ${PROJECT_SOURCE_DIR}/tools/install-test.sh ${PROJECT_BINARY_DIR})
  set_tests_properties(install_out_of_tree PROPERTIES
    TIMEOUT 300
    LABELS install)
endif()
