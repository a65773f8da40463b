#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/console_workers.sh CONSOLE_WORKLOAD WEFT_CONSOLE
#
# As many workers in the console as in the runtime (issue 20): the
# workload on 100 workers (--live SECS 100: each worker polls a task
# before "ready"), then `weft-console --once --view workers` by pid lists
# all 100, each with its polls, the ones past 63 too, under a header that
# says 100.  Then, where tmux is, the real console in a window 140 rows
# tall shows the same 100 rows.  The workload is killed by pid.
set -euo pipefail

workload=$1 console=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-console-workers.XXXXXX")
tsock=weft-console-workers-$$
pid=
cleanup()
{
	tmux -L "$tsock" kill-server 2>/dev/null || true
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
	echo "console_workers: FAIL: $*" >&2
	exit 1
}

# Every worker row of @file (index, state, queue, polls ...): "N POLLS".
rows_of()
{
	awk '$1 ~ /^[0-9]+$/ && $2 ~ /^(polling|searching|parked)$/ \
	     { print $1, $4 }' "$1"
}

# @file lists workers 0..99 once each, each with polls.
check_100()
{
	local file=$1 what=$2 n
	n=$(sed -n 's/^ workers \([0-9]*\) .*/\1/p' "$file" | head -1)
	[[ "$n" == 100 ]] || { cat "$file" >&2; fail "$what: header says '$n' workers"; }
	rows_of "$file" | awk '
		$2 > 0 && !seen[$1]++ { c++ }
		END { exit !(c == 100) }' || {
		cat "$file" >&2
		fail "$what: not 100 distinct workers with polls"
	}
	rows_of "$file" | awk '$1 >= 64 && $1 <= 99 && $2 > 0 { c++ }
		END { exit !(c == 36) }' || fail "$what: workers 64..99 without polls"
}

"$workload" --live 60 100 >"$tmp/workload.out" &
pid=$!
sock=$XDG_RUNTIME_DIR/weft/$pid.sock
for _ in $(seq 200); do
	[[ -S "$sock" ]] && grep -q ready "$tmp/workload.out" && break
	sleep 0.05
done
[[ -S "$sock" ]] || fail "the workload's socket $sock never appeared"
grep -q ready "$tmp/workload.out" || fail "the workload's workers never all polled"

"$console" --once --view workers --after 1s "$pid" </dev/null >"$tmp/w.txt"
check_100 "$tmp/w.txt" "--once"
echo "console_workers: --once lists 100 workers"

if ! command -v tmux >/dev/null; then
	echo "console_workers: no tmux, the interactive console not run"
	exit 0
fi
tmux -L "$tsock" -f /dev/null new-session -d -s con -x 150 -y 140 \
	"'$console' '$pid'; sleep 60"
end=$((SECONDS + 20))
while ((SECONDS < end)); do
	tmux -L "$tsock" capture-pane -p -t con >"$tmp/screen.txt"
	[[ $(rows_of "$tmp/screen.txt" | wc -l) -ge 100 ]] && break
	sleep 0.2
done
check_100 "$tmp/screen.txt" "tmux, 140 rows"
echo "console_workers: a 140-row console lists 100 workers"
