#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/trace_spawn_names.sh WEFT_BENCH WEFT_TRACE
#
# A task born and finished between two updates is recorded without its
# spawn site (its SPAWN event names it): weft-trace names it by that
# site.  Records weft-bench's spawn_many_local (10,000 tasks an
# iteration, most of them finished before the next update), then checks
# that no poll among stats' 50 longest is of a task left unnamed ("task N
# task N  ?:0" before: an audit's timer flood had 143,000 of 400,000).
set -euo pipefail

bench=$1 tool=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-trace-names.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail()
{
	echo "trace_spawn_names: FAIL: $*" >&2
	exit 1
}

WEFT_TRACE=$tmp/run.weft "$bench" --shapes spawn_many_local --iters 4 \
	--warmup 0 --workers 2 --probe=events >/dev/null 2>&1 ||
	fail "weft-bench failed"
[[ -s "$tmp/run.weft" ]] || fail "nothing recorded"
"$tool" stats --top 50 "$tmp/run.weft" >"$tmp/stats"
sed -n '/^longest polls:/,/^$/p' "$tmp/stats" >"$tmp/longest"
n=$(grep -c ' ns  worker ' "$tmp/longest" || true)
((n >= 10)) || { cat "$tmp/stats" >&2; fail "$n longest polls listed"; }
if grep -E ' task ([0-9]+) task \1  \?:0$' "$tmp/longest" >&2; then
	fail "polls of unnamed tasks among the longest"
fi
grep -q ' spawn_outer  .*shape_sched.c:' "$tmp/longest" ||
	{ cat "$tmp/longest" >&2; fail "the outer task unnamed"; }
echo "trace_spawn_names: ok ($n polls, every task named)"
