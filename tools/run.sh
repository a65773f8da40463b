#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tools/run.sh
#
# The main job: installs what is missing (tools/setup.sh), builds a Release
# weft in build/release, then runs the example program (a tour of the API,
# which checks its own results) and the micro-benchmarks with their default
# shapes (tools/bench/README.md).  Stops at the first failure.  The tests
# are not built here: tools/test.sh builds and runs them.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

build=build/release
start=$SECONDS

banner()
{
	printf '\n==== %s ====\n\n' "$*"
}

banner "setup (tools/setup.sh)"
bash "$root/tools/setup.sh"

banner "build: Release in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DWEFT_SANITIZE= \
	-DWEFT_BUILD_TESTS=OFF
cmake --build "$build" -j 2

banner "example: $build/tools/examples/weft-example"
"$build/tools/examples/weft-example"

banner "benchmarks: $build/tools/bench/weft-bench"
"$build/tools/bench/weft-bench"

banner "done in $((SECONDS - start)) s"
