/* SPDX-License-Identifier: MIT */
/*
 * The fiber variants of two scheduler shapes, to show what the stackful
 * layer costs next to the stackless one (shape_sched.c): the same work,
 * written as straight-line fiber code over weft_await().
 *
 *   yield_many_fiber  200 fibers each yield 1,000 times; ns per yield.
 *   ping_pong_fiber   1,000 ping fibers each spawn a pong fiber and swap
 *                     values over two oneshots; ns per ping.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench.h"

#define YIELD_TASKS 200
#define NUM_YIELD 1000
#define NUM_PINGS 1000

static atomic_size_t yields;
static atomic_size_t rem;

static void *yielder(void *arg)
{
	size_t n = 0;

	(void)arg;
	for (int i = 0; i < NUM_YIELD; i++) {
		if (weft_fiber_yield())
			bench_check_failed("yield_many_fiber: yield failed");
		n++;
	}
	/* Relaxed: read by main after the joins, which order it. */
	atomic_fetch_add_explicit(&yields, n, memory_order_relaxed);
	return NULL;
}

static uint64_t yield_many_fiber(struct bench *b)
{
	weft_join_t **joins;
	uint64_t t0, el;
	size_t c;
	int rc;

	atomic_store(&yields, 0);
	t0 = weft_now_ns();
	joins = bench_xmallocarray(YIELD_TASKS, sizeof(*joins));
	for (int i = 0; i < YIELD_TASKS; i++) {
		rc = weft_spawn_fiber(b->rt, "yielder", yielder, NULL,
				      &joins[i]);
		if (rc)
			bench_die("weft_spawn_fiber", rc);
	}
	for (int i = 0; i < YIELD_TASKS; i++) {
		rc = weft_join_wait(joins[i], NULL);
		if (rc)
			bench_die("weft_join_wait", rc);
		weft_join_drop(joins[i]);
	}
	el = weft_now_ns() - t0;
	free(joins);
	c = atomic_load(&yields);
	if (c != (size_t)YIELD_TASKS * NUM_YIELD)
		bench_check_failed("yield_many_fiber yields %zu != %d", c,
				   YIELD_TASKS * NUM_YIELD);
	return el;
}

struct recv {
	weft_oneshot_rx_t *rx;
	int status;
	void *value;
};

static weft_poll_t recv_poll(void *arg, weft_cx_t *cx)
{
	struct recv *r = arg;

	return weft_oneshot_poll(r->rx, cx, &r->status, &r->value);
}

/* Owned by the pong fiber: malloc()ed by the ping, freed here. */
struct pong_arg {
	weft_oneshot_rx_t *rx1;
	weft_oneshot_tx_t *tx2;
};

static void *pong(void *arg)
{
	struct pong_arg a = *(struct pong_arg *)arg;
	struct recv r = { .rx = a.rx1 };

	free(arg);
	if (weft_await(recv_poll, &r) || r.status)
		bench_check_failed("ping_pong_fiber pong receive");
	weft_oneshot_rx_drop(a.rx1);
	if (weft_oneshot_send(a.tx2, (void *)((uintptr_t)r.value + 1)))
		bench_check_failed("ping_pong_fiber pong send");
	return NULL;
}

struct ping_arg {
	uintptr_t i;
	weft_countdown_t *done;
};

static void *ping(void *arg)
{
	struct ping_arg a = *(struct ping_arg *)arg;
	weft_oneshot_tx_t *tx1, *tx2;
	weft_oneshot_rx_t *rx1, *rx2;
	struct pong_arg *pa;
	struct recv r;
	int rc;

	free(arg);
	if ((rc = weft_oneshot_create(&tx1, &rx1)) ||
	    (rc = weft_oneshot_create(&tx2, &rx2)))
		bench_die("weft_oneshot_create", rc);
	pa = bench_xmallocarray(1, sizeof(*pa));
	*pa = (struct pong_arg){ rx1, tx2 };
	rc = weft_spawn_fiber(NULL, "pong", pong, pa, NULL);
	if (rc)
		bench_die("weft_spawn_fiber", rc);
	if (weft_oneshot_send(tx1, (void *)a.i))
		bench_check_failed("ping_pong_fiber ping send");
	r = (struct recv){ .rx = rx2 };
	if (weft_await(recv_poll, &r) || r.status)
		bench_check_failed("ping_pong_fiber ping receive");
	weft_oneshot_rx_drop(rx2);
	if ((uintptr_t)r.value != a.i + 1)
		bench_check_failed("ping_pong_fiber got %zu, want %zu",
				   (size_t)(uintptr_t)r.value,
				   (size_t)a.i + 1);
	/* acq_rel: as in the stackless ping_pong. */
	if (atomic_fetch_sub_explicit(&rem, 1, memory_order_acq_rel) == 1)
		weft_countdown_done(a.done);
	return NULL;
}

static void *ping_outer(void *arg)
{
	for (uintptr_t i = 0; i < NUM_PINGS; i++) {
		struct ping_arg *a = bench_xmallocarray(1, sizeof(*a));
		int rc;

		*a = (struct ping_arg){ i, arg };
		rc = weft_spawn_fiber(NULL, "ping", ping, a, NULL);
		if (rc)
			bench_die("weft_spawn_fiber", rc);
	}
	return NULL;
}

static uint64_t ping_pong_fiber(struct bench *b)
{
	weft_countdown_t *done = bench_latch(b, 1);
	uint64_t t0, el;
	int rc;

	atomic_store(&rem, NUM_PINGS);
	t0 = weft_now_ns();
	rc = weft_spawn_fiber(b->rt, "ping_outer", ping_outer, done, NULL);
	if (rc)
		bench_die("weft_spawn_fiber", rc);
	weft_countdown_wait(done);
	el = weft_now_ns() - t0;
	if (atomic_load(&rem) != 0)
		bench_check_failed("ping_pong_fiber remaining %zu != 0",
				   atomic_load(&rem));
	return el;
}

const struct bench_shape shape_yield_many_fiber = {
	.name = "yield_many_fiber",
	.unit = "yield",
	.ops = (size_t)YIELD_TASKS * NUM_YIELD,
	.run = yield_many_fiber,
};

const struct bench_shape shape_ping_pong_fiber = {
	.name = "ping_pong_fiber",
	.unit = "ping",
	.ops = NUM_PINGS,
	.run = ping_pong_fiber,
};
