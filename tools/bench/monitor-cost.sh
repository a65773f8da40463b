#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What the runtime monitor costs: weft-bench with WEFT_MONITOR=0 against
# the same binary with the monitor on, and optionally against an older
# weft-bench (the library before the monitor), interleaved round by round.
#
#   tools/bench/monitor-cost.sh [WEFT_BENCH [OLD_WEFT_BENCH]]
#
#   WEFT_BENCH      default: build/release/tools/bench/weft-bench, else
#                   build/test-normal/tools/bench/weft-bench
#   OLD_WEFT_BENCH  optional: a weft-bench built from an older commit (e.g.
#                   git worktree add /tmp/old HEAD~3 && cmake -S /tmp/old
#                   -B /tmp/old/build -DCMAKE_BUILD_TYPE=Release && cmake
#                   --build /tmp/old/build -j2 --target weft-bench)
#
# Knobs: ROUNDS (5), ITERS (20), SHAPES (comma-separated; default the
# scheduler shapes), WORKERS (2), PROBE (set to "events": every variant
# runs with --probe=events, a subscriber draining every event).
#
# Prints, per shape, the median over rounds of each variant's median ns/op
# (timers: p99 lateness in us; record_throughput: ns per recorded event at
# its highest rate) and the ratios on/off (and on/old): > 1 means the first
# is slower.  The
# order of the variants rotates each round.  Progress goes to stderr.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
case "${1:-}" in
-h | --help)
	sed -n '4,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
	exit 0
	;;
esac
bench=${1:-}
if [[ -z $bench ]]; then
	for b in "$root/build/release/tools/bench/weft-bench" \
		"$root/build/test-normal/tools/bench/weft-bench"; do
		[[ -x $b ]] && bench=$b && break
	done
fi
[[ -n $bench && -x $bench ]] || {
	echo "monitor-cost.sh: no weft-bench binary (build one, or pass its path)" >&2
	exit 2
}
old=${2:-}
[[ -z $old || -x $old ]] || {
	echo "monitor-cost.sh: $old is not an executable" >&2
	exit 2
}
ROUNDS=${ROUNDS:-5}
ITERS=${ITERS:-20}
WORKERS=${WORKERS:-2}
probe=()
[[ -n ${PROBE:-} ]] && probe=(--probe="$PROBE")
SHAPES=${SHAPES:-spawn_many_local,spawn_many_remote,yield_many,ping_pong,chained_spawn,channel_throughput,timers_1k}
log=$(mktemp /tmp/weft-monitor-cost.XXXXXX)

variants=(off on)
[[ -n $old ]] && variants+=(old)

run_variant()
{
	local v=$1 shape=$2
	case $v in
	off) WEFT_MONITOR=0 "$bench" --shapes "$shape" --iters "$ITERS" --workers "$WORKERS" "${probe[@]}" ;;
	on) WEFT_MONITOR=1 "$bench" --shapes "$shape" --iters "$ITERS" --workers "$WORKERS" "${probe[@]}" ;;
	old) "$old" --shapes "$shape" --iters "$ITERS" --workers "$WORKERS" "${probe[@]}" ;;
	esac | awk -v v="$v" '
	# Each shape by the figure it reports: ns per op; for the timers,
	# the p99 lateness (their wall time is the sleeps); for
	# record_throughput, ns per recorded event at the highest rate.
	function f(k,   i) {
		for (i = 1; i <= NF; i++)
			if (index($i, k "=") == 1)
				return substr($i, length(k) + 2)
		return ""
	}
	{ shape = f("shape") }
	f("median_ns_per_op") != "" { print v, shape, f("median_ns_per_op"); next }
	f("lateness_us_p99") != "" { print v, shape ":late_p99_us", f("lateness_us_p99"); next }
	f("recorded_eps") > 0 { last = 1e9 / f("recorded_eps") }
	END { if (last) print v, "record_throughput:ns_per_event", last }'
}

IFS=, read -r -a shapes <<<"$SHAPES"
for ((r = 0; r < ROUNDS; r++)); do
	for shape in "${shapes[@]}"; do
		echo "round $((r + 1))/$ROUNDS: $shape" >&2
		n=${#variants[@]}
		for ((i = 0; i < n; i++)); do
			v=${variants[$(((i + r) % n))]}
			run_variant "$v" "$shape" >>"$log"
		done
	done
done

python3 - "$log" "${variants[@]}" <<'EOF'
import statistics, sys
log, variants = sys.argv[1], sys.argv[2:]
data = {}
for line in open(log):
    v, shape, ns = line.split()
    data.setdefault(shape, {}).setdefault(v, []).append(float(ns))
head = f"{'shape':32}" + "".join(f"{v + ' ns/op':>14}" for v in variants) + f"{'on/off':>10}"
if 'old' in variants:
    head += f"{'on/old':>10}"
print(head)
for shape, by in data.items():
    med = {v: statistics.median(by[v]) for v in variants if v in by}
    row = f"{shape:32}" + "".join(f"{med.get(v, float('nan')):14.1f}" for v in variants)
    row += f"{med['on'] / med['off']:10.3f}"
    if 'old' in med:
        row += f"{med['on'] / med['old']:10.3f}"
    print(row)
EOF
echo "raw: $log" >&2
