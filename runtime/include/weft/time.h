/* SPDX-License-Identifier: MIT */
/*
 * Time: sleeps, deadlines, timeouts and intervals on the runtime's timer
 * wheel (1 ms resolution).  A timer never fires before its deadline; it
 * fires at the first driver turn after the millisecond tick that contains
 * the deadline has passed.
 *
 * Timer futures are caller-allocated (inside a task's state, typically)
 * and must not move between their first poll and weft_sleep_fini().
 * "Dropping" a timer future means calling its _fini, which cancels it.
 * They bind to the runtime current at their first poll (the worker's, or
 * the one given to weft_block_on()); polling one with no runtime current
 * is a programming error and panics.
 *
 * Times are CLOCK_MONOTONIC nanoseconds (weft_now_ns()).
 */
#ifndef WEFT_TIME_H
#define WEFT_TIME_H

#include "weft/common.h"
#include "weft/future.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_USEC(n) ((uint64_t)(n) * 1000u)
#define WEFT_MSEC(n) ((uint64_t)(n) * 1000000u)
#define WEFT_SEC(n) ((uint64_t)(n) * 1000000000u)

typedef struct weft_timer_entry_s weft_timer_entry_t;

/* A timer's place in the wheel.  All fields private. */
struct weft_timer_entry_s {
	weft_timer_entry_t *next;
	weft_timer_entry_t *prev;
	uint64_t when;        /* deadline in wheel ticks, rounded up */
	uint64_t deadline_ns;
	weft_waker_t waker;   /* guarded by the driver's time lock */
	void *driver;
	uint8_t level;
	uint8_t slot;
	uint8_t state;        /* accessed atomically */
	uint8_t told;         /* its wait was told to the probe (RES_WAIT) */
};

/** weft_now_ns() - the monotonic clock, in nanoseconds. */
WEFT_EXTERN uint64_t weft_now_ns(void);

/* A sleep: READY once its deadline has passed. */
typedef struct weft_sleep_s {
	weft_timer_entry_t entry; /* private */
} weft_sleep_t;

/** weft_sleep_init() - a sleep of @duration_ns from now. */
WEFT_EXTERN void weft_sleep_init(weft_sleep_t *s, uint64_t duration_ns);

/** weft_sleep_init_until() - a sleep until @deadline_ns (weft_now_ns()). */
WEFT_EXTERN void weft_sleep_init_until(weft_sleep_t *s, uint64_t deadline_ns);

/** weft_sleep_poll() - READY once the deadline has passed. */
WEFT_EXTERN weft_poll_t weft_sleep_poll(weft_sleep_t *s, weft_cx_t *cx);

/**
 * weft_sleep_reset() - cancel if pending and re-arm for @deadline_ns.
 * The sleep keeps its runtime.
 */
WEFT_EXTERN void weft_sleep_reset(weft_sleep_t *s, uint64_t deadline_ns);

/** weft_sleep_deadline() - the deadline, in weft_now_ns() nanoseconds. */
WEFT_EXTERN uint64_t weft_sleep_deadline(const weft_sleep_t *s);

/**
 * weft_sleep_fini() - cancel the sleep (drop); it may be re-inited.
 *
 * Safe on a zeroed future and after READY.
 */
WEFT_EXTERN void weft_sleep_fini(weft_sleep_t *s);

/*
 * A timeout around another future:
 *
 *	weft_timeout_init(&st->to, WEFT_MSEC(100));
 *	WEFT_AWAIT(st, weft_timeout_poll(&st->to, cx, weft_poll_result));
 *
 * where weft_poll_result is the inner future's poll result for this poll.
 * Simpler: weft_timeout_poll_fn() polls the inner future itself.
 */
typedef struct weft_timeout_s {
	weft_sleep_t sleep; /* private */
} weft_timeout_t;

/** weft_timeout_init() - a time limit of @duration_ns from now. */
WEFT_EXTERN void weft_timeout_init(weft_timeout_t *t, uint64_t duration_ns);

/**
 * weft_timeout_poll_fn() - poll @inner under the time limit.
 * @status: receives 0 when @inner finished, -ETIMEDOUT when time ran out
 * first (then @inner was not finished: drop it).
 *
 * Return: WEFT_READY when either happened.
 */
WEFT_EXTERN weft_poll_t weft_timeout_poll_fn(weft_timeout_t *t, weft_cx_t *cx,
					     weft_poll_cb inner,
					     void *inner_state, int *status);

/**
 * weft_timeout_fini() - drop the timeout (cancels its timer, which may
 * still be armed after READY: the inner future finished first).
 *
 * Safe on a zeroed future and after READY.
 */
WEFT_EXTERN void weft_timeout_fini(weft_timeout_t *t);

/*
 * An interval: ticks every @period_ns, the first tick at once.  A tick
 * missed because the task was late is not made up for: the next tick is
 * the next multiple of the period after now (Tokio's "Skip").
 */
typedef struct weft_interval_s {
	weft_sleep_t sleep; /* private */
	uint64_t period_ns; /* private */
	uint64_t next_ns;   /* private */
} weft_interval_t;

/** weft_interval_init() - an interval of @period_ns (> 0). */
WEFT_EXTERN void weft_interval_init(weft_interval_t *iv, uint64_t period_ns);

/**
 * weft_interval_tick() - READY at each tick.
 * @at: receives the tick's scheduled time (may be NULL).
 */
WEFT_EXTERN weft_poll_t weft_interval_tick(weft_interval_t *iv, weft_cx_t *cx,
					   uint64_t *at);

/** weft_interval_fini() - drop the interval. */
WEFT_EXTERN void weft_interval_fini(weft_interval_t *iv);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TIME_H */
