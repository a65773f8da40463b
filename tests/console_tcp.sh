#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/console_tcp.sh CONSOLE_WORKLOAD WEFT_CONSOLE
#
# The real console over TCP (issue 19), no terminal: the workload listens
# on WEFT_CONSOLE_BIND=127.0.0.1:0 with no WEFT_CONSOLE_TOKEN, so its
# server makes a token and names its file on stderr (mode 0600, beside the
# socket).  `weft-console --once tcp://127.0.0.1:PORT` with no token, and
# with a wrong one, exits 2 having read nothing; with --token-file, and
# with WEFT_CONSOLE_TOKEN in its environment, it shows the workers.  When
# the workload ends, its token file goes with it.
set -euo pipefail

workload=$1 console=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-console-tcp.XXXXXX")
pid=
cleanup()
{
	[[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
	[[ -n "$pid" ]] && wait "$pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
export LANG=C.UTF-8 LC_ALL=C.UTF-8
mkdir -m 700 "$tmp/xdg"
export XDG_RUNTIME_DIR=$tmp/xdg
unset WEFT_CONSOLE WEFT_CONSOLE_TOKEN WEFT_TRACE

fail()
{
	echo "console_tcp: FAIL: $*" >&2
	[[ -f "$tmp/workload.err" ]] && cat "$tmp/workload.err" >&2
	exit 1
}

WEFT_CONSOLE_BIND=127.0.0.1:0 "$workload" --live 8 >/dev/null \
	2>"$tmp/workload.err" &
pid=$!
tokfile=$XDG_RUNTIME_DIR/weft/$pid.token
for _ in $(seq 100); do
	grep -q "(port [0-9]*)" "$tmp/workload.err" 2>/dev/null &&
		[[ -s "$tokfile" ]] && break
	sleep 0.05
done
port=$(sed -n 's/.*listening on 127.0.0.1:0 (port \([0-9]*\)).*/\1/p' \
	"$tmp/workload.err" | head -1)
[[ -n "$port" ]] || fail "no port said on stderr"
grep -q "token in $tokfile" "$tmp/workload.err" ||
	fail "the token file's path was not said on stderr"
grep -q "every local user can reach it" "$tmp/workload.err" ||
	fail "no warning for the loopback bind"
[[ "$(stat -c %a "$tokfile")" == 600 ]] || fail "token file mode $(stat -c %a "$tokfile")"

# No token, a wrong one: exit 2, nothing shown.
for how in none wrong; do
	rc=0
	if [[ $how == none ]]; then
		"$console" --once --after 1s "tcp://127.0.0.1:$port" \
			</dev/null >"$tmp/out.txt" 2>"$tmp/err.txt" || rc=$?
	else
		echo "0123456789abcdef0123456789abcdef" >"$tmp/wrong"
		"$console" --once --after 1s "tcp://127.0.0.1:$port" \
			--token-file "$tmp/wrong" \
			</dev/null >"$tmp/out.txt" 2>"$tmp/err.txt" || rc=$?
	fi
	[[ $rc -eq 2 ]] || { cat "$tmp/out.txt" "$tmp/err.txt" >&2; fail "$how: exit $rc, not 2"; }
	! grep -q "pid $pid" "$tmp/out.txt" || fail "$how: the process was shown"
	grep -q "token" "$tmp/err.txt" || { cat "$tmp/err.txt" >&2; fail "$how: the error does not name the token"; }
done

# The right token: from its file, then from the environment.
"$console" --once --view workers --after 1s "tcp://127.0.0.1:$port" \
	--token-file "$tokfile" </dev/null >"$tmp/w.txt" ||
	fail "--token-file: exit $?"
grep -q "pid $pid" "$tmp/w.txt" || { cat "$tmp/w.txt" >&2; fail "--token-file: no 'pid $pid'"; }
WEFT_CONSOLE_TOKEN=$(cat "$tokfile") "$console" --once --view workers \
	--after 1s "tcp://127.0.0.1:$port" </dev/null >"$tmp/e.txt" ||
	fail "WEFT_CONSOLE_TOKEN: exit $?"
grep -q "pid $pid" "$tmp/e.txt" || { cat "$tmp/e.txt" >&2; fail "WEFT_CONSOLE_TOKEN: no 'pid $pid'"; }

# The workload ends by itself (8 s): killed, it would leave the file.
wait "$pid" || fail "the workload exited $?"
pid=
[[ ! -e "$tokfile" ]] || fail "the token file outlived its process"
echo "console_tcp: ok (port $port)"
