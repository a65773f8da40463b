/* SPDX-License-Identifier: MIT */
/*
 * Notify (Tokio's Notify, in C): wake one waiter or store one permit, or
 * wake every waiter of the moment.
 *
 * The state word packs a generation (bumped by each weft_notify_waiters(),
 * above bit 2) and one of EMPTY, WAITING (the queue is not empty) and
 * NOTIFIED (a permit is stored; then the queue is empty).  Transitions
 * between EMPTY and NOTIFIED are lock-free CASes; anything that involves
 * WAITING, or the generation, happens under the lock, so while the word
 * says WAITING only lock holders change it.
 *
 * A notified future records the generation when it is initialised.  At its
 * first poll a newer generation means weft_notify_waiters() ran since: it
 * is READY without queueing.  Queued waiters carry that generation too, in
 * queue order (a waiter queues only while its generation is current), so
 * notify_waiters() wakes exactly the waiters older than its own bump, even
 * when it has to drop the lock between batches of wakes.
 *
 * A waiter woken by notify_one() owns that notification until its future
 * sees it; dropped before that, the future forwards it (to the next waiter
 * or the permit), so cancelling never loses a notification.
 *
 * Lock order: n->lock is a leaf; wakers are woken and dropped after it.
 */
#include "sync_internal.h"

#define N_EMPTY ((uint64_t)0)
#define N_WAITING ((uint64_t)1)
#define N_NOTIFIED ((uint64_t)2)
#define N_MASK ((uint64_t)3)
#define N_GEN_SHIFT 2
#define N_GEN_ONE ((uint64_t)1 << N_GEN_SHIFT)

/* The future's phase (owner only). */
enum { NT_INIT, NT_QUEUED, NT_DONE };

/* A queued waiter's state (under the lock); its value is its generation. */
enum { W_WAITING = 1, W_NOTIFIED_ONE, W_NOTIFIED_ALL };

static uint64_t gen_of(uint64_t s)
{
	return s >> N_GEN_SHIFT;
}

void weft_notify_init(weft_notify_t *n)
{
	/* Not yet shared. */
	__atomic_store_n(&n->state, N_EMPTY, __ATOMIC_RELAXED);
	pthread_mutex_init(&n->lock, NULL);
	n->head = n->tail = NULL;
}

void weft_notify_fini(weft_notify_t *n)
{
	if (n->head)
		weft_panic("notify destroyed with waiters queued");
	pthread_mutex_destroy(&n->lock);
}

/* Under the lock, with the queue just emptied: WAITING -> EMPTY. */
static void clear_waiting_locked(weft_notify_t *n)
{
	uint64_t cur = __atomic_load_n(&n->state, __ATOMIC_RELAXED);

	/* Only lock holders change a WAITING word: a plain store is enough. */
	if ((cur & N_MASK) == N_WAITING)
		__atomic_store_n(&n->state, (cur & ~N_MASK) | N_EMPTY,
				 __ATOMIC_RELAXED);
}

/*
 * Under the lock: hand one notification to the first waiter, or store the
 * permit.  The waiter's waker goes to @wl.
 */
static void notify_one_locked(weft_notify_t *n, wake_list_t *wl)
{
	uint64_t cur = __atomic_load_n(&n->state, __ATOMIC_RELAXED);
	weft_waiter_t *w;

	while ((cur & N_MASK) != N_WAITING) {
		/*
		 * Release: the notifier's writes happen before the future
		 * that takes the permit returns; pairs with the acquire CAS
		 * in take_permit().
		 */
		if (__atomic_compare_exchange_n(
			    &n->state, &cur, (cur & ~N_MASK) | N_NOTIFIED, true,
			    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return;
	}
	w = waitq_pop_front(&n->head, &n->tail);
	wake_list_take(wl, &w->waker);
	/* Last touch: its future may free it once we unlock. */
	w->state = W_NOTIFIED_ONE;
	if (!n->head)
		clear_waiting_locked(n);
}

void weft_notify_one(weft_notify_t *n)
{
	uint64_t cur = __atomic_load_n(&n->state, __ATOMIC_RELAXED);
	wake_list_t wl;

	while ((cur & N_MASK) != N_WAITING) {
		/*
		 * EMPTY or NOTIFIED -> NOTIFIED.  A CAS even when already
		 * NOTIFIED, so that our writes too are released to the taker
		 * (pairs with the acquire CAS in take_permit()).
		 */
		if (__atomic_compare_exchange_n(
			    &n->state, &cur, (cur & ~N_MASK) | N_NOTIFIED, true,
			    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return;
	}
	wake_list_init(&wl);
	pthread_mutex_lock(&n->lock);
	notify_one_locked(n, &wl);
	pthread_mutex_unlock(&n->lock);
	wake_list_wake(&wl);
}

void weft_notify_waiters(weft_notify_t *n)
{
	wake_list_t wl;
	weft_waiter_t *w;
	uint64_t gen;

	wake_list_init(&wl);
	pthread_mutex_lock(&n->lock);
	/*
	 * Release: our writes happen before the return of any notified
	 * future that sees the new generation without queueing (pairs with
	 * the acquire loads in weft_notified_init() and notified_first()).
	 * Queued waiters are ordered by the lock instead.
	 */
	gen = gen_of(
		__atomic_add_fetch(&n->state, N_GEN_ONE, __ATOMIC_RELEASE));
	while ((w = n->head) && w->value < gen) {
		waitq_pop_front(&n->head, &n->tail);
		wake_list_take(&wl, &w->waker);
		w->state = W_NOTIFIED_ALL;
		if (!n->head)
			clear_waiting_locked(n);
		if (wake_list_full(&wl)) {
			pthread_mutex_unlock(&n->lock);
			wake_list_wake(&wl);
			pthread_mutex_lock(&n->lock);
		}
	}
	pthread_mutex_unlock(&n->lock);
	wake_list_wake(&wl);
}

/* ------------------------------------------------------------- notified */

void weft_notified_init(weft_notified_t *nd, weft_notify_t *n)
{
	nd->waiter = (weft_waiter_t){ 0 };
	nd->notify = n;
	nd->phase = NT_INIT;
	/*
	 * Acquire: a generation bumped before this snapshot comes with the
	 * notifier's writes (pairs with the release in
	 * weft_notify_waiters()), so a condition checked after init sees
	 * them; a later bump makes the first poll READY.
	 */
	nd->waiter.value = gen_of(__atomic_load_n(&n->state, __ATOMIC_ACQUIRE));
}

static weft_poll_t notified_done(weft_notified_t *nd)
{
	nd->phase = NT_DONE;
	weft__coop_progress();
	return WEFT_READY;
}

/*
 * Takes the stored permit if there is one.  @cur is the current word,
 * updated on failure.  Return: 1 taken, 0 no permit, -1 generation moved.
 */
static int take_permit(weft_notified_t *nd, uint64_t *cur)
{
	weft_notify_t *n = nd->notify;

	for (;;) {
		if (gen_of(*cur) != nd->waiter.value)
			return -1;
		if ((*cur & N_MASK) != N_NOTIFIED)
			return 0;
		/* Acquire: pairs with the release CAS in weft_notify_one(). */
		if (__atomic_compare_exchange_n(
			    &n->state, cur, (*cur & ~N_MASK) | N_EMPTY, true,
			    __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
			return 1;
	}
}

static weft_poll_t notified_first(weft_notified_t *nd, weft_cx_t *cx)
{
	weft_notify_t *n = nd->notify;
	/* Acquire: pairs with the release in weft_notify_waiters(). */
	uint64_t cur = __atomic_load_n(&n->state, __ATOMIC_ACQUIRE);

	if (take_permit(nd, &cur) != 0)
		return notified_done(nd);
	pthread_mutex_lock(&n->lock);
	cur = __atomic_load_n(&n->state, __ATOMIC_ACQUIRE);
	for (;;) {
		if (take_permit(nd, &cur) != 0) {
			pthread_mutex_unlock(&n->lock);
			return notified_done(nd);
		}
		/*
		 * EMPTY or WAITING -> WAITING.  The lock orders the queue;
		 * the CAS only has to fail if a permit or a new generation
		 * came meanwhile.  Acquire (failure included) for the
		 * take_permit() retry, as on the first load.
		 */
		if (__atomic_compare_exchange_n(
			    &n->state, &cur, (cur & ~N_MASK) | N_WAITING, true,
			    __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
			break;
	}
	nd->waiter.state = W_WAITING;
	nd->waiter.waker = weft_waker_clone(weft_cx_waker(cx));
	waitq_push_back(&n->head, &n->tail, &nd->waiter);
	nd->phase = NT_QUEUED;
	pthread_mutex_unlock(&n->lock);
	return WEFT_PENDING;
}

static weft_poll_t notified_queued(weft_notified_t *nd, weft_cx_t *cx)
{
	weft_notify_t *n = nd->notify;
	weft_waker_t old;

	pthread_mutex_lock(&n->lock);
	if (nd->waiter.state == W_WAITING) {
		old = waker_replace(&nd->waiter.waker, weft_cx_waker(cx));
		pthread_mutex_unlock(&n->lock);
		weft_waker_drop(&old);
		return WEFT_PENDING;
	}
	/* Notified under the lock, which orders the notifier's writes. */
	pthread_mutex_unlock(&n->lock);
	return notified_done(nd);
}

weft_poll_t weft_notified_poll(weft_notified_t *nd, weft_cx_t *cx)
{
	if (nd->phase == NT_DONE)
		return WEFT_READY;
	if (!weft__coop_poll(cx))
		return WEFT_PENDING;
	if (nd->phase == NT_QUEUED)
		return notified_queued(nd, cx);
	return notified_first(nd, cx);
}

void weft_notified_fini(weft_notified_t *nd)
{
	weft_notify_t *n = nd->notify;
	weft_waker_t old = WEFT_WAKER_EMPTY;
	wake_list_t wl;

	if (nd->phase != NT_QUEUED)
		goto out;
	wake_list_init(&wl);
	pthread_mutex_lock(&n->lock);
	switch (nd->waiter.state) {
	case W_WAITING:
		waitq_remove(&n->head, &n->tail, &nd->waiter);
		if (!n->head)
			clear_waiting_locked(n);
		old = nd->waiter.waker;
		nd->waiter.waker = WEFT_WAKER_EMPTY;
		break;
	case W_NOTIFIED_ONE:
		/* A notification we will never see: pass it on. */
		notify_one_locked(n, &wl);
		break;
	default:
		/* notify_waiters() stores nothing: nothing to pass on. */
		break;
	}
	pthread_mutex_unlock(&n->lock);
	wake_list_wake(&wl);
	weft_waker_drop(&old);
out:
	nd->phase = NT_DONE;
}
