#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tools/run.sh [--port N] [--no-load | --fixed] [--record FILE] [--bench]
#
# The main job: installs what is missing (tools/setup.sh), builds a Release
# weft in build/release, starts weft-demo (the HTTP service whose endpoints
# make the classic async mistakes, tools/demo) with the probe's server on,
# starts weft-demo-load against it (steady /fast and /lookup traffic, every
# 3 s a burst of /cpu, /lock and their fixes, and half way between those a
# burst of /convoy and /report), and attaches weft-console to the demo on
# this terminal.  Quitting the console (q) stops the load and the
# demo; so does Ctrl-C.  Nothing is left running.
#
# Without a terminal on stdin and stdout (CI, a pipe), the console is not
# interactive: the workers view 3 s after attaching and the warnings view
# of the next 4 s are printed as text (weft-console --once), then
# everything stops.
#
#   --port N       the demo's port on 127.0.0.1 (default: a free one)
#   --no-load      start no load: drive the demo yourself (curl, wrk)
#   --fixed        the load's bursts use the fixes only (/cpu-offload,
#                  /lock-async, /convoy-sharded, /report-limited): no long
#                  polls, no lock-held-across-await, no contention on
#                  demo-session, no blocking-queue (the reports wait for
#                  "report-slots" instead)
#   --record FILE  the demo also records its run to FILE (WEFT_TRACE), for
#                  weft-trace and weft-console --replay FILE afterwards
#   --bench        instead of the demo: the example program and the
#                  micro-benchmarks with their default shapes
#                  (tools/bench/README.md)
#
# WEFT_METRICS_BIND=HOST:PORT in the environment reaches the demo: it
# serves Prometheus metrics there too (README, "Fleet"), with
# WEFT_METRICS_HISTOGRAMS=1 the histograms.
#
# The demo's and the load's output go to build/release/run/.  The tests are
# not built here: tools/test.sh builds and runs them.
set -euo pipefail

user_pwd=$PWD
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

build=build/release
port=0
load=1
load_args=()
record=
bench=0

die()
{
	echo "run.sh: $*" >&2
	exit 1
}
usage_error()
{
	echo "run.sh: $* (see --help)" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	-h | --help)
		sed -n '4,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
		exit 0
		;;
	--port)
		[ $# -ge 2 ] || usage_error "--port needs a number"
		port=$2
		shift
		;;
	--port=*) port=${1#--port=} ;;
	--no-load) load=0 ;;
	--fixed) load_args+=(--fixed) ;;
	--record)
		[ $# -ge 2 ] || usage_error "--record needs a file"
		record=$2
		shift
		;;
	--record=*) record=${1#--record=} ;;
	--bench) bench=1 ;;
	*) usage_error "unknown argument '$1'" ;;
	esac
	shift
done
case $port in
'' | *[!0-9]*) usage_error "bad --port '$port' (want 0..65535)" ;;
esac
[ "${#port}" -le 5 ] && [ "$port" -le 65535 ] ||
	usage_error "bad --port '$port' (want 0..65535)"
if [ -n "$record" ]; then
	case $record in
	/*) ;;
	*) record=$user_pwd/$record ;;
	esac
	[ -d "$(dirname "$record")" ] ||
		usage_error "--record: no directory for $record"
fi

start=$SECONDS
banner()
{
	printf '\n==== %s ====\n\n' "$*"
}

banner "setup (tools/setup.sh)"
bash "$root/tools/setup.sh"

banner "build: Release in $build"
# Warnings are not errors here: a user's compiler may be newer than CI's
# and warn where ours does not.  CI builds Release with -Werror (the
# probe-off phase of tools/test.sh).
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DWEFT_SANITIZE= -DWEFT_WERROR=OFF \
	-DWEFT_BUILD_TESTS=OFF
cmake --build "$build" -j 2

if [ "$bench" = 1 ]; then
	banner "example: $build/tools/examples/weft-example"
	"$build/tools/examples/weft-example"
	banner "benchmarks: $build/tools/bench/weft-bench"
	"$build/tools/bench/weft-bench"
	banner "done in $((SECONDS - start)) s"
	exit 0
fi

demo_bin=$build/tools/demo/weft-demo
load_bin=$build/tools/demo/weft-demo-load
console_bin=$build/console/weft-console
logs=$build/run
mkdir -p "$logs"
: >"$logs/demo.log"
: >"$logs/load.log"

demo_pid=
load_pid=
stopped=0
# Stops the load, then the demo, by their PIDs; runs once, on any exit.
stop_all()
{
	local rc=0

	[ "$stopped" = 1 ] && return 0
	stopped=1
	if [ -n "$load_pid" ]; then
		kill -TERM "$load_pid" 2>/dev/null || true
		wait "$load_pid" 2>/dev/null || true
		load_pid=
		echo
		echo "load ($logs/load.log):"
		grep -v ' req/s ' "$logs/load.log" | sed 's/^weft-demo-load: /  /'
	fi
	if [ -n "$demo_pid" ]; then
		kill -TERM "$demo_pid" 2>/dev/null || true
		wait "$demo_pid" || rc=$?
		demo_pid=
		if [ "$rc" = 0 ]; then
			echo "weft-demo stopped (exit 0)"
		else
			echo "run.sh: weft-demo exited $rc; its log:" >&2
			tail -5 "$logs/demo.log" >&2
		fi
	fi
	return "$rc"
}
on_exit()
{
	local rc=$?

	trap - EXIT INT TERM HUP
	stop_all || rc=1
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

banner "weft-demo on 127.0.0.1:$port"
# WEFT_CONSOLE unset: the probe's server must be on for the console.
demo_env=(-u WEFT_CONSOLE -u WEFT_TRACE)
[ -n "$record" ] && demo_env+=("WEFT_TRACE=$record")
[ -n "${WEFT_METRICS_BIND:-}" ] &&
	echo "run.sh: metrics at http://$WEFT_METRICS_BIND/metrics (WEFT_METRICS_BIND)"
env "${demo_env[@]}" "$demo_bin" --listen "127.0.0.1:$port" \
	>"$logs/demo.log" 2>&1 &
demo_pid=$!
addr=
for _ in $(seq 100); do
	addr=$(sed -n 's/^weft-demo listening on \([0-9.]*:[0-9]*\) .*/\1/p' \
		"$logs/demo.log")
	[ -n "$addr" ] && break
	kill -0 "$demo_pid" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$addr" ]; then
	cat "$logs/demo.log" >&2
	wait "$demo_pid" || true
	demo_pid=
	die "weft-demo did not start (log: $logs/demo.log)"
fi
echo "weft-demo: http://$addr/ (pid $demo_pid; log $logs/demo.log)"
echo "endpoints: /fast /cpu?ms=N /cpu-offload?ms=N /lock /lock-async" \
	"/sleep?ms=N /file /file-offload /convoy?user=U /convoy-sharded?user=U" \
	"/report /report-limited /lookup"
[ -n "$record" ] && echo "recording to $record"

if [ "$load" = 1 ]; then
	"$load_bin" --target "$addr" "${load_args[@]}" >"$logs/load.log" 2>&1 &
	load_pid=$!
	echo "weft-demo-load: pid $load_pid (log $logs/load.log)"
fi

if [ -t 0 ] && [ -t 1 ]; then
	banner "weft-console $demo_pid (q quits, ? help)"
	sleep 1
	rc=0
	"$console_bin" "$demo_pid" || rc=$?
	[ "$rc" = 0 ] || echo "run.sh: weft-console exited $rc" >&2
	exit "$rc"
fi

# No terminal: the console's views as text, then stop.
banner "weft-console --once --view workers --after 3s $demo_pid"
"$console_bin" --once --view workers --after 3s "$demo_pid"
# 4 s: longer than the load's 3 s between bursts, so at least one burst
# happens while attached.
banner "weft-console --once --view warnings --after 4s $demo_pid"
"$console_bin" --once --view warnings --after 4s "$demo_pid"
banner "stopping"
stop_all
banner "done in $((SECONDS - start)) s"
