/* SPDX-License-Identifier: MIT */
/*
 * A countdown latch.  The count is an atomic u32 that doubles as the futex
 * word for threads waiting in weft_countdown_wait().  Task waiters register
 * wakers under the mutex; the call that reaches zero takes the mutex after
 * the decrement, so a waiter either registered before (and is woken) or
 * re-checks the count under the mutex after (and sees zero).
 *
 * The latch may be freed as soon as a waiter has seen zero, so the count
 * reaches zero only inside the mutex: decrements above one are a CAS, the
 * last one is done under the lock together with everything else that
 * touches the latch (the futex wake, taking the wakers).  A waiter that
 * saw zero passes through the mutex once before returning, by which time
 * the last done() has let go of the latch.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "resource_internal.h"
#include "runtime_internal.h"

void weft_countdown_init_at(weft_countdown_t *cd, unsigned count,
			    const char *file, int line)
{
	__atomic_store_n(&cd->count, count, __ATOMIC_RELAXED);
	cd->nwakers = 0;
	cd->capwakers = 0;
	cd->wakers = NULL;
	pthread_mutex_init(&cd->lock, NULL);
	weft__res_init(&cd->res, WEFT_RES_COUNTDOWN, file, line);
}

/* The function behind the macro, for callers that take its address. */
void(weft_countdown_init)(weft_countdown_t *cd, unsigned count)
{
	weft_countdown_init_at(cd, count, NULL, 0);
}

void weft_countdown_name(weft_countdown_t *cd, const char *name)
{
	weft__res_name(&cd->res, name);
}

void weft_countdown_fini(weft_countdown_t *cd)
{
	weft__res_fini(&cd->res);
	for (unsigned i = 0; i < cd->nwakers; i++)
		weft_waker_drop(&cd->wakers[i]);
	free(cd->wakers);
	cd->wakers = NULL;
	cd->nwakers = cd->capwakers = 0;
	pthread_mutex_destroy(&cd->lock);
}

void weft_countdown_add(weft_countdown_t *cd, unsigned n)
{
	/* Relaxed: raising the count publishes nothing. */
	__atomic_add_fetch(&cd->count, n, __ATOMIC_RELAXED);
}

unsigned weft_countdown_count(const weft_countdown_t *cd)
{
	/* Acquire: a caller that sees zero sees what the counters did. */
	return __atomic_load_n(&cd->count, __ATOMIC_ACQUIRE);
}

bool weft_countdown_done(weft_countdown_t *cd)
{
	weft_waker_t *wakers;
	unsigned n;

	unsigned c = __atomic_load_n(&cd->count, __ATOMIC_RELAXED);

	/*
	 * acq_rel: release orders our work before whoever sees zero; acquire
	 * (for the last one) collects everyone else's.
	 */
	while (c > 1) {
		if (__atomic_compare_exchange_n(&cd->count, &c, c - 1, true,
						__ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			return false;
	}
	pthread_mutex_lock(&cd->lock);
	c = __atomic_sub_fetch(&cd->count, 1, __ATOMIC_ACQ_REL);
	if (c == UINT_MAX)
		weft_panic("countdown decremented below zero");
	if (c != 0) {
		pthread_mutex_unlock(&cd->lock);
		return false;
	}
	syscall(SYS_futex, &cd->count, FUTEX_WAKE_PRIVATE, INT_MAX, NULL,
		NULL, 0);
	wakers = cd->wakers;
	n = cd->nwakers;
	cd->wakers = NULL;
	cd->nwakers = cd->capwakers = 0;
	pthread_mutex_unlock(&cd->lock);
	for (unsigned i = 0; i < n; i++)
		weft_waker_wake(&wakers[i]);
	free(wakers);
	return true;
}

weft_poll_t weft_countdown_poll(weft_countdown_t *cd, weft_cx_t *cx)
{
	const weft_waker_t *w = weft_cx_waker(cx);

	pthread_mutex_lock(&cd->lock);
	if (weft_countdown_count(cd) == 0) {
		/*
		 * Under the lock: the latch may be freed once we return.
		 * A task that never waited ends no wait; the collector
		 * takes this as nothing then.
		 */
		WEFT_RES_EVENT(&cd->res, RES_WAIT_END, weft__cur_task_id,
			       WEFT_RES_OP_DONE);
		pthread_mutex_unlock(&cd->lock);
		return WEFT_READY;
	}
	for (unsigned i = 0; i < cd->nwakers; i++) {
		if (weft_waker_will_wake(&cd->wakers[i], w)) {
			pthread_mutex_unlock(&cd->lock);
			return WEFT_PENDING;
		}
	}
	if (cd->nwakers == cd->capwakers) {
		unsigned cap = cd->capwakers ? cd->capwakers * 2 : 4;
		weft_waker_t *nw = realloc(cd->wakers, cap * sizeof(*nw));

		if (!nw) {
			/* Cannot wait: poll again soon rather than hang. */
			pthread_mutex_unlock(&cd->lock);
			weft_cx_yield(cx);
			return WEFT_PENDING;
		}
		cd->wakers = nw;
		cd->capwakers = cap;
	}
	cd->wakers[cd->nwakers++] = weft_waker_clone(w);
	WEFT_RES_EVENT(&cd->res, RES_WAIT, weft__cur_task_id, WEFT_RES_OP_DONE);
	pthread_mutex_unlock(&cd->lock);
	return WEFT_PENDING;
}

void weft_countdown_wait(weft_countdown_t *cd)
{
	unsigned c;

	if (weft__cur_worker)
		weft_panic("weft_countdown_wait() would block a worker thread; "
			   "await weft_countdown_poll() instead");
	while ((c = weft_countdown_count(cd)) != 0)
		syscall(SYS_futex, &cd->count, FUTEX_WAIT_PRIVATE, c, NULL,
			NULL, 0);
	/* Let the last done() finish with the latch (see the top). */
	pthread_mutex_lock(&cd->lock);
	pthread_mutex_unlock(&cd->lock);
}
