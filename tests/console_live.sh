#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/console_live.sh CONSOLE_LIVE_WORKLOAD WEFT_CONSOLE
#
# Live attach end to end, no terminal: start the workload (two busy
# workers, a task "lock-bad" holding a weft_mutex_t across an await, in
# rounds) in the background with a private socket directory, then
# `weft-console --once --after 2s` by pid, by unix:PATH and with no
# target (the only live process): every worker shows non-zero polls, the
# warnings view shows lock-held-across-await, the header says LIVE.  A
# server that sends garbage, and a target nobody listens on, end in a
# plain message and exit 2, not a crash.  The workload is killed by pid.
set -euo pipefail

workload=$1 console=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-console-live.XXXXXX")
pid=
cleanup()
{
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

"$workload" 60 >"$tmp/workload.out" &
pid=$!
sock=$XDG_RUNTIME_DIR/weft/$pid.sock
for _ in $(seq 100); do
	[[ -S "$sock" ]] && break
	sleep 0.05
done
[[ -S "$sock" ]] || fail "the workload's socket $sock never appeared"

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
"$workload" 10 >/dev/null &
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
