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
 * or the permit), so cancelling never loses a notification.  Until then
 * it stays linked, on the handed list.
 *
 * Finishing the notify with futures still on it.  weft_notify_fini() takes
 * every waiter off both lists and sets its state to CLOSED (queued: its
 * future completes with -EPIPE, and is woken) or NOTIFIED_ALL (handed: the
 * notification stands); a future that reads either state no longer
 * touches the notify, so its memory may be reused as soon as fini returns.
 * A waiter's state is read without the lock for that reason, and set with
 * release by whoever unlinks it (the last touch).  A future that has to
 * lock the notify (to store a new waker, to unlink itself) first marks its
 * waiter W_BUSY, and clears the mark once it has unlocked; fini leaves a
 * busy waiter linked and comes back for it after letting the lock go, so
 * it never destroys the lock under a future that is about to take it.
 *
 * Lock order: n->lock is a leaf; wakers are woken and dropped after it.
 */
#include <errno.h>
#include <sched.h>

#include "resource_internal.h"
#include "sync_internal.h"

#define N_EMPTY ((uint64_t)0)
#define N_WAITING ((uint64_t)1)
#define N_NOTIFIED ((uint64_t)2)
#define N_MASK ((uint64_t)3)
#define N_GEN_SHIFT 2
#define N_GEN_ONE ((uint64_t)1 << N_GEN_SHIFT)

/* The future's phase (owner only). */
enum { NT_INIT, NT_QUEUED, NT_DONE };

/*
 * A waiter's state (changed under the lock, read without it; see the
 * top); its value is its generation.  Linked: WAITING (queue), NOTIFIED_ONE
 * (handed list).  Unlinked: NOTIFIED_ALL, CLOSED.  W_BUSY: its future is
 * about to lock the notify, or has just unlocked it.
 */
enum { W_WAITING = 1, W_NOTIFIED_ONE, W_NOTIFIED_ALL, W_CLOSED };
#define W_BUSY 0x100u

static uint64_t gen_of(uint64_t s)
{
	return s >> N_GEN_SHIFT;
}

void weft_notify_init_at(weft_notify_t *n, const char *file, int line)
{
	/* Not yet shared. */
	__atomic_store_n(&n->state, N_EMPTY, __ATOMIC_RELAXED);
	pthread_mutex_init(&n->lock, NULL);
	n->head = n->tail = NULL;
	n->handed_head = n->handed_tail = NULL;
	weft__res_init(&n->res, WEFT_RES_NOTIFY, file, line);
}

/* The function behind the macro, for callers that take its address. */
void(weft_notify_init)(weft_notify_t *n)
{
	weft_notify_init_at(n, NULL, 0);
}

void weft_notify_name(weft_notify_t *n, const char *name)
{
	weft__res_name(&n->res, name);
}

/* ------------------------------------------------------ waiter states */

/*
 * Under the lock: the waiter's new state, keeping W_BUSY (its future may
 * set it, or clear it, without the lock).  For an unlinked state this is
 * the last touch: the future may return, and free the waiter, once it
 * reads the state.
 */
static void waiter_set(weft_waiter_t *w, uint32_t state)
{
	uint32_t s = __atomic_load_n(&w->state, __ATOMIC_RELAXED);

	/*
	 * Release: our writes (and the notifier's before its call) happen
	 * before the future that reads the state returns; pairs with the
	 * acquire in waiter_enter().
	 */
	while (!__atomic_compare_exchange_n(&w->state, &s, state | (s & W_BUSY),
					    true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
}

/*
 * A queued future about to lock the notify.  Return: its waiter's state.
 * Still linked (WAITING, NOTIFIED_ONE): the waiter is now marked W_BUSY;
 * lock, then waiter_leave() after unlocking.  Unlinked (NOTIFIED_ALL,
 * CLOSED): nothing is marked and the notify must not be touched.
 */
static uint32_t waiter_enter(weft_waiter_t *w)
{
	/*
	 * Acquire: whoever unlinked us did so before we return (pairs with
	 * the release in waiter_set() and in close_list_locked()).
	 */
	uint32_t s = __atomic_load_n(&w->state, __ATOMIC_ACQUIRE);

	for (;;) {
		if (s == W_NOTIFIED_ALL || s == W_CLOSED)
			return s;
		/* Acquire on failure as above: the state may be one of those. */
		if (__atomic_compare_exchange_n(&w->state, &s, s | W_BUSY, true,
						__ATOMIC_ACQUIRE,
						__ATOMIC_ACQUIRE))
			return s;
	}
}

/* After unlocking: the notify is no longer ours to touch. */
static void waiter_leave(weft_waiter_t *w)
{
	/*
	 * Release: our unlock, the last touch of the notify, happens before
	 * weft_notify_fini() destroys it (pairs with the acquire of its CAS
	 * in close_list_locked()).
	 */
	__atomic_fetch_and(&w->state, ~W_BUSY, __ATOMIC_RELEASE);
}

/*
 * Under the lock, in weft_notify_fini(): unlinks every waiter of a list
 * that is not busy, setting @state (the wakers of queued ones go to @wl).
 * Return: how many were left because busy or because @wl filled up.
 */
static unsigned close_list_locked(weft_waiter_t **head, weft_waiter_t **tail,
				  uint32_t state, wake_list_t *wl)
{
	weft_waiter_t *w, *next, *prev;
	unsigned left = 0;
	weft_waker_t waker;
	uint32_t s;

	for (w = *head; w; w = next) {
		/* Read before the state: after it, @w is not ours. */
		next = w->next;
		prev = w->prev;
		/* Relaxed: the CAS below decides. */
		s = __atomic_load_n(&w->state, __ATOMIC_RELAXED);
		if ((s & W_BUSY) || wake_list_full(wl)) {
			left++;
			continue;
		}
		waker = w->waker;
		w->waker = WEFT_WAKER_EMPTY;
		/*
		 * Fails only if the future marked it busy meanwhile (other
		 * changes need the lock).  Acquire: a future that was busy
		 * before is done with the notify (pairs with the release in
		 * waiter_leave()).  Release: as in waiter_set().
		 */
		if (!__atomic_compare_exchange_n(&w->state, &s, state, false,
						 __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED)) {
			/* It waits for our lock: as if we never looked. */
			w->waker = waker;
			left++;
			continue;
		}
		/* Unlink without touching @w. */
		if (prev)
			prev->next = next;
		else
			*head = next;
		if (next)
			next->prev = prev;
		else
			*tail = prev;
		wake_list_take(wl, &waker);
	}
	return left;
}

void weft_notify_fini(weft_notify_t *n)
{
	wake_list_t wl;
	unsigned left;

	wake_list_init(&wl);
	pthread_mutex_lock(&n->lock);
	for (;;) {
		/* Queued: woken, -EPIPE.  Handed: the notification stands. */
		left = close_list_locked(&n->head, &n->tail, W_CLOSED, &wl);
		left += close_list_locked(&n->handed_head, &n->handed_tail,
					  W_NOTIFIED_ALL, &wl);
		if (!left)
			break;
		/*
		 * A full batch, or futures about to take the lock: let them
		 * have it, then look again.
		 */
		pthread_mutex_unlock(&n->lock);
		wake_list_wake(&wl);
		sched_yield();
		pthread_mutex_lock(&n->lock);
	}
	pthread_mutex_unlock(&n->lock);
	wake_list_wake(&wl);
	weft__res_fini(&n->res);
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
	/* Linked until its future sees the notification (or fini runs). */
	waitq_push_back(&n->handed_head, &n->handed_tail, w);
	waiter_set(w, W_NOTIFIED_ONE);
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
		/* Last touch: its future may free it once it sees this. */
		waiter_set(w, W_NOTIFIED_ALL);
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
	nd->status = 0;
	/*
	 * Acquire: a generation bumped before this snapshot comes with the
	 * notifier's writes (pairs with the release in
	 * weft_notify_waiters()), so a condition checked after init sees
	 * them; a later bump makes the first poll READY.
	 */
	nd->waiter.value = gen_of(__atomic_load_n(&n->state, __ATOMIC_ACQUIRE));
}

static weft_poll_t notified_done(weft_notified_t *nd, int status)
{
	nd->phase = NT_DONE;
	nd->status = status;
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
		return notified_done(nd, 0);
	pthread_mutex_lock(&n->lock);
	cur = __atomic_load_n(&n->state, __ATOMIC_ACQUIRE);
	for (;;) {
		if (take_permit(nd, &cur) != 0) {
			pthread_mutex_unlock(&n->lock);
			return notified_done(nd, 0);
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
	/* Relaxed: nobody else sees the waiter before we link it. */
	__atomic_store_n(&nd->waiter.state, W_WAITING, __ATOMIC_RELAXED);
	nd->waiter.waker = weft_waker_clone(weft_cx_waker(cx));
	/* Before it is linked: a notifier may end the wait at once. */
	WEFT_RES_WAIT(&n->res, &nd->waiter, WEFT_RES_OP_NOTIFIED);
	waitq_push_back(&n->head, &n->tail, &nd->waiter);
	nd->phase = NT_QUEUED;
	pthread_mutex_unlock(&n->lock);
	return WEFT_PENDING;
}

static weft_poll_t notified_queued(weft_notified_t *nd, weft_cx_t *cx)
{
	weft_notify_t *n = nd->notify;
	weft_waiter_t *w = &nd->waiter;
	weft_waker_t old = WEFT_WAKER_EMPTY;
	uint32_t state = waiter_enter(w);

	/* Unlinked: the notify may be gone; the waiter has its id. */
	if (state == W_CLOSED) {
		WEFT_RES_WAIT_END(w, WEFT_RES_OP_NOTIFIED | WEFT_RES_CLOSED);
		return notified_done(nd, -EPIPE);
	}
	if (state == W_NOTIFIED_ALL) {
		WEFT_RES_WAIT_END(w, WEFT_RES_OP_NOTIFIED);
		return notified_done(nd, 0);
	}
	pthread_mutex_lock(&n->lock);
	/* Relaxed: under the lock only W_BUSY changes, and it is ours. */
	state = __atomic_load_n(&w->state, __ATOMIC_RELAXED) & ~W_BUSY;
	if (state == W_WAITING)
		old = waker_replace(&w->waker, weft_cx_waker(cx));
	else if (state == W_NOTIFIED_ONE)
		waitq_remove(&n->handed_head, &n->handed_tail, w);
	pthread_mutex_unlock(&n->lock);
	waiter_leave(w);
	weft_waker_drop(&old);
	if (state == W_WAITING)
		return WEFT_PENDING;
	WEFT_RES_WAIT_END(w, WEFT_RES_OP_NOTIFIED);
	/* Notified under the lock, which orders the notifier's writes. */
	return notified_done(nd, 0);
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
	weft_waiter_t *w = &nd->waiter;
	weft_waker_t old = WEFT_WAKER_EMPTY;
	wake_list_t wl;
	uint32_t state;

	if (nd->phase != NT_QUEUED)
		goto out;
	WEFT_RES_WAIT_END(w, WEFT_RES_OP_NOTIFIED | WEFT_RES_CANCELLED);
	state = waiter_enter(w);
	if (state == W_CLOSED || state == W_NOTIFIED_ALL)
		goto out; /* unlinked: the notify is not ours to touch */
	wake_list_init(&wl);
	pthread_mutex_lock(&n->lock);
	/* Relaxed: as in notified_queued(). */
	state = __atomic_load_n(&w->state, __ATOMIC_RELAXED) & ~W_BUSY;
	switch (state) {
	case W_WAITING:
		waitq_remove(&n->head, &n->tail, w);
		if (!n->head)
			clear_waiting_locked(n);
		old = w->waker;
		w->waker = WEFT_WAKER_EMPTY;
		break;
	case W_NOTIFIED_ONE:
		/* A notification we will never see: pass it on. */
		waitq_remove(&n->handed_head, &n->handed_tail, w);
		notify_one_locked(n, &wl);
		break;
	default:
		/* notify_waiters() stores nothing: nothing to pass on. */
		break;
	}
	pthread_mutex_unlock(&n->lock);
	waiter_leave(w);
	wake_list_wake(&wl);
	weft_waker_drop(&old);
out:
	nd->phase = NT_DONE;
}
