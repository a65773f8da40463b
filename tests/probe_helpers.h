/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the probe's end-to-end tests (test_probe.c,
 * test_warnings.c): a subscription that keeps what the collector hands
 * on (the sink), a runtime and a subscription that a failed assertion
 * does not leave behind (teardown()), and a few tasks.
 *
 * The collector runs on its own thread; tests subscribe, run a workload,
 * call weft_probe_flush() (which returns after a full pass) and look at
 * what the subscription received.
 */
#ifndef WEFT_TEST_PROBE_HELPERS_H
#define WEFT_TEST_PROBE_HELPERS_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <string.h>

#include "test_helpers.h"

#include "weft/probe.h"

/* ------------------------------------------------------------- the sink */

#define SINK_MAX_WARN 4096
#define SINK_MAX_TASKS 4096

struct sink {
	pthread_mutex_t lock;
	weft_probe_warning_t warn[SINK_MAX_WARN];
	size_t nwarn;
	weft_probe_task_t task[SINK_MAX_TASKS]; /* latest view, by id */
	size_t ntask;
	uint64_t events;
	/* The first records of the kinds notable() keeps. */
	weft_event_t kept[SINK_MAX_TASKS];
	size_t nkept;
	uint64_t updates;
	uint64_t steals;
	double max_polls_per_s;   /* over every update's workers */
	weft_probe_stats_t stats; /* the latest update's (clock unset) */
	/* The latest update's workers in a poll: task, since (ns). */
	uint64_t polling[8], polling_since[8];
	/* Keep the warnings from before it subscribed (the first update's
	 * history): most tests count only their own. */
	bool history;
};

static inline void sink_update(void *ctx, const weft_probe_update_t *u)
{
	struct sink *s = ctx;

	pthread_mutex_lock(&s->lock);
	s->updates++;
	for (size_t i = 0; i < u->nwarnings && s->nwarn < SINK_MAX_WARN; i++)
		if (s->history || !u->warnings[i].history)
			s->warn[s->nwarn++] = u->warnings[i];
	for (size_t i = 0; i < u->ntasks; i++) {
		const weft_probe_task_t *t = u->tasks[i];
		size_t j;

		for (j = 0; j < s->ntask; j++)
			if (s->task[j].id == t->id)
				break;
		if (j == s->ntask) {
			if (s->ntask == SINK_MAX_TASKS)
				continue;
			s->ntask++;
		}
		s->task[j] = *t;
		s->task[j].poll_hist = NULL;
		s->task[j].sched_hist = NULL;
	}
	s->stats = *u->stats;
	s->stats.clock = NULL;
	s->steals = 0;
	for (size_t i = 0; i < u->nworkers && i < 8; i++) {
		s->polling[i] = u->workers[i].state == 0 ?
					u->workers[i].current_task :
					0;
		s->polling_since[i] = u->workers[i].poll_started_ns;
	}
	for (size_t i = 0; i < u->nworkers; i++) {
		s->steals += u->workers[i].counters.steals;
		if (u->workers[i].polls_per_s > s->max_polls_per_s)
			s->max_polls_per_s = u->workers[i].polls_per_s;
	}
	pthread_mutex_unlock(&s->lock);
}

/* Yields, self-wakes and blocking jobs: what the tests look for. */
static inline bool notable(const weft_event_t *e)
{
	switch (e->kind) {
	case WEFT_EV_POLL:
		return e->a2 & WEFT_POLL_YIELDED;
	case WEFT_EV_WAKE:
		return e->task && e->a1 == e->task;
	case WEFT_EV_BLOCKING_START:
	case WEFT_EV_BLOCKING_END:
	case WEFT_EV_MARK:
		return true;
	default:
		return false;
	}
}

static inline void sink_events(void *ctx, const weft_event_t *ev, size_t n)
{
	struct sink *s = ctx;

	pthread_mutex_lock(&s->lock);
	s->events += n;
	for (size_t i = 0; i < n; i++)
		if (notable(&ev[i]) && s->nkept < SINK_MAX_TASKS)
			s->kept[s->nkept++] = ev[i];
	pthread_mutex_unlock(&s->lock);
}

/*
 * What a test has open, so that a failed assertion (cmocka jumps out of
 * the test) does not leave a runtime attached or a subscription behind
 * for the next test: the group's teardown closes whatever is left.
 */
static weft_runtime_t *open_rt;
static struct sink *open_sink;
static weft_probe_sub_t *open_sub;

static inline struct sink *sink_new_history(bool events, bool history,
					    weft_probe_sub_t **sub)
{
	struct sink *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	s->history = history;
	pthread_mutex_init(&s->lock, NULL);
	assert_int_equal(
		weft_probe_subscribe(
			&(weft_probe_sub_opts_t){ .events = events,
						  .on_events = sink_events,
						  .on_update = sink_update,
						  .ctx = s },
			sub),
		0);
	open_sink = s;
	open_sub = *sub;
	return s;
}

static inline struct sink *sink_new(bool events, weft_probe_sub_t **sub)
{
	return sink_new_history(events, false, sub);
}

static inline void sink_free(struct sink *s, weft_probe_sub_t *sub)
{
	open_sink = NULL;
	open_sub = NULL;
	weft_probe_unsubscribe(sub);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Warnings of @kind about task @id. */
static inline unsigned sink_count(struct sink *s, unsigned kind, uint64_t id)
{
	unsigned n = 0;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->nwarn; i++)
		if (s->warn[i].kind == kind && (!id || s->warn[i].task == id))
			n++;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static inline bool sink_find(struct sink *s, unsigned kind, uint64_t id,
			     weft_probe_warning_t *out)
{
	bool found = false;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->nwarn; i++) {
		if (s->warn[i].kind == kind && s->warn[i].task == id) {
			*out = s->warn[i];
			found = true;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return found;
}

static inline bool sink_task(struct sink *s, uint64_t id,
			     weft_probe_task_t *out)
{
	bool found = false;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->ntask; i++) {
		if (s->task[i].id == id) {
			*out = s->task[i];
			found = true;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return found;
}

/* Every warning the sink holds, for a failing check's message. */
static inline void print_warnings(struct sink *s)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->nwarn; i++)
		print_message("warning %s task %llu (%s) at %s:%u: %s\n",
			      weft_warning_kind_name(s->warn[i].kind),
			      (unsigned long long)s->warn[i].task,
			      s->warn[i].task_name ? s->warn[i].task_name : "-",
			      s->warn[i].file ? s->warn[i].file : "-",
			      s->warn[i].line, s->warn[i].detail);
	pthread_mutex_unlock(&s->lock);
}

static inline weft_runtime_t *rt_new(unsigned workers)
{
	weft_runtime_t *rt = NULL;

	assert_int_equal(weft_runtime_create(
				 &(weft_config_t){ .workers = workers }, &rt),
			 0);
	open_rt = rt;
	return rt;
}

static inline void rt_done(weft_runtime_t *rt)
{
	open_rt = NULL;
	weft_runtime_destroy(rt);
}

static inline int teardown(void **state)
{
	(void)state;
	if (open_rt)
		rt_done(open_rt);
	if (open_sub)
		sink_free(open_sink, open_sub);
	return 0;
}

static inline void spin_ns(uint64_t ns)
{
	uint64_t t0 = weft_now_ns();

	while (weft_now_ns() - t0 < ns)
		;
}

/* Spins on one CPU until told to stop: the contention of a busy host. */
struct hog {
	pthread_t thread;
	int cpu;
	atomic_int *stop;
};

static inline void pin_to(pthread_t th, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	assert_int_equal(pthread_setaffinity_np(th, sizeof(set), &set), 0);
}

static inline void *hog_main(void *arg)
{
	struct hog *h = arg;

	pin_to(pthread_self(), h->cpu);
	while (!atomic_load_explicit(h->stop, memory_order_relaxed))
		;
	return NULL;
}

/* This thread's CPU time, ns. */
static inline uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Spins until this thread has run @ns on a CPU: a poll that computes
 * that long however the OS shares the CPUs (the probe tells a poll the
 * OS kept waiting from one that computed: a wall-clock spin on a busy
 * machine reads as the OS's doing).
 */
static inline void spin_cpu_ns(uint64_t ns)
{
	uint64_t t0 = thread_cpu_ns();

	while (thread_cpu_ns() - t0 < ns)
		;
}

/*
 * Runs a task to completion from the test thread; returns its id.  The
 * task is located at the call (run_task()), in the test's own file.
 */
static inline uint64_t run_task_at(weft_runtime_t *rt, const char *name,
				   weft_poll_cb poll, void *state, size_t size,
				   const char *file, int line)
{
	weft_join_t *j;
	uint64_t id;

	assert_int_equal(weft_spawn_with(rt,
					 &(weft_spawn_t){ .poll = poll,
							  .state = state,
							  .size = size,
							  .name = name,
							  .file = file,
							  .line = line },
					 &j),
			 0);
	id = weft_join_id(j);
	assert_int_equal(weft_join_wait(j, NULL), 0);
	weft_join_drop(j);
	return id;
}

/* Variadic: a compound literal's commas are not the macro's. */
#define run_task(...) run_task_at(__VA_ARGS__, __FILE__, __LINE__)

/*
 * How many kept records of @kind concern task @id; the last one's a1 in
 * @a1 (if not NULL).
 */
static inline size_t count_of(struct sink *s, uint8_t kind, uint64_t id,
			      uint64_t *a1)
{
	size_t c = 0;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->nkept; i++)
		if (s->kept[i].kind == kind && s->kept[i].task == id) {
			c++;
			if (a1)
				*a1 = s->kept[i].a1;
		}
	pthread_mutex_unlock(&s->lock);
	return c;
}

/* Waits on a oneshot: idle, with its waker held, until it is sent. */
struct waiter {
	int weft_pc;
	weft_oneshot_rx_t *rx;
};

static inline weft_poll_t waiter_poll(void *arg, weft_cx_t *cx)
{
	struct waiter *w = arg;

	WEFT_ASYNC_BEGIN(w);
	WEFT_AWAIT(w, weft_oneshot_poll(w->rx, cx, NULL, NULL));
	weft_oneshot_rx_drop(w->rx);
	WEFT_ASYNC_END(w);
}

#endif /* WEFT_TEST_PROBE_HELPERS_H */
