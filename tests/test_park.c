/* SPDX-License-Identifier: MIT */
/*
 * The parker (runtime/src/park.c) through its internal API: an unpark
 * that comes before the park is kept, unparks that come together count
 * as one, a park returns only after an unpark (a ping-pong between two
 * threads with exact counts, the unparker's writes seen by the parked
 * thread: plain variables, for ThreadSanitizer to check), and a thread
 * parked inside the driver's turn is woken through the driver.
 *
 * A lost wake-up shows as a hang (the test's TIMEOUT); no test waits on
 * time for its result.
 */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "runtime_internal.h"
#include "test_helpers.h"

/* ------------------------------------------------------ unpark first */

/* Each unpark before its park: the park returns at once, every time. */
static void test_park_unpark_first_is_kept(void **state)
{
	parker_t p;

	(void)state;
	weft__parker_init(&p, NULL);
	for (unsigned i = 0; i < 1000; i++) {
		weft__parker_unpark(&p);
		weft__parker_park(&p);
	}
	assert_false(weft__parker_in_driver(&p));
}

struct late {
	parker_t p;
	tcount_t parking; /* the main thread is about to park */
	atomic_bool released;
};

static void *late_unparker(void *arg)
{
	struct late *l = arg;

	tcount_wait(&l->parking, 1);
	/* Give a park that wrongly returns the chance to be seen. */
	for (int i = 0; i < 5; i++) {
		sched_yield();
		usleep(1000);
	}
	atomic_store(&l->released, true);
	weft__parker_unpark(&l->p);
	return NULL;
}

/*
 * Two unparks before a park are one wake-up: the park after the first
 * one waits for the next unpark.
 */
static void test_park_unparks_coalesce(void **state)
{
	struct late l;
	pthread_t th;

	(void)state;
	memset(&l, 0, sizeof(l));
	weft__parker_init(&l.p, NULL);
	tcount_init(&l.parking);
	weft__parker_unpark(&l.p);
	weft__parker_unpark(&l.p);
	weft__parker_park(&l.p);
	assert_int_equal(pthread_create(&th, NULL, late_unparker, &l), 0);
	tcount_add(&l.parking, 1);
	weft__parker_park(&l.p);
	/* Only the helper's unpark ends this park. */
	assert_true(atomic_load(&l.released));
	assert_int_equal(pthread_join(th, NULL), 0);
	tcount_fini(&l.parking);
}

/* -------------------------------------------------------- ping-pong */

/*
 * The main thread parks on @ping, the helper on @pong.  The ball is a
 * plain variable: each side writes it, then unparks the other, which
 * must see the write when its park returns (the parker's release and
 * acquire; ThreadSanitizer reports a race otherwise).  A park that
 * returned without its unpark would see the previous value.
 */
struct pingpong {
	parker_t ping;
	parker_t pong;
	uint64_t ball;
	unsigned rounds;
	unsigned pong_parks; /* the helper's; read after the join */
	unsigned pong_bad;
};

static void *pong_main(void *arg)
{
	struct pingpong *pp = arg;

	for (unsigned i = 1; i <= pp->rounds; i++) {
		weft__parker_park(&pp->pong);
		pp->pong_parks++;
		if (pp->ball != 2 * (uint64_t)i - 1)
			pp->pong_bad++;
		pp->ball = 2 * (uint64_t)i;
		weft__parker_unpark(&pp->ping);
	}
	return NULL;
}

static void test_park_ping_pong_exact(void **state)
{
	struct pingpong pp;
	unsigned ping_parks = 0, ping_bad = 0;
	pthread_t th;

	(void)state;
	memset(&pp, 0, sizeof(pp));
	pp.rounds = scale_count(100000);
	weft__parker_init(&pp.ping, NULL);
	weft__parker_init(&pp.pong, NULL);
	assert_int_equal(pthread_create(&th, NULL, pong_main, &pp), 0);
	for (unsigned i = 1; i <= pp.rounds; i++) {
		pp.ball = 2 * (uint64_t)i - 1;
		weft__parker_unpark(&pp.pong);
		weft__parker_park(&pp.ping);
		ping_parks++;
		if (pp.ball != 2 * (uint64_t)i)
			ping_bad++;
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(ping_bad, 0);
	assert_int_equal(pp.pong_bad, 0);
	assert_int_equal(ping_parks, pp.rounds);
	assert_int_equal(pp.pong_parks, pp.rounds);
	assert_int_equal(pp.ball, 2 * (uint64_t)pp.rounds);
}

/* ----------------------------------------------------- in the driver */

struct in_driver {
	parker_t p;
	driver_t *d;
	atomic_bool stop;
	atomic_uint done; /* parks returned */
};

static void *driver_parker(void *arg)
{
	struct in_driver *id = arg;

	while (!atomic_load(&id->stop)) {
		weft__parker_park_driver(&id->p);
		atomic_fetch_add(&id->done, 1);
	}
	return NULL;
}

/*
 * A thread that parks in the driver (with no timer and no fd: its turn
 * blocks for good) is woken by an unpark, through the driver's eventfd:
 * each round waits until the parker says it sleeps in the driver, then
 * unparks it and waits for its park to return.  (park_driver may return
 * spuriously, an interrupted wait: rounds count returns, not unparks.)
 * An unpark before park_driver is kept as well.
 */
static void test_park_in_driver_woken(void **state)
{
	unsigned rounds = scale_count(200);
	struct in_driver id;
	pthread_t th;

	(void)state;
	memset(&id, 0, sizeof(id));
	id.d = aligned_alloc(WEFT_CACHELINE, sizeof(*id.d));
	assert_non_null(id.d);
	assert_int_equal(weft__driver_init(id.d), 0);
	/* Takes the eventfd's first (writable) edge: the next turn sleeps. */
	weft__driver_turn(id.d, false);
	weft__parker_init(&id.p, id.d);

	/* Kept: park_driver returns at once, without a turn. */
	weft__parker_unpark(&id.p);
	weft__parker_park_driver(&id.p);
	assert_false(weft__parker_in_driver(&id.p));
	assert_int_equal(atomic_load(&id.d->turns), 1);

	assert_int_equal(pthread_create(&th, NULL, driver_parker, &id), 0);
	for (unsigned i = 0; i < rounds; i++) {
		unsigned before;

		while (!weft__parker_in_driver(&id.p))
			sched_yield();
		before = atomic_load(&id.done);
		if (i == rounds - 1)
			atomic_store(&id.stop, true);
		weft__parker_unpark(&id.p);
		while (atomic_load(&id.done) == before)
			sched_yield();
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(atomic_load(&id.done) >= rounds);
	/* Each round's park returned out of a turn it slept in. */
	assert_true(atomic_load(&id.d->turns) >= rounds + 1);
	weft__driver_fini(id.d);
	free(id.d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_park_unpark_first_is_kept),
		cmocka_unit_test(test_park_unparks_coalesce),
		cmocka_unit_test(test_park_ping_pong_exact),
		cmocka_unit_test(test_park_in_driver_woken),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
