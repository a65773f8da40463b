/* SPDX-License-Identifier: MIT */
/*
 * The runtime's own short locks (lock_internal.h): the slow path.
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lock_internal.h"

/* Spins before sleeping: a holder on another CPU is out within this. */
#define SPINS 100

void weft__lock_slow(weft__lock_t *l)
{
	for (int i = 0; i < SPINS; i++) {
		/* Relaxed look first, so that spinning does not own the line. */
		uint32_t z = load_relaxed(&l->state);

		/* Sleepers already: queue behind them, do not barge. */
		if (z == 2)
			break;
		if (z == 0 && atomic_compare_exchange_weak_explicit(
				      &l->state, &z, 1, memory_order_acquire,
				      memory_order_relaxed))
			return;
		cpu_relax();
	}
	/*
	 * Acquire, as above.  2 says "maybe waiters": we cannot tell
	 * whether others sleep, so the unlock that sees 2 wakes one; a
	 * woken waiter takes the lock as 2 again for the same reason.
	 */
	while (atomic_exchange_explicit(&l->state, 2, memory_order_acquire))
		syscall(SYS_futex, &l->state, FUTEX_WAIT_PRIVATE, 2, NULL, NULL,
			0);
}

void weft__lock_wake(weft__lock_t *l)
{
	syscall(SYS_futex, &l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
