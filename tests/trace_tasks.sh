#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/trace_tasks.sh TASKS_WORKLOAD WEFT_TRACE SOURCE_DIR
#
# weft-trace tasks (issue 18): on a live process and on a recorded file,
# every parked task is listed with the line of its await, none of the
# tasks that finished.  Then 10,000 pending tasks, live: every one is
# printed with its await line; the wall time is printed (measured, never
# asserted).
set -euo pipefail

workload=$1 tool=$2 src=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-trace-tasks.XXXXXX")
pid=
cleanup()
{
	[[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

fail()
{
	echo "trace_tasks: FAIL: $*" >&2
	exit 1
}

line=$(grep -n 'WEFT_AWAIT.*/\* PARKED_LINE' "$src/tests/tasks_workload.c" | cut -d: -f1)
[[ -n "$line" ]] || fail "no PARKED_LINE in tasks_workload.c"
site="tasks_workload\\.c:$line"

# Starts the workload with "$@", waits for its "finished" line.
start()
{
	"$workload" "$@" >"$tmp/out.txt" &
	pid=$!
	for _ in $(seq 300); do
		grep -q '^finished' "$tmp/out.txt" && return 0
		kill -0 "$pid" 2>/dev/null || fail "workload exited early"
		sleep 0.1
	done
	fail "workload never finished its finishers"
}

stop()
{
	kill "$pid"
	wait "$pid" || fail "workload exited $?"
	pid=
}

# Every parked task, with its await, none of the finishers.  Idle for:
# a time, or "?" live (parked before the probe listened).  Waiting on:
# the notify they await, where the trace saw them queue on it; "-" live,
# queued before the probe listened.
check()
{
	local what=$1 out=$2 n=$3 rows

	grep -q '^ *ID  NAME' "$out" || { cat "$out" >&2; fail "$what: no header"; }
	rows=$(grep -Ec "^ *[0-9]+  parked +idle +([0-9.]+[a-z]+|\\?)  .*  [^ ]*$site  (-|notify [^ ]+)\$" "$out" || true)
	[[ $rows -eq $n ]] || {
		head -20 "$out" >&2
		fail "$what: $rows parked tasks at $site, expected $n"
	}
	! grep -q 'finisher' "$out" || { cat "$out" >&2; fail "$what: a finished task is listed"; }
}

# Live.
start 50 50 30
"$tool" tasks "$pid" >"$tmp/live.txt"
check live "$tmp/live.txt" 50
"$tool" tasks "$pid" --sort name >"$tmp/live-name.txt"
check "live --sort name" "$tmp/live-name.txt" 50
"$tool" tasks "$pid" --sort id >"$tmp/live-id.txt"
awk 'NR > 1 { print $1 }' "$tmp/live-id.txt" | sort -nc || fail "--sort id: not in id order"
stop

# A file recorded from the start: at 1.5 s the finishers (100 ms) are
# long gone and the parked tasks still wait; at its end (after the
# notify) none is left.
WEFT_TRACE=$tmp/run.weft start 40 40 3
sleep 2.5
stop
"$tool" tasks "$tmp/run.weft" --at 1.5 >"$tmp/file.txt"
check "file --at 1.5" "$tmp/file.txt" 40
# The state at the last update written by 1.5 s: on a loaded host the
# one before it may be 0.1 s or more earlier (CI: "# at 1.399 s").
grep -q '^# at 1\.[0-5][0-9]* s of ' "$tmp/file.txt" || { cat "$tmp/file.txt" >&2; fail "file: no '# at' line"; }
# Recorded from the start, each parked poll was seen: idle from its end
# (about 1.4 s at 1.5 s), not "?" nor 0.
rows=$(grep -Ec "  parked +idle +(0\.[1-9][0-9]|1\.[0-9]{2})s  " "$tmp/file.txt" || true)
[[ $rows -eq 40 ]] || { cat "$tmp/file.txt" >&2; fail "file: $rows parked tasks idle 0.1-1.99 s, expected 40"; }
"$tool" tasks "$tmp/run.weft" >"$tmp/file-end.txt"
! grep -q "$site" "$tmp/file-end.txt" || { cat "$tmp/file-end.txt" >&2; fail "file at its end: a parked task is left"; }
# dump names the await a pending poll parked at, not an address: the
# site its POLL names (issue 21; PARKED_AT's text, folded in), announced
# by an await-site line before it.
"$tool" dump "$tmp/run.weft" >"$tmp/dump.txt"
grep -Eq " poll [0-9]+\(parked\) dur=[0-9]+ns pending.* (at=[^ ]*$site|line=$line)\$" "$tmp/dump.txt" || {
	grep -E "parked-at|await-site| pending .*(at|line|site)=" "$tmp/dump.txt" | head >&2
	fail "dump: no pending poll with the line"
}
grep -Eq " await-site - site=[0-9]+ line=$line\$" "$tmp/dump.txt" || fail "dump: no await-site line"
! grep -q "site=unknown" "$tmp/dump.txt" || fail "dump: a site not known in a file recorded from the start"

# Usage.
"$tool" tasks --help | grep -q '^usage: weft-trace tasks' || fail "tasks --help"
rc=0; "$tool" tasks "$tmp/run.weft" --sort size 2>"$tmp/err.txt" >/dev/null || rc=$?
[[ $rc -eq 2 && $(wc -l <"$tmp/err.txt") -eq 1 ]] || fail "--sort size: exit $rc"
rc=0; "$tool" tasks "$tmp/run.weft" --at soon 2>"$tmp/err.txt" >/dev/null || rc=$?
[[ $rc -eq 2 && $(wc -l <"$tmp/err.txt") -eq 1 ]] || fail "--at soon: exit $rc"

# 10,000 pending tasks, live: every one with its line; the time printed.
start 10000 0 60
t0=$(date +%s%N)
"$tool" tasks "$pid" >"$tmp/big.txt"
t1=$(date +%s%N)
check "10,000 live" "$tmp/big.txt" 10000
echo "trace_tasks: 10,000 pending tasks listed in $(( (t1 - t0) / 1000000 )) ms"
stop
echo "trace_tasks: ok"
