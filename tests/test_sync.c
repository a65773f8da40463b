/* SPDX-License-Identifier: MIT */
/*
 * Synchronisation (oneshot.c, countdown.c): the oneshot channel between
 * tasks and threads, in every order of send, wait and drop; the countdown
 * latch with task and thread waiters.  Public API only.
 *
 * ASan and valgrind check that every channel is freed: each test releases
 * both halves exactly once, as the API requires.
 */
#include <stdatomic.h>
#include <string.h>

#include "test_helpers.h"

struct probe {
	_Atomic unsigned polls;
	_Atomic unsigned drops;
	_Atomic unsigned errors;
	_Atomic unsigned trues; /* weft_countdown_done() returned true */
	tcount_t polled;
	tcount_t done;
};

static void probe_init(struct probe *p)
{
	memset(p, 0, sizeof(*p));
	tcount_init(&p->polled);
	tcount_init(&p->done);
}

static void probe_fini(struct probe *p)
{
	assert_int_equal(atomic_load(&p->errors), 0);
	tcount_fini(&p->done);
	tcount_fini(&p->polled);
}

/* ---------------------------------------------------------------- oneshot */

/*
 * Receives on a oneshot.  Outputs the value, or the status when it is not
 * 0 (as an intptr_t).  With hand_back, returns READY after its first poll
 * without receiving, leaving the receiver to the test.
 */
struct recv_fut {
	struct probe *p;
	weft_oneshot_rx_t *rx;
	bool hand_back;
};

static weft_poll_t recv_poll(void *arg, weft_cx_t *cx)
{
	struct recv_fut *f = arg;
	void *v = (void *)0xbad;
	int status = 1;

	atomic_fetch_add(&f->p->polls, 1);
	if (weft_oneshot_poll(f->rx, cx, &status, &v) == WEFT_PENDING) {
		tcount_add(&f->p->polled, 1);
		if (f->hand_back) {
			f->rx = NULL;
			return WEFT_READY;
		}
		return WEFT_PENDING;
	}
	if (status == 0)
		weft_cx_return(cx, v);
	else if (status == -EPIPE && v == NULL)
		weft_cx_return(cx, (void *)(intptr_t)status);
	else
		atomic_fetch_add(&f->p->errors, 1);
	weft_oneshot_rx_drop(f->rx);
	f->rx = NULL;
	tcount_add(&f->p->polled, 1);
	return WEFT_READY;
}

static void recv_drop(void *arg)
{
	struct recv_fut *f = arg;

	atomic_fetch_add(&f->p->drops, 1);
	if (f->rx)
		weft_oneshot_rx_drop(f->rx);
}

static weft_join_t *spawn_recv(weft_runtime_t *rt, struct probe *p,
			       weft_oneshot_rx_t *rx)
{
	struct recv_fut f = { .p = p, .rx = rx };

	return spawn_ok(rt, recv_poll, recv_drop, &f, sizeof(f), true);
}

/* Sends after yielding a few times (or drops the sender). */
struct send_fut {
	struct probe *p;
	weft_oneshot_tx_t *tx;
	void *value;
	unsigned yields;
	bool drop_instead;
};

static weft_poll_t send_poll(void *arg, weft_cx_t *cx)
{
	struct send_fut *f = arg;

	atomic_fetch_add(&f->p->polls, 1);
	if (f->yields > 0) {
		f->yields--;
		weft_cx_yield(cx);
		return WEFT_PENDING;
	}
	if (f->drop_instead)
		weft_oneshot_tx_drop(f->tx);
	else if (weft_oneshot_send(f->tx, f->value) != 0)
		atomic_fetch_add(&f->p->errors, 1);
	f->tx = NULL;
	return WEFT_READY;
}

static void send_drop(void *arg)
{
	struct send_fut *f = arg;

	if (f->tx) /* cancelled before sending */
		weft_oneshot_tx_drop(f->tx);
}

static void test_sync_oneshot_send_after_wait(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	weft_oneshot_tx_t *tx;
	weft_oneshot_rx_t *rx;
	struct probe p;
	weft_join_t *j;
	void *out = NULL;

	(void)state;
	probe_init(&p);
	assert_int_equal(weft_oneshot_create(&tx, &rx), 0);
	j = spawn_recv(rt, &p, rx);
	tcount_wait(&p.polled, 1);
	assert_int_equal(weft_oneshot_send(tx, (void *)0x1001), 0);
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_ptr_equal(out, (void *)0x1001);
	assert_int_equal(atomic_load(&p.polls), 2);
	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&p.drops), 1);
	probe_fini(&p);
}

static void test_sync_oneshot_send_before_wait(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	weft_oneshot_tx_t *tx;
	weft_oneshot_rx_t *rx;
	struct probe p;
	weft_join_t *j;
	void *out = NULL;

	(void)state;
	probe_init(&p);
	assert_int_equal(weft_oneshot_create(&tx, &rx), 0);
	assert_int_equal(weft_oneshot_send(tx, (void *)0x2002), 0);
	j = spawn_recv(rt, &p, rx);
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_ptr_equal(out, (void *)0x2002);
	assert_int_equal(atomic_load(&p.polls), 1);

	/* NULL is a value like any other. */
	assert_int_equal(weft_oneshot_create(&tx, &rx), 0);
	assert_int_equal(weft_oneshot_send(tx, NULL), 0);
	out = (void *)1;
	assert_int_equal(join_wait_drop(spawn_recv(rt, &p, rx), &out), 0);
	assert_null(out);
	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&p.drops), 2);
	probe_fini(&p);
}

static void test_sync_oneshot_across_tasks(void **state)
{
	enum { PAIRS = 100 };
	weft_runtime_t *rt = rt_create(4);
	weft_join_t *recv[PAIRS];
	struct probe p, ps;
	void *out;

	(void)state;
	probe_init(&p);
	probe_init(&ps);
	for (unsigned i = 0; i < PAIRS; i++) {
		struct send_fut s = { .p = &ps,
				      .value = (void *)(uintptr_t)(i + 1),
				      .yields = i % 4 };
		weft_oneshot_rx_t *rx;

		assert_int_equal(weft_oneshot_create(&s.tx, &rx), 0);
		/* Half the senders start first. */
		if (i % 2)
			spawn_ok(rt, send_poll, send_drop, &s, sizeof(s),
				 false);
		recv[i] = spawn_recv(rt, &p, rx);
		if (i % 2 == 0)
			spawn_ok(rt, send_poll, send_drop, &s, sizeof(s),
				 false);
	}
	for (unsigned i = 0; i < PAIRS; i++) {
		assert_int_equal(join_wait_drop(recv[i], &out), 0);
		assert_ptr_equal(out, (void *)(uintptr_t)(i + 1));
	}
	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&p.drops), PAIRS);
	/* Each sender: one poll per yield, one to send. */
	assert_int_equal(atomic_load(&ps.polls),
			 PAIRS + PAIRS / 4 * (0 + 1 + 2 + 3));
	probe_fini(&ps);
	probe_fini(&p);
}

static void test_sync_oneshot_sender_dropped(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	weft_oneshot_tx_t *tx;
	weft_oneshot_rx_t *rx;
	struct send_fut s;
	struct probe p, ps;
	weft_join_t *j;
	void *out;

	(void)state;
	probe_init(&p);
	probe_init(&ps);

	/* Before the receiver waits. */
	assert_int_equal(weft_oneshot_create(&tx, &rx), 0);
	weft_oneshot_tx_drop(tx);
	assert_int_equal(join_wait_drop(spawn_recv(rt, &p, rx), &out), 0);
	assert_int_equal((intptr_t)out, -EPIPE);
	assert_int_equal(atomic_load(&p.polls), 1);

	/* While it waits. */
	assert_int_equal(weft_oneshot_create(&tx, &rx), 0);
	j = spawn_recv(rt, &p, rx);
	tcount_wait(&p.polled, 2);
	weft_oneshot_tx_drop(tx);
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_int_equal((intptr_t)out, -EPIPE);
	assert_int_equal(atomic_load(&p.polls), 3);

	/* By another task. */
	s = (struct send_fut){ .p = &ps, .yields = 2, .drop_instead = true };
	assert_int_equal(weft_oneshot_create(&s.tx, &rx), 0);
	j = spawn_recv(rt, &p, rx);
	spawn_ok(rt, send_poll, send_drop, &s, sizeof(s), false);
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_int_equal((intptr_t)out, -EPIPE);

	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&p.drops), 3);
	assert_int_equal(atomic_load(&ps.polls), 3);
	probe_fini(&ps);
	probe_fini(&p);
}

static void test_sync_oneshot_receiver_dropped(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	weft_oneshot_tx_t *tx;
	weft_oneshot_rx_t *rx;
	struct probe p;
	weft_join_t *j;

	(void)state;
	probe_init(&p);

	/* Dropped first: the send fails and the value is not taken. */
	assert_int_equal(weft_oneshot_create(&tx, &rx), 0);
	weft_oneshot_rx_drop(rx);
	assert_int_equal(weft_oneshot_send(tx, (void *)1), -EPIPE);

	/* Both dropped, in either order, nothing sent. */
	assert_int_equal(weft_oneshot_create(&tx, &rx), 0);
	weft_oneshot_rx_drop(rx);
	weft_oneshot_tx_drop(tx);
	assert_int_equal(weft_oneshot_create(&tx, &rx), 0);
	weft_oneshot_tx_drop(tx);
	weft_oneshot_rx_drop(rx);

	/* Sent, then the receiver goes without looking. */
	assert_int_equal(weft_oneshot_create(&tx, &rx), 0);
	assert_int_equal(weft_oneshot_send(tx, (void *)2), 0);
	weft_oneshot_rx_drop(rx);

	/* A waiting receiver aborted: its drop releases the receiver. */
	assert_int_equal(weft_oneshot_create(&tx, &rx), 0);
	j = spawn_recv(rt, &p, rx);
	tcount_wait(&p.polled, 1);
	weft_join_abort(j);
	assert_int_equal(join_wait_drop(j, NULL), -ECANCELED);
	assert_int_equal(weft_oneshot_send(tx, (void *)3), -EPIPE);

	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&p.drops), 1);
	assert_int_equal(atomic_load(&p.polls), 1);
	probe_fini(&p);
}

struct thread_send {
	weft_oneshot_tx_t *tx;
	void *value;
	int err;
};

static void *thread_send_main(void *arg)
{
	struct thread_send *ts = arg;

	ts->err = weft_oneshot_send(ts->tx, ts->value);
	return NULL;
}

/*
 * Polls a receiver under weft_block_on(); after its first PENDING, starts
 * a thread that sends.
 */
struct block_recv {
	weft_oneshot_rx_t *rx;
	int status;
	void *value;
	unsigned pending;
	struct thread_send *ts;
	pthread_t tid;
	int create_err;
};

static weft_poll_t block_recv_poll(void *arg, weft_cx_t *cx)
{
	struct block_recv *b = arg;

	if (weft_oneshot_poll(b->rx, cx, &b->status, &b->value) == WEFT_READY)
		return WEFT_READY;
	if (b->pending++ == 0 && b->ts)
		b->create_err =
			pthread_create(&b->tid, NULL, thread_send_main, b->ts);
	return WEFT_PENDING;
}

static void test_sync_oneshot_waker_replaced(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct thread_send ts = { .value = (void *)0x3003, .err = 1 };
	struct block_recv b = { .status = 1, .ts = &ts };
	struct recv_fut f;
	struct probe p;
	weft_join_t *j;

	(void)state;
	probe_init(&p);
	/*
	 * A task registers its waker and hands the receiver back; this
	 * thread then waits on it with another waker, which must replace
	 * the first.
	 */
	assert_int_equal(weft_oneshot_create(&ts.tx, &b.rx), 0);
	f = (struct recv_fut){ .p = &p, .rx = b.rx, .hand_back = true };
	j = spawn_ok(rt, recv_poll, recv_drop, &f, sizeof(f), true);
	assert_int_equal(join_wait_drop(j, NULL), 0);
	assert_int_equal(atomic_load(&p.polls), 1);

	assert_int_equal(weft_block_on(NULL, block_recv_poll, &b, NULL), 0);
	/* The first poll replaced the task's waker and returned PENDING. */
	assert_int_equal(b.pending, 1);
	assert_int_equal(b.create_err, 0);
	assert_int_equal(pthread_join(b.tid, NULL), 0);
	assert_int_equal(ts.err, 0);
	assert_int_equal(b.status, 0);
	assert_ptr_equal(b.value, (void *)0x3003);
	/* Polling again after READY stays READY with the same value. */
	b.value = NULL;
	b.ts = NULL;
	assert_int_equal(weft_block_on(NULL, block_recv_poll, &b, NULL), 0);
	assert_ptr_equal(b.value, (void *)0x3003);
	weft_oneshot_rx_drop(b.rx);

	weft_runtime_destroy(rt);
	/* The finished task's receiver was handed back, not dropped by it. */
	assert_int_equal(atomic_load(&p.drops), 1);
	probe_fini(&p);
}

/* -------------------------------------------------------------- countdown */

static weft_poll_t countdown_block_poll(void *arg, weft_cx_t *cx)
{
	return weft_countdown_poll(arg, cx);
}

static void test_sync_countdown_done_once(void **state)
{
	weft_countdown_t cd;

	(void)state;
	weft_countdown_init(&cd, 3);
	assert_int_equal(weft_countdown_count(&cd), 3);
	assert_false(weft_countdown_done(&cd));
	weft_countdown_add(&cd, 2);
	assert_int_equal(weft_countdown_count(&cd), 4);
	assert_false(weft_countdown_done(&cd));
	assert_false(weft_countdown_done(&cd));
	assert_false(weft_countdown_done(&cd));
	assert_int_equal(weft_countdown_count(&cd), 1);
	assert_true(weft_countdown_done(&cd));
	assert_int_equal(weft_countdown_count(&cd), 0);
	/* At zero: no waiting. */
	weft_countdown_wait(&cd);
	assert_int_equal(weft_block_on(NULL, countdown_block_poll, &cd, NULL),
			 0);
	weft_countdown_fini(&cd);

	weft_countdown_init(&cd, 0);
	weft_countdown_wait(&cd);
	weft_countdown_fini(&cd);
}

/* Decrements a countdown (after some yields) or awaits it. */
struct cd_fut {
	struct probe *p;
	weft_countdown_t *cd;
	unsigned yields;
	bool wait;
};

static weft_poll_t cd_poll(void *arg, weft_cx_t *cx)
{
	struct cd_fut *f = arg;

	atomic_fetch_add(&f->p->polls, 1);
	if (f->wait) {
		weft_poll_t r = weft_countdown_poll(f->cd, cx);

		if (r == WEFT_READY && weft_countdown_count(f->cd) != 0)
			atomic_fetch_add(&f->p->errors, 1);
		tcount_add(&f->p->polled, 1);
		return r;
	}
	if (f->yields > 0) {
		f->yields--;
		weft_cx_yield(cx);
		return WEFT_PENDING;
	}
	if (weft_countdown_done(f->cd))
		atomic_fetch_add(&f->p->trues, 1);
	return WEFT_READY;
}

static void test_sync_countdown_with_tasks(void **state)
{
	enum { WAITERS = 20, COUNTERS = 50 };
	weft_runtime_t *rt = rt_create(4);
	weft_join_t *w[WAITERS], *c[COUNTERS];
	weft_countdown_t cd;
	unsigned expect;
	struct probe p;

	(void)state;
	probe_init(&p);
	weft_countdown_init(&cd, COUNTERS);
	for (unsigned i = 0; i < WAITERS; i++) {
		struct cd_fut f = { .p = &p, .cd = &cd, .wait = true };

		w[i] = spawn_ok(rt, cd_poll, NULL, &f, sizeof(f), true);
	}
	/* Every waiter has registered before the count moves. */
	tcount_wait(&p.polled, WAITERS);
	for (unsigned i = 0; i < COUNTERS; i++) {
		struct cd_fut f = { .p = &p, .cd = &cd, .yields = i % 3 };

		c[i] = spawn_ok(rt, cd_poll, NULL, &f, sizeof(f), true);
	}
	for (unsigned i = 0; i < WAITERS; i++)
		assert_int_equal(join_wait_drop(w[i], NULL), 0);
	for (unsigned i = 0; i < COUNTERS; i++)
		assert_int_equal(join_wait_drop(c[i], NULL), 0);
	assert_int_equal(atomic_load(&p.trues), 1);
	assert_int_equal(weft_countdown_count(&cd), 0);
	/* Waiters: one pending poll each, one READY after the wake-up. */
	expect = 2 * WAITERS;
	for (unsigned i = 0; i < COUNTERS; i++)
		expect += 1 + i % 3;
	assert_int_equal(atomic_load(&p.polls), expect);
	weft_countdown_fini(&cd);
	weft_runtime_destroy(rt);
	probe_fini(&p);
}

static void test_sync_countdown_thread_wait(void **state)
{
	enum { COUNTERS = 64 };
	weft_runtime_t *rt = rt_create(2);
	unsigned rounds = scale_count(50);
	struct probe p;

	(void)state;
	probe_init(&p);
	for (unsigned r = 0; r < rounds; r++) {
		/* On the heap: a use after fini would be caught. */
		weft_countdown_t *cd = malloc(sizeof(*cd));

		assert_non_null(cd);
		weft_countdown_init(cd, COUNTERS);
		for (unsigned i = 0; i < COUNTERS; i++) {
			struct cd_fut f = { .p = &p,
					    .cd = cd,
					    .yields = i % 2 };

			spawn_ok(rt, cd_poll, NULL, &f, sizeof(f), false);
		}
		weft_countdown_wait(cd);
		assert_int_equal(weft_countdown_count(cd), 0);
		/*
		 * The latch is done with once the count is zero, as with a
		 * pthread barrier: nothing else here waits for the tasks.
		 */
		weft_countdown_fini(cd);
		free(cd);
	}
	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&p.trues), rounds);
	probe_fini(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sync_oneshot_send_after_wait),
		cmocka_unit_test(test_sync_oneshot_send_before_wait),
		cmocka_unit_test(test_sync_oneshot_across_tasks),
		cmocka_unit_test(test_sync_oneshot_sender_dropped),
		cmocka_unit_test(test_sync_oneshot_receiver_dropped),
		cmocka_unit_test(test_sync_oneshot_waker_replaced),
		cmocka_unit_test(test_sync_countdown_done_once),
		cmocka_unit_test(test_sync_countdown_with_tasks),
		cmocka_unit_test(test_sync_countdown_thread_wait),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
