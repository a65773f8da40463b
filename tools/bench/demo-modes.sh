#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# weft-demo's /fast under wrk in the probe's three modes, beside
# weft-bench's http-server and Tokio's HTTP hello server, interleaved
# round by round in one session (issue 7's figure).
#
#   tools/bench/demo-modes.sh [ROUNDS] [SECONDS]
#
#   off       weft-demo from a -DWEFT_PROBE=OFF build
#   counters  the normal build, nobody listening (the default in production)
#   record    the normal build recording to a file (WEFT_TRACE)
#   events    the same with a console attached for the whole run too
#             (weft-console --once --after, a real subscriber streaming
#             every update and event)
#   bench     weft-bench http-server (the same build as counters)
#   tokio     tokio-bench http-server from ../shared/anchors, when built
#             (BUILD_ONLY=1 /tmp/anchors/run.sh; ANCHORS=dir to override)
#
# MODES="off record" picks some.  URL_PATH=/fast-task asks weft-demo for
# /fast-task instead (a task per request; the other servers keep /fast).
# With BASE=dir, MODES may name base-counters and base-events: counters
# and events with weft-demo and weft-console from another build dir (a
# tree before a change, built with the same flags), in the same
# interleaved rounds; events against counters is then printed for each
# tree, as the median of the rounds' ratios.
# NO_BUILD=1 uses the build dirs as they are; JOBS=N builds with -jN
# (default 2).
# wrk -t1 -c64 -dSECONDS (default 10 s, 5 rounds; 1 s of warm-up each),
# the servers with 2 workers.  Prints each round's req/s and then the
# median per mode with the ratio to `off`.  Progress on stderr.
#
# Also the CPU time a request costs: the server process's user + system
# time over the timed run (with the console's, in mode events) divided by
# the requests answered.  On two vCPUs that wrk shares, req/s swings +-20%
# from round to round; CPU per request is steadier, and it is what the
# probe adds: a machine with a core to spare loses no req/s to it, a
# saturated one loses what the probe burns.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
ROUNDS="${1:-5}"
SECS="${2:-10}"
ANCHORS="${ANCHORS:-/tmp/anchors/build}"

case "${1:-}" in
-h | --help)
	sed -n '3,36p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
esac

say() { printf 'demo-modes: %s\n' "$*" >&2; }
die() { printf 'demo-modes: %s\n' "$*" >&2; exit 1; }
command -v wrk >/dev/null || die "wrk not found (apt-get install wrk)"

build()
{
	local dir=$1
	shift
	say "building $dir"
	cmake -S "$REPO" -B "$REPO/$dir" -DCMAKE_BUILD_TYPE=Release \
		-DWEFT_BUILD_TESTS=OFF "$@" >/dev/null
	cmake --build "$REPO/$dir" -j"${JOBS:-2}" --target weft-demo \
		weft-bench weft-console >/dev/null
}

if [ -z "${NO_BUILD:-}" ]; then
	build build/bench-probe-on -DWEFT_PROBE=ON
	case " ${MODES:-off} " in
	*" off "*) build build/bench-probe-off -DWEFT_PROBE=OFF ;;
	esac
fi
on=$REPO/build/bench-probe-on
off=$REPO/build/bench-probe-off
tokio=$ANCHORS/cargo-target/release/tokio-bench
modes="${MODES:-off counters record events bench}"
if [ -z "${MODES:-}" ]; then
	[ -x "$tokio" ] && modes="$modes tokio" || say "no $tokio: tokio skipped"
fi

tmp=$(mktemp -d)
pids=()
cleanup()
{
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port()
{
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_port PORT: until something accepts there (10 s at most).
wait_port()
{
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	die "nothing listens on port $1"
}

# cpu_ticks PID... -> their user + system clock ticks, summed
cpu_ticks()
{
	local sum=0 p f
	for p in "$@"; do
		# Fields 14 and 15, counted after the ")" closing the name.
		f=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null) || continue
		set -- $f
		sum=$((sum + ${12} + ${13}))
	done
	echo "$sum"
}
hz=$(getconf CLK_TCK)

# dir_of MODE -> the build dir its weft-demo and weft-console come from
dir_of()
{
	case $1 in
	base-*) echo "$BASE" ;;
	*) echo "$on" ;;
	esac
}

# run MODE -> "req/s cpu-us-per-request" on stdout
run()
{
	local mode=$1 port pid cpid= rps path=${URL_PATH:-/fast}
	local t0 t1 out reqs
	port=$(free_port)
	case $mode in
	off)
		WEFT_CONSOLE=off "$off/tools/demo/weft-demo" \
			--listen "127.0.0.1:$port" --workers 2 >/dev/null 2>&1 &
		;;
	counters | base-counters)
		"$(dir_of "$mode")/tools/demo/weft-demo" \
			--listen "127.0.0.1:$port" --workers 2 >/dev/null 2>&1 &
		;;
	record | events | base-events)
		WEFT_TRACE="$tmp/run.weft" "$(dir_of "$mode")/tools/demo/weft-demo" \
			--listen "127.0.0.1:$port" --workers 2 >/dev/null 2>&1 &
		;;
	bench)
		path=/fast
		"$on/tools/bench/weft-bench" http-server "$port" --workers 2 \
			>/dev/null 2>&1 &
		;;
	tokio)
		path=/fast
		"$tokio" http-server "$port" >/dev/null 2>&1 &
		;;
	esac
	pid=$!
	pids+=("$pid")
	wait_port "$port"
	if [ "$mode" = events ] || [ "$mode" = base-events ]; then
		"$(dir_of "$mode")/console/weft-console" --once --view tasks \
			--after "$((SECS + 3))s" "$pid" >"$tmp/console" 2>&1 &
		cpid=$!
		sleep 0.5
	fi
	wrk -t1 -c64 -d1s "http://127.0.0.1:$port$path" >/dev/null 2>&1 || true
	t0=$(cpu_ticks "$pid" $cpid)
	out=$(wrk -t1 -c64 -d"${SECS}s" "http://127.0.0.1:$port$path")
	t1=$(cpu_ticks "$pid" $cpid)
	rps=$(echo "$out" | sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p')
	reqs=$(echo "$out" | sed -n 's/^ *\([0-9]*\) requests in.*/\1/p')
	if [ -n "$cpid" ]; then
		wait "$cpid" || die "the console failed: $(tail -1 "$tmp/console")"
		grep -q 'LIVE' "$tmp/console" ||
			die "the console saw no live target"
	fi
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	if [ "$mode" = events ] || [ "$mode" = record ] ||
		[ "$mode" = base-events ]; then
		[ -s "$tmp/run.weft" ] || die "the recorder wrote nothing"
		rm -f "$tmp/run.weft"
	fi
	awk -v r="${rps:-0}" -v n="${reqs:-0}" -v t=$((t1 - t0)) -v hz="$hz" \
		'BEGIN { printf "%s %.2f\n", r, (n > 0 ? t * 1e6 / hz / n : 0) }'
}

declare -A all=() cpu=()
for r in $(seq "$ROUNDS"); do
	line="round $r:"
	for m in $modes; do
		say "round $r/$ROUNDS: $m"
		read -r v c < <(run "$m")
		all[$m]="${all[$m]:-} $v"
		cpu[$m]="${cpu[$m]:-} $c"
		line="$line $m=$v (${c} us/req)"
	done
	echo "$line"
done

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
first=${modes%% *}
base=$(echo "${all[off]:-${all[$first]}}" | median)
cbase=$(echo "${cpu[off]:-${cpu[$first]}}" | median)
printf '\n%-10s %10s %8s %12s %8s   %s\n' mode "req/s" "vs off" \
	"cpu us/req" "vs off" "rounds (req/s)"
for m in $modes; do
	med=$(echo "${all[$m]}" | median)
	cmed=$(echo "${cpu[$m]}" | median)
	awk -v m="$m" -v v="$med" -v b="$base" -v c="$cmed" -v cb="$cbase" \
		-v r="${all[$m]}" 'BEGIN {
		printf "%-10s %10.0f %8.3f %12.2f %8.3f  %s\n", m, v, v / b,
			c, (cb > 0 ? c / cb : 0), r }'
done

# events / counters, round by round, for this tree and BASE's; the same
# for the CPU a request costs.
ratios()
{
	paste <(echo "$1" | tr ' ' '\n' | sed '/^$/d') \
		<(echo "$2" | tr ' ' '\n' | sed '/^$/d') |
		awk '{ printf "%.3f\n", $2 / $1 }'
}
for pre in "" base-; do
	[ -n "${all[${pre}counters]:-}" ] && [ -n "${all[${pre}events]:-}" ] ||
		continue
	r=$(ratios "${all[${pre}counters]}" "${all[${pre}events]}")
	c=$(ratios "${cpu[${pre}counters]}" "${cpu[${pre}events]}")
	printf '%s: req/s median %s (rounds %s); cpu/req median %s (rounds %s)\n' \
		"${pre}events/${pre}counters" "$(echo "$r" | median)" \
		"$(echo $r)" "$(echo "$c" | median)" "$(echo $c)"
done
