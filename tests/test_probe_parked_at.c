/* SPDX-License-Identifier: MIT */
/*
 * The probe's PARKED_AT event (issue 18): after a POLL that returned
 * PENDING, the site of the await the task is parked at, only when it
 * differs from the task's last (task.c, poll_probed()).  A task that
 * awaits on one line a hundred times says so once.
 *
 * And the seed: a task parked before anyone listened gets its site from
 * the runtime's owned list.
 *
 * Raw events through a subscription of our own; weft_probe_flush()
 * returns after a full pass, so once the task is joined and the probe
 * flushed, every event of it has been handed on.
 */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

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

/*
 * A task parked before anyone listened (issue 18): it sends no PARKED_AT
 * (its site does not change again), so the collector's seed reads the
 * site from the runtime's owned list; the first update says where it is
 * parked, and that it is idle, since a time not known (not the moment
 * the collector first heard of it).
 */
struct hung {
	int weft_pc;
	weft_notified_t nd;
	weft_notify_t *n;
	atomic_bool *polled;
};

static int hung_line;

static weft_poll_t hung_poll(void *arg, weft_cx_t *cx)
{
	struct hung *h = arg;

	WEFT_ASYNC_BEGIN(h);
	weft_notified_init(&h->nd, h->n);
	atomic_store(h->polled, true);
	hung_line = __LINE__; WEFT_AWAIT(h, weft_notified_poll(&h->nd, cx));
	weft_notified_fini(&h->nd);
	WEFT_ASYNC_END(h);
}

struct rec {
	pthread_mutex_t lock;
	uint64_t id;
	bool seen;
	weft_probe_task_t t;
	uint64_t now;
};

static void on_update(void *ctx, const weft_probe_update_t *u)
{
	struct rec *r = ctx;

	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < u->ntasks; i++)
		if (u->tasks[i]->id == r->id && !r->seen) {
			r->t = *u->tasks[i];
			r->t.poll_hist = r->t.sched_hist = NULL;
			r->now = u->stats ? u->stats->now_ns : 0;
			r->seen = true;
		}
	pthread_mutex_unlock(&r->lock);
}

static void test_probe_parked_at_before_listening(void **state)
{
	struct rec r = { .lock = PTHREAD_MUTEX_INITIALIZER };
	atomic_bool polled = false;
	weft_notify_t n;
	weft_runtime_t *rt;
	weft_probe_sub_t *sub;
	weft_join_t *j;
	uint64_t before;

	(void)state;
	weft_notify_init(&n);
	rt = rt_create(1);
	j = spawn_ok(rt, hung_poll, NULL,
		     &(struct hung){ .n = &n, .polled = &polled },
		     sizeof(struct hung), true);
	r.id = weft_join_id(j);
	while (!atomic_load(&polled))
		usleep(1000);
	/* Its poll returns, and the worker stores the site, just after. */
	usleep(20000);
	before = weft_now_ns();
	assert_int_equal(weft_probe_subscribe(
				 &(weft_probe_sub_opts_t){ .on_update = on_update,
							   .ctx = &r },
				 &sub),
			 0);
	weft_probe_flush();
	weft_probe_flush();

	pthread_mutex_lock(&r.lock);
	assert_true(r.seen);
	assert_int_equal(r.t.state, WEFT_TASK_IDLE);
	assert_non_null(r.t.parked_file);
	assert_string_equal(r.t.parked_file, __FILE__);
	assert_int_equal(r.t.parked_line, hung_line);
	/* Idle since before we listened: when its stretch began is not
	 * known (0), not taken for the moment we first heard of it. */
	assert_int_equal(r.t.idle_since_ns, 0);
	assert_true(r.now >= before);
	pthread_mutex_unlock(&r.lock);

	weft_notify_waiters(&n);
	assert_int_equal(join_wait_drop(j, NULL), 0);
	weft_probe_unsubscribe(sub);
	weft_runtime_destroy(rt);
	weft_notify_fini(&n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_parked_at_once_a_site),
		cmocka_unit_test(test_probe_parked_at_before_listening),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
