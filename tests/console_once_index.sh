#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/console_once_index.sh WEFT_BENCH_GENTRACE WEFT_CONSOLE
#
# --once finishes the replay's index pass, so its side index is written
# whole (FILE.weftidx, no .part left) and the next open reads it: on a
# 24 MB trace weft-bench-gentrace writes (more than the open's first
# tenth of a second indexes), --once to the end and --once --after 200ms
# each leave a whole index; to the end, the text is what it is with no
# side index (WEFT_CONSOLE_INDEX=0), the first time and the next (the
# seek restores the index's last checkpoint, taken at the end).  With
# --after the text is not compared: a seek that restores a checkpoint
# and reads on from it, or one served ahead of the index pass from the
# trace's marks (timing: how far the open's tenth of a second got), can
# print otherwise than a replay from the start (seen on main too).
set -euo pipefail

gentrace=$1 console=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-console-once.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset WEFT_CONSOLE_INDEX

fail()
{
	echo "console_once_index: FAIL: $*" >&2
	exit 1
}

whole()
{
	[ -s "$1.weftidx" ] || fail "$2: no whole index"
	[ ! -e "$1.weftidx.part" ] || fail "$2: a part left"
}

"$gentrace" "$tmp/t.weft" --bytes 24M --seed 9 --quiet >/dev/null
cp "$tmp/t.weft" "$tmp/u.weft"

WEFT_CONSOLE_INDEX=0 "$console" --replay "$tmp/t.weft" --once >"$tmp/ref"
[ -s "$tmp/ref" ] || fail "no text"
[ ! -e "$tmp/t.weft.weftidx" ] && [ ! -e "$tmp/t.weft.weftidx.part" ] ||
	fail "an index with WEFT_CONSOLE_INDEX=0"
for run in first next; do
	"$console" --replay "$tmp/t.weft" --once >"$tmp/out"
	whole "$tmp/t.weft" "--once ($run)"
	cmp -s "$tmp/ref" "$tmp/out" || fail "--once ($run): not the same text"
done

for run in first next; do
	"$console" --replay "$tmp/u.weft" --once --after 200ms >"$tmp/out"
	whole "$tmp/u.weft" "--once --after ($run)"
	[ -s "$tmp/out" ] || fail "--once --after ($run): no text"
done
echo "console_once_index: ok"
