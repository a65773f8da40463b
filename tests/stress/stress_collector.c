/* SPDX-License-Identifier: MIT */
/*
 * The collector's drain under stress: waves of short-lived producer
 * threads, each with its own small ring (64 to 512 slots, so that rings
 * wrap and fill), registered the way weft__probe_ring_register() does and
 * orphaned when the thread ends, while this thread runs collector passes
 * back to back.  Exact counts: every event pushed is handed on once, in
 * its ring's order, each pass in time order; every event not pushed was
 * counted as a drop; every orphaned ring is freed.
 *
 * WEFT_STRESS_ITERS sets the number of waves.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "test_helpers.h"

#include "collector_internal.h"

#define PER_WAVE 16
#define PER_THREAD 20000
#define MAX_THREADS 65536
#define FIRST_ID 100 /* producers' worker ids: FIRST_ID + thread */

static _Atomic uint64_t pushed, not_pushed;
static _Atomic unsigned done;

/* The subscriber's view (on the collector's thread: this one). */
static uint64_t *next_seq, seen, bad_seq, out_of_order, last_ts;
static unsigned threads;

static void on_events(void *ctx, const weft_event_t *ev, size_t n)
{
	(void)ctx;
	for (size_t i = 0; i < n; i++) {
		unsigned r = (unsigned)ev[i].worker - FIRST_ID;

		if (r >= threads || ev[i].a1 != next_seq[r])
			bad_seq++;
		else
			next_seq[r] = ev[i].a1 + 1;
		if (ev[i].ts < last_ts)
			out_of_order++;
		last_ts = ev[i].ts;
	}
	seen += n;
}

static void *producer(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	ring_entry_t *e = calloc(1, sizeof(*e));
	uint64_t seq = 0, ok = 0, dropped = 0;

	assert_non_null(e);
	assert_int_equal(weft__ring_init(&e->ring, 64u << (id % 4), false), 0);
	e->worker = (uint16_t)(FIRST_ID + id);
	/* Release: the entry and its ring are whole before the collector
	 * can take them (as in weft__probe_ring_register). */
	e->next = atomic_load_explicit(&weft__probe_new_rings,
				       memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(
		&weft__probe_new_rings, &e->next, e, memory_order_release,
		memory_order_relaxed))
		;
	for (unsigned i = 0; i < PER_THREAD; i++) {
		weft_event_t ev = { .ts = weft__probe_clock(),
				    .a1 = seq,
				    .worker = (uint16_t)(FIRST_ID + id),
				    .kind = WEFT_EV_MARK };

		/* The sequence counts pushes: a drop leaves no gap. */
		if (weft__ring_push_spsc(&e->ring, &ev)) {
			seq++;
			ok++;
		} else {
			dropped++;
		}
		if (i % 256 == 0)
			sched_yield();
	}
	atomic_fetch_add(&pushed, ok);
	atomic_fetch_add(&not_pushed, dropped);
	/* Release: every push is in before the collector sees the flag. */
	atomic_store_explicit(&e->orphan, true, memory_order_release);
	atomic_fetch_add(&done, 1);
	return NULL;
}

static void pass(struct probe *p, uint64_t *now)
{
	pthread_mutex_lock(&p->lock);
	last_ts = 0; /* order is promised within a pass */
	weft__collector_pass(p, *now += 1000000);
	pthread_mutex_unlock(&p->lock);
}

static void test_collector_drains_exactly(void **state)
{
	struct probe *p = &weft__probe;
	static weft_probe_sub_t sub;
	weft_probe_config_t cfg;
	pthread_t th[PER_WAVE];
	uint64_t now = 1, passes = 0;
	unsigned id = 0, left = 0, waves = stress_iters(8);

	(void)state;
	if (waves > MAX_THREADS / PER_WAVE)
		waves = MAX_THREADS / PER_WAVE;
	threads = waves * PER_WAVE;
	next_seq = calloc(threads, sizeof(*next_seq));
	assert_non_null(next_seq);
	weft_probe_config(&cfg);
	pthread_mutex_lock(&p->lock);
	assert_int_equal(weft__collector_start(p), 0);
	sub.opts.events = true;
	sub.opts.on_events = on_events;
	p->subs = &sub;
	pthread_mutex_unlock(&p->lock);

	for (unsigned w = 0; w < waves; w++) {
		for (unsigned i = 0; i < PER_WAVE; i++)
			assert_int_equal(
				pthread_create(&th[i], NULL, producer,
					       (void *)(uintptr_t)id++),
				0);
		while (atomic_load(&done) < (w + 1) * PER_WAVE) {
			pass(p, &now);
			passes++;
		}
		for (unsigned i = 0; i < PER_WAVE; i++)
			pthread_join(th[i], NULL);
	}
	/* The orphans' last events, then their rings. */
	pass(p, &now);
	pass(p, &now);

	for (ring_entry_t *e = p->rings; e; e = e->next)
		left++;
	print_message("%llu pushed, %llu dropped, %llu passes\n",
		      (unsigned long long)atomic_load(&pushed),
		      (unsigned long long)atomic_load(&not_pushed),
		      (unsigned long long)passes);
	assert_int_equal(atomic_load(&pushed) + atomic_load(&not_pushed),
			 (uint64_t)threads * PER_THREAD);
	assert_int_equal(seen, atomic_load(&pushed));
	assert_int_equal(p->events_total, atomic_load(&pushed));
	assert_int_equal(p->drops_total, atomic_load(&not_pushed));
	assert_int_equal(bad_seq, 0);
	assert_int_equal(out_of_order, 0);
	assert_int_equal(left, 0);
	for (unsigned r = 0; r < threads; r++)
		assert_true(next_seq[r] > 0);
	free(next_seq);

	pthread_mutex_lock(&p->lock);
	p->subs = NULL;
	weft__collector_stop(p);
	pthread_mutex_unlock(&p->lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_collector_drains_exactly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
