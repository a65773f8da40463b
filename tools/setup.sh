#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Installs the Debian packages weft needs to build, test and benchmark, and
# only those that are missing.  Safe to run again: with everything present it
# changes nothing and says so.  Runs as root, or through sudo otherwise.
#
# Targets Debian 12 (bookworm).  libncurses-dev is the real package there;
# libncursesw5-dev is only a transitional name for it.
set -euo pipefail

PACKAGES=(
	cmake
	pkg-config
	gcc
	make
	# the test suite's builds (tools/test.sh): make's recursion costs
	# ~15% of a build's time on two cores
	ninja-build
	libncurses-dev
	libprotobuf-c-dev
	protobuf-c-compiler
	protobuf-compiler
	libevent-dev
	libcmocka-dev
	# the io_uring I/O backend (runtime/src/io_uring.c)
	liburing-dev
	clang
	clang-format
	valgrind
	tmux
	wrk
	python3
	# the metrics endpoint's tests (tests/metrics_prom.sh): a real
	# Prometheus and promtool, and the Python client's strict parsers
	prometheus
	python3-prometheus-client
)

say()
{
	printf 'setup: %s\n' "$*"
}

installed()
{
	[[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}

if ! command -v dpkg-query >/dev/null 2>&1; then
	say "dpkg-query not found: this script supports Debian (12) only" >&2
	exit 1
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
	installed "$pkg" || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
	say "all ${#PACKAGES[@]} packages present"
	exit 0
fi

sudo=()
if ((EUID != 0)); then
	if ! command -v sudo >/dev/null 2>&1; then
		say "not root and sudo not found; install as root: ${missing[*]}" >&2
		exit 1
	fi
	sudo=(sudo)
fi

say "missing ${#missing[@]} of ${#PACKAGES[@]} packages: ${missing[*]}"
say "apt-get update"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
say "apt-get install -y --no-install-recommends ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -q --no-install-recommends "${missing[@]}"

for pkg in "${missing[@]}"; do
	if ! installed "$pkg"; then
		say "$pkg is still not installed" >&2
		exit 1
	fi
done
say "installed ${missing[*]}"
