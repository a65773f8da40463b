/* SPDX-License-Identifier: MIT */
/*
 * The hand-built event streams of test_collector.c and
 * test_collector_wakers.c: the collector run on the test's thread (no
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

#endif
