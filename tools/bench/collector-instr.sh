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
#
# CONSOLE=1 attaches a console as well (weft-console --once from the
# BENCH's build tree, CONSOLE_BIN to override: a real socket client of
# the probe server, streaming every update and event), so that what
# each subscriber costs shows.  The bench waits for it
# (WEFT_BENCH_START_FILE, made once the console had ATTACH_S seconds,
# default 3, to subscribe); the server's callback must show on the
# collector's thread.  Also printed: instructions an op (a task, for
# the spawn shapes).
set -euo pipefail

case "${1:-}" in
-h | --help | "")
	sed -n '3,26p' "$0" | sed 's/^# \{0,1\}//'
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
console=${CONSOLE:-0}
if [[ $console != 0 ]]; then
	cbin=${CONSOLE_BIN:-$(dirname "$bench")/../../console/weft-console}
	[[ -x "$cbin" ]] || { echo "collector-instr: no console at $cbin (CONSOLE_BIN)" >&2; exit 2; }
fi

tmp=$(mktemp -d)
cpid=
cleanup()
{
	[[ -n "$cpid" ]] && kill "$cpid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
# The probe server's socket in a directory of our own (mktemp: 0700).
export XDG_RUNTIME_DIR=$tmp
unset WEFT_CONSOLE

# attach PID: a console on PID's socket, once it is there (30 s at most),
# then the bench's shapes start.
attach()
{
	for _ in $(seq 300); do
		[[ -S "$tmp/weft/$1.sock" ]] && break
		sleep 0.1
	done
	"$cbin" --once --view tasks --after 600s "$1" >"$tmp/console" 2>&1 &
	cpid=$!
	sleep "${ATTACH_S:-3}"
	touch "$tmp/start"
}

# collector SHAPE ITERS -> "instructions events ops-per-iteration" of
# the collector thread
collector()
{
	local f total=0 ev ops pid

	echo "collector-instr: $1, $2 iterations" >&2
	if [[ ${RECORD:-1} != 0 ]]; then
		export WEFT_TRACE="$tmp/run.weft"
	else
		unset WEFT_TRACE
	fi
	rm -f "$tmp/start"
	[[ $console != 0 ]] && export WEFT_BENCH_START_FILE=$tmp/start
	valgrind --tool=callgrind --separate-threads=yes \
		--callgrind-out-file="$tmp/cg.$2" "$bench" --shapes "$1" \
		--iters "$2" --warmup 0 --workers 1 --probe=events \
		>"$tmp/line" 2>"$tmp/err" &
	pid=$!
	[[ $console != 0 ]] && attach "$pid"
	wait "$pid" || { cat "$tmp/err" >&2; exit 1; }
	if [[ -n "$cpid" ]]; then
		# A console waits its --after out: ended here, by its pid.
		kill "$cpid" 2>/dev/null || true
		wait "$cpid" 2>/dev/null || true
		cpid=
	fi
	ev=$(sed -n 's/.*probe drained \([0-9]*\) events.*/\1/p' "$tmp/err")
	ops=$(sed -n 's/.*ops_per_iter=\([0-9]*\).*/\1/p' "$tmp/line")
	for f in "$tmp/cg.$2"-*; do
		# The collector's thread is the one that makes passes.
		grep -q 'collector_main' "$f" || continue
		# With a console, its stream's callback ran on that thread.
		[[ $console == 0 ]] || grep -q srv_on_update "$f" || {
			echo "collector-instr: the console never subscribed" >&2
			exit 1
		}
		total=$((total + $(sed -n 's/^summary: //p' "$f")))
	done
	rm -f "$tmp/cg.$2"-* "$tmp/run.weft"*
	echo "$total ${ev:-0} ${ops:-0}"
}

for s in "${shapes[@]}"; do
	read -r a ea _ < <(collector "$s" 1)
	read -r c ec ops < <(collector "$s" 3)
	awk -v s="$s" -v a="$a" -v c="$c" -v ea="$ea" -v ec="$ec" -v ops="$ops" 'BEGIN {
		printf "%s: %.1f collector instructions an event, %.0f an op (%d events, %d ops in 2 iterations)\n",
			s, (ec > ea ? (c - a) / (ec - ea) : 0),
			(ops > 0 ? (c - a) / (2 * ops) : 0), ec - ea, 2 * ops }'
done
