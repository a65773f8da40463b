#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The metrics endpoint's cost to the service it watches (issue 22).
#
#   tools/bench/metrics-bad-clients.sh [ROUNDS] [SECONDS]
#
# Part 1, bad clients: weft-demo (2 workers, WEFT_METRICS_BIND, no
# console) answers /fast under wrk (-t1 -c16), round by round with and
# without bad clients on its metrics port at the same time:
#   - wrong paths: GET /nope, one after the other;
#   - 1 MB of headers, again and again;
#   - 24 clients that send one byte a second (over the 16 allowed);
#   - 1,000 scrapes in a burst (50 threads of 20) every 2 s.
# Prints /fast req/s per round and the medians, and what the bad
# clients saw (answers by status, connections closed on them).
#
# Part 2, what a scrape costs: weft-demo idle with 2 and with 64 workers,
# 50 scrapes 110 ms apart (past the endpoint's 100 ms reuse of a render,
# so each is rendered): the demo's CPU time (utime + stime, /proc) over
# them minus that of the same time without scrapes, per scrape; the
# scrape's wall time at the client; the body's size.
#
# Default 5 rounds of 5 s.  Needs wrk and python3; builds build/release.
# Everything goes to 127.0.0.1 only and stops by itself.
set -euo pipefail

case "${1:-}" in
-h | --help)
	sed -n '4,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
	exit 0
	;;
esac
rounds=${1:-5}
secs=${2:-5}
[[ "$rounds" =~ ^[0-9]+$ && "$secs" =~ ^[0-9]+$ ]] || {
	echo "metrics-bad-clients: ROUNDS and SECONDS are whole numbers (see --help)" >&2
	exit 2
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD:-$root/build/release}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j 2 --target weft-demo >/dev/null
demo=$build/tools/demo/weft-demo
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-metrics-bench.XXXXXX")
pids=()
cleanup()
{
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port()
{
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cat >"$tmp/bad.py" <<'PY'
# Bad clients against 127.0.0.1:PORT for SECONDS; prints what they saw.
import socket, sys, threading, time, collections
port, secs = int(sys.argv[1]), float(sys.argv[2])
end = time.monotonic() + secs
seen = collections.Counter()
lock = threading.Lock()

def note(k):
    with lock:
        seen[k] += 1

def status(s):
    try:
        s.settimeout(6)
        b = s.recv(64)
        return b.split(b" ")[1].decode() if b.startswith(b"HTTP/") else "closed"
    except (ConnectionResetError, BrokenPipeError):
        return "reset"
    except socket.timeout:
        return "no-answer"

def conn():
    return socket.create_connection(("127.0.0.1", port), timeout=6)

def wrong_paths():
    while time.monotonic() < end:
        with conn() as s:
            s.sendall(b"GET /nope HTTP/1.1\r\n\r\n")
            note("wrong-path " + status(s))
        time.sleep(0.01)

def big_headers():
    line = b"X-A: " + b"a" * 1017 + b"\r\n"
    while time.monotonic() < end:
        with conn() as s:
            try:
                s.sendall(b"GET /metrics HTTP/1.1\r\n")
                for _ in range(1024):
                    s.sendall(line)
                note("1MB-headers sent-all")
            except (BrokenPipeError, ConnectionResetError, socket.timeout):
                note("1MB-headers closed")
        time.sleep(0.1)

def slow():
    # A byte a second until the endpoint closes on it (its 5 s deadline,
    # or at once when 16 others hold its connections), then again.
    while time.monotonic() < end:
        try:
            with conn() as s:
                s.settimeout(1)
                for b in b"GET /metrics HTTP/1.1\r\n\r\n":
                    s.sendall(bytes([b]))
                    try:
                        s.recv(64)
                        note("slow closed")
                        break
                    except socket.timeout:
                        pass
                    if time.monotonic() >= end:
                        break
        except (BrokenPipeError, ConnectionResetError):
            note("slow reset")
        time.sleep(1)

def burst():
    while time.monotonic() < end:
        def twenty():
            for _ in range(20):
                try:
                    with conn() as s:
                        s.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
                        note("burst " + status(s))
                except OSError:
                    note("burst refused")
        ts = [threading.Thread(target=twenty) for _ in range(50)]
        for t in ts: t.start()
        for t in ts: t.join()
        time.sleep(2)

ts = [threading.Thread(target=f) for f in [wrong_paths, big_headers, burst] + [slow] * 24]
for t in ts: t.start()
for t in ts: t.join()
print(" ".join(f"{k}={v}" for k, v in sorted(seen.items())))
PY

dport=$(free_port)
mport=$(free_port)
WEFT_CONSOLE=off WEFT_METRICS_BIND=127.0.0.1:$mport \
	"$demo" --listen "127.0.0.1:$dport" --workers 2 >"$tmp/demo.log" 2>&1 &
pids+=($!)
sleep 0.5

rps()
{
	wrk -t1 -c16 -d"${secs}s" "http://127.0.0.1:$dport/fast" |
		sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p'
}
base=()
bad=()
echo "part 1: /fast req/s, wrk -t1 -c16 -d${secs}s, 2 workers" >&2
for ((r = 1; r <= rounds; r++)); do
	b=$(rps)
	python3 "$tmp/bad.py" "$mport" "$((secs + 1))" >"$tmp/bad.out" &
	bp=$!
	sleep 0.3
	w=$(rps)
	wait "$bp"
	base+=("$b")
	bad+=("$w")
	printf 'round %d: quiet %s  bad clients %s  (%s)\n' "$r" "$b" "$w" "$(cat "$tmp/bad.out")"
done
median()
{
	printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
mb=$(median "${base[@]}")
mw=$(median "${bad[@]}")
printf 'median: quiet %s  bad clients %s  (%+.1f%%)\n' "$mb" "$mw" \
	"$(python3 -c "print(($mw - $mb) / $mb * 100)")"
curl -sf -o /dev/null "http://127.0.0.1:$mport/metrics" && echo "the endpoint still answers"
kill -TERM "${pids[0]}"
wait "${pids[0]}" 2>/dev/null || true
pids=()

echo "part 2: what a scrape costs (50 scrapes 110 ms apart, idle demo)" >&2
# The demo's threads' time on a CPU, ns (schedstat: finer than stat's ticks).
cpu_ticks()
{
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d\n", s}'
}
for workers in 2 64; do
	dport=$(free_port)
	mport=$(free_port)
	WEFT_CONSOLE=off WEFT_METRICS_BIND=127.0.0.1:$mport \
		"$demo" --listen "127.0.0.1:$dport" --workers "$workers" >"$tmp/demo.log" 2>&1 &
	pid=$!
	pids=($pid)
	sleep 1
	t0=$(cpu_ticks "$pid")
	sleep 5.5
	t1=$(cpu_ticks "$pid")
	out=$(python3 - "$mport" <<'PY'
import socket, sys, time
port = int(sys.argv[1]); walls = []; size = 0
for _ in range(50):
    t = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
        body = b""
        while (b := s.recv(65536)):
            body += b
    walls.append(time.perf_counter() - t)
    size = len(body)
    time.sleep(0.11)
walls.sort()
print(f"{walls[25] * 1e6:.0f} {walls[-1] * 1e6:.0f} {size}")
PY
)
	t2=$(cpu_ticks "$pid")
	hz=1000000000
	read -r p50 pmax size <<<"$out"
	python3 -c "
idle = ($t1 - $t0) / $hz; busy = ($t2 - $t1) / $hz
print(f'{$workers:3d} workers: {(busy - idle) / 50 * 1e6:7.0f} us CPU a scrape '
      f'(demo CPU {busy*1e3:.1f} ms with scrapes, {idle*1e3:.1f} ms without), '
      f'wall p50 {$p50} us max {$pmax} us, {$size} bytes')"
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null || true
	pids=()
done
