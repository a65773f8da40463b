/* SPDX-License-Identifier: MIT */
/*
 * A workload of yielders shared by the server and trace tests: tasks
 * named "yielder", each polled a given number of times (it yields until
 * then), joined before the call returns.
 */
#ifndef WEFT_TEST_YIELDERS_H
#define WEFT_TEST_YIELDERS_H

#include <stdlib.h>

#include "test_helpers.h"

struct yielder {
	int weft_pc;
	int i;
	int n;
};

static inline weft_poll_t yielder_poll(void *arg, weft_cx_t *cx)
{
	struct yielder *s = arg;

	WEFT_ASYNC_BEGIN(s);
	for (s->i = 0; s->i < s->n; s->i++)
		WEFT_YIELD(s, cx);
	WEFT_ASYNC_END(s);
}

/* @tasks yielders of @polls polls each on @rt; waits for them. */
static inline void workload(weft_runtime_t *rt, int tasks, int polls)
{
	weft_join_t **j = calloc((size_t)tasks, sizeof(*j));

	assert_non_null(j);
	for (int i = 0; i < tasks; i++) {
		struct yielder y = { .n = polls };

		assert_int_equal(weft_spawn_named(rt, "yielder", yielder_poll,
						  &y, &j[i]),
				 0);
	}
	for (int i = 0; i < tasks; i++) {
		assert_int_equal(weft_join_wait(j[i], NULL), 0);
		weft_join_drop(j[i]);
	}
	free(j);
}

/* The same on a runtime of its own, of 2 workers, destroyed after. */
static inline void workload_alone(int tasks, int polls)
{
	weft_runtime_t *rt = rt_create(2);

	workload(rt, tasks, polls);
	weft_runtime_destroy(rt);
}

#endif
