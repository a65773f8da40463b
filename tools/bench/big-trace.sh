#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tools/bench/big-trace.sh [BUILD_DIR] [SIZE]
#
# The trace tools on a big file (issue 21; tools/bench/README.md, "Big
# traces"): weft-bench-gentrace writes a synthetic trace of SIZE bytes
# (default 2G; 250M, 1G, 1Gi... as --bytes takes them) in $TMPDIR, then
# every verb that reads a file runs on it once, under
# /usr/bin/time -f '%e s %M KB':
#
#   info, stats, tasks, dump > /dev/null, export --chrome -o /dev/null,
#   and weft-console --replay FILE --once (the console's replay: open,
#   read to the end, print the tasks view)
#
# then (verb "seek") weft-console --replay FILE --seek-bench, three
# times: a first open that seeks at once, before the index pass
# (WEFT_CONSOLE_SEEK_AHEAD=1: from the trace's checkpoint marks, or
# waiting for the pass where it has none; GEN_ARGS="--checkpoint-mb 0"
# writes a file without them, for a before), then
# the first open with no side index (FILE.weftidx removed first: the
# index pass reads the whole file and writes it), the second with the
# index the first wrote.  Each: the console's first screen (the file
# opened, its first records indexed or its side index read, a screen
# drawn), the rest of its index, and seeks to 10%, 50%, 90%, the end,
# 5%, 50%, 10% of the file's time, one line each with its seconds and
# the peak RSS so far (the index pass and the seeks keep packed
# checkpoints of the model: 128 MiB of them at most in memory,
# WEFT_CONSOLE_CHECKPOINT_MB; the side index's on disk), then the whole
# run's /usr/bin/time; then the index's size and its share of the
# trace's (removed after, unless KEEP=1).  BASE=DIR also runs DIR's
# weft-console on the same file first (with WEFT_CONSOLE_INDEX=0: no
# side index), for a before and after (ROUNDS=N repeats the three).
#
# One row per verb: wall seconds, events per second (the generator's
# event count over those seconds), CPU seconds (user and system) and
# events per second over those (on a loaded machine the wall time
# waits for a CPU; the CPU time much less), and peak RSS.  `list` reads no file
# (it lists live processes) and is timed as is, for the table's sake.
# VERBS="info stats" runs only those (names as in the table's first
# column); KEEP=1 keeps the file (its path is printed); FILE=PATH reads
# that trace instead of writing one (the events counted by `weft-trace
# info`).
#
# Before and after: BASE=OTHER_BUILD_DIR runs each verb with that
# build's binaries too, alternately with BUILD_DIR's (base first), and
# ROUNDS=N (default 1) does so N times; each row is then the median
# over the rounds (wall, CPU) and the largest peak RSS, and a last
# column gives the median of the rounds' CPU after/before.  The seek
# verb is not repeated.  Not a test: it
# asserts nothing.  Exits non-zero if a verb fails.
set -euo pipefail

build=${1:-build}
size=${2:-2G}
trace=$build/tools/trace/weft-trace
console=$build/console/weft-console
gen=$build/tools/bench/weft-bench-gentrace
verbs=${VERBS:-"info stats tasks dump export console seek list"}

for b in "$trace" "$gen"; do
	[[ -x "$b" ]] || {
		echo "big-trace.sh: $b not built (cmake --build $build)" >&2
		exit 2
	}
done
[[ -x /usr/bin/time ]] || {
	echo "big-trace.sh: needs /usr/bin/time (GNU time)" >&2
	exit 2
}

base=${BASE:-}
rounds=${ROUNDS:-1}
if [[ -n "$base" && ! -x "$base/tools/trace/weft-trace" ]]; then
	echo "big-trace.sh: $base/tools/trace/weft-trace not built" >&2
	exit 2
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/big-trace.XXXXXX")
file=${FILE:-$dir/big.weft}
cleanup()
{
	if [[ -n "${FILE:-}" ]]; then
		rm -rf "$dir"
	elif [[ "${KEEP:-0}" == 1 ]]; then
		echo "kept: $file"
		rm -f "$dir/time.out"
	else
		rm -rf "$dir"
	fi
}
trap cleanup EXIT

if [[ -n "${FILE:-}" ]]; then
	echo "reading $file"
	events=$("$trace" info "$file" | sed -n 's/^events: *\([0-9]*\).*/\1/p')
	bytes=$(stat -c %s "$file")
	gen_s= gen_kb=
else
	echo "writing $size to $file"
	/usr/bin/time -f '%e s %M KB' -o "$dir/time.out" \
		"$gen" "$file" --bytes "$size" ${GEN_ARGS:-} > "$dir/gen.out"
	summary=$(tail -n 1 "$dir/gen.out")
	echo "$summary"
	field()
	{
		sed -n "s/.*\<$1=\([0-9.]*\).*/\1/p" <<< "$summary"
	}
	events=$(field events)
	bytes=$(field bytes)
	read -r gen_s _ gen_kb _ < "$dir/time.out"
fi
eps()
{
	awk -v e="$events" -v s="$1" \
		'BEGIN { printf (s > 0 ? "%.2fM" : "-"), e / s / 1e6 }'
}
printf '\n%-13s %9s %12s %9s %12s %10s%s\n' verb seconds events/s \
	'CPU s' 'events/CPU s' 'peak RSS' "${base:+  CPU after/before}"
row()
{
	# row NAME SECONDS KB [CPU_SECONDS [RATIO]]
	printf '%-13s %9s %12s %9s %12s %7d MB%s\n' "$1" "$2" "$(eps "$2")" \
		"${4:--}" "$([[ -n "${4:-}" ]] && eps "$4" || echo -)" \
		$(($3 / 1024)) "${5:+  $5}"
}
[[ -n "${FILE:-}" ]] || row gentrace "$gen_s" "$gen_kb"

# median of the numbers on stdin
median()
{
	sort -g | awk '{ a[NR] = $1 } END {
		if (NR % 2) print a[(NR + 1) / 2];
		else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# timed NAME CMD...: runs it once, appends "wall cpu kb" to $dir/NAME
timed()
{
	local name=$1 s u sy kb
	shift
	if ! /usr/bin/time -f '%e %U %S %M' -o "$dir/time.out" \
		"$@" > /dev/null 2> "$dir/err.out"; then
		echo "big-trace.sh: $name failed:" >&2
		cat "$dir/err.out" "$dir/time.out" >&2
		exit 1
	fi
	read -r s u sy kb < "$dir/time.out"
	echo "$s $(awk -v u="$u" -v s="$sy" 'BEGIN { printf "%.2f", u + s }') $kb" \
		>> "$dir/$name"
}

# summary NAME: "wall cpu kb" medians (kb: the largest)
summary()
{
	echo "$(cut -d' ' -f1 "$dir/$1" | median)" \
		"$(cut -d' ' -f2 "$dir/$1" | median)" \
		"$(cut -d' ' -f3 "$dir/$1" | sort -n | tail -n 1)"
}

for v in $verbs; do
	case $v in
	info | stats | tasks | dump) cmd=("$trace" "$v" "$file") ;;
	export) cmd=("$trace" export --chrome "$file" -o /dev/null) ;;
	console)
		[[ -x "$console" ]] || continue
		cmd=("$console" --replay "$file" --once)
		;;
	seek)
		[[ -x "$console" ]] || continue
		# seekbench LABEL CONSOLE: one --seek-bench run, its lines
		# indented, then its whole run's row
		seekbench()
		{
			echo
			echo "$2 --replay --seek-bench: $1 (load $(cut -d' ' -f1 /proc/loadavg)):"
			if ! /usr/bin/time -f '%e s %M KB' -o "$dir/time.out" \
				"$2" --replay "$file" --seek-bench \
				2> "$dir/err.out" | sed 's/^/  /'; then
				echo "big-trace.sh: seek failed:" >&2
				cat "$dir/err.out" "$dir/time.out" >&2
				exit 1
			fi
			read -r s _ kb _ < "$dir/time.out"
			row seek-all "$s" "$kb"
		}
		for ((round = 1; round <= ${ROUNDS:-1}; round++)); do
			# The side index (FILE.weftidx) made by the first
			# open, read by the second.
			if [[ -n "$base" ]]; then
				WEFT_CONSOLE_INDEX=0 seekbench "base, round $round" \
					"$base/console/weft-console"
			fi
			rm -f "$file.weftidx" "$file.weftidx.part"
			# Seeks before the index pass has got there: from the
			# trace's checkpoint marks (or, in a file without
			# them, waiting for the pass).
			WEFT_CONSOLE_INDEX=0 WEFT_CONSOLE_SEEK_AHEAD=1 \
				seekbench "first open, seeks ahead of the index pass (round $round)" \
				"$console"
			seekbench "first open, no index (round $round)" "$console"
			seekbench "second open, its index (round $round)" "$console"
			if [[ -f "$file.weftidx" ]]; then
				idx=$(stat -c %s "$file.weftidx")
				printf '%-13s %s bytes, %s of the trace\n' index \
					"$idx" "$(awk -v i="$idx" -v b="$(stat -c %s "$file")" \
					'BEGIN { printf "%.2f%%", 100 * i / b }')"
			fi
		done
		[[ "${KEEP:-0}" == 1 ]] || rm -f "$file.weftidx" "$file.weftidx.part"
		echo
		continue
		;;
	list) cmd=("$trace" list) ;;
	*)
		echo "big-trace.sh: unknown verb '$v'" >&2
		exit 2
		;;
	esac
	if [[ $v == list ]]; then
		timed list "${cmd[@]}"
		read -r s _ kb < <(summary list)
		printf '%-13s %9s %12s %9s %12s %7d MB\n' list "$s" - - - \
			$((kb / 1024))
		continue
	fi
	rm -f "$dir/$v" "$dir/$v.base" "$dir/$v.ratio"
	for ((i = 0; i < rounds; i++)); do
		if [[ -n "$base" ]]; then
			bcmd=("${cmd[@]}")
			bcmd[0]=${cmd[0]/#$build/$base}
			timed "$v.base" "${bcmd[@]}"
		fi
		timed "$v" "${cmd[@]}"
		if [[ -n "$base" ]]; then
			awk -v a="$(tail -n 1 "$dir/$v" | cut -d' ' -f2)" \
				-v b="$(tail -n 1 "$dir/$v.base" | cut -d' ' -f2)" \
				'BEGIN { printf "%.3f\n", (b > 0 ? a / b : 0) }' \
				>> "$dir/$v.ratio"
		fi
	done
	if [[ -n "$base" ]]; then
		read -r s c kb < <(summary "$v.base")
		row "$v (base)" "$s" "$kb" "$c"
		read -r s c kb < <(summary "$v")
		row "$v" "$s" "$kb" "$c" "$(median < "$dir/$v.ratio")"
	else
		read -r s c kb < <(summary "$v")
		row "$v" "$s" "$kb" "$c"
	fi
done
printf '\n%s bytes, %s events (%s)\n' "$bytes" "$events" \
	"$(awk -v b="$bytes" -v e="$events" 'BEGIN { printf "%.2f bytes/event", b / e }')"
