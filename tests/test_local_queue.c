/* SPDX-License-Identifier: MIT */
/*
 * The local run queue (local_queue.c), through its internal API.
 *
 * The tasks here are fake: zeroed weft_task_t headers that only the queue
 * touches (it reads and writes nothing but the slot pointers and, on
 * overflow, queue_next).  No path that reads task state is called.  The
 * overflow path needs a runtime with an initialised inject queue and
 * nothing else, so each test builds a zeroed one.
 *
 * Most cases compare the queue against a model (a plain FIFO of indices)
 * after every operation, including with the free-running u32 indices
 * started just below the wrap.  The last case runs the owner against two
 * thieves and checks that every task comes out exactly once.
 */
#include <stdatomic.h>
#include <string.h>

#include "runtime_internal.h"
#include "test_helpers.h"

#define NFAKE 1024u

struct fixture {
	weft_runtime_t *rt;
	weft_worker_t *w;
	local_queue_t *q;
	local_queue_t *dst;
	weft_task_t *tasks; /* NFAKE fake tasks */
};

static void *xaligned(size_t size)
{
	void *p = aligned_alloc(WEFT_CACHELINE, size);

	assert_non_null(p);
	memset(p, 0, size);
	return p;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->rt = xaligned(sizeof(*f->rt));
	weft__inject_init(&f->rt->inject);
	f->w = xaligned(sizeof(*f->w));
	f->q = xaligned(sizeof(*f->q));
	f->dst = xaligned(sizeof(*f->dst));
	weft__local_queue_init(f->q);
	weft__local_queue_init(f->dst);
	f->tasks = calloc(NFAKE, sizeof(weft_task_t));
	assert_non_null(f->tasks);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	weft__inject_fini(&f->rt->inject);
	free(f->tasks);
	free(f->dst);
	free(f->q);
	free(f->w);
	free(f->rt);
	free(f);
	return 0;
}

static uint64_t head_pack(uint32_t steal, uint32_t real)
{
	return ((uint64_t)steal << 32) | real;
}

/* Starts @q's free-running indices at @start, as if it had run that long. */
static void queue_start_at(local_queue_t *q, uint32_t start)
{
	weft__local_queue_init(q);
	atomic_store(&q->head, head_pack(start, start));
	atomic_store(&q->tail, start);
}

static weft_task_t *task(struct fixture *f, unsigned i)
{
	return &f->tasks[i];
}

/* Pops the whole inject queue; returns how many and stores them in @out. */
static size_t drain_inject(struct fixture *f, weft_task_t **out, size_t max)
{
	size_t total = 0, n;
	weft_task_t *t;

	while ((t = weft__inject_pop_batch(&f->rt->inject, 64, &n)) != NULL) {
		for (size_t i = 0; i < n; i++) {
			assert_non_null(t);
			assert_true(total < max);
			out[total++] = t;
			t = t->queue_next;
		}
		assert_null(t);
	}
	assert_int_equal(weft__inject_len(&f->rt->inject), 0);
	return total;
}

static void test_local_queue_push_pop_fifo(void **state)
{
	struct fixture *f = *state;
	local_queue_t *q = f->q;

	assert_true(weft__local_queue_is_empty(q));
	assert_null(weft__local_queue_pop(q));
	assert_int_equal(weft__local_queue_free(q), LOCAL_QUEUE_CAP);

	for (unsigned i = 0; i < 100; i++) {
		assert_true(weft__local_queue_push(q, task(f, i), f->rt, f->w));
		assert_true(weft__local_queue_is_consistent(q));
		assert_int_equal(weft__local_queue_len(q), i + 1);
		assert_int_equal(weft__local_queue_free(q),
				 LOCAL_QUEUE_CAP - (i + 1));
	}
	for (unsigned i = 0; i < 100; i++) {
		assert_ptr_equal(weft__local_queue_pop(q), task(f, i));
		assert_true(weft__local_queue_is_consistent(q));
		assert_int_equal(weft__local_queue_len(q), 99 - i);
	}
	assert_true(weft__local_queue_is_empty(q));
	assert_null(weft__local_queue_pop(q));

	/* Interleaved: push two, pop one, still FIFO. */
	unsigned next_push = 0, next_pop = 0;

	for (unsigned round = 0; round < 300; round++) {
		assert_true(weft__local_queue_push(
			q, task(f, next_push++ % NFAKE), f->rt, f->w));
		assert_true(weft__local_queue_push(
			q, task(f, next_push++ % NFAKE), f->rt, f->w));
		assert_ptr_equal(weft__local_queue_pop(q),
				 task(f, next_pop++ % NFAKE));
		assert_true(weft__local_queue_is_consistent(q));
		if (weft__local_queue_len(q) == LOCAL_QUEUE_CAP - 2) {
			while (weft__local_queue_pop(q))
				next_pop++;
		}
	}
	while (weft__local_queue_pop(q))
		next_pop++;
	assert_int_equal(next_pop, next_push);
	assert_int_equal(weft__inject_len(&f->rt->inject), 0);
	assert_int_equal(load_relaxed(&f->w->c.overflows), 0);
}

static void check_overflow(struct fixture *f, uint32_t start)
{
	local_queue_t *q = f->q;
	weft_task_t *out[LOCAL_QUEUE_CAP + 1];
	size_t n;

	queue_start_at(q, start);
	store_relaxed(&f->w->c.overflows, 0);
	for (unsigned i = 0; i < LOCAL_QUEUE_CAP; i++) {
		assert_true(weft__local_queue_push(q, task(f, i), f->rt, f->w));
		assert_true(weft__local_queue_is_consistent(q));
	}
	assert_int_equal(weft__local_queue_len(q), LOCAL_QUEUE_CAP);
	assert_int_equal(weft__local_queue_free(q), 0);
	assert_int_equal(weft__inject_len(&f->rt->inject), 0);

	/* The 257th: the oldest half and the new task go global. */
	assert_false(weft__local_queue_push(q, task(f, LOCAL_QUEUE_CAP), f->rt,
					    f->w));
	assert_true(weft__local_queue_is_consistent(q));
	assert_int_equal(load_relaxed(&f->w->c.overflows), 1);
	assert_int_equal(weft__local_queue_len(q), LOCAL_QUEUE_CAP / 2);
	assert_int_equal(weft__inject_len(&f->rt->inject),
			 LOCAL_QUEUE_CAP / 2 + 1);

	n = drain_inject(f, out, LOCAL_QUEUE_CAP + 1);
	assert_int_equal(n, LOCAL_QUEUE_CAP / 2 + 1);
	for (unsigned i = 0; i < LOCAL_QUEUE_CAP / 2; i++)
		assert_ptr_equal(out[i], task(f, i));
	assert_ptr_equal(out[LOCAL_QUEUE_CAP / 2], task(f, LOCAL_QUEUE_CAP));

	/* The newer half stays local, in order. */
	for (unsigned i = LOCAL_QUEUE_CAP / 2; i < LOCAL_QUEUE_CAP; i++)
		assert_ptr_equal(weft__local_queue_pop(q), task(f, i));
	assert_null(weft__local_queue_pop(q));
	assert_true(weft__local_queue_is_consistent(q));
}

static void test_local_queue_overflow_half_to_global(void **state)
{
	struct fixture *f = *state;

	check_overflow(f, 0);
	/* The same with the indices wrapping mid-way. */
	check_overflow(f, UINT32_MAX - 10);
	check_overflow(f, UINT32_MAX - LOCAL_QUEUE_CAP + 1);
}

static void check_steal(struct fixture *f, unsigned n, uint32_t src_start,
			uint32_t dst_start)
{
	local_queue_t *src = f->q, *dst = f->dst;
	unsigned expect = (n + 1) / 2;
	uint32_t stolen = 12345;
	weft_task_t *t;

	queue_start_at(src, src_start);
	queue_start_at(dst, dst_start);
	for (unsigned i = 0; i < n; i++)
		assert_true(
			weft__local_queue_push(src, task(f, i), f->rt, f->w));

	t = weft__local_queue_steal_into(src, dst, &stolen);
	assert_true(weft__local_queue_is_consistent(src));
	assert_true(weft__local_queue_is_consistent(dst));
	if (n == 0) {
		assert_null(t);
		assert_int_equal(stolen, 0);
		return;
	}
	/* ceil(n/2) taken, the oldest; the last of them is handed back. */
	assert_int_equal(stolen, expect);
	assert_ptr_equal(t, task(f, expect - 1));
	assert_int_equal(weft__local_queue_len(dst), expect - 1);
	assert_int_equal(weft__local_queue_len(src), n - expect);
	for (unsigned i = 0; i + 1 < expect; i++)
		assert_ptr_equal(weft__local_queue_pop(dst), task(f, i));
	assert_null(weft__local_queue_pop(dst));
	for (unsigned i = expect; i < n; i++)
		assert_ptr_equal(weft__local_queue_pop(src), task(f, i));
	assert_null(weft__local_queue_pop(src));
	assert_true(weft__local_queue_is_consistent(src));
	assert_true(weft__local_queue_is_consistent(dst));
}

static void test_local_queue_steal_half(void **state)
{
	struct fixture *f = *state;

	for (unsigned n = 0; n <= LOCAL_QUEUE_CAP; n++) {
		check_steal(f, n, 0, 0);
		check_steal(f, n, UINT32_MAX - n / 2, UINT32_MAX - 3);
	}
	assert_int_equal(weft__inject_len(&f->rt->inject), 0);
}

static void test_local_queue_steal_refused_when_dst_busy(void **state)
{
	struct fixture *f = *state;
	local_queue_t *src = f->q, *dst = f->dst;
	uint32_t stolen = 7;

	/* A thief holding more than half a queue of its own does not steal. */
	for (unsigned i = 0; i < 10; i++)
		assert_true(
			weft__local_queue_push(src, task(f, i), f->rt, f->w));
	for (unsigned i = 0; i < LOCAL_QUEUE_CAP / 2 + 1; i++)
		assert_true(weft__local_queue_push(dst, task(f, 100 + i), f->rt,
						   f->w));
	assert_null(weft__local_queue_steal_into(src, dst, &stolen));
	assert_int_equal(stolen, 0);
	assert_int_equal(weft__local_queue_len(src), 10);
	assert_int_equal(weft__local_queue_len(dst), LOCAL_QUEUE_CAP / 2 + 1);

	/* With exactly half it does. */
	assert_ptr_equal(weft__local_queue_pop(dst), task(f, 100));
	assert_ptr_equal(weft__local_queue_steal_into(src, dst, &stolen),
			 task(f, 4));
	assert_int_equal(stolen, 5);
	assert_int_equal(weft__local_queue_len(dst), LOCAL_QUEUE_CAP / 2 + 4);
	assert_int_equal(weft__local_queue_len(src), 5);
	assert_true(weft__local_queue_is_consistent(src));
	assert_true(weft__local_queue_is_consistent(dst));
}

static void test_local_queue_push_batch(void **state)
{
	struct fixture *f = *state;
	local_queue_t *q = f->q;

	queue_start_at(q, UINT32_MAX - 20);
	for (unsigned i = 0; i < 100; i++)
		task(f, i)->queue_next = i + 1 < 100 ? task(f, i + 1) : NULL;
	assert_true(weft__local_queue_free(q) >= 100);
	weft__local_queue_push_batch_unchecked(q, task(f, 0), 100);
	assert_true(weft__local_queue_is_consistent(q));
	assert_int_equal(weft__local_queue_len(q), 100);
	for (unsigned i = 0; i < 100; i++)
		assert_ptr_equal(weft__local_queue_pop(q), task(f, i));
	assert_null(weft__local_queue_pop(q));
}

/* ---------------------------------------------------------------- model */

/* The reference: a FIFO of task indices. */
struct model {
	unsigned v[NFAKE];
	unsigned head, len;
};

static void model_push(struct model *m, unsigned x)
{
	m->v[(m->head + m->len++) % NFAKE] = x;
}

static unsigned model_pop(struct model *m)
{
	unsigned x = m->v[m->head];

	m->head = (m->head + 1) % NFAKE;
	m->len--;
	return x;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/*
 * Random push / pop / steal / drain operations on two queues whose indices
 * start at the given values, checked against the model after each one.
 * Task indices are recycled once they have come out.
 */
static void run_model(struct fixture *f, uint32_t src_start, uint32_t dst_start,
		      uint64_t seed, unsigned ops)
{
	local_queue_t *src = f->q, *dst = f->dst;
	struct model ms = { 0 }, md = { 0 }, free_ids = { 0 };
	weft_task_t *out[LOCAL_QUEUE_CAP + 1];

	queue_start_at(src, src_start);
	queue_start_at(dst, dst_start);
	for (unsigned i = 0; i < NFAKE; i++)
		model_push(&free_ids, i);

	for (unsigned op = 0; op < ops; op++) {
		unsigned r = (unsigned)(xorshift(&seed) % 100);

		if (r < 55 && free_ids.len > 0) {
			/* Push on src (the owner). */
			unsigned id = model_pop(&free_ids);
			bool local = weft__local_queue_push(src, task(f, id),
							    f->rt, f->w);

			if (ms.len < LOCAL_QUEUE_CAP) {
				assert_true(local);
				model_push(&ms, id);
			} else {
				size_t n = drain_inject(f, out,
							LOCAL_QUEUE_CAP + 1);

				assert_false(local);
				assert_int_equal(n, LOCAL_QUEUE_CAP / 2 + 1);
				for (unsigned i = 0; i < LOCAL_QUEUE_CAP / 2;
				     i++) {
					unsigned x = model_pop(&ms);

					assert_ptr_equal(out[i], task(f, x));
					model_push(&free_ids, x);
				}
				assert_ptr_equal(out[n - 1], task(f, id));
				model_push(&free_ids, id);
			}
		} else if (r < 80) {
			/* Pop from src. */
			weft_task_t *t = weft__local_queue_pop(src);

			if (ms.len == 0) {
				assert_null(t);
			} else {
				unsigned x = model_pop(&ms);

				assert_ptr_equal(t, task(f, x));
				model_push(&free_ids, x);
			}
		} else if (r < 92) {
			/* dst steals from src. */
			uint32_t stolen;
			weft_task_t *t =
				weft__local_queue_steal_into(src, dst, &stolen);
			unsigned expect = (ms.len + 1) / 2;

			if (md.len > LOCAL_QUEUE_CAP / 2 || expect == 0) {
				assert_null(t);
				assert_int_equal(stolen, 0);
			} else {
				assert_int_equal(stolen, expect);
				for (unsigned i = 0; i + 1 < expect; i++)
					model_push(&md, model_pop(&ms));
				unsigned x = model_pop(&ms);

				assert_ptr_equal(t, task(f, x));
				model_push(&free_ids, x);
			}
		} else {
			/* dst runs some of its own. */
			unsigned k = (unsigned)(xorshift(&seed) % 8);

			for (unsigned i = 0; i < k; i++) {
				weft_task_t *t = weft__local_queue_pop(dst);

				if (md.len == 0) {
					assert_null(t);
					break;
				}
				unsigned x = model_pop(&md);

				assert_ptr_equal(t, task(f, x));
				model_push(&free_ids, x);
			}
		}
		assert_true(weft__local_queue_is_consistent(src));
		assert_true(weft__local_queue_is_consistent(dst));
		assert_int_equal(weft__local_queue_len(src), ms.len);
		assert_int_equal(weft__local_queue_len(dst), md.len);
		assert_int_equal(weft__local_queue_is_empty(src), ms.len == 0);
		assert_int_equal(weft__local_queue_is_empty(dst), md.len == 0);
	}
	while (ms.len > 0)
		assert_ptr_equal(weft__local_queue_pop(src),
				 task(f, model_pop(&ms)));
	while (md.len > 0)
		assert_ptr_equal(weft__local_queue_pop(dst),
				 task(f, model_pop(&md)));
	assert_null(weft__local_queue_pop(src));
	assert_null(weft__local_queue_pop(dst));
	assert_int_equal(weft__inject_len(&f->rt->inject), 0);
}

static void test_local_queue_model(void **state)
{
	struct fixture *f = *state;
	unsigned ops = scale_count(20000);

	run_model(f, 0, 0, 0x1234567, ops);
}

static void test_local_queue_index_wrap(void **state)
{
	struct fixture *f = *state;
	unsigned ops = scale_count(20000);
	static const uint32_t starts[] = {
		UINT32_MAX,
		UINT32_MAX - 3,
		UINT32_MAX - LOCAL_QUEUE_CAP / 2,
		UINT32_MAX - 1000,
		(uint32_t)INT32_MAX - 7,
	};

	/* A direct run across the wrap first. */
	queue_start_at(f->q, UINT32_MAX - 5);
	for (unsigned i = 0; i < 20; i++) {
		assert_true(
			weft__local_queue_push(f->q, task(f, i), f->rt, f->w));
		assert_true(weft__local_queue_is_consistent(f->q));
	}
	assert_int_equal(load_relaxed(&f->q->tail), 14);
	assert_int_equal(weft__local_queue_len(f->q), 20);
	for (unsigned i = 0; i < 3; i++)
		assert_ptr_equal(weft__local_queue_pop(f->q), task(f, i));
	/* head is now at UINT32_MAX - 2: the steal claim crosses the wrap. */
	uint32_t stolen;

	queue_start_at(f->dst, UINT32_MAX - 1);
	assert_ptr_equal(weft__local_queue_steal_into(f->q, f->dst, &stolen),
			 task(f, 11));
	assert_int_equal(stolen, 9);
	assert_true(weft__local_queue_is_consistent(f->q));
	assert_true(weft__local_queue_is_consistent(f->dst));
	for (unsigned i = 3; i < 11; i++)
		assert_ptr_equal(weft__local_queue_pop(f->dst), task(f, i));
	for (unsigned i = 12; i < 20; i++)
		assert_ptr_equal(weft__local_queue_pop(f->q), task(f, i));
	assert_null(weft__local_queue_pop(f->q));
	assert_null(weft__local_queue_pop(f->dst));

	for (unsigned i = 0; i < sizeof(starts) / sizeof(starts[0]); i++)
		run_model(f, starts[i], starts[(i + 2) % 5], 0x9e3779b9 + i,
			  ops);
}

/* ----------------------------------------------------------- concurrent */

struct race {
	struct fixture *f;
	weft_task_t *tasks;
	unsigned ntasks;
	_Atomic unsigned *seen;
	_Atomic bool owner_done;
	_Atomic unsigned errors;
	_Atomic unsigned long stolen_total;
};

struct thief {
	struct race *r;
	local_queue_t *dst;
};

static void record(struct race *r, weft_task_t *t)
{
	ptrdiff_t i = t - r->tasks;

	if (i < 0 || (size_t)i >= r->ntasks)
		atomic_fetch_add(&r->errors, 1);
	else
		atomic_fetch_add(&r->seen[i], 1);
}

static void *thief_main(void *arg)
{
	struct thief *th = arg;
	struct race *r = th->r;
	local_queue_t *src = r->f->q;

	for (;;) {
		bool done = atomic_load(&r->owner_done);
		uint32_t stolen;
		weft_task_t *t =
			weft__local_queue_steal_into(src, th->dst, &stolen);

		if (t) {
			atomic_fetch_add(&r->stolen_total, stolen);
			record(r, t);
			while ((t = weft__local_queue_pop(th->dst)) != NULL)
				record(r, t);
			if (!weft__local_queue_is_consistent(th->dst))
				atomic_fetch_add(&r->errors, 1);
			continue;
		}
		/* Stop once the owner finished and nothing is left to take. */
		if (done && weft__local_queue_is_empty(src))
			break;
		sched_yield();
	}
	return NULL;
}

static void test_local_queue_concurrent_steal(void **state)
{
	struct fixture *f = *state;
	enum { NTHIEVES = 2 };
	struct race r = { .f = f };
	struct thief th[NTHIEVES];
	pthread_t tid[NTHIEVES];
	weft_task_t **out;
	size_t n;
	unsigned long total = 0;

	r.ntasks = scale_count(200000);
	r.tasks = calloc(r.ntasks, sizeof(weft_task_t));
	r.seen = calloc(r.ntasks, sizeof(*r.seen));
	out = calloc(r.ntasks, sizeof(*out));
	assert_non_null(r.tasks);
	assert_non_null(r.seen);
	assert_non_null(out);

	for (unsigned i = 0; i < NTHIEVES; i++) {
		th[i].r = &r;
		th[i].dst = xaligned(sizeof(local_queue_t));
		weft__local_queue_init(th[i].dst);
		assert_int_equal(
			pthread_create(&tid[i], NULL, thief_main, &th[i]), 0);
	}

	/* The owner: push everything, popping every third time. */
	for (unsigned i = 0; i < r.ntasks; i++) {
		weft__local_queue_push(f->q, &r.tasks[i], f->rt, f->w);
		if (i % 3 == 2) {
			weft_task_t *t = weft__local_queue_pop(f->q);

			if (t)
				record(&r, t);
		}
		if (i % 64 == 0 && !weft__local_queue_is_consistent(f->q))
			atomic_fetch_add(&r.errors, 1);
	}
	for (weft_task_t *t; (t = weft__local_queue_pop(f->q)) != NULL;)
		record(&r, t);
	atomic_store(&r.owner_done, true);

	for (unsigned i = 0; i < NTHIEVES; i++) {
		assert_int_equal(pthread_join(tid[i], NULL), 0);
		assert_true(weft__local_queue_is_empty(th[i].dst));
		free(th[i].dst);
	}
	assert_true(weft__local_queue_is_empty(f->q));
	assert_true(weft__local_queue_is_consistent(f->q));

	/* Whatever overflowed is on the global queue. */
	n = drain_inject(f, out, r.ntasks);
	for (size_t i = 0; i < n; i++)
		record(&r, out[i]);

	assert_int_equal(atomic_load(&r.errors), 0);
	for (unsigned i = 0; i < r.ntasks; i++) {
		unsigned s = atomic_load(&r.seen[i]);

		if (s != 1)
			fail_msg("task %u seen %u times", i, s);
		total += s;
	}
	assert_int_equal(total, r.ntasks);
	print_message("%u tasks: %lu stolen, %zu through the global queue\n",
		      r.ntasks, atomic_load(&r.stolen_total), n);
	free(out);
	free(r.seen);
	free(r.tasks);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_local_queue_push_pop_fifo,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_local_queue_overflow_half_to_global, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_local_queue_steal_half,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_local_queue_steal_refused_when_dst_busy, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_local_queue_push_batch,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_queue_model, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_local_queue_index_wrap,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_local_queue_concurrent_steal, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
