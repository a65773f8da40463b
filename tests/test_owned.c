/* SPDX-License-Identifier: MIT */
/*
 * The owned list (runtime/src/owned.c) through its internal API: insert,
 * remove, pop and count across the shards, close refusing inserts (and
 * keeping what it holds), take_idle taking exactly the tasks it can claim
 * (not those running or complete) and marking them, describe and
 * shard_info copying what the probe shows of a task, and inserts and
 * removes on several threads at once.
 *
 * The tasks are fake: zeroed weft_task_t headers with an id, a name and
 * a state word.  Only weft__task_claim_idle() (take_idle) reads the state;
 * nothing frees them.
 */
#include <stdatomic.h>
#include <string.h>

#include "runtime_internal.h"
#include "test_helpers.h"

#define NFAKE 1000u

struct fixture {
	owned_t *o;
	weft_task_t *tasks;
	weft__spawn_rec_t *recs; /* one a task */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->o = aligned_alloc(WEFT_CACHELINE, sizeof(*f->o));
	assert_non_null(f->o);
	weft__owned_init(f->o);
	f->tasks = calloc(NFAKE, sizeof(weft_task_t));
	assert_non_null(f->tasks);
	f->recs = calloc(NFAKE, sizeof(weft__spawn_rec_t));
	assert_non_null(f->recs);
	for (unsigned i = 0; i < NFAKE; i++) {
		weft_task_t *t = &f->tasks[i];
		weft__spawn_rec_t *r = &f->recs[i];

		t->id = 1000 + i; /* every shard, several times */
		r->name = "fake";
		r->file = "test_owned.c";
		r->line = (int)i;
		r->state_size = 16 * i;
		r->kind = (uint8_t)(i % 3);
		t->rec = r;
		atomic_store(&t->state, TASK_REF_ONE);
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	weft__owned_fini(f->o);
	free(f->o);
	free(f->tasks);
	free(f->recs);
	free(f);
	return 0;
}

static unsigned index_of(struct fixture *f, const weft_task_t *t)
{
	assert_true(t >= f->tasks && t < f->tasks + NFAKE);
	return (unsigned)(t - f->tasks);
}

static void test_owned_insert_remove_pop_count(void **state)
{
	struct fixture *f = *state;
	bool seen[NFAKE] = { false };
	unsigned popped = 0;
	weft_task_t *t;

	assert_int_equal(weft__owned_count(f->o), 0);
	assert_null(weft__owned_pop(f->o));
	for (unsigned i = 0; i < NFAKE; i++) {
		assert_true(weft__owned_insert(f->o, &f->tasks[i]));
		assert_int_equal(weft__owned_count(f->o), i + 1);
	}
	/* Removed from the head, the middle and the tail of their lists. */
	for (unsigned i = 0; i < NFAKE; i += 2)
		weft__owned_remove(f->o, &f->tasks[i]);
	assert_int_equal(weft__owned_count(f->o), NFAKE / 2);
	/* Pop hands out each one left once, then nothing. */
	while ((t = weft__owned_pop(f->o)) != NULL) {
		unsigned i = index_of(f, t);

		assert_true(i % 2 == 1);
		assert_false(seen[i]);
		seen[i] = true;
		assert_null(t->owned_next);
		assert_null(t->owned_prev);
		popped++;
		assert_int_equal(weft__owned_count(f->o), NFAKE / 2 - popped);
	}
	assert_int_equal(popped, NFAKE / 2);
	assert_int_equal(weft__owned_count(f->o), 0);
}

static void test_owned_close_refuses_inserts(void **state)
{
	struct fixture *f = *state;

	for (unsigned i = 0; i < 100; i++)
		assert_true(weft__owned_insert(f->o, &f->tasks[i]));
	weft__owned_close(f->o);
	/* Every shard refuses, whatever the id. */
	for (unsigned i = 100; i < 200; i++)
		assert_false(weft__owned_insert(f->o, &f->tasks[i]));
	assert_int_equal(weft__owned_count(f->o), 100);
	/* What it held is still there to take, and removable. */
	weft__owned_remove(f->o, &f->tasks[7]);
	assert_int_equal(weft__owned_count(f->o), 99);
	for (unsigned i = 0; i < 99; i++) {
		weft_task_t *t = weft__owned_pop(f->o);

		assert_non_null(t);
		assert_true(index_of(f, t) < 100);
		assert_true(index_of(f, t) != 7);
	}
	assert_null(weft__owned_pop(f->o));
}

/*
 * take_idle claims the idle tasks (RUNNING | CANCELLED, NOTIFIED kept)
 * and leaves those being polled or complete on the list.
 */
static void test_owned_take_idle(void **state)
{
	struct fixture *f = *state;
	bool taken[NFAKE] = { false };
	unsigned ntaken = 0, nidle = 0;
	weft_task_t *t;

	for (unsigned i = 0; i < 300; i++) {
		uint64_t s = TASK_REF_ONE;

		switch (i % 4) {
		case 1:
			s |= TASK_RUNNING;
			break;
		case 2:
			s |= TASK_COMPLETE;
			break;
		case 3:
			s |= TASK_NOTIFIED; /* queued, not running: idle */
			break;
		}
		atomic_store(&f->tasks[i].state, s);
		nidle += i % 4 == 0 || i % 4 == 3;
		assert_true(weft__owned_insert(f->o, &f->tasks[i]));
	}
	for (t = weft__owned_take_idle(f->o); t; t = t->owned_next) {
		unsigned i = index_of(f, t);
		uint64_t s = atomic_load(&t->state);

		assert_true(i % 4 == 0 || i % 4 == 3);
		assert_false(taken[i]);
		taken[i] = true;
		ntaken++;
		assert_true(s & TASK_RUNNING);
		assert_true(s & TASK_CANCELLED);
		assert_int_equal(!!(s & TASK_NOTIFIED), i % 4 == 3);
		assert_int_equal(task_refs(s), 1);
	}
	assert_int_equal(ntaken, nidle);
	assert_int_equal(weft__owned_count(f->o), 300 - nidle);
	/* Those left are untouched; nothing more to take. */
	for (unsigned i = 0; i < 300; i++) {
		uint64_t s = atomic_load(&f->tasks[i].state);

		if (i % 4 == 1)
			assert_int_equal(s, TASK_REF_ONE | TASK_RUNNING);
		else if (i % 4 == 2)
			assert_int_equal(s, TASK_REF_ONE | TASK_COMPLETE);
	}
	assert_null(weft__owned_take_idle(f->o));
	assert_int_equal(weft__owned_count(f->o), 300 - nidle);
}

static void test_owned_describe_and_shard_info(void **state)
{
	struct fixture *f = *state;
	weft__task_info_t info, many[NFAKE];
	size_t n, total = 0;

	for (unsigned i = 0; i < 500; i++)
		assert_true(weft__owned_insert(f->o, &f->tasks[i]));
	weft__owned_remove(f->o, &f->tasks[123]);
	for (unsigned i = 0; i < 500; i += 7) {
		memset(&info, 0xee, sizeof(info));
		if (i == 123) {
			assert_false(weft__owned_describe(f->o, &f->tasks[i],
							  &info));
			continue;
		}
		assert_true(weft__owned_describe(f->o, &f->tasks[i], &info));
		assert_int_equal(info.id, 1000 + i);
		assert_string_equal(info.name, "fake");
		assert_string_equal(info.file, "test_owned.c");
		assert_int_equal(info.line, i);
		assert_int_equal(info.state_size, 16 * i);
		assert_int_equal(info.kind, i % 3);
	}
	assert_false(weft__owned_describe(f->o, &f->tasks[123], &info));
	/* Never inserted: not found. */
	assert_false(weft__owned_describe(f->o, &f->tasks[700], &info));

	/* Each shard: its count when too small a buffer, else its tasks. */
	for (unsigned s = 0; s < OWNED_SHARDS; s++) {
		size_t want = weft__owned_shard_info(f->o, s, many, 0);

		n = weft__owned_shard_info(f->o, s, many, NFAKE);
		assert_int_equal(n, want);
		for (size_t k = 0; k < n; k++) {
			assert_int_equal(many[k].id % OWNED_SHARDS, s);
			assert_true(many[k].id != 1123);
			assert_int_equal(many[k].line, many[k].id - 1000);
		}
		total += n;
	}
	assert_int_equal(total, 499);
}

/* ------------------------------------------------------- threads */

#define THREADS 4u

struct churn {
	struct fixture *f;
	unsigned index;
	unsigned rounds;
};

/*
 * Each thread owns a quarter of the tasks, a run of consecutive ids (so
 * that the threads share every shard: the shard is the id's low bits),
 * and inserts and removes them over and over.
 */
static void *churn_main(void *arg)
{
	struct churn *c = arg;
	owned_t *o = c->f->o;
	unsigned from = c->index * (NFAKE / THREADS);
	unsigned to = from + NFAKE / THREADS;

	for (unsigned r = 0; r < c->rounds; r++) {
		for (unsigned i = from; i < to; i++)
			if (!weft__owned_insert(o, &c->f->tasks[i]))
				return (void *)1;
		for (unsigned i = from; i < to; i++)
			if (r + 1 < c->rounds || i % 2)
				weft__owned_remove(o, &c->f->tasks[i]);
	}
	return NULL;
}

static void test_owned_threads_churn(void **state)
{
	struct fixture *f = *state;
	struct churn c[THREADS];
	pthread_t th[THREADS];
	unsigned left = 0;
	weft_task_t *t;

	for (unsigned i = 0; i < THREADS; i++) {
		c[i] = (struct churn){ f, i, scale_count(200) };
		assert_int_equal(
			pthread_create(&th[i], NULL, churn_main, &c[i]), 0);
	}
	for (unsigned i = 0; i < THREADS; i++) {
		void *ret;

		assert_int_equal(pthread_join(th[i], &ret), 0);
		assert_null(ret);
	}
	/* The even ones stayed from the last round, every one of them. */
	assert_int_equal(weft__owned_count(f->o), NFAKE / 2);
	while ((t = weft__owned_pop(f->o)) != NULL) {
		assert_int_equal(index_of(f, t) % 2, 0);
		left++;
	}
	assert_int_equal(left, NFAKE / 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_owned_insert_remove_pop_count, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_owned_close_refuses_inserts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_owned_take_idle, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_owned_describe_and_shard_info, setup, teardown),
		cmocka_unit_test_setup_teardown(test_owned_threads_churn, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
