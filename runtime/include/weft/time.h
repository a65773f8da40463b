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

/**
 * weft_now_ns() - the monotonic clock, in nanoseconds.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: CLOCK_MONOTONIC, in nanoseconds.
 */
WEFT_EXTERN uint64_t weft_now_ns(void);

/* A sleep: READY once its deadline has passed. */
typedef struct weft_sleep_s {
	weft_timer_entry_t entry; /* private */
} weft_sleep_t;

/**
 * weft_sleep_init() - a sleep of @duration_ns from now.
 *
 * Context: any thread, no runtime needed (the sleep binds to one at its
 * first poll); a task may call it (never blocks).
 */
WEFT_EXTERN void weft_sleep_init(weft_sleep_t *s, uint64_t duration_ns);

/**
 * weft_sleep_init_until() - a sleep until @deadline_ns (weft_now_ns()).
 *
 * Context: as weft_sleep_init().
 */
WEFT_EXTERN void weft_sleep_init_until(weft_sleep_t *s, uint64_t deadline_ns);

/**
 * weft_sleep_poll() - READY once the deadline has passed.
 *
 * Context: the task (or weft_block_on() future) that owns @s, inside its
 * poll, with a runtime current (with none it panics).
 * Return: WEFT_READY once the deadline has passed, else WEFT_PENDING (the
 * task is woken then).
 */
WEFT_EXTERN weft_poll_t weft_sleep_poll(weft_sleep_t *s, weft_cx_t *cx);

/**
 * weft_sleep_reset() - cancel if pending and re-arm for @deadline_ns.
 * The sleep keeps its runtime.
 *
 * Context: the owner of @s, not during a poll of it on another thread; a
 * task may call it (never blocks).
 */
WEFT_EXTERN void weft_sleep_reset(weft_sleep_t *s, uint64_t deadline_ns);

/**
 * weft_sleep_deadline() - the deadline, in weft_now_ns() nanoseconds.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the deadline, in weft_now_ns() nanoseconds.
 */
WEFT_EXTERN uint64_t weft_sleep_deadline(const weft_sleep_t *s);

/**
 * weft_sleep_fini() - cancel the sleep (drop); it may be re-inited.
 *
 * Safe on a zeroed future and after READY.
 *
 * Context: the owner of @s, from any thread, not during a poll of it; a
 * task may call it (never blocks: the driver's time lock is held briefly).
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

/**
 * weft_timeout_init() - a time limit of @duration_ns from now.
 *
 * Context: as weft_sleep_init().
 */
WEFT_EXTERN void weft_timeout_init(weft_timeout_t *t, uint64_t duration_ns);

/**
 * weft_timeout_poll_fn() - poll @inner under the time limit.
 * @status: receives 0 when @inner finished, -ETIMEDOUT when time ran out
 * first (then @inner was not finished: drop it).
 *
 * Context: as weft_sleep_poll(); @inner is polled first, with the same @cx.
 * Return: WEFT_READY when either happened (@inner first: READY with a
 * status of 0 even past the deadline), else WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_timeout_poll_fn(weft_timeout_t *t, weft_cx_t *cx,
					     weft_poll_cb inner,
					     void *inner_state, int *status);

/**
 * weft_timeout_fini() - drop the timeout (cancels its timer, which may
 * still be armed after READY: the inner future finished first).
 *
 * Safe on a zeroed future and after READY.
 *
 * Context: as weft_sleep_fini().
 */
WEFT_EXTERN void weft_timeout_fini(weft_timeout_t *t);

/*
 * An interval: ticks on a grid of @period_ns, each tick a time at which
 * weft_interval_tick() becomes READY and reports that time.  The first
 * tick is at the start (weft_interval_init(): at once;
 * weft_interval_init_at(): a time you choose), then every period after
 * it, as long as the task keeps up.
 *
 * A tick is missed when the task is late by a period or more: when
 * weft_interval_tick() returns the tick at time T at a moment now >=
 * T + period, the tick at T + period is missed.  A tick that is merely
 * late (now < T + period) changes nothing: the next tick stays at
 * T + period.  What happens to missed ticks is the interval's
 * weft_missed_tick_t (Tokio's MissedTickBehavior), WEFT_MISSED_SKIP
 * unless set otherwise.
 *
 * Private layout in the caller's memory (weft/common.h).  Like the sleep
 * it holds, it must not move between its first tick poll and
 * weft_interval_fini().
 */
typedef struct weft_interval_s {
	weft_sleep_t sleep; /* private: its deadline is the next tick's time */
	uint64_t period_ns; /* private */
	uint32_t missed;    /* private: a weft_missed_tick_t */
} weft_interval_t;

/*
 * What an interval does about missed ticks.  Below, T is the time of the
 * tick weft_interval_tick() returns and now the moment it returns it,
 * with now >= T + period (else the next tick is at T + period whatever
 * the policy); the next tick is then at:
 */
typedef enum weft_missed_tick_e {
	/*
	 * The first grid time after now, T + k * period with the smallest
	 * such k: the missed ticks are dropped, the grid is kept.  The
	 * default, and what weft_interval_tick() did before there was a
	 * choice.
	 */
	WEFT_MISSED_SKIP = 0,
	/*
	 * T + period, already due: the missed ticks are returned back to
	 * back, each with its own grid time, with no wait in between, until
	 * the interval has caught up; the grid is kept.  Every tick of the
	 * grid is returned once.
	 */
	WEFT_MISSED_BURST = 1,
	/*
	 * now + period: the missed ticks are dropped and the grid moves, so
	 * that the next tick comes one full period after the late one was
	 * returned, and every period after that.  (Tokio's Delay also moves
	 * the grid for a tick late by less than a period; this does not.)
	 */
	WEFT_MISSED_DELAY = 2,
} weft_missed_tick_t;

/**
 * weft_interval_init() - an interval of @period_ns (> 0; 0 is taken as
 * 1), its first tick at once.
 *
 * The first tick's time is weft_now_ns() at this call, so the first
 * weft_interval_tick() is READY without waiting; the next tick is one
 * period after this call.  The same as weft_interval_init_at(@iv,
 * weft_now_ns(), @period_ns).  To start one period from now, use
 * weft_interval_init_at(@iv, weft_now_ns() + @period_ns, @period_ns).
 *
 * Any thread; no runtime needed (the interval binds to one at its first
 * tick poll, as a sleep does).  Never fails.
 *
 * Context: any thread; no runtime needed (the interval binds to one at its
 * first tick poll, as a sleep does); a task may call it (never blocks).
 */
WEFT_EXTERN void weft_interval_init(weft_interval_t *iv, uint64_t period_ns);

/**
 * weft_interval_init_at() - an interval of @period_ns (> 0; 0 is taken
 * as 1), its first tick at @start_ns.
 * @start_ns: the first tick's time, in weft_now_ns() nanoseconds.  A
 * time already past is a tick already due: the first
 * weft_interval_tick() returns it at once, and the ticks between
 * @start_ns and now are missed ones (weft_interval_set_missed()).
 *
 * The ticks are at @start_ns + k * @period_ns while the task keeps up.
 * Any thread; no runtime needed.  Never fails.
 *
 * Context: as weft_interval_init().
 */
WEFT_EXTERN void weft_interval_init_at(weft_interval_t *iv, uint64_t start_ns,
				       uint64_t period_ns);

/**
 * weft_interval_set_missed() - choose what happens to missed ticks.
 * @missed: WEFT_MISSED_SKIP (the default), WEFT_MISSED_BURST or
 * WEFT_MISSED_DELAY.
 *
 * Applies from the next tick weft_interval_tick() returns; the tick
 * already scheduled keeps its time.  Call it between init and
 * weft_interval_fini(), from the task (or thread) that polls the
 * interval, never during a poll of it on another thread.
 *
 * Context: the task (or thread) that polls @iv, never during a poll of it
 * on another thread; a task may call it (never blocks).
 * Return: 0; -EINVAL for a value not listed (the policy is unchanged).
 */
WEFT_EXTERN int weft_interval_set_missed(weft_interval_t *iv,
					 weft_missed_tick_t missed);

/**
 * weft_interval_tick() - READY at each tick.
 * @at: receives the tick's scheduled time (may be NULL): its grid time,
 * not when it was returned; with WEFT_MISSED_BURST each missed tick
 * reports its own.
 *
 * A future's poll (a task, or weft_block_on()) only.  The next tick is
 * scheduled when this one is returned, by the missed-tick policy.
 *
 * Context: as weft_sleep_poll(): a future's poll (a task, or
 * weft_block_on()) only.
 * Return: WEFT_READY once the tick's time has come, else WEFT_PENDING
 * (the task is woken then).
 */
WEFT_EXTERN weft_poll_t weft_interval_tick(weft_interval_t *iv, weft_cx_t *cx,
					   uint64_t *at);

/**
 * weft_interval_fini() - drop the interval.  Safe on a zeroed future and
 * after READY.
 *
 * Context: as weft_sleep_fini().
 */
WEFT_EXTERN void weft_interval_fini(weft_interval_t *iv);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TIME_H */
