/* SPDX-License-Identifier: MIT */
/*
 * Join handles (join.c): outputs, joining from threads and tasks,
 * weft_join_all, aborts and detaching.  Public API only.
 *
 * Tasks that must stay pending wait on a oneshot the test holds; their drop
 * callback releases the receiver and counts, so "the drop callback runs
 * exactly once" is an exact assertion.
 */
#include <stdatomic.h>
#include <string.h>

#include "test_helpers.h"

struct probe {
	_Atomic unsigned polls;
	_Atomic unsigned drops;
	_Atomic unsigned errors;
	tcount_t polled;  /* +1 at the end of each poll */
	tcount_t entered; /* +1 at the start of each poll */
	tcount_t gate;    /* polls that block wait for >= 1 */
	tcount_t done;    /* +1 when the future is READY */
};

static void probe_init(struct probe *p)
{
	memset(p, 0, sizeof(*p));
	tcount_init(&p->polled);
	tcount_init(&p->entered);
	tcount_init(&p->gate);
	tcount_init(&p->done);
}

static void probe_fini(struct probe *p)
{
	assert_int_equal(atomic_load(&p->errors), 0);
	tcount_fini(&p->done);
	tcount_fini(&p->gate);
	tcount_fini(&p->entered);
	tcount_fini(&p->polled);
}

/* ---------------------------------------------------------------- futures */

/* READY at once with @value; counts polls and drops. */
struct value_fut {
	struct probe *p;
	void *value;
	unsigned yields; /* yield this many times first */
};

static weft_poll_t value_poll(void *arg, weft_cx_t *cx)
{
	struct value_fut *f = arg;

	atomic_fetch_add(&f->p->polls, 1);
	if (f->yields > 0) {
		f->yields--;
		weft_cx_yield(cx);
		return WEFT_PENDING;
	}
	weft_cx_return(cx, f->value);
	tcount_add(&f->p->done, 1);
	return WEFT_READY;
}

static void value_drop(void *arg)
{
	struct value_fut *f = arg;

	atomic_fetch_add(&f->p->drops, 1);
}

static weft_join_t *spawn_value(weft_runtime_t *rt, struct probe *p,
				uintptr_t value, unsigned yields)
{
	struct value_fut f = { .p = p,
			       .value = (void *)value,
			       .yields = yields };

	return spawn_ok(rt, value_poll, value_drop, &f, sizeof(f), true);
}

/* Waits on a oneshot; outputs the value received. */
struct rx_fut {
	struct probe *p;
	weft_oneshot_rx_t *rx;
};

static weft_poll_t rx_poll(void *arg, weft_cx_t *cx)
{
	struct rx_fut *f = arg;
	weft_poll_t r;
	void *v;
	int status;

	atomic_fetch_add(&f->p->polls, 1);
	r = weft_oneshot_poll(f->rx, cx, &status, &v);
	if (r == WEFT_READY) {
		weft_oneshot_rx_drop(f->rx);
		f->rx = NULL;
		weft_cx_return(cx, status ? NULL : v);
		tcount_add(&f->p->done, 1);
	}
	tcount_add(&f->p->polled, 1);
	return r;
}

static void rx_drop(void *arg)
{
	struct rx_fut *f = arg;

	atomic_fetch_add(&f->p->drops, 1);
	if (f->rx)
		weft_oneshot_rx_drop(f->rx);
}

static weft_join_t *spawn_rx(weft_runtime_t *rt, struct probe *p,
			     weft_oneshot_tx_t **tx)
{
	struct rx_fut f = { .p = p };

	assert_int_equal(weft_oneshot_create(tx, &f.rx), 0);
	return spawn_ok(rt, rx_poll, rx_drop, &f, sizeof(f), true);
}

/* Awaits a join handle it owns; outputs status, or the output + 1. */
struct joiner_fut {
	struct probe *p;
	weft_join_t *join;
	bool want_status;
};

static weft_poll_t joiner_poll(void *arg, weft_cx_t *cx)
{
	struct joiner_fut *f = arg;
	void *out = (void *)1;
	int status = 1;

	atomic_fetch_add(&f->p->polls, 1);
	tcount_add(&f->p->entered, 1);
	if (weft_join_poll(f->join, cx, &status, &out) == WEFT_PENDING) {
		tcount_add(&f->p->polled, 1);
		return WEFT_PENDING;
	}
	if (!weft_join_is_finished(f->join))
		atomic_fetch_add(&f->p->errors, 1);
	weft_join_drop(f->join);
	f->join = NULL;
	if (f->want_status)
		weft_cx_return(cx, (void *)(intptr_t)status);
	else
		weft_cx_return(cx, (void *)((uintptr_t)out + 1));
	tcount_add(&f->p->polled, 1);
	return WEFT_READY;
}

static weft_join_t *spawn_joiner(weft_runtime_t *rt, struct probe *p,
				 weft_join_t *join, bool want_status)
{
	struct joiner_fut f = { .p = p,
				.join = join,
				.want_status = want_status };

	return spawn_ok(rt, joiner_poll, NULL, &f, sizeof(f), true);
}

/* Polls a join handle from weft_block_on(). */
struct block_join {
	weft_join_t *join;
	int status;
	void *out;
};

static weft_poll_t block_join_poll(void *arg, weft_cx_t *cx)
{
	struct block_join *b = arg;

	return weft_join_poll(b->join, cx, &b->status, &b->out);
}

/* ------------------------------------------------------------------ tests */

static void test_join_output_reaches_poll_and_wait(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct block_join b = { .status = 99 };
	struct probe p;
	weft_join_t *j;
	void *out = NULL;

	(void)state;
	probe_init(&p);
	j = spawn_value(rt, &p, 0xabc, 3);
	assert_int_equal(weft_join_wait(j, &out), 0);
	assert_ptr_equal(out, (void *)0xabc);
	/* The handle stays valid: again, and with no output pointer. */
	out = NULL;
	assert_int_equal(weft_join_wait(j, &out), 0);
	assert_ptr_equal(out, (void *)0xabc);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);

	/* weft_join_poll under block_on, before and after completion. */
	b.join = spawn_value(rt, &p, 0xdef, 5);
	assert_int_equal(weft_block_on(rt, block_join_poll, &b, NULL), 0);
	assert_int_equal(b.status, 0);
	assert_ptr_equal(b.out, (void *)0xdef);
	b.status = 99;
	b.out = NULL;
	assert_int_equal(weft_block_on(NULL, block_join_poll, &b, NULL), 0);
	assert_int_equal(b.status, 0);
	assert_ptr_equal(b.out, (void *)0xdef);
	weft_join_drop(b.join);

	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&p.polls), 4 + 6);
	assert_int_equal(atomic_load(&p.drops), 2);
	probe_fini(&p);
}

static void test_join_from_another_task(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct probe pv, pj;
	weft_join_t *child, *parent;
	void *out = NULL;

	(void)state;
	probe_init(&pv);
	probe_init(&pj);
	for (unsigned i = 0; i < 20; i++) {
		child = spawn_value(rt, &pv, 100 + i, i % 4);
		parent = spawn_joiner(rt, &pj, child, false);
		assert_int_equal(join_wait_drop(parent, &out), 0);
		assert_ptr_equal(out, (void *)(uintptr_t)(100 + i + 1));
	}
	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&pv.drops), 20);
	probe_fini(&pj);
	probe_fini(&pv);
}

/* Spawns n children, awaits them all with weft_join_all, sums outputs. */
struct all_fut {
	struct probe *p;
	int weft_pc;
	unsigned n;
	size_t cursor;
	weft_join_t **joins;
	void **outs;
};

static weft_poll_t all_poll(void *arg, weft_cx_t *cx)
{
	struct all_fut *f = arg;
	uintptr_t sum = 0;

	WEFT_ASYNC_BEGIN(f);
	for (unsigned i = 0; i < f->n; i++) {
		struct value_fut c = { .p = f->p,
				       .value = (void *)(uintptr_t)(i * 3),
				       .yields = i % 3 };
		weft_spawn_t spec = { .poll = value_poll,
				      .drop = value_drop,
				      .state = &c,
				      .size = sizeof(c) };

		if (weft_spawn_with(NULL, &spec, &f->joins[i]) != 0)
			atomic_fetch_add(&f->p->errors, 1);
	}
	WEFT_AWAIT(f, weft_join_all(f->joins, f->n, f->outs, &f->cursor, cx));
	for (unsigned i = 0; i < f->n; i++) {
		if (f->joins[i] != NULL)
			atomic_fetch_add(&f->p->errors, 1);
		sum += (uintptr_t)f->outs[i];
	}
	weft_cx_return(cx, (void *)sum);
	WEFT_ASYNC_END(f);
}

static void test_join_all(void **state)
{
	enum { N = 64 };
	weft_runtime_t *rt = rt_create(2);
	weft_join_t *joins[N];
	void *outs[N];
	struct all_fut f;
	struct probe p;
	weft_join_t *j;
	void *out;

	(void)state;
	probe_init(&p);
	memset(outs, 0, sizeof(outs));
	f = (struct all_fut){ .p = &p, .n = N, .joins = joins, .outs = outs };
	j = spawn_ok(rt, all_poll, NULL, &f, sizeof(f), true);
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_int_equal((uintptr_t)out, 3 * N * (N - 1) / 2);
	for (unsigned i = 0; i < N; i++) {
		assert_null(joins[i]);
		assert_ptr_equal(outs[i], (void *)(uintptr_t)(i * 3));
	}

	/* Nothing to wait for: READY at once. */
	f = (struct all_fut){ .p = &p, .n = 0, .joins = joins, .outs = outs };
	assert_int_equal(weft_block_on(rt, all_poll, &f, &out), 0);
	assert_null(out);

	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&p.drops), N);
	probe_fini(&p);
}

static void test_join_is_finished(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	weft_oneshot_tx_t *tx;
	struct probe p;
	weft_join_t *j;
	void *out = NULL;

	(void)state;
	probe_init(&p);
	j = spawn_rx(rt, &p, &tx);
	tcount_wait(&p.polled, 1);
	/* Pending on a value only this thread can send. */
	assert_false(weft_join_is_finished(j));
	assert_int_equal(weft_oneshot_send(tx, (void *)0x77), 0);
	assert_int_equal(weft_join_wait(j, &out), 0);
	assert_true(weft_join_is_finished(j));
	assert_ptr_equal(out, (void *)0x77);
	weft_join_drop(j);
	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&p.polls), 2);
	assert_int_equal(atomic_load(&p.drops), 1);
	probe_fini(&p);
}

static void test_join_abort_idle_task(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct probe p, pj;
	weft_oneshot_tx_t *tx;
	weft_join_t *j, *jj, *j2;
	void *out = (void *)1;

	(void)state;
	probe_init(&p);
	probe_init(&pj);

	/* Joined from another task, which sees -ECANCELED. */
	j = spawn_rx(rt, &p, &tx);
	tcount_wait(&p.polled, 1);
	jj = spawn_joiner(rt, &pj, j, true);
	tcount_wait(&pj.polled, 1);
	weft_join_abort(j); /* j now belongs to the joiner task */
	assert_int_equal(join_wait_drop(jj, &out), 0);
	assert_int_equal((intptr_t)out, -ECANCELED);
	assert_int_equal(atomic_load(&p.drops), 1);
	assert_int_equal(atomic_load(&p.polls), 1);
	/* The drop callback released the receiver. */
	assert_int_equal(weft_oneshot_send(tx, (void *)1), -EPIPE);

	/* Joined from this thread; aborting twice changes nothing. */
	j2 = spawn_rx(rt, &p, &tx);
	tcount_wait(&p.polled, 2);
	weft_join_abort(j2);
	weft_join_abort(j2);
	out = (void *)1;
	assert_int_equal(weft_join_wait(j2, &out), -ECANCELED);
	assert_null(out);
	assert_true(weft_join_is_finished(j2));
	weft_join_abort(j2);
	assert_int_equal(weft_join_wait(j2, NULL), -ECANCELED);
	weft_join_drop(j2);
	assert_int_equal(weft_oneshot_send(tx, (void *)1), -EPIPE);

	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&p.drops), 2);
	assert_int_equal(atomic_load(&p.polls), 2);
	assert_int_equal(tcount_get(&p.done), 0);
	probe_fini(&pj);
	probe_fini(&p);
}

/* Blocks in its poll until the gate opens; then PENDING or READY. */
struct stall_fut {
	struct probe *p;
	bool ready;
};

static weft_poll_t stall_poll(void *arg, weft_cx_t *cx)
{
	struct stall_fut *f = arg;

	atomic_fetch_add(&f->p->polls, 1);
	tcount_add(&f->p->entered, 1);
	tcount_wait(&f->p->gate, 1);
	if (!f->ready)
		return WEFT_PENDING; /* no waker: only the abort ends it */
	weft_cx_return(cx, (void *)0x55);
	return WEFT_READY;
}

static void stall_drop(void *arg)
{
	struct stall_fut *f = arg;

	atomic_fetch_add(&f->p->drops, 1);
}

static void test_join_abort_running_task(void **state)
{
	weft_runtime_t *rt = rt_create(2);

	(void)state;
	for (int ready = 0; ready <= 1; ready++) {
		struct stall_fut f;
		struct probe p;
		weft_join_t *j;
		void *out = NULL;
		int err;

		probe_init(&p);
		f = (struct stall_fut){ .p = &p, .ready = ready };
		j = spawn_ok(rt, stall_poll, stall_drop, &f, sizeof(f), true);
		tcount_wait(&p.entered, 1);
		/* Mid-poll: takes effect when the poll returns. */
		weft_join_abort(j);
		assert_false(weft_join_is_finished(j));
		tcount_add(&p.gate, 1);
		err = weft_join_wait(j, &out);
		if (ready) {
			/* The poll finished the task: completion wins. */
			assert_int_equal(err, 0);
			assert_ptr_equal(out, (void *)0x55);
		} else {
			assert_int_equal(err, -ECANCELED);
			assert_null(out);
		}
		weft_join_drop(j);
		/* Not polled again after the abort. */
		assert_int_equal(atomic_load(&p.polls), 1);
		probe_fini(&p);
		/* The drop count is exact once no worker can still be in it. */
		weft_runtime_destroy(rt);
		assert_int_equal(atomic_load(&p.drops), 1);
		if (!ready)
			rt = rt_create(2);
	}
}

static void test_join_abort_after_completion(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct probe p;
	weft_join_t *j;
	void *out = NULL;

	(void)state;
	probe_init(&p);
	j = spawn_value(rt, &p, 0x99, 2);
	assert_int_equal(weft_join_wait(j, &out), 0);
	weft_join_abort(j);
	assert_true(weft_join_is_finished(j));
	out = NULL;
	assert_int_equal(weft_join_wait(j, &out), 0);
	assert_ptr_equal(out, (void *)0x99);
	weft_join_drop(j);
	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&p.polls), 3);
	assert_int_equal(atomic_load(&p.drops), 1);
	probe_fini(&p);
}

static void test_join_drop_detaches(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	weft_oneshot_tx_t *tx;
	struct probe p, pv;
	weft_join_t *j;

	(void)state;
	probe_init(&p);
	probe_init(&pv);

	/* Dropped while the task waits: it still gets its value. */
	j = spawn_rx(rt, &p, &tx);
	tcount_wait(&p.polled, 1);
	weft_join_drop(j);
	assert_int_equal(weft_oneshot_send(tx, (void *)5), 0);
	tcount_wait(&p.done, 1);

	/* Dropped at once: it still runs. */
	for (unsigned i = 0; i < 10; i++)
		weft_join_drop(spawn_value(rt, &pv, i, i % 2));
	weft_join_drop(NULL);
	tcount_wait(&pv.done, 10);

	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&p.polls), 2);
	assert_int_equal(atomic_load(&p.drops), 1);
	assert_int_equal(atomic_load(&pv.polls), 15);
	assert_int_equal(atomic_load(&pv.drops), 10);
	probe_fini(&pv);
	probe_fini(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join_output_reaches_poll_and_wait),
		cmocka_unit_test(test_join_from_another_task),
		cmocka_unit_test(test_join_all),
		cmocka_unit_test(test_join_is_finished),
		cmocka_unit_test(test_join_abort_idle_task),
		cmocka_unit_test(test_join_abort_running_task),
		cmocka_unit_test(test_join_abort_after_completion),
		cmocka_unit_test(test_join_drop_detaches),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
