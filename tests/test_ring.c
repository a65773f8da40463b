/* SPDX-License-Identifier: MIT */
/*
 * The probe's event ring (probe/src/ring.c, ring.h) through its internal
 * API: the capacity it rounds to, exact counts across wrap-around and
 * overflow, and a concurrent producer and consumer (in order, nothing
 * duplicated, every event consumed or counted as a drop).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "test_helpers.h"

#include "ring.h"

/* A power of two, at least 64. */
static void test_ring_capacity_rounds_up(void **state)
{
	const size_t ask[] = { 0, 1, 64, 65, 100, 1000, 1024, 4097 };
	const size_t want[] = { 64, 64, 64, 128, 128, 1024, 1024, 8192 };
	weft_ring_t r;

	(void)state;
	for (size_t i = 0; i < sizeof(ask) / sizeof(ask[0]); i++) {
		assert_int_equal(weft__ring_init(&r, ask[i], false), 0);
		assert_int_equal(weft__ring_capacity(&r), want[i]);
		assert_int_equal(weft__ring_drops(&r), 0);
		weft__ring_fini(&r);
	}
}

static void test_ring_wraparound_and_overflow(void **state)
{
	weft_ring_t r;
	weft_event_t ev = { 0 }, out[64];
	uint64_t next = 0, seen = 0;

	(void)state;
	assert_int_equal(weft__ring_init(&r, 64, false), 0);
	assert_int_equal(weft__ring_capacity(&r), 64);
	/* Many laps of the 64 slots, with a full ring on each. */
	for (int lap = 0; lap < 100; lap++) {
		while (true) {
			ev.task = next;
			if (!weft__ring_push_spsc(&r, &ev))
				break;
			next++;
		}
		size_t n = weft__ring_consume(&r, out, 64);

		assert_int_equal(n, 64);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(out[i].task, seen++);
	}
	assert_int_equal(weft__ring_drops(&r), 100);
	assert_int_equal(seen, next);
	weft__ring_fini(&r);
}

struct ring_run {
	weft_ring_t ring;
	uint64_t n;
	atomic_bool done;
};

static void *ring_producer(void *arg)
{
	struct ring_run *rr = arg;
	weft_event_t ev = { 0 };

	for (uint64_t i = 0; i < rr->n; i++) {
		ev.task = i;
		weft__ring_push_spsc(&rr->ring, &ev);
	}
	atomic_store(&rr->done, true);
	return NULL;
}

static void test_ring_concurrent_exact(void **state)
{
	struct ring_run rr = { .n = scale_count(2000000) };
	weft_event_t out[256];
	uint64_t got = 0, last = 0;
	bool first = true;
	pthread_t th;

	(void)state;
	assert_int_equal(weft__ring_init(&rr.ring, 1024, true), 0);
	assert_int_equal(pthread_create(&th, NULL, ring_producer, &rr), 0);
	for (;;) {
		bool done = atomic_load(&rr.done);
		size_t n = weft__ring_consume(&rr.ring, out, 256);

		for (size_t i = 0; i < n; i++) {
			/* In order, never duplicated (drops leave gaps). */
			if (!first)
				assert_true(out[i].task > last);
			last = out[i].task;
			first = false;
		}
		got += n;
		if (done && n == 0)
			break;
	}
	pthread_join(th, NULL);
	assert_int_equal(got + weft__ring_drops(&rr.ring), rr.n);
	weft__ring_fini(&rr.ring);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_capacity_rounds_up),
		cmocka_unit_test(test_ring_wraparound_and_overflow),
		cmocka_unit_test(test_ring_concurrent_exact),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
