#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/trace_slice.sh SLICE_WORKLOAD WEFT_TRACE PROTO_DIR [WEFT_CONSOLE]
#
# weft-trace slice and export --from/--to (issue 21).  Records 2 s of a
# workload (slice_workload.c: sleepers parked from start to end, a ticker
# all along), slices 0.6 s .. 1.4 s of it, and checks that the slice
# opens alone: info reads it, its duration is within the window, its
# events are exactly the whole's stamped within the window (fewer than
# the whole's); the sleepers, which have no event in the window, are
# named by tasks, by the console's replay and by protoc --decode (the
# state at --from); a slice of a slice reads too; a state of 40,000
# tasks is split into several records.  Then export --from/--to: valid
# JSON, every time inside the window, fewer slices than the whole's.  A
# cut-short file slices up to its last whole record.  Bad arguments:
# exit 2, one line on stderr, no output left behind.
set -euo pipefail

workload=$1 tool=$2 proto=$3 console=${4:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-trace-slice.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trace=$tmp/run.weft
from=0.6 to=1.4

fail()
{
	echo "trace_slice: FAIL: $*" >&2
	exit 1
}

expect()
{
	local what=$1 pattern=$2 file=$3

	grep -Eq -- "$pattern" "$file" || {
		cat "$file" >&2
		fail "$what: no match for '$pattern'"
	}
}

# The events of FILE (dump --abs: monotonic ns, one a line) into OUT.
stamps()
{
	"$tool" dump --abs "$1" | awk '{ print $1 }' >"$2"
}

WEFT_TRACE=$trace "$workload" 2 >/dev/null
[[ -s "$trace" ]] || fail "WEFT_TRACE wrote nothing"

"$tool" slice "$trace" --from "$from" --to "$to" -o "$tmp/s.weft" >"$tmp/slice.txt"
expect slice "^$tmp/s\\.weft: 0\\.600000 s to 1\\.400000 s of .*: [1-9][0-9]* events, [0-9]+ updates; at its start [1-9][0-9]* live tasks" \
	"$tmp/slice.txt"
[[ -s "$tmp/s.weft" ]] || fail "slice wrote nothing"
ls "$tmp"/s.weft.* >/dev/null 2>&1 && fail "slice left its temporary file"

"$tool" info "$tmp/s.weft" >"$tmp/info.txt"
expect info '^format: +WEFTTRC1 version 1' "$tmp/info.txt"
expect info '^process: +slice_workload ' "$tmp/info.txt"
dur=$(awk '/^duration:/ { print $2 }' "$tmp/info.txt")
awk -v d="$dur" -v f="$from" -v t="$to" 'BEGIN { exit !(d > 0 && d <= t - f) }' ||
	fail "slice lasts $dur s, not within the $from .. $to s window"
n=$(awk '/^events:/ { print $2 }' "$tmp/info.txt")

# The whole's events stamped within the window, counted from its first.
stamps "$trace" "$tmp/all.txt"
stamps "$tmp/s.weft" "$tmp/some.txt"
total=$(wc -l <"$tmp/all.txt")
want=$(awk -v f="$from" -v t="$to" 'NR == 1 { lo = $1 + f * 1e9; hi = $1 + t * 1e9 }
	$1 >= lo && $1 <= hi { n++ } END { print n + 0 }' "$tmp/all.txt")
[[ $n -gt 0 && $n -lt $total ]] || fail "slice has $n events of the whole's $total"
# Await sites (issue 21): the window's blips park at a yield announced
# before it (AWAIT_SITE): the slice carries the announcement, once, just
# before the first POLL naming it, and its dump names every such poll's
# place (none "site=unknown").  Those are its events more than the
# whole's within the window (the whole's own announcements within it
# aside: a worker's first blip).
"$tool" dump "$tmp/s.weft" >"$tmp/s-dump.txt"
inside=$("$tool" dump --abs "$trace" | awk -v f="$from" -v t="$to" \
	'NR == 1 { lo = $1 + f * 1e9; hi = $1 + t * 1e9 }
	$3 == "await-site" && $1 >= lo && $1 <= hi { n++ } END { print n + 0 }')
carried=$(($(grep -c ' await-site ' "$tmp/s-dump.txt" || true) - inside))
[[ $carried -ge 1 ]] || fail "slice: no await-site announcement carried"
expect "slice dump" ' poll [0-9]+\(blip\) dur=[0-9]+ns pending yielded.* (at|line)=' "$tmp/s-dump.txt"
! grep -q 'site=unknown' "$tmp/s-dump.txt" || fail "slice dump: a site not known"
[[ $n -eq $((want + carried)) ]] || fail "slice has $n events, the whole $want within the window (and $carried announcements)"
[[ $(wc -l <"$tmp/some.txt") -eq $n ]] || fail "dump of the slice: not $n events"
# Every one inside the window.
awk -v f="$from" -v t="$to" -v first="$(head -1 "$tmp/all.txt")" \
	'BEGIN { lo = first + f * 1e9; hi = first + t * 1e9 }
	$1 < lo || $1 > hi { bad++ } END { exit bad > 0 }' "$tmp/some.txt" ||
	fail "slice holds events outside the window"

# The sleepers are parked from the start to the end with no event in the
# window: only the state at --from names them.
"$tool" tasks "$tmp/s.weft" >"$tmp/tasks.txt"
rows=$(grep -Ec '^ *[0-9]+  sleeper +idle +.*slice_workload\.c:[0-9]+' "$tmp/tasks.txt" || true)
[[ $rows -eq 8 ]] || { cat "$tmp/tasks.txt" >&2; fail "tasks: $rows sleepers named, expected 8"; }
expect tasks '^ *[0-9]+  ticker ' "$tmp/tasks.txt"
"$tool" stats "$tmp/s.weft" >"$tmp/stats.txt"
expect stats 'ticker +[^ ]*slice_workload\.c:[0-9]+$' "$tmp/stats.txt"
if [[ -n "$console" ]]; then
	"$console" --replay "$tmp/s.weft" --once --view tasks --after 0 \
		--width 160 >"$tmp/console.txt"
	rows=$(grep -c ' sleeper ' "$tmp/console.txt" || true)
	[[ $rows -eq 8 ]] || { cat "$tmp/console.txt" >&2; fail "console replay: $rows sleepers, expected 8"; }
fi

# The state is encoded by hand: protoc reads the slice as a weft.v1.Trace,
# the sleepers' names in it, where protoc exists.
if command -v protoc >/dev/null 2>&1; then
	protoc --decode=weft.v1.Trace -I"$proto" "$proto/weft.proto" \
		<"$tmp/s.weft" >"$tmp/protoc.txt"
	rows=$(grep -c 'name: "sleeper"' "$tmp/protoc.txt" || true)
	[[ $rows -ge 8 ]] || fail "protoc: $rows sleepers named, expected 8"
fi

# A slice of the slice: its times count from its own first event.
"$tool" slice "$tmp/s.weft" --from 0.2 --to 0.4 -o "$tmp/ss.weft" >/dev/null
"$tool" tasks "$tmp/ss.weft" >"$tmp/tasks2.txt"
rows=$(grep -Ec '^ *[0-9]+  sleeper ' "$tmp/tasks2.txt" || true)
[[ $rows -eq 8 ]] || { cat "$tmp/tasks2.txt" >&2; fail "slice of a slice: $rows sleepers"; }

# A state too large for one record (40,000 parked tasks, about 6 MB)
# goes out as several, as the recorder splits a full update: the tasks
# are there at the slice's start.  The window begins 0.5 s after every
# sleeper was polled ("ready NS", on the trace's clock), by when the
# updates have named them all (the collector takes a few passes): at
# least 30,000 are asked for, enough for two records.
WEFT_TRACE=$tmp/big.weft "$workload" 1 40000 >"$tmp/big-out.txt"
ready=$(sed -n 's/^ready //p' "$tmp/big-out.txt")
first=$({ "$tool" dump --abs "$tmp/big.weft" 2>/dev/null || true; } | head -1 | awk '{ print $1 }')
[[ -n "$ready" && -n "$first" ]] || fail "big: no ready line or no first event"
bfrom=$(awk -v r="$ready" -v f="$first" 'BEGIN { printf "%.3f", (r - f) / 1e9 + 0.5 }')
bto=$(awk -v f="$bfrom" 'BEGIN { printf "%.3f", f + 0.1 }')
"$tool" slice "$tmp/big.weft" --from "$bfrom" --to "$bto" -o "$tmp/big-s.weft" >"$tmp/big.txt"
live=$(sed -nE 's/.* at its start ([0-9]+) live tasks.*/\1/p' "$tmp/big.txt")
written=$(sed -nE 's/.* ([0-9]+) updates;.*/\1/p' "$tmp/big.txt")
"$tool" info "$tmp/big-s.weft" >"$tmp/big-info.txt"
records=$(sed -nE 's/^frames: .* ([0-9]+) updates.*/\1/p' "$tmp/big-info.txt")
[[ $records -gt $written ]] || fail "big slice: the state in one record ($records update records, $written updates)"
"$tool" tasks "$tmp/big-s.weft" --at 0 >"$tmp/big-tasks.txt"
rows=$(grep -c '  sleeper ' "$tmp/big-tasks.txt" || true)
[[ $rows -ge 30000 && $rows -lt $live ]] || {
	cat "$tmp/big.txt" >&2
	fail "big slice: $rows sleepers at its start of $live live tasks, expected 30,000 to 40,000"
}
echo "trace_slice: a state of $live tasks in $((records - written + 1)) records"

# export --from/--to: valid JSON, every time within the window (in us
# from the whole's first event), fewer polls than the whole export.
"$tool" export --chrome "$trace" -o "$tmp/all.json"
"$tool" export --chrome "$trace" --from "$from" --to "$to" -o "$tmp/win.json"
python3 - "$tmp/all.json" "$tmp/win.json" "$from" "$to" <<'PY'
import json, sys

whole = json.load(open(sys.argv[1]))["traceEvents"]
win = json.load(open(sys.argv[2]))["traceEvents"]
lo, hi = float(sys.argv[3]) * 1e6, float(sys.argv[4]) * 1e6
timed = [e for e in win if "ts" in e]
assert timed, "no timed events in the window"
for e in timed:
    end = e["ts"] + e.get("dur", 0)
    assert lo - 0.001 <= e["ts"] and end <= hi + 0.001, e
polls = lambda evs: sum(1 for e in evs if e["ph"] == "X")
assert 0 < polls(win) < polls(whole), (polls(win), polls(whole))
print("trace_slice: export window: %d of %d poll slices"
      % (polls(win), polls(whole)))
PY

# A file cut short: sliced up to its last whole record.
head -c $(($(stat -c %s "$trace") * 2 / 3)) "$trace" >"$tmp/cut.weft"
"$tool" slice "$tmp/cut.weft" --from 0.5 -o "$tmp/cut-s.weft" >"$tmp/cut.txt"
expect "cut short" 'cut short' "$tmp/cut.txt"
"$tool" info "$tmp/cut-s.weft" >/dev/null || fail "info on the slice of a cut file"

# --force replaces an OUT that is there; nothing else does.
"$tool" slice "$trace" --from 1 -o "$tmp/s.weft" --force >/dev/null
"$tool" info "$tmp/s.weft" >/dev/null || fail "info after --force"

"$tool" slice --help >"$tmp/help.txt"
expect "slice --help" '^usage: weft-trace slice FILE' "$tmp/help.txt"
"$tool" export --help >"$tmp/help.txt"
expect "export --help" '--from' "$tmp/help.txt"

# Bad arguments: exit 2, one line on stderr.
bad()
{
	local what=$1 rc=0
	shift

	"$tool" "$@" >/dev/null 2>"$tmp/err.txt" || rc=$?
	[[ $rc -eq 2 ]] || fail "$what: exit $rc, expected 2"
	[[ $(wc -l <"$tmp/err.txt") -eq 1 ]] || {
		cat "$tmp/err.txt" >&2
		fail "$what: expected one line on stderr"
	}
	expect "$what" '^weft-trace: ' "$tmp/err.txt"
}
bad "--from after --to" slice "$trace" --from 2 --to 1 -o "$tmp/x.weft"
bad "no -o" slice "$trace" --from 1
bad "no FILE" slice -o "$tmp/x.weft"
bad "missing file" slice "$tmp/nonexistent.weft" -o "$tmp/x.weft"
bad "OUT exists" slice "$trace" -o "$tmp/s.weft"
bad "OUT is FILE" slice "$trace" -o "$trace" --force
bad "bad TIME" slice "$trace" --to soon -o "$tmp/x.weft"
bad "--from without TIME" slice "$trace" --from
bad "--from past the end" slice "$trace" --from 60 -o "$tmp/x.weft"
bad "export --from after --to" export --chrome "$trace" --from 2 --to 1 -o "$tmp/x.json"
bad "export --from past the end" export --chrome "$trace" --from 60 -o "$tmp/x.json"
printf 'not a trace at all' >"$tmp/garbage"
bad "garbage" slice "$tmp/garbage" -o "$tmp/x.weft"
for f in "$tmp/x.weft" "$tmp/x.json"; do
	[[ ! -e "$f" ]] || fail "a failed run left $f"
done
ls "$tmp"/x.weft.* >/dev/null 2>&1 && fail "a failed slice left its temporary file"
echo "trace_slice: ok ($n of $total events in the window)"
