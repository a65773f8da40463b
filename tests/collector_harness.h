/* SPDX-License-Identifier: MIT */
/*
 * The hand-built event streams of test_collector.c,
 * test_collector_wakers.c and test_collector_gap.c: the collector run on the test's thread (no
 * collector thread, no runtime), two rings, events pushed at chosen
 * ticks, passes run by the test.
 */
#ifndef WEFT_TESTS_COLLECTOR_HARNESS_H
#define WEFT_TESTS_COLLECTOR_HARNESS_H

#include <stdatomic.h>
#include <stdlib.h>

#include "test_helpers.h"

#include "collector_internal.h"

#define TICK 1000 /* stamps apart, in clock units */

static struct probe *p = &weft__probe;
static ring_entry_t *ring_a, *ring_b;
static uint64_t base;

static inline ring_entry_t *ring_add(uint16_t worker)
{
	ring_entry_t *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	assert_int_equal(weft__ring_init(&e->ring, 1024, false), 0);
	e->worker = worker;
	e->next = p->rings;
	p->rings = e;
	return e;
}

/* The collector started on this thread, with rings on workers 0 and 1. */
static inline int harness_setup(void)
{
	weft_probe_config_t cfg;

	weft_probe_config(&cfg);
	pthread_mutex_lock(&p->lock);
	assert_int_equal(weft__collector_start(p), 0);
	ring_a = ring_add(0);
	ring_b = ring_add(1);
	pthread_mutex_unlock(&p->lock);
	base = weft__probe_clock();
	return 0;
}

/* The rings orphaned and taken by a pass at @pass_ns; the collector
 * stopped. */
static inline void harness_teardown(uint64_t pass_ns)
{
	pthread_mutex_lock(&p->lock);
	/* Orphaned, the rings go with the next pass. */
	for (ring_entry_t *e = p->rings; e; e = e->next)
		atomic_store(&e->orphan, true);
	weft__collector_pass(p, pass_ns);
	assert_null(p->rings);
	weft__collector_stop(p);
	pthread_mutex_unlock(&p->lock);
}

/* Event @kind at tick @at on @e's ring (a1, a2 as the kind says). */
static inline void ev(ring_entry_t *e, unsigned at, uint8_t kind, uint64_t task,
		      uint64_t a1, uint32_t a2)
{
	weft_event_t x = { .ts = base + (uint64_t)at * TICK,
			   .task = task,
			   .a1 = a1,
			   .a2 = a2,
			   .worker = e->worker,
			   .kind = kind };

	assert_true(weft__ring_push_spsc(&e->ring, &x));
}

/* Ticks (of TICK clock units) in @ms milliseconds of this clock. */
static inline unsigned ms_ticks(unsigned ms)
{
	uint64_t ns = weft__probe_clock_to_ns(base + 1000000000ull) -
		      weft__probe_clock_to_ns(base);

	/* ns per 10^9 units: units per ms = 10^15 / ns. */
	return (unsigned)((uint64_t)ms * 1000000000000000ull / ns / TICK);
}

/* A pending poll of @task from tick @from to tick @to that cloned its
 * own waker @clones times. */
static inline void poll_pending(ring_entry_t *e, unsigned from, unsigned to,
				uint64_t task, uint32_t clones)
{
	ev(e, to, WEFT_EV_POLL, task, (uint64_t)(to - from) * TICK,
	   clones << WEFT_POLL_CLONES_SHIFT);
}

/* Ten passes whose clock reads tick @at: the checks run in them. */
static inline void passes_at(unsigned at)
{
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < 10; i++)
		weft__collector_pass(
			p, weft__probe_clock_to_ns(base + (uint64_t)at * TICK));
	pthread_mutex_unlock(&p->lock);
}

/* Task @id's record as published (it must have one). */
static inline weft_probe_task_t task(uint64_t id)
{
	const weft_probe_task_t *t;
	weft_probe_task_t out;

	pthread_mutex_lock(&p->lock);
	t = weft__collector_task(p, id);
	assert_non_null(t);
	out = *t;
	pthread_mutex_unlock(&p->lock);
	return out;
}

#endif
