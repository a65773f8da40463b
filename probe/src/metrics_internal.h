/* SPDX-License-Identifier: MIT */
/*
 * The metrics endpoint (weft/metrics_endpoint.h), map of its files:
 * metrics_http.c the listener, its thread and its connections;
 * metrics_text.c the exposition (Prometheus text 0.0.4 and OpenMetrics
 * 1.0) and the histograms' subscriber; probe.c what only the probe's
 * state can tell (warnings by kind, drops, the collector's CPU time, the
 * attached runtimes).
 *
 * Threads.  A scrape is rendered on the endpoint's thread: it takes
 * probe.lock for the probe's figures and the runtimes' counters (the
 * collector holds it for a pass, so a scrape may wait for one; a worker
 * never takes it on its hot path), then reads /proc and formats holding
 * nothing.  The histograms are filled by the collector (on_events, with
 * probe.lock held) under hist_lock, a leaf.
 */
#ifndef WEFT_METRICS_INTERNAL_H
#define WEFT_METRICS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft/probe_model.h"

struct weft_runtime_s;

/* probe.c */
typedef struct weft__probe_metrics_s {
	uint64_t warnings[WEFT_WARN_MAX]; /* by kind, since start */
	uint64_t events_dropped;
	uint64_t collector_cpu_ns; /* every run of the collector's */
	unsigned subscribers;
	unsigned runtimes;
	bool collector_running;
} weft__probe_metrics_t;
/*
 * The probe's figures into @out and, under probe.lock, @each(runtime, its
 * index, how many) for every attached runtime, oldest first.  Any thread
 * but the collector's.
 */
void weft__probe_metrics_read(weft__probe_metrics_t *out,
			      void (*each)(struct weft_runtime_s *rt,
					   unsigned i, unsigned n, void *arg),
			      void *arg);

/* metrics_text.c */
typedef struct weft__mbuf_s {
	char *p;
	size_t len, cap;
	bool oom;
} weft__mbuf_t;
/* Renders a scrape into @b (appends; b->oom on failure). */
void weft__metrics_render(weft__mbuf_t *b, bool openmetrics);
/* The histograms' subscription (events on), taken and dropped by the
 * endpoints that ask for them; counted.  Return: 0 or
 * weft_probe_subscribe()'s error. */
int weft__metrics_hist_get(void);
void weft__metrics_hist_put(void);

/* metrics_http.c */
/* WEFT_METRICS_BIND: an endpoint for the first runtime, gone with it. */
void weft__metrics_env_start(struct weft_runtime_s *rt);
void weft__metrics_env_stop(struct weft_runtime_s *rt);

#endif /* WEFT_METRICS_INTERNAL_H */
