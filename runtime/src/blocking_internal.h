/* SPDX-License-Identifier: MIT */
/*
 * The blocking pool's structure (blocking.c), embedded in the runtime.
 *
 * One mutex guards everything here: the job queue, the thread list and the
 * counts.  Idle threads wait on the condvar; a spawner that finds an idle
 * thread moves it from nidle to nnotify and signals, so exactly one waiter
 * takes each notification and a thread whose keep-alive runs out at the
 * same moment still sees it (Tokio's num_idle / num_notify).
 */
#ifndef WEFT_BLOCKING_INTERNAL_H
#define WEFT_BLOCKING_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "weft/blocking.h"
#include "weft/metrics.h"
#include "weft/resource.h"

#define BLOCKING_DEFAULT_MAX_THREADS 512u
#define BLOCKING_DEFAULT_KEEP_ALIVE_NS ((uint64_t)10 * 1000000000u)

typedef struct blocking_pool_s blocking_pool_t;

/* One pool thread; freed by whoever joins it. */
typedef struct blocking_thread_s {
	pthread_t thread;
	blocking_pool_t *pool;
	struct blocking_thread_s *prev; /* the live list; pool lock */
	struct blocking_thread_s *next;
} blocking_thread_t;

struct blocking_pool_s {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* idle threads wait here (CLOCK_MONOTONIC) */
	/* The FIFO of jobs not yet started. */
	weft_blocking_t *head;
	weft_blocking_t *tail;
	/* Live threads, joined by shutdown. */
	blocking_thread_t *threads;
	/* The last thread gone on keep-alive, joined by the next one or
	 * by shutdown. */
	blocking_thread_t *exited;
	weft_runtime_t *rt;
	unsigned max_threads;
	uint64_t keep_alive_ns;
	unsigned nthreads; /* alive, including those just started */
	unsigned nidle;    /* waiting and not yet notified */
	unsigned nnotify;  /* notifications not yet taken by a waiter */
	bool shutdown;     /* no new jobs; threads drain the queue and go */
	/* What the probe sees: jobs wait on it for a thread, and hold one
	 * while they run (blocking.c). */
	weft_resource_t res;
	/* For the metrics. */
	uint64_t queued;
	uint64_t peak;
	uint64_t completed;
};

/* blocking.c */
void weft__blocking_init(blocking_pool_t *p, weft_runtime_t *rt,
			 unsigned max_threads, uint64_t keep_alive_ns);
void weft__blocking_shutdown(blocking_pool_t *p);
void weft__blocking_fini(blocking_pool_t *p);
void weft__blocking_metrics(blocking_pool_t *p, weft_runtime_metrics_t *out);

#endif /* WEFT_BLOCKING_INTERNAL_H */
