/* SPDX-License-Identifier: MIT */
/*
 * The owned list (runtime/src/owned.c) through its internal API: insert,
 * remove, pop and count across the shards, close refusing inserts (and
 * keeping what it holds), take_idle taking exactly the tasks it can claim
 * (not those running or complete) and marking them, describe and
 * shard_info copying what the probe shows of a task, and inserts and
 * removes on several threads at once; a shard's walk let go in parts,
 * changed between them, alone and beside threads that churn it.
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

/* ------------------------------------------------ a shard walked in parts */

#define BIG 2000u /* one shard's tasks: several parts of a walk */
#define EXTRA 64u /* inserted while it walks */
#define BIG_SHARD 5u

struct big {
	owned_t *o;
	weft_task_t *tasks; /* BIG + EXTRA */
	weft__spawn_rec_t rec;
	bool removed[BIG + EXTRA];
	bool walked[BIG + EXTRA]; /* copied by the walk before the hook ran */
	unsigned hook_calls, added;
	bool lock_was_held;
};

static struct big *g_big;

static unsigned big_index(uint64_t id)
{
	assert_int_equal(id % OWNED_SHARDS, BIG_SHARD);
	return (unsigned)(id / OWNED_SHARDS);
}

/*
 * Between two parts of the walk: the shard's lock must be free (a CAS
 * takes it, not a wait, and it reads the walk's place; the rest runs on
 * this one thread with the lock free again); then the next task the walk
 * would copy, one further on and one it already copied leave the list,
 * and a new task joins it.
 */
static void big_hook(owned_shard_t *s)
{
	struct big *b = g_big;
	uint32_t z = 0;
	weft_task_t *next, *ahead, *behind;
	unsigned k;

	b->hook_calls++;
	if (!atomic_compare_exchange_strong(&s->lock.state, &z, 1)) {
		b->lock_was_held = true;
		return;
	}
	next = s->walk_at;
	ahead = next ? next->owned_next : NULL;
	ahead = ahead ? ahead->owned_next : NULL;
	/* Copied already: behind the walk, toward the head. */
	behind = next ? next->owned_prev : NULL;
	atomic_store(&s->lock.state, 0);
	if (!next)
		return;
	/* Every task the walk has passed, with next: the one before it. */
	for (weft_task_t *t = s->head; t && t != next; t = t->owned_next)
		b->walked[big_index(t->id)] = true;
	weft__owned_remove(b->o, next);
	b->removed[big_index(next->id)] = true;
	if (ahead) {
		weft__owned_remove(b->o, ahead);
		b->removed[big_index(ahead->id)] = true;
	}
	if (behind) {
		weft__owned_remove(b->o, behind);
		b->removed[big_index(behind->id)] = true;
	}
	if (b->added < EXTRA) {
		k = BIG + b->added++;
		assert_true(weft__owned_insert(b->o, &b->tasks[k]));
	}
}

static struct big *big_new(owned_t *o)
{
	struct big *b = calloc(1, sizeof(*b));

	assert_non_null(b);
	b->o = o;
	b->tasks = calloc(BIG + EXTRA, sizeof(weft_task_t));
	assert_non_null(b->tasks);
	b->rec.name = "big";
	b->rec.file = "test_owned.c";
	for (unsigned i = 0; i < BIG + EXTRA; i++) {
		b->tasks[i].id = (uint64_t)i * OWNED_SHARDS + BIG_SHARD;
		b->tasks[i].rec = &b->rec;
		atomic_store(&b->tasks[i].state, TASK_REF_ONE);
	}
	for (unsigned i = 0; i < BIG; i++)
		assert_true(weft__owned_insert(o, &b->tasks[i]));
	return b;
}

/*
 * A shard of 2,000 tasks is walked in parts, its lock let go between
 * them (an audit's dispatcher waited out whole walks of 4,700, asleep,
 * 20-85 ms a poll).  Changed between the parts, the walk still copies
 * exactly the tasks on the list when it began and still on it when it
 * came to them, each once: not the next one removed under it, nor one
 * removed further on, nor one inserted; one removed after it was copied
 * stays copied.
 */
static void test_owned_shard_walk_lets_go(void **state)
{
	struct fixture *f = *state;
	struct big *b = big_new(f->o);
	weft__task_info_t *out = calloc(BIG + EXTRA, sizeof(*out));
	bool seen[BIG + EXTRA] = { false };
	size_t n;

	assert_non_null(out);
	g_big = b;
	weft__owned_walk_hook = big_hook;
	/* Too small a buffer: the count, no walk. */
	assert_int_equal(weft__owned_shard_info(f->o, BIG_SHARD, out, 10), BIG);
	assert_int_equal(b->hook_calls, 0);
	n = weft__owned_shard_info(f->o, BIG_SHARD, out, BIG + EXTRA);
	weft__owned_walk_hook = NULL;

	assert_false(b->lock_was_held);
	/* 2,000 tasks, 64 a part, two fewer at each: about 30 parts. */
	assert_true(b->hook_calls >= 20);
	assert_true(b->added >= 6);
	for (size_t k = 0; k < n; k++) {
		unsigned i = big_index(out[k].id);

		assert_false(seen[i]); /* once */
		seen[i] = true;
		assert_string_equal(out[k].name, "big");
	}
	for (unsigned i = 0; i < BIG + EXTRA; i++) {
		bool want = i < BIG && (!b->removed[i] || b->walked[i]);

		if (seen[i] != want)
			fail_msg("task %u (removed %d, walked %d): copied %d",
				 i, b->removed[i], b->walked[i], seen[i]);
	}
	/* The walk left no cursor behind; the list holds what it should. */
	assert_null(f->o->shards[BIG_SHARD].walk_at);
	{
		unsigned gone = 0;

		for (unsigned i = 0; i < BIG + EXTRA; i++)
			gone += b->removed[i];
		assert_int_equal(weft__owned_count(f->o),
				 BIG + b->added - gone);
	}
	free(out);
	free(b->tasks);
	free(b);
}

struct walk_churn {
	struct big *b;
	unsigned index;
	unsigned rounds;
};

/* Thread @index inserts and removes the odd tasks i with i / 2 % 2 ==
 * index, over and over, on the shard being walked. */
static atomic_uint g_parts;

static void count_hook(owned_shard_t *s)
{
	(void)s;
	atomic_fetch_add(&g_parts, 1);
}

static void *walk_churn_main(void *arg)
{
	struct walk_churn *c = arg;

	for (unsigned r = 0; r < c->rounds; r++) {
		for (unsigned i = 1 + 2 * c->index; i < BIG; i += 4)
			if (!weft__owned_insert(c->b->o, &c->b->tasks[i]))
				return (void *)1;
		for (unsigned i = 1 + 2 * c->index; i < BIG; i += 4)
			weft__owned_remove(c->b->o, &c->b->tasks[i]);
	}
	return NULL;
}

/*
 * Walks of a 1,000-task shard in parts while two threads insert and
 * remove 1,000 more on it: every walk copies each of the tasks that
 * stay (the even ones) exactly once and no task twice.  Under
 * ThreadSanitizer: the cursor is read and moved only under the lock.
 */
static void test_owned_shard_walk_threads(void **state)
{
	struct fixture *f = *state;
	struct big *b = calloc(1, sizeof(*b));
	weft__task_info_t *out = calloc(BIG, sizeof(*out));
	struct walk_churn c[2];
	pthread_t th[2];
	unsigned walks = scale_count(200);
	const char *bad = NULL;

	assert_non_null(b);
	assert_non_null(out);
	b->o = f->o;
	b->tasks = calloc(BIG + EXTRA, sizeof(weft_task_t));
	assert_non_null(b->tasks);
	b->rec.name = "big";
	for (unsigned i = 0; i < BIG; i++) {
		b->tasks[i].id = (uint64_t)i * OWNED_SHARDS + BIG_SHARD;
		b->tasks[i].rec = &b->rec;
		atomic_store(&b->tasks[i].state, TASK_REF_ONE);
		if (i % 2 == 0)
			assert_true(weft__owned_insert(f->o, &b->tasks[i]));
	}
	for (unsigned i = 0; i < 2; i++) {
		c[i] = (struct walk_churn){ b, i, scale_count(2000) };
		assert_int_equal(pthread_create(&th[i], NULL, walk_churn_main,
						&c[i]),
				 0);
	}
	atomic_store(&g_parts, 0);
	weft__owned_walk_hook = count_hook;
	/* Failures noted, asserted after the joins (an assert here would
	 * leave the threads running on a freed fixture). */
	for (unsigned w = 0; w < walks && !bad; w++) {
		bool seen[BIG] = { false };
		unsigned even = 0;
		size_t n = weft__owned_shard_info(f->o, BIG_SHARD, out, BIG);

		if (n > BIG) {
			bad = "more copied than the shard can hold";
			break;
		}
		for (size_t k = 0; k < n && !bad; k++) {
			unsigned i = (unsigned)(out[k].id / OWNED_SHARDS);

			if (out[k].id % OWNED_SHARDS != BIG_SHARD || i >= BIG)
				bad = "a task not of the shard";
			else if (seen[i])
				bad = "a task copied twice";
			else
				seen[i] = true;
			even += i % 2 == 0;
		}
		if (!bad && even != BIG / 2)
			bad = "a task that stayed not copied";
	}
	for (unsigned i = 0; i < 2; i++) {
		void *ret;

		assert_int_equal(pthread_join(th[i], &ret), 0);
		assert_null(ret);
	}
	if (bad)
		fail_msg("%s", bad);
	weft__owned_walk_hook = NULL;
	/* The 1,000 that stay, 64 a part: 15 times let go a walk at least. */
	assert_true(atomic_load(&g_parts) >= walks * 15);
	assert_int_equal(weft__owned_count(f->o), BIG / 2);
	while (weft__owned_pop(f->o))
		;
	free(out);
	free(b->tasks);
	free(b);
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
		cmocka_unit_test_setup_teardown(test_owned_shard_walk_lets_go,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_owned_shard_walk_threads,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
