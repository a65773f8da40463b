/* SPDX-License-Identifier: MIT */
/*
 * The async mutex and the mpsc channel hammered across workers, with
 * cancellation.
 *
 * TASKS tasks each run ROUNDS rounds of: lock the shared mutex, bump a
 * counter it guards (sometimes yielding while holding it), unlock; then
 * send one message to a consumer task over a small channel.  Every few
 * rounds the lock, or the send, races a yield in a select, and the loser
 * is dropped: a lock future that was queued, or already handed the lock,
 * and a send future that was queued, or already handed a slot, are
 * cancelled that way.  The counts must come out exact: the counter equals
 * the number of locks that won, and the consumer receives exactly the
 * messages whose send won, each producer's in order, and then -EPIPE once
 * every sender is gone.
 *
 * WEFT_STRESS_ITERS sets the number of runs.
 */
#include <stdatomic.h>
#include <string.h>

#include "test_helpers.h"

#define TASKS 16u
#define ROUNDS 1000u
#define CHAN_CAP 4u

struct shared {
	weft_async_mutex_t m;
	unsigned long counter; /* guarded by m */
	_Atomic unsigned inside;
	_Atomic unsigned errors;
	_Atomic unsigned long locked;
	_Atomic unsigned long lock_cancels;
	_Atomic unsigned long sent;
	_Atomic unsigned long sent_sum;
	_Atomic unsigned long send_cancels;
	/* The consumer's, read after it is joined. */
	unsigned long received;
	unsigned long received_sum;
	uint32_t last[TASKS];
};

static weft_poll_t yield_branch(void *arg, weft_cx_t *cx)
{
	return weft_yield_poll(arg, cx);
}

static weft_poll_t lock_branch(void *arg, weft_cx_t *cx)
{
	return weft_async_mutex_lock_poll(arg, cx);
}

static void lock_branch_drop(void *arg)
{
	weft_async_mutex_lock_fini(arg);
}

static weft_poll_t send_branch(void *arg, weft_cx_t *cx)
{
	return weft_mpsc_send_poll(arg, cx);
}

static void send_branch_drop(void *arg)
{
	weft_mpsc_send_fini(arg);
}

struct worker_task {
	int weft_pc;
	struct shared *sh;
	weft_mpsc_tx_t *tx;
	uint32_t id;
	uint32_t round;
	uint64_t v;
	size_t index;
	bool held;
	weft_async_mutex_lock_t lk;
	weft_mpsc_send_t send;
	weft_yield_t y;
	weft_branch_t br[2];
};

static weft_poll_t worker_task_poll(void *arg, weft_cx_t *cx)
{
	struct worker_task *st = arg;
	struct shared *sh = st->sh;

	WEFT_ASYNC_BEGIN(st);
	for (st->round = 1; st->round <= ROUNDS; st->round++) {
		/* Lock, racing a yield every fourth round. */
		weft_async_mutex_lock_init(&st->lk, &sh->m);
		st->y = (weft_yield_t){ 0 };
		st->br[0] = (weft_branch_t){ .poll = lock_branch,
					     .state = &st->lk,
					     .drop = lock_branch_drop };
		st->br[1] = (weft_branch_t){ .poll = yield_branch,
					     .state = &st->y };
		st->index = 0;
		if ((st->id + st->round) % 4 == 0)
			WEFT_AWAIT(st,
				   weft_select_poll(st->br, 2, cx, &st->index));
		else
			WEFT_AWAIT(st, weft_async_mutex_lock_poll(&st->lk, cx));
		weft_branches_drop(st->br, 2);
		if (st->index == 0) {
			st->held = true;
			if (atomic_exchange(&sh->inside, 1) != 0)
				atomic_fetch_add(&sh->errors, 1);
			sh->counter++;
			/* Held across an await: still nobody else inside. */
			if (st->round % 8 == 0)
				WEFT_YIELD(st, cx);
			atomic_store(&sh->inside, 0);
			st->held = false;
			weft_async_mutex_unlock(&sh->m);
			atomic_fetch_add(&sh->locked, 1);
		} else {
			atomic_fetch_add(&sh->lock_cancels, 1);
		}

		/* Send, racing a yield every third round. */
		st->v = (uint64_t)st->id << 32 | st->round;
		weft_mpsc_send_init(&st->send, st->tx, &st->v);
		st->y = (weft_yield_t){ 0 };
		st->br[0] = (weft_branch_t){ .poll = send_branch,
					     .state = &st->send,
					     .drop = send_branch_drop };
		st->br[1] = (weft_branch_t){ .poll = yield_branch,
					     .state = &st->y };
		st->index = 0;
		if ((st->id + st->round) % 3 == 0)
			WEFT_AWAIT(st,
				   weft_select_poll(st->br, 2, cx, &st->index));
		else
			WEFT_AWAIT(st, weft_mpsc_send_poll(&st->send, cx));
		weft_branches_drop(st->br, 2);
		if (st->index == 0) {
			if (st->send.status != 0)
				atomic_fetch_add(&sh->errors, 1);
			atomic_fetch_add(&sh->sent, 1);
			atomic_fetch_add(&sh->sent_sum, st->v);
		} else {
			atomic_fetch_add(&sh->send_cancels, 1);
		}
	}
	weft_mpsc_tx_drop(st->tx);
	st->tx = NULL;
	WEFT_ASYNC_END(st);
}

static void worker_task_drop(void *arg)
{
	struct worker_task *st = arg;

	weft_branches_drop(st->br, 2);
	weft_mpsc_tx_drop(st->tx);
	if (st->held)
		weft_async_mutex_unlock(&st->sh->m);
}

struct consumer_task {
	int weft_pc;
	struct shared *sh;
	weft_mpsc_rx_t *rx;
	weft_mpsc_recv_t recv;
	uint64_t v;
};

static weft_poll_t consumer_task_poll(void *arg, weft_cx_t *cx)
{
	struct consumer_task *st = arg;
	struct shared *sh = st->sh;
	uint32_t id, round;

	WEFT_ASYNC_BEGIN(st);
	weft_mpsc_recv_init(&st->recv, st->rx, &st->v);
	for (;;) {
		WEFT_AWAIT(st, weft_mpsc_recv_poll(&st->recv, cx));
		if (st->recv.status)
			break;
		id = (uint32_t)(st->v >> 32);
		round = (uint32_t)st->v;
		/* Cancelled sends leave gaps; order still holds. */
		if (id >= TASKS || round <= sh->last[id])
			atomic_fetch_add(&sh->errors, 1);
		else
			sh->last[id] = round;
		sh->received++;
		sh->received_sum += st->v;
		/* Now and then let the buffer fill, so senders queue. */
		if (sh->received % 16 == 0)
			WEFT_YIELD(st, cx);
	}
	if (st->recv.status != -EPIPE)
		atomic_fetch_add(&sh->errors, 1);
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

static unsigned long total_locks, total_lock_cancels, total_msgs,
	total_send_cancels;

static void run_once(unsigned workers)
{
	weft_runtime_t *rt = rt_create(workers);
	weft_join_t *joins[TASKS + 1];
	weft_mpsc_tx_t *txs[TASKS];
	struct shared *sh = calloc(1, sizeof(*sh));
	weft_mpsc_tx_t *tx;
	weft_mpsc_rx_t *rx;

	assert_non_null(sh);
	weft_async_mutex_init(&sh->m);
	assert_int_equal(weft_mpsc_create(CHAN_CAP, sizeof(uint64_t), NULL, &tx,
					  &rx),
			 0);
	{
		struct consumer_task c = { .sh = sh, .rx = rx };

		joins[0] = spawn_ok(rt, consumer_task_poll, consumer_task_drop,
				    &c, sizeof(c), true);
	}
	/* Every sender exists before any task can drop its own. */
	for (uint32_t i = 0; i < TASKS; i++)
		txs[i] = i ? weft_mpsc_tx_clone(tx) : tx;
	for (uint32_t i = 0; i < TASKS; i++) {
		struct worker_task w = { .sh = sh, .id = i, .tx = txs[i] };

		joins[i + 1] = spawn_ok(rt, worker_task_poll, worker_task_drop,
					&w, sizeof(w), true);
	}
	for (unsigned i = 0; i <= TASKS; i++)
		assert_int_equal(join_wait_drop(joins[i], NULL), 0);

	assert_int_equal(atomic_load(&sh->errors), 0);
	assert_int_equal(atomic_load(&sh->locked) +
				 atomic_load(&sh->lock_cancels),
			 TASKS * ROUNDS);
	assert_int_equal(sh->counter, atomic_load(&sh->locked));
	assert_int_equal(sh->received, atomic_load(&sh->sent));
	assert_int_equal(sh->received_sum, atomic_load(&sh->sent_sum));
	assert_int_equal(atomic_load(&sh->sent) +
				 atomic_load(&sh->send_cancels),
			 TASKS * ROUNDS);
	/* Nobody holds or waits for the mutex any more. */
	assert_true(weft_async_mutex_try_lock(&sh->m));
	weft_async_mutex_unlock(&sh->m);
	total_locks += atomic_load(&sh->locked);
	total_lock_cancels += atomic_load(&sh->lock_cancels);
	total_msgs += sh->received;
	total_send_cancels += atomic_load(&sh->send_cancels);
	weft_runtime_destroy(rt);
	weft_async_mutex_fini(&sh->m);
	free(sh);
}

static void test_stress_sync(void **state)
{
	unsigned iters = stress_iters(60);

	(void)state;
	for (unsigned i = 0; i < iters; i++)
		run_once(2 + i % 3);
	print_message("stress_sync: %u runs: %lu locks (%lu cancelled), "
		      "%lu messages (%lu sends cancelled)\n",
		      iters, total_locks, total_lock_cancels, total_msgs,
		      total_send_cancels);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stress_sync),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
