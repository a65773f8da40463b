#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What the probe costs: every weft-bench shape in three modes, interleaved
# in one session, with the ratios.
#
#   tools/bench/probe-modes.sh [SHAPES]
#
#   compiled-out  a build with -DWEFT_PROBE=OFF (build/bench-probe-off)
#   counters      the normal build, nobody listening (the default in
#                 production: counters on, polls without a probe site,
#                 each other event site a compare and a branch)
#   events        the normal build with --probe=events: a subscriber drains
#                 every event through the collector
#   events-niced  the same with WEFT_COLLECTOR_NICE=19: the collector gets
#                 the CPU the workers leave, and drops what it cannot take
#
# Knobs (environment): ROUNDS (3), ITERS (20), WARMUP (3).  Builds both
# variants (Release) under build/ first, with progress on stderr.
#
# The table: per shape, the median over rounds of each mode's median ns/op,
# and counters/compiled-out and events/compiled-out as ratios (1.00 = the
# same; 1.05 = 5% slower).  A second table: the share of events the
# collector took (the rest dropped by full rings) and its CPU time an
# event, in situ.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
ROUNDS="${ROUNDS:-3}"
ITERS="${ITERS:-20}"
WARMUP="${WARMUP:-3}"
SHAPES="${1:-spawn_many_local,spawn_many_remote,yield_many,ping_pong,chained_spawn}"

case "${1:-}" in
-h | --help)
	sed -n '3,25p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
esac

say() { printf 'probe-modes: %s\n' "$*" >&2; }

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
ON="$REPO/build/bench-probe-on/tools/bench/weft-bench"
OFF="$REPO/build/bench-probe-off/tools/bench/weft-bench"

log=$(mktemp)
elog=$(mktemp)
err=$(mktemp)
trap 'rm -f "$log" "$elog" "$err"' EXIT
for ((r = 1; r <= ROUNDS; r++)); do
	for shape in ${SHAPES//,/ }; do
		say "round $r/$ROUNDS: $shape"
		"$OFF" --shapes "$shape" --iters "$ITERS" --warmup "$WARMUP" >>"$log"
		"$ON" --shapes "$shape" --iters "$ITERS" --warmup "$WARMUP" >>"$log"
		"$ON" --shapes "$shape" --iters "$ITERS" --warmup "$WARMUP" \
			--probe=events >>"$log" 2>"$err"
		sed "s/^/shape=$shape mode=events /" "$err" >>"$elog"
		WEFT_COLLECTOR_NICE=19 "$ON" --shapes "$shape" \
			--iters "$ITERS" --warmup "$WARMUP" --probe=events \
			2>"$err" | sed 's/probe=events/probe=events-niced/' \
			>>"$log"
		sed "s/^/shape=$shape mode=niced /" "$err" >>"$elog"
	done
done

awk '
	{
		shape = ""; med = ""; mode = ""
		for (i = 1; i <= NF; i++) {
			split($i, kv, "=")
			if (kv[1] == "shape") shape = kv[2]
			if (kv[1] == "median_ns_per_op") med = kv[2]
			if (kv[1] == "probe") mode = kv[2]
		}
		if (shape == "" || mode == "") next
		k = shape SUBSEP mode
		n[k]++; v[k, n[k]] = med
		if (!(shape in seen)) { seen[shape] = 1; order[++ns] = shape }
	}
	function median(k,    m, i, j, t, a) {
		m = n[k]
		for (i = 1; i <= m; i++) a[i] = v[k, i]
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
			if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
	}
	END {
		printf "| shape | compiled-out ns/op | counters ns/op | events ns/op | niced ns/op | counters/off | events/off | niced/off |\n"
		printf "|---|---:|---:|---:|---:|---:|---:|---:|\n"
		for (s = 1; s <= ns; s++) {
			sh = order[s]
			off = median(sh SUBSEP "compiled-out")
			cnt = median(sh SUBSEP "counters")
			ev = median(sh SUBSEP "events")
			ni = median(sh SUBSEP "events-niced")
			printf "| %s | %.1f | %.1f | %.1f | %.1f | %.3f | %.3f | %.3f |\n", sh, off, cnt, ev, ni, cnt / off, ev / off, ni / off
		}
	}' "$log"

# The collector's side of the events runs: what share of the events it
# took (the rest dropped by full rings) and its CPU time an event taken,
# medians over rounds.
echo
awk '
	/probe drained/ {
		shape = ""; mode = ""
		for (i = 1; i <= NF; i++) {
			split($i, kv, "=")
			if (kv[1] == "shape") shape = kv[2]
			if (kv[1] == "mode") mode = kv[2]
			if ($i == "drained") got = $(i + 1)
			if ($i == "dropped") { d = $(i + 1); sub(";", "", d) }
			if ($i == "an" && $(i + 1) == "event") nspe = $(i - 2)
		}
		k = shape SUBSEP mode
		n[k]++
		kept[k, n[k]] = got + d > 0 ? got / (got + d) : 1
		ns[k, n[k]] = nspe
		if (!(shape in seen)) { seen[shape] = 1; order[++nsh] = shape }
	}
	function med(a, k,    m, i, j, t, b) {
		m = n[k]
		for (i = 1; i <= m; i++) b[i] = a[k, i]
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
			if (b[j] < b[i]) { t = b[i]; b[i] = b[j]; b[j] = t }
		return m % 2 ? b[(m + 1) / 2] : (b[m / 2] + b[m / 2 + 1]) / 2
	}
	END {
		if (!nsh) exit
		printf "| shape | events taken | collector ns/event | niced: taken | niced: ns/event |\n"
		printf "|---|---:|---:|---:|---:|\n"
		for (s = 1; s <= nsh; s++) {
			sh = order[s]
			e = sh SUBSEP "events"; z = sh SUBSEP "niced"
			printf "| %s | %.1f%% | %.1f | %.1f%% | %.1f |\n", sh,
			    100 * med(kept, e), med(ns, e), 100 * med(kept, z),
			    med(ns, z)
		}
	}' "$elog"
