/* SPDX-License-Identifier: MIT */
/*
 * A task's wakers as the probe tells them (issue 21, fewer events a
 * request): a completing task wakes its joiner by value (one WAKE, no
 * WAKER_DROP), and so do a oneshot's sender and a blocking job's end.
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(
			test_probe_wakers_joiner_woken_by_value, seen_teardown),
		cmocka_unit_test_teardown(
			test_probe_wakers_oneshot_and_job_by_value,
			seen_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
