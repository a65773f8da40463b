#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tools/bench/console-bench.sh [BUILD_DIR] [SECONDS]
#
# The console benchmark (issue 6; tools/bench/README.md, "Console"):
# weft-console attached live, in a tmux pane of 200x50, to
# weft-console-target (100,000 live tasks, ~1 M events/s), once per view.
# For each view, after a warm-up (the first full update of every task),
# it measures for SECONDS (default 10):
#
#   redraws/s    the console's own count (--stats), over the whole run
#                (q ends it right after the measured part)
#   draw ms      mean and max time of one redraw (model resort, render,
#                curses blit)
#   CPU %        utime + stime from /proc/PID/stat, over the measured part
#   peak RSS     the console's getrusage() ru_maxrss
#   events/s     the target's rate, as its probe reported it; "recv" the
#                events the console decoded per second (whole run)
#   live, seen   live tasks in the target; tasks in the console's model
#
# A fresh target per view: it spawns its tasks only once the console is
# attached (--wait-listener), because the probe knows a task from its
# events, and the idle ones emit none after their first poll.
#
# Environment: TASKS (idle tasks, default 90000), SLEEPERS (10000),
# SPINNERS (16), BURST (64), VIEWS ("workers tasks timeline"), WARMUP (3),
# FPS (the console's --fps, default 10), TARGET_WORKERS (2).
# Needs tmux.  Not a test: it asserts nothing about time.
set -euo pipefail

build=${1:-build}
secs=${2:-10}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
console=$build/console/weft-console
target=$build/tools/bench/weft-console-target
tasks=${TASKS:-90000}
sleepers=${SLEEPERS:-10000}
spinners=${SPINNERS:-16}
burst=${BURST:-64}
views=${VIEWS:-workers tasks timeline}
warm=${WARMUP:-3}
fps=${FPS:-10}
twork=${TARGET_WORKERS:-2}

for f in "$console" "$target"; do
	[[ -x "$f" ]] || { echo "console-bench: $f not built" >&2; exit 2; }
done
command -v tmux >/dev/null || { echo "console-bench: needs tmux" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-console-bench.XXXXXX")
tpid=
sess=weft-console-bench-$$
cleanup()
{
	tmux -L "$sess" kill-server 2>/dev/null || true
	[[ -n "$tpid" ]] && kill "$tpid" 2>/dev/null || true
	[[ -n "$tpid" ]] && wait "$tpid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -m 700 "$tmp/xdg"
export XDG_RUNTIME_DIR=$tmp/xdg LANG=C.UTF-8 LC_ALL=C.UTF-8
unset WEFT_CONSOLE WEFT_CONSOLE_BIND WEFT_TRACE
hz=$(getconf CLK_TCK)

cpu_ticks() # pid -> utime + stime (fields 14, 15; the name may hold spaces)
{
	local rest
	rest=$(sed 's/^.*) //' "/proc/$1/stat")
	awk '{ print $12 + $13 }' <<<"$rest"
}

start_target()
{
	: >"$tmp/target.out"
	"$target" --tasks "$tasks" --sleepers "$sleepers" \
		--spinners "$spinners" --burst "$burst" --workers "$twork" \
		--wait-listener --seconds $((secs + warm + 60)) \
		>"$tmp/target.out" &
	tpid=$!
	for _ in $(seq 200); do
		grep -q '^waiting' "$tmp/target.out" && break
		sleep 0.05
	done
	sock=$XDG_RUNTIME_DIR/weft/$tpid.sock
	for _ in $(seq 200); do
		[[ -S "$sock" ]] && return 0
		sleep 0.05
	done
	echo "console-bench: the target's socket never appeared" >&2
	exit 1
}

stop_target()
{
	kill "$tpid" 2>/dev/null || true
	wait "$tpid" 2>/dev/null || true
	tpid=
}

echo "console-bench: $((tasks + sleepers + spinners)) tasks ($tasks idle," \
	"$sleepers sleepers, $spinners spinners x $burst yields/ms)," \
	"target $twork workers; $(nproc) CPUs; console at $fps fps;" \
	"${secs}s per view after ${warm}s warm-up"
printf '%-9s %9s %8s %8s %7s %9s %10s %10s %9s %9s\n' view redraws/s draw_ms \
	draw_max cpu_% rss_MiB events/s recv/s live seen
for v in $views; do
	stats=$tmp/stats-$v
	start_target
	tmux -L "$sess" -f /dev/null new-session -d -x 200 -y 50 \
		"exec '$console' --view $v --fps $fps --exit-after $((warm + secs + 120))s --stats '$stats' $tpid"
	cpid=$(tmux -L "$sess" display -p -t 0 '#{pane_pid}')
	# The warm-up starts once every task is spawned (the target spawns
	# them when the console has attached).
	for _ in $(seq 600); do
		grep -q '^ready' "$tmp/target.out" && break
		sleep 0.05
	done
	grep -q '^ready' "$tmp/target.out" || { echo "console-bench: target not ready" >&2; exit 1; }
	sleep "$warm"
	c0=$(cpu_ticks "$cpid")
	t0=$(date +%s.%N)
	sleep "$secs"
	c1=$(cpu_ticks "$cpid")
	t1=$(date +%s.%N)
	tmux -L "$sess" send-keys -t 0 q
	for _ in $(seq 200); do
		[[ -s "$stats" ]] && break
		sleep 0.1
	done
	tmux -L "$sess" kill-server 2>/dev/null || true
	stop_target
	[[ -s "$stats" ]] || { echo "console-bench: $v: no stats" >&2; exit 1; }
	# key=value -> shell variables prefixed s_
	eval "$(tr ' ' '\n' <"$stats" | sed -n 's/^\([a-z_]*\)=\([0-9.]*\)$/s_\1=\2/p')"
	[[ -n "${VERBOSE:-}" ]] && cat "$stats" >&2
	awk -v v="$v" -v rps="$s_redraws_per_s" -v dm="$s_draw_ms_mean" \
		-v dx="$s_draw_ms_max" -v c0="$c0" -v c1="$c1" -v hz="$hz" \
		-v t0="$t0" -v t1="$t1" -v rss="$s_maxrss_kb" -v ev="$s_target_events_per_s" \
		-v got="$s_events" -v s="$s_seconds" -v nt="$s_target_live_tasks" \
		-v seen="$s_tasks" \
		'BEGIN { printf "%-9s %9.1f %8.2f %8.2f %7.1f %9.1f %10.0f %10.0f %9d %9d\n",
			v, rps, dm, dx, 100 * (c1 - c0) / hz / (t1 - t0),
			rss / 1024, ev, got / s, nt, seen }'
done
