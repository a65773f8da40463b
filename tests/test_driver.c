/* SPDX-License-Identifier: MIT */
/*
 * The driver (runtime/src/driver.c) through its internal API, on a
 * driver of its own (no runtime): its try-lock excludes (threads that
 * take it count under it with plain writes), an unpark wakes a turn
 * blocked with nothing to wait for, timers fire in deadline order and
 * never before their deadline (and a cancelled one never), an fd's
 * readiness reaches its registration and wakes its waker, and shutdown
 * detaches a registration still live.
 *
 * The wakers here are the test's own: they count clones, wakes and drops
 * and note when and in what order they were woken.  A lost wake-up shows
 * as a blocking turn that never returns: the test's TIMEOUT.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "runtime_internal.h"
#include "test_helpers.h"

/*
 * A driver, quiet: a first turn that does not block takes the eventfd's
 * writable edge, reported once when it was added, so that a blocking
 * turn after it waits for something.
 */
static driver_t *driver_new(void)
{
	driver_t *d = aligned_alloc(WEFT_CACHELINE, sizeof(*d));

	assert_non_null(d);
	assert_int_equal(weft__driver_init(d), 0);
	weft__driver_turn(d, false);
	return d;
}

static void driver_free(driver_t *d)
{
	weft__driver_fini(d);
	free(d);
}

/* ------------------------------------------------------------ wakers */

struct probe_waker {
	atomic_uint clones;
	atomic_uint wakes;
	atomic_uint drops;
	uint64_t woken_at; /* weft_now_ns() at the first wake */
	unsigned order;    /* among the wakes of its group, from 1 */
	atomic_uint *seq;  /* the group's wake counter, or NULL */
};

static weft_waker_t pw_clone(const void *data);

static void pw_wake_by_ref(const void *data)
{
	struct probe_waker *w = (struct probe_waker *)data;

	if (atomic_fetch_add(&w->wakes, 1) == 0) {
		w->woken_at = weft_now_ns();
		if (w->seq)
			w->order = atomic_fetch_add(w->seq, 1) + 1;
	}
}

static void pw_drop(const void *data)
{
	struct probe_waker *w = (struct probe_waker *)data;

	atomic_fetch_add(&w->drops, 1);
}

/* Wake consumes the reference: counted as a wake and a drop. */
static void pw_wake(const void *data)
{
	pw_wake_by_ref(data);
	pw_drop(data);
}

static const weft_waker_vtable_t pw_vtable = {
	.clone = pw_clone,
	.wake = pw_wake,
	.wake_by_ref = pw_wake_by_ref,
	.drop = pw_drop,
};

static weft_waker_t pw_clone(const void *data)
{
	struct probe_waker *w = (struct probe_waker *)data;

	atomic_fetch_add(&w->clones, 1);
	return (weft_waker_t){ &pw_vtable, data };
}

/* A poll context whose waker is @w (not a task's: cx.task NULL). */
static weft_cx_t cx_of(struct probe_waker *w)
{
	weft_cx_t cx;

	memset(&cx, 0, sizeof(cx));
	cx.waker = (weft_waker_t){ &pw_vtable, w };
	return cx;
}

/* Every reference the driver took was given back. */
static void assert_balanced(struct probe_waker *w)
{
	assert_int_equal(atomic_load(&w->clones), atomic_load(&w->drops));
}

/* ---------------------------------------------------------- try-lock */

#define LOCKERS 4u

struct lockers {
	driver_t *d;
	unsigned tries;
	uint64_t guarded; /* written only while holding the driver */
	atomic_uint inside;
	atomic_uint overlaps;
	atomic_ulong taken;
};

static void *locker_main(void *arg)
{
	struct lockers *l = arg;

	for (unsigned i = 0; i < l->tries; i++) {
		if (!weft__driver_try_lock(l->d)) {
			sched_yield();
			continue;
		}
		if (atomic_fetch_add(&l->inside, 1) != 0)
			atomic_fetch_add(&l->overlaps, 1);
		l->guarded++;
		atomic_fetch_sub(&l->inside, 1);
		atomic_fetch_add(&l->taken, 1);
		weft__driver_unlock(l->d);
	}
	return NULL;
}

static void test_driver_try_lock_excludes(void **state)
{
	struct lockers l = { .tries = scale_count(200000) };
	pthread_t th[LOCKERS];

	(void)state;
	l.d = driver_new();
	/* One holder at a time; nobody waits. */
	assert_true(weft__driver_try_lock(l.d));
	assert_false(weft__driver_try_lock(l.d));
	assert_false(weft__driver_try_lock(l.d));
	weft__driver_unlock(l.d);
	assert_true(weft__driver_try_lock(l.d));
	weft__driver_unlock(l.d);

	for (unsigned i = 0; i < LOCKERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, locker_main, &l),
				 0);
	for (unsigned i = 0; i < LOCKERS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(atomic_load(&l.overlaps), 0);
	assert_true(atomic_load(&l.taken) > 0);
	/* No increment lost: each was made alone. */
	assert_int_equal(l.guarded, atomic_load(&l.taken));
	assert_true(weft__driver_try_lock(l.d));
	weft__driver_unlock(l.d);
	driver_free(l.d);
}

/* ------------------------------------------------------------ unpark */

struct turner {
	driver_t *d;
	unsigned rounds;
	atomic_uint started; /* rounds begun */
	atomic_uint go;      /* the round the test has unparked for */
	atomic_uint done;    /* rounds ended */
};

static void *turner_main(void *arg)
{
	struct turner *t = arg;

	for (unsigned i = 1; i <= t->rounds; i++) {
		atomic_store(&t->started, i);
		/*
		 * No fd, no timer: a turn blocks until the eventfd is
		 * written.  (A turn may also return for the eventfd's
		 * writable edge after a drain: turn again.)
		 */
		while (atomic_load(&t->go) != i)
			weft__driver_turn(t->d, true);
		atomic_store(&t->done, i);
	}
	return NULL;
}

/*
 * Each round, the turner blocks in a turn with nothing to wait for (and
 * no timeout: the wait is unbounded) until the test unparks the driver;
 * an unpark that came before the turn began is kept by the eventfd.
 * A lost unpark leaves the turner asleep for good.
 */
static void test_driver_unpark_wakes_blocked_turn(void **state)
{
	struct turner t = { .rounds = scale_count(300) };
	uint64_t turns;
	pthread_t th;

	(void)state;
	t.d = driver_new();
	assert_false(weft__driver_has_work(t.d));
	turns = atomic_load(&t.d->turns);
	assert_int_equal(pthread_create(&th, NULL, turner_main, &t), 0);
	for (unsigned i = 1; i <= t.rounds; i++) {
		while (atomic_load(&t.started) != i)
			sched_yield();
		/* Sometimes late enough that it sleeps, sometimes not. */
		if (i % 2)
			usleep(200);
		atomic_store(&t.go, i);
		weft__driver_unpark(t.d);
		while (atomic_load(&t.done) != i)
			sched_yield();
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(atomic_load(&t.d->turns) - turns >= t.rounds);
	/* Two unparks before a turn: the turn returns. */
	weft__driver_unpark(t.d);
	weft__driver_unpark(t.d);
	turns = atomic_load(&t.d->turns);
	weft__driver_turn(t.d, true);
	assert_int_equal(atomic_load(&t.d->turns), turns + 1);
	driver_free(t.d);
}

/* ------------------------------------------------------------ timers */

#define NTIMERS 120u

/* The first wheel tick (1 ms, from the driver's start) at or after @ns. */
static uint64_t tick_after(const driver_t *d, uint64_t ns)
{
	return (ns - d->start_ns + WEFT_MSEC(1) - 1) / WEFT_MSEC(1);
}

/* Polls timer @e (a fresh budget first: not a task's poll). */
static weft_poll_t timer_poll(weft_timer_entry_t *e, struct probe_waker *w)
{
	weft_cx_t cx = cx_of(w);

	weft__coop_budget = WEFT_COOP_BUDGET;
	return weft__timer_poll(e, &cx);
}

/*
 * Timers over the next 45 ms or so, registered in a scrambled order, a
 * tenth of them cancelled; blocking turns until the rest fired.  Each
 * fired at or after its deadline, in the order of their wheel ticks, and
 * the cancelled ones never.  (A slow build may reach a deadline before
 * its timer is registered: that poll is READY at once, and the timer
 * sits out the rest.)
 */
static void test_driver_timers_in_order_never_early(void **state)
{
	weft_timer_entry_t *e = calloc(NTIMERS, sizeof(*e));
	struct probe_waker *w = calloc(NTIMERS, sizeof(*w));
	struct probe_waker *by_order[NTIMERS + 1] = { NULL };
	bool armed[NTIMERS] = { false };
	atomic_uint seq = 0;
	unsigned narmed = 0, live = 0, turns = 0;
	driver_t *d = driver_new();
	uint64_t now = weft_now_ns();

	(void)state;
	assert_non_null(e);
	assert_non_null(w);
	for (unsigned k = 0; k < NTIMERS; k++) {
		/* 0, 37, 74, ... mod 120: every index once, out of order. */
		unsigned i = k * 37 % NTIMERS;

		w[i].seq = &seq;
		e[i].deadline_ns = now + WEFT_MSEC(5) + i * WEFT_USEC(330);
		e[i].driver = d;
		armed[i] = timer_poll(&e[i], &w[i]) == WEFT_PENDING;
		if (!armed[i])
			assert_true(weft_now_ns() >= e[i].deadline_ns);
		narmed += armed[i];
	}
	assert_true(weft__driver_has_work(d) == (narmed > 0));
	assert_int_equal(atomic_load(&d->ntimers), narmed);
	for (unsigned i = 0; i < NTIMERS; i += 10)
		weft__timer_cancel(&e[i]);
	for (unsigned i = 0; i < NTIMERS; i++)
		live += armed[i] && i % 10 != 0;
	assert_int_equal(atomic_load(&d->ntimers), live);

	while (atomic_load(&seq) < live) {
		weft__driver_turn(d, true);
		assert_true(++turns < 100000);
	}
	assert_int_equal(atomic_load(&d->ntimers), 0);
	assert_false(weft__driver_has_work(d));
	assert_int_equal(atomic_load(&d->timers_fired), live);
	for (unsigned i = 0; i < NTIMERS; i++) {
		if (!armed[i] || i % 10 == 0) {
			assert_int_equal(atomic_load(&w[i].wakes), 0);
			assert_balanced(&w[i]);
			continue;
		}
		assert_int_equal(atomic_load(&w[i].wakes), 1);
		assert_balanced(&w[i]);
		/* Never early. */
		assert_true(w[i].woken_at >= e[i].deadline_ns);
		assert_true(w[i].order >= 1 && w[i].order <= live);
		assert_null(by_order[w[i].order]);
		by_order[w[i].order] = &w[i];
		/* Fired: READY without registering again. */
		assert_int_equal(timer_poll(&e[i], &w[i]), WEFT_READY);
		assert_int_equal(atomic_load(&w[i].clones), 1);
	}
	/*
	 * In deadline order, to the wheel's millisecond: a timer fires in
	 * the first tick that starts at or after its deadline, and one
	 * tick's timers in any order.
	 */
	for (unsigned k = 1; k < live; k++) {
		const weft_timer_entry_t *a = &e[by_order[k] - w];
		const weft_timer_entry_t *b = &e[by_order[k + 1] - w];

		assert_true(tick_after(d, a->deadline_ns) <=
			    tick_after(d, b->deadline_ns));
	}
	/* A deadline already past: READY at the first poll, nothing kept. */
	{
		weft_timer_entry_t past = { .deadline_ns = weft_now_ns(),
					    .driver = d };
		struct probe_waker pw = { 0 };

		assert_int_equal(timer_poll(&past, &pw), WEFT_READY);
		assert_int_equal(atomic_load(&pw.clones), 0);
		assert_int_equal(atomic_load(&d->ntimers), 0);
	}
	driver_free(d);
	free(w);
	free(e);
}

/* --------------------------------------------------------------- I/O */

/*
 * A pipe, both ends registered: the write end reports writable, the read
 * end readable once a byte is written (waking the waker that waited for
 * it), cleared after EAGAIN, and closed once the write end goes.
 */
static void test_driver_fd_reports_readiness(void **state)
{
	struct probe_waker rw = { 0 }, ww = { 0 };
	weft_cx_t rcx = cx_of(&rw), wcx = cx_of(&ww);
	driver_t *d = driver_new();
	io_reg_t *rr, *wr;
	uint32_t ev = 0;
	int fds[2];
	char c = 'x';

	(void)state;
	assert_int_equal(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
	assert_int_equal(weft__io_register(d, fds[0], &rr), 0);
	assert_int_equal(weft__io_register(d, fds[1], &wr), 0);
	assert_true(weft__driver_has_work(d));

	/* Nothing to read: the read side waits, its waker kept. */
	assert_int_equal(weft__io_poll_ready(rr, IO_DIR_READ, &rcx, &ev),
			 WEFT_PENDING);
	assert_int_equal(atomic_load(&rw.clones), 1);
	/* The write end is writable: reported by the first turn. */
	while (weft__io_poll_ready(wr, IO_DIR_WRITE, &wcx, &ev) != WEFT_READY)
		weft__driver_turn(d, true);
	assert_true(ev & IO_WRITABLE);
	assert_int_equal(atomic_load(&rw.wakes), 0);

	/* A byte: the turn blocks until the read end reports it. */
	assert_int_equal(write(fds[1], &c, 1), 1);
	while (atomic_load(&rw.wakes) == 0)
		weft__driver_turn(d, true);
	assert_int_equal(atomic_load(&rw.wakes), 1);
	assert_int_equal(weft__io_poll_ready(rr, IO_DIR_READ, &rcx, &ev),
			 WEFT_READY);
	assert_true(ev & IO_READABLE);
	assert_false(ev & IO_READ_CLOSED);
	assert_int_equal(read(fds[0], &c, 1), 1);
	assert_int_equal(read(fds[0], &c, 1), -1);
	/* EAGAIN: cleared, and waiting again. */
	weft__io_clear_ready(rr, ev);
	assert_int_equal(weft__io_poll_ready(rr, IO_DIR_READ, &rcx, &ev),
			 WEFT_PENDING);

	/* The write end goes: the read end reports it closed. */
	assert_int_equal(weft__io_deregister(wr), 0);
	close(fds[1]);
	while (atomic_load(&rw.wakes) < 2)
		weft__driver_turn(d, true);
	assert_int_equal(weft__io_poll_ready(rr, IO_DIR_READ, &rcx, &ev),
			 WEFT_READY);
	assert_true(ev & IO_READ_CLOSED);
	assert_int_equal(weft__io_deregister(rr), 0);
	close(fds[0]);
	assert_false(weft__driver_has_work(d));
	driver_free(d);
	assert_balanced(&rw);
	assert_balanced(&ww);
}

/*
 * A registration still live at shutdown: fini closes its fd, wakes its
 * waker and marks it; its owner's poll is READY and its deregister says
 * -ESHUTDOWN (and frees it), after the driver is gone.
 */
static void test_driver_fini_detaches_live_fd(void **state)
{
	struct probe_waker rw = { 0 };
	weft_cx_t cx = cx_of(&rw);
	driver_t *d = driver_new();
	io_reg_t *r;
	uint32_t ev = 0;
	int fds[2];

	(void)state;
	assert_int_equal(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
	assert_int_equal(weft__io_register(d, fds[0], &r), 0);
	assert_int_equal(weft__io_poll_ready(r, IO_DIR_READ, &cx, &ev),
			 WEFT_PENDING);
	driver_free(d);
	assert_int_equal(atomic_load(&rw.wakes), 1);
	/* Its fd is closed. */
	assert_int_equal(fcntl(fds[0], F_GETFD), -1);
	assert_int_equal(weft__io_poll_ready(r, IO_DIR_READ, &cx, &ev),
			 WEFT_READY);
	assert_true(ev & IO_SHUTDOWN);
	assert_int_equal(weft__io_deregister(r), -ESHUTDOWN);
	close(fds[1]);
	assert_balanced(&rw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_driver_try_lock_excludes),
		cmocka_unit_test(test_driver_unpark_wakes_blocked_turn),
		cmocka_unit_test(test_driver_timers_in_order_never_early),
		cmocka_unit_test(test_driver_fd_reports_readiness),
		cmocka_unit_test(test_driver_fini_detaches_live_fd),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
