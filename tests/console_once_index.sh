#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/console_once_index.sh WEFT_BENCH_GENTRACE WEFT_CONSOLE
#
# --once finishes the replay's index pass, so its side index is written
# whole (FILE.weftidx, no .part left) and the next open reads it: on a
# 24 MB trace weft-bench-gentrace writes (more than the open's first
# tenth of a second indexes), --once to the end and --once --after D
# each leave a whole index, and print what they print with no side index
# (WEFT_CONSOLE_INDEX=0), the first time (the index written) and the
# next (read: the seek restores its checkpoint before D and reads on).
#
# --after is tried at six points, each with one view.  Past the open's
# first tenth of a second of indexing, a first open with no whole index
# used to seek from the trace's last checkpoint mark before D (written
# every 16 MiB, the first at 0.1 s), ahead of the index pass, and print
# a model that knew only the tasks live at the mark (no workers' series,
# timeline, finished tasks, warnings or blocking jobs from before it),
# while an open that found a whole side index printed the exact state:
# on this trace the workers and timeline views differed at every point
# from 120 ms on.  --once never seeks from a mark now
# (con_replay_ahead_off()).
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

# D and the view compared there.  A sanitizer's build (the asan phase,
# where a replay takes ten times as long) tries two of them: the same
# paths, and the other phases compare all six.
points="60ms:workers 120ms:timeline 170ms:workers 200ms:tasks 230ms:warnings
	270ms:timeline"
if grep -qa -e __asan_init -e __tsan_init "$console"; then
	points="120ms:timeline 230ms:warnings"
fi
for p in $points; do
	d=${p%%:*} v=${p#*:}
	WEFT_CONSOLE_INDEX=0 "$console" --replay "$tmp/u.weft" --once \
		--after "$d" --view "$v" >"$tmp/ref"
	[ -s "$tmp/ref" ] || fail "--once --after $d: no text"
	# No index: the first open writes it anew, the next reads it.
	rm -f "$tmp/u.weft.weftidx"
	for run in first next; do
		"$console" --replay "$tmp/u.weft" --once --after "$d" \
			--view "$v" >"$tmp/out"
		whole "$tmp/u.weft" "--once --after $d ($run)"
		cmp -s "$tmp/ref" "$tmp/out" ||
			fail "--once --after $d --view $v ($run): not the" \
				"same text"
	done
done
echo "console_once_index: ok"
