/* SPDX-License-Identifier: MIT */
/*
 * weft-bench internals: the shape interface and the helpers shapes share.
 *
 * A shape is one workload mirrored from the Tokio and Go anchor benchmarks
 * (/work/shared/anchors).  Its run function performs one iteration on the
 * main thread, which is never a worker: it takes the start time just before
 * submitting work, waits until it has observed completion, takes the end
 * time, checks the result and returns the elapsed nanoseconds.  The driver
 * (bench.c) divides by the shape's operation count and reports percentiles.
 *
 * Adding a shape: write its run function in a shape_*.c file, declare its
 * descriptor below, and list it in the table in bench.c.
 */
#ifndef WEFT_BENCH_H
#define WEFT_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <weft/weft.h>

/* What every shape gets: the one runtime shared by all shapes of a run. */
struct bench {
	weft_runtime_t *rt;
	/* Latches handed out by bench_latch(); freed after the runtime. */
	weft_countdown_t **latches;
	size_t nlatches;
	size_t caplatches;
	/* --probe=events: the subscription draining every event. */
	struct weft_probe_sub_s *probe_sub;
	int probe_mode; /* 0 counters, 1 events, 2 compiled out */
};

struct bench_shape {
	const char *name;
	/* What one operation is ("task", "yield", ...), for --help. */
	const char *unit;
	/* Operations per iteration: the ns/op divisor. */
	size_t ops;
	/* One iteration: elapsed wall ns; fails via bench_check_failed(). */
	uint64_t (*run)(struct bench *b);
	/*
	 * Optional, instead of @run: the whole shape, warm-up and timed
	 * iterations, printing its own result line, for shapes whose
	 * figures are not ns/op (timers: wall time and lateness).
	 */
	void (*run_all)(struct bench *b, const struct bench_shape *s,
			unsigned long iters, unsigned long warmup);
};

/* bench.c */
void *bench_xmallocarray(size_t n, size_t size);
weft_countdown_t *bench_latch(struct bench *b, unsigned count);
__attribute__((noreturn)) void bench_die(const char *what, int err);
__attribute__((noreturn, format(printf, 1, 2))) void
bench_check_failed(const char *fmt, ...);
double bench_pct(const double *sorted, size_t n, double p);

/* shape_sched.c: the scheduler shapes */
extern const struct bench_shape shape_spawn_many_local;
extern const struct bench_shape shape_spawn_many_remote;
extern const struct bench_shape shape_yield_many;
extern const struct bench_shape shape_ping_pong;
extern const struct bench_shape shape_chained_spawn;

/* shape_chan.c: the channel shape */
extern const struct bench_shape shape_channel_throughput;

/* shape_mutex.c: the contended async mutex (weft's own shape) */
extern const struct bench_shape shape_mutex_contended;

/* shape_time.c: the timer shapes (own result line) */
extern const struct bench_shape shape_timers;
extern const struct bench_shape shape_timers_1k;

/* shape_probe.c: the probe's own cost, and the --probe modes */
extern const struct bench_shape shape_probe_event;
extern const struct bench_shape shape_probe_event_thread;
void bench_probe_start(struct bench *b, bool events);
void bench_probe_stop(struct bench *b);
const char *bench_probe_mode(const struct bench *b);

/* shape_record.c: the recorder's throughput (own result lines) */
extern const struct bench_shape shape_record_throughput;

/* shape_fiber.c: the stackful variants */
extern const struct bench_shape shape_yield_many_fiber;
extern const struct bench_shape shape_ping_pong_fiber;

/*
 * servers.c: `weft-bench echo-server PORT` and `http-server PORT`; @argv[0]
 * is the subcommand.  Runs until killed.
 */
int bench_server_main(int argc, char **argv);

/*
 * idle_tasks.c: `weft-bench idle-tasks [N]`, resident memory per idle
 * task (the Tokio anchor's `tokio-bench idle-tasks N`); @argv[0] is the
 * subcommand.
 */
int bench_idle_main(int argc, char **argv);

#endif /* WEFT_BENCH_H */
