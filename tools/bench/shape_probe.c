/* SPDX-License-Identifier: MIT */
/*
 * The probe's cost.  probe_event: 100,000 application marks
 * (weft_probe_mark()) emitted inside one task's poll, as wakes, waker
 * clones and drops are, ns per event on the emitting worker.
 * probe_event_thread: the same from a plain thread (each event reads the
 * clock; inside a poll they share the poll's stamp).  With --probe=events a subscriber drains every event (a
 * collector pass every 20 ms, sooner while the rings fill); with the
 * default, nobody listens and the figure is the cost of a site that is
 * off (one relaxed load and a call).
 *
 * --probe=events for any shape: the subscription below stays on for the
 * whole run, so every shape pays for full event streaming; compare with
 * the default (counters only) and a WEFT_PROBE=OFF build (probe-modes.sh
 * runs all three side by side).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <weft/probe.h>

#include "bench.h"

#define MARKS 100000 /* well under a ring (256 Ki events): none dropped */

static atomic_uint_fast64_t drained;
static atomic_uint_fast64_t dropped; /* the probe's total, last pass */
static atomic_uint_fast64_t collector_ns; /* its CPU time, last pass */

static void on_events(void *ctx, const weft_event_t *ev, size_t n)
{
	(void)ctx;
	(void)ev;
	/* Relaxed: a statistic read after the run. */
	atomic_fetch_add_explicit(&drained, n, memory_order_relaxed);
}

static void on_update(void *ctx, const weft_probe_update_t *u)
{
	(void)ctx;
	/* Relaxed: a statistic read after the run. */
	atomic_store_explicit(&dropped, u->stats->events_dropped,
			      memory_order_relaxed);
	atomic_store_explicit(&collector_ns, u->stats->collector_cpu_ns,
			      memory_order_relaxed);
}

void bench_probe_start(struct bench *b, bool events)
{
	weft_probe_sub_t *sub = NULL;
	int rc;

	/* A counters-only subscription tells whether the probe is built in. */
	rc = weft_probe_subscribe(&(weft_probe_sub_opts_t){ .events = events,
							    .on_events =
								    on_events,
							    .on_update =
								    on_update },
				  &sub);
	if (rc == -ENOTSUP) {
		b->probe_mode = 2;
		return;
	}
	if (rc)
		bench_die("weft_probe_subscribe", rc);
	if (!events) {
		/* Counters only: nobody listens, no collector either. */
		weft_probe_unsubscribe(sub);
		b->probe_mode = 0;
		return;
	}
	b->probe_sub = sub;
	b->probe_mode = 1;
}

void bench_probe_stop(struct bench *b)
{
	uint64_t n, cpu;

	if (!b->probe_sub)
		return;
	weft_probe_flush();
	n = atomic_load(&drained);
	cpu = atomic_load(&collector_ns);

	fprintf(stderr,
		"weft-bench: probe drained %llu events, dropped %llu; "
		"collector %.1f ms cpu, %.1f ns an event\n",
		(unsigned long long)n,
		(unsigned long long)atomic_load(&dropped), (double)cpu / 1e6,
		n ? (double)cpu / (double)n : 0.0);
	weft_probe_unsubscribe(b->probe_sub);
	b->probe_sub = NULL;
}

const char *bench_probe_mode(const struct bench *b)
{
	static const char *const names[] = { "counters", "events",
					     "compiled-out" };

	return names[b->probe_mode];
}

static weft_poll_t marks_poll(void *arg, weft_cx_t *cx)
{
	uint64_t *el = *(uint64_t **)arg; /* the state is a pointer */
	uint64_t t0 = weft_now_ns();

	(void)cx;
	for (uint32_t i = 0; i < MARKS; i++)
		weft_probe_mark(i, i);
	*el = weft_now_ns() - t0;
	return WEFT_READY;
}

static uint64_t probe_event(struct bench *b)
{
	uint64_t el = 0;
	uint64_t *elp = &el;
	weft_join_t *j;
	int rc;

	rc = weft_spawn_named(b->rt, "marks", marks_poll, &elp, &j);
	if (rc)
		bench_die("weft_spawn", rc);
	/* The task writes through the pointer it was given (its state). */
	rc = weft_join_wait(j, NULL);
	weft_join_drop(j);
	if (rc)
		bench_die("weft_join_wait", rc);
	if (b->probe_sub)
		weft_probe_flush(); /* let the collector catch up (untimed) */
	return el;
}

static uint64_t probe_event_thread(struct bench *b)
{
	uint64_t t0, el;

	t0 = weft_now_ns();
	for (uint32_t i = 0; i < MARKS; i++)
		weft_probe_mark(i, i);
	el = weft_now_ns() - t0;
	if (b->probe_sub)
		weft_probe_flush();
	return el;
}

const struct bench_shape shape_probe_event = {
	.name = "probe_event",
	.unit = "event",
	.ops = MARKS,
	.run = probe_event,
};

const struct bench_shape shape_probe_event_thread = {
	.name = "probe_event_thread",
	.unit = "event",
	.ops = MARKS,
	.run = probe_event_thread,
};
