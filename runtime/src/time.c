/* SPDX-License-Identifier: MIT */
/*
 * Sleeps, timeouts and intervals over the driver's timer wheel
 * (driver.c holds the wheel and its locking).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "driver_internal.h"
#include "runtime_internal.h"

uint64_t weft_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void weft_sleep_init_until(weft_sleep_t *s, uint64_t deadline_ns)
{
	memset(s, 0, sizeof(*s));
	s->entry.deadline_ns = deadline_ns;
}

void weft_sleep_init(weft_sleep_t *s, uint64_t duration_ns)
{
	uint64_t now = weft_now_ns();

	/* Saturate rather than wrap for "forever". */
	weft_sleep_init_until(s, duration_ns > UINT64_MAX - now
					 ? UINT64_MAX
					 : now + duration_ns);
}

weft_poll_t weft_sleep_poll(weft_sleep_t *s, weft_cx_t *cx)
{
	return weft__timer_poll(&s->entry, cx);
}

void weft_sleep_reset(weft_sleep_t *s, uint64_t deadline_ns)
{
	void *driver = s->entry.driver;

	weft__timer_cancel(&s->entry);
	weft_sleep_init_until(s, deadline_ns);
	s->entry.driver = driver;
}

uint64_t weft_sleep_deadline(const weft_sleep_t *s)
{
	return s->entry.deadline_ns;
}

void weft_sleep_fini(weft_sleep_t *s)
{
	weft__timer_cancel(&s->entry);
}

void weft_timeout_init(weft_timeout_t *t, uint64_t duration_ns)
{
	weft_sleep_init(&t->sleep, duration_ns);
}

weft_poll_t weft_timeout_poll_fn(weft_timeout_t *t, weft_cx_t *cx,
				 weft_poll_cb inner, void *inner_state,
				 int *status)
{
	if (inner(inner_state, cx) == WEFT_READY) {
		if (status)
			*status = 0;
		return WEFT_READY;
	}
	if (weft_sleep_poll(&t->sleep, cx) == WEFT_READY) {
		if (status)
			*status = -ETIMEDOUT;
		return WEFT_READY;
	}
	return WEFT_PENDING;
}

void weft_timeout_fini(weft_timeout_t *t)
{
	weft_sleep_fini(&t->sleep);
}

void weft_interval_init_at(weft_interval_t *iv, uint64_t start_ns,
			   uint64_t period_ns)
{
	/* The sleep's deadline is the next tick's time: no copy of it here. */
	weft_sleep_init_until(&iv->sleep, start_ns);
	iv->period_ns = period_ns ? period_ns : 1;
	iv->missed = WEFT_MISSED_SKIP;
}

void weft_interval_init(weft_interval_t *iv, uint64_t period_ns)
{
	weft_interval_init_at(iv, weft_now_ns(), period_ns);
}

int weft_interval_set_missed(weft_interval_t *iv, weft_missed_tick_t missed)
{
	switch (missed) {
	case WEFT_MISSED_SKIP:
	case WEFT_MISSED_BURST:
	case WEFT_MISSED_DELAY:
		iv->missed = missed;
		return 0;
	}
	return -EINVAL;
}

/* @a + @b, or UINT64_MAX ("never") where that would wrap. */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

/* The tick after the one at @tick, returned at @now (time.h's rules). */
static uint64_t next_tick(const weft_interval_t *iv, uint64_t tick,
			  uint64_t now)
{
	/* Zero only in an interval never initialised (init makes it 1):
	 * polled anyway, it ticks as one of 1 ns, never divides by 0. */
	uint64_t period = iv->period_ns ? iv->period_ns : 1;
	uint64_t next = add_sat(tick, period);

	if (next > now)
		return next; /* none missed */
	switch (iv->missed) {
	case WEFT_MISSED_BURST:
		return next;
	case WEFT_MISSED_DELAY:
		return add_sat(now, period);
	default:
		/* SKIP: the first grid time after now (next <= now here). */
		return add_sat(next, ((now - next) / period + 1) * period);
	}
}

weft_poll_t weft_interval_tick(weft_interval_t *iv, weft_cx_t *cx,
			       uint64_t *at)
{
	uint64_t tick;

	if (weft_sleep_poll(&iv->sleep, cx) == WEFT_PENDING)
		return WEFT_PENDING;
	tick = weft_sleep_deadline(&iv->sleep);
	if (at)
		*at = tick;
	weft_sleep_reset(&iv->sleep, next_tick(iv, tick, weft_now_ns()));
	return WEFT_READY;
}

void weft_interval_fini(weft_interval_t *iv)
{
	weft_sleep_fini(&iv->sleep);
}
