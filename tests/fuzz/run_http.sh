#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/fuzz/run_http.sh OUT_DIR [SECONDS]
#
# Builds fuzz_http, the libFuzzer target of weft-demo's HTTP parser
# (tools/net/http_parse.c), with clang (ASan + UBSan) into OUT_DIR, seeds
# its corpus from tests/fuzz/corpus-http, and runs it for SECONDS (default
# 20) with tests/fuzz/http.dict.  Exits 77 (ctest SKIP_RETURN_CODE)
# without clang's libFuzzer.
#
# A longer run, corpus kept (from the source tree):
#   tests/fuzz/run_http.sh /tmp/weft-fuzz-http 3600
set -euo pipefail

out=${1:?usage: run_http.sh OUT_DIR [SECONDS]}
secs=${2:-20}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cc=${FUZZ_CC:-clang}

if ! command -v "$cc" >/dev/null 2>&1; then
	echo "fuzz_http: $cc not found: skipped"
	exit 77
fi
mkdir -p "$out/corpus"
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)'\
'{ (void)d; (void)n; return 0; }\n' >"$out/probe.c"
if ! "$cc" -fsanitize=fuzzer "$out/probe.c" -o "$out/probe" 2>/dev/null; then
	echo "fuzz_http: $cc has no libFuzzer: skipped"
	exit 77
fi

"$cc" -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -Wall -Wextra -Werror \
	-I"$root/tools/net" "$here/fuzz_http.c" "$root/tools/net/http_parse.c" \
	-o "$out/fuzz_http"
cp "$here"/corpus-http/* "$out/corpus/"

rc=0
"$out/fuzz_http" -max_total_time="$secs" -max_len=40000 -rss_limit_mb=1024 -artifact_prefix="$out/fuzz_http-" ${FUZZ_RUNS:+-runs=$FUZZ_RUNS} \
	-dict="$here/http.dict" -print_final_stats=1 "$out/corpus" \
	>"$out/fuzz_http.log" 2>&1 || rc=1
grep -E '^(stat::number_of_executed_units|Done)' "$out/fuzz_http.log" |
	sed 's/^/fuzz_http: /' || true
if [[ $rc != 0 ]] || grep -q 'ERROR: \|==ERROR\|SUMMARY: ' "$out/fuzz_http.log"; then
	tail -40 "$out/fuzz_http.log" >&2
	rc=1
fi
exit $rc
