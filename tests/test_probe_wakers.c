/* SPDX-License-Identifier: MIT */
/*
 * A task's wakers as the probe tells them (issue 21, fewer events a
 * request): a completing task wakes its joiner by value (one WAKE, no
 * WAKER_DROP), and so do a oneshot's sender and a blocking job's end;
 * clones of a task's own waker in its poll are counted in the POLL, not
 * one WAKER_CLONE each, and the collector's totals and warnings are as
 * they were.
 *
 * Raw events through a subscription of our own, and the collector's task
 * records through its updates (probe_helpers.h's sink); weft_probe_flush()
 * returns after a full pass, so once the tasks are joined and the probe
 * flushed, every event of theirs has been handed on.
 */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "probe_helpers.h"

#define KEEP 8192

/* Every event of the subscription, the first KEEP of them. */
struct seen {
	pthread_mutex_t lock;
	weft_event_t ev[KEEP];
	size_t n;
	struct sink *sink; /* the updates */
};

static void seen_events(void *ctx, const weft_event_t *ev, size_t n)
{
	struct seen *s = ctx;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n && s->n < KEEP; i++)
		s->ev[s->n++] = ev[i];
	pthread_mutex_unlock(&s->lock);
}

static void seen_update(void *ctx, const weft_probe_update_t *u)
{
	struct seen *s = ctx;

	sink_update(s->sink, u);
}

static struct seen *seen_open;

static struct seen *seen_new(weft_probe_sub_t **sub)
{
	struct seen *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	pthread_mutex_init(&s->lock, NULL);
	s->sink = calloc(1, sizeof(*s->sink));
	assert_non_null(s->sink);
	pthread_mutex_init(&s->sink->lock, NULL);
	assert_int_equal(
		weft_probe_subscribe(
			&(weft_probe_sub_opts_t){ .events = true,
						  .on_events = seen_events,
						  .on_update = seen_update,
						  .ctx = s },
			sub),
		0);
	seen_open = s;
	open_sub = *sub;
	return s;
}

static void seen_free(struct seen *s, weft_probe_sub_t *sub)
{
	open_sub = NULL;
	seen_open = NULL;
	weft_probe_unsubscribe(sub);
	pthread_mutex_destroy(&s->sink->lock);
	free(s->sink);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int seen_teardown(void **state)
{
	(void)state;
	if (open_rt)
		rt_done(open_rt);
	if (seen_open)
		seen_free(seen_open, open_sub);
	return 0;
}

/* Events of @kind about task @id (any kind: 0). */
static unsigned seen_count(struct seen *s, uint8_t kind, uint64_t id)
{
	unsigned n = 0;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n; i++)
		if ((!kind || s->ev[i].kind == kind) &&
		    weft_event_task(&s->ev[i]) == id)
			n++;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static weft_probe_task_t task_of(struct seen *s, uint64_t id)
{
	weft_probe_task_t t;

	assert_true(sink_task(s->sink, id, &t));
	return t;
}

/* ----------------------------------------------- a joiner woken by value */

static weft_poll_t child_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	return WEFT_READY;
}

struct parent {
	int weft_pc;
	weft_runtime_t *rt;
	weft_join_t *child;
	uint64_t child_id;
};

/* Spawns a child and joins it: pending on the join (one worker: the
 * child runs after this poll). */
static weft_poll_t parent_poll(void *arg, weft_cx_t *cx)
{
	struct parent *p = arg;

	WEFT_ASYNC_BEGIN(p);
	assert_int_equal(weft_spawn_with(p->rt,
					 &(weft_spawn_t){ .poll = child_poll,
							  .name = "child" },
					 &p->child),
			 0);
	p->child_id = weft_join_id(p->child);
	WEFT_AWAIT(p, weft_join_poll(p->child, cx, NULL, NULL));
	weft_join_drop(p->child);
	WEFT_ASYNC_END(p);
}

static void test_probe_wakers_joiner_woken_by_value(void **state)
{
	weft_probe_sub_t *sub;
	struct seen *s = seen_new(&sub);
	weft_runtime_t *rt = rt_new(1);
	weft_probe_task_t t;
	weft_event_t wake = { 0 };
	unsigned wakes = 0;
	weft_join_t *j;
	uint64_t id;

	(void)state;
	j = spawn_ok(rt, parent_poll, NULL, &(struct parent){ .rt = rt },
		     sizeof(struct parent), true);
	id = weft_join_id(j);
	assert_int_equal(join_wait_drop(j, NULL), 0);
	weft_probe_flush();
	weft_probe_flush();

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n; i++)
		if (s->ev[i].kind == WEFT_EV_WAKE && s->ev[i].task == id) {
			wake = s->ev[i];
			wakes++;
		}
	pthread_mutex_unlock(&s->lock);
	/* Parked on the join once, woken once by its child's end. */
	assert_int_equal(seen_count(s, WEFT_EV_POLL, id), 2);
	assert_int_equal(wakes, 1);
	assert_int_equal(wake.a2 & 0xff, WEFT_WAKE_TASK);
	/* By value: the join's waker consumed, no drop of it. */
	assert_true(wake.a2 & WEFT_WAKE_BY_VAL);
	assert_int_equal(seen_count(s, WEFT_EV_WAKER_DROP, id), 0);
	t = task_of(s, id);
	assert_int_equal(t.waker_clones, 1);
	assert_int_equal(t.waker_drops, 0);
	assert_int_equal(t.wakes, 1);

	rt_done(rt);
	seen_free(s, sub);
}

/*
 * A oneshot's sender and a blocking job's end wake their waiter by value
 * too.  Each parked before it is woken: the poll says so (parked) after
 * its wait registered the waker, and the test thread sends, the job
 * returns, only then.
 */
struct waits {
	int step;
	weft_oneshot_rx_t *rx;
	weft_blocking_t *job;
	atomic_int *parked;
};

static void *job_fn(void *arg)
{
	atomic_int *parked = arg;

	while (atomic_load(parked) < 2)
		usleep(1000);
	return NULL;
}

static weft_poll_t waits_poll(void *arg, weft_cx_t *cx)
{
	struct waits *w = arg;

	if (w->step == 0) {
		if (weft_oneshot_poll(w->rx, cx, NULL, NULL) == WEFT_PENDING) {
			atomic_store(w->parked, 1);
			return WEFT_PENDING;
		}
		weft_oneshot_rx_drop(w->rx);
		assert_int_equal(weft_spawn_blocking(NULL, job_fn, w->parked,
						     &w->job),
				 0);
		w->step = 1;
	}
	if (weft_blocking_poll(w->job, cx, NULL) == WEFT_PENDING) {
		atomic_store(w->parked, 2);
		return WEFT_PENDING;
	}
	weft_blocking_drop(w->job);
	return WEFT_READY;
}

static void test_probe_wakers_oneshot_and_job_by_value(void **state)
{
	weft_probe_sub_t *sub;
	struct seen *s = seen_new(&sub);
	weft_runtime_t *rt = rt_new(1);
	weft_oneshot_tx_t *tx;
	weft_oneshot_rx_t *rx;
	atomic_int parked = 0;
	weft_probe_task_t t;
	unsigned wakes = 0, by_val = 0;
	weft_join_t *j;
	uint64_t id;

	(void)state;
	assert_int_equal(weft_oneshot_create(&tx, &rx), 0);
	j = spawn_ok(rt, waits_poll, NULL,
		     &(struct waits){ .rx = rx, .parked = &parked },
		     sizeof(struct waits), true);
	id = weft_join_id(j);
	while (atomic_load(&parked) < 1)
		usleep(1000);
	assert_int_equal(weft_oneshot_send(tx, NULL), 0);
	assert_int_equal(join_wait_drop(j, NULL), 0);
	weft_probe_flush();
	weft_probe_flush();

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n; i++)
		if (s->ev[i].kind == WEFT_EV_WAKE && s->ev[i].task == id) {
			wakes++;
			by_val += !!(s->ev[i].a2 & WEFT_WAKE_BY_VAL);
		}
	pthread_mutex_unlock(&s->lock);
	assert_int_equal(seen_count(s, WEFT_EV_POLL, id), 3);
	assert_int_equal(wakes, 2);
	assert_int_equal(by_val, 2);
	assert_int_equal(seen_count(s, WEFT_EV_WAKER_DROP, id), 0);
	t = task_of(s, id);
	assert_int_equal(t.waker_clones, 2);
	assert_int_equal(t.waker_drops, 0);

	rt_done(rt);
	seen_free(s, sub);
}

/* ----------------------------------------- clones of its own waker in a poll */

/*
 * Another thread that drops the wakers it is handed, at once: a poll
 * hands it clones and waits until they are dropped, so that each drop's
 * record is stamped before the end of the poll that made the clone (and
 * so before its POLL, which counts it).
 */
#define DROPPER_MAX 64

static struct dropper {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	weft_waker_t w[DROPPER_MAX];
	unsigned n;
	unsigned pushed;
	atomic_uint dropped;
	bool stop;
	pthread_t thread;
} dropper = { .lock = PTHREAD_MUTEX_INITIALIZER,
	      .cond = PTHREAD_COND_INITIALIZER };

static void *dropper_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&dropper.lock);
	while (!dropper.stop || dropper.n) {
		while (dropper.n) {
			weft_waker_t w = dropper.w[--dropper.n];

			pthread_mutex_unlock(&dropper.lock);
			weft_waker_drop(&w);
			atomic_fetch_add(&dropper.dropped, 1);
			pthread_mutex_lock(&dropper.lock);
		}
		if (!dropper.stop)
			pthread_cond_wait(&dropper.cond, &dropper.lock);
	}
	pthread_mutex_unlock(&dropper.lock);
	return NULL;
}

/* Hands @w over; returns how many must be dropped to have it dropped. */
static unsigned dropper_push(weft_waker_t w)
{
	unsigned target;

	pthread_mutex_lock(&dropper.lock);
	assert_true(dropper.n < DROPPER_MAX);
	dropper.w[dropper.n++] = w;
	target = ++dropper.pushed;
	pthread_cond_signal(&dropper.cond);
	pthread_mutex_unlock(&dropper.lock);
	return target;
}

static void dropper_start(void)
{
	dropper.stop = false;
	assert_int_equal(
		pthread_create(&dropper.thread, NULL, dropper_main, NULL), 0);
}

static void dropper_stop(void)
{
	pthread_mutex_lock(&dropper.lock);
	dropper.stop = true;
	pthread_cond_signal(&dropper.cond);
	pthread_mutex_unlock(&dropper.lock);
	pthread_join(dropper.thread, NULL);
}

/*
 * A task whose first poll clones its own waker @n times, hands the first
 * @drop clones to the dropper, waits until it dropped them, keeps the
 * rest in @kept and returns PENDING; its next poll returns READY.
 */
struct cloner {
	int step;
	unsigned n, drop;
	weft_waker_t *kept;
	atomic_int *parked;
};

static weft_poll_t cloner_poll(void *arg, weft_cx_t *cx)
{
	struct cloner *c = arg;
	unsigned target = 0;

	if (c->step++)
		return WEFT_READY;
	for (unsigned i = 0; i < c->n; i++) {
		weft_waker_t w = weft_waker_clone(weft_cx_waker(cx));

		if (i < c->drop)
			target = dropper_push(w);
		else
			c->kept[i - c->drop] = w;
	}
	while (atomic_load(&dropper.dropped) < target)
		usleep(100);
	/*
	 * The poll ends well after the last drop, not within the
	 * nanoseconds by which two threads' clock reads may come out of
	 * order (a TSan run in CI found the last drop's stamp past the
	 * POLL's, the drops done before the loop first looked).
	 */
	if (c->drop)
		usleep(500);
	atomic_fetch_add(c->parked, 1);
	return WEFT_PENDING;
}

struct of_task {
	unsigned clone_ev, drop_ev, polls;
	unsigned in_poll;      /* the first POLL's count of clones */
	uint64_t poll_end;     /* the first POLL's stamp */
	uint64_t last_drop_ts; /* the last WAKER_DROP's stamp */
};

static struct of_task events_of(struct seen *s, uint64_t id)
{
	struct of_task o = { 0 };

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n; i++) {
		const weft_event_t *e = &s->ev[i];

		if (weft_event_task(e) != id)
			continue;
		if (e->kind == WEFT_EV_WAKER_CLONE)
			o.clone_ev++;
		if (e->kind == WEFT_EV_WAKER_DROP) {
			o.drop_ev++;
			o.last_drop_ts = e->ts;
		}
		if (e->kind == WEFT_EV_POLL && !o.polls++) {
			o.in_poll = (e->a2 >> WEFT_POLL_CLONES_SHIFT) &
				    WEFT_POLL_CLONES_MAX;
			o.poll_end = e->ts;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return o;
}

/*
 * Clones of its own waker in its poll are counted in the POLL (up to
 * WEFT_POLL_CLONES_MAX; the rest, and a clone outside a poll, are
 * WAKER_CLONE events), and the collector counts the same totals and
 * gives the same warnings as from one event a clone: with clones dropped
 * on another thread before the poll that made them ended (their drops
 * read before the POLL that counts them), a task left pending with no
 * waker is warned of, one with a waker left is not.
 */
static void test_probe_wakers_clones_in_poll(void **state)
{
	weft_probe_sub_t *sub;
	struct seen *s = seen_new(&sub);
	weft_runtime_t *rt = rt_new(2);
	weft_waker_t kept[1] = { WEFT_WAKER_EMPTY }, out;
	atomic_int parked = 0;
	weft_probe_task_t t;
	struct of_task o;
	weft_join_t *jg, *jb;
	uint64_t good, bad;

	(void)state;
	atomic_store(&dropper.dropped, 0);
	dropper.pushed = 0;
	dropper_start();
	/* 20 clones, 19 dropped during the poll, one kept. */
	jg = spawn_ok(
		rt, cloner_poll, NULL,
		&(struct cloner){
			.n = 20, .drop = 19, .kept = kept, .parked = &parked },
		sizeof(struct cloner), true);
	/* 3 clones, all dropped during the poll: none left. */
	jb = spawn_ok(rt, cloner_poll, NULL,
		      &(struct cloner){ .n = 3, .drop = 3, .parked = &parked },
		      sizeof(struct cloner), true);
	good = weft_join_id(jg);
	bad = weft_join_id(jb);
	while (atomic_load(&parked) < 2)
		usleep(1000);
	/* A clone outside any poll: an event of its own. */
	out = weft_waker_clone(&kept[0]);
	weft_waker_drop(&out);
	/* The check needs the task idle without a waker for a second. */
	for (int i = 0;
	     i < 150 && !sink_count(s->sink, WEFT_WARN_LOST_WAKER, bad); i++) {
		usleep(20000);
		weft_probe_flush();
	}
	/* A second more: the good one had its chance to be taken for lost. */
	for (int i = 0; i < 60; i++) {
		usleep(20000);
		weft_probe_flush();
	}
	if (sink_count(s->sink, WEFT_WARN_LOST_WAKER, good) ||
	    !sink_count(s->sink, WEFT_WARN_LOST_WAKER, bad))
		print_warnings(s->sink);
	assert_int_equal(sink_count(s->sink, WEFT_WARN_LOST_WAKER, bad), 1);
	assert_int_equal(sink_count(s->sink, WEFT_WARN_LOST_WAKER, good), 0);

	weft_waker_wake(&kept[0]);
	assert_int_equal(join_wait_drop(jg, NULL), 0);
	weft_join_drop(jb);
	weft_probe_flush();
	weft_probe_flush();
	dropper_stop();

	o = events_of(s, good);
	assert_int_equal(o.polls, 2);
	assert_int_equal(o.in_poll, WEFT_POLL_CLONES_MAX);
	/* 20 - 15 past the count's bits, and the one outside a poll. */
	assert_int_equal(o.clone_ev, 20 - WEFT_POLL_CLONES_MAX + 1);
	assert_int_equal(o.drop_ev, 19 + 1);
	t = task_of(s, good);
	assert_int_equal(t.waker_clones, 21);
	assert_int_equal(t.waker_drops, 20);
	assert_int_equal(t.wakes, 1);

	o = events_of(s, bad);
	assert_int_equal(o.polls, 1);
	assert_int_equal(o.in_poll, 3);
	assert_int_equal(o.clone_ev, 0);
	assert_int_equal(o.drop_ev, 3);
	/* Dropped before the poll that made them ended. */
	assert_true(o.last_drop_ts < o.poll_end);
	t = task_of(s, bad);
	assert_int_equal(t.waker_clones, 3);
	assert_int_equal(t.waker_drops, 3);

	rt_done(rt); /* cancels the lost one */
	seen_free(s, sub);
}

/*
 * A clone of another task's waker, made in a poll, is not the polled
 * task's own: a WAKER_CLONE of the other task, as before.
 */
static weft_waker_t other_waker;

static weft_poll_t owner_poll(void *arg, weft_cx_t *cx)
{
	struct cloner *c = arg;

	if (c->step++)
		return WEFT_READY;
	other_waker = weft_waker_clone(weft_cx_waker(cx));
	atomic_fetch_add(c->parked, 1);
	return WEFT_PENDING;
}

static weft_poll_t borrower_poll(void *arg, weft_cx_t *cx)
{
	weft_waker_t w = weft_waker_clone(&other_waker);

	(void)arg;
	(void)cx;
	weft_waker_drop(&w);
	return WEFT_READY;
}

static void test_probe_wakers_other_task_clone(void **state)
{
	weft_probe_sub_t *sub;
	struct seen *s = seen_new(&sub);
	weft_runtime_t *rt = rt_new(1);
	atomic_int parked = 0;
	weft_probe_task_t t;
	struct of_task o;
	weft_join_t *jo, *jb;
	uint64_t owner, borrower;

	(void)state;
	jo = spawn_ok(rt, owner_poll, NULL,
		      &(struct cloner){ .parked = &parked },
		      sizeof(struct cloner), true);
	owner = weft_join_id(jo);
	while (atomic_load(&parked) < 1)
		usleep(1000);
	jb = spawn_ok(rt, borrower_poll, NULL, NULL, 0, true);
	borrower = weft_join_id(jb);
	assert_int_equal(join_wait_drop(jb, NULL), 0);
	weft_waker_wake(&other_waker);
	assert_int_equal(join_wait_drop(jo, NULL), 0);
	weft_probe_flush();
	weft_probe_flush();

	o = events_of(s, owner);
	assert_int_equal(o.polls, 2);
	assert_int_equal(o.in_poll, 1);  /* its own, in its poll */
	assert_int_equal(o.clone_ev, 1); /* made in the borrower's poll */
	assert_int_equal(o.drop_ev, 1);
	t = task_of(s, owner);
	assert_int_equal(t.waker_clones, 2);
	assert_int_equal(t.waker_drops, 1);
	assert_int_equal(t.wakes, 1);
	o = events_of(s, borrower);
	assert_int_equal(o.in_poll, 0);
	assert_int_equal(o.clone_ev, 0);
	t = task_of(s, borrower);
	assert_int_equal(t.waker_clones, 0);

	rt_done(rt);
	seen_free(s, sub);
}

/* ---------------------- a drop's clone inside another task's poll */

/* Parks holding a clone of its own waker; its drop clones that once
 * more and drops both. */
struct stash {
	atomic_int *parked;
	weft_waker_t w;
};

static weft_poll_t stash_poll(void *arg, weft_cx_t *cx)
{
	struct stash *st = arg;

	if (!st->w.vtable) {
		st->w = weft_waker_clone(weft_cx_waker(cx));
		atomic_store(st->parked, 1);
	}
	return WEFT_PENDING;
}

static void stash_drop(void *arg)
{
	struct stash *st = arg;
	weft_waker_t c = weft_waker_clone(&st->w);

	weft_waker_drop(&c);
	weft_waker_drop(&st->w);
}

static weft_runtime_t *victim_rt;

/* Destroys victim_rt: its parked task's drop runs in this poll. */
static weft_poll_t destroyer_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	weft_runtime_destroy(victim_rt);
	return WEFT_READY;
}

/*
 * A task's drop run inside another task's timed poll (a runtime
 * destroyed from a task of another cancels its parked tasks there) that
 * clones the dying task's own waker: a WAKER_CLONE of the dying task, not
 * a clone counted in the destroyer's POLL (task_complete() names the
 * dying task as current while its drop runs).
 */
static void test_probe_wakers_drop_in_other_poll(void **state)
{
	weft_probe_sub_t *sub;
	struct seen *s = seen_new(&sub);
	weft_runtime_t *rt = rt_new(1);
	atomic_int parked = 0;
	weft_join_t *jv, *jd;
	uint64_t victim, destroyer;
	struct of_task o;
	weft_probe_task_t t;

	(void)state;
	assert_int_equal(weft_runtime_create(&(weft_config_t){ .workers = 1 },
					     &victim_rt),
			 0);
	jv = spawn_ok(victim_rt, stash_poll, stash_drop,
		      &(struct stash){ .parked = &parked,
				       .w = WEFT_WAKER_EMPTY },
		      sizeof(struct stash), true);
	victim = weft_join_id(jv);
	while (atomic_load(&parked) < 1)
		usleep(1000);
	jd = spawn_ok(rt, destroyer_poll, NULL, NULL, 0, true);
	destroyer = weft_join_id(jd);
	assert_int_equal(join_wait_drop(jd, NULL), 0);
	weft_join_drop(jv);
	weft_probe_flush();
	weft_probe_flush();

	o = events_of(s, destroyer);
	assert_int_equal(o.polls, 1);
	assert_int_equal(o.in_poll, 0);
	assert_int_equal(o.clone_ev, 0);
	t = task_of(s, destroyer);
	assert_int_equal(t.waker_clones, 0);
	o = events_of(s, victim);
	assert_int_equal(o.in_poll, 1);  /* its own poll's */
	assert_int_equal(o.clone_ev, 1); /* its drop's */
	assert_int_equal(o.drop_ev, 2);
	t = task_of(s, victim);
	assert_int_equal(t.waker_clones, 2);
	assert_int_equal(t.waker_drops, 2);

	rt_done(rt);
	seen_free(s, sub);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(
			test_probe_wakers_joiner_woken_by_value, seen_teardown),
		cmocka_unit_test_teardown(
			test_probe_wakers_oneshot_and_job_by_value,
			seen_teardown),
		cmocka_unit_test_teardown(test_probe_wakers_clones_in_poll,
					  seen_teardown),
		cmocka_unit_test_teardown(test_probe_wakers_other_task_clone,
					  seen_teardown),
		cmocka_unit_test_teardown(test_probe_wakers_drop_in_other_poll,
					  seen_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
