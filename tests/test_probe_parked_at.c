/* SPDX-License-Identifier: MIT */
/*
 * The probe's PARKED_AT event (issue 18): after a POLL that returned
 * PENDING, the site of the await the task is parked at, only when it
 * differs from the task's last (task.c, poll_probed()).  A task that
 * awaits on one line a hundred times says so once.
 *
 * Raw events through a subscription of our own; weft_probe_flush()
 * returns after a full pass, so once the task is joined and the probe
 * flushed, every event of it has been handed on.
 */
#include <stdatomic.h>
#include <string.h>

#include "test_helpers.h"

#include "weft/probe.h"

#define KEEP 4096

struct seen {
	pthread_mutex_t lock;
	weft_event_t ev[KEEP]; /* PARKED_AT and pending POLL events */
	size_t n;
};

static void on_events(void *ctx, const weft_event_t *ev, size_t n)
{
	struct seen *s = ctx;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n && s->n < KEEP; i++)
		if (ev[i].kind == WEFT_EV_PARKED_AT ||
		    (ev[i].kind == WEFT_EV_POLL &&
		     !(ev[i].a2 & WEFT_POLL_READY)))
			s->ev[s->n++] = ev[i];
	pthread_mutex_unlock(&s->lock);
}

#define ROUNDS 100

static int loop_line, last_line;

struct looper {
	int weft_pc;
	unsigned i;
	weft_yield_t y;
};

/* Parks ROUNDS times on one line, then once on another. */
static weft_poll_t looper_poll(void *arg, weft_cx_t *cx)
{
	struct looper *l = arg;

	WEFT_ASYNC_BEGIN(l);
	for (l->i = 0; l->i < ROUNDS; l->i++) {
		loop_line = __LINE__; WEFT_AWAIT(l, weft_yield_poll(&l->y, cx));
	}
	last_line = __LINE__; WEFT_YIELD(l, cx);
	WEFT_ASYNC_END(l);
}

static void test_probe_parked_at_once_a_site(void **state)
{
	struct seen *s = calloc(1, sizeof(*s));
	weft_runtime_t *rt;
	weft_probe_sub_t *sub;
	unsigned polls = 0, parked = 0;
	weft_event_t at[2];
	weft_join_t *j;
	uint64_t id;

	(void)state;
	assert_non_null(s);
	pthread_mutex_init(&s->lock, NULL);
	assert_int_equal(weft_probe_subscribe(
				 &(weft_probe_sub_opts_t){ .events = true,
							   .on_events =
								   on_events,
							   .ctx = s },
				 &sub),
			 0);
	/* Made while listening: its worker's loop times every poll. */
	rt = rt_create(1);
	j = spawn_ok(rt, looper_poll, NULL, &(struct looper){ 0 },
		     sizeof(struct looper), true);
	id = weft_join_id(j);
	assert_int_equal(join_wait_drop(j, NULL), 0);
	weft_probe_flush();
	weft_probe_unsubscribe(sub);
	weft_runtime_destroy(rt);

	for (size_t i = 0; i < s->n; i++) {
		if (s->ev[i].task != id)
			continue;
		if (s->ev[i].kind == WEFT_EV_POLL)
			polls++;
		else if (parked++ < 2)
			at[parked - 1] = s->ev[i];
	}
	/* Every pending poll was heard: the events were flowing. */
	assert_int_equal(polls, ROUNDS + 1);
	assert_int_equal(parked, 2);
	assert_int_not_equal(at[0].a1, 0);
	assert_string_equal((const char *)(uintptr_t)at[0].a1, __FILE__);
	assert_int_equal(at[0].a2, loop_line);
	assert_string_equal((const char *)(uintptr_t)at[1].a1, __FILE__);
	assert_int_equal(at[1].a2, last_line);
	/* Each is stamped with the end of the pending poll it follows. */
	for (int k = 0; k < 2; k++) {
		bool found = false;

		for (size_t i = 0; i < s->n && !found; i++)
			found = s->ev[i].task == id &&
				s->ev[i].kind == WEFT_EV_POLL &&
				s->ev[i].ts == at[k].ts;
		assert_true(found);
	}

	pthread_mutex_destroy(&s->lock);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_parked_at_once_a_site),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
