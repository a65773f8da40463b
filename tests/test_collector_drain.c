/* SPDX-License-Identifier: MIT */
/*
 * The collector's drain (collector_drain.c): the chunks that
 * weft__collector_take_chunk() merges from the rings, against a plain
 * merge written here.  Three rings of 16 slots, filled over many passes
 * so that runs wrap the rings' ends at every offset; stamps unique
 * across the rings, in time order within a ring but for an event now and
 * then stamped before the one ahead of it (a wake in a poll carries the
 * poll's start), which the merge must take where the ring has it.
 */
#include <stdlib.h>
#include <string.h>

#include "test_helpers.h"

#include "collector_internal.h"

#define NRINGS 3
#define CAP 16
#define ROUNDS 400

static struct probe *p = &weft__probe;
static ring_entry_t *rings[NRINGS];

static int setup(void **state)
{
	(void)state;
	pthread_mutex_lock(&p->lock);
	assert_int_equal(weft__collector_start(p), 0);
	for (unsigned i = 0; i < NRINGS; i++) {
		ring_entry_t *e = calloc(1, sizeof(*e));

		assert_non_null(e);
		assert_int_equal(weft__ring_init(&e->ring, CAP, false), 0);
		e->worker = (uint16_t)i;
		e->next = p->rings;
		p->rings = e;
		rings[i] = e;
	}
	pthread_mutex_unlock(&p->lock);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	pthread_mutex_lock(&p->lock);
	for (ring_entry_t *e = p->rings; e; e = e->next)
		atomic_store(&e->orphan, true);
	weft__collector_pass(p, 1000000000);
	assert_null(p->rings);
	weft__collector_stop(p);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/*
 * Each round pushes 0-16 events a ring (polls, wakes, spawns; ids
 * numbering them), takes the pass's chunks, and compares them event by
 * event with the plain merge: the run whose head is earliest gives its
 * head, then each next event while its stamp is not after every other
 * run's head; the stamps converted as weft__probe_clock_conv_event()
 * does.
 */
static void test_collector_drain_merge_order(void **state)
{
	static const uint8_t kinds[] = { WEFT_EV_POLL, WEFT_EV_WAKE,
					 WEFT_EV_SPAWN, WEFT_EV_POLL };
	weft_event_t in[NRINGS][CAP], want[NRINGS * CAP], out[NRINGS * CAP];
	uint64_t x = 0x9E3779B97F4A7C15ull, id = 1;
	uint64_t t0 = weft__probe_clock() + 1000000;
	unsigned taken = 0, behind = 0, wrapped = 0;

	(void)state;
	for (unsigned r = 0; r < ROUNDS; r++) {
		struct weft__probe_clock_conv cv;
		size_t n[NRINGS], pos[NRINGS] = { 0 }, nwant = 0, nheap, got;
		size_t total = 0;
		uint64_t stamp = t0 + (uint64_t)r * 1000000;

		for (unsigned i = 0; i < NRINGS; i++) {
			uint64_t head = load_relaxed(&rings[i]->ring.head);

			n[i] = rnd(&x) % (CAP + 1);
			if ((head & (CAP - 1)) + n[i] > CAP)
				wrapped++;
			for (size_t j = 0; j < n[i]; j++) {
				weft_event_t *e = &in[i][j];

				memset(e, 0, sizeof(*e));
				/* Unique: ring i's stamps are i mod NRINGS. */
				stamp += NRINGS * (1 + rnd(&x) % 4);
				e->ts = stamp + i;
				if (j && rnd(&x) % 5 == 0) {
					/* Before the event ahead of it. */
					e->ts -= NRINGS * 5;
					behind++;
				}
				e->task = id++;
				e->kind = kinds[rnd(&x) % 4];
				e->a1 = e->kind == WEFT_EV_POLL ?
						1 + rnd(&x) % 64 :
						rnd(&x);
				e->a2 = (uint32_t)rnd(&x);
				e->worker = (uint16_t)i;
				assert_true(weft__ring_push_spsc(
					&rings[i]->ring, e));
			}
			/* The rings' stamps interleave: back to the round's
			 * start for the next ring. */
			stamp = t0 + (uint64_t)r * 1000000;
			total += n[i];
		}
		/* The plain merge. */
		for (;;) {
			int best = -1;
			uint64_t bound = UINT64_MAX;

			for (int i = 0; i < NRINGS; i++)
				if (pos[i] < n[i] &&
				    (best < 0 ||
				     in[i][pos[i]].ts < in[best][pos[best]].ts))
					best = i;
			if (best < 0)
				break;
			for (int i = 0; i < NRINGS; i++)
				if (i != best && pos[i] < n[i] &&
				    in[i][pos[i]].ts < bound)
					bound = in[i][pos[i]].ts;
			do
				want[nwant++] = in[best][pos[best]++];
			while (pos[best] < n[best] &&
			       in[best][pos[best]].ts <= bound);
		}
		assert_int_equal(nwant, total);

		/* Taken under the lock, checked out of it (a failed check
		 * leaves by longjmp). */
		pthread_mutex_lock(&p->lock);
		weft__probe_clock_conv_get(&cv);
		nheap = p->nsegs_pass = weft__collector_snapshot(p);
		got = 0;
		for (size_t c; (c = weft__collector_take_chunk(p, &nheap));) {
			if (got + c > NRINGS * CAP)
				break;
			memcpy(&out[got], p->chunk, c * sizeof(*out));
			got += c;
		}
		pthread_mutex_unlock(&p->lock);
		assert_int_equal(got, nwant);
		for (size_t k = 0; k < got; k++) {
			weft_event_t w = want[k];

			if (cv.tsc)
				weft__probe_clock_conv_event(&cv, &w);
			if (memcmp(&out[k], &w, sizeof(w)))
				fail_msg(
					"round %u event %zu: id %llu, want %llu",
					r, k, (unsigned long long)out[k].task,
					(unsigned long long)w.task);
		}
		taken += (unsigned)got;
	}
	/* Every event once; the cases the test is for came up. */
	assert_int_equal(taken, id - 1);
	assert_true(behind > 100);
	assert_true(wrapped > 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_collector_drain_merge_order),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
