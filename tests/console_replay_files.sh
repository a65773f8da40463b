#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/console_replay_files.sh CONSOLE_WORKLOAD WEFT_CONSOLE
#
# What --replay does with what is not a plain trace (issue 19, item 6),
# no terminal: a directory, a FIFO nobody writes to, a character device
# and a missing file are refused in one line on stderr, exit 2, at once
# (the FIFO under a 10 s timeout: it once blocked for ever); a file with
# two headers, a header alone, the whole trace twice, a trace cut inside
# a record, and a cut trace with another after it (a record that does not
# decode: the error string) replay with --once, exit 0.  In an ASan
# build (ASAN_OPTIONS detect_leaks=1, as tools/test.sh sets), a leak in
# any of these is a sanitizer report and a non-zero exit: a failure
# here.  The workload records the trace (WEFT_TRACE).
set -euo pipefail

workload=$1 console=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-console-files.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export LANG=C.UTF-8 LC_ALL=C.UTF-8
unset WEFT_CONSOLE WEFT_CONSOLE_BIND

fail()
{
	echo "console_replay_files: FAIL: $*" >&2
	exit 1
}

# refused WHAT PATTERN PATH: exit 2 with one line matching PATTERN.
refused()
{
	local what=$1 pattern=$2 path=$3 rc=0
	timeout 10 "$console" --once --replay "$path" </dev/null \
		>"$tmp/out" 2>"$tmp/err" || rc=$?
	[[ $rc -eq 2 ]] || { cat "$tmp/err" >&2; fail "$what: exit $rc, not 2"; }
	[[ $(wc -l <"$tmp/err") -eq 1 ]] || { cat "$tmp/err" >&2; fail "$what: not one line"; }
	grep -q -- "$pattern" "$tmp/err" || { cat "$tmp/err" >&2; fail "$what: no '$pattern'"; }
}

# replays WHAT PATH: --once exits 0 and prints the view, and no
# sanitizer said anything.
replays()
{
	local what=$1 path=$2 rc=0
	"$console" --once --view tasks --replay "$path" </dev/null \
		>"$tmp/out" 2>"$tmp/err" || rc=$?
	[[ $rc -eq 0 ]] || { cat "$tmp/err" >&2; fail "$what: exit $rc"; }
	! grep -q "Sanitizer" "$tmp/err" || { cat "$tmp/err" >&2; fail "$what: a sanitizer report"; }
	grep -q "weft-console" "$tmp/out" || fail "$what: nothing drawn"
}

refused "a directory" "is a directory" "$tmp"
mkfifo "$tmp/fifo"
refused "a FIFO with no writer" "is a FIFO" "$tmp/fifo"
refused "a character device" "is a character device" /dev/null
refused "a missing file" "No such file" "$tmp/none.weft"

trace=$tmp/run.weft
WEFT_TRACE=$trace "$workload" >/dev/null
[[ -s "$trace" ]] || fail "WEFT_TRACE wrote nothing"
# The first record (the FileHeader): tag, varint length, frame.
read -ra b <<<"$(od -An -tu1 -N11 "$trace")"
len=0 shift=0 k=1
while :; do
	len=$((len | (b[k] & 127) << shift))
	((b[k] & 128)) || break
	k=$((k + 1)) shift=$((shift + 7))
done
hlen=$((1 + k + len))
head -c "$hlen" "$trace" >"$tmp/header.weft"
cat "$tmp/header.weft" "$trace" >"$tmp/two-headers.weft"
cat "$trace" "$trace" >"$tmp/twice.weft"
head -c $((hlen + 5000)) "$trace" >"$tmp/cut.weft"
cat "$tmp/cut.weft" "$tmp/cut.weft" >"$tmp/cut-then-more.weft"

replays "a header alone" "$tmp/header.weft"
replays "two headers" "$tmp/two-headers.weft"
replays "the trace twice" "$tmp/twice.weft"
replays "a trace cut short" "$tmp/cut.weft"
# A torn record with whole ones after it: read around and said, or,
# where the cut left bytes no resync can pass, said as the bad record
# (which depends on where the cut fell in this run's trace).
replays "a torn record in the middle" "$tmp/cut-then-more.weft"
grep -Eq "torn records skipped|record at byte" "$tmp/err" || { cat "$tmp/err" >&2; fail "the torn record not said"; }
# Bytes that are no records at all, after whole ones: the error's path.
{ cat "$tmp/header.weft"; head -c 4096 /dev/zero; } >"$tmp/then-zeros.weft"
replays "a record that does not decode" "$tmp/then-zeros.weft"
grep -q "record at byte" "$tmp/err" || { cat "$tmp/err" >&2; fail "the bad record not said"; }
# --after past the end: shown at its end, and said so.
"$console" --once --view workers --after 3600s --replay "$trace" </dev/null \
	>"$tmp/out" 2>"$tmp/err" || fail "--after past the end: exit $?"
grep -q "ends before --after" "$tmp/err" || { cat "$tmp/err" >&2; fail "--after past the end not said"; }
echo "console_replay_files: ok"
