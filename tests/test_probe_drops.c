/* SPDX-License-Identifier: MIT */
/*
 * A collector that falls behind: with tiny rings (WEFT_PROBE_RING=64, set
 * by ctest) a burst of events overflows them.  The emitting thread never
 * waits; the drops are counted and raise the events-dropped warning, and
 * the events that did fit arrive.
 */
#include <stdatomic.h>
#include <string.h>

#include "test_helpers.h"

#include "weft/probe.h"

static atomic_uint_fast64_t received;
static atomic_uint dropped_warnings;
static atomic_uint_fast64_t dropped_stat;

static void on_events(void *ctx, const weft_event_t *ev, size_t n)
{
	(void)ctx;
	(void)ev;
	atomic_fetch_add(&received, n);
}

static void on_update(void *ctx, const weft_probe_update_t *u)
{
	(void)ctx;
	for (size_t i = 0; i < u->nwarnings; i++)
		if (u->warnings[i].kind == WEFT_WARN_EVENTS_DROPPED)
			atomic_fetch_add(&dropped_warnings, 1);
	atomic_store(&dropped_stat, u->stats->events_dropped);
}

static weft_poll_t burst_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	for (uint32_t i = 0; i < 10000; i++)
		weft_probe_mark(i, i);
	return WEFT_READY;
}

static void test_probe_drops_counted_and_warned(void **state)
{
	weft_probe_config_t cfg;
	weft_probe_sub_t *sub;
	weft_runtime_t *rt;
	weft_join_t *j;

	(void)state;
	weft_probe_config(&cfg);
	assert_int_equal(cfg.ring_capacity, 64);
	assert_int_equal(weft_probe_subscribe(
				 &(weft_probe_sub_opts_t){ .events = true,
							   .on_events = on_events,
							   .on_update = on_update },
				 &sub),
			 0);
	assert_int_equal(weft_runtime_create(&(weft_config_t){ .workers = 1 },
					     &rt),
			 0);
	assert_int_equal(weft_spawn(rt, burst_poll, (char *)NULL, &j), 0);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
	weft_probe_flush();
	weft_probe_flush();
	/*
	 * 10,000 marks into a 64-slot ring in one poll: whatever the
	 * collector did not drain meanwhile was dropped, and counted.
	 */
	assert_true(atomic_load(&dropped_stat) > 0);
	assert_true(atomic_load(&dropped_stat) + atomic_load(&received) >=
		    10000);
	/* Raised, and again only when the count has doubled since. */
	assert_in_range(atomic_load(&dropped_warnings), 1, 8);
	weft_runtime_destroy(rt);
	weft_probe_unsubscribe(sub);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_drops_counted_and_warned),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
