/* SPDX-License-Identifier: MIT */
/*
 * The probe's collector against a real runtime: what it builds from the
 * events (tasks tracked and named, late events that must not revive a
 * retired task, retention), counters and rates, each worker's off-CPU
 * time, the collector thread's niceness and its reported cost, and
 * switching events off.
 *
 * Beside it: the ring (test_ring.c), the huge-page mappings
 * (test_pages.c), the histogram (test_hist.c) and the warnings
 * (test_warnings.c); the sink the tests subscribe with is
 * probe_helpers.h's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "probe_helpers.h"

#include "weft/metrics_endpoint.h"
#include "weft/mutex.h"
#include "weft/trace.h"

#include "collector_internal.h"
#include "probe_internal.h"

/* -------------------------------------------------------- task tracking */

struct quick {
	int weft_pc;
	int n;
};

static weft_poll_t quick_poll(void *arg, weft_cx_t *cx)
{
	struct quick *q = arg;

	WEFT_ASYNC_BEGIN(q);
	for (q->n = 0; q->n < 3; q->n++)
		WEFT_YIELD(q, cx);
	WEFT_ASYNC_END(q);
}

static void test_probe_tracks_tasks(void **state)
{
	weft_probe_sub_t *sub;
	struct sink *s = sink_new(true, &sub);
	weft_runtime_t *rt = rt_new(2);
	weft_probe_task_t t = { 0 };
	uint64_t id;

	(void)state;
	id = run_task(rt, "quick", quick_poll, &(struct quick){ 0 },
		      sizeof(struct quick));
	weft_probe_flush();
	assert_true(sink_task(s, id, &t));
	assert_string_equal(t.name, "quick");
	assert_non_null(t.file);
	assert_non_null(strstr(t.file, "test_probe.c"));
	assert_true(t.line > 0);
	assert_int_equal(t.polls, 4);
	assert_int_equal(t.state, WEFT_TASK_DONE);
	assert_int_equal(t.wakes, 3);
	assert_int_equal(t.self_wakes, 3);
	/* Each yield is a flag on its poll's record, not a WAKE of its own. */
	assert_int_equal(count_of(s, WEFT_EV_POLL, id, NULL), 3);
	assert_int_equal(count_of(s, WEFT_EV_WAKE, id, NULL), 0);
	assert_int_equal(t.state_size, sizeof(struct quick));
	assert_true(s->events > 0);
	rt_done(rt);
	sink_free(s, sub);
}

/* ------------------------------------------------------------- counters */

static weft_poll_t work_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	spin_ns(200000);
	return WEFT_READY;
}

/*
 * Few enough to stay in the parent's local queue (256): work that spills
 * to the global queue is taken from there, not stolen.
 */
#define FAN 200

struct fan {
	int weft_pc;
	size_t cursor;
	weft_join_t *j[FAN];
};

static weft_poll_t fan_poll(void *arg, weft_cx_t *cx)
{
	struct fan *f = arg;

	WEFT_ASYNC_BEGIN(f);
	for (size_t i = 0; i < FAN; i++)
		if (weft_spawn(NULL, work_poll, (char *)NULL, &f->j[i]))
			return WEFT_READY;
	WEFT_AWAIT(f, weft_join_all(f->j, FAN, NULL, &f->cursor, cx));
	WEFT_ASYNC_END(f);
}

static void test_probe_counters_show_steals(void **state)
{
	weft_probe_sub_t *sub;
	struct sink *s = sink_new(false, &sub);
	weft_runtime_t *rt = rt_new(2);
	weft_worker_metrics_t m0, m1;
	uint64_t steals, events;

	(void)state;
	/* One parent spawns all the work on its worker: the other steals. */
	run_task(rt, "fan", fan_poll, NULL, sizeof(struct fan));
	assert_int_equal(weft_worker_metrics(rt, 0, &m0), 0);
	assert_int_equal(weft_worker_metrics(rt, 1, &m1), 0);
	assert_true(m0.steals + m1.steals > 0);
	assert_int_equal(m0.spawned + m1.spawned, FAN);
	weft_probe_flush();
	pthread_mutex_lock(&s->lock);
	steals = s->steals;
	events = s->events;
	pthread_mutex_unlock(&s->lock);
	assert_int_equal(steals, m0.steals + m1.steals);
	/* Counters only: no events flowed. */
	assert_int_equal(events, 0);
	rt_done(rt);
	sink_free(s, sub);
}

/*
 * One subscription across two runtimes: the second one's rates are taken
 * against its own counters (the window restarts at slot 0 on detach; it
 * once kept its position and took the first runtime's samples as the
 * oldest, ~1e19 polls/s).
 */
struct spinner {
	const atomic_int *stop;
};

static weft_poll_t spinner_poll(void *arg, weft_cx_t *cx)
{
	struct spinner *sp = arg;

	if (atomic_load(sp->stop))
		return WEFT_READY;
	weft_cx_yield(cx);
	return WEFT_PENDING;
}

static void test_probe_rates_across_runtimes(void **state)
{
	weft_probe_sub_t *sub;
	struct sink *s = sink_new(false, &sub);
	weft_runtime_t *rt = rt_new(2);
	atomic_int stop = 0;
	struct spinner sp = { &stop };
	weft_join_t *j;
	double max;

	(void)state;
	assert_int_equal(weft_spawn_named(rt, "spinner", spinner_poll, &sp, &j),
			 0);
	/* Past a whole window (50 passes), then a few more: slot 0 is late. */
	for (int i = 0; i < 57; i++) {
		usleep(10000);
		weft_probe_flush();
	}
	atomic_store(&stop, 1);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
	rt_done(rt);

	rt = rt_new(2);
	pthread_mutex_lock(&s->lock);
	s->max_polls_per_s = 0;
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < 5; i++) {
		usleep(20000);
		weft_probe_flush();
	}
	pthread_mutex_lock(&s->lock);
	max = s->max_polls_per_s;
	pthread_mutex_unlock(&s->lock);
	/* An idle runtime: next to nothing, and never a wrapped count. */
	assert_true(max < 1e6);
	rt_done(rt);
	sink_free(s, sub);
}

/*
 * A task spawned and gone idle before anyone listened is named (with its
 * location) on the first pass after a subscriber arrives: a console
 * attached late sees the connection that waits for its next request.
 */
static void test_probe_names_tasks_spawned_before_listening(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	weft_probe_sub_t *sub;
	struct sink *s;
	weft_oneshot_tx_t *tx;
	weft_oneshot_rx_t *rx;
	weft_probe_task_t seen;
	weft_join_t *j;
	uint64_t id;
	bool found;

	(void)state;
	assert_int_equal(weft_oneshot_create(&tx, &rx), 0);
	assert_int_equal(weft_spawn_with(rt,
					 &(weft_spawn_t){
						 .poll = waiter_poll,
						 .state = &(struct waiter){
							 .rx = rx },
						 .size = sizeof(struct waiter),
						 .name = "early-waiter",
						 .file = "early.c",
						 .line = 42 },
					 &j),
			 0);
	id = weft_join_id(j);
	usleep(20000); /* polled once, now idle on its oneshot */
	s = sink_new(false, &sub);
	weft_probe_flush();
	found = sink_task(s, id, &seen);
	assert_true(found);
	assert_non_null(seen.name);
	assert_string_equal(seen.name, "early-waiter");
	assert_string_equal(seen.file, "early.c");
	assert_int_equal(seen.line, 42);
	assert_int_equal(seen.state_size, sizeof(struct waiter));
	assert_int_equal(weft_oneshot_send(tx, NULL), 0);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
	rt_done(rt);
	sink_free(s, sub);
}

/* ---------------------------------------------------------- spawn sites */

/* A sink that also counts the events of each kind it is handed. */
struct kind_sink {
	struct sink s; /* first: sink_update() takes the whole as one */
	atomic_uint kinds[WEFT_EV_MAX];
	atomic_uint site_spawns; /* SPAWNs naming a site */
};

static void kind_events(void *ctx, const weft_event_t *ev, size_t n)
{
	struct kind_sink *k = ctx;

	for (size_t i = 0; i < n; i++) {
		if (ev[i].kind < WEFT_EV_MAX)
			atomic_fetch_add(&k->kinds[ev[i].kind], 1);
		if (ev[i].kind == WEFT_EV_SPAWN &&
		    ev[i].a2 >> WEFT_SPAWN_SITE_SHIFT)
			atomic_fetch_add(&k->site_spawns, 1);
	}
}

static struct kind_sink *kind_sink_new(bool events, weft_probe_sub_t **sub)
{
	struct kind_sink *k = calloc(1, sizeof(*k));

	assert_non_null(k);
	pthread_mutex_init(&k->s.lock, NULL);
	assert_int_equal(
		weft_probe_subscribe(
			&(weft_probe_sub_opts_t){ .events = events,
						  .on_events = kind_events,
						  .on_update = sink_update,
						  .ctx = k },
			sub),
		0);
	return k;
}

static void kind_sink_free(struct kind_sink *k, weft_probe_sub_t *sub)
{
	weft_probe_unsubscribe(sub);
	pthread_mutex_destroy(&k->s.lock);
	free(k);
}

#define SITE_SPAWNS 20

/* @n tasks of one spawn site (this line), run from this thread. */
static uint64_t spawn_from_site(weft_runtime_t *rt, unsigned n)
{
	struct quick q = { 0 };
	uint64_t id = 0;

	for (unsigned i = 0; i < n; i++)
		id = run_task_at(rt, "site-task", quick_poll, &q, sizeof(q),
				 "site.c", 77);
	return id;
}

static void assert_site_task(struct sink *s, uint64_t id)
{
	weft_probe_task_t t;

	assert_true(sink_task(s, id, &t));
	assert_non_null(t.name);
	assert_string_equal(t.name, "site-task");
	assert_non_null(t.file);
	assert_string_equal(t.file, "site.c");
	assert_int_equal(t.line, 77);
	assert_int_equal(t.state_size, sizeof(struct quick));
}

/*
 * A spawn is one event naming its site, which the spawning thread's ring
 * announces once a listening period: a subscriber that comes after the
 * collector stopped (a new listening period) still learns the site, and
 * one that comes while another listens learns it from the collector.
 */
static void test_probe_spawn_sites(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	weft_probe_sub_t *sub, *late;
	struct kind_sink *a, *b, *c;
	uint64_t id;

	(void)state;
	a = kind_sink_new(true, &sub);
	id = spawn_from_site(rt, SITE_SPAWNS);
	weft_probe_flush();
	assert_site_task(&a->s, id);
	assert_int_equal(atomic_load(&a->site_spawns), SITE_SPAWNS);
	assert_int_equal(atomic_load(&a->kinds[WEFT_EV_SPAWN_INFO]), 0);
	assert_int_equal(atomic_load(&a->kinds[WEFT_EV_SPAWN_LOC]), 0);
	/* This thread's ring told it once (weft_probe_flush() spawns
	 * nothing). */
	assert_int_equal(atomic_load(&a->kinds[WEFT_EV_SITE]), 1);
	assert_int_equal(atomic_load(&a->kinds[WEFT_EV_SITE_LOC]), 1);
	kind_sink_free(a, sub);

	/* The collector stopped and forgot it: a new period, told again. */
	b = kind_sink_new(true, &sub);
	id = spawn_from_site(rt, SITE_SPAWNS);
	weft_probe_flush();
	assert_site_task(&b->s, id);
	assert_int_equal(atomic_load(&b->kinds[WEFT_EV_SITE]), 1);
	assert_int_equal(atomic_load(&b->site_spawns), SITE_SPAWNS);

	/* A late subscriber, while b listens: nothing told again, and its
	 * first (full) update names the task all the same. */
	c = kind_sink_new(true, &late);
	weft_probe_flush();
	assert_site_task(&c->s, id);
	id = spawn_from_site(rt, SITE_SPAWNS);
	weft_probe_flush();
	assert_site_task(&c->s, id);
	assert_int_equal(atomic_load(&c->kinds[WEFT_EV_SITE]), 0);
	assert_int_equal(atomic_load(&b->kinds[WEFT_EV_SITE]), 1);
	kind_sink_free(c, late);
	kind_sink_free(b, sub);
	rt_done(rt);
}

/*
 * Two runtimes: the probe describes the first one made.  When it is
 * destroyed, the other is described next: its workers, and its live
 * tasks named, one spawned before anyone listened included.
 */
static void test_probe_describes_next_runtime(void **state)
{
	weft_runtime_t *rt1 = rt_new(1), *rt2;
	weft_probe_sub_t *sub;
	struct sink *s;
	weft_oneshot_tx_t *tx;
	weft_oneshot_rx_t *rx;
	weft_probe_task_t seen;
	weft_join_t *j;
	unsigned workers;
	uint64_t id;
	bool found;

	(void)state;
	assert_int_equal(weft_runtime_create(&(weft_config_t){ .workers = 3 },
					     &rt2),
			 0);
	assert_int_equal(weft_oneshot_create(&tx, &rx), 0);
	assert_int_equal(weft_spawn_with(rt2,
					 &(weft_spawn_t){
						 .poll = waiter_poll,
						 .state = &(struct waiter){
							 .rx = rx },
						 .size = sizeof(struct waiter),
						 .name = "second-waiter" },
					 &j),
			 0);
	id = weft_join_id(j);
	usleep(20000); /* polled once, now idle on its oneshot */
	s = sink_new(false, &sub);
	weft_probe_flush();
	pthread_mutex_lock(&s->lock);
	workers = s->stats.workers;
	pthread_mutex_unlock(&s->lock);
	assert_int_equal(workers, 1);
	/* Not rt1's: not named from rt1's list. */
	assert_false(sink_task(s, id, &seen));

	rt_done(rt1);
	open_rt = rt2;
	weft_probe_flush();
	weft_probe_flush();
	pthread_mutex_lock(&s->lock);
	workers = s->stats.workers;
	pthread_mutex_unlock(&s->lock);
	assert_int_equal(workers, 3);
	found = sink_task(s, id, &seen);
	assert_true(found);
	assert_non_null(seen.name);
	assert_string_equal(seen.name, "second-waiter");

	assert_int_equal(weft_oneshot_send(tx, NULL), 0);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
	rt_done(rt2);
	sink_free(s, sub);
}

/* Yields @n times, then is done. */
static weft_poll_t yields_poll(void *arg, weft_cx_t *cx)
{
	unsigned *n = arg;

	if (!*n)
		return WEFT_READY;
	(*n)--;
	weft_cx_yield(cx);
	return WEFT_PENDING;
}

/*
 * Rates against a sample of the same runtime's workers: when the
 * described runtime changes, the next one's polls since its start are
 * not one pass's (they read 1.6 M steals/s at start-up).  Here the second
 * runtime polled 200,000 times, then sat idle: its rate reads about 0.
 */
static void test_probe_rates_after_runtime_switch(void **state)
{
	weft_runtime_t *rt1 = rt_new(1), *rt2;
	weft_probe_sub_t *sub;
	struct sink *s;
	weft_join_t *j;
	double worst = 0;

	(void)state;
	assert_int_equal(weft_runtime_create(&(weft_config_t){ .workers = 2 },
					     &rt2),
			 0);
	assert_int_equal(weft_spawn(rt2, yields_poll, &(unsigned){ 200000 },
				    &j),
			 0);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
	s = sink_new(false, &sub);
	weft_probe_flush();
	rt_done(rt1);
	open_rt = rt2;
	for (int i = 0; i < 4; i++) {
		unsigned workers;

		weft_probe_flush();
		pthread_mutex_lock(&s->lock);
		if (s->stats.polls_per_s > worst)
			worst = s->stats.polls_per_s;
		workers = s->stats.workers;
		pthread_mutex_unlock(&s->lock);
		assert_int_equal(workers, 2);
	}
	print_message("polls/s after the switch: at most %.0f\n", worst);
	assert_true(worst < 100000);
	rt_done(rt2);
	sink_free(s, sub);
}

/* ------------------------------------------------------------- off-CPU */

/*
 * Pins its worker to @cpu, spins @ms of wall time there, however little
 * of it the OS gives the worker, and puts the worker's affinity back.
 */
struct pinned_spin {
	int cpu;
	unsigned ms;
};

static weft_poll_t pinned_spin_poll(void *arg, weft_cx_t *cx)
{
	struct pinned_spin *ps = arg;
	cpu_set_t old;

	(void)cx;
	assert_int_equal(
		pthread_getaffinity_np(pthread_self(), sizeof(old), &old), 0);
	pin_to(pthread_self(), ps->cpu);
	spin_ns(WEFT_MSEC(ps->ms));
	assert_int_equal(
		pthread_setaffinity_np(pthread_self(), sizeof(old), &old), 0);
	return WEFT_READY;
}

/* Worker 0's off-CPU figures, as the last update said them. */
struct offcpu_seen {
	pthread_mutex_t lock;
	uint64_t ns;
	double ratio;
};

static void offcpu_update(void *ctx, const weft_probe_update_t *u)
{
	struct offcpu_seen *o = ctx;

	pthread_mutex_lock(&o->lock);
	for (size_t i = 0; i < u->nworkers; i++)
		if (u->workers[i].index == 0) {
			o->ns = u->workers[i].off_cpu_ns;
			o->ratio = u->workers[i].off_cpu_ratio;
		}
	pthread_mutex_unlock(&o->lock);
}

/* Whether this process holds worker thread @tid's schedstat open. */
static bool schedstat_open(int32_t tid)
{
	char want[64], path[300], link[300];
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	bool found = false;

	assert_non_null(d);
	snprintf(want, sizeof(want), "/task/%d/schedstat", (int)tid);
	while ((e = readdir(d))) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (strstr(link, want))
			found = true;
	}
	closedir(d);
	return found;
}

/*
 * One worker spins 100 ms of wall time pinned to @cpu, beside @hogs
 * threads spinning there: its off-CPU time over the spin (from the
 * subscription's updates), and the share of the window the update
 * after it reads.  When the runtime goes, the collector lets its
 * thread's schedstat go.
 */
static void offcpu_run(int cpu, int hogs, uint64_t *ns, double *ratio)
{
	struct offcpu_seen o = { .lock = PTHREAD_MUTEX_INITIALIZER };
	weft_runtime_t *rt = rt_new(1);
	struct hog h[3];
	atomic_int stop = 0;
	weft_probe_sub_t *sub;
	uint64_t before;
	bool held, let_go;
	int32_t tid;

	assert_int_equal(
		weft_probe_subscribe(
			&(weft_probe_sub_opts_t){ .on_update = offcpu_update,
						  .ctx = &o },
			&sub),
		0);
	/* Its thread running, and read: the reading before the spin. */
	run_task(rt, "warm-up", pinned_spin_poll,
		 &(struct pinned_spin){ cpu, 0 }, sizeof(struct pinned_spin));
	weft_probe_flush();
	pthread_mutex_lock(&o.lock);
	before = o.ns;
	pthread_mutex_unlock(&o.lock);
	for (int i = 0; i < hogs; i++) {
		h[i] = (struct hog){ .cpu = cpu, .stop = &stop };
		assert_int_equal(pthread_create(&h[i].thread, NULL,
						hog_main, &h[i]),
				 0);
	}
	usleep(20000); /* the hogs on their CPU */
	run_task(rt, hogs ? "crowded" : "alone", pinned_spin_poll,
		 &(struct pinned_spin){ cpu, 100 }, sizeof(struct pinned_spin));
	/* Its waits are counted as they end: all of them by its return. */
	atomic_store(&stop, 1);
	for (int i = 0; i < hogs; i++)
		pthread_join(h[i].thread, NULL);
	weft_probe_flush();
	pthread_mutex_lock(&o.lock);
	*ns = o.ns > before ? o.ns - before : 0;
	*ratio = o.ratio;
	pthread_mutex_unlock(&o.lock);
	tid = weft__runtime_worker_tid(rt, 0);
	held = tid > 0 && schedstat_open(tid);
	rt_done(rt);
	weft_probe_flush();
	let_go = !schedstat_open(tid);
	/* Asserted unsubscribed: a failure leaves nothing behind. */
	weft_probe_unsubscribe(sub);
	assert_true(held);
	assert_true(let_go);
}

/*
 * Off-CPU time: a worker whose thread shares its CPU with three spinning
 * threads for 100 ms is runnable most of it while the OS runs them (the
 * bad program); its twin, alone on the CPU, hardly at all.  Loose
 * bounds, and up to three tries of the pair: on a small shared machine
 * other processes may crowd the twin's CPU too.
 */
static void test_probe_reports_off_cpu_time(void **state)
{
	uint64_t crowded = 0, alone = 0;
	double crowded_ratio = 0, alone_ratio = 0;
	cpu_set_t mine;
	int cpu = -1;
	FILE *f;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
	if (CPU_COUNT(&mine) < 2) {
		/* The test's thread and the collector need a CPU besides. */
		print_message("skipped: one CPU\n");
		return;
	}
	f = fopen("/proc/self/schedstat", "r");
	if (!f) {
		print_message("skipped: no /proc schedstat\n");
		return;
	}
	fclose(f);
	for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
		if (CPU_ISSET(c, &mine))
			cpu = c;
	for (int round = 0; round < 3; round++) {
		offcpu_run(cpu, 0, &alone, &alone_ratio);
		offcpu_run(cpu, 3, &crowded, &crowded_ratio);
		print_message("off-CPU over 100 ms: beside 3 hogs %.1f ms "
			      "(%.0f%% of the window), alone %.1f ms "
			      "(%.0f%%)\n",
			      (double)crowded / 1e6, crowded_ratio * 100,
			      (double)alone / 1e6, alone_ratio * 100);
		if (crowded >= WEFT_MSEC(30) && alone < crowded / 2)
			break;
	}
	assert_true(crowded >= WEFT_MSEC(30));
	assert_true(crowded_ratio > 0.05);
	assert_true(alone < crowded / 2);
	assert_true(alone_ratio < crowded_ratio);
}

/*
 * A thread's first event registers its ring without probe.lock, which
 * the collector holds through a pass (a recorder's file writes
 * included): here the test holds it, and a new thread's first events
 * still go through at once, and reach the subscriber afterwards.
 */
struct marker {
	atomic_int done;
};

static void *marker_main(void *arg)
{
	struct marker *m = arg;

	for (int i = 0; i < 10; i++)
		weft_probe_mark(7, (uint32_t)i);
	atomic_store(&m->done, 1);
	return NULL;
}

/*
 * A waker can outlive its task by any time.  Kept past the task's
 * retention and dropped then, it must not bring the task's record back:
 * nothing would ever finish or retire it (one leaked record per task).
 */
static weft_waker_t late_waker = WEFT_WAKER_EMPTY;

static weft_poll_t keep_waker_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	late_waker = weft_waker_clone(weft_cx_waker(cx));
	return WEFT_READY;
}

static bool collector_knows(uint64_t id)
{
	bool known;

	pthread_mutex_lock(&weft__probe.lock);
	known = weft__collector_task(&weft__probe, id) != NULL;
	pthread_mutex_unlock(&weft__probe.lock);
	return known;
}

/*
 * The same for a weft_mutex_t its task took and never released: the
 * release, later and elsewhere, names the task, and must not bring back
 * its record either.
 */
static weft_mutex_t left_locked;

static weft_poll_t lock_and_leave_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	weft_mutex_lock(&left_locked);
	return WEFT_READY;
}

/* On the same (only) worker: pthread wants the locking thread. */
static weft_poll_t unlock_left_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	weft_mutex_unlock(&left_locked);
	return WEFT_READY;
}

/*
 * Task @id, finished and known, is retired (retention cut to 20 ms for the
 * while), then @late makes its late event: the record must stay gone.
 */
static void late_event_revives_nothing(uint64_t id, void (*late)(void *),
				       void *arg)
{
	uint64_t retain;

	weft_probe_flush();
	assert_true(collector_knows(id)); /* kept: retention is 6 s */
	/*
	 * Shorten retention only now: set before the task ran, a slow
	 * (sanitized) run could see the task finish and retire in one
	 * pass, before the check above.
	 */
	pthread_mutex_lock(&weft__probe.lock);
	retain = weft__probe.config.retain_ns;
	weft__probe.config.retain_ns = 20 * 1000 * 1000;
	pthread_mutex_unlock(&weft__probe.lock);
	usleep(60 * 1000);
	weft_probe_flush();
	weft_probe_flush();
	assert_false(collector_knows(id)); /* retired */
	late(arg);
	weft_probe_flush();
	weft_probe_flush();
	assert_false(collector_knows(id));
	pthread_mutex_lock(&weft__probe.lock);
	weft__probe.config.retain_ns = retain;
	pthread_mutex_unlock(&weft__probe.lock);
}

/* A late LOCK_RELEASE, naming the task gone. */
static void release_late(void *arg)
{
	int unused = 0;

	(void)run_task(arg, "unlocks", unlock_left_poll, &unused,
		       sizeof(unused));
}

static void test_probe_late_release_revives_nothing(void **state)
{
	weft_probe_sub_t *sub;
	struct sink *s = sink_new(true, &sub);
	weft_runtime_t *rt = rt_new(1);
	int unused = 0;

	(void)state;
	weft_mutex_init(&left_locked, "left-locked");
	late_event_revives_nothing(run_task(rt, "leaves-locked",
					    lock_and_leave_poll, &unused,
					    sizeof(unused)),
				   release_late, rt);
	weft_mutex_fini(&left_locked);
	rt_done(rt);
	sink_free(s, sub);
}

/* A late WAKER_DROP. */
static void drop_late(void *arg)
{
	(void)arg;
	weft_waker_drop(&late_waker);
}

static void test_probe_late_waker_revives_nothing(void **state)
{
	weft_probe_sub_t *sub;
	struct sink *s = sink_new(true, &sub);
	weft_runtime_t *rt = rt_new(1);
	int unused = 0;

	(void)state;
	late_event_revives_nothing(run_task(rt, "keeps-waker",
					    keep_waker_poll, &unused,
					    sizeof(unused)),
				   drop_late, NULL);
	rt_done(rt);
	sink_free(s, sub);
}

/*
 * Finished tasks are kept for retain_ns, and no more than retain_max of
 * them: the oldest go first, whatever their age.
 */
static void test_probe_retains_at_most_retain_max(void **state)
{
	weft_probe_sub_t *sub;
	struct sink *s = sink_new(true, &sub);
	weft_runtime_t *rt = rt_new(1);
	uint64_t first = 0, last = 0;
	size_t max, done;
	int unused = 0;

	(void)state;
	pthread_mutex_lock(&weft__probe.lock);
	max = weft__probe.config.retain_max;
	weft__probe.config.retain_max = 100;
	pthread_mutex_unlock(&weft__probe.lock);
	for (int i = 0; i < 1000; i++) {
		last = run_task(rt, "short-lived", keep_waker_poll, &unused,
				sizeof(unused));
		weft_waker_drop(&late_waker);
		if (!first)
			first = last;
	}
	weft_probe_flush();
	weft_probe_flush();
	pthread_mutex_lock(&weft__probe.lock);
	done = weft__probe.ndone;
	weft__probe.config.retain_max = max;
	pthread_mutex_unlock(&weft__probe.lock);
	assert_true(done <= 100);
	assert_false(collector_knows(first)); /* the oldest went */
	assert_true(collector_knows(last));   /* well within 6 s */
	rt_done(rt);
	sink_free(s, sub);
}

/*
 * A task that wakes itself through its waker (not a yield) is in a queue
 * between its polls, never idle: its wake is stamped with the poll's
 * start, and the collector must count it as inside that poll (a 1 ns
 * rounding once put the poll's start after it, in about half the polls).
 */
static weft_poll_t self_waker_poll(void *arg, weft_cx_t *cx)
{
	int *n = arg;

	if (++*n > 200)
		return WEFT_READY;
	weft_waker_wake_by_ref(weft_cx_waker(cx));
	return WEFT_PENDING;
}

static void test_probe_self_waker_never_idle(void **state)
{
	weft_probe_sub_t *sub;
	struct sink *s = sink_new(true, &sub);
	weft_runtime_t *rt = rt_new(1);
	weft_probe_task_t t = { 0 };
	uint64_t id;
	int n = 0;

	(void)state;
	/*
	 * The worker's ring made first.  A ring the collector takes on at
	 * the end of a pass can hold the task's first wake while the spawn,
	 * pushed to an older ring just after that ring was drained, waits
	 * for the next pass; the wake, for a task not known yet, is then
	 * lost (seen once under TSan on a loaded machine).
	 */
	run_task(rt, "warm-up", self_waker_poll, &(int){ 200 }, sizeof(int));
	weft_probe_flush();
	id = run_task(rt, "self-waker", self_waker_poll, &n, sizeof(n));
	weft_probe_flush();
	assert_true(sink_task(s, id, &t));
	assert_int_equal(t.polls, 201);
	assert_int_equal(t.self_wakes, 200);
	assert_int_equal(t.idle_ns, 0);
	rt_done(rt);
	sink_free(s, sub);
}

/*
 * Opens /proc/self/task/TID/@name of the collector thread (found by its
 * name), or returns NULL if there is none.
 */
static FILE *collector_proc_open(const char *name)
{
	char path[300], buf[64];
	FILE *out = NULL;
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;

	assert_non_null(d);
	while (!out && (de = readdir(d))) {
		FILE *f;
		bool found;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		found = fgets(buf, sizeof(buf), f) &&
			!strncmp(buf, "weft-collector", 14);
		fclose(f);
		if (!found)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/%s",
			 de->d_name, name);
		out = fopen(path, "r");
	}
	closedir(d);
	return out;
}

/* The collector thread's nice value, read from /proc; -100 if not found. */
static int collector_nice_now(void)
{
	char buf[512], *rp;
	int nice = -100, field = 3;
	FILE *f = collector_proc_open("stat");

	if (!f)
		return nice;
	if (fgets(buf, sizeof(buf), f) && (rp = strrchr(buf, ')'))) {
		/* After "pid (comm)": state is field 3, nice 19. */
		for (char *tok = strtok(rp + 1, " "); tok;
		     tok = strtok(NULL, " "), field++)
			if (field == 19)
				nice = atoi(tok);
	}
	fclose(f);
	return nice;
}

static void test_probe_collector_nice(void **state)
{
	weft_probe_sub_t *sub;
	struct sink *s;
	int base;

	(void)state;
	/* Unset, it inherits ours (the suite may itself run niced). */
	errno = 0;
	base = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
	assert_int_equal(errno, 0);
	s = sink_new(true, &sub);
	weft_probe_flush();
	assert_int_equal(collector_nice_now(), base);
	sink_free(s, sub);

	setenv("WEFT_COLLECTOR_NICE", "19", 1);
	s = sink_new(true, &sub);
	weft_probe_flush();
	assert_int_equal(collector_nice_now(), 19);
	sink_free(s, sub);
	unsetenv("WEFT_COLLECTOR_NICE");
}

/*
 * The collector thread's CPU time as the kernel counts it
 * (/proc/self/task/TID/schedstat, ns on the CPU), or 0 if not found.
 */
static uint64_t collector_schedstat_ns(void)
{
	unsigned long long v = 0;
	FILE *f = collector_proc_open("schedstat");

	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

struct yield_for {
	int weft_pc;
	uint64_t until;
};

static weft_poll_t yield_for_poll(void *arg, weft_cx_t *cx)
{
	struct yield_for *y = arg;

	WEFT_ASYNC_BEGIN(y);
	while (weft_now_ns() < y->until)
		WEFT_YIELD(y, cx);
	WEFT_ASYNC_END(y);
}

/*
 * The probe reports its own cost: the collector's CPU time, which the
 * kernel's count for the thread bounds, and its share of a CPU once a
 * window of a second has passed with events flowing.
 */
static void test_probe_reports_collector_cpu(void **state)
{
	weft_runtime_t *rt = rt_new(2);
	weft_probe_sub_t *sub;
	weft_probe_stats_t st;
	uint64_t kernel;
	struct sink *s;

	(void)state;
	s = sink_new(true, &sub);
	run_task(rt, "yield-for", yield_for_poll,
		 &(struct yield_for){ 0, weft_now_ns() + 1200000000ull },
		 sizeof(struct yield_for));
	weft_probe_flush();
	kernel = collector_schedstat_ns();
	pthread_mutex_lock(&s->lock);
	st = s->stats;
	pthread_mutex_unlock(&s->lock);
	assert_true(st.events > 10000);
	assert_true(st.collector_cpu_ns > 0);
	/* Read at the end of the last pass; the kernel's, a moment later. */
	assert_true(kernel > 0);
	assert_true(st.collector_cpu_ns <= kernel);
	assert_true(st.collector_cpu > 0);
	assert_true(st.collector_cpu <= 1.05);
	sink_free(s, sub);
	rt_done(rt);
}

static void test_probe_first_event_needs_no_lock(void **state)
{
	weft_probe_sub_t *sub;
	struct sink *s = sink_new(true, &sub);
	struct marker m = { 0 };
	pthread_t th;
	uint64_t before, after;
	int waited = 0;

	(void)state;
	weft_probe_flush();
	pthread_mutex_lock(&s->lock);
	before = s->events;
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_lock(&weft__probe.lock);
	assert_int_equal(pthread_create(&th, NULL, marker_main, &m), 0);
	/* 10 s: a thread that waits for the lock never gets there. */
	while (!atomic_load(&m.done) && waited < 10000) {
		usleep(1000);
		waited++;
	}
	pthread_mutex_unlock(&weft__probe.lock);
	pthread_join(th, NULL);
	assert_true(waited < 10000);
	weft_probe_flush();
	pthread_mutex_lock(&s->lock);
	after = s->events;
	pthread_mutex_unlock(&s->lock);
	assert_true(after - before >= 10);
	sink_free(s, sub);
}

/* Whether @s kept a MARK with @a1. */
static bool sink_saw_mark(struct sink *s, uint64_t a1)
{
	bool seen = false;

	pthread_mutex_lock(&s->lock);
	for (size_t k = 0; k < s->nkept && !seen; k++)
		seen = s->kept[k].kind == WEFT_EV_MARK && s->kept[k].a1 == a1;
	pthread_mutex_unlock(&s->lock);
	return seen;
}

/*
 * Events left in a ring when the last listener went (a site that saw it
 * listening pushes after the collector's last pass) are not the next
 * listening period's: a collector started later drops them.  An outside
 * tester saw them reach the next attach.  Pushed here straight into this
 * thread's ring while nobody listens, as such a site does.
 */
static void test_probe_left_events_not_next_periods(void **state)
{
	weft_probe_sub_t *sub;
	struct sink *s = sink_new(true, &sub);

	(void)state;
	weft_probe_mark(0x5eed, 0); /* this thread's ring, registered */
	weft_probe_flush();
	assert_true(sink_saw_mark(s, 0x5eed));
	sink_free(s, sub);
	assert_false(weft__probe_on());
	/* Another subscriber (an earlier case's console server) keeps the
	 * collector running: its next pass takes what is left, in order. */
	pthread_mutex_lock(&weft__probe.lock);
	if (weft__probe.running) {
		pthread_mutex_unlock(&weft__probe.lock);
		skip();
	}
	pthread_mutex_unlock(&weft__probe.lock);
	weft__probe_emit_at(weft__probe_clock(), WEFT_EV_MARK, 0, 0x1ef7, 0);
	s = sink_new(true, &sub);
	weft_probe_mark(0xbee, 0);
	weft_probe_flush();
	weft_probe_flush();
	assert_true(sink_saw_mark(s, 0xbee));
	assert_false(sink_saw_mark(s, 0x1ef7));
	sink_free(s, sub);
}

static void test_probe_events_switch_off(void **state)
{
	weft_probe_sub_t *sub;
	struct sink *s = sink_new(true, &sub);
	weft_runtime_t *rt = rt_new(2);

	(void)state;
	assert_true(weft__probe_on());
	run_task(rt, "quick", quick_poll, &(struct quick){ 0 },
		 sizeof(struct quick));
	weft_probe_flush();
	assert_true(s->events > 0);
	sink_free(s, sub);
	/* Nobody listens: every site is a compare and a branch, no event. */
	assert_false(weft__probe_on());
	rt_done(rt);
}

/*
 * A worker kept busy by a task that yields without end never parks: the
 * loop it runs while nobody listens (no poll site) must still give way
 * to the timed one when a listener comes, and back when it goes, and
 * again for the next.  Each listener sees the spinner's yields.
 */
struct busy_yielder {
	atomic_int *stop;
	atomic_long *polls;
};

static weft_poll_t busy_yielder_poll(void *arg, weft_cx_t *cx)
{
	struct busy_yielder *sp = arg;

	atomic_fetch_add(sp->polls, 1);
	if (atomic_load(sp->stop))
		return WEFT_READY;
	weft_cx_yield(cx);
	return WEFT_PENDING;
}

/* Waits (10 s at most) for a yielded poll of task @id in @s's events. */
static bool sink_saw_yield(struct sink *s, uint64_t id)
{
	for (int i = 0; i < 1000; i++) {
		bool seen = false;

		weft_probe_flush();
		pthread_mutex_lock(&s->lock);
		for (size_t k = 0; k < s->nkept && !seen; k++)
			seen = s->kept[k].kind == WEFT_EV_POLL &&
			       s->kept[k].task == id;
		pthread_mutex_unlock(&s->lock);
		if (seen)
			return true;
		usleep(10000);
	}
	return false;
}

static void test_probe_listening_reaches_busy_worker(void **state)
{
	atomic_int stop = 0;
	atomic_long polls = 0;
	weft_runtime_t *rt = rt_new(1);
	weft_probe_sub_t *sub;
	struct sink *s;
	weft_join_t *j;
	uint64_t id;

	(void)state;
	assert_int_equal(
		weft_spawn_with(
			rt,
			&(weft_spawn_t){
				.poll = busy_yielder_poll,
				.state = &(struct busy_yielder){ &stop, &polls },
				.size = sizeof(struct busy_yielder),
				.name = "spinner" },
			&j),
		0);
	id = weft_join_id(j);
	/* Well into its quiet loop: polled many times, never parked. */
	while (atomic_load(&polls) < 10000)
		usleep(1000);
	for (int round = 0; round < 3; round++) {
		long before;

		s = sink_new(true, &sub);
		assert_true(sink_saw_yield(s, id));
		sink_free(s, sub);
		/* Still running, now with nobody listening. */
		before = atomic_load(&polls);
		while (atomic_load(&polls) < before + 1000)
			usleep(1000);
	}
	atomic_store(&stop, 1);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
	rt_done(rt);
}

/* What the probe's calls answered from inside a callback. */
struct reentry {
	_Atomic int calls;
	int subscribe, trace_start, trace_stop, snapshot, metrics;
	int runtime, endpoint;
	uint64_t long_poll_ns;
	bool flushed;
};

static void reentry_update(void *ctx, const weft_probe_update_t *u)
{
	struct reentry *r = ctx;
	weft_probe_sub_t *sub = NULL;
	weft_probe_config_t cfg;
	char *text = NULL;
	size_t len;

	(void)u;
	if (atomic_fetch_add(&r->calls, 1))
		return;
	r->subscribe = weft_probe_subscribe(
		&(weft_probe_sub_opts_t){ .on_update = reentry_update }, &sub);
	weft_probe_flush(); /* returns: the pass it runs in */
	r->flushed = true;
	weft_probe_config(&cfg);
	r->long_poll_ns = cfg.long_poll_ns;
	r->trace_start = weft_trace_start("/dev/null", NULL);
	r->trace_stop = weft_trace_stop();
	r->snapshot = weft_trace_snapshot("/dev/null");
	r->metrics = weft_metrics_text(WEFT_METRICS_PROMETHEUS, &text, &len);
	free(text);
	{
		weft_runtime_t *rt = NULL;
		weft_metrics_endpoint_t *e = NULL;

		r->runtime = weft_runtime_create(NULL, &rt);
		r->endpoint = weft_metrics_endpoint_create(
			&(weft_metrics_endpoint_opts_t){ .bind = "0",
							 .histograms = true },
			&e);
	}
}

/*
 * The calls that take the probe's lock, made from a subscriber's callback
 * (which runs under it): each says -EDEADLK, or does what it can without
 * the lock (flush, config), instead of hanging the collector for ever.
 */
static void test_probe_calls_from_a_callback(void **state)
{
	struct reentry r = { 0 };
	weft_probe_config_t cfg;
	weft_probe_sub_t *sub;

	(void)state;
	assert_int_equal(weft_probe_subscribe(
				 &(weft_probe_sub_opts_t){
					 .on_update = reentry_update,
					 .ctx = &r },
				 &sub),
			 0);
	weft_probe_flush();
	weft_probe_flush();
	weft_probe_unsubscribe(sub);
	assert_true(atomic_load(&r.calls) >= 1);
	assert_int_equal(r.subscribe, -EDEADLK);
	assert_true(r.flushed);
	weft_probe_config(&cfg);
	assert_int_equal(r.long_poll_ns, cfg.long_poll_ns);
	assert_int_equal(r.trace_start, -EDEADLK);
	assert_int_equal(r.trace_stop, -EDEADLK);
	assert_int_equal(r.snapshot, -EDEADLK);
	assert_int_equal(r.metrics, -EDEADLK);
	assert_int_equal(r.runtime, -EDEADLK);
	assert_int_equal(r.endpoint, -EDEADLK);
}

/*
 * The subscription, published once weft_probe_subscribe() has returned
 * it: the first callback may run before that (CI's TSan saw the race on
 * a plain pointer), and waits for a later pass.
 */
static _Atomic(weft_probe_sub_t *) unsub_target;

static void unsub_update(void *ctx, const weft_probe_update_t *u)
{
	weft_probe_sub_t *sub = atomic_load(&unsub_target);

	(void)ctx;
	(void)u;
	if (sub)
		weft_probe_unsubscribe(sub);
}

/* The child's part: unsubscribe from a callback, which must panic. */
static int unsubscribe_in_callback(void)
{
	weft_probe_sub_t *sub;

	if (weft_probe_subscribe(
		    &(weft_probe_sub_opts_t){ .on_update = unsub_update },
		    &sub))
		return 3;
	atomic_store(&unsub_target, sub);
	weft_probe_flush();
	weft_probe_flush();
	sleep(5);
	return 0; /* not reached */
}

/*
 * Unsubscribing from a callback (which would wait for itself) panics,
 * saying so, in a child: this program run again (a fork of a process
 * that ran threads is not a clean start under ThreadSanitizer), its
 * stderr read to its end so that nothing it prints can stop it early.
 */
static void test_probe_unsubscribe_from_a_callback_panics(void **state)
{
	char *argv[] = { "test_probe", "--unsubscribe-in-callback", NULL };
	posix_spawn_file_actions_t fa;
	char msg[4096] = { 0 }, scratch[512];
	size_t got = 0;
	ssize_t n;
	int fds[2], status;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
	assert_int_equal(
		posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO),
		0);
	assert_int_equal(posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv,
				     environ),
			 0);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	for (;;) {
		bool room = got < sizeof(msg) - 1;

		n = read(fds[0], room ? msg + got : scratch,
			 room ? sizeof(msg) - 1 - got : sizeof(scratch));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (room)
			got += (size_t)n;
	}
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
		fail_msg("child: status %#x, said: %s", status, msg);
	assert_non_null(strstr(msg, "from a probe callback"));
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--unsubscribe-in-callback"))
		return unsubscribe_in_callback();
	/* One test a line. */
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_probe_tracks_tasks, teardown),
		cmocka_unit_test_teardown(test_probe_counters_show_steals, teardown),
		cmocka_unit_test_teardown(test_probe_rates_across_runtimes, teardown),
		cmocka_unit_test_teardown(test_probe_describes_next_runtime,
					  teardown),
		cmocka_unit_test_teardown(test_probe_rates_after_runtime_switch,
					  teardown),
		cmocka_unit_test_teardown(test_probe_reports_off_cpu_time, teardown),
		cmocka_unit_test_teardown(test_probe_names_tasks_spawned_before_listening, teardown),
		cmocka_unit_test_teardown(test_probe_spawn_sites, teardown),
		cmocka_unit_test_teardown(test_probe_first_event_needs_no_lock, teardown),
		cmocka_unit_test_teardown(test_probe_late_release_revives_nothing,
					  teardown),
		cmocka_unit_test_teardown(test_probe_late_waker_revives_nothing, teardown),
		cmocka_unit_test_teardown(test_probe_retains_at_most_retain_max, teardown),
		cmocka_unit_test_teardown(test_probe_self_waker_never_idle, teardown),
		cmocka_unit_test_teardown(test_probe_collector_nice, teardown),
		cmocka_unit_test_teardown(test_probe_reports_collector_cpu, teardown),
		cmocka_unit_test_teardown(test_probe_events_switch_off, teardown),
		cmocka_unit_test_teardown(test_probe_left_events_not_next_periods,
					  teardown),
		cmocka_unit_test_teardown(test_probe_listening_reaches_busy_worker, teardown),
		cmocka_unit_test_teardown(test_probe_calls_from_a_callback, teardown),
		cmocka_unit_test_teardown(test_probe_unsubscribe_from_a_callback_panics, teardown),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
