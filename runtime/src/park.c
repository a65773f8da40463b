/* SPDX-License-Identifier: MIT */
/*
 * A parker: one thread sleeps on it, any thread wakes it.  A futex word
 * with four states: EMPTY, PARKED (a thread sleeps on the futex or is about
 * to), PARKED_DRIVER (it sleeps inside the driver's turn), NOTIFIED (a
 * wake-up is pending).  An unpark that comes before the park leaves
 * NOTIFIED, which the park consumes without sleeping, so no wake-up is
 * lost.  Unparking a PARKED_DRIVER thread writes the driver's eventfd.
 * Spurious returns from futex_wait loop back.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "driver_internal.h"
#include "runtime_internal.h"

enum {
	PARK_EMPTY = 0,
	PARK_PARKED = 1,
	PARK_PARKED_DRIVER = 2,
	PARK_NOTIFIED = 3,
};

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

void weft__parker_init(parker_t *p, struct driver_s *driver)
{
	store_relaxed(&p->state, PARK_EMPTY);
	p->driver = driver;
}

void weft__parker_park_driver(parker_t *p)
{
	uint32_t expect = PARK_NOTIFIED;

	/* acq_rel: as in weft__parker_park(). */
	if (atomic_compare_exchange_strong_explicit(&p->state, &expect,
						    PARK_EMPTY,
						    memory_order_acq_rel,
						    memory_order_relaxed))
		return;
	expect = PARK_EMPTY;
	if (!atomic_compare_exchange_strong_explicit(&p->state, &expect,
						     PARK_PARKED_DRIVER,
						     memory_order_acq_rel,
						     memory_order_relaxed)) {
		exchange_acq_rel(&p->state, PARK_EMPTY);
		return;
	}
	/* Returns on an event, a timer, or an unpark's eventfd write. */
	weft__driver_turn(p->driver, true);
	/* Consumes a NOTIFIED that came meanwhile; acq_rel as above. */
	exchange_acq_rel(&p->state, PARK_EMPTY);
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

bool weft__parker_in_driver(parker_t *p)
{
	/* Relaxed: a preference when picking whom to wake, nothing more. */
	return load_relaxed(&p->state) == PARK_PARKED_DRIVER;
}

void weft__parker_unpark(parker_t *p)
{
	/*
	 * Release: our prior writes happen before the parked thread's
	 * return (pairs with the acquire in weft__parker_park()).
	 */
	switch (exchange_acq_rel(&p->state, PARK_NOTIFIED)) {
	case PARK_PARKED:
		futex_wake(&p->state, 1);
		break;
	case PARK_PARKED_DRIVER:
		/*
		 * Our own parker: we are its thread, inside its driver turn
		 * (waking what the turn's events readied), which is
		 * returning: the exchange above is all it needs.  A wake
		 * would cost an eventfd write or an io_uring submit from
		 * the poller itself, and end the next park at once.
		 */
		if (weft__cur_worker && p == &weft__cur_worker->parker)
			break;
		weft__driver_unpark(p->driver);
		break;
	}
}
