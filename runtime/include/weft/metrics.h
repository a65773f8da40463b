/* SPDX-License-Identifier: MIT */
/*
 * Runtime metrics: always-on counters, read without disturbing the workers.
 *
 * Each worker owns its counters and is their only writer; readers see each
 * counter as a whole value (relaxed atomics, no tearing) but a snapshot of
 * several counters is not taken at one instant.  Counters only grow.
 */
#ifndef WEFT_METRICS_H
#define WEFT_METRICS_H

#include "weft/common.h"
#include "weft/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * One worker's counters.  Library-filled and may grow (weft/common.h):
 * reserved_ is written as zero.
 */
typedef struct weft_worker_metrics_s {
	uint64_t polls;            /* task polls */
	uint64_t steals;           /* tasks stolen from other workers */
	uint64_t steal_ops;        /* successful steal operations */
	uint64_t parks;            /* times the worker went to sleep */
	uint64_t unparks;          /* times it woke up */
	uint64_t noop_wakes;       /* wakes by this worker that changed nothing */
	uint64_t local_schedules;  /* tasks pushed onto its own run queue */
	uint64_t lifo_schedules;   /* tasks put in its LIFO slot */
	uint64_t global_schedules; /* tasks taken from the global queue */
	uint64_t remote_schedules; /* tasks it sent to the global queue */
	uint64_t overflows;        /* times its run queue spilled to global */
	uint64_t spawned;          /* tasks spawned from this worker */
	uint64_t completed;        /* tasks that completed on this worker */
	uint64_t busy_ns;          /* time not parked, the stretch in progress
	                            * included (two reads may differ by a
	                            * store's latency either way) */
	uint64_t forced_yields;    /* polls cut short by the coop budget */
	uint32_t local_queue_depth; /* run queue length (sampled) */
	uint64_t reserved_[8];      /* zero (weft/common.h) */
} weft_worker_metrics_t;

/* Runtime-wide figures.  Library-filled and may grow (weft/common.h). */
typedef struct weft_runtime_metrics_s {
	unsigned workers;
	uint64_t live_tasks;        /* spawned and not yet completed */
	uint64_t spawned_tasks;     /* since start */
	uint64_t global_queue_depth;
	uint64_t remote_spawns;     /* spawns from non-worker threads */
	uint64_t remote_wakes;      /* wakes from non-worker threads */
	/* The blocking pool (weft/blocking.h), read under its lock: one
	 * consistent snapshot of these six. */
	uint64_t blocking_threads;      /* pool threads alive */
	uint64_t blocking_threads_busy; /* ...running a job or about to */
	uint64_t blocking_threads_idle; /* ...waiting for a job */
	uint64_t blocking_threads_peak; /* most alive at once, since start */
	uint64_t blocking_queue_depth;  /* jobs waiting for a thread */
	uint64_t blocking_jobs;         /* jobs run and done with, since start */
	uint64_t timers;                /* timers waiting in the wheel */
	uint64_t timers_fired;          /* since start */
	uint64_t io_events;             /* readiness events, since start */
	uint64_t forced_yields;         /* the workers' sum (coop budget) */
	uint64_t reserved_[8];          /* zero (weft/common.h) */
} weft_runtime_metrics_t;

/**
 * weft_runtime_metrics() - runtime-wide figures.
 *
 * Context: any thread while @rt lives; a task may call it (the blocking
 * pool's lock is taken briefly).
 * Return: 0, or -EINVAL for a NULL argument.
 */
WEFT_EXTERN int weft_runtime_metrics(const weft_runtime_t *rt,
				     weft_runtime_metrics_t *out);

/**
 * weft_worker_metrics() - the counters of worker @index.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: 0; -EINVAL for a NULL argument; -ERANGE for a bad index.
 */
WEFT_EXTERN int weft_worker_metrics(const weft_runtime_t *rt, unsigned index,
				    weft_worker_metrics_t *out);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_METRICS_H */
