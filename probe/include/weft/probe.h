/* SPDX-License-Identifier: MIT */
/*
 * The probe: what the runtime did, as events and as the state a collector
 * thread builds from them (tasks, workers, warnings), for the console, the
 * recorder and tests.
 *
 * Subscribing starts the collector thread (the first subscriber) and, for
 * a subscriber that asks for events, turns event emission on; the last
 * unsubscribe turns it off and stops the collector.  Callbacks run on the
 * collector thread, one at a time; they must not block for long (a slow
 * subscriber delays the collector, never the runtime: the rings drop and
 * count what does not fit).
 *
 * Timestamps in everything the probe hands out are CLOCK_MONOTONIC
 * nanoseconds (weft_now_ns()).
 */
#ifndef WEFT_PROBE_H
#define WEFT_PROBE_H

#include "weft/common.h"
#include "weft/probe_events.h"
#include "weft/probe_model.h"
#include "weft/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_probe_sub_s weft_probe_sub_t;

/* Caller-filled and may grow (weft/common.h): reserved_ must be zero. */
typedef struct weft_probe_sub_opts_s {
	/* Turn event emission on while subscribed. */
	bool events;
	/*
	 * Raw events as drained (timestamps already in ns): each pass's in
	 * time order, in several calls of up to a few thousand.
	 */
	void (*on_events)(void *ctx, const weft_event_t *ev, size_t n);
	/* After each pass. */
	void (*on_update)(void *ctx, const weft_probe_update_t *u);
	void *ctx;
	uint64_t reserved_[4]; /* zero (weft/common.h) */
} weft_probe_sub_opts_t;

/**
 * weft_probe_subscribe() - listen to the probe.
 * @opts: what to receive; copied.
 * @out: receives the subscription.
 *
 * The first update a subscriber gets is full (every known task).
 *
 * Context: any thread but a probe subscriber's callback (those run under
 * the probe's lock, which this takes: -EDEADLK there); a task may call it
 * (the first one starts the collector thread, and waits for nothing; one
 * that asks for events when nobody else does, while subscribers of
 * updates alone keep the collector running, may wait for one pass of it,
 * as weft_probe_flush() does, so that what it heard before is settled).
 * Return: 0; -EINVAL (NULL argument, or a reserved word not zero);
 * -EDEADLK (called from a probe subscriber's callback);
 * -ENOMEM; -EAGAIN (collector thread); -ENOTSUP in a build without the
 * probe.
 */
WEFT_EXTERN int weft_probe_subscribe(const weft_probe_sub_opts_t *opts,
				     weft_probe_sub_t **out);

/**
 * weft_probe_unsubscribe() - stop listening.  No callback of @sub runs
 * after this returns.  Must not be called from one of its callbacks.
 *
 * Context: any thread but a probe subscriber's callback, any subscriber's,
 * not only @sub's (those run under the probe's lock, which this takes:
 * there it panics, naming the mistake, rather than wait for itself); a
 * task may call it, but the last unsubscribe blocks until the collector
 * thread has stopped (joins it).
 */
WEFT_EXTERN void weft_probe_unsubscribe(weft_probe_sub_t *sub);


/**
 * weft_probe_mark() - emit an application event (kind "mark") into the
 * trace, attributed to the task being polled, if anyone listens.  Costs
 * one relaxed load when nobody does.
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_probe_mark(uint64_t a1, uint32_t a2);

/**
 * weft_probe_listening() - true while events flow.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: true while a subscriber asks for events.
 */
WEFT_EXTERN bool weft_probe_listening(void);

/**
 * weft_probe_flush() - make the collector drain and publish now, and wait
 * until it has (tests use this instead of sleeping).
 *
 * The pass says what the folds of warnings have counted so far (a
 * flood's "N more from tasks spawned at ..." row) without waiting for
 * their second to end: a subscriber that flushes before it unsubscribes
 * (the trace recorder does, at its stop and at exit) has every warning
 * raised by then.
 *
 * Context: any thread but a probe subscriber's callback (those run under
 * the probe's lock: there it returns at once, the pass it runs in being
 * the flush); it blocks for the collector's next pass (returns at once when no collector runs), so a task
 * that calls it holds up its worker meanwhile.
 */
WEFT_EXTERN void weft_probe_flush(void);

/*
 * Thresholds, read from the environment when the collector starts.
 * Library-filled and may grow (weft/common.h); the fields in place keep
 * their order, new ones come at the end, out of reserved_.
 */
typedef struct weft_probe_config_s {
	uint64_t long_poll_ns;        /* WEFT_LONG_POLL (ms), default 10 ms */
	uint64_t sched_delay_ns;      /* WEFT_SCHED_DELAY (ms), default 50 ms */
	uint64_t interval_ns;         /* collector pass, default 20 ms */
	uint64_t retain_ns;           /* finished tasks kept, default 6 s */
	size_t retain_max;            /* at most WEFT_PROBE_RETAIN (10,000) */
	size_t ring_capacity;         /* events per thread ring */
	uint32_t large_future_bytes;  /* default 1024 */
	/* Waits on a lock, semaphore or full channel past this are
	 * contention (channel-full): WEFT_CONTENTION (ms), default 10 ms. */
	uint64_t contention_ns;
	/* A poll that wakes more tasks than this is a wake burst:
	 * WEFT_WAKE_BURST (tasks), default 1,000. */
	uint32_t wake_burst;
	/* Live tasks of one spawn site growing this long are a leak:
	 * WEFT_TASK_LEAK_WINDOW (ms), default 3 s. */
	uint64_t task_leak_window_ns;
	/* Live tasks a site must hold before it may be a leak:
	 * WEFT_TASK_LEAK_MIN (tasks), default 256. */
	uint32_t task_leak_min;
	uint32_t pad_;
	uint64_t reserved_[7]; /* zero (weft/common.h) */
} weft_probe_config_t;

/**
 * weft_probe_config() - the thresholds in force.
 *
 * Context: any thread but a probe subscriber's callback (those run under
 * the probe's lock: there it reads the config without it); a task may call
 * it (the probe's lock is held briefly).
 */
WEFT_EXTERN void weft_probe_config(weft_probe_config_t *out);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_PROBE_H */
