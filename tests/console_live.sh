#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/console_live.sh CONSOLE_WORKLOAD WEFT_CONSOLE
#
# Live attach end to end, no terminal: start the workload with --live (two busy
# workers, a task "lock-bad" holding a weft_mutex_t across an await, in
# rounds) in the background with a private socket directory, then
# `weft-console --once --after 2s` by pid, by unix:PATH and with no
# target (the only live process): every worker shows non-zero polls, the
# warnings view shows lock-held-across-await, the header says LIVE; a
# task's detail with its events.  Then the real console in tmux on the live
# process (skipped without tmux): views, sort, a / filter, Enter to the
# detail, space to pause (the screen stops) and resume, the timeline's
# spike list, a resize, every view down to 1x1 (console_sizes.sh), q
# exits 0 and the process lives on.  A
# server that sends garbage, and a target nobody listens on, end in a
# plain message and exit 2, not a crash.  The workload is killed by pid.
set -euo pipefail

workload=$1 console=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-console-live.XXXXXX")
pid=
cleanup()
{
	tmux -L "weft-console-live-$$" kill-server 2>/dev/null || true
	[[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
	[[ -n "$pid" ]] && wait "$pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
export LANG=C.UTF-8 LC_ALL=C.UTF-8
# Our own socket directory: no other weft process (ctest -j) shows up.
mkdir -m 700 "$tmp/xdg"
export XDG_RUNTIME_DIR=$tmp/xdg
unset WEFT_CONSOLE WEFT_CONSOLE_BIND WEFT_TRACE

fail()
{
	echo "console_live: FAIL: $*" >&2
	exit 1
}

tsock=weft-console-live-$$
tm()
{
	tmux -L "$tsock" "$@"
}

capture()
{
	tm capture-pane -p -t con >"$tmp/screen.txt"
}

# Poll the screen until @pattern shows, for up to 20 s (2 busy cores).
wait_for()
{
	local pattern=$1 what=$2 end=$((SECONDS + 20))
	while ((SECONDS < end)); do
		capture
		grep -q -- "$pattern" "$tmp/screen.txt" && return 0
		sleep 0.1
	done
	cat "$tmp/screen.txt" >&2
	fail "$what: no '$pattern' on screen"
}

# Poll until @pattern is gone.
wait_gone()
{
	local pattern=$1 what=$2 end=$((SECONDS + 20))
	while ((SECONDS < end)); do
		capture
		grep -q -- "$pattern" "$tmp/screen.txt" || return 0
		sleep 0.1
	done
	cat "$tmp/screen.txt" >&2
	fail "$what: '$pattern' still on screen"
}

# The header's uptime ("up 1.23s").
uptime_of()
{
	sed -n '1s/.*  up \([^ ]*\).*/\1/p' "$tmp/screen.txt"
}

# The real console in tmux attached to the live workload: views, sort,
# filter, detail, pause, the timeline's spike list, resize, q.
interactive()
{
	local up1 up2 end rows
	tm -f /dev/null new-session -d -s con -x 140 -y 40 \
		"'$console' '$pid'; echo \$? >'$tmp/rc'; sleep 60"
	wait_for "LIVE" "attached"
	wait_for "STEALS-IN" "workers view"
	end=$((SECONDS + 20))
	while ((SECONDS < end)); do
		capture
		check_workers_quiet "$tmp/screen.txt" && break
		sleep 0.2
	done
	check_workers "$tmp/screen.txt" "tmux live workers"
	expect "tmux live" "pid $pid" "$tmp/screen.txt"

	tm send-keys -t con t
	wait_for "LOCATION" "tasks view"
	wait_for "ticker" "a ticker task listed"
	tm send-keys -t con '>'
	wait_for "NAME[▲^]" "sorted by name"
	tm send-keys -t con i
	wait_for "NAME[▼v]" "sort inverted"

	# Filter as one types; Enter applies.
	tm send-keys -t con /
	wait_for "filter: _" "the filter prompt"
	tm send-keys -t con l o c k - b
	wait_for "filter: lock-b_" "the typed filter"
	tm send-keys -t con Enter
	wait_gone "filter: lock-b_" "the filter prompt closed"
	wait_for " lock-bad " "a lock-bad task listed"
	rows=$(awk '/ ticker / { c++ } END { print c + 0 }' "$tmp/screen.txt")
	[[ "$rows" -eq 0 ]] || { cat "$tmp/screen.txt" >&2; fail "the filter still lists tickers"; }

	# Enter: the selected task's detail, its lock and its events.
	tm send-keys -t con Enter
	wait_for "spawned at" "task detail"
	expect "tmux live detail" "lock-bad" "$tmp/screen.txt"
	wait_for "recent events" "the detail's events"
	tm send-keys -t con Escape
	wait_for "LOCATION" "back to the tasks"
	tm send-keys -t con Escape
	wait_for " ticker " "tickers again (the filter cleared)"

	# Space pauses: the screen stops (uptime frozen), then runs again.
	tm send-keys -t con w
	wait_for "STEALS-IN" "workers view again"
	tm send-keys -t con Space
	wait_for "PAUSED" "paused"
	up1=$(uptime_of)
	sleep 1.5
	capture
	up2=$(uptime_of)
	[[ -n "$up1" && "$up1" == "$up2" ]] || { cat "$tmp/screen.txt" >&2; fail "paused, yet the uptime moved ($up1 -> $up2)"; }
	grep -q "PAUSED" "$tmp/screen.txt" || fail "PAUSED went away by itself"
	tm send-keys -t con Space
	wait_for "LIVE" "resumed"
	end=$((SECONDS + 20))
	while ((SECONDS < end)); do
		capture
		[[ "$(uptime_of)" != "$up1" ]] && break
		sleep 0.2
	done
	[[ "$(uptime_of)" != "$up1" ]] || { cat "$tmp/screen.txt" >&2; fail "resumed, yet the uptime is stuck"; }

	# Warnings, live.
	tm send-keys -t con x
	wait_for "lock-held-across-await" "the warnings view"

	# The timeline: a cursor, the polls of its bucket, a task.
	tm send-keys -t con m
	wait_for "time in polls per" "timeline view"
	wait_for "cursor: " "the timeline's cursor line"
	tm send-keys -t con h
	wait_gone "(newest)" "the cursor moved back"
	tm send-keys -t con Enter
	wait_for "polls in the 100ms" "the spike list"
	tm send-keys -t con Escape
	wait_for "time in polls per" "back to the timeline"

	# Resize: drawn again at the new size.
	tm resize-window -t con -x 90 -y 24
	wait_resized 90 24

	# Every view at every small size, live (console_sizes.sh).
	every_size

	tm send-keys -t con q
	end=$((SECONDS + 20))
	while ((SECONDS < end)) && [[ ! -s "$tmp/rc" ]]; do
		sleep 0.1
	done
	[[ -s "$tmp/rc" ]] || { capture; cat "$tmp/screen.txt" >&2; fail "q did not exit"; }
	[[ "$(cat "$tmp/rc")" == 0 ]] || fail "q exited $(cat "$tmp/rc")"
	tm kill-server 2>/dev/null || true
	kill -0 "$pid" 2>/dev/null || fail "the workload died when the console quit"
}

"$workload" --live 60 >"$tmp/workload.out" &
pid=$!
sock=$XDG_RUNTIME_DIR/weft/$pid.sock
for _ in $(seq 100); do
	[[ -S "$sock" ]] && break
	sleep 0.05
done
[[ -S "$sock" ]] || fail "the workload's socket $sock never appeared"

check_workers_quiet()
{
	local file=$1 n rows
	n=$(sed -n 's/^ workers \([0-9]*\) .*/\1/p' "$file" | head -1)
	[[ -n "$n" && "$n" -gt 0 ]] || return 1
	rows=$(awk '$1 ~ /^[0-9]+$/ && $2 ~ /^(polling|searching|parked)$/ \
		    && $4 > 0 { c++ } END { print c + 0 }' "$file")
	[[ "$rows" -eq "$n" ]]
}

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

"$console" --once --view workers --after 2s "$pid" </dev/null >"$tmp/w.txt"
check_workers "$tmp/w.txt" "by pid, workers"
expect "by pid" "LIVE" "$tmp/w.txt"
expect "by pid" "pid $pid" "$tmp/w.txt"
"$console" --once --view warnings --after 2s "$pid" </dev/null >"$tmp/x.txt"
expect "by pid, warnings" "lock-held-across-await" "$tmp/x.txt"
"$console" --once --view tasks --after 1s "unix:$sock" </dev/null >"$tmp/t.txt"
expect "unix:PATH, tasks" "ticker" "$tmp/t.txt"
"$console" --once --view workers --after 1s </dev/null >"$tmp/n.txt"
check_workers "$tmp/n.txt" "no target, workers"
expect "no target" "pid $pid" "$tmp/n.txt"

# The detail of the newest lock-bad (the list's first with this sort and
# filter): its lock and its events.  In one session: a new subscriber's
# probe knows only the tasks it has seen since.
"$console" --once --view detail --filter lock-bad --sort id --invert \
	--after 1500ms "$pid" </dev/null >"$tmp/d.txt"
expect "live detail" "lock-bad" "$tmp/d.txt"
expect "live detail" "recent events" "$tmp/d.txt"
expect "live detail" "lock-acquire" "$tmp/d.txt"

# Interactive, in tmux, on the live process (skipped without tmux).
if command -v tmux >/dev/null 2>&1; then
	# shellcheck source=tests/console_sizes.sh
	. "$(dirname "${BASH_SOURCE[0]}")/console_sizes.sh"
	interactive
else
	echo "console_live: tmux not found: interactive part skipped"
fi

# Nobody listening: a plain message, exit 2.
rc=0
"$console" --once --after 500ms "unix:$tmp/nosuch.sock" >/dev/null \
	2>"$tmp/err.txt" || rc=$?
[[ $rc -eq 2 ]] || fail "no server: exit $rc, not 2"
expect "no server" "cannot connect" "$tmp/err.txt"

# A server that sends garbage (python3 only; skipped without it).
if command -v python3 >/dev/null 2>&1; then
	python3 - "$tmp/bad.sock" <<'PY' &
import socket, sys, os
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8); s.settimeout(10)
try:
    while True:
        c, _ = s.accept()
        c.sendall(b"\xff" * 64 + os.urandom(4096))
        # Stay open until the console hangs up, so it reads the garbage
        # (closing at once could fail its Subscribe with EPIPE first).
        c.settimeout(5)
        try:
            while c.recv(4096):
                pass
        except Exception:
            pass
        c.close()
except Exception:
    pass
PY
	bad=$!
	for _ in $(seq 100); do
		[[ -S "$tmp/bad.sock" ]] && break
		sleep 0.05
	done
	rc=0
	"$console" --once --after 1500ms "unix:$tmp/bad.sock" >/dev/null \
		2>"$tmp/bad.txt" || rc=$?
	kill "$bad" 2>/dev/null || true
	wait "$bad" 2>/dev/null || true
	[[ $rc -eq 2 ]] || { cat "$tmp/bad.txt" >&2; fail "garbage: exit $rc, not 2"; }
	expect "garbage" "bad record" "$tmp/bad.txt"
fi

# A second live process: no target lists both and exits 2.
"$workload" --live 10 >/dev/null &
pid2=$!
for _ in $(seq 100); do
	[[ -S "$XDG_RUNTIME_DIR/weft/$pid2.sock" ]] && break
	sleep 0.05
done
rc=0
"$console" --once </dev/null >/dev/null 2>"$tmp/list.txt" || rc=$?
kill "$pid2" 2>/dev/null || true
wait "$pid2" 2>/dev/null || true
[[ $rc -eq 2 ]] || fail "two processes, no target: exit $rc, not 2"
expect "two processes" "$pid2" "$tmp/list.txt"
expect "two processes" "several" "$tmp/list.txt"

kill "$pid"
wait "$pid" 2>/dev/null || true
pid=
echo "console_live: ok"
