#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# usage: tests/metrics_prom.sh WEFT_DEMO WEFT_DEMO_LOAD
#
# The metrics endpoint against the real tools (issue 22), end to end:
#   1. weft-demo serves WEFT_METRICS_BIND with no console (WEFT_CONSOLE=off)
#      under weft-demo-load; its text in both formats passes the Python
#      client's strict parsers (prometheus_client.parser for 0.0.4, the
#      openmetrics parser for 1.0) and `promtool check metrics` (which
#      reads 0.0.4 only: Prometheus 2.42's promtool has no OpenMetrics
#      linter; the real Prometheus below scrapes OpenMetrics, which it
#      asks for first);
#   2. a second, short demo with WEFT_METRICS_HISTOGRAMS=1: the same
#      checks with the histograms in;
#   3. a real Prometheus on 127.0.0.1 (its own temporary config and
#      storage, a 1 s scrape interval) scrapes the first demo, and
#      `promtool query instant` finds up == 1,
#      rate(weft_worker_polls_total[5s]) > 0 and, over the load's /cpu
#      bursts (50 ms polls, the long-poll threshold 10 ms),
#      increase(weft_warnings_total{kind="long-poll"}[10s]) > 0.
#
# Exits 77 (ctest: skipped) when prometheus, promtool or Debian's
# python3-prometheus-client is missing (tools/setup.sh installs them).
# About 25 s.
set -euo pipefail

demo=$1
load=$2
# Debian's python3, where python3-prometheus-client installs.
py=/usr/bin/python3

skip()
{
	echo "metrics_prom: SKIPPED: $*" >&2
	exit 77
}
command -v prometheus >/dev/null || skip "prometheus not installed (tools/setup.sh)"
command -v promtool >/dev/null || skip "promtool not installed (tools/setup.sh)"
[ -x "$py" ] && "$py" -c 'import prometheus_client' 2>/dev/null ||
	skip "python3-prometheus-client not installed (tools/setup.sh)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-metrics-prom.XXXXXX")
pids=()
cleanup()
{
	local p

	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

fail()
{
	echo "metrics_prom: FAIL: $*" >&2
	for f in "$tmp"/*.log; do
		[ -f "$f" ] || continue
		echo "---- $f" >&2
		tail -20 "$f" >&2
	done
	exit 1
}

free_port()
{
	"$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_http URL SECONDS
wait_http()
{
	local i

	for ((i = 0; i < $2 * 10; i++)); do
		curl -sf -o /dev/null "$1" && return 0
		sleep 0.1
	done
	return 1
}

# check_text URL: both formats through the strict parsers, 0.0.4 through
# promtool too.
check_text()
{
	local url=$1 name=$2

	curl -sf -o "$tmp/$name.prom" "$url" || fail "scrape $url"
	curl -sf -H 'Accept: application/openmetrics-text; version=1.0.0' \
		-D "$tmp/$name.om.head" -o "$tmp/$name.om" "$url" ||
		fail "OpenMetrics scrape $url"
	grep -qi '^content-type: application/openmetrics-text; version=1.0.0' \
		"$tmp/$name.om.head" || fail "no OpenMetrics content type"
	promtool check metrics <"$tmp/$name.prom" ||
		fail "promtool check metrics rejects $name.prom"
	"$py" - "$tmp/$name.prom" "$tmp/$name.om" <<'PY' || fail "the Python parsers reject $name"
import sys
from prometheus_client.parser import text_string_to_metric_families as prom
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om

want = {"weft_worker_polls", "weft_worker_busy_seconds", "weft_warnings",
        "weft_tasks_alive", "weft_blocking_threads",
        "weft_probe_collector_cpu_seconds"}
for path, parse in ((sys.argv[1], prom), (sys.argv[2], om)):
    fams = list(parse(open(path).read()))
    names = {f.name for f in fams}
    missing = want - names
    # An info in OpenMetrics, a gauge named _info in 0.0.4.
    if not names & {"weft_build", "weft_build_info"}:
        missing.add("weft_build")
    if missing:
        sys.exit(f"{path}: missing {sorted(missing)}")
    for f in fams:
        for s in f.samples:
            # Bounded cardinality: no task in any label.
            bad = set(s.labels) - {"worker", "runtime", "kind", "state",
                                   "version", "le"}
            if bad:
                sys.exit(f"{path}: {s.name} has labels {sorted(bad)}")
    print(f"{path}: {len(fams)} families, "
          f"{sum(len(f.samples) for f in fams)} samples parse")
PY
}

dport=$(free_port)
mport=$(free_port)
WEFT_CONSOLE=off WEFT_METRICS_BIND=127.0.0.1:$mport \
	"$demo" --listen "127.0.0.1:$dport" --workers 2 >"$tmp/demo.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$mport/metrics" 10 || fail "the demo's metrics endpoint never answered"
"$load" --target "127.0.0.1:$dport" --duration 20s --burst-every 2s \
	--quiet >"$tmp/load.log" 2>&1 &
pids+=($!)

# Prometheus, scraping every second.
pport=$(free_port)
cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: weft
    static_configs:
      - targets: ['127.0.0.1:$mport']
YML
prometheus --config.file="$tmp/prometheus.yml" \
	--storage.tsdb.path="$tmp/data" \
	--web.listen-address="127.0.0.1:$pport" >"$tmp/prometheus.log" 2>&1 &
pids+=($!)

# The text, under load (and while Prometheus starts).
check_text "http://127.0.0.1:$mport/metrics" plain

# The histograms: a second demo, a few requests, the same checks.
hdport=$(free_port)
hmport=$(free_port)
WEFT_CONSOLE=off WEFT_METRICS_BIND=127.0.0.1:$hmport WEFT_METRICS_HISTOGRAMS=1 \
	"$demo" --listen "127.0.0.1:$hdport" --workers 2 >"$tmp/demo-hist.log" 2>&1 &
hpid=$!
pids+=($hpid)
wait_http "http://127.0.0.1:$hmport/metrics" 10 || fail "the histograms demo never answered"
for i in 1 2 3; do
	curl -sf -o /dev/null "http://127.0.0.1:$hdport/fast" || fail "/fast"
	curl -sf -o /dev/null "http://127.0.0.1:$hdport/cpu?ms=20" || fail "/cpu"
done
check_text "http://127.0.0.1:$hmport/metrics" hist
grep -q '^weft_poll_duration_seconds_bucket{le="+Inf"} [1-9]' "$tmp/hist.prom" ||
	fail "no polls in weft_poll_duration_seconds"
grep -q '^# TYPE weft_schedule_delay_seconds histogram' "$tmp/hist.om" ||
	fail "no weft_schedule_delay_seconds"
kill -TERM "$hpid"

# Prometheus's view after 12 s of load (two windows of 5 s and 10 s).
wait_http "http://127.0.0.1:$pport/-/ready" 15 || fail "Prometheus never got ready"
sleep 12

# query EXPR: the largest value of its result, or "none".
query()
{
	promtool query instant "http://127.0.0.1:$pport" "$1" 2>>"$tmp/promtool.log" |
		sed -n 's/.*=> \([^ ]*\) @.*/\1/p' | sort -g | tail -1 | grep . || echo none
}
above_zero()
{
	local v

	v=$(query "$1")
	echo "metrics_prom: $1 = $v"
	[ "$v" != none ] && "$py" -c "import sys; sys.exit(0 if float('$v') > 0 else 1)"
}
up=$(query 'up{job="weft"}')
echo "metrics_prom: up = $up"
[ "$up" = 1 ] || fail "up is $up, not 1"
above_zero 'rate(weft_worker_polls_total[5s])' || fail "no polls a second"
above_zero 'increase(weft_warnings_total{kind="long-poll"}[10s])' ||
	fail "no long-poll warnings over the bursts"
# Prometheus asked for OpenMetrics and got it (its scrape of a 0.0.4 body
# would have worked too: this shows which one it parsed).
above_zero 'scrape_samples_scraped{job="weft"}' || fail "no samples scraped"
echo "metrics_prom: ok"
