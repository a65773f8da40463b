/* SPDX-License-Identifier: MIT */
/*
 * The workload of trace_slice.sh (issue 21, weft-trace slice and export
 * --from/--to): events all along, and tasks live across any window.
 *
 * slice_workload SECS [SLEEPERS]: spawns SLEEPERS (default 8) tasks
 * named "sleeper", each awaiting a weft_notify_t nobody signals until
 * the end (live from the start to the end, with no event in between:
 * only the state at a window's start names them), and one "ticker" that
 * sleeps 2 ms at a time and spawns a short "blip" (one yield) every tenth tick,
 * until SECS have passed since every sleeper was polled, which it says
 * on stdout: "ready NS" (CLOCK_MONOTONIC, the clock of the trace's
 * stamps).  Then the notify is signalled and every task waited for: a
 * clean end.  Record it with WEFT_TRACE=path.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "weft/sync_async.h"
#include "weft/weft.h"

static weft_notify_t notify;
static atomic_uint polled, ended, blips;
static atomic_bool stop;
static weft_runtime_t *rt;

static void spawn(weft_poll_cb poll, size_t size, const char *name)
{
	weft_spawn_t spec = { .poll = poll,
			      .state = NULL,
			      .size = size,
			      .name = name,
			      .file = __FILE__,
			      .line = __LINE__ };

	if (weft_spawn_with(rt, &spec, NULL)) {
		fprintf(stderr, "slice_workload: spawn failed\n");
		exit(1);
	}
}

struct sleeper {
	int weft_pc;
	weft_notified_t nd;
};

static weft_poll_t sleeper_poll(void *arg, weft_cx_t *cx)
{
	struct sleeper *p = arg;

	WEFT_ASYNC_BEGIN(p);
	weft_notified_init(&p->nd, &notify);
	atomic_fetch_add(&polled, 1);
	WEFT_AWAIT(p, weft_notified_poll(&p->nd, cx));
	weft_notified_fini(&p->nd);
	atomic_fetch_add(&ended, 1);
	WEFT_ASYNC_END(p);
}

struct blip {
	int weft_pc;
};

/*
 * Yields once, then ends: a pending poll at an await site announced with
 * the first blip, long before any window (a slice carries the
 * announcement again for the window's blips: trace_slice.sh).
 */
static weft_poll_t blip_poll(void *arg, weft_cx_t *cx)
{
	struct blip *p = arg;

	WEFT_ASYNC_BEGIN(p);
	WEFT_YIELD(p, cx);
	atomic_fetch_sub(&blips, 1);
	WEFT_ASYNC_END(p);
}

struct ticker {
	int weft_pc;
	unsigned n;
	weft_sleep_t sl;
};

static weft_poll_t ticker_poll(void *arg, weft_cx_t *cx)
{
	struct ticker *p = arg;

	WEFT_ASYNC_BEGIN(p);
	while (!atomic_load(&stop)) {
		weft_sleep_init(&p->sl, 2 * 1000000ull);
		WEFT_AWAIT(p, weft_sleep_poll(&p->sl, cx));
		if (++p->n % 10 == 0) {
			atomic_fetch_add(&blips, 1);
			spawn(blip_poll, sizeof(struct blip), "blip");
		}
	}
	atomic_fetch_add(&ended, 1);
	WEFT_ASYNC_END(p);
}

static void nap(void)
{
	nanosleep(&(struct timespec){ .tv_nsec = 2000000 }, NULL);
}

int main(int argc, char **argv)
{
	weft_config_t cfg = { .workers = 2 };
	struct timespec t0, t;
	unsigned sleepers = 8;
	double secs;

	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: slice_workload SECS [SLEEPERS]\n");
		return 2;
	}
	secs = strtod(argv[1], NULL);
	if (argc == 3)
		sleepers = (unsigned)strtoul(argv[2], NULL, 10);
	weft_notify_init(&notify);
	if (weft_runtime_create(&cfg, &rt)) {
		fprintf(stderr, "slice_workload: no runtime\n");
		return 1;
	}
	for (unsigned i = 0; i < sleepers; i++)
		spawn(sleeper_poll, sizeof(struct sleeper), "sleeper");
	spawn(ticker_poll, sizeof(struct ticker), "ticker");
	while (atomic_load(&polled) < sleepers)
		nap();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	printf("ready %llu\n", (unsigned long long)t0.tv_sec * 1000000000ull +
				       (unsigned long long)t0.tv_nsec);
	fflush(stdout);
	do {
		nap();
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) +
			 (double)(t.tv_nsec - t0.tv_nsec) / 1e9 <
		 secs);
	atomic_store(&stop, true);
	weft_notify_waiters(&notify);
	while (atomic_load(&ended) < sleepers + 1 || atomic_load(&blips))
		nap();
	weft_runtime_destroy(rt);
	weft_notify_fini(&notify);
	return 0;
}
