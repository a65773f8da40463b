/* SPDX-License-Identifier: MIT */
/*
 * Oneshot ping-pong chains across workers.
 *
 * PAIRS pairs of tasks exchange ROUNDS messages each way.  Every message
 * travels on a fresh oneshot and carries the sender half of the channel for
 * the answer: the pinger sends "answer on this" to the ponger, which
 * answers with "next ping on this".  A NULL ping ends the chain.  Each side
 * counts its rounds; both halves of every channel are released exactly
 * once, which ASan checks.
 *
 * The pairs start from the global queue, so they spread over the workers;
 * each wake then lands in the waking worker's LIFO slot or is stolen.
 *
 * WEFT_STRESS_ITERS sets the number of runs.
 */
#include <stdatomic.h>
#include <string.h>

#include "test_helpers.h"

#define PAIRS 64u
#define ROUNDS 300u

struct shared {
	_Atomic unsigned errors;
	_Atomic unsigned channels;
	_Atomic unsigned drops;
};

static void make_channel(struct shared *sh, weft_oneshot_tx_t **tx,
			 weft_oneshot_rx_t **rx)
{
	if (weft_oneshot_create(tx, rx) != 0) {
		atomic_fetch_add(&sh->errors, 1);
		*tx = NULL;
		*rx = NULL;
		return;
	}
	atomic_fetch_add(&sh->channels, 1);
}

struct pinger {
	struct shared *sh;
	int weft_pc;
	unsigned rounds;
	weft_oneshot_tx_t *to_pong;
	weft_oneshot_rx_t *answer;
};

static weft_poll_t pinger_poll(void *arg, weft_cx_t *cx)
{
	struct pinger *p = arg;
	weft_oneshot_tx_t *answer_tx;
	void *v = NULL;
	int status = 0;

	WEFT_ASYNC_BEGIN(p);
	while (p->rounds < ROUNDS) {
		make_channel(p->sh, &answer_tx, &p->answer);
		if (weft_oneshot_send(p->to_pong, answer_tx) != 0)
			atomic_fetch_add(&p->sh->errors, 1);
		p->to_pong = NULL;
		WEFT_AWAIT(p, weft_oneshot_poll(p->answer, cx, &status, &v));
		weft_oneshot_rx_drop(p->answer);
		p->answer = NULL;
		if (status != 0 || v == NULL) {
			atomic_fetch_add(&p->sh->errors, 1);
			return WEFT_READY;
		}
		p->to_pong = v;
		p->rounds++;
	}
	/* The end of the chain. */
	if (weft_oneshot_send(p->to_pong, NULL) != 0)
		atomic_fetch_add(&p->sh->errors, 1);
	p->to_pong = NULL;
	weft_cx_return(cx, (void *)(uintptr_t)p->rounds);
	WEFT_ASYNC_END(p);
}

static void pinger_drop(void *arg)
{
	struct pinger *p = arg;

	atomic_fetch_add(&p->sh->drops, 1);
	if (p->to_pong)
		weft_oneshot_tx_drop(p->to_pong);
	if (p->answer)
		weft_oneshot_rx_drop(p->answer);
}

struct ponger {
	struct shared *sh;
	int weft_pc;
	unsigned rounds;
	weft_oneshot_rx_t *from_ping;
};

static weft_poll_t ponger_poll(void *arg, weft_cx_t *cx)
{
	struct ponger *p = arg;
	weft_oneshot_tx_t *next_tx;
	weft_oneshot_rx_t *next_rx;
	void *v = NULL;
	int status = 0;

	WEFT_ASYNC_BEGIN(p);
	for (;;) {
		WEFT_AWAIT(p, weft_oneshot_poll(p->from_ping, cx, &status, &v));
		weft_oneshot_rx_drop(p->from_ping);
		p->from_ping = NULL;
		if (status != 0) {
			atomic_fetch_add(&p->sh->errors, 1);
			return WEFT_READY;
		}
		if (v == NULL)
			break;
		make_channel(p->sh, &next_tx, &next_rx);
		p->from_ping = next_rx;
		if (weft_oneshot_send(v, next_tx) != 0)
			atomic_fetch_add(&p->sh->errors, 1);
		p->rounds++;
	}
	weft_cx_return(cx, (void *)(uintptr_t)p->rounds);
	WEFT_ASYNC_END(p);
}

static void ponger_drop(void *arg)
{
	struct ponger *p = arg;

	atomic_fetch_add(&p->sh->drops, 1);
	if (p->from_ping)
		weft_oneshot_rx_drop(p->from_ping);
}

/* Totals over all runs, for the summary line. */
static unsigned long total_rounds, total_steals;

static void run_once(unsigned workers)
{
	weft_runtime_t *rt = rt_create(workers);
	weft_join_t *pings[PAIRS], *pongs[PAIRS];
	struct shared sh;
	void *out;

	memset(&sh, 0, sizeof(sh));
	for (unsigned i = 0; i < PAIRS; i++) {
		struct pinger pi = { .sh = &sh };
		struct ponger po = { .sh = &sh };

		make_channel(&sh, &pi.to_pong, &po.from_ping);
		/* Either side may start first. */
		if (i % 2) {
			pongs[i] = spawn_ok(rt, ponger_poll, ponger_drop, &po,
					    sizeof(po), true);
			pings[i] = spawn_ok(rt, pinger_poll, pinger_drop, &pi,
					    sizeof(pi), true);
		} else {
			pings[i] = spawn_ok(rt, pinger_poll, pinger_drop, &pi,
					    sizeof(pi), true);
			pongs[i] = spawn_ok(rt, ponger_poll, ponger_drop, &po,
					    sizeof(po), true);
		}
	}
	for (unsigned i = 0; i < PAIRS; i++) {
		out = NULL;
		assert_int_equal(join_wait_drop(pings[i], &out), 0);
		assert_int_equal((uintptr_t)out, ROUNDS);
		out = NULL;
		assert_int_equal(join_wait_drop(pongs[i], &out), 0);
		assert_int_equal((uintptr_t)out, ROUNDS);
	}
	total_rounds += PAIRS * ROUNDS;
	total_steals += worker_sum(rt, WORKER_COUNTER(steals));
	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&sh.errors), 0);
	assert_int_equal(atomic_load(&sh.drops), 2 * PAIRS);
	/* The first channel, then one each way per round. */
	assert_int_equal(atomic_load(&sh.channels), PAIRS * (1 + 2 * ROUNDS));
}

static void test_stress_pingpong(void **state)
{
	unsigned iters = stress_iters(200);

	(void)state;
	for (unsigned i = 0; i < iters; i++)
		run_once(2 + i % 3);
	print_message("stress_pingpong: %u runs: %lu round trips, %lu stolen\n",
		      iters, total_rounds, total_steals);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stress_pingpong),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
