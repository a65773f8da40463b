#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/trace_full_disk.sh TEST_TRACE_FILE WEFT_TRACE
#
# A disk that fills while recording (issue 19).  On a 1 MiB tmpfs that a
# filler file has all but ~96 KiB of, test_trace_file --full-disk records
# until a write fails with ENOSPC: one line on stderr names the file, the
# error and the bytes kept, and `weft-trace info` reads the file whole
# (exit 0, not cut short).  The filler goes (space is back), the program
# stops (the error comes back), continues the same file and records
# more: the file reads whole again, longer, one header, nothing skipped.
# Then a copy with a torn record spliced into its middle (what recorders
# left before they cut files back) reads with info too, which prints the
# bytes skipped.
#
# The tmpfs: mount(8) as root; else in a user and mount namespace
# (unshare -rm: this script again, inside); else RLIMIT_FSIZE in $TMPDIR
# (EFBIG instead of ENOSPC; the program raises the limit back as "space
# back").  Exit 77 (skipped) only when the RLIMIT fallback cannot run
# either.
set -euo pipefail

bin=$1 tool=$2

fail()
{
	echo "trace_full_disk: FAIL: $*" >&2
	for f in "${tmp:-/nonexistent}"/*.log; do
		[ -f "$f" ] && { echo "---- $f"; cat "$f"; } >&2
	done
	exit 1
}

# Waits up to 60 s for "full" from the recorder (pid $1, output $2).
wait_full()
{
	for _ in $(seq 600); do
		grep -q '^full' "$2" && return 0
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	fail "the recorder never hit the full disk"
}

# The whole scenario in directory $1 (on a small filesystem unless $2 is
# an RLIMIT_FSIZE in bytes); ERROR is the message expected.
scenario()
{
	local dir=$1 fsize=${2:-} error=$3 trace=$1/full.weft pid kept size

	"$bin" --full-disk "$trace" "$tmp/go" $fsize >"$tmp/rec.log" \
		2>"$tmp/rec.err.log" &
	pid=$!
	wait_full "$pid" "$tmp/rec.log"
	line=$(grep '^weft: trace: writing' "$tmp/rec.err.log") ||
		fail "no line on stderr about the failed write"
	echo "trace_full_disk: $line"
	[ "$(grep -c '^weft: trace: writing' "$tmp/rec.err.log")" = 1 ] ||
		fail "more than one line about the failed write"
	case $line in
	"weft: trace: writing $trace: $error; recording stopped, "*" bytes kept (up to its last whole record)") ;;
	*) fail "the line does not say path, error and bytes kept: $line" ;;
	esac
	kept=${line##*stopped, }
	kept=${kept%% bytes*}
	size=$(stat -c %s "$trace")
	[ "$size" = "$kept" ] || fail "file has $size bytes, the line said $kept"
	"$tool" info "$trace" >"$tmp/info1.log" ||
		fail "weft-trace info on the cut file: exit $?"
	if grep -q 'cut short\|skipped:' "$tmp/info1.log"; then
		fail "the cut file does not end at a whole record"
	fi

	# Space back.
	rm -f "$dir/filler"
	touch "$tmp/go"
	wait "$pid" || fail "the recorder's continuation failed: exit $?"
	"$tool" info "$trace" >"$tmp/info2.log" ||
		fail "weft-trace info on the continued file: exit $?"
	if grep -q 'cut short\|skipped:' "$tmp/info2.log"; then
		fail "the continued file does not read whole"
	fi
	size=$(stat -c %s "$trace")
	[ "$size" -gt "$kept" ] || fail "nothing was added when continued"
	echo "trace_full_disk: $kept bytes kept, $size after continuing;" \
		"$(grep '^frames:' "$tmp/info2.log")"

	# A torn record in the middle: skipped, reported.
	torn=$("$bin" --splice-torn "$trace" "$tmp/torn.weft") ||
		fail "could not splice a torn record"
	"$tool" info "$tmp/torn.weft" >"$tmp/info3.log" ||
		fail "weft-trace info on a torn file: exit $?"
	grep -q "^skipped: *$torn bytes of torn or damaged records in 1 place" \
		"$tmp/info3.log" || fail "info does not report $torn bytes skipped"
	[ "$(grep '^frames:' "$tmp/info3.log")" = \
		"$(grep '^frames:' "$tmp/info2.log")" ] ||
		fail "the torn file does not read every whole record"
	echo "trace_full_disk: $(grep '^skipped:' "$tmp/info3.log")"
}

# Inside the namespace (this script again): the tmpfs is ours to mount.
if [ "${WEFT_FULL_DISK_NS:-}" = 1 ]; then
	tmp=$3
	mount -t tmpfs -o size=1m tmpfs "$tmp/mnt" ||
		fail "tmpfs mount in the namespace"
	head -c $((1024 * 1024 - 96 * 1024)) /dev/zero >"$tmp/mnt/filler" || true
	scenario "$tmp/mnt" "" "No space left on device"
	umount "$tmp/mnt"
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-full-disk.XXXXXX")
mkdir "$tmp/mnt"
cleanup()
{
	mountpoint -q "$tmp/mnt" 2>/dev/null && umount "$tmp/mnt"
	rm -rf "$tmp"
}
trap cleanup EXIT

if mount -t tmpfs -o size=1m tmpfs "$tmp/mnt" 2>/dev/null; then
	echo "trace_full_disk: a 1 MiB tmpfs"
	head -c $((1024 * 1024 - 96 * 1024)) /dev/zero >"$tmp/mnt/filler" || true
	scenario "$tmp/mnt" "" "No space left on device"
elif unshare -rm true 2>/dev/null; then
	echo "trace_full_disk: a 1 MiB tmpfs in a user and mount namespace"
	WEFT_FULL_DISK_NS=1 unshare -rm "$0" "$bin" "$tool" "$tmp" ||
		exit $?
elif [ "$(ulimit -f)" = unlimited ] || [ "$(ulimit -Hf)" = unlimited ]; then
	echo "trace_full_disk: no tmpfs (mount and unshare refused);" \
		"RLIMIT_FSIZE 96 KiB instead"
	scenario "$tmp" $((96 * 1024)) "File too large"
else
	echo "trace_full_disk: SKIP: no tmpfs mount, no namespace, and" \
		"RLIMIT_FSIZE cannot be raised back" >&2
	exit 77
fi
echo "trace_full_disk: ok"
