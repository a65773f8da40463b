/* SPDX-License-Identifier: MIT */
/*
 * The async primitives (sync_*.c): semaphore, mutex, notify, mpsc channel,
 * select and join.  Public API only.
 *
 * Two kinds of test.  Scripted ones run one poll of a block_on future on
 * the test thread and drive several futures by hand with its context, so
 * that each interleaving (queued, granted but not yet polled, dropped) is
 * exact and the assertions run on the test's own thread.  Threaded ones run
 * tasks on a runtime, record what they saw in atomics, and the test thread
 * asserts after joining them.
 *
 * Every test ends with every future finished and every primitive released:
 * ASan's leak checker sees any waker clone or channel left behind (a task
 * waker keeps its task's memory alive; a block_on waker is malloc'd).
 */
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_helpers.h"

/* -------------------------------------------------------------- scripts */

typedef void (*script_fn)(weft_cx_t *cx, void *arg);

struct script {
	script_fn fn;
	void *arg;
};

static weft_poll_t script_poll(void *arg, weft_cx_t *cx)
{
	struct script *s = arg;

	s->fn(cx, s->arg);
	return WEFT_READY;
}

/* Runs @fn once, on this thread, inside a block_on poll. */
static void run_script(weft_runtime_t *rt, script_fn fn, void *arg)
{
	struct script s = { .fn = fn, .arg = arg };

	assert_int_equal(weft_block_on(rt, script_poll, &s, NULL), 0);
}

#define assert_pending(expr) assert_int_equal((expr), WEFT_PENDING)
#define assert_ready(expr) assert_int_equal((expr), WEFT_READY)

/* ------------------------------------------------------------ semaphore */

static void sem_fair_script(weft_cx_t *cx, void *arg)
{
	weft_semaphore_acquire_t big, small;
	weft_semaphore_t sem;

	(void)arg;
	assert_int_equal(weft_semaphore_init(&sem, 3), 0);
	assert_true(weft_semaphore_try_acquire(&sem, 2));
	assert_false(weft_semaphore_try_acquire(&sem, 2));
	assert_int_equal(weft_semaphore_available(&sem), 1);
	weft_semaphore_release(&sem, 2);
	assert_int_equal(weft_semaphore_available(&sem), 3);

	/* A large request at the head holds back a later small one. */
	weft_semaphore_acquire_init(&big, &sem, 5);
	weft_semaphore_acquire_init(&small, &sem, 1);
	assert_pending(weft_semaphore_acquire_poll(&big, cx));
	assert_int_equal(weft_semaphore_available(&sem), 0);
	assert_pending(weft_semaphore_acquire_poll(&small, cx));
	assert_false(weft_semaphore_try_acquire(&sem, 1));
	weft_semaphore_release(&sem, 1);
	assert_pending(weft_semaphore_acquire_poll(&small, cx));
	assert_pending(weft_semaphore_acquire_poll(&big, cx));
	weft_semaphore_release(&sem, 1);
	assert_ready(weft_semaphore_acquire_poll(&big, cx));
	assert_int_equal(big.status, 0);
	/* READY again, acquiring nothing more. */
	assert_ready(weft_semaphore_acquire_poll(&big, cx));
	assert_pending(weft_semaphore_acquire_poll(&small, cx));
	weft_semaphore_release(&sem, 5);
	assert_ready(weft_semaphore_acquire_poll(&small, cx));
	assert_int_equal(small.status, 0);
	assert_int_equal(weft_semaphore_available(&sem), 4);
	weft_semaphore_acquire_fini(&big);
	weft_semaphore_acquire_fini(&small);
	/* fini after READY released nothing. */
	assert_int_equal(weft_semaphore_available(&sem), 4);
	weft_semaphore_release(&sem, 1);
	assert_int_equal(weft_semaphore_available(&sem), 5);

	/* Zero permits: at once. */
	weft_semaphore_acquire_init(&small, &sem, 0);
	assert_ready(weft_semaphore_acquire_poll(&small, cx));
	weft_semaphore_acquire_fini(&small);
	weft_semaphore_fini(&sem);
}

static void test_sync_async_semaphore_fifo(void **state)
{
	(void)state;
	run_script(NULL, sem_fair_script, NULL);
}

static void sem_cancel_script(weft_cx_t *cx, void *arg)
{
	weft_semaphore_acquire_t a, b, c;
	weft_semaphore_t sem;

	(void)arg;
	/* Dropped while queued with part of its request set aside. */
	assert_int_equal(weft_semaphore_init(&sem, 0), 0);
	weft_semaphore_acquire_init(&a, &sem, 2);
	weft_semaphore_acquire_init(&b, &sem, 1);
	assert_pending(weft_semaphore_acquire_poll(&a, cx));
	assert_pending(weft_semaphore_acquire_poll(&b, cx));
	weft_semaphore_release(&sem, 1); /* set aside for a */
	assert_pending(weft_semaphore_acquire_poll(&b, cx));
	weft_semaphore_acquire_fini(&a); /* ... which passes it to b */
	assert_ready(weft_semaphore_acquire_poll(&b, cx));
	assert_int_equal(b.status, 0);
	weft_semaphore_acquire_fini(&b);
	assert_int_equal(weft_semaphore_available(&sem), 0);
	weft_semaphore_release(&sem, 1);

	/* Granted but dropped before it saw it. */
	assert_true(weft_semaphore_try_acquire(&sem, 1));
	weft_semaphore_acquire_init(&a, &sem, 1);
	weft_semaphore_acquire_init(&b, &sem, 1);
	assert_pending(weft_semaphore_acquire_poll(&a, cx));
	assert_pending(weft_semaphore_acquire_poll(&b, cx));
	weft_semaphore_release(&sem, 1); /* a's now */
	weft_semaphore_acquire_fini(&a); /* -> b */
	assert_ready(weft_semaphore_acquire_poll(&b, cx));
	weft_semaphore_acquire_fini(&b);
	weft_semaphore_release(&sem, 1);

	/* The last waiter leaves: the count is usable again. */
	assert_true(weft_semaphore_try_acquire(&sem, 1));
	weft_semaphore_acquire_init(&a, &sem, 1);
	assert_pending(weft_semaphore_acquire_poll(&a, cx));
	weft_semaphore_acquire_fini(&a);
	weft_semaphore_release(&sem, 1);
	assert_true(weft_semaphore_try_acquire(&sem, 1));
	weft_semaphore_release(&sem, 1);

	/* Close: queued acquirers fail, their share goes back. */
	weft_semaphore_acquire_init(&a, &sem, 3);
	weft_semaphore_acquire_init(&c, &sem, 1);
	assert_pending(weft_semaphore_acquire_poll(&a, cx));
	assert_pending(weft_semaphore_acquire_poll(&c, cx));
	assert_false(weft_semaphore_is_closed(&sem));
	weft_semaphore_close(&sem);
	assert_true(weft_semaphore_is_closed(&sem));
	assert_ready(weft_semaphore_acquire_poll(&a, cx));
	assert_int_equal(a.status, -EPIPE);
	weft_semaphore_acquire_fini(&a);
	weft_semaphore_acquire_fini(&c); /* never saw the close */
	assert_int_equal(weft_semaphore_available(&sem), 1);
	assert_false(weft_semaphore_try_acquire(&sem, 1));
	weft_semaphore_acquire_init(&b, &sem, 1);
	assert_ready(weft_semaphore_acquire_poll(&b, cx));
	assert_int_equal(b.status, -EPIPE);
	weft_semaphore_acquire_fini(&b);
	weft_semaphore_fini(&sem);
}

/* More waiters than one batch of wakes, completed and then closed. */
static void sem_many_script(weft_cx_t *cx, void *arg)
{
	enum { MANY = 40 };
	weft_semaphore_acquire_t acq[MANY];
	weft_semaphore_t sem;

	(void)arg;
	assert_int_equal(weft_semaphore_init(&sem, 0), 0);
	for (unsigned i = 0; i < MANY; i++) {
		weft_semaphore_acquire_init(&acq[i], &sem, 1);
		assert_pending(weft_semaphore_acquire_poll(&acq[i], cx));
	}
	weft_semaphore_release(&sem, MANY + 1);
	for (unsigned i = 0; i < MANY; i++) {
		assert_ready(weft_semaphore_acquire_poll(&acq[i], cx));
		assert_int_equal(acq[i].status, 0);
		weft_semaphore_acquire_fini(&acq[i]);
	}
	assert_int_equal(weft_semaphore_available(&sem), 1);
	assert_true(weft_semaphore_try_acquire(&sem, 1));
	for (unsigned i = 0; i < MANY; i++) {
		weft_semaphore_acquire_init(&acq[i], &sem, 2);
		assert_pending(weft_semaphore_acquire_poll(&acq[i], cx));
	}
	weft_semaphore_release(&sem, 3); /* one whole grant, one half */
	weft_semaphore_close(&sem);
	assert_ready(weft_semaphore_acquire_poll(&acq[0], cx));
	assert_int_equal(acq[0].status, 0);
	for (unsigned i = 1; i < MANY; i++) {
		assert_ready(weft_semaphore_acquire_poll(&acq[i], cx));
		assert_int_equal(acq[i].status, -EPIPE);
	}
	for (unsigned i = 0; i < MANY; i++)
		weft_semaphore_acquire_fini(&acq[i]);
	assert_int_equal(weft_semaphore_available(&sem), 1);
	weft_semaphore_fini(&sem);
}

static void test_sync_async_semaphore_cancel(void **state)
{
	(void)state;
	run_script(NULL, sem_cancel_script, NULL);
	run_script(NULL, sem_many_script, NULL);
}

/* Many tasks; each holds 1..3 of K permits across a yield. */
#define SEM_K 5

struct sem_shared {
	weft_semaphore_t sem;
	_Atomic unsigned held;
	_Atomic unsigned errors;
	_Atomic unsigned long acquired;
};

struct sem_task {
	int weft_pc;
	struct sem_shared *sh;
	weft_semaphore_acquire_t acq;
	unsigned i, iters, seed, n;
};

static weft_poll_t sem_task_poll(void *arg, weft_cx_t *cx)
{
	struct sem_task *st = arg;
	unsigned h;

	WEFT_ASYNC_BEGIN(st);
	for (st->i = 0; st->i < st->iters; st->i++) {
		st->n = 1 + (st->seed + st->i) % 3;
		weft_semaphore_acquire_init(&st->acq, &st->sh->sem, st->n);
		WEFT_AWAIT(st, weft_semaphore_acquire_poll(&st->acq, cx));
		weft_semaphore_acquire_fini(&st->acq);
		if (st->acq.status)
			atomic_fetch_add(&st->sh->errors, 1);
		h = atomic_fetch_add(&st->sh->held, st->n) + st->n;
		if (h > SEM_K)
			atomic_fetch_add(&st->sh->errors, 1);
		atomic_fetch_add(&st->sh->acquired, st->n);
		WEFT_YIELD(st, cx);
		atomic_fetch_sub(&st->sh->held, st->n);
		weft_semaphore_release(&st->sh->sem, st->n);
	}
	WEFT_ASYNC_END(st);
}

static void sem_task_drop(void *arg)
{
	struct sem_task *st = arg;

	weft_semaphore_acquire_fini(&st->acq);
}

static void test_sync_async_semaphore_counts(void **state)
{
	enum { TASKS = 16 };
	weft_runtime_t *rt = rt_create(4);
	struct sem_shared sh = { 0 };
	weft_join_t *joins[TASKS];
	unsigned long want = 0;
	unsigned iters = scale_count(2000);

	(void)state;
	assert_int_equal(weft_semaphore_init(&sh.sem, SEM_K), 0);
	for (unsigned t = 0; t < TASKS; t++) {
		struct sem_task st = { .sh = &sh, .iters = iters, .seed = t };

		for (unsigned i = 0; i < iters; i++)
			want += 1 + (t + i) % 3;
		joins[t] = spawn_ok(rt, sem_task_poll, sem_task_drop, &st,
				    sizeof(st), true);
	}
	for (unsigned t = 0; t < TASKS; t++)
		assert_int_equal(join_wait_drop(joins[t], NULL), 0);
	assert_int_equal(atomic_load(&sh.errors), 0);
	assert_int_equal(atomic_load(&sh.held), 0);
	assert_int_equal(atomic_load(&sh.acquired), want);
	assert_int_equal(weft_semaphore_available(&sh.sem), SEM_K);
	weft_runtime_destroy(rt);
	weft_semaphore_fini(&sh.sem);
}

/* ---------------------------------------------------------------- mutex */

/* Tasks queue one by one while the test holds the lock. */
#define FIFO_TASKS 8

struct fifo_shared {
	weft_async_mutex_t m;
	tcount_t queued;
	unsigned order[FIFO_TASKS];
	unsigned n;
	_Atomic unsigned drops;
};

struct fifo_task {
	int weft_pc;
	struct fifo_shared *sh;
	unsigned idx;
	bool signalled;
	weft_async_mutex_lock_t lk;
};

/* Polls the lock; says so the first time it is queued. */
static weft_poll_t fifo_lock(struct fifo_task *st, weft_cx_t *cx)
{
	weft_poll_t r = weft_async_mutex_lock_poll(&st->lk, cx);

	if (r == WEFT_PENDING && !st->signalled) {
		st->signalled = true;
		tcount_add(&st->sh->queued, 1);
	}
	return r;
}

static weft_poll_t fifo_task_poll(void *arg, weft_cx_t *cx)
{
	struct fifo_task *st = arg;

	WEFT_ASYNC_BEGIN(st);
	weft_async_mutex_lock_init(&st->lk, &st->sh->m);
	WEFT_AWAIT(st, fifo_lock(st, cx));
	weft_async_mutex_lock_fini(&st->lk);
	/* The mutex guards order[] and n. */
	st->sh->order[st->sh->n++] = st->idx;
	weft_async_mutex_unlock(&st->sh->m);
	WEFT_ASYNC_END(st);
}

static void fifo_task_drop(void *arg)
{
	struct fifo_task *st = arg;

	weft_async_mutex_lock_fini(&st->lk);
	atomic_fetch_add(&st->sh->drops, 1);
}

static void test_sync_async_mutex_fifo(void **state)
{
	weft_runtime_t *rt = rt_create(4);
	struct fifo_shared sh = { 0 };
	weft_join_t *joins[FIFO_TASKS];

	(void)state;
	weft_async_mutex_init(&sh.m);
	tcount_init(&sh.queued);
	assert_true(weft_async_mutex_try_lock(&sh.m));
	assert_false(weft_async_mutex_try_lock(&sh.m));
	for (unsigned i = 0; i < FIFO_TASKS; i++) {
		struct fifo_task st = { .sh = &sh, .idx = i };

		joins[i] = spawn_ok(rt, fifo_task_poll, fifo_task_drop, &st,
				    sizeof(st), true);
		tcount_wait(&sh.queued, i + 1);
	}
	/* Mutex-protected state is handed over by the unlock. */
	weft_async_mutex_unlock(&sh.m);
	for (unsigned i = 0; i < FIFO_TASKS; i++)
		assert_int_equal(join_wait_drop(joins[i], NULL), 0);
	assert_int_equal(sh.n, FIFO_TASKS);
	for (unsigned i = 0; i < FIFO_TASKS; i++)
		assert_int_equal(sh.order[i], i);
	assert_int_equal(atomic_load(&sh.drops), FIFO_TASKS);
	assert_true(weft_async_mutex_try_lock(&sh.m));
	weft_async_mutex_unlock(&sh.m);
	weft_runtime_destroy(rt);
	tcount_fini(&sh.queued);
	weft_async_mutex_fini(&sh.m);
}

/* The lock is held across a sleep; nobody else gets in meanwhile. */
struct across_shared {
	weft_async_mutex_t m;
	_Atomic unsigned inside;
	_Atomic unsigned errors;
	unsigned long counter; /* guarded by m */
};

struct across_task {
	int weft_pc;
	struct across_shared *sh;
	unsigned i, iters;
	unsigned long seen;
	weft_async_mutex_lock_t lk;
	weft_sleep_t sleep;
};

static weft_poll_t across_task_poll(void *arg, weft_cx_t *cx)
{
	struct across_task *st = arg;

	WEFT_ASYNC_BEGIN(st);
	for (st->i = 0; st->i < st->iters; st->i++) {
		weft_async_mutex_lock_init(&st->lk, &st->sh->m);
		WEFT_AWAIT(st, weft_async_mutex_lock_poll(&st->lk, cx));
		weft_async_mutex_lock_fini(&st->lk);
		if (atomic_exchange(&st->sh->inside, 1) != 0)
			atomic_fetch_add(&st->sh->errors, 1);
		st->seen = st->sh->counter;
		weft_sleep_init(&st->sleep, WEFT_MSEC(1));
		WEFT_AWAIT(st, weft_sleep_poll(&st->sleep, cx));
		weft_sleep_fini(&st->sleep);
		st->sh->counter = st->seen + 1;
		atomic_store(&st->sh->inside, 0);
		weft_async_mutex_unlock(&st->sh->m);
	}
	WEFT_ASYNC_END(st);
}

static void across_task_drop(void *arg)
{
	struct across_task *st = arg;

	weft_async_mutex_lock_fini(&st->lk);
	weft_sleep_fini(&st->sleep);
}

static void test_sync_async_mutex_across_await(void **state)
{
	enum { TASKS = 4, ITERS = 5 };
	weft_runtime_t *rt = rt_create(2);
	struct across_shared sh = { 0 };
	weft_join_t *joins[TASKS];

	(void)state;
	weft_async_mutex_init(&sh.m);
	for (unsigned t = 0; t < TASKS; t++) {
		struct across_task st = { .sh = &sh, .iters = ITERS };

		joins[t] = spawn_ok(rt, across_task_poll, across_task_drop, &st,
				    sizeof(st), true);
	}
	for (unsigned t = 0; t < TASKS; t++)
		assert_int_equal(join_wait_drop(joins[t], NULL), 0);
	assert_int_equal(atomic_load(&sh.errors), 0);
	assert_int_equal(sh.counter, TASKS * ITERS);
	weft_runtime_destroy(rt);
	weft_async_mutex_fini(&sh.m);
}

static void mutex_cancel_script(weft_cx_t *cx, void *arg)
{
	weft_async_mutex_lock_t a, b;
	weft_async_mutex_t m;

	(void)arg;
	weft_async_mutex_init(&m);
	assert_true(weft_async_mutex_try_lock(&m));

	/* Dropped while queued: the next one still gets it. */
	weft_async_mutex_lock_init(&a, &m);
	weft_async_mutex_lock_init(&b, &m);
	assert_pending(weft_async_mutex_lock_poll(&a, cx));
	assert_pending(weft_async_mutex_lock_poll(&b, cx));
	weft_async_mutex_lock_fini(&a);
	weft_async_mutex_unlock(&m);
	assert_ready(weft_async_mutex_lock_poll(&b, cx));
	weft_async_mutex_lock_fini(&b);

	/* Handed the lock, dropped before seeing it: passed on. */
	weft_async_mutex_lock_init(&a, &m);
	weft_async_mutex_lock_init(&b, &m);
	assert_pending(weft_async_mutex_lock_poll(&a, cx));
	assert_pending(weft_async_mutex_lock_poll(&b, cx));
	weft_async_mutex_unlock(&m);
	assert_false(weft_async_mutex_try_lock(&m));
	weft_async_mutex_lock_fini(&a);
	assert_ready(weft_async_mutex_lock_poll(&b, cx));
	weft_async_mutex_lock_fini(&b);

	/* And with nobody behind it, the mutex is simply unlocked. */
	weft_async_mutex_lock_init(&a, &m);
	assert_pending(weft_async_mutex_lock_poll(&a, cx));
	weft_async_mutex_unlock(&m);
	weft_async_mutex_lock_fini(&a);
	assert_true(weft_async_mutex_try_lock(&m));
	weft_async_mutex_unlock(&m);
	weft_async_mutex_fini(&m);
}

static void test_sync_async_mutex_cancel(void **state)
{
	(void)state;
	run_script(NULL, mutex_cancel_script, NULL);
}

/* Aborting a task queued on the mutex: the next task still gets it. */
static void test_sync_async_mutex_abort(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct fifo_shared sh = { 0 };
	struct fifo_task st0 = { .sh = &sh, .idx = 0 };
	struct fifo_task st1 = { .sh = &sh, .idx = 1 };
	weft_join_t *j0, *j1;

	(void)state;
	weft_async_mutex_init(&sh.m);
	tcount_init(&sh.queued);
	assert_true(weft_async_mutex_try_lock(&sh.m));
	j0 = spawn_ok(rt, fifo_task_poll, fifo_task_drop, &st0, sizeof(st0),
		      true);
	tcount_wait(&sh.queued, 1);
	j1 = spawn_ok(rt, fifo_task_poll, fifo_task_drop, &st1, sizeof(st1),
		      true);
	tcount_wait(&sh.queued, 2);
	weft_join_abort(j0);
	assert_int_equal(join_wait_drop(j0, NULL), -ECANCELED);
	weft_async_mutex_unlock(&sh.m);
	assert_int_equal(join_wait_drop(j1, NULL), 0);
	assert_int_equal(sh.n, 1);
	assert_int_equal(sh.order[0], 1);
	assert_int_equal(atomic_load(&sh.drops), 2);
	assert_true(weft_async_mutex_try_lock(&sh.m));
	weft_async_mutex_unlock(&sh.m);
	weft_runtime_destroy(rt);
	tcount_fini(&sh.queued);
	weft_async_mutex_fini(&sh.m);
}

/* --------------------------------------------------------------- notify */

static void notify_one_script(weft_cx_t *cx, void *arg)
{
	weft_notified_t a, b, c;
	weft_notify_t n;

	(void)arg;
	weft_notify_init(&n);

	/* A permit is stored, only one however many notifies. */
	weft_notify_one(&n);
	weft_notify_one(&n);
	weft_notified_init(&a, &n);
	weft_notified_init(&b, &n);
	assert_ready(weft_notified_poll(&a, cx));
	assert_pending(weft_notified_poll(&b, cx));
	weft_notify_one(&n);
	assert_ready(weft_notified_poll(&b, cx));
	weft_notified_fini(&a);
	weft_notified_fini(&b);

	/* FIFO among waiters. */
	weft_notified_init(&a, &n);
	weft_notified_init(&b, &n);
	assert_pending(weft_notified_poll(&a, cx));
	assert_pending(weft_notified_poll(&b, cx));
	weft_notify_one(&n);
	assert_pending(weft_notified_poll(&b, cx));
	assert_ready(weft_notified_poll(&a, cx));
	weft_notify_one(&n);
	assert_ready(weft_notified_poll(&b, cx));
	weft_notified_fini(&a);
	weft_notified_fini(&b);

	/* Notified, dropped before seeing it: the next waiter gets it. */
	weft_notified_init(&a, &n);
	weft_notified_init(&b, &n);
	assert_pending(weft_notified_poll(&a, cx));
	assert_pending(weft_notified_poll(&b, cx));
	weft_notify_one(&n);
	weft_notified_fini(&a);
	assert_ready(weft_notified_poll(&b, cx));
	weft_notified_fini(&b);

	/* ... or, with nobody behind, it becomes the permit. */
	weft_notified_init(&a, &n);
	assert_pending(weft_notified_poll(&a, cx));
	weft_notify_one(&n);
	weft_notified_fini(&a);
	weft_notified_init(&c, &n);
	assert_ready(weft_notified_poll(&c, cx));
	weft_notified_fini(&c);

	/* A queued waiter that leaves leaves nothing behind. */
	weft_notified_init(&a, &n);
	assert_pending(weft_notified_poll(&a, cx));
	weft_notified_fini(&a);
	weft_notified_init(&a, &n);
	assert_pending(weft_notified_poll(&a, cx));
	weft_notified_fini(&a);
	weft_notify_fini(&n);
}

static void test_sync_async_notify_one(void **state)
{
	(void)state;
	run_script(NULL, notify_one_script, NULL);
}

static void notify_waiters_script(weft_cx_t *cx, void *arg)
{
	weft_notified_t a, b, c, d, e;
	weft_notify_t n;

	(void)arg;
	weft_notify_init(&n);
	weft_notified_init(&a, &n);
	weft_notified_init(&b, &n);
	weft_notified_init(&c, &n);
	assert_pending(weft_notified_poll(&a, cx));
	assert_pending(weft_notified_poll(&b, cx));
	/* c was initialised before the call but not yet polled. */
	weft_notify_waiters(&n);
	weft_notified_init(&d, &n);
	assert_ready(weft_notified_poll(&b, cx));
	assert_ready(weft_notified_poll(&a, cx));
	assert_ready(weft_notified_poll(&c, cx));
	/* Initialised after: waits, and no permit was stored. */
	assert_pending(weft_notified_poll(&d, cx));
	weft_notified_init(&e, &n);
	assert_pending(weft_notified_poll(&e, cx));
	weft_notify_waiters(&n);
	assert_ready(weft_notified_poll(&d, cx));
	assert_ready(weft_notified_poll(&e, cx));
	/* A stored permit survives notify_waiters(). */
	weft_notify_one(&n);
	weft_notify_waiters(&n);
	weft_notified_fini(&a);
	weft_notified_init(&a, &n);
	assert_ready(weft_notified_poll(&a, cx));
	weft_notified_fini(&a);
	weft_notified_fini(&b);
	weft_notified_fini(&c);
	weft_notified_fini(&d);
	weft_notified_fini(&e);

	weft_notify_fini(&n);
}

/* More waiters than one batch of wakes (a fresh poll: a READY costs budget). */
static void notify_many_script(weft_cx_t *cx, void *arg)
{
	enum { MANY = 100 };
	weft_notified_t many[MANY], late;
	weft_notify_t n;

	(void)arg;
	weft_notify_init(&n);
	for (unsigned i = 0; i < MANY; i++) {
		weft_notified_init(&many[i], &n);
		assert_pending(weft_notified_poll(&many[i], cx));
	}
	weft_notify_waiters(&n);
	weft_notified_init(&late, &n);
	assert_pending(weft_notified_poll(&late, cx));
	for (unsigned i = 0; i < MANY; i++) {
		assert_ready(weft_notified_poll(&many[i], cx));
		weft_notified_fini(&many[i]);
	}
	weft_notified_fini(&late);
	weft_notify_fini(&n);
}

static void test_sync_async_notify_waiters(void **state)
{
	(void)state;
	run_script(NULL, notify_waiters_script, NULL);
	run_script(NULL, notify_many_script, NULL);
}

/* Threads notify, a task waits with the init-check-await pattern. */
struct nt_shared {
	weft_notify_t n;
	_Atomic unsigned value;
	unsigned target;
	_Atomic unsigned wakes;
	tcount_t waiting; /* +1 when a task first waits */
};

struct nt_task {
	int weft_pc;
	struct nt_shared *sh;
	bool signalled;
	weft_notified_t nd;
};

static weft_poll_t nt_wait(struct nt_task *st, weft_cx_t *cx)
{
	weft_poll_t r = weft_notified_poll(&st->nd, cx);

	if (r == WEFT_PENDING && !st->signalled) {
		st->signalled = true;
		tcount_add(&st->sh->waiting, 1);
	}
	return r;
}

static weft_poll_t nt_task_poll(void *arg, weft_cx_t *cx)
{
	struct nt_task *st = arg;

	WEFT_ASYNC_BEGIN(st);
	for (;;) {
		weft_notified_init(&st->nd, &st->sh->n);
		if (atomic_load(&st->sh->value) >= st->sh->target)
			break;
		WEFT_AWAIT(st, nt_wait(st, cx));
		weft_notified_fini(&st->nd);
		atomic_fetch_add(&st->sh->wakes, 1);
	}
	weft_notified_fini(&st->nd);
	WEFT_ASYNC_END(st);
}

static void nt_task_drop(void *arg)
{
	struct nt_task *st = arg;

	weft_notified_fini(&st->nd);
}

static void test_sync_async_notify_threaded(void **state)
{
	enum { WAITERS = 4 };
	weft_runtime_t *rt = rt_create(2);
	struct nt_shared sh = { .target = scale_count(20000) };
	weft_join_t *joins[WAITERS];

	(void)state;
	weft_notify_init(&sh.n);
	tcount_init(&sh.waiting);
	for (unsigned t = 0; t < WAITERS; t++) {
		struct nt_task st = { .sh = &sh };

		joins[t] = spawn_ok(rt, nt_task_poll, nt_task_drop, &st,
				    sizeof(st), true);
	}
	/* Everyone waits before the first notification: none is lost. */
	tcount_wait(&sh.waiting, WAITERS);
	for (unsigned i = 0; i < sh.target; i++) {
		atomic_fetch_add(&sh.value, 1);
		if (i % 2)
			weft_notify_waiters(&sh.n);
		else
			weft_notify_one(&sh.n);
		if (i % 64 == 0)
			sched_yield();
	}
	/* The last step wakes everyone. */
	weft_notify_waiters(&sh.n);
	for (unsigned t = 0; t < WAITERS; t++)
		assert_int_equal(join_wait_drop(joins[t], NULL), 0);
	assert_true(atomic_load(&sh.wakes) >= WAITERS);
	weft_runtime_destroy(rt);
	tcount_fini(&sh.waiting);
	weft_notify_fini(&sh.n);
}

/* ----------------------------------------------------------------- mpsc */

static _Atomic unsigned elem_drops;

static void count_elem_drop(void *elem)
{
	(void)elem;
	atomic_fetch_add(&elem_drops, 1);
}

static void mpsc_close_script(weft_cx_t *cx, void *arg)
{
	weft_mpsc_tx_t *tx, *tx2;
	weft_mpsc_rx_t *rx;
	weft_mpsc_send_t s;
	weft_mpsc_recv_t r;
	uint64_t v = 0, out = 0;

	(void)arg;
	assert_int_equal(weft_mpsc_create(0, 8, NULL, &tx, &rx), -EINVAL);
	assert_int_equal(weft_mpsc_create(4, 0, NULL, &tx, &rx), -EINVAL);

	/* Every sender dropped: drain, then closed. */
	assert_int_equal(weft_mpsc_create(4, sizeof(v), NULL, &tx, &rx), 0);
	tx2 = weft_mpsc_tx_clone(tx);
	weft_mpsc_recv_init(&r, rx, &out);
	assert_pending(weft_mpsc_recv_poll(&r, cx));
	for (v = 1; v <= 3; v++)
		assert_int_equal(weft_mpsc_try_send(tx, &v), 0);
	weft_mpsc_tx_drop(tx);
	assert_ready(weft_mpsc_recv_poll(&r, cx));
	assert_int_equal(r.status, 0);
	assert_int_equal(out, 1);
	assert_int_equal(weft_mpsc_try_recv(rx, &out), 0);
	assert_int_equal(out, 2);
	assert_int_equal(weft_mpsc_try_recv(rx, &out), 0);
	assert_int_equal(out, 3);
	/* One sender left: empty, not closed. */
	assert_int_equal(weft_mpsc_try_recv(rx, &out), -EAGAIN);
	assert_pending(weft_mpsc_recv_poll(&r, cx));
	for (v = 4; v <= 5; v++)
		assert_int_equal(weft_mpsc_try_send(tx2, &v), 0);
	weft_mpsc_tx_drop(tx2);
	assert_ready(weft_mpsc_recv_poll(&r, cx));
	assert_int_equal(r.status, 0);
	assert_int_equal(out, 4);
	assert_ready(weft_mpsc_recv_poll(&r, cx));
	assert_int_equal(r.status, 0);
	assert_int_equal(out, 5);
	assert_ready(weft_mpsc_recv_poll(&r, cx));
	assert_int_equal(r.status, -EPIPE);
	assert_int_equal(weft_mpsc_try_recv(rx, &out), -EPIPE);
	weft_mpsc_recv_fini(&r);
	weft_mpsc_rx_drop(rx);

	/* Closed while the receiver waits: woken, sees -EPIPE. */
	assert_int_equal(weft_mpsc_create(4, sizeof(v), NULL, &tx, &rx), 0);
	weft_mpsc_recv_init(&r, rx, &out);
	assert_pending(weft_mpsc_recv_poll(&r, cx));
	weft_mpsc_tx_drop(tx);
	assert_ready(weft_mpsc_recv_poll(&r, cx));
	assert_int_equal(r.status, -EPIPE);
	weft_mpsc_recv_fini(&r);
	weft_mpsc_rx_drop(rx);

	/* Receiver dropped: sends fail, queued or not; buffer dropped. */
	atomic_store(&elem_drops, 0);
	assert_int_equal(
		weft_mpsc_create(2, sizeof(v), count_elem_drop, &tx, &rx), 0);
	assert_int_equal(weft_mpsc_try_send(tx, &v), 0);
	assert_int_equal(weft_mpsc_try_send(tx, &v), 0);
	assert_int_equal(weft_mpsc_try_send(tx, &v), -EAGAIN);
	weft_mpsc_send_init(&s, tx, &v);
	assert_pending(weft_mpsc_send_poll(&s, cx));
	weft_mpsc_rx_drop(rx);
	assert_int_equal(atomic_load(&elem_drops), 2);
	assert_ready(weft_mpsc_send_poll(&s, cx));
	assert_int_equal(s.status, -EPIPE);
	weft_mpsc_send_fini(&s);
	assert_int_equal(weft_mpsc_try_send(tx, &v), -EPIPE);
	weft_mpsc_send_init(&s, tx, &v);
	assert_ready(weft_mpsc_send_poll(&s, cx));
	assert_int_equal(s.status, -EPIPE);
	weft_mpsc_send_fini(&s);
	weft_mpsc_tx_drop(tx);

	/* Elements left when the last handle goes are dropped too. */
	atomic_store(&elem_drops, 0);
	assert_int_equal(
		weft_mpsc_create(8, sizeof(v), count_elem_drop, &tx, &rx), 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(weft_mpsc_try_send(tx, &v), 0);
	weft_mpsc_tx_drop(tx);
	assert_int_equal(weft_mpsc_try_recv(rx, &out), 0);
	weft_mpsc_rx_drop(rx);
	assert_int_equal(atomic_load(&elem_drops), 4);
}

static void test_sync_async_mpsc_close(void **state)
{
	(void)state;
	run_script(NULL, mpsc_close_script, NULL);
}

static void mpsc_cancel_script(weft_cx_t *cx, void *arg)
{
	uint64_t v1 = 1, v2 = 2, v3 = 3, v4 = 4, out = 0;
	weft_mpsc_send_t s1, s2, s3;
	weft_mpsc_recv_t r;
	weft_mpsc_tx_t *tx;
	weft_mpsc_rx_t *rx;

	(void)arg;
	assert_int_equal(weft_mpsc_create(1, sizeof(out), NULL, &tx, &rx), 0);

	/* A queued sender leaves: the one behind it still gets room. */
	assert_int_equal(weft_mpsc_try_send(tx, &v1), 0);
	weft_mpsc_send_init(&s1, tx, &v2);
	weft_mpsc_send_init(&s2, tx, &v3);
	assert_pending(weft_mpsc_send_poll(&s1, cx));
	assert_pending(weft_mpsc_send_poll(&s2, cx));
	weft_mpsc_send_fini(&s1);
	assert_int_equal(weft_mpsc_try_recv(rx, &out), 0);
	assert_int_equal(out, 1);
	/* Room went to s2, not to a newcomer. */
	assert_int_equal(weft_mpsc_try_send(tx, &v4), -EAGAIN);
	assert_int_equal(weft_mpsc_try_recv(rx, &out), -EAGAIN);
	assert_ready(weft_mpsc_send_poll(&s2, cx));
	assert_int_equal(s2.status, 0);
	weft_mpsc_send_fini(&s2);
	assert_int_equal(weft_mpsc_try_recv(rx, &out), 0);
	assert_int_equal(out, 3);

	/*
	 * Handed a slot, dropped: the receiver skips the slot, which hands
	 * the room to the next sender.
	 */
	assert_int_equal(weft_mpsc_try_send(tx, &v1), 0);
	weft_mpsc_send_init(&s1, tx, &v2);
	weft_mpsc_send_init(&s2, tx, &v3);
	assert_pending(weft_mpsc_send_poll(&s1, cx));
	assert_pending(weft_mpsc_send_poll(&s2, cx));
	assert_int_equal(weft_mpsc_try_recv(rx, &out), 0);
	assert_int_equal(out, 1);
	weft_mpsc_send_fini(&s1);
	assert_pending(weft_mpsc_send_poll(&s2, cx));
	assert_int_equal(weft_mpsc_try_recv(rx, &out), -EAGAIN);
	assert_ready(weft_mpsc_send_poll(&s2, cx));
	weft_mpsc_send_fini(&s2);
	assert_int_equal(weft_mpsc_try_recv(rx, &out), 0);
	assert_int_equal(out, 3);

	/* The same with nobody behind, and a receiver waiting. */
	assert_int_equal(weft_mpsc_try_send(tx, &v1), 0);
	weft_mpsc_send_init(&s3, tx, &v2);
	assert_pending(weft_mpsc_send_poll(&s3, cx));
	weft_mpsc_recv_init(&r, rx, &out);
	assert_ready(weft_mpsc_recv_poll(&r, cx));
	assert_int_equal(out, 1);
	assert_pending(weft_mpsc_recv_poll(&r, cx));
	weft_mpsc_send_fini(&s3);
	assert_pending(weft_mpsc_recv_poll(&r, cx));
	assert_int_equal(weft_mpsc_try_send(tx, &v4), 0);
	assert_ready(weft_mpsc_recv_poll(&r, cx));
	assert_int_equal(out, 4);

	/* A recv future dropped while waiting loses nothing. */
	assert_pending(weft_mpsc_recv_poll(&r, cx));
	weft_mpsc_recv_fini(&r);
	assert_int_equal(weft_mpsc_try_send(tx, &v2), 0);
	weft_mpsc_recv_init(&r, rx, &out);
	assert_ready(weft_mpsc_recv_poll(&r, cx));
	assert_int_equal(out, 2);
	weft_mpsc_recv_fini(&r);

	weft_mpsc_tx_drop(tx);
	weft_mpsc_rx_drop(rx);
}

/* Elements that are not a word; more queued senders than one batch. */
struct triple {
	uint8_t a;
	uint16_t b;
	uint32_t c[5];
};

static void mpsc_many_script(weft_cx_t *cx, void *arg)
{
	enum { MANY = 40, CAP = 3 };
	struct triple in[MANY], out;
	weft_mpsc_send_t s[MANY];
	weft_mpsc_tx_t *tx;
	weft_mpsc_rx_t *rx;

	(void)arg;
	assert_int_equal(weft_mpsc_create(CAP, sizeof(out), NULL, &tx, &rx), 0);
	for (unsigned i = 0; i < MANY; i++) {
		memset(&in[i], 0, sizeof(in[i]));
		in[i].a = (uint8_t)i;
		in[i].b = (uint16_t)(1000 + i);
		in[i].c[4] = 7 * i;
		weft_mpsc_send_init(&s[i], tx, &in[i]);
		if (i < CAP)
			assert_ready(weft_mpsc_send_poll(&s[i], cx));
		else
			assert_pending(weft_mpsc_send_poll(&s[i], cx));
	}
	/* Half of the queued senders get through, in order... */
	for (unsigned i = 0; i < MANY / 2; i++) {
		assert_int_equal(weft_mpsc_try_recv(rx, &out), 0);
		assert_int_equal(out.a, i);
		assert_int_equal(out.b, 1000 + i);
		assert_int_equal(out.c[4], 7 * i);
		assert_ready(weft_mpsc_send_poll(&s[i + CAP], cx));
		assert_int_equal(s[i + CAP].status, 0);
	}
	/* ...the rest fail when the receiver goes. */
	weft_mpsc_rx_drop(rx);
	for (unsigned i = MANY / 2 + CAP; i < MANY; i++) {
		assert_ready(weft_mpsc_send_poll(&s[i], cx));
		assert_int_equal(s[i].status, -EPIPE);
	}
	for (unsigned i = 0; i < MANY; i++)
		weft_mpsc_send_fini(&s[i]);
	weft_mpsc_tx_drop(tx);
}

/*
 * A dropped slot is never handed to a later sender: here it is older than
 * a position sender B already filled, so B's next element would overtake
 * its previous one.
 */
static void mpsc_order_script(weft_cx_t *cx, void *arg)
{
	uint64_t a0 = 10, a1 = 11, x = 12, b1 = 21, b2 = 22, out = 0;
	weft_mpsc_tx_t *tx, *txb;
	weft_mpsc_send_t sx, sy;
	weft_mpsc_rx_t *rx;

	(void)arg;
	assert_int_equal(weft_mpsc_create(2, sizeof(out), NULL, &tx, &rx), 0);
	txb = weft_mpsc_tx_clone(tx);
	assert_int_equal(weft_mpsc_try_send(tx, &a0), 0);
	assert_int_equal(weft_mpsc_try_send(tx, &a1), 0);
	weft_mpsc_send_init(&sx, tx, &x);
	assert_pending(weft_mpsc_send_poll(&sx, cx));
	assert_int_equal(weft_mpsc_try_recv(rx, &out), 0); /* sx: a slot */
	assert_int_equal(out, a0);
	assert_int_equal(weft_mpsc_try_recv(rx, &out), 0);
	assert_int_equal(out, a1);
	assert_int_equal(weft_mpsc_try_send(txb, &b1), 0); /* after sx's */
	weft_mpsc_send_init(&sy, txb, &b2);
	assert_pending(weft_mpsc_send_poll(&sy, cx));
	weft_mpsc_send_fini(&sx);
	assert_int_equal(weft_mpsc_try_recv(rx, &out), 0);
	assert_int_equal(out, b1);
	assert_ready(weft_mpsc_send_poll(&sy, cx));
	assert_int_equal(sy.status, 0);
	weft_mpsc_send_fini(&sy);
	assert_int_equal(weft_mpsc_try_recv(rx, &out), 0);
	assert_int_equal(out, b2);
	assert_int_equal(weft_mpsc_try_recv(rx, &out), -EAGAIN);
	weft_mpsc_tx_drop(txb);
	weft_mpsc_tx_drop(tx);
	assert_int_equal(weft_mpsc_try_recv(rx, &out), -EPIPE);
	weft_mpsc_rx_drop(rx);
}

static void test_sync_async_mpsc_cancel(void **state)
{
	(void)state;
	run_script(NULL, mpsc_cancel_script, NULL);
	run_script(NULL, mpsc_many_script, NULL);
	run_script(NULL, mpsc_order_script, NULL);
}

/* Several producers, one consumer, a small buffer: exact sums, order. */
#define MPSC_PRODUCERS 4

struct mpsc_shared {
	_Atomic unsigned errors;
	uint64_t sum; /* consumer's, read after join */
	uint64_t count;
	uint64_t last[MPSC_PRODUCERS]; /* last seq seen per producer */
};

struct producer_task {
	int weft_pc;
	weft_mpsc_tx_t *tx;
	weft_mpsc_send_t send;
	uint64_t id, i, n, v;
	bool use_try;
};

static weft_poll_t producer_task_poll(void *arg, weft_cx_t *cx)
{
	struct producer_task *st = arg;

	WEFT_ASYNC_BEGIN(st);
	for (st->i = 1; st->i <= st->n; st->i++) {
		st->v = st->id << 32 | st->i;
		/* Some producers try first, so both paths interleave. */
		if (st->use_try && st->i % 2 &&
		    weft_mpsc_try_send(st->tx, &st->v) == 0)
			continue;
		weft_mpsc_send_init(&st->send, st->tx, &st->v);
		WEFT_AWAIT(st, weft_mpsc_send_poll(&st->send, cx));
		weft_mpsc_send_fini(&st->send);
	}
	weft_mpsc_tx_drop(st->tx);
	st->tx = NULL;
	WEFT_ASYNC_END(st);
}

static void producer_task_drop(void *arg)
{
	struct producer_task *st = arg;

	weft_mpsc_send_fini(&st->send);
	weft_mpsc_tx_drop(st->tx);
}

struct consumer_task {
	int weft_pc;
	weft_mpsc_rx_t *rx;
	weft_mpsc_recv_t recv;
	uint64_t v;
	struct mpsc_shared *sh;
};

static weft_poll_t consumer_task_poll(void *arg, weft_cx_t *cx)
{
	struct consumer_task *st = arg;
	uint64_t id, seq;

	WEFT_ASYNC_BEGIN(st);
	weft_mpsc_recv_init(&st->recv, st->rx, &st->v);
	for (;;) {
		WEFT_AWAIT(st, weft_mpsc_recv_poll(&st->recv, cx));
		if (st->recv.status)
			break;
		id = st->v >> 32;
		seq = st->v & 0xffffffffu;
		if (id >= MPSC_PRODUCERS || seq != st->sh->last[id] + 1)
			atomic_fetch_add(&st->sh->errors, 1);
		else
			st->sh->last[id] = seq;
		st->sh->sum += st->v;
		st->sh->count++;
	}
	if (st->recv.status != -EPIPE)
		atomic_fetch_add(&st->sh->errors, 1);
	weft_mpsc_recv_fini(&st->recv);
	weft_mpsc_rx_drop(st->rx);
	st->rx = NULL;
	WEFT_ASYNC_END(st);
}

static void consumer_task_drop(void *arg)
{
	struct consumer_task *st = arg;

	weft_mpsc_recv_fini(&st->recv);
	weft_mpsc_rx_drop(st->rx);
}

static void run_mpsc_sum(size_t capacity, unsigned workers)
{
	weft_runtime_t *rt = rt_create(workers);
	struct mpsc_shared sh = { 0 };
	weft_join_t *joins[MPSC_PRODUCERS + 1];
	weft_mpsc_tx_t *txs[MPSC_PRODUCERS];
	uint64_t n = scale_count(50000), want = 0;
	weft_mpsc_tx_t *tx;
	weft_mpsc_rx_t *rx;

	assert_int_equal(weft_mpsc_create(capacity, sizeof(uint64_t), NULL, &tx,
					  &rx),
			 0);
	{
		struct consumer_task c = { .rx = rx, .sh = &sh };

		joins[0] = spawn_ok(rt, consumer_task_poll, consumer_task_drop,
				    &c, sizeof(c), true);
	}
	/* Every sender exists before any task can drop its own. */
	for (uint64_t p = 0; p < MPSC_PRODUCERS; p++)
		txs[p] = p ? weft_mpsc_tx_clone(tx) : tx;
	for (uint64_t p = 0; p < MPSC_PRODUCERS; p++) {
		struct producer_task pt = {
			.tx = txs[p],
			.id = p,
			.n = n,
			.use_try = p % 2,
		};

		for (uint64_t i = 1; i <= n; i++)
			want += p << 32 | i;
		joins[p + 1] = spawn_ok(rt, producer_task_poll,
					producer_task_drop, &pt, sizeof(pt),
					true);
	}
	for (unsigned j = 0; j <= MPSC_PRODUCERS; j++)
		assert_int_equal(join_wait_drop(joins[j], NULL), 0);
	assert_int_equal(atomic_load(&sh.errors), 0);
	assert_int_equal(sh.count, n * MPSC_PRODUCERS);
	assert_int_equal(sh.sum, want);
	for (unsigned p = 0; p < MPSC_PRODUCERS; p++)
		assert_int_equal(sh.last[p], n);
	weft_runtime_destroy(rt);
}

static void test_sync_async_mpsc_sum(void **state)
{
	(void)state;
	run_mpsc_sum(1, 2);
	run_mpsc_sum(7, 4);
	run_mpsc_sum(1024, 2);
}

/*
 * A consumer task fed by a plain thread at about 1 kHz.  Each send from
 * the thread wakes the consumer, which then waits for the next one: the
 * consumer must be polled about once per message.  It was polled thousands
 * of times per message when it found the sender still inside its wake and
 * yielded until the sender was done (issue 15).  Polls are counted in the
 * task's poll function; the bound leaves room for the odd extra wake.
 */
struct paced_task {
	int weft_pc;
	weft_mpsc_rx_t *rx;
	weft_mpsc_recv_t recv;
	uint64_t v, got;
	_Atomic uint64_t *polls;
	_Atomic unsigned *errors;
};

static weft_poll_t paced_task_poll(void *arg, weft_cx_t *cx)
{
	struct paced_task *st = arg;

	atomic_fetch_add(st->polls, 1);
	WEFT_ASYNC_BEGIN(st);
	weft_mpsc_recv_init(&st->recv, st->rx, &st->v);
	for (;;) {
		WEFT_AWAIT(st, weft_mpsc_recv_poll(&st->recv, cx));
		if (st->recv.status)
			break;
		/* One sender: in order, from 1. */
		if (st->v != st->got + 1)
			atomic_fetch_add(st->errors, 1);
		st->got++;
	}
	if (st->recv.status != -EPIPE)
		atomic_fetch_add(st->errors, 1);
	weft_mpsc_recv_fini(&st->recv);
	weft_mpsc_rx_drop(st->rx);
	st->rx = NULL;
	weft_cx_return(cx, (void *)(uintptr_t)st->got);
	WEFT_ASYNC_END(st);
}

static void paced_task_drop(void *arg)
{
	struct paced_task *st = arg;

	weft_mpsc_recv_fini(&st->recv);
	weft_mpsc_rx_drop(st->rx);
}

static void test_sync_async_mpsc_paced_thread(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	_Atomic uint64_t polls = 0;
	_Atomic unsigned errors = 0;
	uint64_t n = scale_count(200), p;
	weft_mpsc_tx_t *tx;
	weft_mpsc_rx_t *rx;
	weft_join_t *j;
	void *out = NULL;

	(void)state;
	assert_int_equal(weft_mpsc_create(16, sizeof(uint64_t), NULL, &tx, &rx),
			 0);
	{
		struct paced_task st = {
			.rx = rx,
			.polls = &polls,
			.errors = &errors,
		};

		j = spawn_ok(rt, paced_task_poll, paced_task_drop, &st,
			     sizeof(st), true);
	}
	for (uint64_t i = 1; i <= n; i++) {
		while (weft_mpsc_try_send(tx, &i) == -EAGAIN)
			sched_yield();
		usleep(1000);
	}
	weft_mpsc_tx_drop(tx);
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_int_equal((uint64_t)(uintptr_t)out, n);
	assert_int_equal(atomic_load(&errors), 0);
	p = atomic_load(&polls);
	if (p > 3 * n + 8)
		fprintf(stderr,
			"paced consumer: %llu polls for %llu messages\n",
			(unsigned long long)p, (unsigned long long)n);
	assert_true(p <= 3 * n + 8);
	weft_runtime_destroy(rt);
}

/*
 * Plain threads send to a consumer that moves from task to task: every few
 * messages the consumer task spawns its successor, hands it the receiver
 * and ends, so the successor often waits while a sender is still waking
 * its predecessor (its waker is then handed over to that sender rather
 * than written into the channel).  Half the senders try and back off,
 * half wait in weft_block_on() on a send future (queued senders).  Every
 * message is received exactly once, each sender's in order.
 */
#define RELAY_SENDERS 4

struct relay_shared {
	_Atomic unsigned errors;
	/* The consumer tasks', one at a time; read after done. */
	uint64_t count, sum, hops;
	uint64_t last[RELAY_SENDERS];
	tcount_t done;
};

struct relay_task {
	int weft_pc;
	weft_mpsc_rx_t *rx;
	weft_mpsc_recv_t recv;
	uint64_t v;
	unsigned left; /* messages before handing on */
	struct relay_shared *sh;
};

static weft_poll_t relay_task_poll(void *arg, weft_cx_t *cx);

static void relay_task_drop(void *arg)
{
	struct relay_task *st = arg;

	weft_mpsc_recv_fini(&st->recv);
	weft_mpsc_rx_drop(st->rx);
}

/* Hands the receiver to a new task; false if that failed. */
static bool relay_hand_on(struct relay_task *st)
{
	struct relay_shared *sh = st->sh;
	struct relay_task next = {
		.rx = st->rx,
		.left = 1 + (unsigned)(sh->hops % 7),
		.sh = sh,
	};
	weft_spawn_t spec = {
		.poll = relay_task_poll,
		.drop = relay_task_drop,
		.state = &next,
		.size = sizeof(next),
		.name = "relay",
		.file = __FILE__,
		.line = __LINE__,
	};

	sh->hops++;
	if (weft_spawn_with(NULL, &spec, NULL))
		return false;
	st->rx = NULL;
	return true;
}

static weft_poll_t relay_task_poll(void *arg, weft_cx_t *cx)
{
	struct relay_task *st = arg;
	struct relay_shared *sh = st->sh;
	uint64_t id, seq;

	WEFT_ASYNC_BEGIN(st);
	weft_mpsc_recv_init(&st->recv, st->rx, &st->v);
	while (st->left) {
		WEFT_AWAIT(st, weft_mpsc_recv_poll(&st->recv, cx));
		if (st->recv.status)
			break;
		id = st->v >> 32;
		seq = st->v & 0xffffffffu;
		if (id >= RELAY_SENDERS || seq != sh->last[id] + 1)
			atomic_fetch_add(&sh->errors, 1);
		else
			sh->last[id] = seq;
		sh->sum += st->v;
		sh->count++;
		st->left--;
	}
	weft_mpsc_recv_fini(&st->recv);
	if (st->left == 0 && relay_hand_on(st))
		return WEFT_READY;
	/* The end: every sender gone and the channel drained. */
	if (st->left == 0 || st->recv.status != -EPIPE)
		atomic_fetch_add(&sh->errors, 1);
	weft_mpsc_rx_drop(st->rx);
	st->rx = NULL;
	tcount_add(&sh->done, 1);
	WEFT_ASYNC_END(st);
}

struct relay_sender {
	pthread_t thread;
	weft_mpsc_tx_t *tx;
	uint64_t id, n;
	struct relay_shared *sh;
};

static weft_poll_t relay_send_poll(void *arg, weft_cx_t *cx)
{
	return weft_mpsc_send_poll(arg, cx);
}

static void *relay_sender_main(void *arg)
{
	struct relay_sender *s = arg;

	for (uint64_t i = 1; i <= s->n; i++) {
		uint64_t v = s->id << 32 | i;
		int err;

		if (s->id % 2) {
			weft_mpsc_send_t snd;

			weft_mpsc_send_init(&snd, s->tx, &v);
			err = weft_block_on(NULL, relay_send_poll, &snd, NULL);
			if (!err)
				err = snd.status;
			weft_mpsc_send_fini(&snd);
		} else {
			while ((err = weft_mpsc_try_send(s->tx, &v)) == -EAGAIN)
				sched_yield();
		}
		if (err)
			atomic_fetch_add(&s->sh->errors, 1);
		/* Pauses, so that the consumer often waits and is woken. */
		if (i % 8 == 0)
			sched_yield();
		if (i % 128 == 0)
			usleep(50);
	}
	weft_mpsc_tx_drop(s->tx);
	return NULL;
}

static void test_sync_async_mpsc_threads(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct relay_shared sh = { 0 };
	struct relay_sender senders[RELAY_SENDERS];
	uint64_t n = scale_count(20000), want = 0;
	weft_mpsc_tx_t *tx;
	weft_mpsc_rx_t *rx;

	(void)state;
	tcount_init(&sh.done);
	assert_int_equal(weft_mpsc_create(8, sizeof(uint64_t), NULL, &tx, &rx),
			 0);
	{
		struct relay_task st = { .rx = rx, .left = 1, .sh = &sh };

		spawn_ok(rt, relay_task_poll, relay_task_drop, &st, sizeof(st),
			 false);
	}
	for (uint64_t p = 0; p < RELAY_SENDERS; p++) {
		senders[p] = (struct relay_sender){
			.tx = p ? weft_mpsc_tx_clone(tx) : tx,
			.id = p,
			.n = n,
			.sh = &sh,
		};
		for (uint64_t i = 1; i <= n; i++)
			want += p << 32 | i;
	}
	for (unsigned p = 0; p < RELAY_SENDERS; p++)
		assert_int_equal(pthread_create(&senders[p].thread, NULL,
						relay_sender_main, &senders[p]),
				 0);
	for (unsigned p = 0; p < RELAY_SENDERS; p++)
		assert_int_equal(pthread_join(senders[p].thread, NULL), 0);
	tcount_wait(&sh.done, 1);
	assert_int_equal(atomic_load(&sh.errors), 0);
	assert_int_equal(sh.count, n * RELAY_SENDERS);
	assert_int_equal(sh.sum, want);
	for (unsigned p = 0; p < RELAY_SENDERS; p++)
		assert_int_equal(sh.last[p], n);
	assert_true(sh.hops > 1);
	weft_runtime_destroy(rt);
	tcount_fini(&sh.done);
}

/* ------------------------------------------------------- select / join */

static weft_poll_t lock_branch(void *arg, weft_cx_t *cx)
{
	return weft_async_mutex_lock_poll(arg, cx);
}

static void lock_branch_drop(void *arg)
{
	weft_async_mutex_lock_fini(arg);
}

static weft_poll_t notified_branch(void *arg, weft_cx_t *cx)
{
	return weft_notified_poll(arg, cx);
}

static void notified_branch_drop(void *arg)
{
	weft_notified_fini(arg);
}

static weft_poll_t acquire_branch(void *arg, weft_cx_t *cx)
{
	return weft_semaphore_acquire_poll(arg, cx);
}

static void acquire_branch_drop(void *arg)
{
	weft_semaphore_acquire_fini(arg);
}

static weft_poll_t recv_branch(void *arg, weft_cx_t *cx)
{
	return weft_mpsc_recv_poll(arg, cx);
}

static void recv_branch_drop(void *arg)
{
	weft_mpsc_recv_fini(arg);
}

static weft_poll_t send_branch(void *arg, weft_cx_t *cx)
{
	return weft_mpsc_send_poll(arg, cx);
}

static void send_branch_drop(void *arg)
{
	weft_mpsc_send_fini(arg);
}

static void select_script(weft_cx_t *cx, void *arg)
{
	weft_async_mutex_lock_t lk, lk2;
	weft_async_mutex_t m;
	weft_notified_t nd;
	weft_notify_t n;
	weft_branch_t br[2];
	size_t index = 99;

	(void)arg;
	weft_async_mutex_init(&m);
	weft_notify_init(&n);
	assert_true(weft_async_mutex_try_lock(&m));

	weft_notified_init(&nd, &n);
	weft_async_mutex_lock_init(&lk, &m);
	br[0] = (weft_branch_t){ .poll = notified_branch,
				 .state = &nd,
				 .drop = notified_branch_drop };
	br[1] = (weft_branch_t){ .poll = lock_branch,
				 .state = &lk,
				 .drop = lock_branch_drop };
	assert_pending(weft_select_poll(br, 2, cx, &index));
	weft_async_mutex_lock_init(&lk2, &m);
	assert_pending(weft_async_mutex_lock_poll(&lk2, cx));

	/* Both become ready; the first branch wins. */
	weft_async_mutex_unlock(&m); /* to lk, which loses */
	weft_notify_one(&n);
	assert_ready(weft_select_poll(br, 2, cx, &index));
	assert_int_equal(index, 0);
	assert_true(br[0].done);
	assert_false(br[1].done);
	/* Dropping the loser passes the lock it was handed to lk2. */
	weft_branches_drop(br, 2);
	assert_null(br[0].drop);
	weft_branches_drop(br, 2); /* once only */
	assert_ready(weft_async_mutex_lock_poll(&lk2, cx));
	weft_async_mutex_lock_fini(&lk2);
	weft_async_mutex_unlock(&m);
	assert_true(weft_async_mutex_try_lock(&m));
	weft_async_mutex_unlock(&m);
	weft_notify_fini(&n);
	weft_async_mutex_fini(&m);
}

static void test_sync_async_select_cancel(void **state)
{
	(void)state;
	run_script(NULL, select_script, NULL);
}

static void join_script(weft_cx_t *cx, void *arg)
{
	weft_semaphore_acquire_t acq;
	weft_semaphore_t sem;
	weft_notified_t nd;
	weft_notify_t n;
	weft_mpsc_recv_t r;
	weft_mpsc_send_t s;
	weft_mpsc_tx_t *tx;
	weft_mpsc_rx_t *rx;
	uint64_t v = 7, out = 0;
	weft_branch_t br[3];

	(void)arg;
	assert_int_equal(weft_semaphore_init(&sem, 0), 0);
	weft_notify_init(&n);
	assert_int_equal(weft_mpsc_create(1, sizeof(v), NULL, &tx, &rx), 0);

	/* All of them, in whatever order they finish. */
	weft_semaphore_acquire_init(&acq, &sem, 2);
	weft_notified_init(&nd, &n);
	weft_mpsc_recv_init(&r, rx, &out);
	br[0] = (weft_branch_t){ .poll = acquire_branch,
				 .state = &acq,
				 .drop = acquire_branch_drop };
	br[1] = (weft_branch_t){ .poll = notified_branch,
				 .state = &nd,
				 .drop = notified_branch_drop };
	br[2] = (weft_branch_t){ .poll = recv_branch,
				 .state = &r,
				 .drop = recv_branch_drop };
	assert_pending(weft_join_branches_poll(br, 3, cx));
	assert_int_equal(weft_mpsc_try_send(tx, &v), 0);
	assert_pending(weft_join_branches_poll(br, 3, cx));
	assert_true(br[2].done);
	weft_notify_one(&n);
	weft_semaphore_release(&sem, 1);
	assert_pending(weft_join_branches_poll(br, 3, cx));
	weft_semaphore_release(&sem, 1);
	assert_ready(weft_join_branches_poll(br, 3, cx));
	assert_int_equal(out, 7);
	weft_branches_drop(br, 3);
	weft_semaphore_release(&sem, 2);

	/* Abandoned half-way: what was set aside goes back. */
	weft_semaphore_acquire_init(&acq, &sem, 5);
	weft_notified_init(&nd, &n);
	assert_int_equal(weft_mpsc_try_send(tx, &v), 0);
	weft_mpsc_send_init(&s, tx, &v);
	br[0] = (weft_branch_t){ .poll = acquire_branch,
				 .state = &acq,
				 .drop = acquire_branch_drop };
	br[1] = (weft_branch_t){ .poll = notified_branch,
				 .state = &nd,
				 .drop = notified_branch_drop };
	br[2] = (weft_branch_t){ .poll = send_branch,
				 .state = &s,
				 .drop = send_branch_drop };
	assert_pending(weft_join_branches_poll(br, 3, cx));
	assert_int_equal(weft_semaphore_available(&sem), 0);
	/* The send is handed the slot the receive frees. */
	assert_int_equal(weft_mpsc_try_recv(rx, &out), 0);
	weft_branches_drop(br, 3);
	assert_int_equal(weft_semaphore_available(&sem), 2);
	/* The abandoned send left a tombstone, not a message. */
	assert_int_equal(weft_mpsc_try_recv(rx, &out), -EAGAIN);
	/* The dropped notified left the queue: this stores the permit. */
	weft_notify_one(&n);
	weft_notified_init(&nd, &n);
	assert_ready(weft_notified_poll(&nd, cx));
	weft_notified_fini(&nd);

	weft_mpsc_tx_drop(tx);
	weft_mpsc_rx_drop(rx);
	weft_notify_fini(&n);
	weft_semaphore_fini(&sem);
}

static void test_sync_async_join_cancel(void **state)
{
	(void)state;
	run_script(NULL, join_script, NULL);
}

/* A task selects a receive against a timeout, in a loop, across workers. */
struct sel_task {
	int weft_pc;
	weft_mpsc_rx_t *rx;
	weft_mpsc_recv_t recv;
	weft_sleep_t sleep;
	weft_branch_t br[2];
	size_t index;
	uint64_t v, got, sum, timeouts, want;
	_Atomic unsigned *errors;
};

static weft_poll_t sleep_branch(void *arg, weft_cx_t *cx)
{
	return weft_sleep_poll(arg, cx);
}

static void sleep_branch_drop(void *arg)
{
	weft_sleep_fini(arg);
}

static weft_poll_t sel_task_poll(void *arg, weft_cx_t *cx)
{
	struct sel_task *st = arg;

	WEFT_ASYNC_BEGIN(st);
	while (st->got < st->want) {
		weft_mpsc_recv_init(&st->recv, st->rx, &st->v);
		weft_sleep_init(&st->sleep, WEFT_USEC(200));
		st->br[0] = (weft_branch_t){ .poll = recv_branch,
					     .state = &st->recv,
					     .drop = recv_branch_drop };
		st->br[1] = (weft_branch_t){ .poll = sleep_branch,
					     .state = &st->sleep,
					     .drop = sleep_branch_drop };
		WEFT_AWAIT(st, weft_select_poll(st->br, 2, cx, &st->index));
		weft_branches_drop(st->br, 2);
		if (st->index == 1) {
			st->timeouts++;
			continue;
		}
		if (st->recv.status)
			atomic_fetch_add(st->errors, 1);
		st->sum += st->v;
		st->got++;
	}
	weft_mpsc_rx_drop(st->rx);
	st->rx = NULL;
	weft_cx_return(cx, (void *)(uintptr_t)st->sum);
	WEFT_ASYNC_END(st);
}

static void sel_task_drop(void *arg)
{
	struct sel_task *st = arg;

	weft_branches_drop(st->br, 2);
	weft_mpsc_rx_drop(st->rx);
}

static void test_sync_async_select_threaded(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	_Atomic unsigned errors = 0;
	uint64_t n = scale_count(2000), want = 0;
	weft_mpsc_tx_t *tx;
	weft_mpsc_rx_t *rx;
	weft_join_t *j;
	void *out = NULL;

	(void)state;
	assert_int_equal(weft_mpsc_create(4, sizeof(uint64_t), NULL, &tx, &rx),
			 0);
	{
		struct sel_task st = { .rx = rx, .want = n, .errors = &errors };

		j = spawn_ok(rt, sel_task_poll, sel_task_drop, &st, sizeof(st),
			     true);
	}
	/* From a plain thread: try, and back off when full. */
	for (uint64_t i = 1; i <= n; i++) {
		while (weft_mpsc_try_send(tx, &i) == -EAGAIN)
			sched_yield();
		want += i;
		if (i % 100 == 0) {
			struct timespec ts = { 0, 300000 };

			nanosleep(&ts, NULL);
		}
	}
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_int_equal((uint64_t)(uintptr_t)out, want);
	assert_int_equal(atomic_load(&errors), 0);
	weft_mpsc_tx_drop(tx);
	weft_runtime_destroy(rt);
}

/* ------------------------------------------------------- notify fini */

/*
 * weft_notify_fini() with futures on it: queued ones complete with -EPIPE,
 * one already handed a notification with 0, and none touches the notify
 * afterwards (it is freed at once, for ASan to see any touch).
 */
static void notify_fini_script(weft_cx_t *cx, void *arg)
{
	weft_notify_t *n = malloc(sizeof(*n));
	weft_notified_t a, b, c, d;

	(void)arg;
	assert_non_null(n);
	weft_notify_init(n);
	weft_notified_init(&a, n);
	weft_notified_init(&b, n);
	weft_notified_init(&c, n);
	weft_notified_init(&d, n); /* never polled */
	assert_pending(weft_notified_poll(&a, cx));
	assert_pending(weft_notified_poll(&b, cx));
	assert_pending(weft_notified_poll(&c, cx));
	weft_notify_one(n); /* a is handed it */
	weft_notify_fini(n);
	free(n);
	assert_ready(weft_notified_poll(&a, cx));
	assert_int_equal(a.status, 0);
	assert_ready(weft_notified_poll(&b, cx));
	assert_int_equal(b.status, -EPIPE);
	assert_ready(weft_notified_poll(&b, cx)); /* READY stays READY */
	assert_int_equal(b.status, -EPIPE);
	weft_notified_fini(&a);
	weft_notified_fini(&b);
	weft_notified_fini(&c); /* queued, never polled again */
	weft_notified_fini(&d);

	/* Handed and dropped unseen after fini: nothing is passed on. */
	n = malloc(sizeof(*n));
	assert_non_null(n);
	weft_notify_init(n);
	weft_notified_init(&a, n);
	assert_pending(weft_notified_poll(&a, cx));
	weft_notify_one(n);
	weft_notify_fini(n);
	free(n);
	weft_notified_fini(&a);
}

/*
 * Tasks wait on a notify with a select against a yield (or, for every
 * other task, a short sleep), so the queued notified future is polled again
 * and again, and often is mid-poll, while the test thread finishes the
 * notify and frees it.
 */
struct nf_shared {
	weft_notify_t *n;
	tcount_t queued;
	_Atomic unsigned closed, errors;
};

struct nf_task {
	int weft_pc;
	struct nf_shared *sh;
	weft_notified_t nd;
	weft_sleep_t sleep;
	weft_yield_t y;
	weft_branch_t br[2];
	size_t index;
	bool use_sleep, signalled, sleeping;
};

static weft_poll_t yield_branch(void *arg, weft_cx_t *cx)
{
	return weft_yield_poll(arg, cx);
}

static weft_poll_t nf_select(struct nf_task *st, weft_cx_t *cx)
{
	weft_poll_t r = weft_select_poll(st->br, 2, cx, &st->index);

	if (r == WEFT_PENDING && !st->signalled) {
		st->signalled = true;
		tcount_add(&st->sh->queued, 1);
	}
	return r;
}

static weft_poll_t nf_task_poll(void *arg, weft_cx_t *cx)
{
	struct nf_task *st = arg;

	WEFT_ASYNC_BEGIN(st);
	weft_notified_init(&st->nd, st->sh->n);
	for (;;) {
		st->br[0] = (weft_branch_t){ .poll = notified_branch,
					     .state = &st->nd };
		if (st->use_sleep) {
			weft_sleep_init(&st->sleep, WEFT_USEC(20));
			st->sleeping = true;
			st->br[1] = (weft_branch_t){ .poll = sleep_branch,
						     .state = &st->sleep };
		} else {
			st->y = (weft_yield_t){ 0 };
			st->br[1] = (weft_branch_t){ .poll = yield_branch,
						     .state = &st->y };
		}
		WEFT_AWAIT(st, nf_select(st, cx));
		if (st->sleeping)
			weft_sleep_fini(&st->sleep);
		st->sleeping = false;
		if (st->index == 0)
			break;
	}
	if (st->nd.status == -EPIPE)
		atomic_fetch_add(&st->sh->closed, 1);
	else
		atomic_fetch_add(&st->sh->errors, 1);
	weft_notified_fini(&st->nd);
	WEFT_ASYNC_END(st);
}

static void nf_task_drop(void *arg)
{
	struct nf_task *st = arg;

	if (st->sleeping)
		weft_sleep_fini(&st->sleep);
	weft_notified_fini(&st->nd);
}

static void notify_fini_threaded(weft_runtime_t *rt)
{
	enum { WAITERS = 4 };
	struct nf_shared sh = { .n = malloc(sizeof(weft_notify_t)) };
	weft_join_t *joins[WAITERS];

	assert_non_null(sh.n);
	weft_notify_init(sh.n);
	tcount_init(&sh.queued);
	for (unsigned t = 0; t < WAITERS; t++) {
		struct nf_task st = { .sh = &sh, .use_sleep = t % 2 };

		joins[t] = spawn_ok(rt, nf_task_poll, nf_task_drop, &st,
				    sizeof(st), true);
	}
	/* Every task queued (its first poll done) before the fini. */
	tcount_wait(&sh.queued, WAITERS);
	usleep(200);
	weft_notify_fini(sh.n);
	free(sh.n);
	for (unsigned t = 0; t < WAITERS; t++)
		assert_int_equal(join_wait_drop(joins[t], NULL), 0);
	assert_int_equal(atomic_load(&sh.closed), WAITERS);
	assert_int_equal(atomic_load(&sh.errors), 0);
	tcount_fini(&sh.queued);
}

static void test_sync_async_notify_fini(void **state)
{
	weft_runtime_t *rt;
	unsigned rounds = scale_count(50);

	(void)state;
	run_script(NULL, notify_fini_script, NULL);
	rt = rt_create(2);
	for (unsigned i = 0; i < rounds; i++)
		notify_fini_threaded(rt);
	weft_runtime_destroy(rt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sync_async_semaphore_fifo),
		cmocka_unit_test(test_sync_async_semaphore_cancel),
		cmocka_unit_test(test_sync_async_semaphore_counts),
		cmocka_unit_test(test_sync_async_mutex_fifo),
		cmocka_unit_test(test_sync_async_mutex_across_await),
		cmocka_unit_test(test_sync_async_mutex_cancel),
		cmocka_unit_test(test_sync_async_mutex_abort),
		cmocka_unit_test(test_sync_async_notify_one),
		cmocka_unit_test(test_sync_async_notify_waiters),
		cmocka_unit_test(test_sync_async_notify_threaded),
		cmocka_unit_test(test_sync_async_mpsc_close),
		cmocka_unit_test(test_sync_async_mpsc_cancel),
		cmocka_unit_test(test_sync_async_mpsc_sum),
		cmocka_unit_test(test_sync_async_mpsc_paced_thread),
		cmocka_unit_test(test_sync_async_mpsc_threads),
		cmocka_unit_test(test_sync_async_select_cancel),
		cmocka_unit_test(test_sync_async_join_cancel),
		cmocka_unit_test(test_sync_async_select_threaded),
		cmocka_unit_test(test_sync_async_notify_fini),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
