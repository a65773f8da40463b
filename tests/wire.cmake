# SPDX-License-Identifier: MIT
#
# The wire format and trace files (issue 5).  Included from
# tests/CMakeLists.txt after weft_add_test() is defined.
weft_add_test(NAME test_wire INTERNAL
  SOURCES test_wire.c
  LABELS unit valgrind
  TIMEOUT 120)
target_include_directories(test_wire PRIVATE ${WEFT_PROTO_GEN_DIR})

# The trace stream (proto/src/trace_stream.c): frames as read, events
# merged in time order in bounded memory; and the reader's seek.
weft_add_test(NAME test_trace_stream INTERNAL
  SOURCES test_trace_stream.c
  LABELS unit valgrind
  TIMEOUT 120)
target_include_directories(test_trace_stream PRIVATE ${WEFT_PROTO_GEN_DIR})

# Updates read from their bytes (proto/src/update_raw.c), against
# protobuf-c (issue 21).
weft_add_test(NAME test_update_raw
  SOURCES test_update_raw.c
  LINK weft_wire
  LABELS unit valgrind
  TIMEOUT 120)
# test_helpers.h includes weft/weft.h, which includes the probe's headers
# (declarations only: libweft-wire alone is linked).
target_include_directories(test_update_raw PRIVATE ${WEFT_PROTO_GEN_DIR}
                           ${PROJECT_SOURCE_DIR}/probe/include)

weft_add_test(NAME test_delta INTERNAL
  SOURCES test_delta.c
  LABELS unit valgrind
  TIMEOUT 120)
target_include_directories(test_delta PRIVATE ${WEFT_PROTO_GEN_DIR})

weft_add_test(NAME test_sites INTERNAL
  SOURCES test_sites.c
  LABELS unit valgrind
  TIMEOUT 120)
target_include_directories(test_sites PRIVATE ${WEFT_PROTO_GEN_DIR})

add_test(NAME wire_protoc
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/wire_protoc.sh
          $<TARGET_FILE:test_wire> ${PROJECT_SOURCE_DIR}/proto)
set_tests_properties(wire_protoc PROPERTIES
  TIMEOUT 60 LABELS unit SKIP_RETURN_CODE 77)

# Recording needs the probe: labelled probe, the WEFT_PROBE=OFF phase
# skips it.
weft_add_test(NAME test_trace_file INTERNAL
  SOURCES test_trace_file.c
  LABELS unit concurrency probe
  TIMEOUT 180)
target_include_directories(test_trace_file PRIVATE ${WEFT_PROTO_GEN_DIR})

# The recorder's checkpoint marks (issue 21): written, chained, each
# before a full update; none when turned off.
weft_add_test(NAME test_trace_ckpt INTERNAL
  SOURCES test_trace_ckpt.c
  LABELS unit concurrency probe
  TIMEOUT 120)
target_include_directories(test_trace_ckpt PRIVATE ${WEFT_PROTO_GEN_DIR})

# Tasks born and finished between updates named by their SPAWN's site.
if(TARGET weft-trace AND TARGET weft-bench AND WEFT_PROBE)
  add_test(NAME trace_spawn_names
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/trace_spawn_names.sh
            $<TARGET_FILE:weft-bench> $<TARGET_FILE:weft-trace>)
  set_tests_properties(trace_spawn_names PROPERTIES TIMEOUT 60
    LABELS "unit;probe")
endif()

if(TARGET weft-trace)
  add_test(NAME trace_tools
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/trace_tools.sh
            $<TARGET_FILE:test_trace_file> $<TARGET_FILE:weft-trace>
            ${PROJECT_SOURCE_DIR}/proto)
  set_tests_properties(trace_tools PROPERTIES TIMEOUT 120
    LABELS "unit;probe")
endif()

# Folded warnings whole in a trace whose process ends inside the fold's
# second, and weft-trace counting warnings, not rows.
if(TARGET weft-trace)
  add_test(NAME trace_folds
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/trace_folds.sh
            $<TARGET_FILE:test_trace_file> $<TARGET_FILE:weft-trace>)
  set_tests_properties(trace_folds PROPERTIES TIMEOUT 120
    LABELS "unit;probe")
endif()

# A disk that fills while recording (issue 19): a 1 MiB tmpfs (or
# RLIMIT_FSIZE where no mount is allowed), the file read whole by
# weft-trace info after the failure and after continuing; a torn record
# spliced in is skipped and reported.
if(TARGET weft-trace)
  add_test(NAME trace_full_disk
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/trace_full_disk.sh
            $<TARGET_FILE:test_trace_file> $<TARGET_FILE:weft-trace>)
  set_tests_properties(trace_full_disk PROPERTIES TIMEOUT 120
    LABELS "unit;probe" SKIP_RETURN_CODE 77)
endif()

# weft-trace tasks (issue 18): a workload with tasks parked on a notify
# nobody signals, read live and from its recording; 10,000 of them live.
if(TARGET weft-trace)
  add_executable(tasks_workload tasks_workload.c)
  target_link_libraries(tasks_workload PRIVATE weft Threads::Threads)
  add_test(NAME trace_tasks
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/trace_tasks.sh
            $<TARGET_FILE:tasks_workload> $<TARGET_FILE:weft-trace>
            ${PROJECT_SOURCE_DIR})
  set_tests_properties(trace_tasks PROPERTIES TIMEOUT 120
    LABELS "unit;probe")
endif()

# weft-trace slice and export --from/--to (issue 21): a window of a
# recorded workload as a trace of its own (info, tasks, dump, the
# console's replay open it; the events are the whole's within the
# window; tasks live across --from are named), the window exported as
# JSON with every time inside it, and bad arguments refused.
if(TARGET weft-trace)
  add_executable(slice_workload slice_workload.c)
  target_link_libraries(slice_workload PRIVATE weft Threads::Threads)
  if(TARGET weft-console)
    set(WEFT_SLICE_CONSOLE $<TARGET_FILE:weft-console>)
  else()
    set(WEFT_SLICE_CONSOLE "")
  endif()
  add_test(NAME trace_slice
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/trace_slice.sh
            $<TARGET_FILE:slice_workload> $<TARGET_FILE:weft-trace>
            ${PROJECT_SOURCE_DIR}/proto "${WEFT_SLICE_CONSOLE}")
  set_tests_properties(trace_slice PROPERTIES TIMEOUT 60
    LABELS "unit;probe")
endif()

# weft-trace and resources (issue 18): tasks, stats and dump on a trace
# test_wire writes, then on tasks_workload's recordings (a named job
# convoy, detached jobs, waits by design): the probe is needed.
if(TARGET weft-trace)
  add_test(NAME trace_res
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/trace_res.sh
            $<TARGET_FILE:test_wire> $<TARGET_FILE:weft-trace>
            $<TARGET_FILE:tasks_workload>)
  set_tests_properties(trace_res PROPERTIES TIMEOUT 60
    LABELS "unit;probe")
endif()

# libFuzzer smoke run (clang): the record decoder and the trace-file
# reader, 10 s each, in parallel.  Longer runs: see tests/fuzz/run.sh.
add_test(NAME fuzz_wire
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run.sh
          ${CMAKE_CURRENT_BINARY_DIR}/fuzz 10 $<TARGET_FILE:test_wire>)
set_tests_properties(fuzz_wire PROPERTIES
  TIMEOUT 240 LABELS fuzz SKIP_RETURN_CODE 77
  ENVIRONMENT "FUZZ_TARGETS=fuzz_record fuzz_trace_file;WEFT_FUZZ_CORPUS=${CMAKE_BINARY_DIR}/fuzz-corpus")

# The server's input path (a client's bytes up to dispatch), 10 s.
add_test(NAME fuzz_server
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run.sh
          ${CMAKE_CURRENT_BINARY_DIR}/fuzz-server 10)
set_tests_properties(fuzz_server PROPERTIES
  TIMEOUT 240 LABELS fuzz SKIP_RETURN_CODE 77
  ENVIRONMENT "FUZZ_TARGETS=fuzz_server_input;WEFT_FUZZ_CORPUS=${CMAKE_BINARY_DIR}/fuzz-corpus")
