#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What an unlistened probe costs, in instructions: each shape run under
# valgrind's callgrind with one worker, in a WEFT_PROBE=OFF build and in
# the normal build with nobody listening (counters only).  Instruction
# counts do not depend on what else the machine is doing, so the ratio is
# repeatable on a shared box where wall-clock ratios of 1% are noise.
#
#   tools/bench/probe-instr.sh [SHAPES]
#
# Per op = (instructions with 3 timed iterations - with 1) / (2 iterations
# x ops per iteration): start-up and tear-down cancel out.  Builds both
# variants (Release) under build/ first, with progress on stderr (the
# same build directories as probe-modes.sh).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
SHAPES="${1:-yield_many,spawn_many_local,chained_spawn,ping_pong,channel_throughput}"

case "${1:-}" in
-h | --help)
	sed -n '3,15p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
esac

say() { printf 'probe-instr: %s\n' "$*" >&2; }
command -v valgrind >/dev/null || { echo "probe-instr: valgrind not found" >&2; exit 2; }

build()
{
	local dir=$1
	shift
	say "building $dir"
	cmake -S "$REPO" -B "$REPO/$dir" -DCMAKE_BUILD_TYPE=Release \
		-DWEFT_BUILD_TESTS=OFF "$@" >/dev/null
	cmake --build "$REPO/$dir" -j2 --target weft-bench >/dev/null
}

build build/bench-probe-on -DWEFT_PROBE=ON
build build/bench-probe-off -DWEFT_PROBE=OFF

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# instructions BUILD SHAPE ITERS -> total instructions (and ops per iter
# in $tmp/ops)
instructions()
{
	local out="$tmp/cg.out"

	valgrind --tool=callgrind --callgrind-out-file="$out" \
		"$REPO/$1/tools/bench/weft-bench" --shapes "$2" \
		--iters "$3" --warmup 0 --workers 1 >"$tmp/line" 2>"$tmp/err" ||
		{ cat "$tmp/err" >&2; exit 1; }
	sed -n 's/.*ops_per_iter=\([0-9]*\).*/\1/p' "$tmp/line" >"$tmp/ops"
	sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$tmp/err"
}

printf '%-20s %14s %14s %8s %6s\n' shape compiled-out counters "+instr" ratio
IFS=, read -ra list <<<"$SHAPES"
for s in "${list[@]}"; do
	declare -A per=()
	for b in off on; do
		say "$s ($b)"
		a=$(instructions "build/bench-probe-$b" "$s" 1)
		c=$(instructions "build/bench-probe-$b" "$s" 3)
		ops=$(cat "$tmp/ops")
		per[$b]=$(awk -v a="$a" -v c="$c" -v o="$ops" \
			'BEGIN { printf "%.1f", (c - a) / (2 * o) }')
	done
	awk -v s="$s" -v off="${per[off]}" -v on="${per[on]}" 'BEGIN {
		printf "%-20s %14.1f %14.1f %8.1f %6.3f\n", s, off, on,
			on - off, on / off }'
	unset per
done
