#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/wire_protoc.sh TEST_WIRE PROTO_DIR [TRACE_FILE]
#
# Google's protoc reads weft records unaided: a file of records (written by
# `test_wire --write-sample`, or TRACE_FILE when given) decodes as one
# weft.v1.Trace.  Exits 77 (ctest SKIP_RETURN_CODE) where protoc is absent.
set -euo pipefail

if ! command -v protoc >/dev/null 2>&1; then
	echo "wire_protoc: protoc not found: skipped"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-wire-protoc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

file=${3:-}
if [[ -z "$file" ]]; then
	file=$tmp/sample.weft
	"$1" --write-sample "$file"
fi
protoc --decode=weft.v1.Trace -I"$2" "$2/weft.proto" <"$file" >"$tmp/out.txt"
grep -q 'magic: "WEFTTRC1"' "$tmp/out.txt" || {
	echo "wire_protoc: no file header in protoc's output" >&2
	exit 1
}
grep -q 'events {' "$tmp/out.txt" || {
	echo "wire_protoc: no event batch in protoc's output" >&2
	exit 1
}
echo "wire_protoc: $(grep -c '^frame {' "$tmp/out.txt") frames decoded by protoc"
