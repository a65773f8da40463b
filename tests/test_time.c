/* SPDX-License-Identifier: MIT */
/*
 * Sleeps, timeouts and intervals (time.c over the driver's timer wheel),
 * through the public API only.
 *
 * The one hard rule is checked everywhere: no timer ever fires early
 * (weft_now_ns() at wake-up >= the deadline).  Lateness is measured and
 * printed, never asserted beyond a sanity bound of one second (scaled for
 * sanitizer builds): the tests must pass on a loaded machine.  Exact
 * assertions are kept to what does not depend on speed: wake-up order for
 * deadlines in distinct ticks on one worker, the number of polls a
 * cancelled sleep causes, the timer count in the metrics.
 */
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "test_helpers.h"

/* Lateness above this is a bug, not a slow machine. */
static uint64_t sanity_ns(void)
{
	return WEFT_SEC(1) * slowdown();
}

static weft_runtime_t *rt_create_cfg(unsigned workers, bool disable_lifo)
{
	weft_config_t cfg = { .workers = workers,
			      .disable_lifo = disable_lifo };
	weft_runtime_t *rt = NULL;

	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	return rt;
}

static uint64_t timers_in_wheel(weft_runtime_t *rt)
{
	weft_runtime_metrics_t m;

	assert_int_equal(weft_runtime_metrics(rt, &m), 0);
	return m.timers;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Prints lateness percentiles; asserts none early and the sanity bound. */
static void check_lateness(const char *what, int64_t *late, size_t n)
{
	qsort(late, n, sizeof(*late), cmp_i64);
	print_message("%s: %zu timers, lateness us: min %.1f p50 %.1f "
		      "p99 %.1f max %.1f\n",
		      what, n, late[0] / 1e3, late[n / 2] / 1e3,
		      late[n * 99 / 100] / 1e3, late[n - 1] / 1e3);
	/* Never early. */
	assert_true(late[0] >= 0);
	assert_true((uint64_t)late[n - 1] < sanity_ns());
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* --------------------------------------------------------------- sleeper */

/*
 * Sleeps until an absolute deadline, then records the lateness and the
 * order it woke in.  The drop callback cancels the sleep (the task may be
 * aborted or cancelled at shutdown while it waits).
 */
struct wake_log {
	int64_t *late;
	uint32_t *order;
	_Atomic uint32_t seq;
};

struct sleeper {
	int weft_pc;
	struct wake_log *log;
	size_t idx;
	uint64_t deadline; /* absolute; 0: now + duration at first poll */
	uint64_t duration;
	weft_sleep_t sleep;
};

static weft_poll_t sleeper_poll(void *arg, weft_cx_t *cx)
{
	struct sleeper *st = arg;
	uint64_t now;

	WEFT_ASYNC_BEGIN(st);
	if (!st->deadline)
		st->deadline = weft_now_ns() + st->duration;
	weft_sleep_init_until(&st->sleep, st->deadline);
	WEFT_AWAIT(st, weft_sleep_poll(&st->sleep, cx));
	now = weft_now_ns();
	st->log->late[st->idx] = (int64_t)(now - st->deadline);
	if (st->log->order)
		st->log->order[st->idx] = atomic_fetch_add(&st->log->seq, 1);
	weft_sleep_fini(&st->sleep);
	WEFT_ASYNC_END(st);
}

static void sleeper_drop(void *arg)
{
	struct sleeper *st = arg;

	/* A no-op unless the sleep is still in the wheel. */
	if (st->weft_pc > 0)
		weft_sleep_fini(&st->sleep);
}

static weft_join_t *spawn_sleeper(weft_runtime_t *rt, struct sleeper *st)
{
	return spawn_ok(rt, sleeper_poll, sleeper_drop, st, sizeof(*st), true);
}

/* Awaits every handle in order from a plain thread (block_on). */
struct join_all_st {
	weft_join_t **joins;
	size_t n;
	size_t cursor;
};

static weft_poll_t join_all_poll(void *arg, weft_cx_t *cx)
{
	struct join_all_st *st = arg;

	return weft_join_all(st->joins, st->n, NULL, &st->cursor, cx);
}

static void join_all(weft_runtime_t *rt, weft_join_t **joins, size_t n)
{
	struct join_all_st st = { .joins = joins, .n = n };

	assert_int_equal(weft_block_on(rt, join_all_poll, &st, NULL), 0);
}

/* splitmix64, as the benchmarks draw their durations. */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* ----------------------------------------------------------------- tests */

/*
 * Deadlines in distinct ticks, spawned in shuffled order, on one worker
 * with no LIFO slot (woken tasks run in the order they were woken): they
 * wake in deadline order, none early.
 */
#define ORDER_N 40

static void test_time_sleep_order_and_accuracy(void **state)
{
	weft_runtime_t *rt = rt_create_cfg(1, true);
	int64_t late[ORDER_N];
	uint32_t order[ORDER_N];
	struct wake_log log = { .late = late, .order = order };
	weft_join_t *joins[ORDER_N];
	size_t perm[ORDER_N];
	uint64_t base, x = 42;

	(void)state;
	for (size_t i = 0; i < ORDER_N; i++)
		perm[i] = i;
	for (size_t i = ORDER_N - 1; i > 0; i--) {
		size_t j = splitmix64(&x) % (i + 1), t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	/* Far enough ahead that every task has filed its sleep by then. */
	base = weft_now_ns() + WEFT_MSEC(50) * slowdown();
	for (size_t k = 0; k < ORDER_N; k++) {
		size_t i = perm[k];
		/* 3 ms apart: never in the same 1 ms tick. */
		struct sleeper st = { .log = &log,
				      .idx = i,
				      .deadline = base + i * WEFT_MSEC(3) };

		joins[k] = spawn_sleeper(rt, &st);
	}
	join_all(rt, joins, ORDER_N);
	for (size_t i = 0; i < ORDER_N; i++)
		assert_int_equal(order[i], i);
	check_lateness("ordered", late, ORDER_N);
	assert_int_equal(timers_in_wheel(rt), 0);
	weft_runtime_destroy(rt);
}

/* A deadline already past is READY at the first poll, no timer filed. */
struct past {
	weft_sleep_t s;
	weft_runtime_t *rt;
	uint64_t timers;
	int polls;
};

static weft_poll_t past_poll(void *arg, weft_cx_t *cx)
{
	struct past *st = arg;
	weft_poll_t r;

	st->polls++;
	r = weft_sleep_poll(&st->s, cx);
	st->timers = timers_in_wheel(st->rt);
	return r;
}

static void test_time_sleep_past_deadline(void **state)
{
	weft_runtime_t *rt = rt_create(1);
	struct past st = { .rt = rt };

	(void)state;
	weft_sleep_init_until(&st.s, weft_now_ns() - WEFT_MSEC(5));
	assert_int_equal(weft_block_on(rt, past_poll, &st, NULL), 0);
	assert_int_equal(st.polls, 1);
	assert_int_equal(st.timers, 0);
	weft_sleep_fini(&st.s);

	weft_sleep_init(&st.s, 0);
	st.polls = 0;
	assert_int_equal(weft_block_on(rt, past_poll, &st, NULL), 0);
	assert_int_equal(st.polls, 1);
	weft_sleep_fini(&st.s);
	weft_runtime_destroy(rt);
}

/*
 * Cancellation from a plain thread: a sleep dropped before its deadline
 * leaves the wheel at once and never wakes the caller.  The future polls
 * exactly twice: once to arm both sleeps, once when the second fires.
 */
struct cancel_st {
	weft_runtime_t *rt;
	weft_sleep_t a;
	weft_sleep_t b;
	int polls;
	uint64_t timers_after_fini;
	uint64_t woke;
};

static weft_poll_t cancel_poll(void *arg, weft_cx_t *cx)
{
	struct cancel_st *st = arg;

	if (st->polls++ == 0) {
		weft_sleep_init(&st->a, WEFT_MSEC(20));
		if (weft_sleep_poll(&st->a, cx) != WEFT_PENDING)
			return WEFT_READY; /* polls == 1 fails the test */
		weft_sleep_fini(&st->a);
		st->timers_after_fini = timers_in_wheel(st->rt);
		weft_sleep_init(&st->b, WEFT_MSEC(120));
	}
	if (weft_sleep_poll(&st->b, cx) == WEFT_PENDING)
		return WEFT_PENDING;
	st->woke = weft_now_ns();
	return WEFT_READY;
}

static void test_time_cancel_before_expiry(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct cancel_st st = { .rt = rt };

	(void)state;
	assert_int_equal(weft_block_on(rt, cancel_poll, &st, NULL), 0);
	assert_int_equal(st.timers_after_fini, 0);
	assert_int_equal(st.polls, 2);
	assert_true(st.woke >= weft_sleep_deadline(&st.b));
	weft_sleep_fini(&st.b);
	assert_int_equal(timers_in_wheel(rt), 0);
	weft_runtime_destroy(rt);
}

/*
 * Cancellation by aborting the task: its drop callback cancels a 60 s
 * sleep, the timer leaves the wheel, the task's memory goes (ASan), and
 * destroy does not wait for the deadline.
 */
static void test_time_cancel_by_abort(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	int64_t late[2] = { -1, -1 };
	struct wake_log log = { .late = late };
	struct sleeper st = { .log = &log, .duration = WEFT_SEC(60) };
	weft_join_t *j, *j2;
	uint64_t t0;

	(void)state;
	j = spawn_sleeper(rt, &st);
	/* A second one left sleeping for destroy to cancel. */
	st.idx = 1;
	j2 = spawn_sleeper(rt, &st);
	t0 = weft_now_ns();
	while (timers_in_wheel(rt) < 2) {
		assert_true(weft_now_ns() - t0 < WEFT_SEC(10) * slowdown());
		sleep_ms(1);
	}
	weft_join_abort(j);
	assert_int_equal(join_wait_drop(j, NULL), -ECANCELED);
	assert_int_equal(timers_in_wheel(rt), 1);
	assert_int_equal(late[0], -1); /* never woke */
	weft_join_drop(j2);
	weft_runtime_destroy(rt);
	assert_int_equal(late[1], -1);
}

/* Timeouts: an inner future that never finishes, one ready at once, and
 * one that finishes before the limit. */
static weft_poll_t never_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	return WEFT_PENDING;
}

static weft_poll_t now_poll(void *arg, weft_cx_t *cx)
{
	(void)cx;
	(*(int *)arg)++;
	return WEFT_READY;
}

static weft_poll_t sleep_inner_poll(void *arg, weft_cx_t *cx)
{
	return weft_sleep_poll(arg, cx);
}

struct timeout_st {
	weft_timeout_t to;
	weft_poll_cb inner;
	void *inner_state;
	int status;
	uint64_t start;
	uint64_t end;
};

static weft_poll_t timeout_poll(void *arg, weft_cx_t *cx)
{
	struct timeout_st *st = arg;

	if (weft_timeout_poll_fn(&st->to, cx, st->inner, st->inner_state,
				 &st->status) == WEFT_PENDING)
		return WEFT_PENDING;
	st->end = weft_now_ns();
	return WEFT_READY;
}

static void test_time_timeout(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct timeout_st st;
	weft_sleep_t inner_sleep;
	int count = 0;

	(void)state;
	/* Never ready: -ETIMEDOUT, not before the limit. */
	memset(&st, 0, sizeof(st));
	st.inner = never_poll;
	st.start = weft_now_ns();
	weft_timeout_init(&st.to, WEFT_MSEC(30));
	st.status = 1;
	assert_int_equal(weft_block_on(rt, timeout_poll, &st, NULL), 0);
	assert_int_equal(st.status, -ETIMEDOUT);
	assert_true(st.end - st.start >= WEFT_MSEC(30));
	weft_timeout_fini(&st.to);

	/* Ready at once: 0, the timer never filed. */
	memset(&st, 0, sizeof(st));
	st.inner = now_poll;
	st.inner_state = &count;
	weft_timeout_init(&st.to, WEFT_SEC(10));
	st.status = 1;
	assert_int_equal(weft_block_on(rt, timeout_poll, &st, NULL), 0);
	assert_int_equal(st.status, 0);
	assert_int_equal(count, 1);
	weft_timeout_fini(&st.to);

	/* Ready before the limit: 0, and fini leaves no timer behind. */
	memset(&st, 0, sizeof(st));
	weft_sleep_init(&inner_sleep, WEFT_MSEC(20));
	st.inner = sleep_inner_poll;
	st.inner_state = &inner_sleep;
	weft_timeout_init(&st.to, WEFT_SEC(10));
	st.status = 1;
	assert_int_equal(weft_block_on(rt, timeout_poll, &st, NULL), 0);
	assert_int_equal(st.status, 0);
	assert_true(st.end >= weft_sleep_deadline(&inner_sleep));
	assert_int_equal(timers_in_wheel(rt), 1); /* the timeout's */
	weft_timeout_fini(&st.to);
	weft_sleep_fini(&inner_sleep);
	assert_int_equal(timers_in_wheel(rt), 0);
	weft_runtime_destroy(rt);
}

/*
 * An interval of 10 ms for about 100 ms: the first tick at once, then
 * scheduled times strictly increasing on the period grid, none early.
 */
#define IV_PERIOD WEFT_MSEC(10)
#define IV_SPAN WEFT_MSEC(100)

struct interval_st {
	int weft_pc;
	weft_interval_t iv;
	uint64_t start;
	uint64_t at[64];
	uint64_t woke[64];
	unsigned n;
	uint64_t tick;
};

static weft_poll_t interval_poll(void *arg, weft_cx_t *cx)
{
	struct interval_st *st = arg;

	WEFT_ASYNC_BEGIN(st);
	weft_interval_init(&st->iv, IV_PERIOD);
	st->start = weft_now_ns();
	for (;;) {
		WEFT_AWAIT(st, weft_interval_tick(&st->iv, cx, &st->tick));
		st->woke[st->n] = weft_now_ns();
		st->at[st->n++] = st->tick;
		if (st->tick - st->at[0] >= IV_SPAN || st->n == 64)
			break;
	}
	weft_interval_fini(&st->iv);
	WEFT_ASYNC_END(st);
}

static void test_time_interval_ticks(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct interval_st *st = calloc(1, sizeof(*st));

	(void)state;
	assert_non_null(st);
	assert_int_equal(weft_block_on(rt, interval_poll, st, NULL), 0);
	print_message("interval: %u ticks of 10 ms over %.1f ms\n", st->n,
		      (st->woke[st->n - 1] - st->start) / 1e6);
	assert_true(st->n >= 2);
	/* Ticks at 0, 10, ..., 100 ms: eleven at most (missed ones skip). */
	assert_true(st->n <= IV_SPAN / IV_PERIOD + 1);
	/* The first tick is at once: scheduled no later than init. */
	assert_true(st->at[0] <= st->start);
	for (unsigned i = 0; i < st->n; i++) {
		assert_true(st->woke[i] >= st->at[i]);
		if (i) {
			assert_true(st->at[i] > st->at[i - 1]);
			assert_int_equal((st->at[i] - st->at[0]) % IV_PERIOD,
					 0);
		}
	}
	assert_int_equal(timers_in_wheel(rt), 0);
	weft_runtime_destroy(rt);
	free(st);
}

/*
 * The missed-tick policies on a real runtime.  A task takes its first
 * tick, then blocks its worker for two and a half periods (nanosleep),
 * so that the ticks at P and 2P fall due while it cannot poll; then it
 * takes IV_MISS_TICKS more.  Each tick records its scheduled time, when
 * it was returned, and in which of the task's polls: ticks returned in
 * the first poll were returned without waiting.  What depends on speed
 * is read off the times the task saw (block_end, woke[]), never assumed,
 * so a slow machine changes how many ticks were missed, not the verdict.
 */
#define IV_MISS_PERIOD WEFT_MSEC(20)
#define IV_MISS_TICKS 7
#define IV_DEFAULT (-1) /* leave the policy as init set it */

struct iv_log {
	int missed;     /* a weft_missed_tick_t, or IV_DEFAULT */
	uint64_t start; /* 0: weft_interval_init(), else init_at(start) */
	bool block;
	int set_err;
	uint64_t init;
	uint64_t block_end;
	unsigned polls;
	unsigned n;
	uint64_t at[IV_MISS_TICKS];
	uint64_t woke[IV_MISS_TICKS];
	unsigned poll_of[IV_MISS_TICKS];
};

struct iv_task {
	int weft_pc;
	struct iv_log *log;
	weft_interval_t iv;
	uint64_t tick;
};

static weft_poll_t iv_task_poll(void *arg, weft_cx_t *cx)
{
	struct iv_task *st = arg;
	struct iv_log *log = st->log;

	log->polls++;
	WEFT_ASYNC_BEGIN(st);
	log->init = weft_now_ns();
	if (log->start)
		weft_interval_init_at(&st->iv, log->start, IV_MISS_PERIOD);
	else
		weft_interval_init(&st->iv, IV_MISS_PERIOD);
	if (log->missed != IV_DEFAULT)
		log->set_err = weft_interval_set_missed(
			&st->iv, (weft_missed_tick_t)log->missed);
	while (log->n < IV_MISS_TICKS) {
		WEFT_AWAIT(st, weft_interval_tick(&st->iv, cx, &st->tick));
		log->woke[log->n] = weft_now_ns();
		log->at[log->n] = st->tick;
		log->poll_of[log->n++] = log->polls;
		if (log->n == 1 && log->block) {
			/* Block the worker past 2.5 periods from tick 0. */
			while (weft_now_ns() <
			       log->at[0] + IV_MISS_PERIOD * 5 / 2)
				sleep_ms(5);
			log->block_end = weft_now_ns();
		}
	}
	weft_interval_fini(&st->iv);
	WEFT_ASYNC_END(st);
}

static void iv_task_drop(void *arg)
{
	struct iv_task *st = arg;

	if (st->weft_pc > 0)
		weft_interval_fini(&st->iv);
}

static void iv_run(weft_runtime_t *rt, struct iv_log *log)
{
	struct iv_task st = { .log = log };
	weft_join_t *j =
		spawn_ok(rt, iv_task_poll, iv_task_drop, &st, sizeof(st), true);

	assert_int_equal(join_wait_drop(j, NULL), 0);
	assert_int_equal(log->set_err, 0);
	assert_int_equal(log->n, IV_MISS_TICKS);
	for (unsigned i = 0; i < log->n; i++) {
		/* Never early, always in order. */
		assert_true(log->woke[i] >= log->at[i]);
		assert_true(log->woke[i] - log->at[i] < sanity_ns() * 4);
		if (i)
			assert_true(log->at[i] > log->at[i - 1]);
	}
}

/* How many ticks were scheduled no later than @t. */
static unsigned iv_due_by(const struct iv_log *log, uint64_t t)
{
	unsigned k = 0;

	for (unsigned i = 0; i < log->n; i++)
		k += log->at[i] <= t;
	return k;
}

static void iv_print(const char *what, const struct iv_log *log)
{
	print_message("%s: block ended at %.1f ms; ticks (at/returned, "
		      "poll):",
		      what,
		      log->block ? (log->block_end - log->at[0]) / 1e6 : 0.0);
	for (unsigned i = 0; i < log->n; i++)
		print_message(" %.1f/%.1f (%u)",
			      (log->at[i] - log->at[0]) / 1e6,
			      (log->woke[i] - log->at[0]) / 1e6,
			      log->poll_of[i]);
	print_message("\n");
}

/*
 * BURST: every grid time is returned, the missed ones at once in the
 * poll that blocked (ticks 0, P and 2P at least), the grid kept.
 */
static void test_time_interval_missed_burst(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct iv_log log = { .missed = WEFT_MISSED_BURST, .block = true };
	unsigned due;

	(void)state;
	iv_run(rt, &log);
	iv_print("burst", &log);
	for (unsigned i = 0; i < log.n; i++)
		assert_true(log.at[i] == log.at[0] + i * IV_MISS_PERIOD);
	due = iv_due_by(&log, log.block_end);
	assert_true(due >= 3);
	/* Due while the worker was blocked: all returned without a wait. */
	for (unsigned i = 0; i < due; i++)
		assert_int_equal(log.poll_of[i], 1);
	assert_int_equal(timers_in_wheel(rt), 0);
	weft_runtime_destroy(rt);
}

/*
 * SKIP: one late tick (the one at P) comes after the block; the rest
 * missed are dropped and the next is the first grid time after it was
 * returned (3P or later); the grid is kept.  @missed is SKIP or
 * IV_DEFAULT: the default is SKIP.
 */
static void iv_check_skip(int missed)
{
	weft_runtime_t *rt = rt_create(2);
	struct iv_log log = { .missed = missed, .block = true };

	iv_run(rt, &log);
	iv_print(missed == IV_DEFAULT ? "default" : "skip", &log);
	assert_int_equal(iv_due_by(&log, log.block_end), 2);
	assert_true(log.at[1] == log.at[0] + IV_MISS_PERIOD);
	assert_int_equal(log.poll_of[1], 1);
	assert_true(log.at[2] > log.woke[1]);
	assert_true(log.at[2] >= log.at[0] + 3 * IV_MISS_PERIOD);
	for (unsigned i = 1; i < log.n; i++)
		assert_int_equal((log.at[i] - log.at[0]) % IV_MISS_PERIOD, 0);
	assert_int_equal(timers_in_wheel(rt), 0);
	weft_runtime_destroy(rt);
}

static void test_time_interval_missed_skip(void **state)
{
	(void)state;
	iv_check_skip(WEFT_MISSED_SKIP);
	iv_check_skip(IV_DEFAULT);
}

/*
 * DELAY: one late tick (the one at P) comes after the block; the next is
 * one period after that tick was returned (between block_end + P and
 * woke[1] + P), off the old grid, and the ticks after it at least a
 * period apart.
 */
static void test_time_interval_missed_delay(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct iv_log log = { .missed = WEFT_MISSED_DELAY, .block = true };

	(void)state;
	iv_run(rt, &log);
	iv_print("delay", &log);
	assert_int_equal(iv_due_by(&log, log.block_end), 2);
	assert_true(log.at[1] == log.at[0] + IV_MISS_PERIOD);
	assert_int_equal(log.poll_of[1], 1);
	assert_true(log.at[2] >= log.block_end + IV_MISS_PERIOD);
	assert_true(log.at[2] <= log.woke[1] + IV_MISS_PERIOD);
	for (unsigned i = 2; i < log.n; i++)
		assert_true(log.at[i] - log.at[i - 1] >= IV_MISS_PERIOD);
	assert_int_equal(timers_in_wheel(rt), 0);
	weft_runtime_destroy(rt);
}

/*
 * weft_interval_init_at(): a start one period ahead is the first tick's
 * time, never returned before it, the grid from there (SKIP); a start
 * two and a half periods past, under BURST, returns the three ticks
 * already due at once.  weft_interval_set_missed() refuses an unknown
 * policy.
 */
static void test_time_interval_init_at(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct iv_log ahead = { .missed = IV_DEFAULT };
	struct iv_log past = { .missed = WEFT_MISSED_BURST };
	weft_interval_t iv;
	unsigned due;

	(void)state;
	ahead.start = weft_now_ns() + IV_MISS_PERIOD;
	iv_run(rt, &ahead);
	iv_print("init_at ahead", &ahead);
	assert_true(ahead.at[0] == ahead.start);
	assert_true(ahead.woke[0] >= ahead.start);
	if (ahead.init < ahead.start)
		assert_true(ahead.poll_of[0] >= 2); /* it waited */
	for (unsigned i = 1; i < ahead.n; i++)
		assert_int_equal((ahead.at[i] - ahead.start) % IV_MISS_PERIOD,
				 0);

	past.start = weft_now_ns() - IV_MISS_PERIOD * 5 / 2;
	iv_run(rt, &past);
	iv_print("init_at past", &past);
	assert_true(past.at[0] == past.start);
	for (unsigned i = 0; i < past.n; i++)
		assert_true(past.at[i] == past.start + i * IV_MISS_PERIOD);
	due = iv_due_by(&past, past.init);
	assert_true(due >= 3);
	for (unsigned i = 0; i < due; i++)
		assert_int_equal(past.poll_of[i], 1);

	weft_interval_init(&iv, IV_MISS_PERIOD);
	assert_int_equal(weft_interval_set_missed(&iv, (weft_missed_tick_t)3),
			 -EINVAL);
	assert_int_equal(weft_interval_set_missed(&iv, WEFT_MISSED_DELAY), 0);
	weft_interval_fini(&iv);
	assert_int_equal(timers_in_wheel(rt), 0);
	weft_runtime_destroy(rt);
}

/* An interval never initialised (zeroed), ticked twice, then dropped. */
struct iv_zero {
	int weft_pc;
	weft_interval_t iv;
	uint64_t at[2];
	int n;
};

static weft_poll_t iv_zero_poll(void *arg, weft_cx_t *cx)
{
	struct iv_zero *z = arg;

	WEFT_ASYNC_BEGIN(z);
	while (z->n < 2) {
		WEFT_AWAIT(z, weft_interval_tick(&z->iv, cx, &z->at[z->n]));
		z->n++;
	}
	weft_interval_fini(&z->iv);
	weft_cx_return(cx, (void *)(uintptr_t)z->n);
	WEFT_ASYNC_END(z);
}

/*
 * A zeroed interval, ticked by mistake instead of initialised: its first
 * tick is its start (time 0, long past), the next the first grid time
 * after it was returned, as an interval of 1 ns would (its period was
 * once divided by, and the task died of SIGFPE).
 */
static void test_time_interval_zeroed(void **state)
{
	weft_runtime_t *rt = rt_create(1);
	struct iv_zero z = { 0 };
	weft_join_t *j;
	void *out = NULL;

	(void)state;
	j = spawn_ok(rt, iv_zero_poll, NULL, &z, sizeof(z), true);
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_int_equal((uintptr_t)out, 2);
	assert_int_equal(timers_in_wheel(rt), 0);
	weft_runtime_destroy(rt);
}

/* 100,000 sleeps of 1-50 ms at once: all complete, none early. */
static void test_time_many_timers(void **state)
{
	size_t n = scale_count(100000);
	weft_runtime_t *rt = rt_create(2);
	int64_t *late = malloc(n * sizeof(*late));
	weft_join_t **joins = malloc(n * sizeof(*joins));
	struct wake_log log = { .late = late };
	uint64_t x = 0x5EED1234ABCD0001ULL;

	(void)state;
	assert_non_null(late);
	assert_non_null(joins);
	for (size_t i = 0; i < n; i++) {
		struct sleeper st = {
			.log = &log,
			.idx = i,
			.duration = WEFT_USEC(1000 + splitmix64(&x) % 49001),
		};

		late[i] = -1;
		joins[i] = spawn_sleeper(rt, &st);
	}
	join_all(rt, joins, n);
	check_lateness("many", late, n);
	assert_int_equal(timers_in_wheel(rt), 0);
	{
		weft_runtime_metrics_t m;

		/*
		 * Each sleep fired from the wheel at most once; one whose
		 * first poll came after its deadline never went in.
		 */
		assert_int_equal(weft_runtime_metrics(rt, &m), 0);
		assert_in_range(m.timers_fired, 1, n);
	}
	weft_runtime_destroy(rt);
	free(joins);
	free(late);
}

/*
 * The driver's wake path: with a 60 s sleep filed, the worker that holds
 * the driver parks in epoll_wait for 60 s.  A 20 ms sleep filed from
 * another thread must wake it (the eventfd write when the new deadline is
 * earlier than sleeping_until), or it would fire a minute late.
 */
struct thread_sleep {
	weft_sleep_t s;
};

static weft_poll_t thread_sleep_poll(void *arg, weft_cx_t *cx)
{
	return weft_sleep_poll(&((struct thread_sleep *)arg)->s, cx);
}

static void test_time_earlier_timer_wakes_parked_driver(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	int64_t late[8];
	struct wake_log log = { .late = late };
	struct sleeper st = { .log = &log, .duration = WEFT_SEC(60) };
	struct thread_sleep ts;
	weft_join_t *j;
	uint64_t woke;

	(void)state;
	late[0] = -1;
	j = spawn_sleeper(rt, &st);
	for (int round = 0; round < 4; round++) {
		/* Let every worker park, one of them in the driver. */
		sleep_ms(30);
		weft_sleep_init(&ts.s, WEFT_MSEC(20));
		assert_int_equal(
			weft_block_on(rt, thread_sleep_poll, &ts, NULL), 0);
		woke = weft_now_ns();
		late[1 + round] = (int64_t)(woke - weft_sleep_deadline(&ts.s));
		weft_sleep_fini(&ts.s);
	}
	/* From a worker too: a task's short sleep while the driver sleeps. */
	{
		struct sleeper st2 = { .log = &log,
				       .idx = 5,
				       .duration = WEFT_MSEC(20) };
		weft_join_t *j2;

		sleep_ms(30);
		j2 = spawn_sleeper(rt, &st2);
		assert_int_equal(join_wait_drop(j2, NULL), 0);
	}
	check_lateness("driver wake", &late[1], 5);
	assert_int_equal(late[0], -1);
	weft_join_abort(j);
	assert_int_equal(join_wait_drop(j, NULL), -ECANCELED);
	weft_runtime_destroy(rt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_time_sleep_order_and_accuracy),
		cmocka_unit_test(test_time_sleep_past_deadline),
		cmocka_unit_test(test_time_cancel_before_expiry),
		cmocka_unit_test(test_time_cancel_by_abort),
		cmocka_unit_test(test_time_timeout),
		cmocka_unit_test(test_time_interval_ticks),
		cmocka_unit_test(test_time_interval_missed_burst),
		cmocka_unit_test(test_time_interval_missed_skip),
		cmocka_unit_test(test_time_interval_missed_delay),
		cmocka_unit_test(test_time_interval_init_at),
		cmocka_unit_test(test_time_interval_zeroed),
		cmocka_unit_test(test_time_many_timers),
		cmocka_unit_test(test_time_earlier_timer_wakes_parked_driver),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
