# SPDX-License-Identifier: MIT
#
# The wire format and trace files (issue 5).  Included from
# tests/CMakeLists.txt after weft_add_test() is defined.
weft_add_test(NAME test_wire INTERNAL
  SOURCES test_wire.c
  LABELS unit valgrind
  TIMEOUT 120)
target_include_directories(test_wire PRIVATE ${WEFT_PROTO_GEN_DIR})

add_test(NAME wire_protoc
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/wire_protoc.sh
          $<TARGET_FILE:test_wire> ${PROJECT_SOURCE_DIR}/proto)
set_tests_properties(wire_protoc PROPERTIES
  TIMEOUT 60 LABELS unit SKIP_RETURN_CODE 77)
