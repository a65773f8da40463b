/* SPDX-License-Identifier: MIT */
/*
 * Wakes by value of a finished task's joiner, a oneshot's receiver and a
 * blocking job's waiter (the completer takes the waker and the free skips
 * its drop), racing with the handles dropped, moved to another task or
 * aborted, with the probe on, off, and toggled while it runs.  A waker
 * dropped twice or never, or a handle freed early, shows under ASan (no
 * task cache there) or TSan; a lost wake leaves a task pending and the
 * round's count short.  From a review of the evfold change.
 *
 * Parents (4000 a round) each take one of six modes: join a child that
 * awaits a oneshot sent (or dropped) by a blocking job (0); drop the join
 * handle while the child runs (1); hand the handle to a mover task that
 * awaits it (2); abort the child (3); detach it (4); await a blocking job
 * and maybe drop its handle before its end (5).
 */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "probe_helpers.h"
#include "weft/blocking.h"
#include "weft/sync.h"

static atomic_uint done_count;
static atomic_uint rnd_state = 12345;

static unsigned rnd(void)
{
	unsigned x = atomic_fetch_add(&rnd_state, 0x9e3779b9u);

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return x;
}

static void *job_send(void *arg)
{
	weft_oneshot_tx_t *tx = arg;
	unsigned r = rnd() % 4;

	if (r == 1)
		usleep(rnd() % 50);
	else if (r == 2)
		sched_yield();
	if (rnd() & 1)
		weft_oneshot_send(tx, NULL);
	else
		weft_oneshot_tx_drop(tx);
	return NULL;
}

static void *job_small(void *arg)
{
	(void)arg;
	if (rnd() & 1)
		usleep(rnd() % 30);
	return NULL;
}

/* child: waits on a oneshot whose sender is a blocking job */
struct child {
	int step;
	weft_oneshot_rx_t *rx;
	int drop_early;
};

static weft_poll_t child_poll(void *arg, weft_cx_t *cx)
{
	struct child *c = arg;

	if (c->step == 0) {
		weft_oneshot_tx_t *tx;
		int err;

		assert_int_equal(weft_oneshot_create(&tx, &c->rx), 0);
		err = weft_spawn_blocking(NULL, job_send, tx, NULL);
		/*
		 * A detached or abandoned child may still run once destroy
		 * has shut the pool: -ESHUTDOWN then, as documented.
		 */
		if (err == -ESHUTDOWN)
			weft_oneshot_tx_drop(tx);
		else
			assert_int_equal(err, 0);
		c->step = 1;
	}
	if (weft_oneshot_poll(c->rx, cx, NULL, NULL) == WEFT_PENDING) {
		if (c->drop_early) {
			/* rx gone concurrently with the send */
			weft_oneshot_rx_drop(c->rx);
			c->rx = NULL;
			return WEFT_READY;
		}
		c->drop_early = (rnd() % 4) == 0;
		return WEFT_PENDING;
	}
	weft_oneshot_rx_drop(c->rx);
	c->rx = NULL;
	return WEFT_READY;
}

static void child_drop(void *arg)
{
	struct child *c = arg;

	if (c->rx)
		weft_oneshot_rx_drop(c->rx);
}

static _Atomic(weft_join_t *) slots[8192];

/* mover: takes a join handle from a slot and awaits it */
struct mover {
	int slot;
	weft_join_t *j;
	int spins;
};

static weft_poll_t mover_poll(void *arg, weft_cx_t *cx)
{
	struct mover *m = arg;

	if (!m->j) {
		m->j = atomic_exchange(&slots[m->slot], NULL);
		if (!m->j) {
			weft_cx_yield(cx);
			return WEFT_PENDING;
		}
	}
	if (weft_join_poll(m->j, cx, NULL, NULL) == WEFT_PENDING)
		return WEFT_PENDING;
	weft_join_drop(m->j);
	m->j = NULL;
	atomic_fetch_add(&done_count, 1);
	return WEFT_READY;
}

struct parent {
	int step, mode, slot;
	weft_runtime_t *rt;
	weft_join_t *j;
	weft_blocking_t *b;
};

static weft_poll_t parent_poll(void *arg, weft_cx_t *cx)
{
	struct parent *p = arg;
	weft_spawn_t spec = { .poll = child_poll,
			      .drop = child_drop,
			      .state = &(struct child){ 0 },
			      .size = sizeof(struct child),
			      .name = "child" };

	if (p->step == 0) {
		p->step = 1;
		if (p->mode == 5) {
			assert_int_equal(weft_spawn_blocking(NULL, job_small,
							     NULL, &p->b),
					 0);
		} else {
			assert_int_equal(weft_spawn_with(p->rt, &spec,
							 p->mode == 4 ? NULL :
									&p->j),
					 0);
			if (p->mode == 4) {
				atomic_fetch_add(&done_count, 1);
				return WEFT_READY;
			}
			if (p->mode == 3)
				weft_join_abort(p->j);
		}
	}
	if (p->mode == 5) {
		if (weft_blocking_poll(p->b, cx, NULL) == WEFT_PENDING) {
			if (rnd() & 1) {
				weft_blocking_drop(p->b);
				p->b = NULL;
				atomic_fetch_add(&done_count, 1);
				return WEFT_READY;
			}
			return WEFT_PENDING;
		}
		weft_blocking_drop(p->b);
		p->b = NULL;
		atomic_fetch_add(&done_count, 1);
		return WEFT_READY;
	}
	if (weft_join_poll(p->j, cx, NULL, NULL) == WEFT_READY) {
		weft_join_drop(p->j);
		p->j = NULL;
		atomic_fetch_add(&done_count, 1);
		return WEFT_READY;
	}
	if (p->mode == 1) {
		/* handle dropped before completion (joiner waker set) */
		weft_join_drop(p->j);
		p->j = NULL;
		atomic_fetch_add(&done_count, 1);
		return WEFT_READY;
	}
	if (p->mode == 2) {
		/* handle moved to another task: its waker replaces ours */
		atomic_store(&slots[p->slot], p->j);
		p->j = NULL;
		return WEFT_READY;
	}
	return WEFT_PENDING;
}

static void run_round(weft_runtime_t *rt, unsigned n)
{
	unsigned expect = 0;
	weft_join_t *js[256];
	unsigned nj = 0;

	atomic_store(&done_count, 0);
	for (unsigned i = 0; i < 8192; i++)
		atomic_store(&slots[i], NULL);
	for (unsigned i = 0; i < n; i++) {
		int mode = (int)(rnd() % 6);
		struct parent p = { .mode = mode, .rt = rt, .slot = (int)i };

		if (mode == 2) {
			spawn_ok(rt, mover_poll, NULL,
				 &(struct mover){ .slot = p.slot },
				 sizeof(struct mover), false);
		}
		expect++;
		js[nj++] = spawn_ok(rt, parent_poll, NULL, &p, sizeof(p),
				    rnd() & 1);
		if (!js[nj - 1])
			nj--;
		if (nj == 256 || i + 1 == n) {
			for (unsigned k = 0; k < nj; k++)
				join_wait_drop(js[k], NULL);
			nj = 0;
		}
	}
	for (int i = 0; i < 20000 && atomic_load(&done_count) < expect; i++)
		usleep(500);
	assert_int_equal(atomic_load(&done_count), expect);
}

static void test_stress_wakers_probe_on(void **state)
{
	struct sink *s;
	weft_probe_sub_t *sub;
	weft_runtime_t *rt = rt_new(2);

	(void)state;
	s = sink_new(true, &sub);
	run_round(rt, 4000);
	weft_probe_flush();
	rt_done(rt);
	sink_free(s, sub);
}

static void test_stress_wakers_probe_off(void **state)
{
	weft_runtime_t *rt = rt_new(2);

	(void)state;
	run_round(rt, 4000);
	rt_done(rt);
}

/* probe toggled while running */
static atomic_bool toggling;
static void *toggler(void *arg)
{
	(void)arg;
	while (atomic_load(&toggling)) {
		struct sink *s;
		weft_probe_sub_t *sub;

		s = sink_new(true, &sub);
		usleep(rnd() % 3000);
		sink_free(s, sub);
		usleep(rnd() % 3000);
	}
	return NULL;
}

static void test_stress_wakers_probe_toggle(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	pthread_t th;

	(void)state;
	atomic_store(&toggling, true);
	pthread_create(&th, NULL, toggler, NULL);
	run_round(rt, 4000);
	atomic_store(&toggling, false);
	pthread_join(th, NULL);
	rt_done(rt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stress_wakers_probe_off),
		cmocka_unit_test(test_stress_wakers_probe_on),
		cmocka_unit_test(test_stress_wakers_probe_toggle),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
