/* SPDX-License-Identifier: MIT */
/*
 * The metrics endpoint: the process's runtimes as Prometheus metrics,
 * served over HTTP (GET /metrics) from a thread of the probe's own.
 *
 * Every figure comes from the always-on counters (metrics.h), the
 * probe's own counts and the OS (each worker thread's schedstat), so a
 * scrape never turns event emission on.  The histograms
 * (weft_poll_duration_seconds, weft_schedule_delay_seconds) need events:
 * they are served only by an endpoint made with @histograms, which keeps
 * the probe's collector running and events flowing for them (what that
 * costs: README, "Fleet").
 *
 * Zero configuration: WEFT_METRICS_BIND=HOST:PORT starts one with the
 * first runtime (and WEFT_METRICS_HISTOGRAMS=1 asks for the histograms).
 *
 * Limits: at most @max_conns connections at once (more are closed on
 * accept), a request's head at most @header_max bytes, and @timeout_ms
 * for a connection's whole life, request and answer (a client that sends
 * a byte a second is closed when it runs out, however it trickles).
 * A bad request closes its connection and nothing else.
 */
#ifndef WEFT_METRICS_ENDPOINT_H
#define WEFT_METRICS_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "weft/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_metrics_endpoint_s weft_metrics_endpoint_t;

/* Caller-filled and may grow (weft/common.h): reserved_ must be zero. */
typedef struct weft_metrics_endpoint_opts_s {
	/*
	 * "host:port", "[v6]:port", ":port" or "port" (numeric; the host
	 * defaults to 127.0.0.1; port 0 picks a free one).  An address that
	 * is not loopback is taken, with one warning line on stderr.
	 */
	const char *bind;
	unsigned max_conns;  /* 0: 16 */
	size_t header_max;   /* request line and headers; 0: 8 KiB */
	unsigned timeout_ms; /* a connection's whole life; 0: 5 s */
	bool histograms;     /* keep events flowing for the histograms */
	uint64_t reserved_[4]; /* zero (weft/common.h) */
} weft_metrics_endpoint_opts_t;

/**
 * weft_metrics_endpoint_create() - listen and serve GET /metrics.
 * @opts: where and the bounds; copied.
 * @out: receives the endpoint.
 *
 * Context: any thread; with @histograms not a probe subscriber's callback
 * (it subscribes: -EDEADLK there); a task may
 * call it (it binds and starts a thread, and waits for neither).
 * Return: 0; -EINVAL (no or a bad bind address, or a reserved word not
 * zero); -ENOMEM; a negative errno from bind(2) or listen(2)
 * (-EADDRINUSE); -EAGAIN (the thread); -ENOTSUP (@histograms in a build
 * without the probe); -EDEADLK (@histograms, from a probe subscriber's
 * callback).
 */
WEFT_EXTERN int
weft_metrics_endpoint_create(const weft_metrics_endpoint_opts_t *opts,
			     weft_metrics_endpoint_t **out);

/**
 * weft_metrics_endpoint_port() - the TCP port it listens on.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the port; -1 for a NULL @e.
 */
WEFT_EXTERN int weft_metrics_endpoint_port(const weft_metrics_endpoint_t *e);

/**
 * weft_metrics_endpoint_destroy() - close every connection and the
 * listener, stop its thread.  NULL is ignored.
 *
 * Context: any thread but the endpoint's own or a probe subscriber's
 * callback (its thread takes the probe's lock: from a callback it
 * panics, naming the mistake, rather than deadlock); a task may call it,
 * but it waits for that thread to stop (joins it, briefly).
 */
WEFT_EXTERN void weft_metrics_endpoint_destroy(weft_metrics_endpoint_t *e);

/* weft_metrics_text()'s formats. */
#define WEFT_METRICS_PROMETHEUS 0  /* text/plain; version=0.0.4 */
#define WEFT_METRICS_OPENMETRICS 1 /* application/openmetrics-text 1.0.0 */

/**
 * weft_metrics_text() - what a scrape answers, for a program that serves
 * it itself.
 * @format: WEFT_METRICS_PROMETHEUS or WEFT_METRICS_OPENMETRICS.
 * @text: receives the text (NUL-terminated), to free().
 * @len: receives its length, or NULL.
 *
 * Context: any thread but a probe subscriber's callback (those run under
 * the probe's lock, which this takes: -EDEADLK there); a task may call it
 * (it never waits for the collector).
 * Return: 0; -EINVAL (a NULL @text or an unknown @format); -ENOMEM;
 * -EDEADLK (called from a probe subscriber's callback).
 */
WEFT_EXTERN int weft_metrics_text(int format, char **text, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_METRICS_ENDPOINT_H */
