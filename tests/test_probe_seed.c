/* SPDX-License-Identifier: MIT */
/*
 * The collector's seed of a process of many tasks, over several passes
 * (collector_reconcile.c, issue 21): its first update holds the tasks of
 * lowest id, the others come as changes over the next passes, each task
 * once, named; a task that finishes before its shard is read is not made
 * live; the task-leak sampler does not take the seed for growth.
 *
 * A real runtime whose idle tasks were spawned before anyone listened,
 * the seed's sizes made small (probe.lock held) so that a few thousand
 * tasks take dozens of passes; weft_probe_flush() makes passes (and the
 * collector its own, every 20 ms).
 */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "test_helpers.h"

#include "collector_internal.h"
#include "weft/probe.h"
#include "weft/trace.h"

#define TASKS 3000
#define FIRST 32

static const char idle_name[] = "seeded";

struct idle {
	int weft_pc;
	weft_notified_t nd;
	weft_notify_t *n;
	atomic_uint *parked;
	atomic_bool *loop; /* woken, park again while set */
};

static weft_poll_t idle_poll(void *arg, weft_cx_t *cx)
{
	struct idle *s = arg;

	WEFT_ASYNC_BEGIN(s);
	do {
		weft_notified_init(&s->nd, s->n);
		atomic_fetch_add(s->parked, 1);
		WEFT_AWAIT(s, weft_notified_poll(&s->nd, cx));
		weft_notified_fini(&s->nd);
	} while (atomic_load(s->loop));
	WEFT_ASYNC_END(s);
}

/* What the subscriber saw: every id once at most, by first sight. */
struct seen {
	pthread_mutex_t lock;
	uint64_t ids[TASKS];
	bool named[TASKS];
	bool got[TASKS];
	uint64_t base; /* ids[] is base .. base + TASKS - 1 */
	size_t first_n, first_max_id, nseen, updates;
	uint64_t first_live;
	bool first_full;
	unsigned leaks;
	char leak_detail[160]; /* the first task-leak warning's text */
};

static void on_update(void *ctx, const weft_probe_update_t *u)
{
	struct seen *s = ctx;

	pthread_mutex_lock(&s->lock);
	if (!s->updates++) {
		s->first_full = u->full;
		s->first_n = u->ntasks;
		s->first_live = u->stats ? u->stats->live_tasks : 0;
		for (size_t i = 0; i < u->ntasks; i++)
			if (u->tasks[i]->id > s->first_max_id)
				s->first_max_id = u->tasks[i]->id;
	}
	for (size_t i = 0; i < u->ntasks; i++) {
		uint64_t id = u->tasks[i]->id;

		if (id < s->base || id >= s->base + TASKS)
			continue;
		if (!s->got[id - s->base]) {
			s->got[id - s->base] = true;
			s->nseen++;
		}
		if (u->tasks[i]->name && !strcmp(u->tasks[i]->name, idle_name))
			s->named[id - s->base] = true;
	}
	for (size_t i = 0; i < u->nwarnings; i++) {
		if (u->warnings[i].kind != WEFT_WARN_TASK_LEAK)
			continue;
		if (!s->leaks++)
			snprintf(s->leak_detail, sizeof(s->leak_detail), "%s",
				 u->warnings[i].detail);
	}
	pthread_mutex_unlock(&s->lock);
}

/* Events flow only to a subscriber that takes them. */
static void no_events(void *ctx, const weft_event_t *ev, size_t n)
{
	(void)ctx;
	(void)ev;
	(void)n;
}

struct world {
	weft_runtime_t *rt;
	weft_notify_t a, b; /* half the tasks each */
	atomic_uint parked;
	atomic_bool loop;
	weft_join_t *j[TASKS];
	uint64_t lo;
};

static void world_start(struct world *w)
{
	weft_notify_init(&w->a);
	weft_notify_init(&w->b);
	atomic_init(&w->parked, 0);
	atomic_init(&w->loop, false);
	w->rt = rt_create(1);
	w->lo = UINT64_MAX;
	for (int i = 0; i < TASKS; i++) {
		struct idle st = { .n = i % 2 ? &w->b : &w->a,
				   .parked = &w->parked,
				   .loop = &w->loop };
		weft_spawn_t sp = { .poll = idle_poll,
				    .state = &st,
				    .size = sizeof(st),
				    .name = idle_name };

		assert_int_equal(weft_spawn_with(w->rt, &sp, &w->j[i]), 0);
		if (weft_join_id(w->j[i]) < w->lo)
			w->lo = weft_join_id(w->j[i]);
	}
	while (atomic_load(&w->parked) < TASKS)
		usleep(1000);
}

static weft_poll_t noop_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	return WEFT_READY;
}

/*
 * The worker, made before anyone listened, through its loop once more:
 * it runs the listening copy of it from then on (worker.c), so the
 * polls and ends of the tasks woken next are all heard.
 */
static void worker_listens(struct world *w)
{
	assert_int_equal(
		join_wait_drop(spawn_ok(w->rt, noop_poll, NULL, NULL, 0, true),
			       NULL),
		0);
}

static void world_stop(struct world *w)
{
	atomic_store(&w->loop, false);
	weft_notify_waiters(&w->a);
	weft_notify_waiters(&w->b);
	for (int i = 0; i < TASKS; i++)
		assert_int_equal(join_wait_drop(w->j[i], NULL), 0);
	weft_runtime_destroy(w->rt);
}

/* The test's subscription: its teardown drops it if an assertion left
 * the test before it did (the next test would find the collector
 * running, and no seed). */
static weft_probe_sub_t *cur_sub;

static void knobs(uint32_t at_once, uint32_t first, uint32_t pass);

static int teardown(void **state)
{
	(void)state;
	if (cur_sub)
		weft_probe_unsubscribe(cur_sub);
	cur_sub = NULL;
	knobs(0, 0, 0);
	return 0;
}

/* @s and @w made (calloc'd by the caller), the tasks spawned and parked. */
static void fixture_start(struct seen *s, struct world *w)
{
	assert_non_null(s);
	assert_non_null(w);
	pthread_mutex_init(&s->lock, NULL);
	world_start(w);
	s->base = w->lo;
}

static void fixture_free(struct seen *s, struct world *w)
{
	pthread_mutex_destroy(&s->lock);
	free(s);
	free(w);
}

/* A subscriber of updates and events into @s; the teardown's to drop if
 * the test leaves early. */
static weft_probe_sub_t *listen_seen(struct seen *s)
{
	weft_probe_sub_t *sub;

	assert_int_equal(
		weft_probe_subscribe(
			&(weft_probe_sub_opts_t){ .events = true,
						  .on_events = no_events,
						  .on_update = on_update,
						  .ctx = s },
			&sub),
		0);
	cur_sub = sub;
	return sub;
}

static void knobs(uint32_t at_once, uint32_t first, uint32_t pass)
{
	pthread_mutex_lock(&weft__probe.lock);
	weft__probe.seed_at_once = at_once;
	weft__probe.seed_first = first;
	weft__probe.seed_pass = pass;
	pthread_mutex_unlock(&weft__probe.lock);
}

static bool seeding(void)
{
	bool on;

	pthread_mutex_lock(&weft__probe.lock);
	on = weft__probe.seed_shards != 0;
	pthread_mutex_unlock(&weft__probe.lock);
	return on;
}

/* Passes until the seed is over (a few hundred at most). */
static unsigned seed_out(void)
{
	unsigned passes = 0;

	while (seeding() && passes < 10000) {
		weft_probe_flush();
		passes++;
	}
	assert_false(seeding());
	return passes;
}

/* The collector's records of ids lo .. lo + TASKS - 1: each at most once
 * (the table), and how many are live (the live list). */
static void records(uint64_t lo, size_t *nrec, size_t *nlive, size_t *named)
{
	static unsigned char count[TASKS];
	struct probe *p = &weft__probe;

	memset(count, 0, sizeof(count));
	*nrec = *nlive = *named = 0;
	pthread_mutex_lock(&p->lock);
	for (size_t h = 0; h < p->table_size; h++)
		for (task_rec_t *t = p->table[h]; t; t = t->hnext)
			if (t->pub.id >= lo && t->pub.id < lo + TASKS) {
				count[t->pub.id - lo]++;
				(*nrec)++;
			}
	for (task_rec_t *t = p->live; t; t = t->lnext)
		if (t->pub.id >= lo && t->pub.id < lo + TASKS) {
			(*nlive)++;
			*named += t->pub.name &&
				  !strcmp(t->pub.name, idle_name);
		}
	pthread_mutex_unlock(&p->lock);
	for (size_t i = 0; i < TASKS; i++)
		assert_true(count[i] <= 1);
}

/*
 * The first update: the FIRST tasks of lowest id, with the runtime's
 * live count; then every task once, named, over the following passes.
 */
static void test_seed_lowest_first_then_all(void **state)
{
	struct seen *s = calloc(1, sizeof(*s));
	struct world *w = calloc(1, sizeof(*w));
	weft_probe_sub_t *sub;
	size_t nrec, nlive, named;

	(void)state;
	fixture_start(s, w);
	knobs(100, FIRST, 40);
	sub = listen_seen(s);
	weft_probe_flush();
	pthread_mutex_lock(&s->lock);
	assert_true(s->first_full);
	/* The lowest ids (all spawned in a row: lo .. lo + TASKS - 1). */
	assert_int_equal(s->first_n, FIRST);
	assert_true(s->first_max_id < w->lo + FIRST);
	assert_true(s->first_live >= TASKS);
	pthread_mutex_unlock(&s->lock);
	assert_true(seeding());

	seed_out();
	weft_probe_flush();
	pthread_mutex_lock(&s->lock);
	assert_int_equal(s->nseen, TASKS);
	for (size_t i = 0; i < TASKS; i++)
		assert_true(s->named[i]);
	pthread_mutex_unlock(&s->lock);
	records(w->lo, &nrec, &nlive, &named);
	assert_int_equal(nrec, TASKS);
	assert_int_equal(nlive, TASKS);
	assert_int_equal(named, TASKS);

	weft_probe_unsubscribe(sub);
	cur_sub = NULL;
	knobs(0, 0, 0);
	world_stop(w);
	fixture_free(s, w);
}

/*
 * Half the tasks finish while the seed goes on: each is one record at
 * most, none of them live; the other half are all live, named, once.
 */
static void test_seed_tasks_finishing_meanwhile(void **state)
{
	struct seen *s = calloc(1, sizeof(*s));
	struct world *w = calloc(1, sizeof(*w));
	weft_probe_sub_t *sub;
	size_t nrec, nlive, named;

	(void)state;
	fixture_start(s, w);
	knobs(100, FIRST, 10);
	sub = listen_seen(s);
	weft_probe_flush();
	worker_listens(w);
	weft_probe_flush();
	assert_true(seeding());
	/* Half of them, seeded or not, polled and finished now. */
	weft_notify_waiters(&w->a);
	for (int i = 0; i < TASKS; i += 2) {
		assert_int_equal(join_wait_drop(w->j[i], NULL), 0);
		w->j[i] = NULL;
	}
	seed_out();
	weft_probe_flush();
	records(w->lo, &nrec, &nlive, &named);
	assert_int_equal(nlive, TASKS / 2);
	assert_int_equal(named, TASKS / 2);
	/* The finished ones the collector still keeps are done. */
	assert_true(nrec >= TASKS / 2 && nrec <= TASKS);
	pthread_mutex_lock(&weft__probe.lock);
	for (int i = 0; i < TASKS; i++) {
		const weft_probe_task_t *t =
			weft__collector_task(&weft__probe, w->lo + (uint64_t)i);

		if (t && i % 2 == 0)
			assert_int_equal(t->state, WEFT_TASK_DONE);
		if (i % 2)
			assert_non_null(t);
	}
	pthread_mutex_unlock(&weft__probe.lock);
	pthread_mutex_lock(&s->lock);
	for (size_t i = 1; i < TASKS; i += 2)
		assert_true(s->got[i] && s->named[i]);
	pthread_mutex_unlock(&s->lock);

	weft_probe_unsubscribe(sub);
	cur_sub = NULL;
	knobs(0, 0, 0);
	weft_notify_waiters(&w->b);
	for (int i = 1; i < TASKS; i += 2)
		assert_int_equal(join_wait_drop(w->j[i], NULL), 0);
	weft_runtime_destroy(w->rt);
	fixture_free(s, w);
}

/*
 * Tasks heard of by their events before their shard is read: half of
 * them woken while the seed goes on, each polled (a record made by its
 * POLL) and parked again.  When the seed is over every task is one
 * record, live and named (the shard's read found the POLL's record and
 * named it), and the subscriber saw each named.
 */
static void test_seed_names_tasks_heard_first(void **state)
{
	struct seen *s = calloc(1, sizeof(*s));
	struct world *w = calloc(1, sizeof(*w));
	weft_probe_sub_t *sub;
	size_t nrec, nlive, named;
	unsigned want;

	(void)state;
	fixture_start(s, w);
	knobs(100, FIRST, 10);
	sub = listen_seen(s);
	weft_probe_flush();
	worker_listens(w);
	weft_probe_flush();
	assert_true(seeding());
	/* Half of them polled now, most before their shard is read. */
	atomic_store(&w->loop, true);
	want = atomic_load(&w->parked) + TASKS / 2;
	weft_notify_waiters(&w->a);
	while (atomic_load(&w->parked) < want)
		usleep(1000);
	weft_probe_flush();
	seed_out();
	weft_probe_flush();
	records(w->lo, &nrec, &nlive, &named);
	assert_int_equal(nrec, TASKS);
	assert_int_equal(nlive, TASKS);
	assert_int_equal(named, TASKS);
	pthread_mutex_lock(&s->lock);
	assert_int_equal(s->nseen, TASKS);
	for (size_t i = 0; i < TASKS; i++)
		assert_true(s->named[i]);
	pthread_mutex_unlock(&s->lock);

	weft_probe_unsubscribe(sub);
	cur_sub = NULL;
	knobs(0, 0, 0);
	world_stop(w);
	fixture_free(s, w);
}

/*
 * A recorder that starts while a console's seed goes on: a file keeps
 * what its full update names, so the seed ends whole in the next pass
 * (weft__sub_seed_whole()), and every task is named then.
 */
static void test_seed_ends_whole_for_a_recorder(void **state)
{
	struct seen *s = calloc(1, sizeof(*s));
	struct world *w = calloc(1, sizeof(*w));
	weft_trace_opts_t o = { .flight_bytes = 1 << 20 };
	weft_probe_sub_t *sub;
	size_t nrec, nlive, named;

	(void)state;
	fixture_start(s, w);
	knobs(100, FIRST, 10);
	sub = listen_seen(s);
	weft_probe_flush();
	assert_true(seeding());
	records(w->lo, &nrec, &nlive, &named);
	assert_true(nrec < TASKS);
	/* A flight recorder (in memory): its start asks for the rest. */
	assert_int_equal(weft_trace_start(NULL, &o), 0);
	weft_probe_flush();
	assert_false(seeding());
	records(w->lo, &nrec, &nlive, &named);
	assert_int_equal(nrec, TASKS);
	assert_int_equal(nlive, TASKS);
	assert_int_equal(named, TASKS);
	assert_int_equal(weft_trace_stop(), 0);

	weft_probe_unsubscribe(sub);
	cur_sub = NULL;
	knobs(0, 0, 0);
	world_stop(w);
	fixture_free(s, w);
}

/*
 * A seed longer than the task-leak window: the seeded site's count rises
 * at every quarter while it goes on, which is no leak.  (Sampled as it
 * went, the site was a leak: its tasks pending, older than half a window,
 * more than LEAK_FLOOR of them.)
 */
static void test_seed_is_no_leak(void **state)
{
	struct seen *s = calloc(1, sizeof(*s));
	struct world *w = calloc(1, sizeof(*w));
	weft_probe_sub_t *sub;
	uint64_t window;

	(void)state;
	fixture_start(s, w);
	knobs(100, FIRST, 20);
	pthread_mutex_lock(&weft__probe.lock);
	window = weft__probe.config.task_leak_window_ns;
	weft__probe.config.task_leak_window_ns = 200000000; /* 200 ms */
	pthread_mutex_unlock(&weft__probe.lock);
	sub = listen_seen(s);
	/* Some 150 passes, 5 ms apart at least: over 0.75 s. */
	weft_probe_flush();
	while (seeding()) {
		weft_probe_flush();
		usleep(5000);
	}
	/* And a window after it, sampled. */
	for (int i = 0; i < 60; i++) {
		weft_probe_flush();
		usleep(5000);
	}
	pthread_mutex_lock(&s->lock);
	assert_int_equal(s->nseen, TASKS);
	assert_int_equal(s->leaks, 0);
	pthread_mutex_unlock(&s->lock);

	weft_probe_unsubscribe(sub);
	cur_sub = NULL;
	pthread_mutex_lock(&weft__probe.lock);
	weft__probe.config.task_leak_window_ns = window;
	pthread_mutex_unlock(&weft__probe.lock);
	knobs(0, 0, 0);
	world_stop(w);
	fixture_free(s, w);
}

/*
 * A leak of tasks spawned long before anyone listened, seen by a late
 * listener: the runtime keeps no spawn time (a task's header has no room
 * for one), so the oldest's age is from when the seed first named it,
 * a lower bound, and the warning says so ("oldest over 0.2 s"), not a
 * figure the task's real age (over 0.6 s here) belies.
 */
static void test_seed_leak_age_a_lower_bound(void **state)
{
	enum { MORE = 400 };
	struct seen *s = calloc(1, sizeof(*s));
	struct world *w = calloc(1, sizeof(*w));
	static weft_join_t *more[MORE];
	weft_probe_sub_t *sub;
	uint64_t window;
	unsigned n = 0;
	double age;

	(void)state;
	fixture_start(s, w);
	/* The tasks older than anything the listener will see. */
	usleep(600000);
	pthread_mutex_lock(&weft__probe.lock);
	window = weft__probe.config.task_leak_window_ns;
	weft__probe.config.task_leak_window_ns = 200000000; /* 200 ms */
	pthread_mutex_unlock(&weft__probe.lock);
	sub = listen_seen(s);
	weft_probe_flush();
	/* The same site grows, all through a window and more. */
	for (int round = 0; round < 40; round++) {
		for (int i = 0; i < MORE / 40; i++) {
			struct idle st = { .n = &w->a,
					   .parked = &w->parked,
					   .loop = &w->loop };
			weft_spawn_t sp = { .poll = idle_poll,
					    .state = &st,
					    .size = sizeof(st),
					    .name = idle_name };

			assert_int_equal(
				weft_spawn_with(w->rt, &sp, &more[n++]), 0);
		}
		usleep(10000);
		weft_probe_flush();
		pthread_mutex_lock(&s->lock);
		if (s->leaks) {
			pthread_mutex_unlock(&s->lock);
			break;
		}
		pthread_mutex_unlock(&s->lock);
	}
	for (int i = 0; i < 100 && !s->leaks; i++) {
		weft_probe_flush();
		usleep(10000);
	}
	pthread_mutex_lock(&s->lock);
	print_message("%s\n", s->leak_detail);
	assert_true(s->leaks > 0);
	/* The oldest is a seeded one; its age at least the shown one. */
	assert_non_null(strstr(s->leak_detail, "; oldest over "));
	assert_int_equal(sscanf(strstr(s->leak_detail, "oldest over ") + 12,
				"%lf", &age),
			 1);
	assert_true(age < 0.6);
	pthread_mutex_unlock(&s->lock);

	weft_probe_unsubscribe(sub);
	cur_sub = NULL;
	pthread_mutex_lock(&weft__probe.lock);
	weft__probe.config.task_leak_window_ns = window;
	pthread_mutex_unlock(&weft__probe.lock);
	atomic_store(&w->loop, false);
	weft_notify_waiters(&w->a);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(join_wait_drop(more[i], NULL), 0);
	world_stop(w);
	fixture_free(s, w);
}

/* Holds its worker (a blocking poll) until told: tasks queue behind. */
static atomic_bool hold_go;

static weft_poll_t hold_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	for (int i = 0; i < 5000 && !atomic_load(&hold_go); i++)
		usleep(1000);
	return WEFT_READY;
}

static weft_poll_t quick_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	return WEFT_READY;
}

/*
 * A task woken (spawned) and queued behind a worker that a poll holds,
 * when a listener comes: seeded scheduled, not idle (an audit: a task
 * starved behind blocked workers showed "idle" to a late console, as if
 * its wake had never come).
 */
static void test_seed_queued_is_scheduled(void **state)
{
	struct seen *s = calloc(1, sizeof(*s));
	weft_runtime_t *rt = rt_create(1);
	weft_join_t *hj, *qj;
	const weft_probe_task_t *t;
	uint64_t qid;
	uint8_t st = WEFT_TASK_DONE;

	(void)state;
	assert_non_null(s);
	pthread_mutex_init(&s->lock, NULL);
	atomic_store(&hold_go, false);
	hj = spawn_ok(rt, hold_poll, NULL, NULL, 0, true);
	/* The holder in its poll before the other is spawned. */
	usleep(50000);
	qj = spawn_ok(rt, quick_poll, NULL, NULL, 0, true);
	qid = weft_join_id(qj);
	listen_seen(s);
	seed_out();
	weft_probe_flush();
	pthread_mutex_lock(&weft__probe.lock);
	t = weft__collector_task(&weft__probe, qid);
	if (t)
		st = t->state;
	pthread_mutex_unlock(&weft__probe.lock);
	atomic_store(&hold_go, true);
	assert_int_equal(join_wait_drop(hj, NULL), 0);
	assert_int_equal(join_wait_drop(qj, NULL), 0);
	assert_int_equal(st, WEFT_TASK_SCHEDULED);
	weft_probe_unsubscribe(cur_sub);
	cur_sub = NULL;
	weft_runtime_destroy(rt);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_seed_lowest_first_then_all,
					  teardown),
		cmocka_unit_test_teardown(test_seed_tasks_finishing_meanwhile,
					  teardown),
		cmocka_unit_test_teardown(test_seed_names_tasks_heard_first,
					  teardown),
		cmocka_unit_test_teardown(test_seed_ends_whole_for_a_recorder,
					  teardown),
		cmocka_unit_test_teardown(test_seed_is_no_leak, teardown),
		cmocka_unit_test_teardown(test_seed_leak_age_a_lower_bound,
					  teardown),
		cmocka_unit_test_teardown(test_seed_queued_is_scheduled,
					  teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
