#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What a recorder and a console cost a /fast-task request (weft-demo: a
# task spawned per HTTP request), watcher by watcher:
#
#   tools/bench/fast-task-watchers.sh BUILD [PORT [SECONDS]]
#
# BUILD is a Release tree (build/bench-probe-on): its weft-demo runs with
# WEFT_TRACE (a recorder) and 2 workers, its weft-console attaches
# (--once --view tasks, for the whole run), then wrk -t1 -c64 loads
# /fast-task for SECONDS (default 10) while perf stat counts the
# task-clock of each weft-demo thread and of the console process.
# Printed: requests and req/s; us a request of the collector thread,
# the server thread (weft-console), the workers and the console process;
# the trace's bytes a request, its Update bytes (the file less its
# event batches) a task and its events a task.  Run two trees one after
# the other, a few rounds interleaved, to compare.  Needs wrk and perf.
set -euo pipefail

[[ $# -ge 1 ]] || { sed -n '3,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
B=$1 port=${2:-18480} secs=${3:-10}
for x in wrk perf bc; do
	command -v $x >/dev/null || { echo "fast-task-watchers: no $x" >&2; exit 2; }
done
out=$(mktemp -d)
export XDG_RUNTIME_DIR=$out
trap 'rm -rf "$out"' EXIT

WEFT_TRACE=$out/t.weft "$B/tools/demo/weft-demo" --listen "127.0.0.1:$port" \
	--workers 2 > "$out/demo.out" 2>&1 &
dpid=$!
sleep 1
"$B/console/weft-console" --once --view tasks --after "$((secs + 4))s" "$dpid" \
	> "$out/con.out" 2>&1 &
cpid=$!
sleep 2
perf stat -e task-clock -p "$cpid" -o "$out/perf-con.txt" -- sleep "$secs" &
p1=$!
perf stat --per-thread -e task-clock -p "$dpid" -o "$out/perf-demo.txt" \
	-- sleep "$secs" &
p2=$!
wrk -t1 -c64 -d"${secs}s" "http://127.0.0.1:$port/fast-task" > "$out/wrk.txt" 2>&1
wait "$p1" "$p2" "$cpid" || true
kill -INT "$dpid"
wait "$dpid" || true
"$B/tools/trace/weft-trace" info "$out/t.weft" > "$out/info.txt"

req=$(awk '/requests in/ {print $1}' "$out/wrk.txt")
ms()
{
	awk -v k="$1" '$0 ~ k {gsub(",", "", $2); s += $2} END {print s + 0}' \
		"$out/perf-demo.txt"
}
per()
{
	echo "scale=3; $1 * 1000 / $req" | bc
}
con=$(awk '/task-clock/ {gsub(",", "", $1); print $1}' "$out/perf-con.txt")
bytes=$(awk '/^bytes:/ {print $2}' "$out/info.txt")
batch=$(awk '/^bytes:/ {gsub("\\(", "", $3); print $3}' "$out/info.txt")
tasks=$(awk '/^tasks named:/ {print $3}' "$out/info.txt")
events=$(awk '/^events:/ {print $2}' "$out/info.txt")
echo "requests=$req req/s=$(awk '/Requests\/sec/ {print $2}' "$out/wrk.txt")" \
	"us/req: collector=$(per "$(ms weft-collector-)")" \
	"server=$(per "$(ms weft-console-)")" \
	"workers=$(per "$(ms 'weft-w[0-9]+-')")" \
	"console=$(per "$con")" \
	"trace_bytes/req=$(echo "scale=1; $bytes / $req" | bc)" \
	"update_bytes/task=$(echo "scale=1; ($bytes - $batch) / $tasks" | bc)" \
	"events/task=$(echo "scale=2; $events / $tasks" | bc)"
