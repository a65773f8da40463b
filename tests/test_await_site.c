/* SPDX-License-Identifier: MIT */
/*
 * Await sites' ids (runtime/src/await_site.c, issue 21): a site keeps
 * its id, asked from any thread, at any time; distinct sites have
 * distinct ids, from 1 up, never reused.  Threads that meet the same
 * new sites at once (the insert's race, under TSan too) agree.
 */
#include <pthread.h>

#include "runtime_internal.h"
#include "test_helpers.h"

#define NSITES 200
#define NTHREADS 4

static weft_site_t sites[NSITES];
static uint32_t got[NTHREADS][NSITES];
/* Asked again, from the thread's cache or the table: kept for the main
 * thread to check (cmocka's asserts are not for other threads). */
static uint32_t again[NTHREADS][NSITES];
static pthread_barrier_t start;

static void *asker(void *arg)
{
	unsigned me = (unsigned)(uintptr_t)arg;

	pthread_barrier_wait(&start);
	/* Each thread in its own order: inserts race on every site. */
	for (unsigned i = 0; i < NSITES; i++) {
		unsigned k = me & 1 ? NSITES - 1 - i : i;

		got[me][k] = weft__await_site_id(&sites[k]);
	}
	for (unsigned k = 0; k < NSITES; k++)
		again[me][k] = weft__await_site_id(&sites[k]);
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void test_await_site_ids_agree(void **state)
{
	pthread_t th[NTHREADS];
	uint32_t sorted[NSITES];

	(void)state;
	for (unsigned k = 0; k < NSITES; k++)
		sites[k] = (weft_site_t){ __FILE__, (int)k + 1 };
	pthread_barrier_init(&start, NULL, NTHREADS);
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, asker,
						(void *)(uintptr_t)i),
				 0);
	for (unsigned i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);

	for (unsigned k = 0; k < NSITES; k++) {
		assert_int_not_equal(got[0][k], 0);
		for (unsigned i = 0; i < NTHREADS; i++) {
			assert_int_equal(got[i][k], got[0][k]);
			/* Again, from its cache or the table: the same. */
			assert_int_equal(again[i][k], got[i][k]);
		}
		sorted[k] = got[0][k];
	}
	/* Distinct, and this test's are the process's first: 1 .. NSITES. */
	qsort(sorted, NSITES, sizeof(*sorted), cmp_u32);
	for (unsigned k = 0; k < NSITES; k++)
		assert_int_equal(sorted[k], k + 1);
	/* A site asked again later keeps its id. */
	assert_int_equal(weft__await_site_id(&sites[7]), got[0][7]);
}

/*
 * The table full (4,096 ids, await_site.c): a site met after gets no id
 * (0: its polls say where with a PARKED_AT, as before), and asked again
 * still none; the sites that had one keep it.  Runs last: the process's
 * table stays full.
 */
static weft_site_t *more; /* reachable: the table keeps its addresses */

static void test_await_site_table_full(void **state)
{
	enum { MORE = 5000 };
	weft_site_t *v = more = calloc(MORE, sizeof(*v));
	uint32_t *id = calloc(MORE, sizeof(*id));
	unsigned with = 0;

	(void)state;
	assert_non_null(v);
	assert_non_null(id);
	for (unsigned k = 0; k < MORE; k++) {
		v[k] = (weft_site_t){ __FILE__, (int)(NSITES + k + 1) };
		id[k] = weft__await_site_id(&v[k]);
		with += id[k] != 0;
	}
	/* The first test's NSITES and these: every id given, no more. */
	assert_int_equal(with + NSITES, 4096);
	assert_int_equal(id[MORE - 1], 0);
	for (unsigned k = 0; k < MORE; k++)
		assert_int_equal(weft__await_site_id(&v[k]), id[k]);
	assert_int_equal(weft__await_site_id(&sites[7]), got[0][7]);
	free(id);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_await_site_ids_agree),
		cmocka_unit_test(test_await_site_table_full),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
