#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Traces of the form before parkfold (a pending poll's new place as a
# PARKED_AT event after the POLL; no await site in the POLL, no
# AWAIT_SITE) still read exactly as they did: weft-bench-gentrace
# --parked-at writes that form (the same events as main's generator,
# event for event), and weft-trace's dump, tasks and stats of it are
# pinned.  The digests are of main's weft-trace (6dac586's build) on
# main's generator's file of the same --bytes, its name left out; this
# branch's tools printed the same on both files.  stats re-pinned on
# branch fix-views: against 354603f's it leaves the timer wheel and the
# fd (waits by design) out of the most contended, says them in a line,
# and its pool heading says where a job's name comes from; nothing else
# changed (diffed).
#
# Usage: trace_oldform.sh GENTRACE WEFT_TRACE
set -euo pipefail

gen=$1 tool=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-trace-oldform.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail()
{
	echo "trace_oldform: FAIL: $*" >&2
	exit 1
}

declare -A pinned=(
	[dump]=8278e9b4cb76c3cb8b8e0dc918eb629832cb1b985c38eef5950ce1823dc3dc8f
	[tasks]=3b52f34140c70e759c17de03bfea65d1174da736d21e15964c4f6312884cdc41
	[stats]=5c7764c38cd2f0b05f2f9a9dec5f2dc23cd1e637124d93ede193f355d372a68f
)

old=$tmp/old.weft
"$gen" "$old" --bytes 4M --parked-at --quiet > "$tmp/gen.out"
for v in dump tasks stats; do
	"$tool" "$v" "$old" > "$tmp/$v.out" || fail "$v exited non-zero"
	got=$(sed -E -e "s@[^ ]*old\\.weft@FILE@g" "$tmp/$v.out" | sha256sum)
	got=${got%% *}
	if [[ "${TRACE_OLDFORM_DIGESTS:-}" == print ]]; then
		echo "trace_oldform: digest $v $got"
	elif [[ "$got" != "${pinned[$v]}" ]]; then
		fail "$v: its output differs from the pinned one (digest $got)"
	fi
done
# The old form it is: places as PARKED_AT, no await site anywhere.
grep -q ' parked-at .* at=' "$tmp/dump.out" || fail "no parked-at in the dump"
grep -q ' await-site \| site=unknown' "$tmp/dump.out" &&
	fail "the dump holds an await site: not the old form"
echo "trace_oldform: ok ($(wc -l < "$tmp/dump.out") events)"
