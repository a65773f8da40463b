#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/trace_folds.sh TEST_TRACE_FILE WEFT_TRACE
#
# Folded warnings reach a trace whole when the process ends inside the
# fold's second (burst.c of an outside tester, RUN_MS=0): 20 handlers of
# one spawn site each block a 15 ms poll, then the process exits and the
# recorder stops (WEFT_TRACE=path, at exit).  The trace holds five
# long-poll rows and one saying the other fifteen, and weft-trace stats
# and info count the 20 long polls, with the rows in brackets.  The
# fifteen were lost (the fold said only once its window closed in a
# later pass), and stats counted rows ("long-poll 5").
set -euo pipefail

workload=$1 tool=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-trace-folds.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trace=$tmp/burst.weft

fail()
{
	echo "trace_folds: FAIL: $*" >&2
	[[ -f "$tmp/stats" ]] && cat "$tmp/stats" >&2
	exit 1
}

WEFT_TRACE=$trace "$workload" --burst 20
[[ -s "$trace" ]] || fail "WEFT_TRACE wrote nothing"
"$tool" stats --top 100 "$trace" >"$tmp/stats" || fail "weft-trace stats"
"$tool" info "$trace" >"$tmp/info" || fail "weft-trace info"

# Under a loaded host the OS may take part of a poll (then PREEMPTED,
# not the task's); a 15 ms usleep() is asleep, not waiting for a CPU.
n=$(sed -n 's/^  long-poll  *\([0-9]*\).*/\1/p' "$tmp/stats")
[[ "$n" == 20 ]] || fail "long-poll counted '$n', want 20"
grep -Eq '^  long-poll +20 \(6 rows\)$' "$tmp/stats" ||
	fail "no '  long-poll 20 (6 rows)'"
grep -Eq '^  long-poll +task [0-9]+ .*15 more from tasks spawned at test_trace_file\.c:[0-9]+.*\(folded\)' \
	"$tmp/stats" || fail "no row saying the 15 folded long polls"
total=$(sed -n 's/^warnings: *\([0-9]*\).*/\1/p' "$tmp/stats")
[[ -n "$total" && "$total" -ge 20 ]] ||
	fail "warnings '$total', want 20 or more"
grep -Eq "^warnings: +$total \\([0-9]+ rows\\)$" "$tmp/info" ||
	{ cat "$tmp/info" >&2; fail "info does not count $total warnings"; }
echo "trace_folds: PASS"
