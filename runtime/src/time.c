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

void weft_interval_init(weft_interval_t *iv, uint64_t period_ns)
{
	uint64_t now = weft_now_ns();

	iv->period_ns = period_ns ? period_ns : 1;
	iv->next_ns = now;
	weft_sleep_init_until(&iv->sleep, now);
}

weft_poll_t weft_interval_tick(weft_interval_t *iv, weft_cx_t *cx,
			       uint64_t *at)
{
	uint64_t now, next;

	if (weft_sleep_poll(&iv->sleep, cx) == WEFT_PENDING)
		return WEFT_PENDING;
	if (at)
		*at = iv->next_ns;
	/* Skip missed ticks: the next one after now, on the period grid. */
	now = weft_now_ns();
	next = iv->next_ns + iv->period_ns;
	if (next <= now)
		next += ((now - next) / iv->period_ns + 1) * iv->period_ns;
	iv->next_ns = next;
	weft_sleep_reset(&iv->sleep, next);
	return WEFT_READY;
}

void weft_interval_fini(weft_interval_t *iv)
{
	weft_sleep_fini(&iv->sleep);
}
