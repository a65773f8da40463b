/* SPDX-License-Identifier: MIT */
/*
 * A burst after a quiet spell: the collector passes only every second
 * here (WEFT_PROBE_INTERVAL=1000, set by ctest) and rings hold 4,096
 * events (WEFT_PROBE_RING=4096), yet ten rings' worth of events, paced at
 * well under what the collector takes, arrive with none dropped: a ring
 * half full wakes the collector at once.  Without that wake the ring
 * overflows in under 40 ms, long before the next pass.  And a flush or
 * the last unsubscribe wakes a collector asleep for its second.
 */
#include <stdatomic.h>
#include <time.h>

#include "test_helpers.h"

#include "weft/probe.h"

#define BATCH 128
#define BATCHES 320 /* 10 rings of 4,096 */

static atomic_uint_fast64_t received;
static atomic_uint_fast64_t dropped_stat;

static void on_events(void *ctx, const weft_event_t *ev, size_t n)
{
	(void)ctx;
	for (size_t i = 0; i < n; i++)
		if (ev[i].kind == WEFT_EV_MARK)
			atomic_fetch_add(&received, 1);
}

static void on_update(void *ctx, const weft_probe_update_t *u)
{
	(void)ctx;
	atomic_store(&dropped_stat, u->stats->events_dropped);
}

static void test_probe_burst_drained_before_full(void **state)
{
	struct timespec ms = { 0, 1000000 };
	weft_probe_config_t cfg;
	weft_probe_sub_t *sub;

	(void)state;
	weft_probe_config(&cfg);
	assert_int_equal(cfg.ring_capacity, 4096);
	assert_int_equal(cfg.interval_ns, 1000000000u);
	assert_int_equal(
		weft_probe_subscribe(
			&(weft_probe_sub_opts_t){ .events = true,
						  .on_events = on_events,
						  .on_update = on_update },
			&sub),
		0);
	/* 128 events a millisecond or slower: half a ring in >= 16 ms. */
	for (uint32_t b = 0; b < BATCHES; b++) {
		for (uint32_t i = 0; i < BATCH; i++)
			weft_probe_mark(b, i);
		nanosleep(&ms, NULL);
	}
	weft_probe_flush();
	weft_probe_flush();
	assert_int_equal(atomic_load(&dropped_stat), 0);
	assert_int_equal(atomic_load(&received), (uint64_t)BATCH * BATCHES);
	weft_probe_unsubscribe(sub);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/*
 * Not a speed check: a collector that missed the wake would answer at its
 * interval's end, a second on; under half of that is a wake.
 */
static void test_probe_flush_and_stop_wake_the_collector(void **state)
{
	struct timespec quiet = { 0, 50000000 };
	weft_probe_sub_t *sub;
	uint64_t t0;

	(void)state;
	assert_int_equal(weft_probe_subscribe(
				 &(weft_probe_sub_opts_t){ .events = true,
							   .on_update = on_update },
				 &sub),
			 0);
	for (int i = 0; i < 3; i++) {
		/* The collector made its first pass and sleeps. */
		nanosleep(&quiet, NULL);
		t0 = mono_ms();
		weft_probe_flush();
		assert_true(mono_ms() - t0 < 500);
	}
	nanosleep(&quiet, NULL);
	t0 = mono_ms();
	weft_probe_unsubscribe(sub);
	assert_true(mono_ms() - t0 < 500);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_burst_drained_before_full),
		cmocka_unit_test(test_probe_flush_and_stop_wake_the_collector),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
