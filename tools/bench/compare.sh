#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# weft vs Tokio vs Go on the same micro shapes, interleaved in one session.
#
#   tools/bench/compare.sh [ANCHORS_BUILD [WEFT_BENCH]]
#
#   ANCHORS_BUILD  the anchors' build dir (default /tmp/anchors/build; make it
#                  with: cp -r /work/shared/anchors /tmp/anchors &&
#                  BUILD_ONLY=1 /tmp/anchors/run.sh)
#   WEFT_BENCH     the weft-bench binary (default $WEFT_BENCH, else the first
#                  of build/tools/bench/weft-bench under the repository and
#                  /tmp/bench-build/tools/bench/weft-bench that exists)
#
# Knobs (environment):
#   ROUNDS (3)     rounds; each runs every shape once per runtime
#   ITERS (20) WARMUP (3)  passed to every benchmark
#   SHAPES         space- or comma-separated (default: weft-bench --list)
#   NOTRIM         set to anything to add Tokio's "glibc-notrim" variant
#                  (same binary, glibc malloc never trims; see the anchors'
#                  RESULTS.md: it changes ping_pong by ~3x on this VM)
#   TIMEOUT (300)  seconds before one benchmark process is killed
#   LOG            raw log (default /tmp/weft-compare-<date>.txt)
#   NEIGHBOUR      set to anything: every (round, shape) also runs beside the
#                  standard neighbour (weft-bench-neighbour, next to
#                  WEFT_BENCH; see tools/bench/neighbour.c), started before
#                  and stopped after that shape's shared group, for every
#                  runtime alike.  The quiet and the shared group swap order
#                  from round to round.  The table gains "SHAPE@shared" rows
#                  and a second table: shared/quiet per runtime.
#   NEIGHBOUR_ARGS the neighbour's options (default: its own defaults,
#                  400 requests a second and 1 ms ticks)
#
# Why interleaved: on the 2-vCPU VM the core-to-core hand-off cost drifts by
# ~4x over minutes (the c2c probe, logged before each shape), so runtimes are
# only comparable when measured close together.  Each (round, shape) group
# runs one process per runtime back to back, and the order of the runtimes
# rotates from round to round so none is always first after the probe.
#
# The raw log holds the benchmarks' own lines (the anchors' format, readable
# by anchors/summarize.py) plus "## round R: shape" and "# calib" lines; the
# table at the end gives, per shape, the median over rounds of each
# runtime's median ns/op [lowest-highest round], and tokio/weft and go/weft
# ratios of those medians [lowest-highest per-round ratio]: > 1 means weft
# is faster.
#
# Exit status: 0, or 1 when a benchmark failed or timed out (its cell reads
# FAIL; the log has its stderr).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

ANCHORS="${1:-/tmp/anchors/build}"
WEFT="${2:-${WEFT_BENCH:-}}"
if [[ -z "$WEFT" ]]; then
	for c in "$REPO/build/tools/bench/weft-bench" \
		 /tmp/bench-build/tools/bench/weft-bench; do
		if [[ -x "$c" ]]; then WEFT="$c"; break; fi
	done
fi
ROUNDS="${ROUNDS:-3}"
ITERS="${ITERS:-20}"
WARMUP="${WARMUP:-3}"
TIMEOUT="${TIMEOUT:-300}"
LOG="${LOG:-/tmp/weft-compare-$(date +%Y-%m-%d_%H%M%S).txt}"
NOTRIM_TUNABLES="glibc.malloc.trim_threshold=1073741824:glibc.malloc.top_pad=67108864:glibc.malloc.mmap_threshold=33554432"

TOKIO="$ANCHORS/cargo-target/release/tokio-bench"
GOB="$ANCHORS/go-bench"
C2C="$ANCHORS/c2c"

die() { printf 'compare.sh: %s\n' "$*" >&2; exit 2; }

[[ -n "$WEFT" && -x "$WEFT" ]] || die "no weft-bench binary (pass it as the 2nd argument or set WEFT_BENCH)"
[[ -x "$TOKIO" ]] || die "no $TOKIO (build the anchors: BUILD_ONLY=1 /tmp/anchors/run.sh)"
[[ -x "$GOB" ]] || die "no $GOB (build the anchors: BUILD_ONLY=1 /tmp/anchors/run.sh)"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
[[ "$ITERS" =~ ^[1-9][0-9]*$ ]] || die "ITERS must be a positive integer"
[[ "$WARMUP" =~ ^[0-9]+$ ]] || die "WARMUP must be a non-negative integer"

if [[ -n "${SHAPES:-}" ]]; then
	read -r -a shapes <<<"${SHAPES//,/ }"
else
	mapfile -t shapes < <("$WEFT" --list)
fi
((${#shapes[@]})) || die "no shapes"
# Let weft-bench reject unknown names now rather than in round 3.
"$WEFT" --shapes "$(IFS=,; echo "${shapes[*]}")" --help >/dev/null ||
	die "bad SHAPES"

NB=""
if [[ -n "${NEIGHBOUR:-}" ]]; then
	NB="$(dirname "$WEFT")/weft-bench-neighbour"
	[[ -x "$NB" ]] || die "no $NB (build the weft-bench-neighbour target)"
	read -r -a nb_args <<<"${NEIGHBOUR_ARGS:-}"
	"$NB" "${nb_args[@]}" --duration-ms 1 >/dev/null || die "bad NEIGHBOUR_ARGS"
fi

runtimes=(weft tokio)
[[ -n "${NOTRIM:-}" ]] && runtimes+=(tokio-notrim)
runtimes+=(go)

calib() {
	if [[ -x "$C2C" ]]; then
		echo "# calib $(date +%H:%M:%S) $("$C2C")"
	else
		echo "# calib $(date +%H:%M:%S) c2c_roundtrip_ns=n/a (no $C2C)"
	fi
}

# run_one RUNTIME SHAPE: one process, its shape line on stdout.
run_one() {
	local rt="$1" shape="$2" rc=0
	local -a cmd
	case "$rt" in
	weft) cmd=("$WEFT" --shapes "$shape" --iters "$ITERS" --warmup "$WARMUP" --workers 2) ;;
	tokio) cmd=("$TOKIO" micro --shapes "$shape" --iters "$ITERS" --warmup "$WARMUP") ;;
	tokio-notrim) cmd=(env GLIBC_TUNABLES="$NOTRIM_TUNABLES" "$TOKIO" micro --shapes "$shape"
			   --iters "$ITERS" --warmup "$WARMUP" --variant glibc-notrim) ;;
	go) cmd=(env GOMAXPROCS=2 "$GOB" micro -shapes "$shape" -iters "$ITERS" -warmup "$WARMUP") ;;
	esac
	timeout "$TIMEOUT" "${cmd[@]}" || rc=$?
	if ((rc)); then
		((rc == 124)) && echo "# TIMEOUT after ${TIMEOUT}s: runtime=$rt shape=$shape"
		echo "# FAILED rc=$rc runtime=$rt shape=$shape: ${cmd[*]}"
	fi
}

# group ROUND SHAPE quiet|shared: every runtime once on SHAPE; shared runs
# beside a neighbour started for the group, and their lines (results and
# failures) name the shape SHAPE@shared.
group() {
	local r="$1" shape="$2" how="$3" k nb_pid=
	local tag=""

	if [[ "$how" == shared ]]; then
		tag="@shared"
		"$NB" "${nb_args[@]}" >"$LOG.nb" &
		nb_pid=$!
		sleep 0.3 # its threads up and into their rhythm
	fi
	echo "## round $r: $shape$tag"
	calib
	for ((k = 0; k < n; k++)); do
		if [[ -n "$tag" ]]; then
			run_one "${runtimes[(k + r - 1) % n]}" "$shape" |
				sed -u "s/shape=$shape\b/shape=$shape$tag/"
		else
			run_one "${runtimes[(k + r - 1) % n]}" "$shape"
		fi
	done
	if [[ -n "$nb_pid" ]]; then
		kill -TERM "$nb_pid"
		wait "$nb_pid" || echo "# FAILED neighbour rc=$? (round $r, $shape)"
		sed 's/^/# /' "$LOG.nb"
		rm -f "$LOG.nb"
	fi
}

measure() {
	echo "# weft compare $(date -Is)"
	echo "# host: $(uname -srm); cpus=$(nproc); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
	echo "# loadavg before: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "# weft-bench: $WEFT"
	echo "# tokio-bench: $TOKIO"
	echo "# go-bench: $GOB (GOMAXPROCS=2)"
	echo "# ROUNDS=$ROUNDS ITERS=$ITERS WARMUP=$WARMUP shapes=${shapes[*]} runtimes=${runtimes[*]}"

	[[ -n "$NB" ]] && echo "# neighbour: $NB ${nb_args[*]}"
	n=${#runtimes[@]}
	for ((r = 1; r <= ROUNDS; r++)); do
		for shape in "${shapes[@]}"; do
			if [[ -z "$NB" ]]; then
				group "$r" "$shape" quiet
			elif ((r % 2)); then
				group "$r" "$shape" quiet
				group "$r" "$shape" shared
			else
				group "$r" "$shape" shared
				group "$r" "$shape" quiet
			fi
		done
	done
	echo "## end"
	calib
	echo "# loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# ------------------------------------------------------------------ table
# table LOG: the summary of a raw log, as a Markdown table.
table() {
	echo "# median over $ROUNDS rounds of each run's median_ns_per_op [lowest-highest round];"
	echo "# ratio = other/weft of those medians [lowest-highest per-round ratio]; > 1: weft faster"
	local -a rows=()
	for shape in "${shapes[@]}"; do
		rows+=("$shape")
		[[ -n "$NB" ]] && rows+=("$shape@shared")
	done
	awk -v shapes="${rows[*]}" -v runtimes="${runtimes[*]}" -v rounds="$ROUNDS" \
	    -v neighbour="${NB:+1}" '
	function sort(a, m,    i, j, t) {
		for (i = 2; i <= m; i++)
			for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
				t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
			}
	}
	function med(a, m) {
		sort(a, m)
		return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
	}
	# "median [lo-hi]" over the rounds of (s, rt); FAIL if any round failed.
	function cell(s, rt,    a, m, i) {
		if ((s, rt) in bad)
			return "FAIL"
		m = 0
		for (i = 1; i <= rounds; i++)
			if ((s, rt, i) in val)
				a[++m] = val[s, rt, i]
		if (m == 0)
			return "-"
		mv[s, rt] = med(a, m)
		return sprintf("%.1f [%.1f-%.1f]", mv[s, rt], a[1], a[m])
	}
	function ratio(s, rt,    a, m, i) {
		if (!((s, rt) in mv) || !((s, "weft") in mv) || mv[s, "weft"] <= 0)
			return "-"
		m = 0
		for (i = 1; i <= rounds; i++)
			if ((s, rt, i) in val && (s, "weft", i) in val && val[s, "weft", i] > 0)
				a[++m] = val[s, rt, i] / val[s, "weft", i]
		if (m == 0)
			return sprintf("%.2f", mv[s, rt] / mv[s, "weft"])
		sort(a, m)
		return sprintf("%.2f [%.2f-%.2f]", mv[s, rt] / mv[s, "weft"], a[1], a[m])
	}
	/^## round / { round = $3 + 0; cur = $4; next }
	/^## end/ { cur = ""; next }
	/^# calib / && cur != "" {
		if (match($0, /c2c_roundtrip_ns=[0-9.]+/)) {
			c = substr($0, RSTART + 17, RLENGTH - 17) + 0
			if (!(cur in clo) || c < clo[cur]) clo[cur] = c
			if (!(cur in chi) || c > chi[cur]) chi[cur] = c
		}
		next
	}
	/^# FAILED / {
		rt = ""; s = ""
		for (i = 1; i <= NF; i++) {
			if ($i ~ /^runtime=/) rt = substr($i, 9)
			if ($i ~ /^shape=/) { s = substr($i, 7); sub(/:$/, "", s) }
		}
		bad[s, rt] = 1
		next
	}
	/^shape=/ {
		split("", kv)
		for (i = 1; i <= NF; i++) {
			p = index($i, "=")
			if (p) kv[substr($i, 1, p - 1)] = substr($i, p + 1)
		}
		rt = kv["runtime"]
		if (kv["variant"] == "glibc-notrim") rt = rt "-notrim"
		val[kv["shape"], rt, round] = kv["median_ns_per_op"] + 0
		next
	}
	# shared/quiet of (s, rt): the ratio of the medians [lowest-highest round].
	function sq(s, rt,    a, m, i, sh) {
		sh = s "@shared"
		if (!((s, rt) in mv) || !((sh, rt) in mv) || mv[s, rt] <= 0)
			return "-"
		m = 0
		for (i = 1; i <= rounds; i++)
			if ((s, rt, i) in val && (sh, rt, i) in val && val[s, rt, i] > 0)
				a[++m] = val[sh, rt, i] / val[s, rt, i]
		sort(a, m)
		return sprintf("%.2f [%.2f-%.2f]", mv[sh, rt] / mv[s, rt], a[1], a[m])
	}
	END {
		ns = split(shapes, S, " ")
		nr = split(runtimes, R, " ")
		hdr = "| shape |"; sep = "|---|"
		for (j = 1; j <= nr; j++) { hdr = hdr " " R[j] " ns/op |"; sep = sep "---:|" }
		for (j = 1; j <= nr; j++)
			if (R[j] != "weft") { hdr = hdr " " R[j] "/weft |"; sep = sep "---:|" }
		hdr = hdr " c2c ns |"; sep = sep "---:|"
		print hdr; print sep
		for (i = 1; i <= ns; i++) {
			s = S[i]; line = "| " s " |"
			for (j = 1; j <= nr; j++) line = line " " cell(s, R[j]) " |"
			for (j = 1; j <= nr; j++)
				if (R[j] != "weft") line = line " " ratio(s, R[j]) " |"
			c = (s in clo) ? sprintf("%.0f-%.0f", clo[s], chi[s]) : "-"
			print line " " c " |"
		}
		if (!neighbour)
			exit
		print ""
		print "# shared/quiet: each runtime beside the neighbour against alone; < 1.3 is the aim"
		hdr = "| shape |"; sep = "|---|"
		for (j = 1; j <= nr; j++) { hdr = hdr " " R[j] " |"; sep = sep "---:|" }
		print hdr; print sep
		for (i = 1; i <= ns; i++) {
			s = S[i]
			if (s ~ /@shared$/)
				continue
			line = "| " s " |"
			for (j = 1; j <= nr; j++) line = line " " sq(s, R[j]) " |"
			print line
		}
	}' "$1"
}

# Measure first, then summarise the finished log (tee has flushed it).
measure 2>&1 | tee "$LOG"
echo | tee -a "$LOG"
table "$LOG" | tee -a "$LOG"
echo "# raw log: $LOG"
if grep -q '^# FAILED' "$LOG"; then
	echo "compare.sh: some benchmarks failed; see # FAILED lines in $LOG" >&2
	exit 1
fi
