/* SPDX-License-Identifier: MIT */
/*
 * Tasks and task wakers (task.c): the state machine through the public
 * API, checked against the internal state word where that is exact.
 *
 * The state word is only read at moments when it cannot move: while the
 * only worker is held inside another task's poll, once a poll has returned
 * PENDING and nothing can wake the task (RUNNING clear), or after
 * weft_runtime_destroy() has joined the workers.  A join handle is the task
 * pointer, so task_of() is a cast.
 *
 * Futures here carry a pointer to a struct probe on the test's stack: what
 * the future saw, counted in atomics and asserted by the test thread.
 */
#include <string.h>

#include "runtime_internal.h"
#include "test_helpers.h"

#define NCLONES 1000

struct probe {
	_Atomic unsigned polls;
	_Atomic unsigned drops;
	_Atomic unsigned errors;
	unsigned target;   /* polls before READY, per test */
	tcount_t polled;   /* +1 at the end of each poll */
	tcount_t entered;  /* blocker: inside its poll */
	tcount_t gate;     /* blocker: may leave once >= 1 */
	weft_waker_t slot; /* a waker the test keeps */
	weft_waker_t clones[NCLONES];
	void *output;
};

struct fut {
	struct probe *p;
	int weft_pc;
	weft_yield_t y;
	unsigned i;
};

static void probe_init(struct probe *p)
{
	memset(p, 0, sizeof(*p));
	tcount_init(&p->polled);
	tcount_init(&p->entered);
	tcount_init(&p->gate);
}

static void probe_fini(struct probe *p)
{
	assert_int_equal(atomic_load(&p->errors), 0);
	assert_true(weft_waker_is_empty(&p->slot));
	tcount_fini(&p->gate);
	tcount_fini(&p->entered);
	tcount_fini(&p->polled);
}

static weft_task_t *task_of(weft_join_t *j)
{
	return (weft_task_t *)j;
}

static uint64_t state_of(weft_join_t *j)
{
	return atomic_load(&task_of(j)->state);
}

static uint64_t refs_of(weft_join_t *j)
{
	return task_refs(state_of(j));
}

static uint64_t flags_of(weft_join_t *j)
{
	return state_of(j) & ~TASK_REF_MASK;
}

/* Waits until the task's current poll has returned (see the top). */
static void wait_not_running(weft_join_t *j)
{
	while (state_of(j) & TASK_RUNNING)
		sched_yield();
}

static weft_join_t *spawn_fut(weft_runtime_t *rt, weft_poll_cb poll,
			      struct probe *p, bool want_join)
{
	struct fut f = { .p = p };

	return spawn_ok(rt, poll, NULL, &f, sizeof(f), want_join);
}

/* Holds its worker until the test opens the gate. */
static weft_poll_t blocker_poll(void *arg, weft_cx_t *cx)
{
	struct fut *f = arg;

	(void)cx;
	tcount_add(&f->p->entered, 1);
	tcount_wait(&f->p->gate, 1);
	return WEFT_READY;
}

/* READY on the first poll with the probe's output. */
static weft_poll_t ready_poll(void *arg, weft_cx_t *cx)
{
	struct fut *f = arg;

	atomic_fetch_add(&f->p->polls, 1);
	weft_cx_return(cx, f->p->output);
	tcount_add(&f->p->polled, 1);
	return WEFT_READY;
}

static void test_task_state_and_wake_before_first_poll(void **state)
{
	weft_runtime_t *rt = rt_create(1);
	struct probe hold, p;
	weft_runtime_metrics_t m;
	weft_waker_t wk, wk2;
	weft_join_t *j;
	void *out = NULL;

	(void)state;
	probe_init(&hold);
	probe_init(&p);
	p.output = (void *)0x1234;

	/* Hold the only worker, so the next task stays queued. */
	spawn_fut(rt, blocker_poll, &hold, false);
	tcount_wait(&hold.entered, 1);

	j = spawn_fut(rt, ready_poll, &p, true);
	/* Spawned: queued (NOTIFIED), joinable; owned + queued + join. */
	assert_int_equal(flags_of(j), TASK_NOTIFIED | TASK_JOIN_INTEREST);
	assert_int_equal(refs_of(j), 3);
	assert_false(weft_join_is_finished(j));
	assert_true(weft_join_id(j) != 0);

	/* Wakes before the first poll add nothing to the spawn's wake-up. */
	wk = weft__task_waker_vtable.clone(task_of(j));
	assert_int_equal(refs_of(j), 4);
	weft_waker_wake_by_ref(&wk);
	assert_int_equal(flags_of(j), TASK_NOTIFIED | TASK_JOIN_INTEREST);
	assert_int_equal(refs_of(j), 4);
	wk2 = weft_waker_clone(&wk);
	assert_true(weft_waker_will_wake(&wk, &wk2));
	assert_int_equal(refs_of(j), 5);
	weft_waker_wake(&wk2);
	assert_true(weft_waker_is_empty(&wk2));
	assert_int_equal(refs_of(j), 4);
	weft_waker_drop(&wk);
	assert_true(weft_waker_is_empty(&wk));
	assert_int_equal(refs_of(j), 3);
	assert_int_equal(flags_of(j), TASK_NOTIFIED | TASK_JOIN_INTEREST);

	tcount_add(&hold.gate, 1);
	assert_int_equal(weft_join_wait(j, &out), 0);
	assert_ptr_equal(out, (void *)0x1234);
	assert_true(weft_join_is_finished(j));
	assert_true(state_of(j) & TASK_COMPLETE);
	assert_int_equal(atomic_load(&p.polls), 1);

	/* All the wakes were no-ops: none reached the global queue. */
	assert_int_equal(weft_runtime_metrics(rt, &m), 0);
	assert_int_equal(m.remote_wakes, 0);
	assert_int_equal(m.remote_spawns, 2);

	weft_runtime_destroy(rt);
	/*
	 * Only the join handle's reference is left.  (JOIN_WAKER depends on
	 * whether weft_join_wait() had to register a waker.)
	 */
	assert_int_equal(flags_of(j) & ~TASK_JOIN_WAKER,
			 TASK_COMPLETE | TASK_JOIN_INTEREST);
	assert_int_equal(refs_of(j), 1);
	assert_int_equal(task_of(j)->status, 0);
	weft_join_drop(j);
	probe_fini(&p);
	probe_fini(&hold);
}

/*
 * Wakes itself during its first target polls, alternating wake_by_ref
 * (twice: coalesced) and waking a clone by value; READY after that.
 */
static weft_poll_t self_wake_poll(void *arg, weft_cx_t *cx)
{
	struct fut *f = arg;
	unsigned n = atomic_fetch_add(&f->p->polls, 1) + 1;

	if (n > f->p->target)
		return WEFT_READY;
	if (n % 2) {
		weft_waker_wake_by_ref(weft_cx_waker(cx));
		weft_waker_wake_by_ref(weft_cx_waker(cx));
	} else {
		weft_waker_t w = weft_waker_clone(weft_cx_waker(cx));

		weft_waker_wake(&w);
		if (!weft_waker_is_empty(&w))
			atomic_fetch_add(&f->p->errors, 1);
	}
	return WEFT_PENDING;
}

/* Yields target times with the stackless macros. */
static weft_poll_t yield_poll(void *arg, weft_cx_t *cx)
{
	struct fut *f = arg;

	atomic_fetch_add(&f->p->polls, 1);
	WEFT_ASYNC_BEGIN(f);
	for (f->i = 0; f->i < f->p->target; f->i++) {
		if (f->i % 2)
			WEFT_YIELD(f, cx);
		else
			WEFT_AWAIT(f, weft_yield_poll(&f->y, cx));
	}
	WEFT_ASYNC_END(f);
}

static void test_task_wake_during_poll_repolls(void **state)
{
	weft_runtime_t *rt = rt_create(2);

	(void)state;
	for (unsigned target = 0; target < 8; target++) {
		struct probe p;
		weft_join_t *j;

		probe_init(&p);
		p.target = target;
		j = spawn_fut(rt, self_wake_poll, &p, true);
		assert_int_equal(join_wait_drop(j, NULL), 0);
		/* Woken during polls 1..target: polled exactly target+1 times. */
		assert_int_equal(atomic_load(&p.polls), target + 1);
		probe_fini(&p);

		probe_init(&p);
		p.target = target;
		j = spawn_fut(rt, yield_poll, &p, true);
		assert_int_equal(join_wait_drop(j, NULL), 0);
		/* Each yield, either form, costs exactly one more poll. */
		assert_int_equal(atomic_load(&p.polls), target + 1);
		probe_fini(&p);
	}
	weft_runtime_destroy(rt);
}

/* Poll 1: park a clone in the slot and wait; poll 2: READY. */
static weft_poll_t park_in_slot_poll(void *arg, weft_cx_t *cx)
{
	struct fut *f = arg;
	unsigned n = atomic_fetch_add(&f->p->polls, 1) + 1;

	if (n >= 2)
		return WEFT_READY;
	f->p->slot = weft_waker_clone(weft_cx_waker(cx));
	tcount_add(&f->p->polled, 1);
	return WEFT_PENDING;
}

struct waker_thread {
	struct probe *p;
	bool by_value;
};

static void *waker_thread_main(void *arg)
{
	struct waker_thread *wt = arg;

	tcount_wait(&wt->p->polled, 1);
	if (wt->by_value) {
		weft_waker_wake(&wt->p->slot);
	} else {
		weft_waker_wake_by_ref(&wt->p->slot);
		weft_waker_drop(&wt->p->slot);
	}
	if (!weft_waker_is_empty(&wt->p->slot))
		atomic_fetch_add(&wt->p->errors, 1);
	return NULL;
}

static void test_task_wake_from_other_thread(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	unsigned iters = scale_count(50);
	weft_runtime_metrics_t m;

	(void)state;
	for (unsigned i = 0; i < iters; i++) {
		struct waker_thread wt;
		struct probe p;
		pthread_t tid;
		weft_join_t *j;

		probe_init(&p);
		wt.p = &p;
		wt.by_value = i % 2 == 0;
		j = spawn_fut(rt, park_in_slot_poll, &p, true);
		tcount_wait(&p.polled, 1);
		wait_not_running(j);
		/* Idle, pending: owned + join + the parked clone. */
		assert_int_equal(flags_of(j), TASK_JOIN_INTEREST);
		assert_int_equal(refs_of(j), 3);

		assert_int_equal(
			pthread_create(&tid, NULL, waker_thread_main, &wt), 0);
		assert_int_equal(pthread_join(tid, NULL), 0);
		assert_int_equal(join_wait_drop(j, NULL), 0);
		assert_int_equal(atomic_load(&p.polls), 2);
		probe_fini(&p);
	}
	/* Each wake found the task idle and queued it from outside. */
	assert_int_equal(weft_runtime_metrics(rt, &m), 0);
	assert_int_equal(m.remote_wakes, iters);
	weft_runtime_destroy(rt);
}

/* Poll 1: NCLONES clones of its waker; poll 2: READY. */
static weft_poll_t many_clones_poll(void *arg, weft_cx_t *cx)
{
	struct fut *f = arg;
	unsigned n = atomic_fetch_add(&f->p->polls, 1) + 1;

	if (n >= 2)
		return WEFT_READY;
	for (unsigned i = 0; i < NCLONES; i++)
		f->p->clones[i] = weft_waker_clone(weft_cx_waker(cx));
	tcount_add(&f->p->polled, 1);
	return WEFT_PENDING;
}

static void *clone_churn_main(void *arg)
{
	struct probe *p = arg;
	unsigned n = scale_count(20000);

	for (unsigned i = 0; i < n; i++) {
		weft_waker_t w = weft_waker_clone(&p->clones[i % NCLONES]);

		weft_waker_drop(&w);
	}
	return NULL;
}

static void test_task_waker_clone_drop_balance(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	enum { NTHREADS = 4 };
	pthread_t tid[NTHREADS];
	struct probe p;
	weft_join_t *j;

	(void)state;
	probe_init(&p);
	j = spawn_fut(rt, many_clones_poll, &p, true);
	tcount_wait(&p.polled, 1);
	wait_not_running(j);
	assert_int_equal(refs_of(j), NCLONES + 2);

	/* Concurrent clone/drop pairs leave the count where it was. */
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_equal(
			pthread_create(&tid[i], NULL, clone_churn_main, &p), 0);
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_join(tid[i], NULL), 0);
	assert_int_equal(refs_of(j), NCLONES + 2);
	assert_int_equal(flags_of(j), TASK_JOIN_INTEREST);

	for (unsigned i = 0; i + 1 < NCLONES; i++) {
		weft_waker_drop(&p.clones[i]);
		assert_true(weft_waker_is_empty(&p.clones[i]));
	}
	assert_int_equal(refs_of(j), 3);
	weft_waker_wake(&p.clones[NCLONES - 1]);
	assert_true(weft_waker_is_empty(&p.clones[NCLONES - 1]));

	assert_int_equal(weft_join_wait(j, NULL), 0);
	assert_int_equal(atomic_load(&p.polls), 2);
	weft_runtime_destroy(rt);
	assert_int_equal(refs_of(j), 1);
	weft_join_drop(j);
	probe_fini(&p);
}

/* Keeps a clone of its waker beyond its completion. */
static weft_poll_t keep_waker_poll(void *arg, weft_cx_t *cx)
{
	struct fut *f = arg;

	atomic_fetch_add(&f->p->polls, 1);
	f->p->slot = weft_waker_clone(weft_cx_waker(cx));
	tcount_add(&f->p->polled, 1);
	return WEFT_READY;
}

static void test_task_wake_after_completion_is_noop(void **state)
{
	weft_runtime_t *rt = rt_create(1);
	struct probe p, s;
	weft_join_t *j;
	uint64_t flags;

	(void)state;
	probe_init(&p);
	probe_init(&s);
	j = spawn_fut(rt, keep_waker_poll, &p, true);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	flags = flags_of(j);
	assert_true(flags & TASK_COMPLETE);
	assert_false(flags & TASK_NOTIFIED);

	weft_waker_wake_by_ref(&p.slot);
	assert_int_equal(flags_of(j) & (TASK_NOTIFIED | TASK_COMPLETE),
			 TASK_COMPLETE);
	/*
	 * One worker and a FIFO global queue: had the wake queued the task,
	 * the worker would reach it before this sentinel.
	 */
	assert_int_equal(
		join_wait_drop(spawn_fut(rt, ready_poll, &s, true), NULL), 0);
	assert_int_equal(atomic_load(&p.polls), 1);

	weft_runtime_destroy(rt);
	/* The join handle and the kept clone. */
	assert_int_equal(refs_of(j), 2);
	weft_waker_wake_by_ref(&p.slot);
	assert_int_equal(refs_of(j), 2);
	assert_false(state_of(j) & TASK_NOTIFIED);
	weft_waker_wake(&p.slot);
	assert_true(weft_waker_is_empty(&p.slot));
	assert_int_equal(refs_of(j), 1);
	weft_join_drop(j);
	assert_int_equal(atomic_load(&p.polls), 1);
	probe_fini(&s);
	probe_fini(&p);
}

static void test_task_waker_is_last_reference(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct probe p1, p2, p3;
	weft_join_t *j;

	(void)state;
	probe_init(&p1);
	probe_init(&p2);
	probe_init(&p3);

	/* The join handle goes first; waking the clone by value frees. */
	j = spawn_fut(rt, keep_waker_poll, &p1, true);
	assert_int_equal(join_wait_drop(j, NULL), 0);
	/* Dropping the clone frees. */
	j = spawn_fut(rt, keep_waker_poll, &p2, true);
	assert_int_equal(join_wait_drop(j, NULL), 0);
	/* Detached: only the clone outlives the runtime. */
	spawn_fut(rt, keep_waker_poll, &p3, false);
	tcount_wait(&p3.polled, 1);
	weft_runtime_destroy(rt);

	weft_waker_wake(&p1.slot);
	weft_waker_drop(&p2.slot);
	weft_waker_wake_by_ref(&p3.slot);
	weft_waker_wake(&p3.slot);
	/* Empty wakers: every operation is a no-op. */
	weft_waker_wake(&p1.slot);
	weft_waker_wake_by_ref(&p1.slot);
	weft_waker_drop(&p1.slot);
	assert_int_equal(atomic_load(&p1.polls), 1);
	assert_int_equal(atomic_load(&p2.polls), 1);
	assert_int_equal(atomic_load(&p3.polls), 1);
	probe_fini(&p3);
	probe_fini(&p2);
	probe_fini(&p1);
}

static void test_task_waker_empty_and_set(void **state)
{
	weft_runtime_t *rt = rt_create(1);
	weft_waker_t empty = WEFT_WAKER_EMPTY, slot = WEFT_WAKER_EMPTY, w;
	struct probe hold, p;
	weft_join_t *j;

	(void)state;
	w = weft_waker_clone(&empty);
	assert_true(weft_waker_is_empty(&w));
	assert_true(weft_waker_will_wake(&w, &empty));

	probe_init(&hold);
	probe_init(&p);
	spawn_fut(rt, blocker_poll, &hold, false);
	tcount_wait(&hold.entered, 1);
	j = spawn_fut(rt, ready_poll, &p, true);
	w = weft__task_waker_vtable.clone(task_of(j));
	assert_int_equal(refs_of(j), 4);

	/* weft_waker_set clones once, then recognises the same target. */
	weft_waker_set(&slot, &w);
	assert_true(weft_waker_will_wake(&slot, &w));
	assert_int_equal(refs_of(j), 5);
	weft_waker_set(&slot, &w);
	assert_int_equal(refs_of(j), 5);
	weft_waker_set(&slot, &empty);
	assert_true(weft_waker_is_empty(&slot));
	assert_int_equal(refs_of(j), 4);
	weft_waker_drop(&w);
	assert_int_equal(refs_of(j), 3);

	tcount_add(&hold.gate, 1);
	assert_int_equal(join_wait_drop(j, NULL), 0);
	weft_runtime_destroy(rt);
	probe_fini(&p);
	probe_fini(&hold);
}

/* Returns the sum of its state's bytes; counts its drop. */
struct big {
	struct probe *p;
	unsigned char bytes[200];
};

static weft_poll_t big_poll(void *arg, weft_cx_t *cx)
{
	struct big *b = arg;
	uintptr_t sum = 0;

	for (unsigned i = 0; i < sizeof(b->bytes); i++)
		sum += b->bytes[i];
	atomic_fetch_add(&b->p->polls, 1);
	weft_cx_return(cx, (void *)sum);
	return WEFT_READY;
}

static void big_drop(void *arg)
{
	struct big *b = arg;

	atomic_fetch_add(&b->p->drops, 1);
}

static weft_poll_t null_state_poll(void *arg, weft_cx_t *cx)
{
	const unsigned char *bytes = arg;
	uintptr_t sum = 0;

	for (unsigned i = 0; i < 64; i++)
		sum += bytes[i];
	weft_cx_return(cx, (void *)(sum + 1));
	return WEFT_READY;
}

static void test_task_state_copied_and_dropped_once(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct probe p;
	struct big b;
	weft_join_t *j;
	void *out;
	uintptr_t expect = 0;

	(void)state;
	probe_init(&p);
	b.p = &p;
	for (unsigned i = 0; i < sizeof(b.bytes); i++) {
		b.bytes[i] = (unsigned char)i;
		expect += (unsigned char)i;
	}
	j = spawn_ok(rt, big_poll, big_drop, &b, sizeof(b), true);
	/* The task has its own copy. */
	memset(b.bytes, 0, sizeof(b.bytes));
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_int_equal((uintptr_t)out, expect);
	assert_int_equal(atomic_load(&p.drops), 1);
	assert_int_equal(atomic_load(&p.polls), 1);

	/* NULL state: zeroed. */
	j = spawn_ok(rt, null_state_poll, NULL, NULL, 64, true);
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_int_equal((uintptr_t)out, 1);

	/* Failed spawns run nothing and drop nothing. */
	assert_int_equal(weft_spawn_with(rt,
					 &(weft_spawn_t){ .drop = big_drop,
							  .state = &b,
							  .size = sizeof(b) },
					 NULL),
			 -EINVAL);
	assert_int_equal(weft_spawn_with(NULL,
					 &(weft_spawn_t){ .poll = big_poll,
							  .drop = big_drop,
							  .state = &b,
							  .size = sizeof(b) },
					 NULL),
			 -EINVAL);
	assert_int_equal(weft_spawn_with(rt, NULL, NULL), -EINVAL);
	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&p.drops), 1);
	assert_int_equal(atomic_load(&p.polls), 1);
	probe_fini(&p);
}

static void test_task_ids_unique(void **state)
{
	enum { N = 200 };
	weft_runtime_t *rt = rt_create(2);
	weft_join_t *j[N];
	uint64_t id[N];
	struct probe p;

	(void)state;
	probe_init(&p);
	for (unsigned i = 0; i < N; i++) {
		j[i] = spawn_fut(rt, ready_poll, &p, true);
		id[i] = weft_join_id(j[i]);
		assert_true(id[i] != 0);
	}
	for (unsigned i = 0; i < N; i++)
		for (unsigned k = i + 1; k < N; k++)
			assert_true(id[i] != id[k]);
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(join_wait_drop(j[i], NULL), 0);
	assert_int_equal(atomic_load(&p.polls), N);
	weft_runtime_destroy(rt);
	probe_fini(&p);
}

/*
 * Sets its output in its first poll and yields (PENDING); in the second,
 * f->i says whether it sets another before READY.
 */
static weft_poll_t output_then_yield_poll(void *arg, weft_cx_t *cx)
{
	struct fut *f = arg;

	WEFT_ASYNC_BEGIN(f);
	weft_cx_return(cx, (void *)0x77);
	WEFT_AWAIT(f, weft_yield_poll(&f->y, cx));
	if (f->i)
		weft_cx_return(cx, (void *)0x88);
	atomic_fetch_add(&f->p->polls, 1);
	WEFT_ASYNC_END(f);
}

/* Sets its output, then waits for ever (until aborted). */
static weft_poll_t output_then_park_poll(void *arg, weft_cx_t *cx)
{
	struct fut *f = arg;

	weft_cx_return(cx, (void *)0x99);
	tcount_add(&f->p->polled, 1);
	return WEFT_PENDING;
}

/*
 * An output set in a poll that returned PENDING is the task's output
 * unless a later poll sets another (its word in the task is an owned
 * link until completion: task.c keeps it aside); a cancelled task's is
 * NULL.
 */
static void test_task_output_kept_across_pending(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct fut f = { 0 };
	weft_join_t *j;
	struct probe p;
	void *out;

	(void)state;
	probe_init(&p);
	f.p = &p;
	for (unsigned again = 0; again < 2; again++) {
		f.i = again;
		j = spawn_ok(rt, output_then_yield_poll, NULL, &f, sizeof(f),
			     true);
		out = NULL;
		assert_int_equal(join_wait_drop(j, &out), 0);
		assert_ptr_equal(out, again ? (void *)0x88 : (void *)0x77);
	}
	assert_int_equal(atomic_load(&p.polls), 2);

	j = spawn_ok(rt, output_then_park_poll, NULL, &f, sizeof(f), true);
	tcount_wait(&p.polled, 1);
	/*
	 * The kept value is flagged on the task (before to_idle), so that
	 * only its completion locks.
	 */
	wait_not_running(j);
	assert_true(flags_of(j) & TASK_OUTPUT_KEPT);
	weft_join_abort(j);
	out = (void *)1;
	assert_int_equal(join_wait_drop(j, &out), -ECANCELED);
	assert_null(out);

	/* Tasks cancelled by destroy with a value kept (its cancel paths). */
	for (unsigned i = 0; i < 8; i++)
		(void)spawn_ok(rt, output_then_park_poll, NULL, &f, sizeof(f),
			       false);
	tcount_wait(&p.polled, 1 + 8);
	weft_runtime_destroy(rt);
	probe_fini(&p);
}

/* Whether @t's spawn record sits in its own block (the table was full). */
static bool rec_in_block(const weft_task_t *t)
{
	const unsigned char *r = (const unsigned char *)t->rec;

	return r > (const unsigned char *)t &&
	       r < t->future + t->rec->state_size + 64;
}

/*
 * Tasks of one spec share one spawn record; past the record table's
 * 4096, a spec's record sits in its task's block.  Either way the
 * record says what the spec said.
 */
static void test_task_spawn_records(void **state)
{
	enum { N = 5000 };
	weft_runtime_t *rt = rt_create(2);
	weft_join_t **j = calloc(N, sizeof(*j));
	unsigned in_block = 0;
	struct probe p;
	struct fut f;

	(void)state;
	assert_non_null(j);
	probe_init(&p);
	f = (struct fut){ .p = &p };
	j[0] = spawn_ok(rt, ready_poll, NULL, &f, sizeof(f), true);
	j[1] = spawn_ok(rt, ready_poll, NULL, &f, sizeof(f), true);
	assert_ptr_equal(task_of(j[0])->rec, task_of(j[1])->rec);
	assert_int_equal(join_wait_drop(j[0], NULL), 0);
	assert_int_equal(join_wait_drop(j[1], NULL), 0);

	/* A spec per line: more than the table holds. */
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(
			weft_spawn_with(rt,
					&(weft_spawn_t){ .poll = ready_poll,
							 .state = &f,
							 .size = sizeof(f),
							 .name = "rec",
							 .file = "records",
							 .line = (int)i + 1 },
					&j[i]),
			0);
	for (unsigned i = 0; i < N; i++) {
		weft_task_t *t = task_of(j[i]);
		const weft__spawn_rec_t *r = t->rec;

		assert_ptr_equal(r->rt, rt);
		assert_ptr_equal(r->poll, ready_poll);
		assert_string_equal(r->name, "rec");
		assert_string_equal(r->file, "records");
		assert_int_equal(r->line, (int)i + 1);
		assert_int_equal(r->state_size, sizeof(f));
		if (rec_in_block(t))
			in_block++;
		assert_int_equal(join_wait_drop(j[i], NULL), 0);
	}
	assert_true(in_block >= N - 4096);
	assert_int_equal(atomic_load(&p.polls), N + 2);
	weft_runtime_destroy(rt);
	free(j);
	probe_fini(&p);
}

struct rec_racer {
	weft_runtime_t *rt;
	struct fut f;
	weft_join_t *j[300];
};

/* Spawns one task for each of 300 specs, which every racer also spawns. */
static void *rec_racer_main(void *arg)
{
	struct rec_racer *r = arg;

	for (int i = 0; i < 300; i++)
		if (weft_spawn_with(r->rt,
				    &(weft_spawn_t){ .poll = ready_poll,
						     .state = &r->f,
						     .size = sizeof(r->f),
						     .name = "race",
						     .file = "records-race",
						     .line = 20000 + i },
				    &r->j[i]) != 0)
			r->j[i] = NULL;
	return NULL;
}

/*
 * Threads spawning the same specs at once (workers polling meanwhile):
 * each spec gets one record, which every task of it names, right.
 */
static void test_task_spawn_records_racing(void **state)
{
	enum { NTHREADS = 4 };
	weft_runtime_t *rt = rt_create(2);
	struct rec_racer *r = calloc(NTHREADS, sizeof(*r));
	pthread_t tid[NTHREADS];
	struct probe p;

	(void)state;
	assert_non_null(r);
	probe_init(&p);
	for (unsigned k = 0; k < NTHREADS; k++) {
		r[k].rt = rt;
		r[k].f = (struct fut){ .p = &p };
		assert_int_equal(
			pthread_create(&tid[k], NULL, rec_racer_main, &r[k]), 0);
	}
	for (unsigned k = 0; k < NTHREADS; k++)
		assert_int_equal(pthread_join(tid[k], NULL), 0);
	for (int i = 0; i < 300; i++) {
		const weft__spawn_rec_t *shared = NULL;

		for (unsigned k = 0; k < NTHREADS; k++) {
			weft_task_t *t;

			assert_non_null(r[k].j[i]);
			t = task_of(r[k].j[i]);
			assert_ptr_equal(t->rec->rt, rt);
			assert_string_equal(t->rec->file, "records-race");
			assert_int_equal(t->rec->line, 20000 + i);
			assert_int_equal(t->rec->state_size,
					 sizeof(struct fut));
			if (!rec_in_block(t)) {
				if (shared)
					assert_ptr_equal(t->rec, shared);
				shared = t->rec;
			}
		}
		for (unsigned k = 0; k < NTHREADS; k++)
			assert_int_equal(join_wait_drop(r[k].j[i], NULL), 0);
	}
	assert_int_equal(atomic_load(&p.polls), NTHREADS * 300);
	weft_runtime_destroy(rt);
	free(r);
	probe_fini(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_task_state_and_wake_before_first_poll),
		cmocka_unit_test(test_task_wake_during_poll_repolls),
		cmocka_unit_test(test_task_wake_from_other_thread),
		cmocka_unit_test(test_task_waker_clone_drop_balance),
		cmocka_unit_test(test_task_wake_after_completion_is_noop),
		cmocka_unit_test(test_task_waker_is_last_reference),
		cmocka_unit_test(test_task_waker_empty_and_set),
		cmocka_unit_test(test_task_state_copied_and_dropped_once),
		cmocka_unit_test(test_task_ids_unique),
		cmocka_unit_test(test_task_output_kept_across_pending),
		cmocka_unit_test(test_task_spawn_records_racing),
		cmocka_unit_test(test_task_spawn_records),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
