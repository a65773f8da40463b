/* SPDX-License-Identifier: MIT */
/*
 * Synchronisation between tasks and threads: a oneshot channel and a
 * countdown latch.
 *
 * oneshot: one value (a void *) from one sender to one receiver.  The
 * sender and receiver halves may live on different threads; each is
 * released exactly once (weft_oneshot_send() releases the sender).
 *
 * countdown: a counter that tasks or threads decrement; tasks await zero
 * with weft_countdown_poll(), plain threads with weft_countdown_wait().
 */
#ifndef WEFT_SYNC_H
#define WEFT_SYNC_H

#include <pthread.h>

#include "weft/common.h"
#include "weft/future.h"
#include "weft/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_oneshot_tx_s weft_oneshot_tx_t;
typedef struct weft_oneshot_rx_s weft_oneshot_rx_t;

/**
 * weft_oneshot_create() - make a oneshot channel.
 * @tx: receives the sending half.
 * @rx: receives the receiving half.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: 0 or -ENOMEM.
 */
WEFT_EXTERN int weft_oneshot_create(weft_oneshot_tx_t **tx,
				    weft_oneshot_rx_t **rx);
/**
 * weft_oneshot_create_at() - the function behind the weft_oneshot_create()
 * macro, with where it is made (the probe names the oneshot by it).
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: as weft_oneshot_create().
 */
WEFT_EXTERN int weft_oneshot_create_at(weft_oneshot_tx_t **tx,
				       weft_oneshot_rx_t **rx,
				       const char *file, int line);
#define weft_oneshot_create(tx, rx)                                            \
	weft_oneshot_create_at((tx), (rx), __FILE__, __LINE__)

/**
 * weft_oneshot_send() - send the value and release the sender.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: 0; -EPIPE when the receiver is gone (the value was not taken: it
 * is still the caller's).
 */
WEFT_EXTERN int weft_oneshot_send(weft_oneshot_tx_t *tx, void *value);

/**
 * weft_oneshot_tx_drop() - release the sender without sending.
 * @tx: the sender; NULL is ignored (a zeroed state's handle).  Not after
 * weft_oneshot_send(), which released it: clear the pointer then.
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_oneshot_tx_drop(weft_oneshot_tx_t *tx);

/**
 * weft_oneshot_poll() - await the value.
 * @status: receives 0, or -EPIPE when the sender was dropped unsent.
 * @value: receives the value (may be NULL).
 *
 * Context: the task (or weft_block_on() future) that owns @rx, inside its
 * poll; one poller at a time.
 * Return: WEFT_READY once the value was sent or the sender dropped
 * (*@status and *@value set), else WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_oneshot_poll(weft_oneshot_rx_t *rx, weft_cx_t *cx,
					  int *status, void **value);

/**
 * weft_oneshot_rx_drop() - release the receiver.
 * @rx: the receiver; NULL is ignored (a zeroed state's handle).
 *
 * Safe on a zeroed future and after READY (and required then: a READY
 * poll releases nothing).  Once only: it releases its half.
 *
 * Context: any thread, by the receiver's owner, not during a poll of @rx; a
 * task may call it (never blocks).
 */
WEFT_EXTERN void weft_oneshot_rx_drop(weft_oneshot_rx_t *rx);

/* A countdown latch.  Caller-allocated; fields are private. */
typedef struct weft_countdown_s {
	unsigned count;          /* private; accessed atomically */
	unsigned nwakers;        /* private */
	unsigned capwakers;      /* private */
	weft_waker_t *wakers;    /* private */
	pthread_mutex_t lock;    /* private; guards the wakers */
	weft_resource_t res;     /* private; what the probe sees */
} weft_countdown_t;

/**
 * weft_countdown_init() - start the count at @count.
 *
 * Context: any thread, before @cd is shared; a task may call it (never
 * blocks).
 */
WEFT_EXTERN void weft_countdown_init(weft_countdown_t *cd, unsigned count);
/**
 * weft_countdown_init_at() - the function behind the weft_countdown_init()
 * macro, with where it is initialised (the probe names the latch by it).
 *
 * Context: any thread, before @cd is shared; a task may call it (never
 * blocks).
 */
WEFT_EXTERN void weft_countdown_init_at(weft_countdown_t *cd, unsigned count,
					const char *file, int line);
#define weft_countdown_init(cd, count)                                         \
	weft_countdown_init_at((cd), (count), __FILE__, __LINE__)

/**
 * weft_countdown_name() - name it for the probe (a static string).
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_countdown_name(weft_countdown_t *cd, const char *name);

/**
 * weft_countdown_fini() - release what the latch holds.
 *
 * Safe once every waiter has returned from weft_countdown_wait() or seen
 * weft_countdown_poll() READY (weft_countdown_count() == 0 alone is not
 * enough: the last weft_countdown_done() may still be running).
 *
 * Context: any thread, once no waiter is left (see above); a task may call
 * it (never blocks).
 */
WEFT_EXTERN void weft_countdown_fini(weft_countdown_t *cd);

/**
 * weft_countdown_add() - raise the count by @n (before it reached zero).
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_countdown_add(weft_countdown_t *cd, unsigned n);

/**
 * weft_countdown_done() - decrement; at zero, wake every waiter.
 *
 * Context: any thread; a task may call it (never blocks: the last
 * decrements take the latch's lock briefly, and the last one wakes the
 * waiters).  Decrementing a count already zero panics.
 * Return: true for the call that took the count to zero.
 */
WEFT_EXTERN bool weft_countdown_done(weft_countdown_t *cd);

/**
 * weft_countdown_count() - the current count.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the count (an acquire load: a caller that sees zero sees what the
 * counters did).
 */
WEFT_EXTERN unsigned weft_countdown_count(const weft_countdown_t *cd);

/**
 * weft_countdown_poll() - READY once the count is zero.
 *
 * No future, so nothing to drop: a task dropped while it waited leaves its
 * waker in the latch until the count reaches zero or weft_countdown_fini().
 *
 * Context: a task (or weft_block_on() future), inside its poll; the latch's
 * lock is held briefly.
 * Return: WEFT_READY once the count is zero, else WEFT_PENDING (the waker
 * is kept until then; with no memory to keep it, the task yields and is
 * polled again).
 */
WEFT_EXTERN weft_poll_t weft_countdown_poll(weft_countdown_t *cd,
					    weft_cx_t *cx);

/**
 * weft_countdown_wait() - block the calling thread until the count is zero.
 *
 * Not from a worker thread (it would block the worker; panics): tasks
 * await weft_countdown_poll().
 *
 * Context: any thread but a worker (there it panics): it blocks (a futex
 * wait) until the count is zero.
 */
WEFT_EXTERN void weft_countdown_wait(weft_countdown_t *cd);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_SYNC_H */
