/* SPDX-License-Identifier: MIT */
/*
 * Idle bookkeeping (runtime/src/idle.c) through its internal API: at most
 * half the workers search (rounded up), the last searcher is told it is
 * the last, parked workers are listed and taken off by id, all_parked
 * says when nobody is awake, and worker_to_notify wakes a sleeper only
 * when nobody searches (preferring one on a futex to the one in the
 * driver), counting it searching.  Then worker threads that park and a
 * notifier that wakes them, with exact counts.
 *
 * worker_to_notify() looks at the workers' parkers, so each test builds a
 * zeroed runtime with just a workers array; nothing else of it is used.
 */
#include <stdatomic.h>
#include <string.h>

#include "runtime_internal.h"
#include "test_helpers.h"

#define MAX_WORKERS 8u

struct fixture {
	weft_runtime_t *rt; /* workers[] only */
	idle_t *idle;
	unsigned n;
};

static void *zalloc_aligned(size_t size)
{
	size_t rounded = (size + WEFT_CACHELINE - 1) &
			 ~(size_t)(WEFT_CACHELINE - 1);
	void *p = aligned_alloc(WEFT_CACHELINE, rounded);

	assert_non_null(p);
	memset(p, 0, rounded);
	return p;
}

static void fixture_init(struct fixture *f, unsigned n)
{
	f->n = n;
	f->rt = zalloc_aligned(sizeof(*f->rt));
	f->rt->workers = zalloc_aligned(n * sizeof(weft_worker_t));
	f->rt->nworkers = n;
	for (unsigned i = 0; i < n; i++) {
		f->rt->workers[i].index = i;
		weft__parker_init(&f->rt->workers[i].parker, NULL);
	}
	f->idle = zalloc_aligned(sizeof(*f->idle));
	assert_int_equal(weft__idle_init(f->idle, n), 0);
}

static void fixture_fini(struct fixture *f)
{
	weft__idle_fini(f->idle);
	free(f->idle);
	free(f->rt->workers);
	free(f->rt);
}

/* How many to_searching() calls succeed in a row, from nobody searching. */
static unsigned fill_searchers(idle_t *idle)
{
	unsigned n = 0;

	while (weft__idle_to_searching(idle)) {
		n++;
		assert_true(n <= MAX_WORKERS);
	}
	return n;
}

/* ------------------------------------------------------------ searching */

static void test_idle_searching_bound_half(void **state)
{
	(void)state;
	for (unsigned n = 1; n <= MAX_WORKERS; n++) {
		struct fixture f;
		unsigned max = (n + 1) / 2;

		fixture_init(&f, n);
		assert_int_equal(fill_searchers(f.idle), max);
		/* Refused stays refused; one leaving lets one in. */
		assert_false(weft__idle_to_searching(f.idle));
		if (max > 1)
			assert_false(weft__idle_from_searching(f.idle));
		else
			assert_true(weft__idle_from_searching(f.idle));
		assert_true(weft__idle_to_searching(f.idle));
		assert_false(weft__idle_to_searching(f.idle));
		/* Only the last one out is told it is the last. */
		for (unsigned i = max; i > 1; i--)
			assert_false(weft__idle_from_searching(f.idle));
		assert_true(weft__idle_from_searching(f.idle));
		assert_int_equal(fill_searchers(f.idle), max);
		fixture_fini(&f);
	}
}

/* ------------------------------------------------------------- parking */

static void test_idle_park_bookkeeping(void **state)
{
	struct fixture f;

	(void)state;
	fixture_init(&f, 4);
	assert_false(weft__idle_all_parked(f.idle));
	for (unsigned i = 0; i < 4; i++)
		assert_false(weft__idle_is_parked(f.idle, i));

	/* Not searching: never "the last searcher". */
	assert_false(weft__idle_to_parked(f.idle, 2, false));
	assert_true(weft__idle_is_parked(f.idle, 2));
	assert_false(weft__idle_is_parked(f.idle, 1));
	assert_false(weft__idle_all_parked(f.idle));

	/* Two searchers park: the second is the last one searching. */
	assert_true(weft__idle_to_searching(f.idle));
	assert_true(weft__idle_to_searching(f.idle));
	assert_false(weft__idle_to_parked(f.idle, 0, true));
	assert_true(weft__idle_to_parked(f.idle, 3, true));
	assert_false(weft__idle_all_parked(f.idle));
	assert_false(weft__idle_to_parked(f.idle, 1, false));
	assert_true(weft__idle_all_parked(f.idle));
	for (unsigned i = 0; i < 4; i++)
		assert_true(weft__idle_is_parked(f.idle, i));
	/* Parking took both searchers off the count: two may start. */
	assert_int_equal(fill_searchers(f.idle), 2);
	assert_false(weft__idle_from_searching(f.idle));
	assert_true(weft__idle_from_searching(f.idle));

	/* Woken by the driver: off the list, awake, once. */
	assert_true(weft__idle_unpark_worker_by_id(f.idle, 3));
	assert_false(weft__idle_is_parked(f.idle, 3));
	assert_false(weft__idle_all_parked(f.idle));
	assert_false(weft__idle_unpark_worker_by_id(f.idle, 3));
	for (unsigned i = 0; i < 3; i++)
		assert_true(weft__idle_is_parked(f.idle, i));
	for (unsigned i = 0; i < 3; i++)
		assert_true(weft__idle_unpark_worker_by_id(f.idle, i));
	for (unsigned i = 0; i < 4; i++) {
		assert_false(weft__idle_is_parked(f.idle, i));
		assert_false(weft__idle_unpark_worker_by_id(f.idle, i));
	}
	assert_int_equal(f.idle->nsleepers, 0);
	/* Parked again, all of them, in another order. */
	for (unsigned i = 4; i-- > 0;)
		assert_false(weft__idle_to_parked(f.idle, i, false));
	assert_true(weft__idle_all_parked(f.idle));
	fixture_fini(&f);
}

/* --------------------------------------------------------------- notify */

static void test_idle_notify_only_when_nobody_searches(void **state)
{
	struct fixture f;
	int a, b;

	(void)state;
	fixture_init(&f, 4);
	/* Everyone awake: nobody to wake. */
	assert_int_equal(weft__idle_worker_to_notify(f.idle, f.rt), -1);

	assert_false(weft__idle_to_parked(f.idle, 1, false));
	assert_false(weft__idle_to_parked(f.idle, 3, false));
	/* A searcher will find the work: nobody is woken. */
	assert_true(weft__idle_to_searching(f.idle));
	assert_int_equal(weft__idle_worker_to_notify(f.idle, f.rt), -1);
	assert_true(weft__idle_is_parked(f.idle, 1));
	assert_true(weft__idle_is_parked(f.idle, 3));
	assert_true(weft__idle_from_searching(f.idle));

	/* Nobody searching: a sleeper, the latest, now searching. */
	a = weft__idle_worker_to_notify(f.idle, f.rt);
	assert_int_equal(a, 3);
	assert_false(weft__idle_is_parked(f.idle, 3));
	assert_true(weft__idle_is_parked(f.idle, 1));
	/* ... so the next notify wakes nobody until it stops searching. */
	assert_int_equal(weft__idle_worker_to_notify(f.idle, f.rt), -1);
	assert_true(weft__idle_from_searching(f.idle));
	b = weft__idle_worker_to_notify(f.idle, f.rt);
	assert_int_equal(b, 1);
	assert_true(weft__idle_from_searching(f.idle));
	/* No sleeper left. */
	assert_int_equal(weft__idle_worker_to_notify(f.idle, f.rt), -1);
	assert_int_equal(f.idle->nsleepers, 0);
	assert_false(weft__idle_all_parked(f.idle));
	fixture_fini(&f);
}

struct driver_sleeper {
	parker_t *p;
	atomic_bool stop;
};

/* Parks in the driver until told to stop (a return may be spurious). */
static void *park_in_driver(void *arg)
{
	struct driver_sleeper *ds = arg;

	while (!atomic_load(&ds->stop))
		weft__parker_park_driver(ds->p);
	return NULL;
}

/*
 * A sleeper on its futex is woken before the one parked in the driver,
 * even an older one: waking the driver's is the slower wake-up.
 */
static void test_idle_notify_prefers_futex_sleeper(void **state)
{
	struct fixture f;
	driver_t *d = zalloc_aligned(sizeof(*d));
	struct driver_sleeper ds = { 0 };
	parker_t *p3;
	pthread_t th;

	(void)state;
	fixture_init(&f, 4);
	assert_int_equal(weft__driver_init(d), 0);
	/* Takes the eventfd's first (writable) edge: the next turn sleeps. */
	weft__driver_turn(d, false);
	p3 = &f.rt->workers[3].parker;
	weft__parker_init(p3, d);
	ds.p = p3;
	assert_false(weft__idle_to_parked(f.idle, 0, false));
	assert_false(weft__idle_to_parked(f.idle, 3, false));
	/* Worker 3 is the latest sleeper, and sleeps in the driver. */
	assert_int_equal(pthread_create(&th, NULL, park_in_driver, &ds), 0);
	while (!weft__parker_in_driver(p3))
		sched_yield();
	assert_int_equal(weft__idle_worker_to_notify(f.idle, f.rt), 0);
	assert_true(weft__idle_from_searching(f.idle));
	/* The one left is taken, in the driver or not. */
	assert_int_equal(weft__idle_worker_to_notify(f.idle, f.rt), 3);
	atomic_store(&ds.stop, true);
	weft__parker_unpark(p3);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_false(weft__parker_in_driver(p3));
	weft__driver_fini(d);
	free(d);
	fixture_fini(&f);
}

/* ------------------------------------------------- threads and notifier */

struct crowd {
	struct fixture f;
	unsigned rounds;
	atomic_uint picked[MAX_WORKERS]; /* by the notifier */
	unsigned woke[MAX_WORKERS];      /* each worker's own, after join */
};

struct crowd_worker {
	struct crowd *c;
	unsigned index;
};

/*
 * A worker's life in miniature: park (listed first, then on the futex),
 * woken searching, stop searching, again.
 */
static void *crowd_worker_main(void *arg)
{
	struct crowd_worker *cw = arg;
	struct crowd *c = cw->c;
	parker_t *p = &c->f.rt->workers[cw->index].parker;

	for (unsigned r = 0; r < c->rounds; r++) {
		weft__idle_to_parked(c->f.idle, cw->index, false);
		weft__parker_park(p);
		c->woke[cw->index]++;
		weft__idle_from_searching(c->f.idle);
	}
	return NULL;
}

/*
 * Four workers park and wake over and over; one notifier wakes whoever
 * worker_to_notify() picks.  Every pick is a listed sleeper (a wrong pick
 * would leave a real sleeper unwoken: a hang), each worker is picked once
 * a round, and at the end nobody is listed, parked or searching.
 */
static void test_idle_notifier_and_sleepers(void **state)
{
	struct crowd *c = calloc(1, sizeof(*c));
	struct crowd_worker cw[4];
	pthread_t th[4];
	unsigned total = 0, want;

	(void)state;
	assert_non_null(c);
	fixture_init(&c->f, 4);
	c->rounds = scale_count(5000);
	want = 4 * c->rounds;
	for (unsigned i = 0; i < 4; i++) {
		cw[i] = (struct crowd_worker){ c, i };
		assert_int_equal(pthread_create(&th[i], NULL, crowd_worker_main,
						&cw[i]),
				 0);
	}
	while (total < want) {
		int i = weft__idle_worker_to_notify(c->f.idle, c->f.rt);

		if (i < 0) {
			sched_yield();
			continue;
		}
		assert_true((unsigned)i < 4);
		atomic_fetch_add(&c->picked[i], 1);
		weft__parker_unpark(&c->f.rt->workers[i].parker);
		total++;
	}
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(atomic_load(&c->picked[i]), c->rounds);
		assert_int_equal(c->woke[i], c->rounds);
	}
	assert_int_equal(c->f.idle->nsleepers, 0);
	assert_false(weft__idle_all_parked(c->f.idle));
	assert_int_equal(fill_searchers(c->f.idle), 2);
	assert_int_equal(weft__idle_worker_to_notify(c->f.idle, c->f.rt), -1);
	fixture_fini(&c->f);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_searching_bound_half),
		cmocka_unit_test(test_idle_park_bookkeeping),
		cmocka_unit_test(test_idle_notify_only_when_nobody_searches),
		cmocka_unit_test(test_idle_notify_prefers_futex_sleeper),
		cmocka_unit_test(test_idle_notifier_and_sleepers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
