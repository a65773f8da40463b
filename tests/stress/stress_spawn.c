/* SPDX-License-Identifier: MIT */
/*
 * Tasks spawning tasks, recursively, across workers.
 *
 * A tree of DEPTH levels with FANOUT children per node, spawned from inside
 * the tasks (so into the spawning worker's LIFO slot and run queue, from
 * where the other workers steal).  Of each node's children JOINED are
 * awaited with weft_join_all() and the rest are detached.  Each node
 * outputs the size of its joined subtree, so the root's output is exact;
 * every node also counts itself globally, so the detached parts are exact
 * too.  Some nodes yield before spawning, to mix the orders.
 *
 * WEFT_STRESS_ITERS sets the number of trees.
 */
#include <stdatomic.h>
#include <string.h>

#include "test_helpers.h"

#define DEPTH 6u
#define FANOUT 4u
#define JOINED 2u

struct shared {
	_Atomic unsigned nodes; /* first polls */
	_Atomic unsigned drops;
	_Atomic unsigned errors;
	tcount_t finished; /* nodes READY */
};

struct node {
	struct shared *sh;
	unsigned depth;
	unsigned seq;
	int weft_pc;
	weft_join_t *joins[JOINED];
	void *outs[JOINED];
	size_t cursor;
	weft_yield_t y;
};

static void node_drop(void *arg);

static weft_poll_t node_poll(void *arg, weft_cx_t *cx)
{
	struct node *n = arg;
	struct shared *sh = n->sh;
	uintptr_t size = 1;

	WEFT_ASYNC_BEGIN(n);
	atomic_fetch_add(&sh->nodes, 1);
	if (n->seq % 3 == 1)
		WEFT_AWAIT(n, weft_yield_poll(&n->y, cx));
	if (n->depth < DEPTH) {
		for (unsigned i = 0; i < FANOUT; i++) {
			struct node c = { .sh = sh,
					  .depth = n->depth + 1,
					  .seq = n->seq * FANOUT + i };
			weft_spawn_t spec = { .poll = node_poll,
					      .drop = node_drop,
					      .state = &c,
					      .size = sizeof(c),
					      .name = "node" };
			weft_join_t **join = i < JOINED ? &n->joins[i] : NULL;

			if (weft_spawn_with(NULL, &spec, join) != 0)
				atomic_fetch_add(&sh->errors, 1);
		}
		WEFT_AWAIT(n, weft_join_all(n->joins, JOINED, n->outs,
					    &n->cursor, cx));
		for (unsigned i = 0; i < JOINED; i++)
			size += (uintptr_t)n->outs[i];
	}
	weft_cx_return(cx, (void *)size);
	tcount_add(&sh->finished, 1);
	WEFT_ASYNC_END(n);
}

static void node_drop(void *arg)
{
	struct node *n = arg;

	atomic_fetch_add(&n->sh->drops, 1);
}

static unsigned pow_u(unsigned b, unsigned e)
{
	unsigned r = 1;

	while (e--)
		r *= b;
	return r;
}

/* Totals over all runs, for the summary line. */
static unsigned long total_tasks, total_steals;

static void run_once(unsigned workers)
{
	const unsigned total = (pow_u(FANOUT, DEPTH + 1) - 1) / (FANOUT - 1);
	const unsigned joined = (pow_u(JOINED, DEPTH + 1) - 1) / (JOINED - 1);
	weft_runtime_t *rt = rt_create(workers);
	struct shared sh;
	struct node root;
	weft_runtime_metrics_t m;
	weft_join_t *j;
	void *out = NULL;

	memset(&sh, 0, sizeof(sh));
	tcount_init(&sh.finished);
	root = (struct node){ .sh = &sh };
	j = spawn_ok(rt, node_poll, node_drop, &root, sizeof(root), true);
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_int_equal((uintptr_t)out, joined);
	/* The detached subtrees finish on their own time. */
	tcount_wait(&sh.finished, total);

	assert_int_equal(weft_runtime_metrics(rt, &m), 0);
	assert_int_equal(m.spawned_tasks, total);
	assert_int_equal(m.remote_spawns, 1);
	assert_int_equal(worker_sum(rt, WORKER_COUNTER(spawned)), total - 1);
	total_tasks += total;
	total_steals += worker_sum(rt, WORKER_COUNTER(steals));
	weft_runtime_destroy(rt);

	assert_int_equal(atomic_load(&sh.errors), 0);
	assert_int_equal(atomic_load(&sh.nodes), total);
	assert_int_equal(atomic_load(&sh.drops), total);
	assert_int_equal(tcount_get(&sh.finished), total);
	tcount_fini(&sh.finished);
}

static void test_stress_spawn(void **state)
{
	unsigned iters = stress_iters(300);

	(void)state;
	for (unsigned i = 0; i < iters; i++)
		run_once(2 + i % 3);
	print_message("stress_spawn: %u trees: %lu tasks, %lu stolen\n", iters,
		      total_tasks, total_steals);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stress_spawn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
