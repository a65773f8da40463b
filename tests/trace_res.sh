#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/trace_res.sh TEST_WIRE WEFT_TRACE
#
# weft-trace and resources (issue 18), on a trace written by
# `test_wire --write-resources` (no runtime: the probe does not emit
# resources in this test): tasks prints WAITING ON with the resource's
# kind and name or file:line; stats lists the most contended resources
# with their holders and waiters; dump names the RES_* events' fields.
set -euo pipefail

test_wire=$1 tool=$2
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
echo "trace_res: ok"
