/* SPDX-License-Identifier: MIT */
/*
 * The scheduler shapes: spawn_many_local, spawn_many_remote, yield_many,
 * ping_pong and chained_spawn.
 *
 * Each mirrors the function of the same name in the Tokio anchor
 * (anchors/tokio-bench/src/main.rs), which follows tokio's own
 * benches/rt_multi_threaded.rs: same constants, same structure (who spawns
 * what, from which thread, what is awaited), same result check.  Timing
 * runs on the main thread from just before the first spawn until the main
 * thread has observed completion, so one cross-thread wake-up is included.
 *
 * Threads: the run functions execute on the main thread; the poll functions
 * on the workers.  Shared state is the two counters below and a latch; the
 * result checks read the counters after main observed completion, which
 * orders every increment before the read (see counter_add()).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench.h"

#define NUM_SPAWN 10000
#define YIELD_TASKS 200
#define NUM_YIELD 1000
#define NUM_PINGS 1000
#define CHAIN_LEN 1000

/* Tokio's COUNTER and REM. */
static atomic_size_t counter;
static atomic_size_t rem;

/*
 * The count is only read by main after it observed completion through a
 * join handle or a latch, whose release/acquire pair orders every increment
 * before that read; relaxed is enough for the increments themselves, as in
 * the anchor (Ordering::Relaxed).
 */
static void counter_add(size_t n)
{
	atomic_fetch_add_explicit(&counter, n, memory_order_relaxed);
}

/* Main only, between iterations: no task of this shape touches it now. */
static void counter_reset(void)
{
	atomic_store_explicit(&counter, 0, memory_order_relaxed);
}

static size_t counter_read(void)
{
	return atomic_load_explicit(&counter, memory_order_relaxed);
}

static void spawn_or_die(int rc)
{
	if (rc)
		bench_die("weft_spawn", rc);
}

/* ------------------------------------------------------------ futures */

/* One atomic increment. */
struct incr {
	int weft_pc;
};

static weft_poll_t incr_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	counter_add(1);
	return WEFT_READY;
}

/*
 * Awaits @n join handles in order, releasing each (Tokio: `for h in
 * handles { h.await.unwrap() }`), then frees the handle array, which the
 * anchor's Vec also does inside the timed region.
 */
struct join_all {
	int weft_pc;
	weft_join_t **joins;
	size_t n;
	size_t cursor;
};

static weft_poll_t join_all_poll(void *arg, weft_cx_t *cx)
{
	struct join_all *st = arg;

	WEFT_ASYNC_BEGIN(st);
	WEFT_AWAIT(st, weft_join_all(st->joins, st->n, NULL, &st->cursor, cx));
	free(st->joins);
	st->joins = NULL;
	WEFT_ASYNC_END(st);
}

/*
 * spawn_many_local's outer task: spawns NUM_SPAWN incr tasks from a worker,
 * keeping their handles, then awaits them all.
 */
struct spawn_outer {
	int weft_pc;
	struct join_all all;
};

static weft_poll_t spawn_outer_poll(void *arg, weft_cx_t *cx)
{
	struct spawn_outer *st = arg;
	size_t i;

	WEFT_ASYNC_BEGIN(st);
	st->all.joins = bench_xmallocarray(NUM_SPAWN, sizeof(*st->all.joins));
	st->all.n = NUM_SPAWN;
	for (i = 0; i < NUM_SPAWN; i++)
		spawn_or_die(weft_spawn_named(NULL, "incr", incr_poll,
					      &(struct incr){ 0 },
					      &st->all.joins[i]));
	WEFT_AWAIT(st, join_all_poll(&st->all, cx));
	WEFT_ASYNC_END(st);
}

/* yield_many's task: NUM_YIELD yields, then adds the count. */
struct yielder {
	int weft_pc;
	size_t i;
	size_t n;
};

static weft_poll_t yielder_poll(void *arg, weft_cx_t *cx)
{
	struct yielder *st = arg;

	WEFT_ASYNC_BEGIN(st);
	for (st->i = 0; st->i < NUM_YIELD; st->i++) {
		WEFT_YIELD(st, cx);
		st->n++;
	}
	counter_add(st->n);
	WEFT_ASYNC_END(st);
}

/* ping_pong's partner: awaits rx1, sends v + 1 on tx2. */
struct pong {
	int weft_pc;
	weft_oneshot_rx_t *rx1;
	weft_oneshot_tx_t *tx2;
};

static weft_poll_t pong_poll(void *arg, weft_cx_t *cx)
{
	struct pong *st = arg;
	void *v = NULL;
	int status = 0;
	int rc;

	WEFT_ASYNC_BEGIN(st);
	WEFT_AWAIT(st, weft_oneshot_poll(st->rx1, cx, &status, &v));
	weft_oneshot_rx_drop(st->rx1);
	if (status)
		bench_check_failed("ping_pong pong receive: status %d", status);
	rc = weft_oneshot_send(st->tx2, (void *)((uintptr_t)v + 1));
	if (rc)
		bench_check_failed("ping_pong pong send: %d", rc);
	WEFT_ASYNC_END(st);
}

/* One ping: spawns its partner, sends i, awaits i + 1. */
struct ping {
	int weft_pc;
	size_t i;
	weft_oneshot_rx_t *rx2;
	weft_countdown_t *done;
};

static weft_poll_t ping_poll(void *arg, weft_cx_t *cx)
{
	struct ping *st = arg;
	struct pong pong;
	weft_oneshot_tx_t *tx1, *tx2;
	weft_oneshot_rx_t *rx1;
	void *v = NULL;
	int status = 0;
	int rc;

	WEFT_ASYNC_BEGIN(st);
	rc = weft_oneshot_create(&tx1, &rx1);
	if (rc)
		bench_die("weft_oneshot_create", rc);
	rc = weft_oneshot_create(&tx2, &st->rx2);
	if (rc)
		bench_die("weft_oneshot_create", rc);
	pong = (struct pong){ .rx1 = rx1, .tx2 = tx2 };
	spawn_or_die(weft_spawn_named(NULL, "pong", pong_poll, &pong, NULL));
	rc = weft_oneshot_send(tx1, (void *)(uintptr_t)st->i);
	if (rc)
		bench_check_failed("ping_pong ping send: %d", rc);
	WEFT_AWAIT(st, weft_oneshot_poll(st->rx2, cx, &status, &v));
	weft_oneshot_rx_drop(st->rx2);
	if (status)
		bench_check_failed("ping_pong ping receive: status %d", status);
	if ((uintptr_t)v != st->i + 1)
		bench_check_failed("ping_pong got %zu, want %zu",
				   (size_t)(uintptr_t)v, st->i + 1);
	/*
	 * acq_rel, as in the anchor: the ping that takes the count to zero
	 * has every other ping's decrement ordered before its signal.
	 */
	if (atomic_fetch_sub_explicit(&rem, 1, memory_order_acq_rel) == 1)
		weft_countdown_done(st->done);
	WEFT_ASYNC_END(st);
}

/* ping_pong's outer task: spawns NUM_PINGS pings, detached. */
struct ping_outer {
	int weft_pc;
	weft_countdown_t *done;
};

static weft_poll_t ping_outer_poll(void *arg, weft_cx_t *cx)
{
	struct ping_outer *st = arg;
	struct ping ping;
	size_t i;

	(void)cx;
	for (i = 0; i < NUM_PINGS; i++) {
		ping = (struct ping){ .i = i, .done = st->done };
		spawn_or_die(weft_spawn_named(NULL, "ping", ping_poll, &ping,
					      NULL));
	}
	return WEFT_READY;
}

/*
 * chained_spawn's link: the last one signals, every other one counts and
 * spawns the next (Tokio's chain()).
 */
struct chain {
	int weft_pc;
	size_t n;
	weft_countdown_t *done;
};

static weft_poll_t chain_poll(void *arg, weft_cx_t *cx)
{
	struct chain *st = arg;
	struct chain next;

	(void)cx;
	if (st->n == 0) {
		weft_countdown_done(st->done);
	} else {
		counter_add(1);
		next = (struct chain){ .n = st->n - 1, .done = st->done };
		spawn_or_die(weft_spawn_named(NULL, "chain", chain_poll, &next,
					      NULL));
	}
	return WEFT_READY;
}

/* ------------------------------------------------------------- shapes */

static uint64_t spawn_many_local(struct bench *b)
{
	weft_join_t *outer;
	uint64_t t0, el;
	size_t c;
	int rc;

	counter_reset();
	t0 = weft_now_ns();
	spawn_or_die(weft_spawn_named(b->rt, "spawn_outer", spawn_outer_poll,
				      &(struct spawn_outer){ 0 }, &outer));
	rc = weft_join_wait(outer, NULL);
	el = weft_now_ns() - t0;
	weft_join_drop(outer);
	if (rc)
		bench_check_failed("spawn_many_local outer task: %d", rc);
	c = counter_read();
	if (c != NUM_SPAWN)
		bench_check_failed("spawn_many_local counter %zu != %d", c,
				   NUM_SPAWN);
	return el;
}

static uint64_t spawn_many_remote(struct bench *b)
{
	struct join_all all = { 0 };
	uint64_t t0, el;
	size_t i, c;
	int rc;

	counter_reset();
	t0 = weft_now_ns();
	all.joins = bench_xmallocarray(NUM_SPAWN, sizeof(*all.joins));
	all.n = NUM_SPAWN;
	for (i = 0; i < NUM_SPAWN; i++)
		spawn_or_die(weft_spawn_named(b->rt, "incr", incr_poll,
					      &(struct incr){ 0 },
					      &all.joins[i]));
	rc = weft_block_on(b->rt, join_all_poll, &all, NULL);
	el = weft_now_ns() - t0;
	if (rc)
		bench_die("weft_block_on", rc);
	c = counter_read();
	if (c != NUM_SPAWN)
		bench_check_failed("spawn_many_remote counter %zu != %d", c,
				   NUM_SPAWN);
	return el;
}

static uint64_t yield_many(struct bench *b)
{
	struct join_all all = { 0 };
	uint64_t t0, el;
	size_t i, c;
	int rc;

	counter_reset();
	t0 = weft_now_ns();
	all.joins = bench_xmallocarray(YIELD_TASKS, sizeof(*all.joins));
	all.n = YIELD_TASKS;
	for (i = 0; i < YIELD_TASKS; i++)
		spawn_or_die(weft_spawn_named(b->rt, "yielder", yielder_poll,
					      &(struct yielder){ 0 },
					      &all.joins[i]));
	rc = weft_block_on(b->rt, join_all_poll, &all, NULL);
	el = weft_now_ns() - t0;
	if (rc)
		bench_die("weft_block_on", rc);
	c = counter_read();
	if (c != (size_t)YIELD_TASKS * NUM_YIELD)
		bench_check_failed("yield_many yields %zu != %zu", c,
				   (size_t)YIELD_TASKS * NUM_YIELD);
	return el;
}

static uint64_t ping_pong(struct bench *b)
{
	weft_countdown_t *done = bench_latch(b, 1);
	struct ping_outer outer = { .done = done };
	uint64_t t0, el;
	size_t r;

	atomic_store_explicit(&rem, NUM_PINGS, memory_order_relaxed);
	t0 = weft_now_ns();
	spawn_or_die(weft_spawn_named(b->rt, "ping_outer", ping_outer_poll,
				      &outer, NULL));
	weft_countdown_wait(done);
	el = weft_now_ns() - t0;
	/* Ordered after every decrement by the latch (done/wait). */
	r = atomic_load_explicit(&rem, memory_order_relaxed);
	if (r != 0)
		bench_check_failed("ping_pong remaining %zu != 0", r);
	return el;
}

static uint64_t chained_spawn(struct bench *b)
{
	weft_countdown_t *done = bench_latch(b, 1);
	struct chain first = { .n = CHAIN_LEN, .done = done };
	uint64_t t0, el;
	size_t c;

	counter_reset();
	t0 = weft_now_ns();
	spawn_or_die(weft_spawn_named(b->rt, "chain", chain_poll, &first,
				      NULL));
	weft_countdown_wait(done);
	el = weft_now_ns() - t0;
	c = counter_read();
	if (c != CHAIN_LEN)
		bench_check_failed("chained_spawn spawns %zu != %d", c,
				   CHAIN_LEN);
	return el;
}

const struct bench_shape shape_spawn_many_local = {
	.name = "spawn_many_local",
	.unit = "task spawned from a worker, joined",
	.ops = NUM_SPAWN,
	.run = spawn_many_local,
};

const struct bench_shape shape_spawn_many_remote = {
	.name = "spawn_many_remote",
	.unit = "task spawned from main, joined",
	.ops = NUM_SPAWN,
	.run = spawn_many_remote,
};

const struct bench_shape shape_yield_many = {
	.name = "yield_many",
	.unit = "yield",
	.ops = (size_t)YIELD_TASKS * NUM_YIELD,
	.run = yield_many,
};

const struct bench_shape shape_ping_pong = {
	.name = "ping_pong",
	.unit = "ping (2 tasks, 2 oneshots)",
	.ops = NUM_PINGS,
	.run = ping_pong,
};

const struct bench_shape shape_chained_spawn = {
	.name = "chained_spawn",
	.unit = "chain link (spawn from a worker)",
	.ops = CHAIN_LEN,
	.run = chained_spawn,
};
