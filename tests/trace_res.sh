#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/trace_res.sh TEST_WIRE WEFT_TRACE [TASKS_WORKLOAD]
#
# weft-trace and resources (issue 18), on a trace written by
# `test_wire --write-resources` (no runtime: the probe does not emit
# resources in this test): tasks prints WAITING ON with the resource's
# kind and name or file:line; stats lists the most contended resources
# with their holders and waiters, the blocking pool's queue waits and
# top submitters and the timer wheel's timers per tick, exactly; dump
# names the RES_* events' fields.
set -euo pipefail

test_wire=$1 tool=$2 workload=${3:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-trace-res.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail()
{
	echo "trace_res: FAIL: $*" >&2
	exit 1
}

"$test_wire" --write-resources "$tmp/res.weft" || fail "no sample written"

"$tool" tasks "$tmp/res.weft" --sort id >"$tmp/tasks.txt" ||
	fail "tasks failed"
cat "$tmp/tasks.txt"
grep -q 'WAITING ON' "$tmp/tasks.txt" || fail "no WAITING ON column"
grep -Eq '^ +1 +holder .* -$' "$tmp/tasks.txt" || fail "holder waits"
grep -Eq '^ +2 +waiter-a .*mutex cache$' "$tmp/tasks.txt" ||
	fail "waiter-a: no 'mutex cache'"
grep -Eq '^ +4 +producer .*mpsc demo\.c:88$' "$tmp/tasks.txt" ||
	fail "producer: no 'mpsc demo.c:88'"

"$tool" stats "$tmp/res.weft" >"$tmp/stats.txt" || fail "stats failed"
cat "$tmp/stats.txt"
grep -q '^resources: 3 seen, 1 dropped' "$tmp/stats.txt" ||
	fail "no resources section"
# The mutex first (it has the wait time), its holder and waiters named.
sed -n '/^resources:/,/^warnings/p' "$tmp/stats.txt" | sed -n 3p |
	grep -q 'mutex cache' || fail "mutex cache not the most contended"
grep -Eq 'holders 1: 1 \(holder\)' "$tmp/stats.txt" || fail "no holders"
grep -Eq 'waiters 2: 2 \(waiter-a\), 3 \(waiter-b\)' "$tmp/stats.txt" ||
	fail "no waiters"
grep -q 'longest hold 7.0ms by task 1 (holder)' "$tmp/stats.txt" ||
	fail "no longest hold"
grep -q 'semaphore permits.*(dropped)' "$tmp/stats.txt" ||
	fail "the dropped semaphore not listed"

# The blocking pool and the timer wheel, figure by figure (the jobs and
# the turns are listed at pool_events() in tests/test_wire.c).
sed -n '/^blocking pool:/,/^$/p' "$tmp/stats.txt" >"$tmp/pool.txt"
cat >"$tmp/pool.want" <<'EOF'
blocking pool: 6 jobs run, 5 waited for a thread; at the end 1 running, 0 queued
  queue wait: p50 3.0ms, p99 6.0ms, max 6.0ms, total 17.0ms
  1 waits ended unserved (cancelled or closed)
  top submitters (by run time; a job's name as a warning named it, else its address in the process):
  SUBMITTER            SPAWNED AT               JOB              JOBS  WAITS    WAITED       RUN
  holder               app.c:101                0xa000              2      1     6.0ms    30.0ms
  producer             app.c:104                0xb000              2      2     5.0ms     5.0ms
  waiter-b             app.c:103                -                   1      1     5.0ms     2.0ms
  waiter-a             app.c:102                0xc000              1      1     1.0ms         -

EOF
diff -u "$tmp/pool.want" "$tmp/pool.txt" || fail "blocking pool section"
grep -qx 'timer wheel: 5 ticks fired 80 timers; per tick p50 3, p99 64, max 64' \
	"$tmp/stats.txt" || fail "timer wheel section"
# --top 2: the two that ran longest, the rest summed.
"$tool" stats --top 2 "$tmp/res.weft" >"$tmp/stats2.txt" ||
	fail "stats --top 2 failed"
grep -A1 -x '  \.\.\. 2 more submitters:' "$tmp/stats2.txt" |
	grep -Eq '^  \(the rest\) +- +2 +2 +6\.0ms +2\.0ms$' ||
	fail "--top 2: the rest not summed"

# Past 1,024 submitters the rest are others: memory bounded by the rows.
"$test_wire" --write-pool-many "$tmp/many.weft" || fail "no many written"
"$tool" stats --top 1 "$tmp/many.weft" >"$tmp/many.txt" ||
	fail "stats on many failed"
sed -n '/^blocking pool:/,/^$/p' "$tmp/many.txt"
grep -qx 'blocking pool: 1100 jobs run, 0 waited for a thread' \
	"$tmp/many.txt" || fail "many: jobs run"
grep -Eq '^  \(the rest\) +- +1023 +0 +- +1\.02s$' "$tmp/many.txt" ||
	fail "many: the rest of the 1,024 rows"
grep -Eq '^  others +\(past 1024 rows\) +- +76 +0 +- +76\.0ms$' \
	"$tmp/many.txt" || fail "many: no others"

"$tool" dump "$tmp/res.weft" >"$tmp/dump.txt" || fail "dump failed"
cat "$tmp/dump.txt"
grep -q 'resource-new - res=5 kind=mutex (mutex cache)' "$tmp/dump.txt" ||
	fail "RES_NEW"
grep -q 'resource-name - res=5 named (mutex cache)' "$tmp/dump.txt" ||
	fail "RES_NAME"
grep -q 'resource-wait 2(waiter-a) res=5 op=acquire (mutex cache)' \
	"$tmp/dump.txt" || fail "RES_WAIT"
grep -q 'resource-wait 4(producer) res=6 op=send (mpsc demo.c:88)' \
	"$tmp/dump.txt" || fail "RES_WAIT on the mpsc"
grep -q 'resource-wait-end 3(waiter-b) res=5 op=acquire cancelled' \
	"$tmp/dump.txt" || fail "RES_WAIT_END"
grep -q 'resource-release 1(holder) res=7 count=2 (semaphore permits)' \
	"$tmp/dump.txt" || fail "RES_RELEASE"
grep -q 'resource-owner 1(holder) res=6' "$tmp/dump.txt" || fail "RES_OWNER"
grep -q 'resource-drop - res=7' "$tmp/dump.txt" || fail "RES_DROP"
# A job's name, where a warning says it: a real runtime's pool of one
# thread with six 80 ms jobs named "render-pdf" queued by one task (a
# convoy, warned as blocking-queue); the JOB column reads the name, not
# the address the events carry.
if [ -n "$workload" ]; then
	WEFT_TRACE="$tmp/pool.weft" "$workload" 0 0 0.1 6 >/dev/null ||
		fail "tasks_workload with jobs failed"
	"$tool" stats "$tmp/pool.weft" >"$tmp/jobs.txt" ||
		fail "stats on jobs failed"
	sed -n '/^blocking pool:/,$p' "$tmp/jobs.txt"
	grep -q '^  blocking-queue .*"render-pdf"' "$tmp/jobs.txt" ||
		fail "jobs: no blocking-queue warning naming render-pdf"
	grep -Eq '^  pdf-submitter +[^ ]+ +render-pdf +6 ' "$tmp/jobs.txt" ||
		fail "jobs: the JOB column does not name render-pdf"
	if grep -Eq '^  pdf-submitter .* 0x[0-9a-f]+ ' "$tmp/jobs.txt"; then
		fail "jobs: an address for a named job"
	fi
fi

# A holder that ended long before the trace did (its detached jobs
# outlive it, the last 700 ms after it ended more than a second before):
# named as it was, not "task N".
if [ -n "$workload" ]; then
	WEFT_TRACE="$tmp/gone.weft" "$workload" 0 0 1.3 2d >/dev/null ||
		fail "tasks_workload with detached jobs failed"
	"$tool" stats "$tmp/gone.weft" >"$tmp/gone.txt" ||
		fail "stats on gone failed"
	sed -n '/^resources:/,/^$/p' "$tmp/gone.txt"
	grep -Eq '^      longest hold .* by task [0-9]+ \(pdf-submitter\)$' \
		"$tmp/gone.txt" || fail "gone: the holder not named"
fi

# Waits by design are not contention: a real runtime's tasks parked on a
# notify and asleep on the timer wheel (tasks_workload) wait long, with
# no holder; stats ranks neither among the most contended.
if [ -n "$workload" ]; then
	WEFT_TRACE="$tmp/design.weft" "$workload" 3 2 0.3 >/dev/null ||
		fail "tasks_workload failed"
	"$tool" stats "$tmp/design.weft" >"$tmp/design.txt" ||
		fail "stats on design failed"
	sed -n '/^resources:/,/^$/p' "$tmp/design.txt" >"$tmp/design.res"
	cat "$tmp/design.res"
	grep -q '^  (2 not ranked: timers, fds' "$tmp/design.res" ||
		fail "design: the waits by design not said"
	grep -q '^  (none: no lock' "$tmp/design.res" ||
		fail "design: something ranked"
	if grep -Eq '^  (notify|timer-wheel) ' "$tmp/design.res"; then
		fail "design: a notify or the timer wheel ranked as contended"
	fi
fi
echo "trace_res: ok"
