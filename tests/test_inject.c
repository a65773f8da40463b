/* SPDX-License-Identifier: MIT */
/*
 * The global (inject) queue (runtime/src/inject.c) through its internal
 * API: FIFO order across single and batch pushes, the size of each batch
 * popped, len and is_empty, close dropping the queued tasks' references
 * (and those of every later push), and producers on several threads
 * against one consumer, every task out once and each producer's in order.
 *
 * The tasks are fake: zeroed weft_task_t headers with two references, so
 * that the reference close drops (weft__task_drop_notified()) never is
 * the last one and nothing frees them.  The queue touches nothing else.
 */
#include <stdatomic.h>
#include <string.h>

#include "runtime_internal.h"
#include "test_helpers.h"

#define NTASKS 1024u

struct fixture {
	inject_t q;
	weft_task_t *tasks;
};

static int setup(void **state)
{
	/* inject_t is cache-line aligned: so must its holder be. */
	size_t size = (sizeof(struct fixture) + WEFT_CACHELINE - 1) /
		      WEFT_CACHELINE * WEFT_CACHELINE;
	struct fixture *f = aligned_alloc(WEFT_CACHELINE, size);

	assert_non_null(f);
	memset(f, 0, size);
	weft__inject_init(&f->q);
	f->tasks = calloc(NTASKS, sizeof(weft_task_t));
	assert_non_null(f->tasks);
	for (unsigned i = 0; i < NTASKS; i++) {
		f->tasks[i].id = i;
		atomic_store(&f->tasks[i].state,
			     TASK_NOTIFIED | 2 * TASK_REF_ONE);
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	weft__inject_fini(&f->q);
	free(f->tasks);
	free(f);
	return 0;
}

static uint64_t refs_of(const weft_task_t *t)
{
	return task_refs(atomic_load((_Atomic uint64_t *)&t->state));
}

/*
 * Pops one batch of at most @max; checks it is @want tasks long, linked
 * through queue_next and ended by NULL, and that they are tasks
 * @next, @next + 1, ...; returns the id after the last one.
 */
static uint64_t pop_expect(struct fixture *f, size_t max, size_t want,
			   uint64_t next)
{
	size_t n = 12345, len = weft__inject_len(&f->q);
	weft_task_t *t = weft__inject_pop_batch(&f->q, max, &n);

	assert_int_equal(n, want);
	if (!want)
		assert_null(t);
	for (size_t i = 0; i < want; i++) {
		assert_non_null(t);
		assert_int_equal(t->id, next++);
		t = t->queue_next;
	}
	assert_null(t);
	assert_int_equal(weft__inject_len(&f->q), len - want);
	assert_int_equal(weft__inject_is_empty(&f->q), len == want);
	return next;
}

/* Links tasks [from, to) into a chain; returns the first. */
static weft_task_t *chain(struct fixture *f, unsigned from, unsigned to)
{
	for (unsigned i = from; i + 1 < to; i++)
		f->tasks[i].queue_next = &f->tasks[i + 1];
	f->tasks[to - 1].queue_next = (weft_task_t *)0x1; /* push clears it */
	return &f->tasks[from];
}

static void test_inject_fifo_and_len(void **state)
{
	struct fixture *f = *state;
	uint64_t next = 0;

	assert_true(weft__inject_is_empty(&f->q));
	assert_int_equal(weft__inject_len(&f->q), 0);
	pop_expect(f, 64, 0, 0);
	for (unsigned i = 0; i < 100; i++) {
		assert_true(weft__inject_push(&f->q, &f->tasks[i]));
		assert_int_equal(weft__inject_len(&f->q), i + 1);
		assert_false(weft__inject_is_empty(&f->q));
	}
	/* One at a time, then the rest: in push order. */
	for (unsigned i = 0; i < 10; i++)
		next = pop_expect(f, 1, 1, next);
	next = pop_expect(f, 1000, 90, next);
	assert_int_equal(next, 100);
	pop_expect(f, 1000, 0, next);
	/* Emptied, the queue takes pushes again from its head. */
	assert_true(weft__inject_push(&f->q, &f->tasks[100]));
	pop_expect(f, 1, 1, 100);
	pop_expect(f, 1, 0, 101);
	/* The references are the caller's: the queue took and dropped none. */
	for (unsigned i = 0; i < 101; i++)
		assert_int_equal(refs_of(&f->tasks[i]), 2);
}

static void test_inject_batch_sizes(void **state)
{
	struct fixture *f = *state;
	const size_t sizes[] = { 1, 2, 3, 5, 8, 13, 21, 34, 55, 89 };
	uint64_t next = 0;

	/* Batches and single pushes mixed keep one FIFO. */
	assert_true(weft__inject_push_batch(&f->q, chain(f, 0, 50),
					    &f->tasks[49], 50));
	assert_true(weft__inject_push(&f->q, &f->tasks[50]));
	assert_true(weft__inject_push_batch(&f->q, chain(f, 51, 52),
					    &f->tasks[51], 1));
	assert_true(weft__inject_push_batch(&f->q, chain(f, 52, 300),
					    &f->tasks[299], 248));
	assert_int_equal(weft__inject_len(&f->q), 300);
	/* A batch is min(max, len); max 0 takes nothing. */
	pop_expect(f, 0, 0, next);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		next = pop_expect(f, sizes[i], sizes[i], next);
	assert_int_equal(next, 231);
	next = pop_expect(f, 70, 69, next);
	assert_int_equal(next, 300);
	pop_expect(f, 70, 0, next);
}

static void test_inject_close_drops_queued(void **state)
{
	struct fixture *f = *state;

	for (unsigned i = 0; i < 10; i++)
		assert_true(weft__inject_push(&f->q, &f->tasks[i]));
	assert_true(weft__inject_push_batch(&f->q, chain(f, 10, 20),
					    &f->tasks[19], 10));
	weft__inject_close(&f->q);
	/* Each queued task lost the queue's reference, and the queue. */
	for (unsigned i = 0; i < 20; i++)
		assert_int_equal(refs_of(&f->tasks[i]), 1);
	assert_true(weft__inject_is_empty(&f->q));
	pop_expect(f, 64, 0, 0);
	/* Closed: a push is refused and drops its task's reference. */
	assert_false(weft__inject_push(&f->q, &f->tasks[20]));
	assert_false(weft__inject_push_batch(&f->q, chain(f, 21, 31),
					     &f->tasks[30], 10));
	for (unsigned i = 20; i < 31; i++)
		assert_int_equal(refs_of(&f->tasks[i]), 1);
	for (unsigned i = 31; i < NTASKS; i++)
		assert_int_equal(refs_of(&f->tasks[i]), 2);
	assert_true(weft__inject_is_empty(&f->q));
	pop_expect(f, 64, 0, 0);
}

/* ------------------------------------------------------- threads */

#define PRODUCERS 4u

struct crowd {
	struct fixture *f;
	weft_task_t *tasks; /* PRODUCERS * per, id = producer << 32 | seq */
	unsigned per;
};

struct producer {
	struct crowd *c;
	unsigned index;
};

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	struct crowd *c = p->c;
	weft_task_t *mine = &c->tasks[(size_t)p->index * c->per];

	for (unsigned i = 0; i < c->per;) {
		/* Alternately one task and a batch of up to 7. */
		unsigned n = i % 2 ? 1 : 7;

		if (n > c->per - i)
			n = c->per - i;
		for (unsigned k = 0; k + 1 < n; k++)
			mine[i + k].queue_next = &mine[i + k + 1];
		if (n == 1)
			weft__inject_push(&c->f->q, &mine[i]);
		else
			weft__inject_push_batch(&c->f->q, &mine[i],
						&mine[i + n - 1], n);
		i += n;
	}
	return NULL;
}

/*
 * Producers on their own threads, the test thread popping batches of
 * varied sizes meanwhile: every task comes out once, each producer's in
 * its push order.
 */
static void test_inject_producers_one_consumer(void **state)
{
	struct fixture *f = *state;
	struct crowd c = { .f = f, .per = scale_count(50000) };
	struct producer p[PRODUCERS];
	uint64_t next[PRODUCERS] = { 0 };
	size_t got = 0, total, max = 1;
	pthread_t th[PRODUCERS];
	unsigned bad = 0;

	total = (size_t)PRODUCERS * c.per;
	c.tasks = calloc(total, sizeof(weft_task_t));
	assert_non_null(c.tasks);
	for (size_t i = 0; i < total; i++) {
		c.tasks[i].id = ((i / c.per) << 32) | (i % c.per);
		atomic_store(&c.tasks[i].state,
			     TASK_NOTIFIED | 2 * TASK_REF_ONE);
	}
	for (unsigned i = 0; i < PRODUCERS; i++) {
		p[i] = (struct producer){ &c, i };
		assert_int_equal(
			pthread_create(&th[i], NULL, producer_main, &p[i]), 0);
	}
	while (got < total) {
		size_t n;
		weft_task_t *t = weft__inject_pop_batch(&f->q, max, &n);

		max = max % 61 + 1;
		if (!t) {
			sched_yield();
			continue;
		}
		for (size_t i = 0; i < n; i++, t = t->queue_next) {
			uint64_t who = t->id >> 32;

			if (who >= PRODUCERS ||
			    (t->id & 0xffffffffu) != next[who])
				bad++;
			else
				next[who]++;
		}
		if (t)
			bad++;
		got += n;
	}
	for (unsigned i = 0; i < PRODUCERS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(bad, 0);
	for (unsigned i = 0; i < PRODUCERS; i++)
		assert_int_equal(next[i], c.per);
	assert_true(weft__inject_is_empty(&f->q));
	free(c.tasks);
}

/* ------------------------------------------- consumers and a close */

#define CONSUMERS 2u

struct race {
	struct fixture *f;
	weft_task_t *tasks; /* PRODUCERS * per, id = producer << 32 | seq */
	unsigned per;
	_Atomic unsigned *popped; /* per task: times it came out */
	pthread_barrier_t half;   /* producers halfway, and the closer */
	atomic_bool closed;       /* set once weft__inject_close() returned */
	atomic_bool stop;
	atomic_uint refused; /* pushes the closed queue refused */
	atomic_uint unended; /* batches not ended by NULL */
};

struct racer {
	struct race *r;
	unsigned index;
};

/* Pushes tasks [from, to) of @mine, alternately one and a batch of 3. */
static void push_range(struct race *r, weft_task_t *mine, unsigned from,
		       unsigned to)
{
	for (unsigned i = from; i < to;) {
		unsigned n = i % 2 ? 1 : 3;
		bool ok;

		if (n > to - i)
			n = to - i;
		for (unsigned k = 0; k + 1 < n; k++)
			mine[i + k].queue_next = &mine[i + k + 1];
		ok = weft__inject_push_batch(&r->f->q, &mine[i],
					     &mine[i + n - 1], n);
		if (!ok)
			atomic_fetch_add(&r->refused, 1);
		i += n;
	}
}

/*
 * Half its tasks, then the closer's barrier, then the rest but the last
 * while the queue is being closed, then the last once it is closed (so
 * that at least one push meets the closed queue, whatever the timing).
 */
static void *racer_main(void *arg)
{
	struct racer *p = arg;
	struct race *r = p->r;
	weft_task_t *mine = &r->tasks[(size_t)p->index * r->per];

	push_range(r, mine, 0, r->per / 2);
	pthread_barrier_wait(&r->half);
	push_range(r, mine, r->per / 2, r->per - 1);
	while (!atomic_load(&r->closed))
		sched_yield();
	push_range(r, mine, r->per - 1, r->per);
	return NULL;
}

static void *consumer_main(void *arg)
{
	struct race *r = arg;
	size_t max = 1;

	while (!atomic_load(&r->stop)) {
		size_t n;
		weft_task_t *t = weft__inject_pop_batch(&r->f->q, max, &n);

		max = max % 37 + 1;
		if (!t) {
			sched_yield();
			continue;
		}
		for (size_t i = 0; i < n; i++, t = t->queue_next) {
			size_t idx = (size_t)(t->id >> 32) * r->per +
				     (t->id & 0xffffffffu);

			atomic_fetch_add(&r->popped[idx], 1);
		}
		if (t)
			atomic_fetch_add(&r->unended, 1);
	}
	return NULL;
}

/*
 * Producers and two consumers on their own threads, and a close while the
 * producers push their second halves: every task comes out exactly once,
 * either popped (its references untouched) or dropped, by the close or
 * by the push that met the closed queue (one reference less), and len
 * ends at 0.
 */
static void test_inject_close_races_pushes(void **state)
{
	struct fixture *f = *state;
	struct race r = { .f = f, .per = scale_count(40000) };
	struct racer p[PRODUCERS];
	pthread_t th[PRODUCERS], ct[CONSUMERS];
	size_t total, dropped = 0, popped = 0, bad = 0;

	total = (size_t)PRODUCERS * r.per;
	r.tasks = calloc(total, sizeof(weft_task_t));
	r.popped = calloc(total, sizeof(*r.popped));
	assert_non_null(r.tasks);
	assert_non_null(r.popped);
	assert_int_equal(pthread_barrier_init(&r.half, NULL, PRODUCERS + 1), 0);
	for (size_t i = 0; i < total; i++) {
		r.tasks[i].id = ((i / r.per) << 32) | (i % r.per);
		atomic_store(&r.tasks[i].state,
			     TASK_NOTIFIED | 2 * TASK_REF_ONE);
	}
	for (unsigned i = 0; i < CONSUMERS; i++)
		assert_int_equal(
			pthread_create(&ct[i], NULL, consumer_main, &r), 0);
	for (unsigned i = 0; i < PRODUCERS; i++) {
		p[i] = (struct racer){ &r, i };
		assert_int_equal(
			pthread_create(&th[i], NULL, racer_main, &p[i]), 0);
	}
	pthread_barrier_wait(&r.half);
	weft__inject_close(&f->q);
	atomic_store(&r.closed, true);
	for (unsigned i = 0; i < PRODUCERS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	atomic_store(&r.stop, true);
	for (unsigned i = 0; i < CONSUMERS; i++)
		assert_int_equal(pthread_join(ct[i], NULL), 0);
	for (size_t i = 0; i < total; i++) {
		unsigned out = atomic_load(&r.popped[i]);
		uint64_t refs = refs_of(&r.tasks[i]);

		if (out + (2 - refs) != 1)
			bad++;
		popped += out;
		dropped += 2 - refs;
	}
	print_message("%zu tasks popped, %zu dropped, %u pushes refused\n",
		      popped, dropped, atomic_load(&r.refused));
	assert_int_equal(bad, 0);
	assert_int_equal(atomic_load(&r.unended), 0);
	assert_int_equal(popped + dropped, total);
	assert_true(atomic_load(&r.refused) >= PRODUCERS);
	assert_int_equal(weft__inject_len(&f->q), 0);
	assert_true(weft__inject_is_empty(&f->q));
	pthread_barrier_destroy(&r.half);
	free(r.popped);
	free(r.tasks);
}

/* ------------------------------------------------- emptiness, looked at */

struct looker {
	struct fixture *f;
	atomic_bool stop;
	atomic_ulong looks, empty;
};

static void *looker_main(void *arg)
{
	struct looker *l = arg;

	while (!atomic_load(&l->stop)) {
		if (weft__inject_is_empty(&l->f->q))
			atomic_fetch_add(&l->empty, 1);
		atomic_fetch_add(&l->looks, 1);
	}
	return NULL;
}

/*
 * Two tasks go round: a consumer pops one at a time and pushes it back,
 * so one is always queued, while another thread asks whether the queue
 * is empty.  It must never hear yes: a parking worker that did would
 * sleep with a task queued behind a worker busy elsewhere.  (The first
 * lock-free version read emptiness from the stack pointer, which a
 * consumer empties before it counts what it moved: yes in 5% of looks.)
 */
static void test_inject_never_empty_while_queued(void **state)
{
	struct fixture *f = *state;
	struct looker l = { .f = f };
	unsigned rounds = scale_count(200000), lost = 0;
	pthread_t th;

	assert_true(weft__inject_push(&f->q, &f->tasks[0]));
	assert_true(weft__inject_push(&f->q, &f->tasks[1]));
	assert_int_equal(pthread_create(&th, NULL, looker_main, &l), 0);
	while (atomic_load(&l.looks) == 0)
		sched_yield();
	/* At least @rounds of each, the looks counted while we go round. */
	for (unsigned i = 0; i < rounds || atomic_load(&l.looks) < rounds;
	     i++) {
		size_t n;
		weft_task_t *t = weft__inject_pop_batch(&f->q, 1, &n);

		if (!t || n != 1) {
			lost++;
			break;
		}
		assert_true(weft__inject_push(&f->q, t));
	}
	atomic_store(&l.stop, true);
	assert_int_equal(pthread_join(th, NULL), 0);
	print_message("%lu looks, %lu said empty\n", atomic_load(&l.looks),
		      atomic_load(&l.empty));
	assert_int_equal(lost, 0);
	assert_int_equal(atomic_load(&l.empty), 0);
	assert_int_equal(weft__inject_len(&f->q), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_inject_fifo_and_len, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_inject_batch_sizes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_inject_close_drops_queued,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_inject_producers_one_consumer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inject_close_races_pushes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_inject_never_empty_while_queued, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
