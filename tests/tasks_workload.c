/* SPDX-License-Identifier: MIT */
/*
 * The workload of trace_tasks.sh (issue 18, weft-trace tasks).
 *
 * tasks_workload PARKED DONE SECS: spawns PARKED tasks named "parked",
 * each awaiting a weft_notify_t nobody signals (on the line marked
 * PARKED_LINE, which the script looks up), and DONE tasks named "finisher" that sleep 100 ms and end.
 * Prints "ready" once every parked task has been polled, "finished"
 * once the finishers have ended, then waits until SECS have passed (or
 * SIGTERM / SIGINT), so a lost test cannot leave it running.  Then it
 * signals the notify and waits for every task: a clean end, nothing
 * cancelled.
 *
 * Its probe server is on (the default): weft-trace tasks PID reads it.
 * With WEFT_TRACE=path it records from its start.
 *
 * tasks_workload PARKED DONE SECS JOBS: a task named "pdf-submitter" as
 * well, that queues JOBS blocking jobs named "render-pdf" of 80 ms each
 * on a pool of one thread (a convoy: each waits for the ones before)
 * and awaits them; counted with the finishers.  JOBS as "Nd": N jobs of
 * 700 ms, detached, and the submitter ends at once (its jobs outlive
 * it: the pool's holder is a task that has ended).
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "weft/blocking.h"
#include "weft/sync_async.h"
#include "weft/weft.h"

static weft_notify_t notify;
static atomic_uint polled, ended;
static volatile sig_atomic_t stop;

struct parked {
	int weft_pc;
	weft_notified_t nd;
};

static weft_poll_t parked_poll(void *arg, weft_cx_t *cx)
{
	struct parked *p = arg;

	WEFT_ASYNC_BEGIN(p);
	weft_notified_init(&p->nd, &notify);
	atomic_fetch_add(&polled, 1);
	WEFT_AWAIT(p, weft_notified_poll(&p->nd, cx)); /* PARKED_LINE */
	weft_notified_fini(&p->nd);
	atomic_fetch_add(&ended, 1);
	WEFT_ASYNC_END(p);
}

struct finisher {
	int weft_pc;
	weft_sleep_t sl;
};

static weft_poll_t finisher_poll(void *arg, weft_cx_t *cx)
{
	struct finisher *f = arg;

	WEFT_ASYNC_BEGIN(f);
	weft_sleep_init(&f->sl, 100 * 1000000ull);
	WEFT_AWAIT(f, weft_sleep_poll(&f->sl, cx));
	atomic_fetch_add(&ended, 1);
	WEFT_ASYNC_END(f);
}

#define JOBS_MAX 16

static unsigned njobs;
static bool detach;

static void *render(void *arg)
{
	(void)arg;
	nanosleep(&(struct timespec){ .tv_nsec =
					      (detach ? 700 : 80) * 1000000l },
		  NULL);
	return NULL;
}

struct submitter {
	int weft_pc;
	unsigned i;
	weft_blocking_t *h[JOBS_MAX];
};

static weft_poll_t submitter_poll(void *arg, weft_cx_t *cx)
{
	struct submitter *s = arg;

	WEFT_ASYNC_BEGIN(s);
	for (s->i = 0; s->i < njobs; s->i++) {
		weft_blocking_spec_t spec = { .fn = render,
					      .name = "render-pdf",
					      .file = __FILE__,
					      .line = __LINE__ };

		if (weft_spawn_blocking_with(NULL, &spec,
					     detach ? NULL : &s->h[s->i])) {
			fprintf(stderr, "tasks_workload: no job\n");
			exit(1);
		}
	}
	for (s->i = 0; s->i < njobs && !detach; s->i++) {
		WEFT_AWAIT(s, weft_blocking_poll(s->h[s->i], cx, NULL));
		weft_blocking_drop(s->h[s->i]);
	}
	atomic_fetch_add(&ended, 1);
	WEFT_ASYNC_END(s);
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void spawn(weft_runtime_t *rt, weft_poll_cb poll, size_t size,
		  const char *name)
{
	weft_spawn_t spec = { .poll = poll, .state = NULL, .size = size,
			      .name = name, .file = __FILE__,
			      .line = __LINE__ };

	if (weft_spawn_with(rt, &spec, NULL)) {
		fprintf(stderr, "tasks_workload: spawn failed\n");
		exit(1);
	}
}

static void nap(void)
{
	nanosleep(&(struct timespec){ .tv_nsec = 2000000 }, NULL);
}

int main(int argc, char **argv)
{
	weft_config_t cfg = { .workers = 2 };
	struct sigaction sa = { .sa_handler = on_signal };
	weft_runtime_t *rt;
	unsigned nparked, ndone;
	double secs;
	struct timespec t0, t;

	if (argc != 4 && argc != 5) {
		fprintf(stderr,
			"usage: tasks_workload PARKED DONE SECS [JOBS]\n");
		return 2;
	}
	nparked = (unsigned)strtoul(argv[1], NULL, 10);
	ndone = (unsigned)strtoul(argv[2], NULL, 10);
	secs = strtod(argv[3], NULL);
	if (argc == 5) {
		char *end;

		njobs = (unsigned)strtoul(argv[4], &end, 10);
		detach = *end == 'd';
		if (njobs > JOBS_MAX)
			njobs = JOBS_MAX;
		cfg.max_blocking_threads = 1;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	weft_notify_init(&notify);
	if (weft_runtime_create(&cfg, &rt)) {
		fprintf(stderr, "tasks_workload: no runtime\n");
		return 1;
	}
	for (unsigned i = 0; i < nparked; i++)
		spawn(rt, parked_poll, sizeof(struct parked), "parked");
	for (unsigned i = 0; i < ndone; i++)
		spawn(rt, finisher_poll, sizeof(struct finisher), "finisher");
	if (njobs) {
		spawn(rt, submitter_poll, sizeof(struct submitter),
		      "pdf-submitter");
		ndone++;
	}
	while (atomic_load(&polled) < nparked)
		nap();
	printf("ready %d\n", getpid());
	fflush(stdout);
	while (atomic_load(&ended) < ndone)
		nap();
	printf("finished\n");
	fflush(stdout);
	do {
		nap();
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (!stop && (double)(t.tv_sec - t0.tv_sec) +
				  (double)(t.tv_nsec - t0.tv_nsec) / 1e9 <
			  secs);
	weft_notify_waiters(&notify);
	while (atomic_load(&ended) < nparked + ndone)
		nap();
	weft_runtime_destroy(rt);
	weft_notify_fini(&notify);
	return 0;
}
