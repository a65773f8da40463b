/* SPDX-License-Identifier: MIT */
/*
 * `weft-bench idle-tasks [N]`: what an idle task costs in memory (issue
 * 21), the same measure as the Tokio anchor's `tokio-bench idle-tasks N`.
 *
 * A 2-worker runtime; the main thread (not a worker) spawns N detached
 * tasks, each awaiting one shared weft_notify_t (Tokio's Notify) with a
 * weft_notified_t as its whole state, initialised by the spawner and
 * moved into the task before its first poll (sync_async.h allows that).
 * Resident memory is read from /proc/self/statm after a 1 s settle
 * before the spawns, and again once every task has parked and at least
 * 2 s have passed since the spawns began (the anchor sleeps 1 s, then
 * spawns, then sleeps 2 s).  bytes_per_task is the difference over N.
 *
 * A second line breaks that down: the task header, the state, the block
 * the runtime asks for, the size class it rounds to, the malloc chunk
 * that class costs (usable size + glibc's 8-byte header), and what is
 * left of the measured figure (page tables, the heap's slack, caches).
 * The runtime's internal header gives the first four (this tool is built
 * with the library's own sources).
 *
 * Then every task is woken (weft_notify_waiters) and counted out on a
 * latch, so the run ends with no task left.  Progress for a phase longer
 * than a second goes to stderr, only when it is a terminal.
 */
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "runtime_internal.h"
#include "tool_util.h"

#define IDLE_WORKERS 2
#define IDLE_DEFAULT 1000000ul
#define IDLE_MAX 100000000ul    /* fits the latch's unsigned */
#define SETTLE_NS 2000000000ull /* after the spawns began, at least */
#define PARK_TIMEOUT_NS 120000000000ull

static weft_countdown_t idle_done;
static _Atomic unsigned long idle_parked;

static weft_poll_t idle_poll(void *state, weft_cx_t *cx)
{
	weft_notified_t *nd = state;

	if (weft_notified_poll(nd, cx) == WEFT_PENDING) {
		/* Relaxed: a count the main thread polls, nothing more. */
		atomic_fetch_add_explicit(&idle_parked, 1,
					  memory_order_relaxed);
		return WEFT_PENDING;
	}
	weft_countdown_done(&idle_done);
	return WEFT_READY;
}

static void idle_drop(void *state)
{
	weft_notified_fini(state);
}

/* Resident bytes, from /proc/self/statm's second field (pages). */
static long long rss_bytes(void)
{
	long long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		bench_die("/proc/self/statm", -errno);
	if (fscanf(f, "%lld %lld", &size, &resident) != 2)
		bench_die("/proc/self/statm", -EIO);
	fclose(f);
	return resident * sysconf(_SC_PAGESIZE);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u),
			       (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

struct progress {
	const char *phase;
	uint64_t start;
	uint64_t last;
	bool tty;
	bool shown;
};

static void progress_start(struct progress *p, const char *phase)
{
	p->phase = phase;
	p->start = p->last = tool_now_ns();
	p->shown = false;
}

/* Redraws "phase done/total" on stderr once the phase is past 1 s. */
static void progress_show(struct progress *p, unsigned long done,
			  unsigned long total)
{
	uint64_t now = tool_now_ns();

	if (!p->tty || now - p->start < 1000000000u ||
	    now - p->last < 100000000u)
		return;
	p->last = now;
	p->shown = true;
	fprintf(stderr, "\rweft-bench: idle-tasks %s %lu/%lu", p->phase, done,
		total);
}

static void progress_end(struct progress *p)
{
	if (p->shown)
		fputs("\r\033[K", stderr);
	p->shown = false;
}

static double ms_since(uint64_t t0)
{
	return (double)(tool_now_ns() - t0) / 1e6;
}

static unsigned alloc_class_size(size_t block)
{
	static const uint32_t sizes[] = TASK_ALLOC_CLASS_SIZES;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (block <= sizes[i])
			return sizes[i];
	return (unsigned)block;
}

/* What glibc spends on a malloc(@n): its usable size plus its header. */
static size_t malloc_chunk(size_t n)
{
	void *p = malloc(n);
	size_t chunk;

	if (!p)
		bench_die("malloc", -ENOMEM);
	chunk = malloc_usable_size(p) + sizeof(size_t);
	free(p);
	return chunk;
}

static void idle_usage(FILE *f)
{
	fprintf(f,
		"usage: weft-bench idle-tasks [N]\n"
		"\n"
		"Spawns N (default %lu) tasks on a %d-worker runtime, each awaiting\n"
		"one shared notify, and prints the resident memory per idle task\n"
		"(the Tokio anchor's `tokio-bench idle-tasks N`), then a breakdown.\n",
		IDLE_DEFAULT, IDLE_WORKERS);
}

int bench_idle_main(int argc, char **argv)
{
	weft_config_t config = { .workers = IDLE_WORKERS };
	struct progress pg = { .tty = isatty(STDERR_FILENO) };
	unsigned long n = IDLE_DEFAULT, i;
	long long r0, r1;
	size_t header, block, cls, chunk;
	double spawn_ms, park_ms, wake_ms;
	weft_runtime_t *rt;
	weft_notify_t note;
	uint64_t t0, t1;
	double per_task;
	int err;

	/* argv[0] is the subcommand. */
	for (int a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) {
			idle_usage(stdout);
			exit(0);
		}
		if (a > 1 || !tool_parse_ulong(argv[a], 1, IDLE_MAX, &n))
			tool_die(2, "weft-bench",
				 "idle-tasks takes one count, 1..%lu: '%s'",
				 IDLE_MAX, argv[a]);
	}

	err = weft_runtime_create(&config, &rt);
	if (err)
		bench_die("weft_runtime_create", err);
	weft_notify_init(&note);
	weft_countdown_init(&idle_done, (unsigned)n);

	sleep_ns(1000000000u);
	r0 = rss_bytes();

	progress_start(&pg, "spawn");
	t0 = tool_now_ns();
	for (i = 0; i < n; i++) {
		weft_notified_t nd;

		weft_notified_init(&nd, &note);
		err = weft_spawn_with(rt,
				      &(weft_spawn_t){ .poll = idle_poll,
						       .drop = idle_drop,
						       .state = &nd,
						       .size = sizeof(nd),
						       .name = "idle",
						       WEFT_HERE },
				      NULL);
		if (err)
			bench_die("weft_spawn_with", err);
		if ((i & 4095) == 0)
			progress_show(&pg, i, n);
	}
	spawn_ms = ms_since(t0);
	progress_end(&pg);

	/* Until every task has parked on the notify, and 2 s at least. */
	progress_start(&pg, "park");
	for (;;) {
		/* Relaxed: a count; nothing is read through it. */
		unsigned long parked = atomic_load_explicit(
			&idle_parked, memory_order_relaxed);

		if (parked >= n && tool_now_ns() - t0 >= SETTLE_NS)
			break;
		if (tool_now_ns() - t0 > PARK_TIMEOUT_NS)
			bench_check_failed("idle-tasks: %lu of %lu parked "
					   "after %llu s",
					   parked, n,
					   PARK_TIMEOUT_NS / 1000000000ull);
		progress_show(&pg, parked, n);
		sleep_ns(10000000u);
	}
	park_ms = ms_since(t0);
	progress_end(&pg);
	r1 = rss_bytes();

	header = sizeof(weft_task_t);
	block = weft__task_block_size(sizeof(weft_notified_t), false);
	cls = alloc_class_size(block);
	chunk = malloc_chunk(cls);
	per_task = (double)(r1 - r0) / (double)n;
	printf("shape=idle_tasks runtime=weft tasks=%lu rss_before_kb=%lld "
	       "rss_after_kb=%lld bytes_per_task=%.0f workers=%d\n",
	       n, r0 / 1024, r1 / 1024, per_task, IDLE_WORKERS);
	printf("shape=idle_tasks runtime=weft breakdown: header=%zu "
	       "state=%zu block=%zu class=%zu malloc_chunk=%zu other=%.1f "
	       "spawn_ms=%.0f parked_ms=%.0f\n",
	       header, sizeof(weft_notified_t), block, cls, chunk,
	       per_task - (double)chunk, spawn_ms, park_ms);
	fflush(stdout);

	progress_start(&pg, "wake");
	t1 = tool_now_ns();
	weft_notify_waiters(&note);
	while (weft_countdown_count(&idle_done)) {
		progress_show(&pg, n - weft_countdown_count(&idle_done), n);
		sleep_ns(10000000u);
	}
	weft_countdown_wait(&idle_done);
	wake_ms = ms_since(t1);
	progress_end(&pg);
	fprintf(stderr,
		"weft-bench: idle-tasks: %lu woken and done in %.0f ms\n", n,
		wake_ms);

	weft_runtime_destroy(rt);
	weft_notify_fini(&note);
	weft_countdown_fini(&idle_done);
	return 0;
}
