/* SPDX-License-Identifier: MIT */
/*
 * weft-console-target: the process the console benchmark attaches to
 * (console-bench.sh; tools/bench/README.md, "Console").  It holds many
 * live tasks, most of them idle, and keeps a steady stream of events
 * flowing:
 *
 *   idle     wait on one weft_notify_t that is notified only at the end;
 *   sleeper  sleep 1 to 5 s, wake, sleep again (timers: a trickle of
 *            changed tasks in every update);
 *   spinner  yield --burst times, sleep 1 ms, repeat (the event stream:
 *            each yield is a poll, a schedule and a wake).
 *
 * With --wait-listener it spawns nothing until a console (or any
 * subscriber asking for events) is attached, then spawns in steps of
 * 5,000 tasks: the probe learns of a task from its events, so tasks
 * spawned before anyone listened, and idle since, would never show.
 *
 * It prints "ready TASKS" once every task is spawned, then runs for
 * --seconds (or until SIGTERM / SIGINT), then stops every task and exits
 * 0.  Tasks that are cancelled by the runtime's destroy release their
 * futures in drop callbacks.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weft/probe.h"
#include "weft/weft.h"

static atomic_bool stop_flag;
static atomic_long live;
static weft_notify_t idle_notify;

struct idle {
	int weft_pc;
	bool armed;
	weft_notified_t nd;
};

static weft_poll_t idle_poll(void *arg, weft_cx_t *cx)
{
	struct idle *t = arg;

	WEFT_ASYNC_BEGIN(t);
	weft_notified_init(&t->nd, &idle_notify);
	t->armed = true;
	if (!atomic_load_explicit(&stop_flag, memory_order_relaxed))
		WEFT_AWAIT(t, weft_notified_poll(&t->nd, cx));
	weft_notified_fini(&t->nd);
	t->armed = false;
	WEFT_ASYNC_END(t);
}

static void idle_drop(void *arg)
{
	struct idle *t = arg;

	if (t->armed)
		weft_notified_fini(&t->nd);
	atomic_fetch_sub(&live, 1);
}

struct sleeper {
	int weft_pc;
	bool armed;
	uint32_t seed;
	weft_sleep_t sl;
};

static weft_poll_t sleeper_poll(void *arg, weft_cx_t *cx)
{
	struct sleeper *t = arg;

	WEFT_ASYNC_BEGIN(t);
	while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
		t->seed = t->seed * 1103515245u + 12345u;
		weft_sleep_init(&t->sl,
				WEFT_MSEC(1000 + (t->seed >> 8) % 4000));
		t->armed = true;
		WEFT_AWAIT(t, weft_sleep_poll(&t->sl, cx));
		weft_sleep_fini(&t->sl);
		t->armed = false;
	}
	WEFT_ASYNC_END(t);
}

static void sleeper_drop(void *arg)
{
	struct sleeper *t = arg;

	if (t->armed)
		weft_sleep_fini(&t->sl);
	atomic_fetch_sub(&live, 1);
}

struct spinner {
	int weft_pc;
	bool armed;
	int i, burst;
	weft_sleep_t sl;
};

static weft_poll_t spinner_poll(void *arg, weft_cx_t *cx)
{
	struct spinner *t = arg;

	WEFT_ASYNC_BEGIN(t);
	while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
		for (t->i = 0; t->i < t->burst; t->i++)
			WEFT_YIELD(t, cx);
		weft_sleep_init(&t->sl, WEFT_MSEC(1));
		t->armed = true;
		WEFT_AWAIT(t, weft_sleep_poll(&t->sl, cx));
		weft_sleep_fini(&t->sl);
		t->armed = false;
	}
	WEFT_ASYNC_END(t);
}

static void spinner_drop(void *arg)
{
	struct spinner *t = arg;

	if (t->armed)
		weft_sleep_fini(&t->sl);
	atomic_fetch_sub(&live, 1);
}

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&stop_flag, true);
}

static void usage(FILE *out)
{
	fputs("usage: weft-console-target [--tasks N] [--sleepers N] "
	      "[--spinners N]\n"
	      "                           [--burst N] [--seconds S] "
	      "[--workers N]\n"
	      "  --tasks N     idle tasks waiting on a notify (default "
	      "90000)\n"
	      "  --sleepers N  tasks sleeping 1-5 s in a loop (default "
	      "10000)\n"
	      "  --spinners N  tasks yielding --burst times per ms "
	      "(default 16)\n"
	      "  --burst N     yields per spinner between 1 ms sleeps "
	      "(default 64)\n"
	      "  --seconds S   run time (default 60; SIGTERM ends it "
	      "sooner)\n"
	      "  --workers N   worker threads (default 2)\n"
	      "  --wait-listener  spawn once a console is attached, in "
	      "steps\n",
	      out);
}

static long arg_long(int argc, char **argv, int *i, long lo, long hi)
{
	char *end;
	long v;

	if (*i + 1 >= argc) {
		fprintf(stderr, "weft-console-target: %s needs a value\n",
			argv[*i]);
		exit(2);
	}
	errno = 0;
	v = strtol(argv[++*i], &end, 10);
	if (errno || *end || v < lo || v > hi) {
		fprintf(stderr, "weft-console-target: %s: %ld to %ld\n",
			argv[*i - 1], lo, hi);
		exit(2);
	}
	return v;
}

static int spawn(weft_runtime_t *rt, const char *name, weft_poll_cb poll,
		 weft_drop_cb drop, const void *state, size_t size)
{
	weft_spawn_t sp = { .poll = poll,
			    .drop = drop,
			    .state = state,
			    .size = size,
			    .name = name,
			    .file = __FILE__,
			    .line = __LINE__ };
	int err = weft_spawn_with(rt, &sp, NULL);

	if (!err)
		atomic_fetch_add(&live, 1);
	return err;
}

int main(int argc, char **argv)
{
	long tasks = 90000, sleepers = 10000, spinners = 16, burst = 64;
	long seconds = 60;
	bool wait_listener = false;
	weft_config_t cfg = { .workers = 2 };
	weft_runtime_t *rt;
	uint64_t deadline;
	int err = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--tasks"))
			tasks = arg_long(argc, argv, &i, 0, 10000000);
		else if (!strcmp(a, "--sleepers"))
			sleepers = arg_long(argc, argv, &i, 0, 10000000);
		else if (!strcmp(a, "--spinners"))
			spinners = arg_long(argc, argv, &i, 0, 100000);
		else if (!strcmp(a, "--burst"))
			burst = arg_long(argc, argv, &i, 1, 1000000);
		else if (!strcmp(a, "--seconds"))
			seconds = arg_long(argc, argv, &i, 1, 86400);
		else if (!strcmp(a, "--workers"))
			cfg.workers = (unsigned)arg_long(argc, argv, &i, 1, 64);
		else if (!strcmp(a, "--wait-listener"))
			wait_listener = true;
		else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	weft_notify_init(&idle_notify);
	if (weft_runtime_create(&cfg, &rt)) {
		fputs("weft-console-target: cannot create the runtime\n",
		      stderr);
		return 1;
	}
	if (wait_listener) {
		printf("waiting for a listener\n");
		fflush(stdout);
		while (!weft_probe_listening() && !atomic_load(&stop_flag))
			usleep(10000);
	}
	for (long i = 0; i < tasks && !err; i++) {
		if (wait_listener && i && i % 5000 == 0)
			usleep(50000);
		err = spawn(rt, "idle", idle_poll, idle_drop,
			    &(struct idle){ 0 }, sizeof(struct idle));
	}
	for (long i = 0; i < sleepers && !err; i++) {
		if (wait_listener && i && i % 5000 == 0)
			usleep(50000);
		err = spawn(rt, "sleeper", sleeper_poll, sleeper_drop,
			    &(struct sleeper){ .seed = (uint32_t)i },
			    sizeof(struct sleeper));
	}
	for (long i = 0; i < spinners && !err; i++)
		err = spawn(rt, "spinner", spinner_poll, spinner_drop,
			    &(struct spinner){ .burst = (int)burst },
			    sizeof(struct spinner));
	if (err) {
		fprintf(stderr, "weft-console-target: spawn: %s\n",
			strerror(-err));
		atomic_store(&stop_flag, true);
	} else {
		printf("ready %ld\n", tasks + sleepers + spinners);
		fflush(stdout);
	}
	deadline = weft_now_ns() + WEFT_SEC(seconds);
	while (!atomic_load(&stop_flag) && weft_now_ns() < deadline)
		usleep(50000);
	atomic_store(&stop_flag, true);
	weft_notify_waiters(&idle_notify);
	/* Spinners and idle tasks finish at once; sleepers are cancelled. */
	for (int i = 0; i < 100 && atomic_load(&live) > sleepers; i++)
		usleep(10000);
	weft_runtime_destroy(rt);
	weft_notify_fini(&idle_notify);
	return err ? 1 : 0;
}
