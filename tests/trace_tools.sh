#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/trace_tools.sh TEST_TRACE_FILE WEFT_TRACE PROTO_DIR
#
# Records a real workload through WEFT_TRACE=path (test_trace_file
# --workload), then runs every weft-trace verb on the file: info, dump,
# stats (task names and spawn locations come from the file; busy % is
# time not parked and poll % time in polls, from a recorded spinner; the
# worker's off-CPU time from the updates, where /proc has schedstat),
# export
# --chrome (the JSON parses and every poll slice has ts, dur, pid, tid);
# --help on every verb; a one-line error and exit 2 on bad input; and
# protoc --decode=weft.v1.Trace on the recorded file where protoc exists.
set -euo pipefail

workload=$1 tool=$2 proto=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-trace-tools.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trace=$tmp/run.weft

fail()
{
	echo "trace_tools: FAIL: $*" >&2
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

WEFT_TRACE=$trace "$workload" --workload
[[ -s "$trace" ]] || fail "WEFT_TRACE wrote nothing"

"$tool" info "$trace" >"$tmp/info.txt"
expect info '^format: +WEFTTRC1 version 1' "$tmp/info.txt"
expect info '^workers: +2$' "$tmp/info.txt"
expect info '^events: +[1-9][0-9]* ' "$tmp/info.txt"
expect info '^bytes/event: ' "$tmp/info.txt"

"$tool" dump "$trace" >"$tmp/dump.txt"
expect dump '^[0-9.]+ [0-9]+ poll [0-9]+\(yielder\) dur=[0-9]+ns (ready|pending)$' \
	"$tmp/dump.txt"
expect dump ' spawn [0-9]+\(yielder\) parent=' "$tmp/dump.txt"

"$tool" stats "$trace" >"$tmp/stats.txt"
expect stats '^worker +polls +steals-in' "$tmp/stats.txt"
expect stats '^[0-9]+ +[1-9]' "$tmp/stats.txt"
expect stats 'yielder +[^ ]*yielders\.h:[0-9]+$' "$tmp/stats.txt"

# busy% is time not parked, poll% time in polls.  A worker spinning on a
# task that wakes itself is never parked: close to 100% busy, however
# short its polls.  The same worker parked for the trace's first 100 ms
# (its first event an UNPARK) is busy for 300 ms of about 400.
busy_poll()
{
	awk '$1 == "0" { sub(/%/, "", $7); sub(/%/, "", $8); print $7, $8 }' "$1"
}
for idle in 0 100; do
	"$workload" --spinner "$tmp/spin$idle.weft" "$idle"
	"$tool" stats "$tmp/spin$idle.weft" >"$tmp/spin$idle.txt"
	expect "stats (spinner)" '^worker .* busy% +poll%$' "$tmp/spin$idle.txt"
done
# Drops accounted: the same spinner into 64-event rings drops most of its
# events; info and stats say how many, on whose ring, and that the
# figures are approximate.
WEFT_PROBE_RING=64 "$workload" --spinner "$tmp/drops.weft" 0
for verb in info stats; do
	"$tool" $verb "$tmp/drops.weft" >"$tmp/drops-$verb.txt"
	expect "$verb (drops)" \
		"^dropped: +[1-9][0-9]* events by the probe's rings \(worker 0: [1-9][0-9]*, .*other threads: [0-9]+\); figures from events are approximate$" \
		"$tmp/drops-$verb.txt"
done
"$tool" dump "$tmp/spin0.weft" >"$tmp/spin0-dump.txt"
expect "dump (an aborted task)" ' complete [0-9]+\(hung\) status=-125 cancelled$' \
	"$tmp/spin0-dump.txt"
read -r busy poll < <(busy_poll "$tmp/spin0.txt")
awk -v b="$busy" -v p="$poll" 'BEGIN { exit !(b >= 80 && p < b) }' || {
	cat "$tmp/spin0.txt" >&2
	fail "spinner: busy $busy%, poll $poll%: expected busy >= 80%, above poll"
}
read -r busy poll < <(busy_poll "$tmp/spin100.txt")
awk -v b="$busy" 'BEGIN { exit !(b >= 25 && b <= 85) }' || {
	cat "$tmp/spin100.txt" >&2
	fail "spinner parked at the start: busy $busy%, expected 25..85%"
}
# Off-CPU time (the worker thread's schedstat run_delay, read into the
# updates): its own lines after the table, which stays as it was.  A
# kernel without schedstat has none to print.
if [[ -r /proc/self/schedstat ]]; then
	expect "stats (off-cpu)" '^worker +off-cpu +off-cpu% +\(runnable' \
		"$tmp/spin100.txt"
	expect "stats (off-cpu)" '^0 +[0-9]+\.[0-9]{3} ms +[0-9]+\.[0-9]{2}%$' \
		"$tmp/spin100.txt"
fi

"$tool" export --chrome "$trace" -o "$tmp/out.json"
python3 - "$tmp/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
x = [e for e in ev if e.get("ph") == "X"]
assert x, "no poll slices"
assert all(all(k in e for k in ("ts", "dur", "pid", "tid")) for e in x), \
    "a poll slice lacks ts, dur, pid or tid"
assert any(e.get("ph") == "M" and e.get("name") == "thread_name" for e in ev)
starts = sorted(e["id"] for e in ev if e.get("ph") == "s")
assert starts == sorted(e["id"] for e in ev if e.get("ph") == "f"), \
    "wake -> poll flows do not pair up"
print("trace_tools: %d trace events, %d poll slices" % (len(ev), len(x)))
PY

for verb in info dump stats export list record snapshot; do
	"$tool" "$verb" --help >"$tmp/help.txt" || fail "$verb --help exited non-zero"
	expect "$verb --help" "^usage: weft-trace $verb" "$tmp/help.txt"
done
"$tool" --help >/dev/null || fail "--help exited non-zero"

# Bad input: exit 2, one line on stderr.
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
printf 'not a trace at all' >"$tmp/garbage"
: >"$tmp/empty"
head -c 7 "$trace" >"$tmp/short"
bad "missing file" info "$tmp/nonexistent.weft"
bad "garbage" info "$tmp/garbage"
bad "empty file" stats "$tmp/empty"
bad "cut inside the header" dump "$tmp/short"
head -c 20 "$trace" >"$tmp/first20"
bad "cut inside its first record" stats "$tmp/first20"
expect "cut inside its first record" 'no whole record in its 20 bytes' "$tmp/err.txt"
# A pid past any pid_max: no such process, said so (not ENOENT's words).
bad "no such process" tasks 99999999
expect "no such process" 'no process with pid 99999999' "$tmp/err.txt"
bad "unknown verb" frobnicate "$trace"
bad "unknown option" info --bogus "$trace"
bad "export without --chrome" export "$trace" -o "$tmp/x.json"
bad "no arguments"

# A file cut in the middle still reads, up to its last whole record.
head -c $(($(stat -c %s "$trace") / 2)) "$trace" >"$tmp/half.weft"
"$tool" info "$tmp/half.weft" >"$tmp/half.txt"
expect "half file" 'cut short' "$tmp/half.txt"

if command -v protoc >/dev/null 2>&1; then
	protoc --decode=weft.v1.Trace -I"$proto" "$proto/weft.proto" \
		<"$trace" >"$tmp/protoc.txt"
	expect protoc 'magic: "WEFTTRC1"' "$tmp/protoc.txt"
	expect protoc 'name: "yielder"' "$tmp/protoc.txt"
fi
echo "trace_tools: ok"
