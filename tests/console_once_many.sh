#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/console_once_many.sh WEFT_CONSOLE_TARGET WEFT_CONSOLE [TASKS]
#
# `weft-console --once` on a process with more tasks than one record of
# a full update holds (issue 21): the probe's server streams such an
# update, a first page then the rest over the next passes, and --once
# must wait for the stream's end, not print after its fixed wait with a
# part of the list.  weft-console-target holds TASKS idle tasks (default
# 100,000: the stream takes a few collector passes); --once --view tasks
# --after 100ms must list every one of them, and say nothing of a
# partial list on stderr.  --view task:ID for the newest idle task (the
# highest id, the last the stream sends) must find it: exit 0.
set -euo pipefail

target=$1 console=$2 tasks=${3:-100000}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-console-once-many.XXXXXX")
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

fail()
{
	echo "console_once_many: FAIL: $*" >&2
	exit 1
}

"$target" --tasks "$tasks" --sleepers 0 --spinners 0 --seconds 300 \
	>"$tmp/target.out" &
tpid=$!
end=$((SECONDS + 60))
until grep -q '^ready' "$tmp/target.out"; do
	kill -0 "$tpid" 2>/dev/null || fail "the target died"
	((SECONDS < end)) || fail "the target was not ready in 60 s"
	sleep 0.2
done

"$console" --once --view tasks --after 100ms "$tpid" \
	>"$tmp/tasks.txt" 2>"$tmp/tasks.err" ||
	fail "--once --view tasks exited $? ($(head -c 300 "$tmp/tasks.err"))"
! grep -q "partial" "$tmp/tasks.err" ||
	fail "--once said: $(cat "$tmp/tasks.err")"
# A row a task: its id first, then its state.
rows=$(grep -cE '^ *[0-9]+ +[a-z]' "$tmp/tasks.txt" || true)
((rows >= tasks)) ||
	fail "--once listed $rows task rows of the $tasks idle tasks"
last=$(grep -oE '^ *[0-9]+ ' "$tmp/tasks.txt" | sort -n | tail -1 | tr -d ' ')
[[ -n "$last" ]] || fail "no task id in the list"
"$console" --once --view "task:$last" --after 100ms "$tpid" \
	>"$tmp/task.txt" 2>"$tmp/task.err" ||
	fail "--once --view task:$last exited non-zero ($(head -c 300 "$tmp/task.err"))"
echo "console_once_many: $rows rows for $tasks idle tasks; task $last found"
echo "console_once_many: ok"
