#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/knobs.sh WEFT_BENCH
#
# Every WEFT_* knob with a bad value, in a real process (weft-bench, one
# short yield_many run with a subscriber draining events and WEFT_TRACE
# recording, so the runtime, the monitor, the collector, the console's
# server and the recorder all read their knobs): each prints its one line
# on stderr, "weft: NAME=VALUE: ...; using ...", and the run still
# succeeds.  Then the same run with good values prints none.
set -euo pipefail

bench=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-knobs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail()
{
	echo "knobs.sh: $*" >&2
	exit 1
}

# NAME=BAD pairs: garbage, a suffix it does not take, out of range.
bad=(
	WEFT_PROBE_RING=16
	WEFT_LONG_POLL=10ms5
	WEFT_SCHED_DELAY=0
	WEFT_CONTENTION=5x
	WEFT_PROBE_INTERVAL=2h
	WEFT_COLLECTOR_NICE=40
	WEFT_PROBE_RING_FLUSH=maybe
	WEFT_PROBE_CLOCK=rdtsc
	WEFT_MONITOR=sometimes
	WEFT_STALL_US=5
	WEFT_TASK_CACHE=2
	WEFT_CONSOLE=of
	WEFT_TRACE_MAX_MB=-3
	WEFT_TRACE_FLIGHT_S=1w
	WEFT_TRACE_CHECKPOINT_MB=lots
	WEFT_WAKE_BURST=0
	WEFT_TASK_LEAK_WINDOW=5us
	WEFT_IO=kqueue
	WEFT_PROBE_RETAIN=lots
)

run()
{
	env XDG_RUNTIME_DIR="$tmp" WEFT_TRACE="$tmp/t.weft" "$@" "$bench" \
		--shapes yield_many --iters 1 --warmup 0 --probe=events \
		>"$tmp/out" 2>"$tmp/err" ||
		{
			cat "$tmp/err" >&2
			fail "weft-bench failed with $*"
		}
}

run "${bad[@]}"
for kv in "${bad[@]}"; do
	grep -qF "weft: $kv: " "$tmp/err" || {
		cat "$tmp/err" >&2
		fail "no line for $kv"
	}
	grep -F "weft: $kv: " "$tmp/err" | grep -q '; using ' ||
		fail "the line for $kv does not say the value used"
done
echo "knobs.sh: ${#bad[@]} bad values, ${#bad[@]} lines"

run WEFT_PROBE_RING=64k WEFT_LONG_POLL=2000us WEFT_SCHED_DELAY=50 \
	WEFT_CONTENTION=20ms \
	WEFT_PROBE_INTERVAL=10ms WEFT_PROBE_RING_FLUSH=off \
	WEFT_PROBE_CLOCK=monotonic WEFT_MONITOR=on WEFT_STALL_US=2ms \
	WEFT_TASK_CACHE=1 WEFT_CONSOLE=off WEFT_TRACE_MAX_MB=64 \
	WEFT_TRACE_CHECKPOINT_MB=32 \
	WEFT_WAKE_BURST=2k WEFT_TASK_LEAK_WINDOW=2s WEFT_IO=epoll \
	WEFT_PROBE_RETAIN=50k
if grep -q '^weft: WEFT_' "$tmp/err"; then
	cat "$tmp/err" >&2
	fail "good values were complained about"
fi
echo "knobs.sh: good values, no lines"
