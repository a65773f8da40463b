/* SPDX-License-Identifier: MIT */
/*
 * Every future's _fini (and every handle's drop) is safe on a zeroed
 * future and after READY, as each header says (issue 20): a task's drop
 * callback may call them all, whatever the task got to, with no flags.
 *
 * Each future is run through three cases, each a task whose drop callback
 * calls the _fini:
 *   (a) zeroed: the task ends before it inits the future (its state is
 *       all zeroes, as if calloc'd); also called on this thread with no
 *       runtime at all;
 *   (b) unpolled: inited, never polled;
 *   (c) ready: inited and polled to READY, where it can through a wait
 *       (queued, then served), so that the _fini sees a future that once
 *       held a waker.
 * Afterwards the test thread checks that the _fini released what it had
 * to and nothing the task owns (a lock acquired stays held), and that the
 * primitive still works.  ASan and valgrind see any leak or stale waiter.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_helpers.h"

#define SEM_PERMITS 3
#define CONTENTS "weft fini\n"

/* What every case shares: the runtime and the primitives the futures use. */
struct fixture {
	weft_runtime_t *rt;
	weft_semaphore_t sem;
	weft_async_mutex_t mutex;
	weft_notify_t notify;
	weft_mpsc_tx_t *tx;
	weft_mpsc_rx_t *rx;
	weft_listener_t *listener;
	char addr[64];
	char dir[64];
	char path[96];    /* CONTENTS, read and synced */
	char outpath[96]; /* written */
	int fd;           /* on path, for the syncs */
	atomic_uint bad;  /* checks that failed on a worker */
	atomic_uint finis;
};

/* On a worker: cmocka may not assert there; the test thread checks @bad. */
#define CHECK(fx, cond)                                                        \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: failed: %s\n", __FILE__,       \
				__LINE__, #cond);                              \
			atomic_fetch_add(&(fx)->bad, 1);                       \
		}                                                              \
	} while (0)

enum fini_case { CASE_ZEROED, CASE_UNPOLLED, CASE_READY };

/* One future of each kind, with what its polls need beside it. */
union fut {
	weft_sleep_t sleep;
	struct {
		weft_timeout_t to;
		weft_yield_t inner;
	} timeout;
	weft_interval_t interval;
	weft_semaphore_acquire_t acq;
	weft_async_mutex_lock_t lock;
	weft_notified_t notified;
	struct {
		weft_mpsc_send_t s;
		int elem;
	} send;
	struct {
		weft_mpsc_recv_t r;
		int out;
	} recv;
	weft_connect_t conn;
	weft_fs_read_file_t read;
	weft_fs_write_file_t write;
	weft_fs_sync_t sync;
	weft_blocking_t *blocking;
	weft_join_t *join;
	struct {
		weft_oneshot_tx_t *tx;
		weft_oneshot_rx_t *rx;
	} oneshot;
	struct {
		weft_branch_t br[2];
		weft_sleep_t sleep;
		weft_yield_t y;
	} branches;
};

struct run;

struct fut_ops {
	void (*init)(union fut *u, struct fixture *fx);
	/* Polls the inited future to READY (a WEFT_ASYNC state machine). */
	weft_poll_t (*drive)(struct run *r, weft_cx_t *cx);
	void (*fini)(union fut *u);
	/* On the test thread, after the task: what the case left behind. */
	void (*check)(struct fixture *fx, enum fini_case c);
};

/* A task's state. */
struct run {
	int weft_pc;
	const struct fut_ops *ops;
	struct fixture *fx;
	enum fini_case c;
	bool inited;
	int status;
	union fut u;
};

static weft_poll_t run_poll(void *arg, weft_cx_t *cx)
{
	struct run *r = arg;

	if (r->c == CASE_ZEROED)
		return WEFT_READY; /* ends before its init: all zeroes */
	if (!r->inited) {
		r->ops->init(&r->u, r->fx);
		r->inited = true;
		if (r->c == CASE_UNPOLLED)
			return WEFT_READY;
	}
	return r->ops->drive(r, cx);
}

/* The drop callback: the _fini, with no flag to say what was done. */
static void run_drop(void *arg)
{
	struct run *r = arg;

	r->ops->fini(&r->u);
	atomic_fetch_add(&r->fx->finis, 1);
}

static uint64_t timers_in_wheel(weft_runtime_t *rt)
{
	weft_runtime_metrics_t m;

	if (weft_runtime_metrics(rt, &m))
		return UINT64_MAX;
	return m.timers;
}

/* Runs the three cases of @ops, then checks each one's outcome. */
static void run_cases(struct fixture *fx, const struct fut_ops *ops)
{
	static const enum fini_case cases[] = { CASE_ZEROED, CASE_UNPOLLED,
						CASE_READY };
	union fut zero;

	/* (a) with no runtime current: a zeroed future needs none. */
	memset(&zero, 0, sizeof(zero));
	ops->fini(&zero);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned finis = atomic_load(&fx->finis);
		struct run r;
		weft_join_t *join;

		/* Every byte: the union's larger members too. */
		memset(&r, 0, sizeof(r));
		r.ops = ops;
		r.fx = fx;
		r.c = cases[i];
		join = spawn_ok(fx->rt, run_poll, run_drop, &r, sizeof(r),
				true);
		assert_int_equal(join_wait_drop(join, NULL), 0);
		/* The drop ran before the join saw the task complete. */
		assert_int_equal(atomic_load(&fx->finis), finis + 1);
		assert_int_equal(atomic_load(&fx->bad), 0);
		if (ops->check)
			ops->check(fx, cases[i]);
	}
}

/* Polls @poll once under weft_block_on(), on this thread. */
struct once {
	weft_poll_cb poll;
	void *state;
	weft_poll_t result;
};

static weft_poll_t once_poll(void *arg, weft_cx_t *cx)
{
	struct once *o = arg;

	o->result = o->poll(o->state, cx);
	return WEFT_READY;
}

static weft_poll_t poll_once(weft_runtime_t *rt, weft_poll_cb poll, void *state)
{
	struct once o = { .poll = poll, .state = state };

	assert_int_equal(weft_block_on(rt, once_poll, &o, NULL), 0);
	return o.result;
}

/* ---------------------------------------------------------------- sleep */

static void sleep_init(union fut *u, struct fixture *fx)
{
	(void)fx;
	weft_sleep_init(&u->sleep, WEFT_MSEC(1));
}

static weft_poll_t sleep_drive(struct run *r, weft_cx_t *cx)
{
	WEFT_ASYNC_BEGIN(r);
	WEFT_AWAIT(r, weft_sleep_poll(&r->u.sleep, cx));
	WEFT_ASYNC_END(r);
}

static void sleep_fini(union fut *u)
{
	weft_sleep_fini(&u->sleep);
}

/* Whatever the case, no timer is left in the wheel. */
static void timers_check(struct fixture *fx, enum fini_case c)
{
	(void)c;
	assert_int_equal(timers_in_wheel(fx->rt), 0);
}

static const struct fut_ops sleep_ops = {
	.init = sleep_init,
	.drive = sleep_drive,
	.fini = sleep_fini,
	.check = timers_check,
};

static void test_fini_sleep(void **state)
{
	run_cases(*state, &sleep_ops);
}

/* -------------------------------------------------------------- timeout */

static void timeout_init(union fut *u, struct fixture *fx)
{
	(void)fx;
	weft_timeout_init(&u->timeout.to, WEFT_SEC(10));
	u->timeout.inner = (weft_yield_t){ 0 };
}

static weft_poll_t yield_cb(void *state, weft_cx_t *cx)
{
	return weft_yield_poll(state, cx);
}

/*
 * The inner future (a yield) finishes at the second poll: READY with the
 * timer still armed in the wheel, for the _fini to take out.
 */
static weft_poll_t timeout_drive(struct run *r, weft_cx_t *cx)
{
	WEFT_ASYNC_BEGIN(r);
	WEFT_AWAIT(r, weft_timeout_poll_fn(&r->u.timeout.to, cx, yield_cb,
					   &r->u.timeout.inner, &r->status));
	CHECK(r->fx, r->status == 0);
	CHECK(r->fx, timers_in_wheel(r->fx->rt) == 1);
	WEFT_ASYNC_END(r);
}

static void timeout_fini(union fut *u)
{
	weft_timeout_fini(&u->timeout.to);
}

static const struct fut_ops timeout_ops = {
	.init = timeout_init,
	.drive = timeout_drive,
	.fini = timeout_fini,
	.check = timers_check,
};

static void test_fini_timeout(void **state)
{
	run_cases(*state, &timeout_ops);
}

/* ------------------------------------------------------------- interval */

static void interval_init(union fut *u, struct fixture *fx)
{
	(void)fx;
	weft_interval_init(&u->interval, WEFT_MSEC(1));
}

/* Two ticks: the first at once, the second through the wheel. */
static weft_poll_t interval_drive(struct run *r, weft_cx_t *cx)
{
	WEFT_ASYNC_BEGIN(r);
	WEFT_AWAIT(r, weft_interval_tick(&r->u.interval, cx, NULL));
	WEFT_AWAIT(r, weft_interval_tick(&r->u.interval, cx, NULL));
	WEFT_ASYNC_END(r);
}

static void interval_fini(union fut *u)
{
	weft_interval_fini(&u->interval);
}

static const struct fut_ops interval_ops = {
	.init = interval_init,
	.drive = interval_drive,
	.fini = interval_fini,
	.check = timers_check,
};

static void test_fini_interval(void **state)
{
	run_cases(*state, &interval_ops);
}

/* ------------------------------------------------------------ semaphore */

static void acquire_init(union fut *u, struct fixture *fx)
{
	weft_semaphore_acquire_init(&u->acq, &fx->sem, 1);
}

/* Queued behind permits held, then served by their release. */
static weft_poll_t acquire_drive(struct run *r, weft_cx_t *cx)
{
	struct fixture *fx = r->fx;

	WEFT_ASYNC_BEGIN(r);
	CHECK(fx, weft_semaphore_try_acquire(&fx->sem, SEM_PERMITS));
	CHECK(fx, weft_semaphore_acquire_poll(&r->u.acq, cx) == WEFT_PENDING);
	weft_semaphore_release(&fx->sem, SEM_PERMITS);
	WEFT_AWAIT(r, weft_semaphore_acquire_poll(&r->u.acq, cx));
	CHECK(fx, r->u.acq.status == 0);
	WEFT_ASYNC_END(r);
}

static void acquire_fini(union fut *u)
{
	weft_semaphore_acquire_fini(&u->acq);
}

/* After READY the task holds its permit: the _fini gave nothing back. */
static void acquire_check(struct fixture *fx, enum fini_case c)
{
	uint64_t held = c == CASE_READY ? 1 : 0;

	assert_int_equal(weft_semaphore_available(&fx->sem),
			 SEM_PERMITS - held);
	weft_semaphore_release(&fx->sem, (uint32_t)held);
}

static const struct fut_ops acquire_ops = {
	.init = acquire_init,
	.drive = acquire_drive,
	.fini = acquire_fini,
	.check = acquire_check,
};

static void test_fini_semaphore_acquire(void **state)
{
	run_cases(*state, &acquire_ops);
}

/* ---------------------------------------------------------------- mutex */

static void lock_init(union fut *u, struct fixture *fx)
{
	weft_async_mutex_lock_init(&u->lock, &fx->mutex);
}

/* Queued behind the holder, then handed the lock by its unlock. */
static weft_poll_t lock_drive(struct run *r, weft_cx_t *cx)
{
	struct fixture *fx = r->fx;

	WEFT_ASYNC_BEGIN(r);
	CHECK(fx, weft_async_mutex_try_lock(&fx->mutex));
	CHECK(fx, weft_async_mutex_lock_poll(&r->u.lock, cx) == WEFT_PENDING);
	weft_async_mutex_unlock(&fx->mutex);
	WEFT_AWAIT(r, weft_async_mutex_lock_poll(&r->u.lock, cx));
	WEFT_ASYNC_END(r);
}

static void lock_fini(union fut *u)
{
	weft_async_mutex_lock_fini(&u->lock);
}

/* After READY the lock stays held (the task's); else it is free. */
static void lock_check(struct fixture *fx, enum fini_case c)
{
	if (c == CASE_READY) {
		assert_false(weft_async_mutex_try_lock(&fx->mutex));
	} else {
		assert_true(weft_async_mutex_try_lock(&fx->mutex));
	}
	weft_async_mutex_unlock(&fx->mutex);
}

static const struct fut_ops lock_ops = {
	.init = lock_init,
	.drive = lock_drive,
	.fini = lock_fini,
	.check = lock_check,
};

static void test_fini_async_mutex_lock(void **state)
{
	run_cases(*state, &lock_ops);
}

/* --------------------------------------------------------------- notify */

static void notified_init(union fut *u, struct fixture *fx)
{
	weft_notified_init(&u->notified, &fx->notify);
}

/* Queued, then notified. */
static weft_poll_t notified_drive(struct run *r, weft_cx_t *cx)
{
	struct fixture *fx = r->fx;

	WEFT_ASYNC_BEGIN(r);
	CHECK(fx, weft_notified_poll(&r->u.notified, cx) == WEFT_PENDING);
	weft_notify_one(&fx->notify);
	WEFT_AWAIT(r, weft_notified_poll(&r->u.notified, cx));
	CHECK(fx, r->u.notified.status == 0);
	WEFT_ASYNC_END(r);
}

static void notified_fini(union fut *u)
{
	weft_notified_fini(&u->notified);
}

static weft_poll_t notified_cb(void *state, weft_cx_t *cx)
{
	return weft_notified_poll(state, cx);
}

/*
 * No waiter left queued and no permit stored: a notify_one() now stores
 * its permit, and a new notified future takes it at once.
 */
static void notified_check(struct fixture *fx, enum fini_case c)
{
	weft_notified_t nd;

	(void)c;
	weft_notified_init(&nd, &fx->notify);
	assert_int_equal(poll_once(fx->rt, notified_cb, &nd), WEFT_PENDING);
	weft_notified_fini(&nd);
	weft_notify_one(&fx->notify);
	weft_notified_init(&nd, &fx->notify);
	assert_int_equal(poll_once(fx->rt, notified_cb, &nd), WEFT_READY);
	weft_notified_fini(&nd);
}

static const struct fut_ops notified_ops = {
	.init = notified_init,
	.drive = notified_drive,
	.fini = notified_fini,
	.check = notified_check,
};

static void test_fini_notified(void **state)
{
	run_cases(*state, &notified_ops);
}

/* ----------------------------------------------------------------- mpsc */

static void send_init(union fut *u, struct fixture *fx)
{
	u->send.elem = 42;
	weft_mpsc_send_init(&u->send.s, fx->tx, &u->send.elem);
}

/* The channel (capacity 1) full: queued, then handed the room. */
static weft_poll_t send_drive(struct run *r, weft_cx_t *cx)
{
	struct fixture *fx = r->fx;
	int one = 1, got = 0;

	WEFT_ASYNC_BEGIN(r);
	CHECK(fx, weft_mpsc_try_send(fx->tx, &one) == 0);
	CHECK(fx, weft_mpsc_send_poll(&r->u.send.s, cx) == WEFT_PENDING);
	CHECK(fx, weft_mpsc_try_recv(fx->rx, &got) == 0 && got == 1);
	WEFT_AWAIT(r, weft_mpsc_send_poll(&r->u.send.s, cx));
	CHECK(fx, r->u.send.s.status == 0);
	WEFT_ASYNC_END(r);
}

static void send_fini(union fut *u)
{
	weft_mpsc_send_fini(&u->send.s);
}

/* What READY sent stays sent; nothing else is in the channel. */
static void send_check(struct fixture *fx, enum fini_case c)
{
	int got = 0;

	if (c == CASE_READY) {
		assert_int_equal(weft_mpsc_try_recv(fx->rx, &got), 0);
		assert_int_equal(got, 42);
	}
	assert_int_equal(weft_mpsc_try_recv(fx->rx, &got), -EAGAIN);
	/* The room is there: a send goes through at once. */
	assert_int_equal(weft_mpsc_try_send(fx->tx, &got), 0);
	assert_int_equal(weft_mpsc_try_recv(fx->rx, &got), 0);
}

static const struct fut_ops send_ops = {
	.init = send_init,
	.drive = send_drive,
	.fini = send_fini,
	.check = send_check,
};

static void test_fini_mpsc_send(void **state)
{
	run_cases(*state, &send_ops);
}

static void recv_init(union fut *u, struct fixture *fx)
{
	weft_mpsc_recv_init(&u->recv.r, fx->rx, &u->recv.out);
}

/* Waiting on the empty channel, then woken by a send. */
static weft_poll_t recv_drive(struct run *r, weft_cx_t *cx)
{
	struct fixture *fx = r->fx;
	int seven = 7;

	WEFT_ASYNC_BEGIN(r);
	CHECK(fx, weft_mpsc_recv_poll(&r->u.recv.r, cx) == WEFT_PENDING);
	CHECK(fx, weft_mpsc_try_send(fx->tx, &seven) == 0);
	WEFT_AWAIT(r, weft_mpsc_recv_poll(&r->u.recv.r, cx));
	CHECK(fx, r->u.recv.r.status == 0 && r->u.recv.out == 7);
	WEFT_ASYNC_END(r);
}

static void recv_fini(union fut *u)
{
	weft_mpsc_recv_fini(&u->recv.r);
}

static weft_poll_t recv_cb(void *state, weft_cx_t *cx)
{
	return weft_mpsc_recv_poll(state, cx);
}

/* Nothing taken but what READY took; a new receive waits, then gets one. */
static void recv_check(struct fixture *fx, enum fini_case c)
{
	weft_mpsc_recv_t r;
	int got = 0, eight = 8;

	(void)c;
	assert_int_equal(weft_mpsc_try_recv(fx->rx, &got), -EAGAIN);
	weft_mpsc_recv_init(&r, fx->rx, &got);
	assert_int_equal(poll_once(fx->rt, recv_cb, &r), WEFT_PENDING);
	assert_int_equal(weft_mpsc_try_send(fx->tx, &eight), 0);
	assert_int_equal(poll_once(fx->rt, recv_cb, &r), WEFT_READY);
	assert_int_equal(got, 8);
	weft_mpsc_recv_fini(&r);
}

static const struct fut_ops recv_ops = {
	.init = recv_init,
	.drive = recv_drive,
	.fini = recv_fini,
	.check = recv_check,
};

static void test_fini_mpsc_recv(void **state)
{
	run_cases(*state, &recv_ops);
}

/* -------------------------------------------------------------- connect */

static void connect_init(union fut *u, struct fixture *fx)
{
	CHECK(fx, weft_tcp_connect_init(&u->conn, fx->addr) == 0);
}

static weft_poll_t connect_drive(struct run *r, weft_cx_t *cx)
{
	weft_stream_t *s = NULL;
	weft_poll_t p;

	p = weft_connect_poll(&r->u.conn, cx, &s, &r->status);
	if (p == WEFT_READY) {
		CHECK(r->fx, r->status == 0 && s);
		weft_stream_close(s);
	}
	return p;
}

static void connect_fini(union fut *u)
{
	weft_connect_fini(&u->conn);
}

struct accept_st {
	weft_listener_t *l;
	weft_stream_t *s;
	int status;
};

static weft_poll_t accept_poll(void *arg, weft_cx_t *cx)
{
	struct accept_st *a = arg;

	return weft_listener_accept(a->l, cx, &a->s, &a->status);
}

/* (b) and (c) connected (and closed): their peers are there to accept. */
static void connect_check(struct fixture *fx, enum fini_case c)
{
	struct accept_st a = { .l = fx->listener };

	if (c == CASE_ZEROED)
		return;
	assert_int_equal(weft_block_on(fx->rt, accept_poll, &a, NULL), 0);
	assert_int_equal(a.status, 0);
	weft_stream_close(a.s);
}

static const struct fut_ops connect_ops = {
	.init = connect_init,
	.drive = connect_drive,
	.fini = connect_fini,
	.check = connect_check,
};

static void test_fini_connect(void **state)
{
	run_cases(*state, &connect_ops);
}

/* ------------------------------------------------------------------- fs */

static void read_init(union fut *u, struct fixture *fx)
{
	CHECK(fx, weft_fs_read_file_init(&u->read, fx->path) == 0);
}

static weft_poll_t read_drive(struct run *r, weft_cx_t *cx)
{
	void *data = NULL;
	size_t len = 0;

	if (weft_fs_read_file_poll(&r->u.read, cx, &r->status, &data, &len) ==
	    WEFT_PENDING)
		return WEFT_PENDING;
	CHECK(r->fx, r->status == 0 && len == strlen(CONTENTS) &&
			     memcmp(data, CONTENTS, len) == 0);
	free(data);
	return WEFT_READY;
}

static void read_fini(union fut *u)
{
	weft_fs_read_file_fini(&u->read);
}

static const struct fut_ops read_ops = {
	.init = read_init,
	.drive = read_drive,
	.fini = read_fini,
};

static void test_fini_fs_read_file(void **state)
{
	run_cases(*state, &read_ops);
}

static void write_init(union fut *u, struct fixture *fx)
{
	CHECK(fx, weft_fs_write_file_init(&u->write, fx->outpath, CONTENTS,
					  strlen(CONTENTS)) == 0);
}

static weft_poll_t write_drive(struct run *r, weft_cx_t *cx)
{
	if (weft_fs_write_file_poll(&r->u.write, cx, &r->status) ==
	    WEFT_PENDING)
		return WEFT_PENDING;
	CHECK(r->fx, r->status == 0);
	return WEFT_READY;
}

static void write_fini(union fut *u)
{
	weft_fs_write_file_fini(&u->write);
}

/* READY wrote the whole file (the _fini of (b) wrote nothing yet). */
static void write_check(struct fixture *fx, enum fini_case c)
{
	char buf[64];
	ssize_t n;
	int fd;

	if (c != CASE_READY)
		return;
	fd = open(fx->outpath, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf));
	close(fd);
	assert_int_equal(n, (ssize_t)strlen(CONTENTS));
	assert_memory_equal(buf, CONTENTS, strlen(CONTENTS));
}

static const struct fut_ops write_ops = {
	.init = write_init,
	.drive = write_drive,
	.fini = write_fini,
	.check = write_check,
};

static void test_fini_fs_write_file(void **state)
{
	run_cases(*state, &write_ops);
}

static void sync_init(union fut *u, struct fixture *fx)
{
	CHECK(fx, weft_fs_fsync_init(&u->sync, fx->fd) == 0);
}

static weft_poll_t sync_drive(struct run *r, weft_cx_t *cx)
{
	if (weft_fs_sync_poll(&r->u.sync, cx, &r->status) == WEFT_PENDING)
		return WEFT_PENDING;
	CHECK(r->fx, r->status == 0);
	return WEFT_READY;
}

static void sync_fini(union fut *u)
{
	weft_fs_sync_fini(&u->sync);
}

static const struct fut_ops sync_ops = {
	.init = sync_init,
	.drive = sync_drive,
	.fini = sync_fini,
};

static void test_fini_fs_sync(void **state)
{
	run_cases(*state, &sync_ops);
}

/* ------------------------------------------------------------- blocking */

static void *echo_job(void *arg)
{
	return arg;
}

static void blocking_init(union fut *u, struct fixture *fx)
{
	CHECK(fx, weft_spawn_blocking(NULL, echo_job, fx, &u->blocking) == 0);
}

static weft_poll_t blocking_drive(struct run *r, weft_cx_t *cx)
{
	void *result = NULL;

	if (weft_blocking_poll(r->u.blocking, cx, &result) == WEFT_PENDING)
		return WEFT_PENDING;
	CHECK(r->fx, result == r->fx);
	return WEFT_READY;
}

static void blocking_fini(union fut *u)
{
	weft_blocking_drop(u->blocking);
}

static const struct fut_ops blocking_ops = {
	.init = blocking_init,
	.drive = blocking_drive,
	.fini = blocking_fini,
};

static void test_fini_blocking(void **state)
{
	run_cases(*state, &blocking_ops);
}

/* ----------------------------------------------------------------- join */

static weft_poll_t child_poll(void *arg, weft_cx_t *cx)
{
	weft_cx_return(cx, *(void **)arg);
	return WEFT_READY;
}

static void join_init(union fut *u, struct fixture *fx)
{
	void *out = fx;

	CHECK(fx, weft_spawn(NULL, child_poll, &out, &u->join) == 0);
}

static weft_poll_t join_drive(struct run *r, weft_cx_t *cx)
{
	void *out = NULL;

	if (weft_join_poll(r->u.join, cx, &r->status, &out) == WEFT_PENDING)
		return WEFT_PENDING;
	CHECK(r->fx, r->status == 0 && out == r->fx);
	return WEFT_READY;
}

static void join_fini(union fut *u)
{
	weft_join_drop(u->join);
}

static const struct fut_ops join_ops = {
	.init = join_init,
	.drive = join_drive,
	.fini = join_fini,
};

static void test_fini_join(void **state)
{
	run_cases(*state, &join_ops);
}

/* -------------------------------------------------------------- oneshot */

static void oneshot_init(union fut *u, struct fixture *fx)
{
	CHECK(fx, weft_oneshot_create(&u->oneshot.tx, &u->oneshot.rx) == 0);
}

/* Waiting, then sent to (which releases the sender). */
static weft_poll_t oneshot_drive(struct run *r, weft_cx_t *cx)
{
	struct fixture *fx = r->fx;
	void *value = NULL;

	WEFT_ASYNC_BEGIN(r);
	CHECK(fx, weft_oneshot_poll(r->u.oneshot.rx, cx, &r->status, &value) ==
			  WEFT_PENDING);
	CHECK(fx, weft_oneshot_send(r->u.oneshot.tx, fx) == 0);
	r->u.oneshot.tx = NULL;
	WEFT_AWAIT(r,
		   weft_oneshot_poll(r->u.oneshot.rx, cx, &r->status, &value));
	CHECK(fx, r->status == 0 && value == fx);
	WEFT_ASYNC_END(r);
}

/* Both halves, whichever are still held: NULL ones are ignored. */
static void oneshot_fini(union fut *u)
{
	weft_oneshot_tx_drop(u->oneshot.tx);
	weft_oneshot_rx_drop(u->oneshot.rx);
}

static const struct fut_ops oneshot_ops = {
	.init = oneshot_init,
	.drive = oneshot_drive,
	.fini = oneshot_fini,
};

static void test_fini_oneshot(void **state)
{
	run_cases(*state, &oneshot_ops);
}

/* ------------------------------------------------------------- branches */

static weft_poll_t sleep_cb(void *state, weft_cx_t *cx)
{
	return weft_sleep_poll(state, cx);
}

static void sleep_drop_cb(void *state)
{
	weft_sleep_fini(state);
}

/* A join of a sleep and a yield; the sleep's _fini is its branch's drop. */
static void branches_init(union fut *u, struct fixture *fx)
{
	(void)fx;
	weft_sleep_init(&u->branches.sleep, WEFT_MSEC(1));
	u->branches.y = (weft_yield_t){ 0 };
	u->branches.br[0] = (weft_branch_t){ .poll = sleep_cb,
					     .state = &u->branches.sleep,
					     .drop = sleep_drop_cb };
	u->branches.br[1] =
		(weft_branch_t){ .poll = yield_cb, .state = &u->branches.y };
}

static weft_poll_t branches_drive(struct run *r, weft_cx_t *cx)
{
	return weft_join_branches_poll(r->u.branches.br, 2, cx);
}

static void branches_fini(union fut *u)
{
	weft_branches_drop(u->branches.br, 2);
}

static const struct fut_ops branches_ops = {
	.init = branches_init,
	.drive = branches_drive,
	.fini = branches_fini,
	.check = timers_check,
};

static void test_fini_branches(void **state)
{
	run_cases(*state, &branches_ops);
}

/* -------------------------------------------------------------- fixture */

static weft_poll_t listen_poll(void *arg, weft_cx_t *cx)
{
	struct fixture *fx = arg;
	uint16_t port = 0;

	(void)cx;
	assert_int_equal(weft_tcp_listen("127.0.0.1:0", 0, &fx->listener), 0);
	assert_int_equal(weft_listener_local_port(fx->listener, &port), 0);
	snprintf(fx->addr, sizeof(fx->addr), "127.0.0.1:%u", port);
	return WEFT_READY;
}

static int fixture_setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	int fd;

	assert_non_null(fx);
	fx->rt = rt_create(2);
	assert_int_equal(weft_semaphore_init(&fx->sem, SEM_PERMITS), 0);
	weft_async_mutex_init(&fx->mutex);
	weft_notify_init(&fx->notify);
	assert_int_equal(
		weft_mpsc_create(1, sizeof(int), NULL, &fx->tx, &fx->rx), 0);
	/* Sockets bind to the runtime current when they are made. */
	assert_int_equal(weft_block_on(fx->rt, listen_poll, fx, NULL), 0);

	strcpy(fx->dir, "/tmp/weft-fini-XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->path, sizeof(fx->path), "%s/in", fx->dir);
	snprintf(fx->outpath, sizeof(fx->outpath), "%s/out", fx->dir);
	fd = open(fx->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, CONTENTS, strlen(CONTENTS)),
			 (ssize_t)strlen(CONTENTS));
	close(fd);
	fx->fd = open(fx->path, O_RDWR | O_CLOEXEC);
	assert_true(fx->fd >= 0);
	*state = fx;
	return 0;
}

static int fixture_teardown(void **state)
{
	struct fixture *fx = *state;

	weft_listener_close(fx->listener);
	weft_mpsc_tx_drop(fx->tx);
	weft_mpsc_rx_drop(fx->rx);
	weft_notify_fini(&fx->notify);
	weft_async_mutex_fini(&fx->mutex);
	weft_semaphore_fini(&fx->sem);
	weft_runtime_destroy(fx->rt);
	close(fx->fd);
	unlink(fx->path);
	unlink(fx->outpath);
	rmdir(fx->dir);
	free(fx);
	return 0;
}

/*
 * An _init that fails leaves its future zeroed, so the _fini a drop
 * callback calls anyway is safe: each future filled with garbage first
 * (weft_fs_write_file_init() once returned -EINVAL over it untouched).
 */
static void test_fini_after_failed_init(void **state)
{
	weft_fs_read_file_t rd;
	weft_fs_write_file_t wr;
	weft_fs_sync_t sy;

	(void)state;
	memset(&rd, 0xa5, sizeof(rd));
	assert_int_equal(weft_fs_read_file_init(&rd, ""), -EINVAL);
	weft_fs_read_file_fini(&rd);
	memset(&wr, 0xa5, sizeof(wr));
	assert_int_equal(weft_fs_write_file_init(&wr, NULL, "x", 1), -EINVAL);
	weft_fs_write_file_fini(&wr);
	memset(&wr, 0xa5, sizeof(wr));
	assert_int_equal(weft_fs_write_file_init(&wr, "/tmp/x", NULL, 1),
			 -EINVAL);
	weft_fs_write_file_fini(&wr);
	memset(&sy, 0xa5, sizeof(sy));
	assert_int_equal(weft_fs_fsync_init(&sy, -1), -EBADF);
	weft_fs_sync_fini(&sy);
}

#define FINI_TEST(fn)                                                          \
	cmocka_unit_test_setup_teardown(fn, fixture_setup, fixture_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		FINI_TEST(test_fini_sleep),
		FINI_TEST(test_fini_timeout),
		FINI_TEST(test_fini_interval),
		FINI_TEST(test_fini_semaphore_acquire),
		FINI_TEST(test_fini_async_mutex_lock),
		FINI_TEST(test_fini_notified),
		FINI_TEST(test_fini_mpsc_send),
		FINI_TEST(test_fini_mpsc_recv),
		FINI_TEST(test_fini_connect),
		FINI_TEST(test_fini_fs_read_file),
		FINI_TEST(test_fini_fs_write_file),
		FINI_TEST(test_fini_fs_sync),
		FINI_TEST(test_fini_blocking),
		FINI_TEST(test_fini_join),
		FINI_TEST(test_fini_oneshot),
		FINI_TEST(test_fini_branches),
		cmocka_unit_test(test_fini_after_failed_init),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
