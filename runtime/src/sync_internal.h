/* SPDX-License-Identifier: MIT */
/*
 * What the async primitives (sync_*.c) share: the FIFO waiter queue and
 * the wake list.
 *
 * A waiter queue is a doubly linked list of weft_waiter_t nodes embedded in
 * pending futures, guarded by the primitive's lock.  A node is in the queue
 * exactly while its state is the primitive's "waiting" state; whoever takes
 * it out changes the state under the same lock, so a future's _fini can
 * tell, under the lock, whether it still has to unlink itself.
 *
 * Wakers are never woken under a primitive's lock: they are moved into a
 * wake list (a bounded array on the stack) and woken after unlocking.  A
 * primitive that has more to wake than the list holds unlocks, wakes the
 * batch and locks again (Tokio's WakeList).
 */
#ifndef WEFT_SYNC_INTERNAL_H
#define WEFT_SYNC_INTERNAL_H

#include <stddef.h>

#include "weft/probe_events.h"

#include "runtime_internal.h"

/* ----------------------------------------------------------- waiters */

static inline void waitq_push_back(weft_waiter_t **head, weft_waiter_t **tail,
				   weft_waiter_t *w)
{
	w->next = NULL;
	w->prev = *tail;
	if (*tail)
		(*tail)->next = w;
	else
		*head = w;
	*tail = w;
}

static inline void waitq_remove(weft_waiter_t **head, weft_waiter_t **tail,
				weft_waiter_t *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		*head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		*tail = w->prev;
	w->next = w->prev = NULL;
}

/* Takes the head off; the queue must not be empty. */
static inline weft_waiter_t *waitq_pop_front(weft_waiter_t **head,
					     weft_waiter_t **tail)
{
	weft_waiter_t *w = *head;

	waitq_remove(head, tail, w);
	return w;
}

/*
 * Under the lock: make @slot wake what @w wakes, cloning only when it does
 * not already (weft_waker_set()'s rule).  The waker it replaces is returned
 * so that it is dropped after unlocking: dropping a task's last reference
 * frees the task, which may take the task allocator's lock.
 */
static inline weft_waker_t waker_replace(weft_waker_t *slot,
					 const weft_waker_t *w)
{
	weft_waker_t old = WEFT_WAKER_EMPTY;

	if (!weft_waker_will_wake(slot, w)) {
		old = *slot;
		*slot = weft_waker_clone(w);
	}
	return old;
}

/* --------------------------------------------------------- wake list */

#define WAKE_LIST_CAP 32

typedef struct wake_list_s {
	unsigned n;
	weft_waker_t w[WAKE_LIST_CAP];
} wake_list_t;

static inline void wake_list_init(wake_list_t *wl)
{
	wl->n = 0;
}

static inline bool wake_list_full(const wake_list_t *wl)
{
	return wl->n == WAKE_LIST_CAP;
}

/* Moves @w (which is left empty) into the list; the list must have room. */
static inline void wake_list_take(wake_list_t *wl, weft_waker_t *w)
{
	if (weft_waker_is_empty(w))
		return;
	wl->w[wl->n++] = *w;
	*w = WEFT_WAKER_EMPTY;
}

/* Wakes (consumes) every waker in the list; call with no lock held. */
static inline void wake_list_wake(wake_list_t *wl)
{
	for (unsigned i = 0; i < wl->n; i++)
		weft_waker_wake(&wl->w[i]);
	wl->n = 0;
}

/* ------------------------------------------------------------- mutex */

/* The async mutex @sem is the semaphore of (its res.kind WEFT_RES_MUTEX). */
static inline weft_async_mutex_t *weft__async_mutex_of(weft_semaphore_t *sem)
{
	return (weft_async_mutex_t *)(void *)((char *)sem -
					      offsetof(weft_async_mutex_t,
						       sem));
}

/*
 * An async mutex's holder (weft_async_mutex_t.holder), for a collector
 * that starts while a task waits for the lock (lock_wait.c): the current
 * task, set once @sem, a mutex's, is acquired (the acquire future's READY,
 * a try_lock); weft_async_mutex_unlock() clears it before its release and
 * RES_RELEASE, so that a collector that folded that event in reads the
 * clear (the ring's release and acquire order it).  Relaxed: a hint for
 * the collector, ordering nothing else.  A plain semaphore pays the
 * compare only; a mutex a TLS read and a store; none with the probe
 * compiled out.
 */
static inline void weft__mutex_holder_set(weft_semaphore_t *sem)
{
#if WEFT_PROBE
	weft_task_t *t;

	if (sem->res.kind != WEFT_RES_MUTEX)
		return;
	t = weft__current_task();
	__atomic_store_n(&weft__async_mutex_of(sem)->holder, t ? t->id : 0,
			 __ATOMIC_RELAXED);
#else
	(void)sem;
#endif
}

#endif /* WEFT_SYNC_INTERNAL_H */
