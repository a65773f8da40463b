/* SPDX-License-Identifier: MIT */
/*
 * Async synchronisation: a FIFO-fair semaphore, an async mutex built on it,
 * a notify, a bounded multi-producer single-consumer channel, and the
 * select (first of N) and join (all of N) combinators.
 *
 * The model.  Every operation that may wait is a caller-allocated future
 * with _init, _poll and _fini.  A pending future puts a waiter (an
 * intrusive node inside the future) in the primitive's FIFO queue, so the
 * future must not move between its first poll and its _fini; nothing is
 * allocated per operation.  _fini is Rust's drop: it takes a still-queued
 * waiter out of the queue and hands back whatever was already assigned to
 * it (permits, the lock, a notification, a reserved channel slot) to the
 * next waiter, so cancelling a future never loses a wake-up and never
 * leaks.  Call _fini on every initialised future, READY or not; after READY
 * it releases nothing the caller now owns (a lock acquired stays held).
 * Every _fini is also safe on a zeroed future, never initialised (a drop
 * callback whose task ended before its first await needs no flag).
 * Polling a future again after READY returns READY and does nothing.
 *
 * Wakers are stored once per future (cloned at the first pending poll and
 * kept while they wake the same task) and are woken after the primitive's
 * lock is released.  Each primitive's lock is a leaf: nothing else is
 * locked while it is held.
 *
 * Fast paths (an uncontended lock, unlock, acquire, send or receive) touch
 * one atomic word and take no lock.  Operations count against the task's
 * coop budget, so a task that never waits still yields now and then.
 *
 * The primitives themselves are caller-allocated (_init/_fini) except the
 * channel, whose two halves share one allocation.  A primitive's _fini may
 * run only when no future is queued on it and no call on it is in
 * progress; weft_notify_fini() alone also takes futures still queued, and
 * completes them with -EPIPE (see there).
 *
 * "Closed" is -EPIPE throughout.
 */
#ifndef WEFT_SYNC_ASYNC_H
#define WEFT_SYNC_ASYNC_H

#include <pthread.h>

#include "weft/common.h"
#include "weft/future.h"
#include "weft/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A waiter: the node a pending future keeps in a primitive's queue.  All
 * fields are private and guarded by the primitive's lock.
 */
typedef struct weft_waiter_s weft_waiter_t;

struct weft_waiter_s {
	weft_waiter_t *next;
	weft_waiter_t *prev;
	weft_waker_t waker;
	uint64_t value; /* what is still needed, or what was assigned */
	uint64_t aux;
	uint32_t state; /* the primitive's waiter state */
	uint32_t slot;  /* a mutex's: its wait's slot for the probe */
	/* While the probe listens: the waiting task, the resource's id. */
	uint64_t task;
	uint64_t res;
};

/* ------------------------------------------------------------ semaphore */

/* The most permits a semaphore can hold. */
#define WEFT_SEMAPHORE_MAX_PERMITS (UINT64_MAX >> 3)

/*
 * A counting semaphore, fair: acquirers are served in arrival order, and
 * a large request at the head of the queue holds back later small ones
 * (permits released meanwhile are set aside for it).  All fields private.
 */
typedef struct weft_semaphore_s {
	uint64_t state;       /* permits << 2 | WAITERS | CLOSED; atomic */
	pthread_mutex_t lock; /* guards the queue */
	weft_waiter_t *head;
	weft_waiter_t *tail;
	weft_resource_t res;  /* what the probe sees (weft/resource.h) */
} weft_semaphore_t;

/**
 * weft_semaphore_init() - a semaphore holding @permits permits.
 * @sem: the semaphore.
 * @permits: the initial count, at most WEFT_SEMAPHORE_MAX_PERMITS.
 *
 * Context: any thread, before @sem is shared; a task may call it (never
 * blocks).
 * Return: 0; -EINVAL when @permits is too large.
 */
WEFT_EXTERN int weft_semaphore_init(weft_semaphore_t *sem, uint64_t permits);
/**
 * weft_semaphore_init_at() - the function behind the weft_semaphore_init()
 * macro, with where it is initialised (the probe names the semaphore by
 * it).
 *
 * Context: any thread, before @sem is shared; a task may call it (never
 * blocks).
 * Return: as weft_semaphore_init().
 */
WEFT_EXTERN int weft_semaphore_init_at(weft_semaphore_t *sem,
				       uint64_t permits, const char *file,
				       int line);
#define weft_semaphore_init(sem, permits)                                      \
	weft_semaphore_init_at((sem), (permits), __FILE__, __LINE__)

/**
 * weft_semaphore_name() - name it for the probe (weft/resource.h).
 * @sem: the semaphore.
 * @name: a static string ("db connections"); by default the probe shows
 * where it was initialised.
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_semaphore_name(weft_semaphore_t *sem, const char *name);

/**
 * weft_semaphore_fini() - release the semaphore.
 * @sem: the semaphore; no acquire future may still be queued on it.
 *
 * Context: any thread, once no acquire future is queued (one still queued
 * panics) and no call on @sem is in progress; a task may call it (never
 * blocks).
 */
WEFT_EXTERN void weft_semaphore_fini(weft_semaphore_t *sem);

/**
 * weft_semaphore_try_acquire() - take @n permits if that needs no waiting.
 * @sem: the semaphore.
 * @n: permits wanted.
 *
 * Fails when fewer than @n permits are available, when acquirers are
 * queued (they come first) and when the semaphore is closed.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: true when the permits were taken.
 */
WEFT_EXTERN bool weft_semaphore_try_acquire(weft_semaphore_t *sem, uint32_t n);

/**
 * weft_semaphore_release() - add @n permits, serving queued acquirers first.
 * @sem: the semaphore.
 * @n: permits to add; the count must stay within
 * WEFT_SEMAPHORE_MAX_PERMITS.
 *
 * Permits may be added after close (they can no longer be acquired).
 *
 * Context: any thread; a task may call it (never blocks: the primitive's
 * lock is held only briefly).  Going past WEFT_SEMAPHORE_MAX_PERMITS
 * panics.
 */
WEFT_EXTERN void weft_semaphore_release(weft_semaphore_t *sem, uint32_t n);

/**
 * weft_semaphore_close() - refuse every pending and future acquisition.
 * @sem: the semaphore.
 *
 * Queued acquire futures complete with -EPIPE; permits set aside for them
 * go back to the count.  Idempotent.
 *
 * Context: any thread; a task may call it (never blocks: the primitive's
 * lock is held only briefly).
 */
WEFT_EXTERN void weft_semaphore_close(weft_semaphore_t *sem);

/**
 * weft_semaphore_is_closed() - true once weft_semaphore_close() ran.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: true once weft_semaphore_close() has run.
 */
WEFT_EXTERN bool weft_semaphore_is_closed(const weft_semaphore_t *sem);

/**
 * weft_semaphore_available() - permits available right now.
 * @sem: the semaphore.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the count, a snapshot (zero while acquirers are queued).
 */
WEFT_EXTERN uint64_t weft_semaphore_available(const weft_semaphore_t *sem);

/* Acquiring permits: a future.  Fields private except @status. */
typedef struct weft_semaphore_acquire_s {
	weft_waiter_t waiter;
	weft_semaphore_t *sem;
	uint32_t n;
	uint8_t phase;
	int status; /* read-only once READY: 0 or -EPIPE */
} weft_semaphore_acquire_t;

/**
 * weft_semaphore_acquire_init() - prepare to acquire @n permits of @sem.
 * @acq: the future.
 * @sem: the semaphore.
 * @n: permits wanted; 0 completes at once.
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_semaphore_acquire_init(weft_semaphore_acquire_t *acq,
					     weft_semaphore_t *sem, uint32_t n);

/**
 * weft_semaphore_acquire_poll() - acquire, waiting in line.
 * @acq: the future.
 * @cx: the polling context.
 *
 * On READY, @acq->status is 0 (the caller now holds the permits and gives
 * them back with weft_semaphore_release()) or -EPIPE (closed).
 *
 * Context: the task (or weft_block_on() future) that owns @acq, inside its
 * poll; one poller at a time.
 * Return: WEFT_READY or WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t
weft_semaphore_acquire_poll(weft_semaphore_acquire_t *acq, weft_cx_t *cx);

/**
 * weft_semaphore_acquire_fini() - drop the future.
 * @acq: the future.
 *
 * A queued acquirer leaves the queue; permits already set aside for it go
 * to the next acquirers.  After READY with status 0 it releases nothing.
 * Safe on a zeroed future and after READY.
 *
 * Context: the owner of @acq, from any thread, not during a poll of it; a
 * task may call it (never blocks: the primitive's lock is held only
 * briefly).
 */
WEFT_EXTERN void weft_semaphore_acquire_fini(weft_semaphore_acquire_t *acq);

/* ---------------------------------------------------------------- mutex */

/*
 * An async mutex: a semaphore of one permit.  Locking is a future and the
 * lock may be held across awaits (the blocking weft_mutex_t may not).
 * Waiters get the lock in FIFO order.  All fields private.
 */
typedef struct weft_async_mutex_s {
	weft_semaphore_t sem;
	/* The task holding it, 0 if none or not a task (atomic): a console
	 * attaching later finds a deadlock formed before it came. */
	uint64_t holder;
} weft_async_mutex_t;

/**
 * weft_async_mutex_init() - an unlocked mutex.
 *
 * Context: any thread, before @m is shared; a task may call it (never
 * blocks).
 */
WEFT_EXTERN void weft_async_mutex_init(weft_async_mutex_t *m);
/**
 * weft_async_mutex_init_at() - the function behind the
 * weft_async_mutex_init() macro, with where it is initialised (the probe
 * names the mutex by it).
 *
 * Context: any thread, before @m is shared; a task may call it (never
 * blocks).
 */
WEFT_EXTERN void weft_async_mutex_init_at(weft_async_mutex_t *m,
					  const char *file, int line);
#define weft_async_mutex_init(m) weft_async_mutex_init_at((m), __FILE__, __LINE__)

/**
 * weft_async_mutex_name() - name it for the probe (a static string).
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_async_mutex_name(weft_async_mutex_t *m,
				       const char *name);

/**
 * weft_async_mutex_fini() - release it (unlocked, no lock future queued).
 *
 * Context: as weft_semaphore_fini(): a lock future still queued panics.
 */
WEFT_EXTERN void weft_async_mutex_fini(weft_async_mutex_t *m);

/**
 * weft_async_mutex_try_lock() - lock unless that needs waiting.
 * @m: the mutex.
 *
 * Fails when the mutex is held or lock futures are queued.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: true when the caller now holds the lock.
 */
WEFT_EXTERN bool weft_async_mutex_try_lock(weft_async_mutex_t *m);

/**
 * weft_async_mutex_unlock() - release the lock; the next queued locker
 * gets it.
 * @m: the mutex, held by the caller (whatever task or thread locked it).
 *
 * Context: any thread; a task may call it (never blocks: the primitive's
 * lock is held only briefly).  Unlocking a mutex that is not locked panics.
 */
WEFT_EXTERN void weft_async_mutex_unlock(weft_async_mutex_t *m);

/* Locking: a future.  All fields private. */
typedef struct weft_async_mutex_lock_s {
	weft_semaphore_acquire_t acq;
} weft_async_mutex_lock_t;

/**
 * weft_async_mutex_lock_init() - prepare to lock @m.
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_async_mutex_lock_init(weft_async_mutex_lock_t *lk,
					    weft_async_mutex_t *m);

/**
 * weft_async_mutex_lock_poll() - lock, waiting in line.
 * @lk: the future.
 * @cx: the polling context.
 *
 * Context: the task (or weft_block_on() future) that owns @lk, inside its
 * poll; one poller at a time.
 * Return: WEFT_READY once the caller holds the lock, else WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_async_mutex_lock_poll(weft_async_mutex_lock_t *lk,
						   weft_cx_t *cx);

/**
 * weft_async_mutex_lock_fini() - drop the future.
 * @lk: the future.
 *
 * Still queued: leaves the queue.  Handed the lock but not yet polled to
 * READY: passes the lock on.  After READY: nothing (the lock stays held).
 * Safe on a zeroed future and after READY.
 *
 * Context: the owner of @lk, from any thread, not during a poll of it; a
 * task may call it (never blocks: the primitive's lock is held only
 * briefly).
 */
WEFT_EXTERN void weft_async_mutex_lock_fini(weft_async_mutex_lock_t *lk);

/* --------------------------------------------------------------- notify */

/*
 * Notify (Tokio's Notify): wakes tasks without carrying data.
 * weft_notify_one() wakes the longest-waiting notified future or, when
 * none waits, stores one permit that the next notified future takes at
 * once.  weft_notify_waiters() wakes every notified future initialised
 * before the call (queued or not yet polled) and stores no permit.
 * All fields private.
 */
typedef struct weft_notify_s {
	uint64_t state;       /* generation << 2 | EMPTY/WAITING/NOTIFIED */
	pthread_mutex_t lock; /* guards the lists */
	weft_waiter_t *head;  /* waiting */
	weft_waiter_t *tail;
	weft_waiter_t *handed_head; /* woken by notify_one, not yet seen */
	weft_waiter_t *handed_tail;
	weft_resource_t res;  /* what the probe sees (weft/resource.h) */
} weft_notify_t;

/**
 * weft_notify_init() - a notify with no permit stored.
 *
 * Context: any thread, before @n is shared; a task may call it (never
 * blocks).
 */
WEFT_EXTERN void weft_notify_init(weft_notify_t *n);
/**
 * weft_notify_init_at() - the function behind the weft_notify_init() macro,
 * with where it is initialised (the probe names the notify by it).
 *
 * Context: any thread, before @n is shared; a task may call it (never
 * blocks).
 */
WEFT_EXTERN void weft_notify_init_at(weft_notify_t *n, const char *file,
				     int line);
#define weft_notify_init(n) weft_notify_init_at((n), __FILE__, __LINE__)

/**
 * weft_notify_name() - name it for the probe (a static string).
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_notify_name(weft_notify_t *n, const char *name);

/**
 * weft_notify_fini() - release the notify, even with futures waiting on it.
 * @n: the notify.
 *
 * Notified futures still waiting are woken and complete with status
 * -EPIPE; one already woken by weft_notify_one() but not yet polled
 * completes with 0 (its notification stands).  Once this returns, the
 * polls and _fini of every future that was queued on @n no longer touch
 * it, so @n's memory may be reused at once.  Waits, briefly, for a future
 * that is being polled or finished on another thread at that moment.
 *
 * As for any primitive, no other call on @n (notify, or the first poll of
 * a notified future) may be in progress or come after: a notified future
 * initialised on @n but never polled may still be finished, not polled.
 *
 * Context: any thread; a task may call it (it does not sleep, but may yield
 * the CPU while a future on another thread finishes with @n).
 */
WEFT_EXTERN void weft_notify_fini(weft_notify_t *n);

/**
 * weft_notify_one() - wake the first waiter, or store a permit.
 * @n: the notify.
 *
 * At most one permit is stored: notifying twice with nobody waiting lets
 * one notified future through, not two.
 *
 * Context: any thread; a task may call it (never blocks: the primitive's
 * lock is held only briefly).
 */
WEFT_EXTERN void weft_notify_one(weft_notify_t *n);

/**
 * weft_notify_waiters() - wake every notified future initialised so far.
 * @n: the notify.
 *
 * Stores no permit: a notified future initialised after the call waits.
 *
 * Context: any thread; a task may call it (never blocks: the primitive's
 * lock is held only briefly).
 */
WEFT_EXTERN void weft_notify_waiters(weft_notify_t *n);

/* Waiting for a notification: a future.  Fields private except @status. */
typedef struct weft_notified_s {
	weft_waiter_t waiter;
	weft_notify_t *notify;
	uint8_t phase;
	int status; /* read-only once READY: 0 or -EPIPE */
} weft_notified_t;

/**
 * weft_notified_init() - prepare to wait on @n.
 * @nd: the future.
 * @n: the notify.
 *
 * The future already counts for weft_notify_waiters() calls made after
 * this, before its first poll: initialise it, check the condition, then
 * await it, and no wake-up is lost.
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_notified_init(weft_notified_t *nd, weft_notify_t *n);

/**
 * weft_notified_poll() - wait for a notification.
 * @nd: the future.
 * @cx: the polling context.
 *
 * On READY, @nd->status is 0 (notified, or a stored permit was taken) or
 * -EPIPE (weft_notify_fini() ran while it waited: @nd->notify is gone).
 *
 * Context: the task (or weft_block_on() future) that owns @nd, inside its
 * poll; one poller at a time.
 * Return: WEFT_READY once notified, or closed (@nd->status says which),
 * else WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_notified_poll(weft_notified_t *nd, weft_cx_t *cx);

/**
 * weft_notified_fini() - drop the future.
 * @nd: the future.
 *
 * Still queued: leaves the queue.  Woken by weft_notify_one() but not yet
 * polled to READY: the notification passes to the next waiter (or is
 * stored as the permit).  Safe on a zeroed future and after READY.
 *
 * Context: the owner of @nd, from any thread, not during a poll of it; a
 * task may call it (never blocks: the primitive's lock is held only
 * briefly).
 */
WEFT_EXTERN void weft_notified_fini(weft_notified_t *nd);

/* ----------------------------------------------------------------- mpsc */

/*
 * A bounded multi-producer single-consumer channel of fixed-size
 * elements, copied in and out.  At most @capacity elements are buffered;
 * senders beyond that wait, in FIFO order.
 *
 * Senders: weft_mpsc_tx_clone() adds one, weft_mpsc_tx_drop() releases one.
 * When the last is dropped the receiver gets the buffered elements, then
 * -EPIPE.  Dropping the receiver makes every send fail with -EPIPE and
 * drops the buffered elements.  Every send future of a sender handle must
 * be finished (_fini) before that handle is dropped, and every recv future
 * before the receiver is.
 */
typedef struct weft_mpsc_tx_s weft_mpsc_tx_t;
typedef struct weft_mpsc_rx_s weft_mpsc_rx_t;

/* The largest element, in bytes. */
#define WEFT_MPSC_MAX_ELEM 65536u
/* The largest capacity. */
#define WEFT_MPSC_MAX_CAPACITY (1u << 30)

/**
 * weft_mpsc_create() - make a channel.
 * @capacity: elements buffered at most, 1..WEFT_MPSC_MAX_CAPACITY.
 * @elem_size: bytes per element, 1..WEFT_MPSC_MAX_ELEM.
 * @elem_drop: called on each element still buffered when the channel is
 * torn down (receiver dropped, or its last sender after it), with a
 * pointer to the element; may be NULL.
 * @tx: receives the first sender.
 * @rx: receives the receiver.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: 0; -EINVAL for a bad size or capacity, or a NULL @tx or @rx;
 * -ENOMEM.
 */
WEFT_EXTERN int weft_mpsc_create(size_t capacity, size_t elem_size,
				 weft_drop_cb elem_drop, weft_mpsc_tx_t **tx,
				 weft_mpsc_rx_t **rx);
/**
 * weft_mpsc_create_at() - the function behind the weft_mpsc_create() macro,
 * with where it is made (the probe names the channel by it).
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: as weft_mpsc_create().
 */
WEFT_EXTERN int weft_mpsc_create_at(size_t capacity, size_t elem_size,
				    weft_drop_cb elem_drop, weft_mpsc_tx_t **tx,
				    weft_mpsc_rx_t **rx, const char *file,
				    int line);
#define weft_mpsc_create(capacity, elem_size, elem_drop, tx, rx)               \
	weft_mpsc_create_at((capacity), (elem_size), (elem_drop), (tx), (rx), \
			    __FILE__, __LINE__)

/**
 * weft_mpsc_name() - name the channel for the probe (a static string).
 * @tx: any of its senders.
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_mpsc_name(weft_mpsc_tx_t *tx, const char *name);

/**
 * weft_mpsc_tx_clone() - another sender on the same channel.
 * @tx: a live sender.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the new sender (release it with weft_mpsc_tx_drop()).
 */
WEFT_EXTERN weft_mpsc_tx_t *weft_mpsc_tx_clone(weft_mpsc_tx_t *tx);

/**
 * weft_mpsc_tx_drop() - release a sender; NULL is ignored.
 *
 * Context: any thread, once the sender's send futures are finished; a task
 * may call it (never blocks; as the last sender after the receiver, it runs
 * elem_drop on what is buffered, on this thread).
 */
WEFT_EXTERN void weft_mpsc_tx_drop(weft_mpsc_tx_t *tx);

/**
 * weft_mpsc_rx_drop() - release the receiver; NULL is ignored.
 *
 * Context: any thread, once the receiver's recv futures are finished; a
 * task may call it (never blocks; elem_drop runs on what is buffered, on
 * this thread).
 */
WEFT_EXTERN void weft_mpsc_rx_drop(weft_mpsc_rx_t *rx);

/**
 * weft_mpsc_try_send() - send without waiting.
 * @tx: the sender.
 * @elem: the element (elem_size bytes, copied).
 *
 * Takes the three outcomes Tokio's try_send has, so it returns an int
 * rather than the bool of the other try operations.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: 0; -EAGAIN when the channel is full or senders are queued;
 * -EPIPE when the receiver is gone.
 */
WEFT_EXTERN int weft_mpsc_try_send(weft_mpsc_tx_t *tx, const void *elem);

/**
 * weft_mpsc_try_recv() - receive without waiting.
 * @rx: the receiver.
 * @out: receives the element (elem_size bytes).
 *
 * Context: any thread, one receiving caller at a time; a task may call it
 * (never blocks).
 * Return: 0; -EAGAIN when nothing is buffered yet; -EPIPE when every
 * sender is gone and nothing is left.
 */
WEFT_EXTERN int weft_mpsc_try_recv(weft_mpsc_rx_t *rx, void *out);

/* Sending: a future.  Fields private except @status. */
typedef struct weft_mpsc_send_s {
	weft_waiter_t waiter;
	weft_mpsc_tx_t *tx;
	const void *elem;
	uint8_t phase;
	int status; /* read-only once READY: 0 or -EPIPE */
} weft_mpsc_send_t;

/**
 * weft_mpsc_send_init() - prepare to send *@elem.
 * @s: the future.
 * @tx: the sender.
 * @elem: the element; it must stay valid until READY or _fini (it is
 * copied when there is room).
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_mpsc_send_init(weft_mpsc_send_t *s, weft_mpsc_tx_t *tx,
				     const void *elem);

/**
 * weft_mpsc_send_poll() - send, waiting in line for room.
 * @s: the future.
 * @cx: the polling context.
 *
 * On READY, @s->status is 0 (buffered) or -EPIPE (receiver gone; the
 * element was not sent).
 *
 * Context: the task (or weft_block_on() future) that owns @s, inside its
 * poll; one poller at a time.
 * Return: WEFT_READY or WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_mpsc_send_poll(weft_mpsc_send_t *s, weft_cx_t *cx);

/**
 * weft_mpsc_send_fini() - drop the future.
 * @s: the future.
 *
 * Still queued: leaves the queue.  Handed a slot but not yet polled: the
 * element is not sent; the receiver skips the slot and hands the room to
 * the next queued sender.  Each sender's elements stay in order.  Safe on
 * a zeroed future and after READY.
 *
 * Context: the owner of @s, from any thread, not during a poll of it; a
 * task may call it (never blocks: the primitive's lock is held only
 * briefly).
 */
WEFT_EXTERN void weft_mpsc_send_fini(weft_mpsc_send_t *s);

/* Receiving: a future.  Fields private except @status. */
typedef struct weft_mpsc_recv_s {
	weft_mpsc_rx_t *rx;
	void *out;
	uint8_t phase;
	int status; /* read-only once READY: 0 or -EPIPE */
	uint64_t task; /* while the probe listens: the waiting task */
} weft_mpsc_recv_t;

/**
 * weft_mpsc_recv_init() - prepare to receive into @out.
 * @r: the future.
 * @rx: the receiver.
 * @out: where the element goes (elem_size bytes).
 *
 * Context: any thread; a task may call it (never blocks).
 */
WEFT_EXTERN void weft_mpsc_recv_init(weft_mpsc_recv_t *r, weft_mpsc_rx_t *rx,
				     void *out);

/**
 * weft_mpsc_recv_poll() - receive the next element.
 * @r: the future.
 * @cx: the polling context.
 *
 * On READY, @r->status is 0 (an element was written to @out) or -EPIPE
 * (every sender is gone and the channel is drained).  Unlike the other
 * futures a recv future may be polled again after READY: each READY
 * receives one more element.
 *
 * Context: the task (or weft_block_on() future) that receives on the
 * channel, inside its poll; one receiver at a time.
 * Return: WEFT_READY or WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_mpsc_recv_poll(weft_mpsc_recv_t *r, weft_cx_t *cx);

/**
 * weft_mpsc_recv_fini() - drop the future; no element is lost (one is
 * only taken on READY).
 *
 * Safe on a zeroed future and after READY.
 *
 * Context: the owner of @r, from any thread, not during a poll of it; a
 * task may call it (never blocks: the primitive's lock is held only
 * briefly).
 */
WEFT_EXTERN void weft_mpsc_recv_fini(weft_mpsc_recv_t *r);

/* ------------------------------------------------------- select / join */

/*
 * One branch of a select or join: a future as a poll function over its
 * state, and optionally its drop.  @done is read-only: set once the branch
 * was seen READY.  Callers fill arrays of them: fixed for good
 * (weft/common.h).
 */
typedef struct weft_branch_s {
	weft_poll_cb poll;
	void *state;
	weft_drop_cb drop;
	bool done;
} weft_branch_t;

/**
 * weft_select_poll() - the first of @n branches to be READY.
 * @br: the branches, polled in index order (earlier ones win ties).
 * @n: how many, at least one (none would never wake the caller).
 * @cx: the polling context.
 * @index: receives the index of the branch that became READY.
 *
 * The other branches are left as they are, still pending: drop them
 * (weft_branches_drop()), which hands back whatever they were about to
 * get.
 *
 * Context: a poll function (a task's or a weft_block_on() future's), with
 * its @cx, during that poll.
 * Return: WEFT_READY when one branch is (*@index says which), else
 * WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_select_poll(weft_branch_t *br, size_t n,
					 weft_cx_t *cx, size_t *index);

/**
 * weft_join_branches_poll() - all of @n branches.
 * @br: the branches; each is polled until READY, then no more.
 * @n: how many.
 * @cx: the polling context.
 *
 * Context: as weft_select_poll().
 * Return: WEFT_READY once every branch has been READY, else WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_join_branches_poll(weft_branch_t *br, size_t n,
						weft_cx_t *cx);

/**
 * weft_branches_drop() - drop every branch, done or not.
 * @br: the branches; each drop callback runs once and is then cleared
 * (zeroed branches have none: nothing runs).
 * @n: how many.
 *
 * Context: the owner of @br, from any thread, not during a poll of it; the
 * drop callbacks run on this thread.
 */
WEFT_EXTERN void weft_branches_drop(weft_branch_t *br, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_SYNC_ASYNC_H */
