/* SPDX-License-Identifier: MIT */
/*
 * weft-example: a short tour of the runtime API.
 *
 * A parent task spawns N children that count the primes in slices of
 * [0, limit); each child yields between chunks of its slice, so the workers
 * interleave them and steal from each other.  The parent awaits them all
 * with weft_join_all() and adds up their outputs.  Meanwhile two tasks play
 * ping-pong over a pair of oneshot channels.  main() checks the sum against
 * a plain loop and prints each worker's counters.
 *
 * Ownership: main() owns struct work and only reads it after the parent has
 * completed (weft_join_wait() orders the parent's writes before its return).
 * Task states are copied into their tasks; what they own (channel halves) is
 * released by their drop callbacks, which also run if the runtime is
 * destroyed before they complete.
 *
 * Usage: weft-example [children [limit]]; $WEFT_WORKERS sets the workers.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "tool_util.h"

#define DEFAULT_CHILDREN 16
#define DEFAULT_LIMIT 2000000
#define CHUNKS 8 /* slices per child, with a yield after each */
#define PING 21

/* ------------------------------------------------------------ the work */

static bool is_prime(uint64_t n)
{
	if (n < 2)
		return false;
	if (n % 2 == 0)
		return n == 2;
	for (uint64_t d = 3; d * d <= n; d += 2)
		if (n % d == 0)
			return false;
	return true;
}

static uint64_t count_primes(uint64_t lo, uint64_t hi)
{
	uint64_t n = 0;

	for (uint64_t i = lo; i < hi; i++)
		n += is_prime(i);
	return n;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* What main() hands the parent task and reads back once it has completed. */
struct work {
	unsigned nchildren;
	uint64_t limit;
	weft_join_t **joins; /* one per child; NULL where the spawn failed */
	void **outs;         /* each child's output: its prime count */
	int err;             /* first spawn or channel error, or 0 */
	uint64_t primes;     /* sum of the children's counts */
	uintptr_t pong;      /* the reply of the ping-pong, 0 if none */
};

/* ----------------------------------------------------------- the tasks */

struct child {
	int weft_pc;
	uint64_t lo, hi; /* the slice [lo, hi) */
	uint64_t step;
	uint64_t next; /* start of the next chunk */
	uint64_t primes;
};

static weft_poll_t child_poll(void *arg, weft_cx_t *cx)
{
	struct child *c = arg;

	/* Locals do not survive a yield: the loop state lives in *c. */
	WEFT_ASYNC_BEGIN(c);
	c->step = (c->hi - c->lo + CHUNKS - 1) / CHUNKS;
	if (c->step == 0)
		c->step = 1;
	for (c->next = c->lo; c->next < c->hi; c->next += c->step) {
		c->primes += count_primes(c->next,
					  min_u64(c->next + c->step, c->hi));
		WEFT_YIELD(c, cx);
	}
	weft_cx_return(cx, (void *)(uintptr_t)c->primes);
	WEFT_ASYNC_END(c);
}

/* Receives a number on @ping and sends back twice that on @pong. */
struct ponger {
	int weft_pc;
	weft_oneshot_rx_t *ping; /* owned until dropped */
	weft_oneshot_tx_t *pong; /* owned until sent */
	int status;
	void *value;
};

static weft_poll_t ponger_poll(void *arg, weft_cx_t *cx)
{
	struct ponger *p = arg;

	WEFT_ASYNC_BEGIN(p);
	WEFT_AWAIT(p, weft_oneshot_poll(p->ping, cx, &p->status, &p->value));
	weft_oneshot_rx_drop(p->ping);
	p->ping = NULL;
	if (p->status == 0) {
		/* -EPIPE: the pinger is gone; nobody is left to tell. */
		(void)weft_oneshot_send(p->pong,
					(void *)((uintptr_t)p->value * 2));
	} else {
		weft_oneshot_tx_drop(p->pong);
	}
	p->pong = NULL;
	WEFT_ASYNC_END(p);
}

static void ponger_drop(void *arg)
{
	struct ponger *p = arg;

	if (p->ping)
		weft_oneshot_rx_drop(p->ping);
	if (p->pong)
		weft_oneshot_tx_drop(p->pong);
}

/* Sends PING, awaits the reply and returns it (NULL if none came). */
struct pinger {
	int weft_pc;
	weft_oneshot_tx_t *ping; /* owned until sent */
	weft_oneshot_rx_t *pong; /* owned until dropped */
	int status;
	void *value;
};

static weft_poll_t pinger_poll(void *arg, weft_cx_t *cx)
{
	struct pinger *p = arg;

	WEFT_ASYNC_BEGIN(p);
	/* On -EPIPE the ponger drops its sender and the await sees it. */
	(void)weft_oneshot_send(p->ping, (void *)(uintptr_t)PING);
	p->ping = NULL;
	WEFT_AWAIT(p, weft_oneshot_poll(p->pong, cx, &p->status, &p->value));
	weft_oneshot_rx_drop(p->pong);
	p->pong = NULL;
	weft_cx_return(cx, p->status == 0 ? p->value : NULL);
	WEFT_ASYNC_END(p);
}

static void pinger_drop(void *arg)
{
	struct pinger *p = arg;

	if (p->ping)
		weft_oneshot_tx_drop(p->ping);
	if (p->pong)
		weft_oneshot_rx_drop(p->pong);
}

/*
 * Spawns the pinger and the ponger, wired by two channels.  On failure
 * nothing is left running and every channel half is released.
 */
static int spawn_ping_pong(weft_join_t **pinger, weft_join_t **ponger)
{
	weft_oneshot_tx_t *ping_tx, *pong_tx;
	weft_oneshot_rx_t *ping_rx, *pong_rx;
	struct ponger po;
	struct pinger pi;
	int err;

	err = weft_oneshot_create(&ping_tx, &ping_rx);
	if (err)
		return err;
	err = weft_oneshot_create(&pong_tx, &pong_rx);
	if (err)
		goto out_drop_ping;

	/* weft_spawn_with() instead of weft_spawn() to pass a drop callback. */
	po = (struct ponger){ .ping = ping_rx, .pong = pong_tx };
	err = weft_spawn_with(NULL,
			      &(weft_spawn_t){ .poll = ponger_poll,
					       .drop = ponger_drop,
					       .state = &po,
					       .size = sizeof(po),
					       .name = "ponger",
					       .file = __FILE__,
					       .line = __LINE__ },
			      ponger);
	if (err)
		goto out_drop_pong;

	/* From here on the ponger owns ping_rx and pong_tx. */
	pi = (struct pinger){ .ping = ping_tx, .pong = pong_rx };
	err = weft_spawn_with(NULL,
			      &(weft_spawn_t){ .poll = pinger_poll,
					       .drop = pinger_drop,
					       .state = &pi,
					       .size = sizeof(pi),
					       .name = "pinger",
					       .file = __FILE__,
					       .line = __LINE__ },
			      pinger);
	if (err) {
		/* The ponger sees its ping sender dropped and finishes. */
		weft_oneshot_tx_drop(ping_tx);
		weft_oneshot_rx_drop(pong_rx);
		weft_join_drop(*ponger);
		*ponger = NULL;
	}
	return err;

out_drop_pong:
	weft_oneshot_tx_drop(pong_tx);
	weft_oneshot_rx_drop(pong_rx);
out_drop_ping:
	weft_oneshot_tx_drop(ping_tx);
	weft_oneshot_rx_drop(ping_rx);
	return err;
}

/*
 * Awaiting from a helper: a future of its own (a state struct with its
 * own weft_pc, and a poll function), which a task keeps in its state and
 * awaits with WEFT_AWAIT like any other.  This one lets the children
 * start: it yields @n times, then sleeps a millisecond.
 */
struct settle {
	int weft_pc;
	unsigned i, n;
	weft_sleep_t sl;
};

static void settle_init(struct settle *s, unsigned n)
{
	*s = (struct settle){ .n = n };
}

static weft_poll_t settle_poll(struct settle *s, weft_cx_t *cx)
{
	WEFT_ASYNC_BEGIN(s);
	for (s->i = 0; s->i < s->n; s->i++)
		WEFT_YIELD(s, cx);
	weft_sleep_init(&s->sl, WEFT_MSEC(1));
	WEFT_AWAIT(s, weft_sleep_poll(&s->sl, cx));
	weft_sleep_fini(&s->sl);
	WEFT_ASYNC_END(s);
}

struct parent {
	int weft_pc;
	struct settle settle; /* the helper's state, inside the task's */
	struct work *w;
	size_t cursor; /* weft_join_all() progress */
	weft_join_t *pinger, *ponger;
	void *pong;
};

static weft_poll_t parent_poll(void *arg, weft_cx_t *cx)
{
	struct parent *p = arg;
	struct work *w = p->w;

	WEFT_ASYNC_BEGIN(p);
	for (unsigned i = 0; i < w->nchildren; i++) {
		uint64_t span = w->limit / w->nchildren;
		struct child c = {
			.lo = i * span,
			.hi = i + 1 == w->nchildren ? w->limit : (i + 1) * span,
		};
		int err = weft_spawn_named(NULL, "primes", child_poll, &c,
					   &w->joins[i]);

		if (err) {
			w->joins[i] = NULL; /* weft_join_all() skips it */
			if (!w->err)
				w->err = err;
		}
	}

	{
		int err = spawn_ping_pong(&p->pinger, &p->ponger);

		if (err) {
			p->pinger = NULL;
			p->ponger = NULL;
			if (!w->err)
				w->err = err;
		}
	}

	/* A helper future, awaited as any other. */
	settle_init(&p->settle, 3);
	WEFT_AWAIT(p, settle_poll(&p->settle, cx));

	/* Releases each handle as its task completes. */
	WEFT_AWAIT(p, weft_join_all(w->joins, w->nchildren, w->outs, &p->cursor,
				    cx));
	for (unsigned i = 0; i < w->nchildren; i++)
		w->primes += (uintptr_t)w->outs[i];

	if (p->pinger) {
		WEFT_AWAIT(p, weft_join_poll(p->pinger, cx, NULL, &p->pong));
		w->pong = (uintptr_t)p->pong;
		weft_join_drop(p->pinger);
		WEFT_AWAIT(p, weft_join_poll(p->ponger, cx, NULL, NULL));
		weft_join_drop(p->ponger);
	}
	WEFT_ASYNC_END(p);
}

/* ----------------------------------------------------------------- main */

static void print_metrics(const weft_runtime_t *rt)
{
	weft_runtime_metrics_t rm;
	unsigned n = weft_runtime_workers(rt);

	printf("\n%6s %10s %8s %9s %7s %9s %10s\n", "worker", "polls", "steals",
	       "steal_ops", "parks", "overflows", "busy_ms");
	for (unsigned i = 0; i < n; i++) {
		weft_worker_metrics_t m;

		if (weft_worker_metrics(rt, i, &m) != 0)
			continue;
		printf("%6u %10" PRIu64 " %8" PRIu64 " %9" PRIu64 " %7" PRIu64
		       " %9" PRIu64 " %10.1f\n",
		       i, m.polls, m.steals, m.steal_ops, m.parks, m.overflows,
		       (double)m.busy_ns / 1e6);
	}
	if (weft_runtime_metrics(rt, &rm) == 0)
		printf("runtime: %u workers, %" PRIu64
		       " tasks spawned, %" PRIu64 " live\n",
		       rm.workers, rm.spawned_tasks, rm.live_tasks);
}

int main(int argc, char **argv)
{
	unsigned long nchildren = DEFAULT_CHILDREN, limit = DEFAULT_LIMIT;
	uint64_t expect, t0, t1;
	struct work w = { 0 };
	weft_runtime_t *rt;
	weft_join_t *join;
	int err, ret = 1;

	if (argc > 3 ||
	    (argc > 1 && !tool_parse_ulong(argv[1], 1, 65536, &nchildren)) ||
	    (argc > 2 && !tool_parse_ulong(argv[2], 1, UINT32_MAX, &limit))) {
		fprintf(stderr, "usage: %s [children (1-65536) [limit]]\n",
			argv[0]);
		return 2;
	}
	w.nchildren = (unsigned)nchildren;
	w.limit = limit;
	w.joins = calloc(w.nchildren, sizeof(*w.joins));
	w.outs = calloc(w.nchildren, sizeof(*w.outs));
	if (!w.joins || !w.outs) {
		fprintf(stderr, "weft-example: out of memory\n");
		goto out_free;
	}

	err = weft_runtime_create(NULL, &rt);
	if (err) {
		fprintf(stderr, "weft_runtime_create: %s\n", strerror(-err));
		goto out_free;
	}
	printf("weft %s: %u workers, %u children counting primes below %" PRIu64
	       "\n",
	       weft_version_string(), weft_runtime_workers(rt), w.nchildren,
	       w.limit);

	t0 = weft_now_ns();
	err = weft_spawn_named(rt, "parent", parent_poll,
			       &(struct parent){ .w = &w }, &join);
	if (err) {
		fprintf(stderr, "weft_spawn: %s\n", strerror(-err));
		goto out_destroy;
	}
	err = weft_join_wait(join, NULL);
	weft_join_drop(join);
	t1 = weft_now_ns();
	if (err) {
		fprintf(stderr, "parent task: %s\n", strerror(-err));
		goto out_destroy;
	}
	if (w.err) {
		fprintf(stderr, "parent task: spawn failed: %s\n",
			strerror(-w.err));
		goto out_destroy;
	}

	expect = count_primes(0, w.limit);
	printf("primes below %" PRIu64 ": %" PRIu64 " (single thread: %" PRIu64
	       ") in %.3f s\n",
	       w.limit, w.primes, expect, (double)(t1 - t0) / 1e9);
	printf("ping %d -> pong %" PRIuPTR "\n", PING, w.pong);
	print_metrics(rt);

	if (w.primes != expect || w.pong != 2 * PING)
		fprintf(stderr, "weft-example: wrong result\n");
	else
		ret = 0;

out_destroy:
	weft_runtime_destroy(rt);
out_free:
	free(w.outs);
	free(w.joins);
	return ret;
}
