/* SPDX-License-Identifier: MIT */
/*
 * Wakes from foreign threads racing with polls.
 *
 * NTASKS tasks each keep a clone of their waker in a slot.  NTHREADS plain
 * threads make ROUNDS passes over every slot: bump the slot's signal count,
 * clone the waker under the slot's lock, wake the clone (by reference or by
 * value) outside it.  A task completes once it has seen every signal
 * (NTHREADS * ROUNDS), so a lost wake-up leaves it pending forever and the
 * test times out.  The protocol itself loses none: the task stores its
 * waker under the lock before it reads the count, a thread bumps the count
 * before it takes the lock.
 *
 * Each poll checks, with atomics, that no other poll of the same task is
 * running (in_poll exchange) and that the task has not completed.  Tasks
 * also wake themselves during some polls; the poll that sees all signals
 * always does so and returns PENDING, so the task completes only if a wake
 * during a poll leads to another poll.
 *
 * WEFT_STRESS_ITERS sets the number of rounds of the whole scenario.
 */
#include <stdatomic.h>
#include <string.h>

#include "test_helpers.h"

#define NTASKS 1000u
#define NTHREADS 3u
#define ROUNDS 10u
#define SIGNALS (NTHREADS * ROUNDS)

struct slot {
	pthread_mutex_t lock;
	weft_waker_t waker; /* guarded by lock */
	_Atomic unsigned signals;
	_Atomic unsigned polls;
	_Atomic bool in_poll;
	_Atomic bool done;
	_Atomic bool expect_repoll; /* set with a self-wake */
	_Atomic unsigned self_wakes;
	_Atomic unsigned repolls;
	_Atomic unsigned drops;
	bool finishing; /* saw every signal; only polls touch it */
};

struct shared {
	struct slot *slots;
	_Atomic unsigned concurrent_polls;
	_Atomic unsigned polls_after_done;
	_Atomic unsigned completed;
	_Atomic unsigned long wakes;
};

struct task {
	struct shared *sh;
	unsigned index;
};

/* Totals over all runs, for the summary line. */
static unsigned long total_polls, total_wakes, total_self_wakes;

static weft_poll_t task_poll(void *arg, weft_cx_t *cx)
{
	struct task *t = arg;
	struct shared *sh = t->sh;
	struct slot *s = &sh->slots[t->index];
	unsigned n;

	if (atomic_exchange(&s->in_poll, true))
		atomic_fetch_add(&sh->concurrent_polls, 1);
	if (atomic_load(&s->done))
		atomic_fetch_add(&sh->polls_after_done, 1);
	n = atomic_fetch_add(&s->polls, 1) + 1;
	if (atomic_exchange(&s->expect_repoll, false))
		atomic_fetch_add(&s->repolls, 1);

	if (s->finishing) {
		atomic_store(&s->done, true);
		atomic_fetch_add(&sh->completed, 1);
		atomic_store(&s->in_poll, false);
		return WEFT_READY;
	}

	pthread_mutex_lock(&s->lock);
	weft_waker_set(&s->waker, weft_cx_waker(cx));
	pthread_mutex_unlock(&s->lock);

	if (atomic_load(&s->signals) == SIGNALS) {
		/* Done, but only after one more poll that nobody else asks. */
		s->finishing = true;
		atomic_store(&s->expect_repoll, true);
		atomic_fetch_add(&s->self_wakes, 1);
		weft_waker_wake_by_ref(weft_cx_waker(cx));
	} else if (n % 5 == 0) {
		atomic_store(&s->expect_repoll, true);
		atomic_fetch_add(&s->self_wakes, 1);
		weft_waker_wake_by_ref(weft_cx_waker(cx));
	}
	if (!atomic_exchange(&s->in_poll, false))
		atomic_fetch_add(&sh->concurrent_polls, 1);
	return WEFT_PENDING;
}

static void task_drop(void *arg)
{
	struct task *t = arg;
	struct slot *s = &t->sh->slots[t->index];

	atomic_fetch_add(&s->drops, 1);
	pthread_mutex_lock(&s->lock);
	weft_waker_drop(&s->waker);
	pthread_mutex_unlock(&s->lock);
}

struct waker_thread {
	struct shared *sh;
	unsigned id;
};

static void *waker_main(void *arg)
{
	struct waker_thread *wt = arg;
	struct shared *sh = wt->sh;
	unsigned long wakes = 0;

	for (unsigned r = 0; r < ROUNDS; r++) {
		for (unsigned k = 0; k < NTASKS; k++) {
			/* Each thread walks the tasks from its own start. */
			unsigned i = (k + wt->id * NTASKS / NTHREADS) % NTASKS;
			struct slot *s = &sh->slots[i];
			weft_waker_t w;

			atomic_fetch_add(&s->signals, 1);
			pthread_mutex_lock(&s->lock);
			w = weft_waker_clone(&s->waker);
			pthread_mutex_unlock(&s->lock);
			if (weft_waker_is_empty(&w))
				continue;
			wakes++;
			if ((k + r) % 2) {
				weft_waker_wake(&w);
			} else {
				weft_waker_wake_by_ref(&w);
				weft_waker_drop(&w);
			}
		}
	}
	atomic_fetch_add(&sh->wakes, wakes);
	return NULL;
}

static void run_once(unsigned workers)
{
	weft_runtime_t *rt = rt_create(workers);
	struct waker_thread wt[NTHREADS];
	pthread_t tid[NTHREADS];
	weft_join_t **joins;
	struct shared sh;
	weft_runtime_metrics_t m;
	unsigned long polls = 0, self_wakes = 0, repolls = 0;

	memset(&sh, 0, sizeof(sh));
	sh.slots = calloc(NTASKS, sizeof(*sh.slots));
	joins = calloc(NTASKS, sizeof(*joins));
	assert_non_null(sh.slots);
	assert_non_null(joins);
	for (unsigned i = 0; i < NTASKS; i++)
		pthread_mutex_init(&sh.slots[i].lock, NULL);

	for (unsigned i = 0; i < NTASKS; i++) {
		struct task t = { .sh = &sh, .index = i };

		joins[i] =
			spawn_ok(rt, task_poll, task_drop, &t, sizeof(t), true);
	}
	for (unsigned i = 0; i < NTHREADS; i++) {
		wt[i] = (struct waker_thread){ .sh = &sh, .id = i };
		assert_int_equal(
			pthread_create(&tid[i], NULL, waker_main, &wt[i]), 0);
	}
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_join(tid[i], NULL), 0);
	for (unsigned i = 0; i < NTASKS; i++)
		assert_int_equal(join_wait_drop(joins[i], NULL), 0);

	assert_int_equal(weft_runtime_metrics(rt, &m), 0);
	assert_int_equal(m.spawned_tasks, NTASKS);
	assert_int_equal(m.remote_spawns, NTASKS);
	/* Every poll was counted by the worker that made it. */
	for (unsigned i = 0; i < NTASKS; i++)
		polls += atomic_load(&sh.slots[i].polls);
	assert_int_equal(worker_sum(rt, WORKER_COUNTER(polls)), polls);
	weft_runtime_destroy(rt);

	assert_int_equal(atomic_load(&sh.concurrent_polls), 0);
	assert_int_equal(atomic_load(&sh.polls_after_done), 0);
	assert_int_equal(atomic_load(&sh.completed), NTASKS);
	for (unsigned i = 0; i < NTASKS; i++) {
		struct slot *s = &sh.slots[i];

		assert_int_equal(atomic_load(&s->signals), SIGNALS);
		assert_true(atomic_load(&s->done));
		assert_int_equal(atomic_load(&s->drops), 1);
		assert_false(atomic_load(&s->expect_repoll));
		/* Every wake during a poll led to exactly one more poll. */
		assert_int_equal(atomic_load(&s->repolls),
				 atomic_load(&s->self_wakes));
		assert_true(weft_waker_is_empty(&s->waker));
		self_wakes += atomic_load(&s->self_wakes);
		repolls += atomic_load(&s->repolls);
		pthread_mutex_destroy(&s->lock);
	}
	assert_int_equal(repolls, self_wakes);
	total_polls += polls;
	total_wakes += atomic_load(&sh.wakes);
	total_self_wakes += self_wakes;
	free(joins);
	free(sh.slots);
}

static void test_stress_wake(void **state)
{
	unsigned iters = stress_iters(200);

	(void)state;
	for (unsigned i = 0; i < iters; i++)
		run_once(2 + i % 3);
	print_message("stress_wake: %u runs of %u tasks: %lu polls, %lu "
		      "foreign wakes, %lu self-wakes\n",
		      iters, NTASKS, total_polls, total_wakes,
		      total_self_wakes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stress_wake),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
