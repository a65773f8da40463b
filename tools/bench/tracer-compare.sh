#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# weft's probe against Go's execution tracer, on the same shapes, on the
# same machine, interleaved in one session: what turning full tracing on
# costs each runtime, as a ratio to the same runtime with it off.
#
#   tools/bench/tracer-compare.sh [SHAPES]
#
#   weft off     weft-bench, the probe built in, nobody listening
#   weft events  weft-bench --probe=events (the collector takes every event)
#   go off       the anchors' go-bench (Go 1.19, 2 Ps)
#   go trace     the same with runtime/trace started for the whole run,
#                writing to /dev/null (the tracer still encodes and
#                flushes every event; only the disk is left out, as
#                weft's events go to a subscriber that only counts them)
#
# The anchors are read-only: go-bench is copied to a temporary directory,
# patched there to start the tracer when GO_TRACE_FILE is set, and built
# offline.  Knobs (environment): ROUNDS (3), ITERS (20), ANCHORS (the
# anchors' directory, default ../shared/anchors beside the checkout).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
ROUNDS="${ROUNDS:-3}"
ITERS="${ITERS:-20}"
ANCHORS="${ANCHORS:-$REPO/../shared/anchors}"
SHAPES="${1:-yield_many,ping_pong,chained_spawn,spawn_many_local}"

case "${1:-}" in
-h | --help)
	sed -n '3,20p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
esac

say() { printf 'tracer-compare: %s\n' "$*" >&2; }
die() { printf 'tracer-compare: %s\n' "$*" >&2; exit 1; }

[ -d "$ANCHORS/go-bench" ] || die "no go-bench under $ANCHORS (set ANCHORS)"
command -v go >/dev/null || die "go not found (the anchors' README says how they are built)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

say "building weft-bench (build/bench-probe-on)"
cmake -S "$REPO" -B "$REPO/build/bench-probe-on" -DCMAKE_BUILD_TYPE=Release \
	-DWEFT_BUILD_TESTS=OFF -DWEFT_PROBE=ON >/dev/null
cmake --build "$REPO/build/bench-probe-on" -j2 --target weft-bench >/dev/null
WEFT="$REPO/build/bench-probe-on/tools/bench/weft-bench"

say "building go-bench with the tracer switch (in $tmp)"
cp -r "$ANCHORS/go-bench" "$tmp/go-bench"
main="$tmp/go-bench/main.go"
grep -q '^import (' "$main" || die "go-bench's main.go has no import block"
grep -q 'micro(os.Args\[2:\])' "$main" || die "go-bench's main.go has no micro call"
sed -i 's|^import (|import (\n\t"runtime/trace"|' "$main"
sed -i 's|^\t\tmicro(os.Args\[2:\])$|\t\tif p := os.Getenv("GO_TRACE_FILE"); p != "" {\n\t\t\tf, err := os.Create(p)\n\t\t\tif err != nil {\n\t\t\t\tfail("trace: %v", err)\n\t\t\t}\n\t\t\tif err := trace.Start(f); err != nil {\n\t\t\t\tfail("trace: %v", err)\n\t\t\t}\n\t\t\tdefer f.Close()\n\t\t\tdefer trace.Stop()\n\t\t}\n\t\tmicro(os.Args[2:])|' "$main"
(cd "$tmp/go-bench" && GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" GOPROXY=off \
	GOFLAGS= GO111MODULE=on go build -o "$tmp/go-bench-bin" .) ||
	die "go build failed"
GO="$tmp/go-bench-bin"

# ns_per_op LINE -> the median_ns_per_op field
ns_per_op() { sed -n 's/.*median_ns_per_op=\([0-9.]*\).*/\1/p' | head -1; }

log="$tmp/log"
: >"$log"
IFS=, read -r -a shapes <<<"$SHAPES"
for r in $(seq 1 "$ROUNDS"); do
	for s in "${shapes[@]}"; do
		say "round $r/$ROUNDS: $s"
		a=$("$WEFT" --shapes "$s" --iters "$ITERS" | ns_per_op)
		b=$("$WEFT" --shapes "$s" --iters "$ITERS" --probe=events 2>/dev/null | ns_per_op)
		c=$("$GO" micro -shapes "$s" -iters "$ITERS" | ns_per_op)
		d=$(GO_TRACE_FILE=/dev/null "$GO" micro -shapes "$s" -iters "$ITERS" | ns_per_op)
		[ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] && [ -n "$d" ] ||
			die "$s: a run printed no median_ns_per_op"
		echo "$s $a $b $c $d" >>"$log"
	done
done

# Medians over rounds of each column, and the two ratios.
printf '| shape | weft off | weft events | weft events/off | go off | go trace | go trace/off |\n'
printf '|---|---:|---:|---:|---:|---:|---:|\n'
for s in "${shapes[@]}"; do
	awk -v s="$s" '
	function med(col,   n, i, j, t, v) {
		n = 0
		for (i = 1; i <= NR_S; i++) v[++n] = row[i, col]
		for (i = 1; i <= n; i++)
			for (j = i + 1; j <= n; j++)
				if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
	}
	$1 == s { NR_S++; for (k = 2; k <= 5; k++) row[NR_S, k] = $k }
	END {
		a = med(2); b = med(3); c = med(4); d = med(5)
		printf "| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |\n",
			s, a, b, b / a, c, d, d / c
	}' "$log"
done
