# SPDX-License-Identifier: MIT
#
# The console (issue 6).  Included from tests/CMakeLists.txt after
# weft_add_test() is defined; only where console/ was built.
if(NOT TARGET weft_console)
  return()
endif()

# The state store, the views rendered to text, the key actions.
weft_add_test(NAME test_console_model
  SOURCES test_console_model.c
  LABELS unit valgrind
  TIMEOUT 120)
target_link_libraries(test_console_model PRIVATE weft_console)
# Its replay cases test the index made in memory: no side index
# (test_console_side tests that).
set_tests_properties(test_console_model PROPERTIES
  ENVIRONMENT "WEFT_CONSOLE_INDEX=0")

# Tasks named by their spawn sites, live and replayed, across checkpoints.
weft_add_test(NAME test_console_sites
  SOURCES test_console_sites.c
  LABELS unit valgrind
  TIMEOUT 60)
target_link_libraries(test_console_sites PRIVATE weft_console)

# The replay's side index (issue 21) on traces weft-bench-gentrace
# writes (12 MB each): written, reused, rebuilt when stale, extended when
# grown, corrupt ones ignored, a read-only folder's in the cache.
if(TARGET weft-bench-gentrace)
  add_executable(test_console_side test_console_side.c)
  target_include_directories(test_console_side PRIVATE
    ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/console)
  target_link_libraries(test_console_side PRIVATE weft_console
    PkgConfig::CMOCKA Threads::Threads)
  add_test(NAME test_console_side
    COMMAND test_console_side $<TARGET_FILE:weft-bench-gentrace>)
  set_tests_properties(test_console_side PROPERTIES TIMEOUT 240 LABELS unit)

  # Seeks ahead of the index pass from the trace's checkpoint marks
  # (issue 21): found, restored, matched against the whole replay; a
  # file cut in one, a fake one, none.
  add_executable(test_console_ahead test_console_ahead.c)
  target_include_directories(test_console_ahead PRIVATE
    ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/console)
  target_link_libraries(test_console_ahead PRIVATE weft_console
    PkgConfig::CMOCKA Threads::Threads)
  add_test(NAME test_console_ahead
    COMMAND test_console_ahead $<TARGET_FILE:weft-bench-gentrace>)
  set_tests_properties(test_console_ahead PROPERTIES TIMEOUT 120 LABELS unit)

  # The side index written and read back by the real console under
  # valgrind (--error-exitcode=1): every byte it writes defined (the
  # saved model's padding zeroed).  Runs valgrind itself: not labelled
  # valgrind (that phase runs tests under memcheck).  Skips (77) without,
  # or on a sanitizer's build (the asan phase).
  if(TARGET weft-console)
    add_test(NAME console_index_valgrind
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/console_index_valgrind.sh
              $<TARGET_FILE:weft-bench-gentrace> $<TARGET_FILE:weft-console>)
    set_tests_properties(console_index_valgrind PROPERTIES
      TIMEOUT 180 LABELS unit SKIP_RETURN_CODE 77)

    # --once finishes the index pass: a whole side index left, the
    # same text as with none, the first time and the next, to the end
    # and at six --after points (21 runs; two points, 9 runs, under a
    # sanitizer: 47 s under ASan with six).
    add_test(NAME console_once_index
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/console_once_index.sh
              $<TARGET_FILE:weft-bench-gentrace> $<TARGET_FILE:weft-console>)
    set_tests_properties(console_once_index PROPERTIES
      TIMEOUT 120 LABELS unit)
  endif()
endif()

# The live path over a unix socket: Updates and events read from their
# bytes build the model protobuf-c does; bad ones refused and counted.
weft_add_test(NAME test_console_live
  SOURCES test_console_live.c
  LABELS unit valgrind
  TIMEOUT 60)
target_link_libraries(test_console_live PRIVATE weft_console)

if(TARGET weft-console)
  # What the end-to-end test records: a busy runtime and one task that
  # holds a weft_mutex_t across an await.
  add_executable(console_workload console_workload.c)
  target_link_libraries(console_workload PRIVATE weft Threads::Threads)

  # The real console in tmux (and --once) on a recorded trace; skips
  # (77) where tmux is absent.
  add_test(NAME console_tmux
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/console_tmux.sh
            $<TARGET_FILE:console_workload> $<TARGET_FILE:weft-console>)
  set_tests_properties(console_tmux PROPERTIES
    TIMEOUT 120 LABELS "unit;probe" SKIP_RETURN_CODE 77)

  # --replay on what is not a plain trace: a directory, a FIFO, a device
  # refused in one line; two headers, a cut file, a bad record replayed
  # (no leak under ASan).  No terminal.
  add_test(NAME console_replay_files
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/console_replay_files.sh
            $<TARGET_FILE:console_workload> $<TARGET_FILE:weft-console>)
  set_tests_properties(console_replay_files PROPERTIES
    TIMEOUT 60 LABELS "unit;probe")

  # Live attach: the console on a running process (by pid, unix:PATH,
  # no target), a garbage server, nobody listening.  No terminal.
  add_test(NAME console_live
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/console_live.sh
            $<TARGET_FILE:console_workload> $<TARGET_FILE:weft-console>)
  set_tests_properties(console_live PROPERTIES
    TIMEOUT 180 LABELS "unit;probe")

  # As many workers as the runtime (issue 20): --once, and a 140-row
  # console in tmux where there is one, list all 100 of a 100-worker run.
  add_test(NAME console_workers
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/console_workers.sh
            $<TARGET_FILE:console_workload> $<TARGET_FILE:weft-console>)
  set_tests_properties(console_workers PROPERTIES
    TIMEOUT 60 LABELS "unit;probe")

  # The console over TCP: no token and a wrong one refused, --token-file
  # and WEFT_CONSOLE_TOKEN served (issue 19).
  add_test(NAME console_tcp
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/console_tcp.sh
            $<TARGET_FILE:console_workload> $<TARGET_FILE:weft-console>)
  set_tests_properties(console_tcp PROPERTIES
    TIMEOUT 60 LABELS "unit;probe")

  # --once on 100,000 idle tasks (issue 21): the server streams the full
  # update over several passes, and --once lists every task, not the part
  # come by its fixed wait.
  if(TARGET weft-console-target)
    add_test(NAME console_once_many
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/console_once_many.sh
              $<TARGET_FILE:weft-console-target> $<TARGET_FILE:weft-console>)
    set_tests_properties(console_once_many PROPERTIES
      TIMEOUT 120 LABELS "unit;probe")
  endif()

  # libFuzzer on the model's frame input (bytes -> record decoder ->
  # model -> every view rendered), 10 s, seeded with a recorded trace.
  # Skips (77) without clang's libFuzzer.  Longer runs: tests/fuzz/console.sh.
  add_test(NAME fuzz_console
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/console.sh
            ${CMAKE_CURRENT_BINARY_DIR}/fuzz-console 10
            $<TARGET_FILE:console_workload>)
  set_tests_properties(fuzz_console PROPERTIES
  ENVIRONMENT "WEFT_FUZZ_CORPUS=${CMAKE_BINARY_DIR}/fuzz-corpus"
    TIMEOUT 240 LABELS fuzz SKIP_RETURN_CODE 77)
endif()
