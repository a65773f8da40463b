#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/demo_e2e.sh WEFT_DEMO WEFT_DEMO_LOAD WEFT_TRACE
#
# The latency-spike walkthrough of the README, end to end: weft-demo
# records its run (WEFT_TRACE=FILE) under weft-demo-load's mix for a few
# seconds, SIGTERM stops it, and weft-trace finds in the file what the
# walkthrough says it shows:
#   - long polls of the task "GET /cpu", at the /cpu route's own spawn
#     location (as `weft-demo --routes` lists it, and the source line there
#     is the /cpu route), and a long-poll warning for it;
#   - every handler poll carries its own route's location;
#   - a lock-held-across-await warning for "GET /lock", and a self-wakes
#     one (the demo's /lock waits by trying the lock and yielding; three
#     come in each burst, so two wait out the holder's 5 ms sleep);
#   - none for "GET /lock-async", and no long-poll warning for
#     "GET /cpu-offload", though both ran;
#   - the waiting side: a contention warning on the mutex "demo-session"
#     raised on a "GET /convoy" task, and a blocking-queue warning that
#     names the "slow-report" jobs of "GET /report" holding the pool's
#     threads while the /lookup jobs waited;
#   - the Chrome export is JSON with "GET /cpu" poll slices;
# and the shutdown: exit 0 on SIGTERM, the probe's socket removed.  Then
# a second, shorter run with the load's --fixed mix (/convoy-sharded,
# /report-limited): neither waiting warning, though both fixes ran.
#
# Nothing here depends on speed: /cpu spins 300 ms of wall time by
# construction, against a long-poll threshold of 200 ms (WEFT_LONG_POLL;
# on a loaded machine a trivial poll was seen to take 87 ms when its
# thread lost the CPU, so the default 10 ms would not do for the "none for
# /cpu-offload" check), while /cpu-offload's polls only spawn and await;
# the /lock warning is raised by every /lock, whatever the timing.  The
# convoy is 16 connections' requests, 8 in a row each, on one lock held
# 2 ms a request: most wait past the 10 ms of WEFT_CONTENTION.  The reports hold all 5 of the demo's pool
# threads for 400 ms, past the collector's 250 ms between resource
# checks, so a check sees a /lookup waiting while they hold the threads
# (the warning names the holders of that moment).  The fixed run takes
# WEFT_CONTENTION=50: absence is what it checks, and a busy host can keep
# an idle pool thread off a CPU for 10 ms; a full pool would be 400 ms.
set -euo pipefail

demo=$1
load=$2
trace=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-demo-e2e.XXXXXX")
pid=
cleanup()
{
	if [ -n "$pid" ]; then
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

fail()
{
	echo "demo_e2e: FAIL: $*" >&2
	for f in demo.err load.out; do
		[ -s "$tmp/$f" ] && sed "s/^/  $f: /" "$tmp/$f" | tail -20 >&2
	done
	exit 1
}

# The routes' locations, as the binary has them.
"$demo" --routes >"$tmp/routes" || fail "weft-demo --routes"
cpu_loc=$(awk '$1 == "GET" && $2 == "/cpu" { print $4 }' "$tmp/routes")
fast_loc=$(awk '$1 == "GET" && $2 == "/fast" { print $4 }' "$tmp/routes")
[ -n "$cpu_loc" ] && [ -n "$fast_loc" ] || fail "no /cpu or /fast route"
[ "$cpu_loc" != "$fast_loc" ] || fail "/cpu and /fast share $cpu_loc"
[ "$(awk '{ print $4 }' "$tmp/routes" | sort -u | wc -l)" = \
	"$(wc -l <"$tmp/routes")" ] || fail "routes share a location"
src=${cpu_loc%:*}
if [ -f "$src" ]; then
	sed -n "${cpu_loc##*:}p" "$src" | grep -q '"/cpu"' ||
		fail "$cpu_loc is not the /cpu route"
fi

# Starts the demo recording to $1, with the environment's assignments
# that follow; sets pid, port and sock.  The probe's socket goes to a
# directory of our own.  demo.out is created first: sed must not race the
# background job's redirection.
start_demo()
{
	local rec=$1

	shift
	: >"$tmp/demo.out"
	env XDG_RUNTIME_DIR="$tmp/xdg" WEFT_TRACE="$rec" WEFT_LONG_POLL=200 \
		"$@" "$demo" --listen 127.0.0.1:0 --workers 2 \
		>"$tmp/demo.out" 2>"$tmp/demo.err" &
	pid=$!
	port=
	for _ in $(seq 300); do
		port=$(sed -n 's/^weft-demo listening on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' \
			"$tmp/demo.out")
		[ -n "$port" ] && break
		kill -0 "$pid" 2>/dev/null || fail "weft-demo exited early"
		sleep 0.1
	done
	[ -n "$port" ] || fail "no 'listening on' line"
	sock=$tmp/xdg/weft/$pid.sock
	[ -S "$sock" ] || fail "no probe socket $sock"
}

# SIGTERM: exit 0, the shutdown line, the probe's socket removed.
stop_demo()
{
	local rc=0

	kill -TERM "$pid"
	wait "$pid" || rc=$?
	pid=
	[ "$rc" = 0 ] || fail "weft-demo exited $rc after SIGTERM, want 0"
	grep -q 'SIGTERM: shutting down' "$tmp/demo.err" ||
		fail "no shutdown line"
	[ ! -e "$sock" ] || fail "the probe socket $sock is still there"
}

mkdir -m 700 "$tmp/xdg"
start_demo "$tmp/demo.weft"

# Four bursts (at 0.5, 1.5, 2.5, 3.5 s), each with 3 x /cpu?ms=300,
# 3 x /lock, /lock-async, /cpu-offload?ms=300 and /sleep?ms=300; three of
# the waiting side (at 1, 2, 3 s), each 16 x 8 x /convoy and 5 x /report; and
# /lookup 20 times a second throughout.
"$load" --target "127.0.0.1:$port" --duration 4s --burst-every 1s \
	--cpu-ms 300 --rate 50 >"$tmp/load.out" 2>&1 ||
	fail "weft-demo-load failed"
answered()
{
	for ep in "$@"; do
		awk -v ep="$ep" '$2 == ep && $3 > 0 { ok = 1 } END { exit !ok }' \
			"$tmp/load.out" || fail "no $ep request answered"
	done
}
answered /cpu /lock /lock-async /cpu-offload /convoy /report /lookup
stop_demo

"$trace" stats --top 100000000 "$tmp/demo.weft" >"$tmp/stats" ||
	fail "weft-trace stats"
"$trace" dump "$tmp/demo.weft" >"$tmp/dump" || fail "weft-trace dump"

# Long polls: of "GET /cpu", at its route's location, 200 ms or more.
awk -v loc="$cpu_loc" '
	/^longest polls:/ { on = 1; next }
	/^warnings:/ { on = 0 }
	on && $10 == "GET" && $11 == "/cpu" && $12 == loc && $1 >= 200000000 {
		n++
	}
	END { exit !n }' "$tmp/stats" ||
	fail "no poll of 200 ms or more by GET /cpu at $cpu_loc"
# Every handler's polls carry its own route's location.
awk '
	NR == FNR { loc["GET " $2] = $4; next }
	/^longest polls:/ { on = 1; next }
	/^warnings:/ { on = 0 }
	on && $10 == "GET" {
		seen[$11]++
		if ($12 != loc["GET " $11]) {
			print "GET " $11 " polled at " $12 ", want " loc["GET " $11]
			bad = 1
		}
	}
	END {
		if (!seen["/lock"]) {
			print "no polls of GET /lock"
			bad = 1
		}
		# /fast is answered by the connection task, no task of its own.
		if (seen["/fast"]) {
			print "a task GET /fast: /fast is not answered inline"
			bad = 1
		}
		exit bad
	}' "$tmp/routes" "$tmp/stats" >"$tmp/locs" ||
	fail "locations: $(head -3 "$tmp/locs")"

warn()
{
	grep -E "^  $1 +task [0-9]+ $2  ${3:-}" "$tmp/stats" >/dev/null
}
warn long-poll 'GET /cpu' || fail "no long-poll warning for GET /cpu"
warn lock-held-across-await 'GET /lock' ||
	fail "no lock-held-across-await warning for GET /lock"
# The demo's /lock waits for the lock by trying and yielding: a busy-wait.
warn self-wakes 'GET /lock' 'busy-waits: ' ||
	fail "no self-wakes warning for GET /lock"
! warn lock-held-across-await 'GET /lock-async' ||
	fail "a lock-held-across-await warning for GET /lock-async"
! warn long-poll 'GET /cpu-offload' ||
	fail "a long-poll warning for GET /cpu-offload"
# ... and not because they did not run.
for name in 'GET /lock-async' 'GET /cpu-offload'; do
	grep -qE " poll [0-9]+\($name\) " "$tmp/dump" ||
		fail "no poll of $name in the trace"
done
# The waiting side: the convoy, on the task that held the lock longest...
warn contention 'GET /convoy' 'mutex "demo-session": [0-9]+ waits > ' ||
	fail "no contention warning on \"demo-session\" for GET /convoy"
# ... and the full pool, naming the reports that held its threads.
warn blocking-queue 'GET /report' \
	'pool full: [0-9]+ jobs waited > .* on its threads: [0-9]+ x "slow-report" \(demo_wait\.c:[0-9]+\) of (task [0-9]+ \(GET /report\)|GET /report tasks)' ||
	fail "no blocking-queue warning naming \"slow-report\" of GET /report"

"$trace" export --chrome "$tmp/demo.weft" -o "$tmp/demo.json" ||
	fail "weft-trace export --chrome"
python3 - "$tmp/demo.json" <<'PY' || fail "the Chrome export"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
cpu = [e for e in ev if e.get("ph") == "X" and e.get("name") == "GET /cpu"]
assert cpu, "no GET /cpu slices"
assert max(e["dur"] for e in cpu) >= 200000, "no GET /cpu slice of 200 ms"
PY

grep -E '^(longest polls|  +[0-9]+ ns .*GET /cpu )' "$tmp/stats" | head -3
grep -E '^warnings:|^  [a-z-]+ +[0-9]+$' "$tmp/stats"
grep -E '^  (contention|blocking-queue) +task ' "$tmp/stats" | head -2

# The fixes of the waiting side: a waiting burst at 1 s (16 x 8 x
# /convoy-sharded, 5 x /report-limited: 2 at a time, done by 2.2 s) and
# /lookup throughout.  --cpu-ms 1: the first kind's burst (4 x
# /cpu-offload) keeps no pool thread long.
start_demo "$tmp/fixed.weft" WEFT_CONTENTION=50
"$load" --target "127.0.0.1:$port" --fixed --duration 2.5s \
	--burst-every 1s --cpu-ms 1 --rate 50 >"$tmp/load.out" 2>&1 ||
	fail "weft-demo-load --fixed failed"
answered /convoy-sharded /report-limited /lookup
stop_demo
"$trace" stats --top 100000000 "$tmp/fixed.weft" >"$tmp/fixed.stats" ||
	fail "weft-trace stats (fixed)"
! grep -E '^  contention +task .*"(demo-session|session-shard-[0-9]+)"' \
	"$tmp/fixed.stats" ||
	fail "with --fixed, a contention warning on the session locks"
! grep -E '^  blocking-queue +task .*"slow-report"' "$tmp/fixed.stats" ||
	fail "with --fixed, a blocking-queue warning naming \"slow-report\""
grep -qE '^  semaphore report-slots ' "$tmp/fixed.stats" ||
	fail "with --fixed, no semaphore report-slots among the resources"
grep -E '^warnings:|^  [a-z-]+ +[0-9]+$' "$tmp/fixed.stats"
echo "demo_e2e: PASS"
