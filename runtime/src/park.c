/* SPDX-License-Identifier: MIT */
/*
 * A parker: one thread sleeps on it, any thread wakes it.  A futex word
 * with three states: EMPTY, PARKED (a thread sleeps or is about to),
 * NOTIFIED (a wake-up is pending).  An unpark that comes before the park
 * leaves NOTIFIED, which the park consumes without sleeping, so no wake-up
 * is lost.  Spurious returns from futex_wait loop back.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime_internal.h"

enum { PARK_EMPTY = 0, PARK_PARKED = 1, PARK_NOTIFIED = 2 };

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL,
		NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr, int n)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL,
		0);
}

void weft__parker_init(parker_t *p)
{
	store_relaxed(&p->state, PARK_EMPTY);
}

void weft__parker_park(parker_t *p)
{
	uint32_t expect = PARK_NOTIFIED;

	/*
	 * acq_rel on every transition out of NOTIFIED: acquire pairs with
	 * the release in weft__parker_unpark(), so what the unparker wrote
	 * before unparking is visible once we return.
	 */
	if (atomic_compare_exchange_strong_explicit(&p->state, &expect,
						    PARK_EMPTY,
						    memory_order_acq_rel,
						    memory_order_relaxed))
		return;
	expect = PARK_EMPTY;
	if (!atomic_compare_exchange_strong_explicit(&p->state, &expect,
						     PARK_PARKED,
						     memory_order_acq_rel,
						     memory_order_relaxed)) {
		/* Only an unparker changes the state: it is NOTIFIED. */
		exchange_acq_rel(&p->state, PARK_EMPTY);
		return;
	}
	for (;;) {
		futex_wait(&p->state, PARK_PARKED);
		expect = PARK_NOTIFIED;
		if (atomic_compare_exchange_strong_explicit(
			    &p->state, &expect, PARK_EMPTY,
			    memory_order_acq_rel, memory_order_relaxed))
			return;
		/* Spurious: still PARKED. */
	}
}

void weft__parker_unpark(parker_t *p)
{
	/*
	 * Release: our prior writes happen before the parked thread's
	 * return (pairs with the acquire in weft__parker_park()).
	 */
	if (exchange_acq_rel(&p->state, PARK_NOTIFIED) == PARK_PARKED)
		futex_wake(&p->state, 1);
}
