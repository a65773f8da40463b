#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/console_tmux.sh CONSOLE_WORKLOAD WEFT_CONSOLE
#
# End to end: record tests/console_workload.c through WEFT_TRACE (two
# busy workers, a task "lock-bad" holding a weft_mutex_t across an
# await), then check the real console on that file, first with --once
# (no terminal), then interactive inside tmux (send-keys, capture-pane):
# the workers view lists every worker with non-zero polls, the tasks view
# shows the named task, the warnings view shows lock-held-across-await,
# the task detail names the lock and lists the task's events, the
# timeline's cursor picks a bucket whose polls list and lead to a task, a
# resize redraws at the new size (down to 1x1 in every view:
# console_sizes.sh), and q exits 0.  Exits 77 (ctest
# SKIP_RETURN_CODE) where tmux is absent.
set -euo pipefail

workload=$1 console=$2
if ! command -v tmux >/dev/null 2>&1; then
	echo "console_tmux: tmux not found: skipped"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-console-tmux.XXXXXX")
sock=weft-console-$$
cleanup()
{
	tmux -L "$sock" kill-server 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trace=$tmp/run.weft
export LANG=C.UTF-8 LC_ALL=C.UTF-8

fail()
{
	echo "console_tmux: FAIL: $*" >&2
	exit 1
}

WEFT_TRACE=$trace "$workload"
[[ -s "$trace" ]] || fail "WEFT_TRACE wrote nothing"

# The workers shown in the header ("workers N"), and every worker row
# (index, state, ..., POLLS column) with polls above zero.
check_workers()
{
	local file=$1 n rows
	n=$(sed -n 's/^ workers \([0-9]*\) .*/\1/p' "$file" | head -1)
	[[ -n "$n" && "$n" -gt 0 ]] || { cat "$file" >&2; fail "$2: no worker count"; }
	rows=$(awk '$1 ~ /^[0-9]+$/ && $2 ~ /^(polling|searching|parked)$/ \
		    && $4 > 0 { c++ } END { print c + 0 }' "$file")
	[[ "$rows" -eq "$n" ]] || {
		cat "$file" >&2
		fail "$2: $rows of $n workers listed with polls"
	}
}

expect()
{
	grep -q -- "$2" "$3" || { cat "$3" >&2; fail "$1: no '$2'"; }
}

# --once: no terminal at all.
"$console" --once --view workers --replay "$trace" </dev/null >"$tmp/w.txt"
check_workers "$tmp/w.txt" "--once workers"
"$console" --once --view tasks --replay "$trace" </dev/null >"$tmp/t.txt"
expect "--once tasks" "lock-bad" "$tmp/t.txt"
"$console" --once --view warnings --replay "$trace" </dev/null >"$tmp/x.txt"
expect "--once warnings" "lock-held-across-await" "$tmp/x.txt"
"$console" --once --view tasks --after 100ms --replay "$trace" >"$tmp/t1.txt"
"$console" --once --view timeline --ascii --replay "$trace" >"$tmp/l.txt"
expect "--once timeline" "time in polls per" "$tmp/l.txt"
id=$(awk '$2 == "lock-bad" { print $1; exit }' "$tmp/t.txt")
[[ -n "$id" ]] || fail "no id for lock-bad"
"$console" --once --view "task:$id" --replay "$trace" >"$tmp/d.txt"
expect "--once task detail" "poll time" "$tmp/d.txt"
expect "--once task detail" "lock-held-across-await" "$tmp/d.txt"
# The lock it held (name, where taken, how long) and its recent events.
# Held across one await at least: more when a steal took the task off
# the thread that locked it, where it waits (1 ms sleeps) to come back.
expect "--once task detail" "locks held across an await: [1-9][0-9]*$" "$tmp/d.txt"
expect "--once task detail" '"accounts"  taken at .*console_workload.c:[0-9]*  held ' "$tmp/d.txt"
expect "--once task detail" "recent events" "$tmp/d.txt"
expect "--once task detail" "lock-acquire" "$tmp/d.txt"
expect "--once task detail" "polled .* -> ready" "$tmp/d.txt"
# The spike with the longest poll: its polls, longest first.
"$console" --once --view spike --replay "$trace" >"$tmp/s.txt"
expect "--once spike" "polls in the 100ms at" "$tmp/s.txt"
awk '/^ +POLL +TASK/ { on = 1; next } on && NF >= 6 { print $1 }' "$tmp/s.txt" >"$tmp/s.col"
[[ -s "$tmp/s.col" ]] || { cat "$tmp/s.txt" >&2; fail "--once spike: no polls listed"; }
# The tasks by spawn site, while the tickers are live (600 ms in): one
# row, the workload's spawn line, its 16 live tickers, whichever of them
# a timer had just woken (IDLE, SCHED and RUN add up to 16).
"$console" --once --ascii --view sites --after 600ms --replay "$trace" >"$tmp/g.txt"
expect "--once sites" "SPAWNED AT .*LIVEv .*MOST PARKED AT" "$tmp/g.txt"
expect "--once sites" "console_workload.c:[0-9]* *ticker *[0-9]* *[0-9]* *[0-9]* *16 " "$tmp/g.txt"
awk '/console_workload.c:[0-9]* *ticker/ { for (i = 1; i <= NF; i++) if ($i == "ticker") { s = $(i+1) + $(i+2) + $(i+3); ok = (s == 16 && $(i+4) == 16) } }
     END { exit !ok }' "$tmp/g.txt" || { cat "$tmp/g.txt" >&2; fail "--once sites: the tickers' states do not add up to 16"; }
rc=0
"$console" --once --view nosuch --replay "$trace" >/dev/null 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "an unknown view exits $rc, not 2"

# Interactive, in tmux.
# shellcheck source=tests/console_sizes.sh
. "$(dirname "${BASH_SOURCE[0]}")/console_sizes.sh"
tm()
{
	tmux -L "$sock" "$@"
}
tm -f /dev/null new-session -d -s con -x 120 -y 40 \
	"'$console' --replay '$trace' --speed 8; echo \$? >'$tmp/rc'; sleep 30"

capture()
{
	tm capture-pane -p -t con >"$tmp/screen.txt"
}

# Wait (up to 10 s) until the screen shows @pattern.
wait_for()
{
	local pattern=$1 what=$2
	for _ in $(seq 100); do
		capture
		grep -q -- "$pattern" "$tmp/screen.txt" && return 0
		sleep 0.1
	done
	cat "$tmp/screen.txt" >&2
	fail "$what: no '$pattern' on screen"
}

wait_for "(end)" "replay to the end"
tm send-keys -t con w
wait_for "STEALS-IN" "workers view"
check_workers "$tmp/screen.txt" "tmux workers"
tm send-keys -t con t
wait_for "LOCATION" "tasks view"
expect "tmux tasks" "lock-bad" "$tmp/screen.txt"
# Resources (r): the view and its columns (the workload has no resources
# until the runtime emits them; test_console_model checks the rows).
# s: the tasks by spawn site; s again: back to the task list.
tm send-keys -t con s
wait_for "MOST PARKED AT" "tasks by spawn site"
expect "tmux sites" "Tasks by spawn site" "$tmp/screen.txt"
tm send-keys -t con s
wait_for "LOCATION" "back to the tasks view"
tm send-keys -t con r
wait_for "WAIT P99" "resources view"
tm send-keys -t con x
wait_for "DETAIL" "warnings view"
expect "tmux warnings" "lock-held-across-await" "$tmp/screen.txt"
# Timeline: the cursor leaves the newest bucket, Enter lists the polls
# of the bucket under it, Enter opens a poll's task, Esc twice goes back.
tm send-keys -t con m
wait_for "time in polls per" "timeline view"
wait_for "(newest)" "the cursor on the newest bucket"
tm send-keys -t con h h
for _ in $(seq 100); do
	capture
	grep -q "cursor: " "$tmp/screen.txt" && ! grep -q "(newest)" "$tmp/screen.txt" && break
	sleep 0.1
done
grep -q "(newest)" "$tmp/screen.txt" && { cat "$tmp/screen.txt" >&2; fail "h did not move the cursor"; }
tm send-keys -t con Enter
wait_for "polls in the 100ms" "spike list"
wait_for "ticker" "a poll of the spike"
tm send-keys -t con Enter
wait_for "spawned at" "task detail from the spike"
tm send-keys -t con Escape
wait_for "polls in the 100ms" "back to the spike list"
tm send-keys -t con Escape
wait_for "time in polls per" "back to the timeline"
tm send-keys -t con '?'
wait_for "any key closes" "help overlay"
expect "help" "h l, left right" "$tmp/screen.txt"
expect "help" "tasks by spawn site" "$tmp/screen.txt"
tm send-keys -t con Escape
tm send-keys -t con w
wait_for "STEALS-IN" "workers view again"

# Resize: the screen is drawn again at the new size.
tm resize-window -t con -x 90 -y 24
wait_resized 90 24
grep -q "REPLAY" "$tmp/screen.txt" || { cat "$tmp/screen.txt" >&2; fail "no REPLAY mode after the resize"; }
check_workers "$tmp/screen.txt" "workers after resize"

# Every view at every small size (the header once read row 1 of a 1-row
# grid: a heap overflow under ASan), then back: still drawing.
every_size
check_workers "$tmp/screen.txt" "workers after the small sizes"

tm send-keys -t con q
for _ in $(seq 50); do
	[[ -s "$tmp/rc" ]] && break
	sleep 0.1
done
[[ -s "$tmp/rc" ]] || { capture; cat "$tmp/screen.txt" >&2; fail "q did not exit"; }
[[ "$(cat "$tmp/rc")" == 0 ]] || fail "q exited $(cat "$tmp/rc")"
echo "console_tmux: ok"
