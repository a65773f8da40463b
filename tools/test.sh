#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tools/test.sh [--quick | --phase PHASE]
#
# The full test suite (the README's test command, and what CI runs).  Runs
# tools/setup.sh, then these phases in order, each in its own build
# directory under build/, stopping at the first failure:
#
#   normal    build/test-normal, RelWithDebInfo, -Werror: every test
#             (ctest -j4 within tests/cpus.json's CPU shares), the
#             install_out_of_tree test included
#   tsan      build/test-tsan, ThreadSanitizer: tests labelled concurrency
#   asan      build/test-asan, ASan + UBSan: every test not labelled tsan-only,
#             big (a 200 MB trace read under ASan takes minutes) or fuzz
#             (the fuzz targets are built by clang with ASan and UBSan
#             whatever the phase: the normal phase runs the same runs)
#   valgrind  build/test-normal again, tests labelled valgrind run under
#             valgrind memcheck (ctest -T memcheck)
#   probe-off build/test-probe-off, Release (as tools/run.sh builds),
#             -Werror, WEFT_PROBE=OFF: the unit tests with every probe
#             site compiled out; built with WEFT_URING=OFF too, as on a
#             machine without liburing (io_uring.c has no probe site, so
#             the other phases cover it, and this one the build without)
#
# The I/O backend: the normal, tsan and asan phases run their tests with
# WEFT_IO=epoll, then the tests labelled net again, in the same build,
# with WEFT_IO=uring (skipped, saying why in one line, where the kernel
# refuses io_uring); valgrind runs epoll only (it stops every thread while
# one waits in io_uring_enter); probe-off runs with the runtime's own
# choice (WEFT_IO unset: epoll for now, runtime/src/io_backend.c).
#
#   --quick         the normal phase only
#   --phase PHASE   one phase: normal, tsan, asan, valgrind, probe-off, or install
#                   (tools/install-test.sh on build/test-normal; the full
#                   run covers it through the normal phase's ctest)
#
# A phase that selects no test fails (ctest --no-tests=error): a label that
# nobody uses any more must not turn a phase silently green.  Warnings are
# errors in the normal build only; gcc's sanitizer instrumentation can raise
# warnings of its own that say nothing about the code.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

JOBS=2
# ctest runs up to twice as many tests as CPUs, within the CPU shares of
# tests/cpus.json (tests/CMakeLists.txt): 2 slots a test, 1 for a light
# one that mostly waits; 4 in all.
SLOTS=$((2 * JOBS))

export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

# Valgrind for the valgrind phase.  Only definite leaks are errors: a
# worker's thread-local caches may still be reachable at exit.
VALGRIND_OPTIONS="--error-exitcode=1 --leak-check=full \
--errors-for-leak-kinds=definite --show-leak-kinds=definite --num-callers=30"

usage()
{
	sed -n '4,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

phases=(normal tsan asan valgrind probe-off)
case "${1:-}" in
"") ;;
--quick) phases=(normal) ;;
--phase)
	case "${2:-}" in
	normal | tsan | asan | valgrind | probe-off | install) phases=("$2") ;;
	*)
		echo "tools/test.sh: --phase takes normal, tsan, asan, valgrind, probe-off or install" >&2
		exit 2
		;;
	esac
	shift
	;;
-h | --help)
	usage
	exit 0
	;;
*)
	usage >&2
	exit 2
	;;
esac
if (($# > 1)); then
	usage >&2
	exit 2
fi

start=$SECONDS
phase_start=$SECONDS
current=""

banner()
{
	printf '\n==== %s ====\n\n' "$*"
}

begin()
{
	current=$1
	phase_start=$SECONDS
	banner "phase $1: $2"
}

end()
{
	banner "phase $current passed in $((SECONDS - phase_start)) s"
	current=""
}

on_exit()
{
	local rc=$?

	if ((rc != 0)) && [[ -n "$current" ]]; then
		banner "phase $current FAILED after $((SECONDS - phase_start)) s (exit $rc)"
	fi
}
trap on_exit EXIT

# configure_and_build DIR CMAKE_ARGS...
configure_and_build()
{
	local dir=$1
	shift

	# Ninja where it is (tools/setup.sh installs it); a folder made by
	# another generator is made again (cmake refuses to switch).
	local gen="Unix Makefiles"
	command -v ninja >/dev/null 2>&1 && gen=Ninja
	if [[ -f "$dir/CMakeCache.txt" ]] &&
		! grep -qx "CMAKE_GENERATOR:INTERNAL=$gen" "$dir/CMakeCache.txt"; then
		rm -rf "$dir"
	fi
	cmake -G "$gen" -S "$root" -B "$dir" "$@"
	cmake --build "$dir" -j "$JOBS"
}

run_ctest()
{
	local dir=$1
	shift

	ctest --test-dir "$dir" --output-on-failure --no-tests=error \
		-j "$SLOTS" --resource-spec-file "$root/$dir/tests/cpus.json" "$@"
}

# run_net_uring DIR CTEST_ARGS...: the net tests again on io_uring, or one
# line saying why not (test_io_backend --uring-available asks the kernel).
run_net_uring()
{
	local dir=$1 why
	shift

	if ! why=$("$dir/tests/test_io_backend" --uring-available); then
		echo "tools/test.sh: io_uring repeat skipped: $why"
		return 0
	fi
	banner "phase $current: tests labelled net again, WEFT_IO=uring"
	# WEFT_TEST_NET_REPEAT: a test file that mixes tests of the driver
	# with others (test_resources) runs only the driver's.
	WEFT_IO=uring WEFT_TEST_NET_REPEAT=1 run_ctest "$dir" -L net "$@"
}

# The sanitizer builds with line tables only (-g1): what their reports
# print, at three quarters of -g's build time.
SAN_FLAGS=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")

build_normal()
{
	configure_and_build build/test-normal -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DWEFT_WERROR=ON -DWEFT_SANITIZE=
}

phase_normal()
{
	begin normal "RelWithDebInfo, -Werror, every test (build/test-normal)"
	build_normal
	WEFT_IO=epoll run_ctest build/test-normal
	run_net_uring build/test-normal
	end
}

phase_tsan()
{
	begin tsan "ThreadSanitizer, tests labelled concurrency (build/test-tsan)"
	configure_and_build build/test-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DWEFT_WERROR=OFF -DWEFT_SANITIZE=thread "${SAN_FLAGS[@]}"
	WEFT_IO=epoll run_ctest build/test-tsan -L concurrency
	run_net_uring build/test-tsan -L concurrency
	end
}

phase_asan()
{
	begin asan "ASan + UBSan, tests not labelled tsan-only, big or fuzz (build/test-asan)"
	configure_and_build build/test-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DWEFT_WERROR=OFF -DWEFT_SANITIZE=address "${SAN_FLAGS[@]}"
	WEFT_IO=epoll run_ctest build/test-asan -LE 'tsan-only|big|fuzz'
	run_net_uring build/test-asan -LE 'tsan-only|big|fuzz'
	end
}

# Prints the valgrind log of each test that valgrind found errors in
# (ctest -T memcheck keeps them apart from the test's own output).
show_memcheck_errors()
{
	local log

	for log in build/test-normal/Testing/Temporary/MemoryChecker.*.log; do
		[[ -f "$log" ]] || continue
		if grep -qE 'ERROR SUMMARY: [1-9]|definitely lost: [1-9]' "$log"; then
			banner "valgrind: $log"
			cat "$log"
		fi
	done
}

phase_valgrind()
{
	local dart=build/test-normal/DartConfiguration.tcl

	begin valgrind "valgrind memcheck, tests labelled valgrind (build/test-normal)"
	build_normal
	# ctest -T memcheck reads its settings from DartConfiguration.tcl,
	# which only include(CTest) writes; the project does not use CDash,
	# so give ctest an empty one and the settings on the command line.
	[[ -f "$dart" ]] || printf 'MemoryCheckType: Valgrind\n' >"$dart"
	rm -f build/test-normal/Testing/Temporary/MemoryChecker.*.log
	# Task memory recycling would hide a use after free from valgrind.
	if ! WEFT_IO=epoll WEFT_TASK_CACHE=0 run_ctest build/test-normal -L valgrind -T memcheck \
		--overwrite MemoryCheckCommand="$(command -v valgrind)" \
		--overwrite MemoryCheckCommandOptions="$VALGRIND_OPTIONS"; then
		show_memcheck_errors
		return 1
	fi
	end
}

phase_probe_off()
{
	begin probe-off "WEFT_PROBE=OFF and WEFT_URING=OFF: every probe site compiled out, no io_uring, unit tests (build/test-probe-off, Release)"
	# Release, tools included: the README's main command (tools/run.sh)
	# builds Release, where -O3's inlining raises warnings -O2 does not.
	configure_and_build build/test-probe-off -DCMAKE_BUILD_TYPE=Release \
		-DWEFT_WERROR=ON -DWEFT_PROBE=OFF -DWEFT_URING=OFF \
		-DWEFT_BUILD_TOOLS=ON
	run_ctest build/test-probe-off -L unit -LE probe
	end
}

phase_install()
{
	begin install "install and use out of tree (tools/install-test.sh)"
	build_normal
	"$root/tools/install-test.sh" build/test-normal
	end
}

banner "setup (tools/setup.sh)"
bash "$root/tools/setup.sh"

for phase in "${phases[@]}"; do
	"phase_${phase//-/_}"
done

banner "all phases passed (${phases[*]}) in $((SECONDS - start)) s"
