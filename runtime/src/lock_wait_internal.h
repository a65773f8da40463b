/* SPDX-License-Identifier: MIT */
/*
 * Tasks waiting for a lock, kept for a collector that starts late
 * (lock_wait.c): the async mutex's and weft_mutex_t's slow paths take a
 * slot before their task sleeps and let it go once it holds the lock or
 * gave up.  Compiled out with the probe.
 */
#ifndef WEFT_LOCK_WAIT_INTERNAL_H
#define WEFT_LOCK_WAIT_INTERNAL_H

#include <stdint.h>

#include "weft/resource.h"

/* weft_mutex_t's across_task top bit (mutex.c): its hold across an await
 * was heard (LOCK_HELD_PENDING emitted). */
#define WEFT__MUTEX_ACROSS_HEARD ((uint64_t)1 << 63)

#if WEFT_PROBE
/*
 * The listening generation a RES_WAIT is emitted in, read before it is
 * (@gen, from weft__probe_listen_gen), for weft__lock_wait_begin(): 0 if
 * none was (@res 0), else never 0.  Read before: a generation that
 * changes in between leaves the wait both told (its RES_WAIT in the new
 * period) and seeded, which the collector takes as one wait (on_wait()),
 * where read after it would leave it told to a period that dropped it.
 */
static inline uint32_t weft__lock_wait_told(uint64_t res, uint32_t gen)
{
	return !res ? 0 : gen ? gen : 1;
}

/*
 * The current task begins to wait for lock @r, of @kind (WEFT_RES_MUTEX:
 * a weft_async_mutex_t's semaphore; WEFT_RES_SYNC_MUTEX: a weft_mutex_t;
 * said by the call site, a zeroed weft_mutex_t's resource has none) for
 * @op (a WEFT_RES_OP_*); @told: weft__lock_wait_told() of its RES_WAIT.
 * Return: the slot's handle for weft__lock_wait_end(), 0 if none (not a
 * task, or no memory: the wait goes untold).
 */
uint32_t weft__lock_wait_begin(weft_resource_t *r, uint8_t kind, uint8_t op,
			       uint32_t told);
/*
 * The wait of slot @h ended (0: nothing), by the waiting task, holding the
 * lock or out of its queue: a collector that adopted it and was never told
 * of it hears RES_WAIT_END with @a2 (an op and flags; never ACQUIRED: the
 * acquire is said as for an untold wait).
 */
void weft__lock_wait_end(uint32_t h, uint32_t a2);
#else
static inline uint32_t weft__lock_wait_told(uint64_t res, uint32_t gen)
{
	(void)res, (void)gen;
	return 0;
}
static inline uint32_t weft__lock_wait_begin(weft_resource_t *r, uint8_t kind,
					     uint8_t op, uint32_t told)
{
	(void)r, (void)kind, (void)op, (void)told;
	return 0;
}
static inline void weft__lock_wait_end(uint32_t h, uint32_t a2)
{
	(void)h, (void)a2;
}
#endif

#endif /* WEFT_LOCK_WAIT_INTERNAL_H */
