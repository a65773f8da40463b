#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Instructions per op on the worker thread alone, under callgrind with one
# worker and --separate-threads: what the probe costs the runtime, apart
# from the collector's own thread.
#
#   tools/bench/worker-instr.sh BENCH SHAPE [counters|events]
#
# BENCH is a weft-bench binary (build two trees and run this on each to
# compare).  Per op = (worker instructions with 3 timed iterations - with
# 1) / (2 x ops per iteration).  With events on, the collector lags under
# callgrind and a full ring sends every push down its slow path, which no
# real run takes: the ring is made large enough for the whole run
# (WEFT_PROBE_RING, 2^23 events, 256 MiB) unless the caller sets it.
set -euo pipefail

case "${1:-}" in
-h | --help | "")
	sed -n '3,15p' "$0" | sed 's/^# \{0,1\}//'
	[[ -n "${1:-}" ]] && exit 0
	exit 2
	;;
esac
(($# >= 2)) || { echo "worker-instr: BENCH and SHAPE are needed" >&2; exit 2; }
bench=$1 shape=$2 mode=${3:-counters}
[[ -x "$bench" ]] || { echo "worker-instr: $bench is not an executable" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "worker-instr: valgrind not found" >&2; exit 2; }
export WEFT_PROBE_RING=${WEFT_PROBE_RING:-8388608}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# worker ITERS -> the worker thread's instructions (ops per iter in $tmp/ops)
worker()
{
	local f total=0

	echo "worker-instr: $shape ($mode), $1 iterations" >&2
	valgrind --tool=callgrind --separate-threads=yes \
		--callgrind-out-file="$tmp/cg.$1" "$bench" --shapes "$shape" \
		--iters "$1" --warmup 0 --workers 1 --probe="$mode" \
		>"$tmp/line" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
	sed -n 's/.*ops_per_iter=\([0-9]*\).*/\1/p' "$tmp/line" >"$tmp/ops"
	for f in "$tmp/cg.$1"-*; do
		# The worker's thread is the one that runs tasks.
		callgrind_annotate "$f" 2>/dev/null | grep -q 'weft__task_run' ||
			continue
		total=$((total + $(sed -n 's/^summary: //p' "$f")))
	done
	echo "$total"
}

a=$(worker 1)
c=$(worker 3)
awk -v s="$shape" -v m="$mode" -v a="$a" -v c="$c" -v o="$(cat "$tmp/ops")" \
	'BEGIN { printf "%s %s: %.1f worker instructions an op\n", s, m, (c - a) / (2 * o) }'
