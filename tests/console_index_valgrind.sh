#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/console_index_valgrind.sh WEFT_BENCH_GENTRACE WEFT_CONSOLE
#
# The replay's side index written and read back under valgrind memcheck
# (--error-exitcode=1): a 12 MB trace weft-bench-gentrace writes (with
# warnings), replayed by the real console with --seek-bench (the index
# pass to the end: its records, checkpoints of the model saved whole
# with con_model_save(), renamed whole; then seeks that restore them),
# twice (the second reads the index).  Every byte the index file gets
# must be defined: uninitialised padding in the structures saved as they
# are in memory is a "pwrite64(buf) points to uninitialised byte(s)"
# error here.  Skips (77) without valgrind, or on a sanitizer's build.
set -euo pipefail

gentrace=$1 console=$2
command -v valgrind >/dev/null 2>&1 || {
	echo "console_index_valgrind: valgrind not found: skipped"
	exit 77
}
# A sanitizer's build (the suite's asan phase) does not run under
# valgrind: its runtime must come first.  That phase checks the same
# bytes its own way; this test is the normal build's.
if grep -qa -e __asan_init -e __tsan_init -e __msan_init "$console"; then
	echo "console_index_valgrind: a sanitizer's build: skipped"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-console-vg.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset WEFT_CONSOLE_INDEX

fail()
{
	echo "console_index_valgrind: FAIL: $*" >&2
	exit 1
}

"$gentrace" "$tmp/t.weft" --bytes 12M --seed 7 --quiet >/dev/null
for pass in write read; do
	if ! valgrind -q --error-exitcode=1 --track-origins=yes \
		"$console" --replay "$tmp/t.weft" --seek-bench \
		>"$tmp/out" 2>"$tmp/vg"; then
		cat "$tmp/vg" >&2
		fail "valgrind errors ($pass)"
	fi
	[ -s "$tmp/t.weft.weftidx" ] || fail "no whole index after the $pass pass"
	[ ! -e "$tmp/t.weft.weftidx.part" ] || fail "a part left ($pass)"
done
echo "console_index_valgrind: ok"
