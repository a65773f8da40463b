/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the tests and stress tests.
 *
 * The tests sequence themselves against the workers with plain pthread
 * primitives (tcount_t below), never with the weft primitives under test,
 * so that a bug in weft cannot make a test wait for the wrong thing.  A
 * tcount_t is safe to destroy as soon as a waiter returns: the signaller
 * only touches it under its mutex.
 *
 * cmocka's assert_*() may only run on the test's own thread (a failure
 * longjmps out of the test).  Code that runs on workers or helper threads
 * records what it saw in atomics, and the test thread asserts afterwards.
 *
 * Iteration counts scale down under ThreadSanitizer, ASan and valgrind
 * (scale_count()); stress tests read WEFT_STRESS_ITERS (stress_iters()) so
 * that a longer run needs no rebuild.  No test asserts on timing.
 */
#ifndef WEFT_TEST_HELPERS_H
#define WEFT_TEST_HELPERS_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "weft/weft.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define HAVE_VALGRIND_H 1
#endif

static inline bool on_valgrind(void)
{
#ifdef HAVE_VALGRIND_H
	return RUNNING_ON_VALGRIND != 0;
#else
	return false;
#endif
}

/* Roughly how many times slower this build runs than a plain one. */
static inline unsigned slowdown(void)
{
#if defined(WEFT_TSAN)
	return 4;
#elif defined(WEFT_ASAN)
	return on_valgrind() ? 40 : 3;
#else
	return on_valgrind() ? 40 : 1;
#endif
}

/* @n scaled down for slow builds, at least 1. */
static inline unsigned scale_count(unsigned n)
{
	unsigned s = n / slowdown();

	return s ? s : 1;
}

/*
 * Iterations of a stress test: $WEFT_STRESS_ITERS if set, else @dflt
 * scaled for the build.
 */
static inline unsigned stress_iters(unsigned dflt)
{
	const char *s = getenv("WEFT_STRESS_ITERS");
	char *end;
	unsigned long v;

	if (s && *s) {
		v = strtoul(s, &end, 10);
		if (!*end && v > 0 && v <= 1000000)
			return (unsigned)v;
		fprintf(stderr, "WEFT_STRESS_ITERS=%s ignored\n", s);
	}
	return scale_count(dflt);
}

/* ------------------------------------------------------------- tcount */

/* A counter that threads can wait on. */
typedef struct tcount_s {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned long value;
} tcount_t;

static inline void tcount_init(tcount_t *c)
{
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->value = 0;
}

static inline void tcount_fini(tcount_t *c)
{
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
}

static inline void tcount_add(tcount_t *c, unsigned long n)
{
	pthread_mutex_lock(&c->lock);
	c->value += n;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static inline unsigned long tcount_get(tcount_t *c)
{
	unsigned long v;

	pthread_mutex_lock(&c->lock);
	v = c->value;
	pthread_mutex_unlock(&c->lock);
	return v;
}

/* Blocks until the value is at least @target. */
static inline void tcount_wait(tcount_t *c, unsigned long target)
{
	pthread_mutex_lock(&c->lock);
	while (c->value < target)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------ runtime */

static inline weft_runtime_t *rt_create(unsigned workers)
{
	weft_config_t cfg = { .workers = workers };
	weft_runtime_t *rt = NULL;

	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	assert_non_null(rt);
	assert_int_equal(weft_runtime_workers(rt), workers);
	return rt;
}

/* Spawns @poll over a copy of @size bytes at @state; asserts success. */
static inline weft_join_t *spawn_ok(weft_runtime_t *rt, weft_poll_cb poll,
				    weft_drop_cb drop, const void *state,
				    size_t size, bool want_join)
{
	weft_join_t *join = NULL;
	weft_spawn_t spec = {
		.poll = poll,
		.drop = drop,
		.state = state,
		.size = size,
		.name = "test",
		.file = __FILE__,
		.line = __LINE__,
	};

	assert_int_equal(weft_spawn_with(rt, &spec, want_join ? &join : NULL),
			 0);
	if (want_join)
		assert_non_null(join);
	return join;
}

/* Waits for the task and returns its status; stores its output. */
static inline int join_wait_drop(weft_join_t *join, void **out)
{
	int err = weft_join_wait(join, out);

	weft_join_drop(join);
	return err;
}

/*
 * Sum of one uint64_t counter over every worker of @rt; @off is its
 * offsetof() in weft_worker_metrics_t.
 */
static inline uint64_t worker_sum(const weft_runtime_t *rt, size_t off)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < weft_runtime_workers(rt); i++) {
		weft_worker_metrics_t m;

		assert_int_equal(weft_worker_metrics(rt, i, &m), 0);
		sum += *(const uint64_t *)((const char *)&m + off);
	}
	return sum;
}

#define WORKER_COUNTER(field) offsetof(weft_worker_metrics_t, field)

#endif /* WEFT_TEST_HELPERS_H */
