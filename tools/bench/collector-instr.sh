#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Instructions per event on the collector's thread alone, under callgrind
# with one worker, --probe=events and a recorder (WEFT_TRACE): what the
# collector pays for each event it takes (the pass, the records, the
# recorder's encoding and writing, which run on its thread).
#
#   tools/bench/collector-instr.sh BENCH [SHAPE...]
#
# BENCH is a weft-bench binary (build two trees and run this on each to
# compare); SHAPE defaults to yield_many and spawn_many_local.  Per event
# = (collector instructions with 3 timed iterations - with 1) / (events
# drained with 3 - with 1): start-up and tear-down cancel out.  Under
# callgrind the collector lags; the ring is made large enough that
# nothing is dropped (WEFT_PROBE_RING, 2^23 events) unless the caller
# sets it.  RECORD=0 runs without the recorder.
set -euo pipefail

case "${1:-}" in
-h | --help | "")
	sed -n '3,17p' "$0" | sed 's/^# \{0,1\}//'
	[[ -n "${1:-}" ]] && exit 0
	exit 2
	;;
esac
bench=$1
shift
shapes=("$@")
((${#shapes[@]})) || shapes=(yield_many spawn_many_local)
[[ -x "$bench" ]] || { echo "collector-instr: $bench is not an executable" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "collector-instr: valgrind not found" >&2; exit 2; }
export WEFT_PROBE_RING=${WEFT_PROBE_RING:-8388608}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# collector SHAPE ITERS -> "instructions events" of the collector thread
collector()
{
	local f total=0 ev

	echo "collector-instr: $1, $2 iterations" >&2
	if [[ ${RECORD:-1} != 0 ]]; then
		export WEFT_TRACE="$tmp/run.weft"
	else
		unset WEFT_TRACE
	fi
	valgrind --tool=callgrind --separate-threads=yes \
		--callgrind-out-file="$tmp/cg.$2" "$bench" --shapes "$1" \
		--iters "$2" --warmup 0 --workers 1 --probe=events \
		>"$tmp/line" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
	ev=$(sed -n 's/.*probe drained \([0-9]*\) events.*/\1/p' "$tmp/err")
	for f in "$tmp/cg.$2"-*; do
		# The collector's thread is the one that makes passes.
		grep -q 'collector_main' "$f" || continue
		total=$((total + $(sed -n 's/^summary: //p' "$f")))
	done
	rm -f "$tmp/cg.$2"-* "$tmp/run.weft"*
	echo "$total ${ev:-0}"
}

for s in "${shapes[@]}"; do
	read -r a ea < <(collector "$s" 1)
	read -r c ec < <(collector "$s" 3)
	awk -v s="$s" -v a="$a" -v c="$c" -v ea="$ea" -v ec="$ec" 'BEGIN {
		printf "%s: %.1f collector instructions an event (%d events in 2 iterations)\n",
			s, (ec > ea ? (c - a) / (ec - ea) : 0), ec - ea }'
done
