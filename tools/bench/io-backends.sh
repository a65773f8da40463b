#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The I/O backends against each other and Tokio (issue 23): weft-bench's
# echo and HTTP servers with WEFT_IO=epoll and WEFT_IO=uring, and
# tokio-bench's, interleaved round by round, the order rotating each
# round.
#
#   tools/bench/io-backends.sh [ROUNDS] [SECONDS]
#
#   echo64   weft-loadgen -c 64 -s 64: 64 lock-step 64-byte round trips,
#            msgs/s
#   http     wrk -t1 -c64 (after 1 s of warm-up), req/s
#   echo1    weft-loadgen -c 1 -s 64: one connection's round trip, p50 and
#            p99 in us
#
# BUILD=dir: a Release build with tools (default build/rel; built here
# unless NO_BUILD=1).  ANCHORS=dir: the anchors' build dir (default
# /tmp/anchors-uring/build; tokio is skipped without it).  Servers on 2
# workers.  Prints every round, then per server the median and per pair
# the median of the rounds' ratios [min-max].  Progress on stderr.
#
# CEILING=1 adds weft-bench-io-ceiling's servers (no runtime: a thread a
# CPU with its own listener and its own io_uring, or epoll; see
# tools/bench/io_ceiling.c) as ceiluring and ceilepoll: what the kernel
# allows here, against which weft's and Tokio's figures are read.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
ROUNDS="${1:-5}"
SECS="${2:-5}"
BUILD="${BUILD:-$REPO/build/rel}"
ANCHORS="${ANCHORS:-/tmp/anchors-uring/build}"

case "${1:-}" in
-h | --help)
	sed -n '3,26p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
esac

say() { printf 'io-backends: %s\n' "$*" >&2; }
die() { printf 'io-backends: %s\n' "$*" >&2; exit 1; }
command -v wrk >/dev/null || die "wrk not found (apt-get install wrk)"

if [ -z "${NO_BUILD:-}" ]; then
	say "building $BUILD"
	cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
		-DWEFT_BUILD_TESTS=OFF >/dev/null
	nice -n 10 cmake --build "$BUILD" -j2 --target weft-bench \
		weft-loadgen weft-bench-io-ceiling >/dev/null
fi
bench=$BUILD/tools/bench/weft-bench
loadgen=$BUILD/tools/bench/weft-loadgen
tokio=$ANCHORS/cargo-target/release/tokio-bench
ceiling=$BUILD/tools/bench/weft-bench-io-ceiling
servers="epoll uring"
[ -x "$tokio" ] && servers="$servers tokio" || say "no $tokio: tokio skipped"
if [ -n "${CEILING:-}" ]; then
	[ -x "$ceiling" ] || die "no $ceiling (build weft-bench-io-ceiling)"
	servers="$servers ceiluring ceilepoll"
fi

pid=
cleanup()
{
	[ -n "$pid" ] && kill "$pid" 2>/dev/null || true
	wait 2>/dev/null || true
}
trap cleanup EXIT

free_port()
{
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port()
{
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	die "nothing listens on port $1"
}

# start SERVER KIND PORT: echo-server or http-server, in the background.
start()
{
	case $1 in
	tokio) "$tokio" "$2" "$3" >/dev/null 2>&1 & ;;
	ceiluring | ceilepoll)
		"$ceiling" "${1#ceil}" "${2%-server}" "$3" >/dev/null 2>&1 &
		;;
	*) WEFT_IO=$1 "$bench" "$2" "$3" --workers 2 >/dev/null 2>&1 & ;;
	esac
	pid=$!
	wait_port "$3"
}

stop()
{
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=
}

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }

# run SERVER -> "echo64 http p50 p99"
run()
{
	local s=$1 port e64 rps out
	port=$(free_port)
	start "$s" echo-server "$port"
	e64=$("$loadgen" -p "$port" -c 64 -s 64 -d "$SECS" -w 1 -l "$s" |
		field msgs_per_s)
	out=$("$loadgen" -p "$port" -c 1 -s 64 -d "$SECS" -w 1 -l "$s")
	stop
	port=$(free_port)
	start "$s" http-server "$port"
	wrk -t1 -c64 -d1s "http://127.0.0.1:$port/" >/dev/null 2>&1 || true
	rps=$(wrk -t1 -c64 -d"${SECS}s" "http://127.0.0.1:$port/" |
		sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p')
	stop
	echo "$e64 ${rps:-0} $(echo "$out" | field rtt_us_p50) $(echo "$out" | field rtt_us_p99)"
}

declare -A E=() H=() P50=() P99=()
read -r -a list <<<"$servers"
for r in $(seq "$ROUNDS"); do
	# Rotate: round r starts at server (r-1) mod n.
	n=${#list[@]}
	order=()
	for i in $(seq 0 $((n - 1))); do
		order+=("${list[$(((r - 1 + i) % n))]}")
	done
	line="round $r:"
	for s in "${order[@]}"; do
		say "round $r/$ROUNDS: $s"
		read -r e h a b < <(run "$s")
		E[$s]="${E[$s]:-} $e"
		H[$s]="${H[$s]:-} $h"
		P50[$s]="${P50[$s]:-} $a"
		P99[$s]="${P99[$s]:-} $b"
		line="$line $s=[echo64 $e, http $h, echo1 p50 $a p99 $b]"
	done
	echo "$line"
done

python3 - "$servers" "$(declare -p E H P50 P99)" <<'EOF'
import re, statistics, sys
servers = sys.argv[1].split()
arrs = {}
for m in re.finditer(r'declare -A (\w+)=\((.*?)\)\s*$', sys.argv[2], re.M):
    arrs[m.group(1)] = {k: [float(x) for x in v.split()]
                        for k, v in re.findall(r'\[(\w+)\]="([^"]*)"', m.group(2))}
names = {'E': 'echo64 msgs/s', 'H': 'http req/s', 'P50': 'echo1 p50 us',
         'P99': 'echo1 p99 us'}
for key, name in names.items():
    a = arrs.get(key, {})
    meds = '  '.join(f'{s} {statistics.median(a[s]):,.1f}' for s in servers if s in a)
    print(f'{name}: median {meds}')
    pairs = [('uring', 'tokio'), ('uring', 'epoll'), ('epoll', 'tokio'),
             ('ceiluring', 'tokio'), ('ceilepoll', 'tokio'),
             ('ceiluring', 'ceilepoll'), ('uring', 'ceiluring'),
             ('epoll', 'ceilepoll')]
    for x, y in pairs:
        if x in a and y in a:
            rs = [p / q for p, q in zip(a[x], a[y]) if q]
            if rs:
                print(f'  {x}/{y} per round: {statistics.median(rs):.3f} '
                      f'[{min(rs):.3f}-{max(rs):.3f}]')
EOF
