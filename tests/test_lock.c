/* SPDX-License-Identifier: MIT */
/*
 * The runtime's short lock (runtime/src/lock_internal.h, lock.c): free,
 * held, and held with sleepers; then threads that take it for a plain
 * counter's read-modify-write, beside a thread that holds it for long
 * enough that the others give up spinning and sleep on the futex: the
 * count is exact, and every sleeper was woken.
 */
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "lock_internal.h"
#include "test_helpers.h"

static void test_lock_states(void **state)
{
	weft__lock_t l = WEFT__LOCK_INIT;

	(void)state;
	assert_int_equal(atomic_load(&l.state), 0);
	weft__lock(&l);
	assert_int_equal(atomic_load(&l.state), 1);
	weft__unlock(&l);
	assert_int_equal(atomic_load(&l.state), 0);
	/* A holder that was waited for leaves 2; the unlock frees it. */
	weft__lock(&l);
	atomic_store(&l.state, 2);
	weft__unlock(&l);
	assert_int_equal(atomic_load(&l.state), 0);
}

#define THREADS 4u

struct shared {
	weft__lock_t lock;
	unsigned long count; /* only under lock */
	unsigned per;
	atomic_bool stop;
};

static void *adder_main(void *arg)
{
	struct shared *s = arg;

	for (unsigned i = 0; i < s->per; i++) {
		weft__lock(&s->lock);
		s->count++;
		weft__unlock(&s->lock);
	}
	return NULL;
}

/* Holds the lock 200 us at a time: past any spin, so adders sleep. */
static void *hog_main(void *arg)
{
	struct shared *s = arg;
	struct timespec ts = { 0, 200000 };

	while (!atomic_load(&s->stop)) {
		weft__lock(&s->lock);
		s->count += 1000;
		nanosleep(&ts, NULL);
		s->count -= 1000;
		weft__unlock(&s->lock);
		sched_yield();
	}
	return NULL;
}

static void test_lock_exact_count_with_sleepers(void **state)
{
	struct shared s = { .lock = WEFT__LOCK_INIT,
			    .per = stress_iters(200000) };
	pthread_t th[THREADS], hog;

	(void)state;
	assert_int_equal(pthread_create(&hog, NULL, hog_main, &s), 0);
	for (unsigned i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, adder_main, &s),
				 0);
	for (unsigned i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	atomic_store(&s.stop, true);
	assert_int_equal(pthread_join(hog, NULL), 0);
	assert_int_equal(s.count, (unsigned long)THREADS * s.per);
	assert_int_equal(atomic_load(&s.lock.state), 0);
}

struct waiter {
	weft__lock_t *l;
	atomic_int got;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	weft__lock(w->l);
	atomic_store(&w->got, 1);
	weft__unlock(w->l);
	return NULL;
}

/*
 * The sleeping path, every run: a waiter behind a holder that does not
 * let go marks the word 2 (held, waited for) once its spin is over; the
 * holder's unlock then wakes it, and it takes the lock.
 */
static void test_lock_waiter_marks_and_is_woken(void **state)
{
	weft__lock_t l = WEFT__LOCK_INIT;
	struct waiter w = { .l = &l };
	pthread_t th;
	int ms;

	(void)state;
	weft__lock(&l);
	assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
	for (ms = 0; ms < 10000 && atomic_load(&l.state) != 2; ms++)
		usleep(1000);
	assert_int_equal(atomic_load(&l.state), 2);
	assert_int_equal(atomic_load(&w.got), 0);
	weft__unlock(&l);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(atomic_load(&w.got), 1);
	assert_int_equal(atomic_load(&l.state), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lock_states),
		cmocka_unit_test(test_lock_waiter_marks_and_is_woken),
		cmocka_unit_test(test_lock_exact_count_with_sleepers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
