/* SPDX-License-Identifier: MIT */
/*
 * The probe's PARKED_AT event (issue 18), folded into the POLL (issue
 * 21): a POLL that returned PENDING names the site of the await the task
 * is parked at, by the site's id (WEFT_POLL_SITE_SHIFT), only when it
 * differs from the task's last (task.c, poll_probed()); the ring
 * announced the id first (AWAIT_SITE).  A task that awaits on one line a
 * hundred times says so once.
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
	/* PARKED_AT, AWAIT_SITE and pending POLL events */
	weft_event_t ev[KEEP];
	size_t n;
};

static void on_events(void *ctx, const weft_event_t *ev, size_t n)
{
	struct seen *s = ctx;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n && s->n < KEEP; i++)
		if (ev[i].kind == WEFT_EV_PARKED_AT ||
		    ev[i].kind == WEFT_EV_AWAIT_SITE ||
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
		const weft_event_t *e = &s->ev[i];
		uint32_t site = e->a2 >> WEFT_POLL_SITE_SHIFT;

		if (e->task != id || e->kind != WEFT_EV_POLL)
			continue;
		polls++;
		if (site && parked++ < 2)
			at[parked - 1] = *e;
		/* The folded form, never the event it replaces. */
		for (size_t k = 0; k < s->n; k++)
			assert_false(s->ev[k].kind == WEFT_EV_PARKED_AT &&
				     s->ev[k].task == id);
	}
	/* Every pending poll was heard: the events were flowing. */
	assert_int_equal(polls, ROUNDS + 1);
	assert_int_equal(parked, 2);
	/* Each site announced before the POLL that names it, with its file
	 * and line. */
	for (int k = 0; k < 2; k++) {
		uint32_t site = at[k].a2 >> WEFT_POLL_SITE_SHIFT;
		const weft_event_t *a = NULL;

		for (size_t i = 0; i < s->n && !a; i++)
			if (s->ev[i].kind == WEFT_EV_AWAIT_SITE &&
			    s->ev[i].task == site)
				a = &s->ev[i];
		assert_non_null(a);
		assert_true(a->ts <= at[k].ts);
		assert_string_equal((const char *)(uintptr_t)a->a1, __FILE__);
		assert_int_equal(a->a2, k ? last_line : loop_line);
	}
	assert_int_not_equal(at[0].a2 >> WEFT_POLL_SITE_SHIFT,
			     at[1].a2 >> WEFT_POLL_SITE_SHIFT);

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

/*
 * A task that parks at two awaits in turn (issue 21): every pending poll
 * names its site in the POLL (each is a change of place), no PARKED_AT,
 * and the collector's record of the task says the right one at each step.
 */
#define ALT_ROUNDS 3

struct alt {
	int weft_pc;
	unsigned i;
	weft_notified_t nd;
	weft_notify_t *a, *b;
	atomic_uint *step;
};

static atomic_int alt_line[2];

static weft_poll_t alt_poll(void *arg, weft_cx_t *cx)
{
	struct alt *x = arg;

	WEFT_ASYNC_BEGIN(x);
	for (x->i = 0; x->i < ALT_ROUNDS; x->i++) {
		weft_notified_init(&x->nd, x->a);
		atomic_store(x->step, 2 * x->i + 1);
		atomic_store(&alt_line[0], __LINE__); WEFT_AWAIT(x, weft_notified_poll(&x->nd, cx));
		weft_notified_fini(&x->nd);
		weft_notified_init(&x->nd, x->b);
		atomic_store(x->step, 2 * x->i + 2);
		atomic_store(&alt_line[1], __LINE__); WEFT_AWAIT(x, weft_notified_poll(&x->nd, cx));
		weft_notified_fini(&x->nd);
	}
	WEFT_ASYNC_END(x);
}

struct last {
	pthread_mutex_t lock;
	uint64_t id;
	weft_probe_task_t t; /* its last record, histograms left out */
	bool seen;
};

static void on_update_last(void *ctx, const weft_probe_update_t *u)
{
	struct last *r = ctx;

	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < u->ntasks; i++)
		if (u->tasks[i]->id == r->id) {
			r->t = *u->tasks[i];
			r->t.poll_hist = r->t.sched_hist = NULL;
			r->seen = true;
		}
	pthread_mutex_unlock(&r->lock);
}

static void test_probe_parked_at_alternating(void **state)
{
	struct last r = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct seen *s = calloc(1, sizeof(*s));
	weft_probe_sub_t *sub, *evsub;
	atomic_uint step = 0;
	weft_notify_t a, b;
	weft_runtime_t *rt;
	uint32_t ids[2] = { 0, 0 };
	unsigned pending = 0;
	weft_join_t *j;

	(void)state;
	assert_non_null(s);
	pthread_mutex_init(&s->lock, NULL);
	weft_notify_init(&a);
	weft_notify_init(&b);
	assert_int_equal(
		weft_probe_subscribe(
			&(weft_probe_sub_opts_t){ .on_update = on_update_last,
						  .ctx = &r },
			&sub),
		0);
	assert_int_equal(
		weft_probe_subscribe(
			&(weft_probe_sub_opts_t){ .events = true,
						  .on_events = on_events,
						  .ctx = s },
			&evsub),
		0);
	rt = rt_create(1);
	pthread_mutex_lock(&r.lock);
	j = spawn_ok(rt, alt_poll, NULL,
		     &(struct alt){ .a = &a, .b = &b, .step = &step },
		     sizeof(struct alt), true);
	r.id = weft_join_id(j);
	pthread_mutex_unlock(&r.lock);
	for (unsigned k = 0; k < 2 * ALT_ROUNDS; k++) {
		uint64_t deadline = weft_now_ns() + 10000000000ull;
		bool there = false;

		/* Its k-th poll returned pending, and the collector read it. */
		while (!there) {
			assert_true(weft_now_ns() < deadline);
			weft_probe_flush();
			pthread_mutex_lock(&r.lock);
			there = r.seen && r.t.polls == k + 1 &&
				r.t.state == WEFT_TASK_IDLE;
			if (there) {
				assert_non_null(r.t.parked_file);
				assert_string_equal(r.t.parked_file, __FILE__);
				assert_int_equal(r.t.parked_line,
						 atomic_load(&alt_line[k % 2]));
			}
			pthread_mutex_unlock(&r.lock);
			if (!there)
				usleep(1000);
		}
		assert_int_equal(atomic_load(&step), k + 1);
		weft_notify_waiters(k % 2 ? &b : &a);
	}
	assert_int_equal(join_wait_drop(j, NULL), 0);
	weft_probe_flush();
	weft_probe_unsubscribe(evsub);
	weft_probe_unsubscribe(sub);
	weft_runtime_destroy(rt);

	/* Each pending poll named the site it parked at: two ids, in turn. */
	for (size_t i = 0; i < s->n; i++) {
		const weft_event_t *e = &s->ev[i];

		if (e->task != r.id)
			continue;
		assert_int_not_equal(e->kind, WEFT_EV_PARKED_AT);
		if (e->kind != WEFT_EV_POLL)
			continue;
		assert_int_not_equal(e->a2 >> WEFT_POLL_SITE_SHIFT, 0);
		if (pending < 2)
			ids[pending] = e->a2 >> WEFT_POLL_SITE_SHIFT;
		else
			assert_int_equal(e->a2 >> WEFT_POLL_SITE_SHIFT,
					 ids[pending % 2]);
		pending++;
	}
	assert_int_equal(pending, 2 * ALT_ROUNDS);
	assert_int_not_equal(ids[0], ids[1]);

	pthread_mutex_destroy(&s->lock);
	free(s);
	weft_notify_fini(&a);
	weft_notify_fini(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_parked_at_once_a_site),
		cmocka_unit_test(test_probe_parked_at_before_listening),
		cmocka_unit_test(test_probe_parked_at_alternating),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
