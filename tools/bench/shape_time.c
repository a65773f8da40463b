/* SPDX-License-Identifier: MIT */
/*
 * The timer shapes: timers (100,000 sleeping tasks) and timers_1k (the
 * first 1,000 of the same sleeps), mirroring `timers`, `timers_1k` and
 * `run_timers` in the Tokio anchor (anchors/tokio-bench/src/main.rs) and
 * `runTimers` in the Go anchor.
 *
 * One iteration: main (not a worker) spawns one task per duration; each
 * task takes deadline = now + d at its first poll, sleeps until it, and
 * returns its lateness, wake-up time - deadline (negative: woke early), as
 * its output.  Main then awaits every join handle in order under
 * weft_block_on(), collecting the outputs, like the anchor's block_on over
 * `for h in handles { v.push(h.await) }`.  The durations are splitmix64
 * draws with the anchors' seed, 1.000-50.000 ms at microsecond
 * granularity, so the three runtimes sleep exactly the same amounts (the
 * durations_sum_us field proves it).
 *
 * Reporting is the anchor's, not ns/op: at most one warm-up iteration,
 * then `iters` timed ones; wall and spawn times per iteration (median,
 * p10, p90 over iterations), each iteration's p99 lateness (index
 * n*99/100 of the sorted values, the anchor's), and the lateness of every
 * task of every iteration pooled (p50, p99, max, min, early wake-ups).
 *
 * Threads: the reporter and iterations run on the main thread; the poll
 * function on the workers.  Outputs travel through the join handles.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

#define TIMER_TASKS 100000
#define TIMER_TASKS_1K 1000
#define TIMER_SEED 0x5EED1234ABCD0001ULL

/* The anchors' durations, in nanoseconds. */
static uint64_t *timer_durations(size_t n)
{
	uint64_t *d = bench_xmallocarray(n, sizeof(*d));
	uint64_t x = TIMER_SEED;

	for (size_t i = 0; i < n; i++) {
		uint64_t z;

		x += 0x9E3779B97F4A7C15ULL;
		z = x;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
		z ^= z >> 31;
		d[i] = WEFT_USEC(1000 + z % 49001);
	}
	return d;
}

/* ------------------------------------------------------------ futures */

struct timer_task {
	int weft_pc;
	uint64_t d;
	uint64_t deadline;
	weft_sleep_t sleep;
};

static weft_poll_t timer_task_poll(void *arg, weft_cx_t *cx)
{
	struct timer_task *st = arg;
	int64_t late;

	WEFT_ASYNC_BEGIN(st);
	st->deadline = weft_now_ns() + st->d;
	weft_sleep_init_until(&st->sleep, st->deadline);
	WEFT_AWAIT(st, weft_sleep_poll(&st->sleep, cx));
	late = (int64_t)(weft_now_ns() - st->deadline);
	weft_sleep_fini(&st->sleep);
	weft_cx_return(cx, (void *)(intptr_t)late);
	WEFT_ASYNC_END(st);
}

/* Cancels the sleep of a task dropped while waiting (never, here). */
static void timer_task_drop(void *arg)
{
	struct timer_task *st = arg;

	if (st->weft_pc > 0)
		weft_sleep_fini(&st->sleep);
}

/* Awaits every handle in order, collecting the outputs. */
struct collect {
	weft_join_t **joins;
	void **outs;
	size_t n;
	size_t cursor;
};

static weft_poll_t collect_poll(void *arg, weft_cx_t *cx)
{
	struct collect *st = arg;

	return weft_join_all(st->joins, st->n, st->outs, &st->cursor, cx);
}

/* ------------------------------------------------------------ one run */

/*
 * One iteration: fills @late (ns) and returns the wall time; *spawn_ns
 * receives the time main spent spawning.
 */
static uint64_t timers_once(struct bench *b, const uint64_t *durs, size_t n,
			    int64_t *late, uint64_t *spawn_ns)
{
	struct collect c = { .n = n };
	uint64_t t0, el;
	int rc;

	t0 = weft_now_ns();
	c.joins = bench_xmallocarray(n, sizeof(*c.joins));
	for (size_t i = 0; i < n; i++) {
		weft_spawn_t spec = {
			.poll = timer_task_poll,
			.drop = timer_task_drop,
			.state = &(struct timer_task){ .d = durs[i] },
			.size = sizeof(struct timer_task),
			.name = "timer",
			.file = __FILE__,
			.line = __LINE__,
		};

		rc = weft_spawn_with(b->rt, &spec, &c.joins[i]);
		if (rc)
			bench_die("weft_spawn", rc);
	}
	*spawn_ns = weft_now_ns() - t0;
	c.outs = bench_xmallocarray(n, sizeof(*c.outs));
	rc = weft_block_on(b->rt, collect_poll, &c, NULL);
	if (rc)
		bench_die("weft_block_on", rc);
	el = weft_now_ns() - t0;

	if (c.cursor != n)
		bench_check_failed("timers completed %zu != %zu", c.cursor, n);
	for (size_t i = 0; i < n; i++)
		late[i] = (int64_t)(intptr_t)c.outs[i];
	free(c.outs);
	free(c.joins);
	return el;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void run_timers(struct bench *b, const struct bench_shape *s,
		       unsigned long iters, unsigned long warmup)
{
	size_t tasks = s->ops;
	uint64_t *durs = timer_durations(tasks);
	int64_t *all = bench_xmallocarray(iters * tasks, sizeof(*all));
	double *lf = bench_xmallocarray(iters * tasks, sizeof(*lf));
	double *walls = bench_xmallocarray(iters, sizeof(*walls));
	double *spawns = bench_xmallocarray(iters, sizeof(*spawns));
	double *iter_p99 = bench_xmallocarray(iters, sizeof(*iter_p99));
	uint64_t dsum_us = 0, spawn_ns;
	size_t total = iters * tasks, early = 0;

	for (size_t i = 0; i < tasks; i++)
		dsum_us += durs[i] / 1000;
	/* The anchors warm up once at most. */
	if (warmup)
		timers_once(b, durs, tasks, all, &spawn_ns);
	for (unsigned long it = 0; it < iters; it++) {
		int64_t *lat = all + it * tasks;

		walls[it] =
			(double)timers_once(b, durs, tasks, lat, &spawn_ns) /
			1e6;
		spawns[it] = (double)spawn_ns / 1e6;
		qsort(lat, tasks, sizeof(*lat), cmp_i64);
		iter_p99[it] = (double)lat[tasks * 99 / 100] / 1e3;
	}
	qsort(walls, iters, sizeof(*walls), cmp_double);
	qsort(iter_p99, iters, sizeof(*iter_p99), cmp_double);
	qsort(spawns, iters, sizeof(*spawns), cmp_double);
	qsort(all, total, sizeof(*all), cmp_i64);
	for (size_t i = 0; i < total; i++) {
		early += all[i] < 0;
		lf[i] = (double)all[i] / 1e3;
	}
	printf("shape=%s runtime=weft tasks=%zu iters=%lu wall_ms_median=%.2f "
	       "wall_ms_p10=%.2f wall_ms_p90=%.2f lateness_us_p50=%.1f "
	       "lateness_us_p99=%.1f lateness_us_max=%.1f "
	       "lateness_us_min=%.1f iter_p99_us_median=%.1f "
	       "spawn_ms_median=%.2f early_wakeups=%zu "
	       "durations_sum_us=%llu workers=%u\n",
	       s->name, tasks, iters, bench_pct(walls, iters, 50),
	       bench_pct(walls, iters, 10), bench_pct(walls, iters, 90),
	       bench_pct(lf, total, 50), bench_pct(lf, total, 99),
	       lf[total - 1], lf[0], bench_pct(iter_p99, iters, 50),
	       bench_pct(spawns, iters, 50), early, (unsigned long long)dsum_us,
	       weft_runtime_workers(b->rt));
	fflush(stdout);
	free(iter_p99);
	free(spawns);
	free(walls);
	free(lf);
	free(all);
	free(durs);
}

const struct bench_shape shape_timers = {
	.name = "timers",
	.unit = "sleeping task (reports wall ms and lateness)",
	.ops = TIMER_TASKS,
	.run_all = run_timers,
};

const struct bench_shape shape_timers_1k = {
	.name = "timers_1k",
	.unit = "sleeping task (reports wall ms and lateness)",
	.ops = TIMER_TASKS_1K,
	.run_all = run_timers,
};
