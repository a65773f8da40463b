#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Writes DIR/weft/version.h from runtime/include/weft/version.h.in and the
# project's version in CMakeLists.txt, as CMake's configure_file() does,
# for the fuzz scripts, which compile the sources without CMake.
#
#   tests/fuzz/gen_version.sh DIR
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${1:?usage: gen_version.sh DIR}
ver=$(sed -n 's/^project(weft VERSION \([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p' \
	"$root/CMakeLists.txt")
[[ -n "$ver" ]] || { echo "gen_version.sh: no version in CMakeLists.txt" >&2; exit 2; }
IFS=. read -r major minor patch <<<"$ver"
mkdir -p "$dir/weft"
sed -e "s/@PROJECT_VERSION_MAJOR@/$major/" -e "s/@PROJECT_VERSION_MINOR@/$minor/" \
	-e "s/@PROJECT_VERSION_PATCH@/$patch/" -e "s/@PROJECT_VERSION@/$ver/" \
	"$root/runtime/include/weft/version.h.in" >"$dir/weft/version.h"
