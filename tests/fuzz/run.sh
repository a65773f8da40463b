#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/fuzz/run.sh OUT_DIR [SECONDS] [TEST_WIRE]
#
# Builds the libFuzzer targets with clang (ASan + UBSan) into OUT_DIR,
# seeds their corpora, and runs each for SECONDS (default 20; all at
# once).  Exits 77 (ctest SKIP_RETURN_CODE) without clang's libFuzzer.
#   fuzz_record        the record decoder (proto/src/record.c), records split anywhere
#   fuzz_trace_file    the trace-file reader (trace_reader.c)
#   fuzz_server_input  a client's bytes to the server: framing, decoding,
#                      requests and their dispatch (server_input.c,
#                      delta.c's filters)
# FUZZ_TARGETS="a b" picks some (default: all three).  FUZZ_RUNS=N stops
# each after N executions, if SECONDS have not run out first (a
# campaign's count; also read by console.sh and run_http.sh).
# Seeds: tests/fuzz/corpus/* (and corpus_server/* for the server's), plus
# a sample trace from `test_wire --write-sample` and its first records
# when TEST_WIRE is given.  Each target's corpus is kept between runs
# (corpus.sh: ~/.cache/weft/fuzz/TARGET, or $WEFT_FUZZ_CORPUS/TARGET), the
# seeds read beside it.
#
# A longer run (from the source tree):
#   tests/fuzz/run.sh /tmp/weft-fuzz 3600 /tmp/wire-build/tests/test_wire
set -euo pipefail

out=${1:?usage: run.sh OUT_DIR [SECONDS] [TEST_WIRE]}
secs=${2:-20}
test_wire=${3:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cc=${FUZZ_CC:-clang}

if ! command -v "$cc" >/dev/null 2>&1 || ! command -v protoc-c >/dev/null 2>&1; then
	echo "fuzz: $cc or protoc-c not found: skipped"
	exit 77
fi
mkdir -p "$out/gen"
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)'\
'{ (void)d; (void)n; return 0; }\n' >"$out/probe.c"
if ! "$cc" -fsanitize=fuzzer "$out/probe.c" -o "$out/probe" 2>/dev/null; then
	echo "fuzz: $cc has no libFuzzer: skipped"
	exit 77
fi

protoc-c --c_out="$out/gen" -I"$root/proto" "$root/proto/weft.proto"
"$here/gen_version.sh" "$out/gen"
flags=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
	-D_GNU_SOURCE -I"$out/gen" -I"$root/proto/include" -I"$root/probe/src"
	-I"$root/probe/include" -I"$root/runtime/include" -I"$root/runtime/src")
read -ra pc <<<"$(pkg-config --cflags --libs libprotobuf-c)"
read -ra targets <<<"${FUZZ_TARGETS:-fuzz_record fuzz_trace_file fuzz_server_input}"
# shellcheck source=tests/fuzz/corpus.sh
. "$here/corpus.sh"
declare -A corpus
for t in "${targets[@]}"; do
	"$cc" "${flags[@]}" "$here/$t.c" "$root"/proto/src/*.c \
		"$root/probe/src/delta.c" "$root/probe/src/delta_idset.c" \
		"$root/probe/src/delta_warn.c" \
		"$root/probe/src/server_input.c" "$out/gen/weft.pb-c.c" \
		"${pc[@]}" -o "$out/$t"
	# The seeds apart, the corpus kept between runs (corpus.sh).
	rm -rf "$out/seeds-$t"
	mkdir -p "$out/seeds-$t"
	cp "$here"/corpus/* "$out/seeds-$t/" 2>/dev/null || true
	corpus[$t]=$(fuzz_corpus "$t" "$out")
	fuzz_corpus_trim "$out/$t" "${corpus[$t]}"
done
if [[ -d "$out/seeds-fuzz_server_input" ]]; then
	cp "$here"/corpus_server/* "$out/seeds-fuzz_server_input/"
fi
if [[ -n "$test_wire" && -d "$out/seeds-fuzz_record" &&
	-d "$out/seeds-fuzz_trace_file" ]]; then
	"$test_wire" --write-sample "$out/sample.weft"
	for n in 64 256 1024 4096; do
		head -c "$n" "$out/sample.weft" >"$out/seeds-fuzz_trace_file/sample-$n"
		{ printf '\x00'; head -c "$n" "$out/sample.weft"; } \
			>"$out/seeds-fuzz_record/sample-$n"
	done
	cp "$out/sample.weft" "$out/seeds-fuzz_trace_file/sample"
fi

pids=()
for t in "${targets[@]}"; do
	"$out/$t" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=1024 -artifact_prefix="$out/$t-" ${FUZZ_RUNS:+-runs=$FUZZ_RUNS} \
		-print_final_stats=1 "${corpus[$t]}" "$out/seeds-$t" \
		>"$out/$t.log" 2>&1 &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
	wait "$p" || rc=1
done
for t in "${targets[@]}"; do
	grep -E '^(stat::number_of_executed_units|Done)' "$out/$t.log" |
		sed "s/^/fuzz: $t: /" || true
	if grep -q 'ERROR: \|==ERROR\|SUMMARY: ' "$out/$t.log"; then
		tail -40 "$out/$t.log" >&2
		rc=1
	fi
done
exit $rc
