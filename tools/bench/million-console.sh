#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tools/bench/million-console.sh [BUILD_DIR] [TASKS]
#
# "A million tasks, live" (issue 21; tools/bench/README.md, "A million
# tasks, live"): weft-console attaching to weft-console-target holding
# TASKS idle tasks (default 1,000,000), spawned before anyone listened,
# so the probe's collector seeds a record for each on the console's
# arrival.  weft-console --attach-bench times the attach and prints, one
# line each: connected; first-update (the first Update record: what the
# process took); first-screen (the header's figures and a page of tasks,
# drawn); all-tasks (as many in the model as the process has
# live); once-text (the --once text of the Tasks view, to /dev/null);
# per-task (peak RSS over the tasks).  Meanwhile the target's VmRSS is
# sampled every 0.1 s: its growth while the console is attached, over
# TASKS, is the collector's (and the server's) memory a task.
#
# Then one summary line:
#
#   tasks=N first_update_s=S first_screen_s=S all_tasks_s=S
#   console_bytes_per_task=B
#   console_model_bytes_per_task=B collector_bytes_per_task=B
#
# Environment: ROUNDS (default 1), TARGET_WORKERS (2), GIVE_UP (the
# console's --after, default 120s).  Not a test: it asserts nothing.
set -euo pipefail

build=${1:-build}
tasks=${2:-1000000}
rounds=${ROUNDS:-1}
twork=${TARGET_WORKERS:-2}
give_up=${GIVE_UP:-120s}
console=$build/console/weft-console
target=$build/tools/bench/weft-console-target

for f in "$console" "$target"; do
	[[ -x "$f" ]] || { echo "million-console: $f not built" >&2; exit 2; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-million.XXXXXX")
tpid=
cleanup()
{
	[[ -n "$tpid" ]] && kill "$tpid" 2>/dev/null || true
	[[ -n "$tpid" ]] && wait "$tpid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -m 700 "$tmp/xdg"
export XDG_RUNTIME_DIR=$tmp/xdg LANG=C.UTF-8 LC_ALL=C.UTF-8
unset WEFT_CONSOLE WEFT_CONSOLE_BIND WEFT_TRACE

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }

for ((r = 1; r <= rounds; r++)); do
	: >"$tmp/target.out"
	"$target" --tasks "$tasks" --sleepers 0 --spinners 0 \
		--workers "$twork" --seconds 3600 >"$tmp/target.out" &
	tpid=$!
	until grep -q '^ready' "$tmp/target.out"; do
		kill -0 "$tpid" 2>/dev/null ||
			{ echo "million-console: the target died" >&2; exit 1; }
		sleep 0.2
	done
	sleep 2 # the spawns settle: every task parked
	before=$(rss_kb "$tpid")

	"$console" --attach-bench --after "$give_up" "$tpid" \
		>"$tmp/bench.out" &
	cpid=$!
	peak=$before
	while kill -0 "$cpid" 2>/dev/null; do
		now=$(rss_kb "$tpid")
		((now > peak)) && peak=$now
		sleep 0.1
	done
	status=0
	wait "$cpid" || status=$?
	echo "round $r: target RSS ${before} kB before, ${peak} kB at most" \
		"while attached"
	cat "$tmp/bench.out"
	((status == 0)) ||
		echo "million-console: --attach-bench exited $status" >&2
	awk -v n="$tasks" -v before="$before" -v peak="$peak" '
		$1 == "first-update" { upd = $2 }
		$1 == "first-screen" { first = $2 }
		$1 == "all-tasks" { all = $2 }
		$1 == "per-task" { con = $2; model = $(NF - 4) }
		END {
			printf "tasks=%d first_update_s=%s " \
			       "first_screen_s=%s all_tasks_s=%s " \
			       "console_bytes_per_task=%s " \
			       "console_model_bytes_per_task=%s " \
			       "collector_bytes_per_task=%.0f\n", n, upd, first,
			       all, con, model, (peak - before) * 1024 / n
		}' "$tmp/bench.out"
	kill "$tpid"
	wait "$tpid" 2>/dev/null || true
	tpid=
done
