/* SPDX-License-Identifier: MIT */
/*
 * A FIFO-fair async semaphore (Tokio's batch_semaphore, in C).
 *
 * The state word packs the available permits (above bit 2), WAITERS (the
 * queue is not empty) and CLOSED.  Invariants, true whenever the lock is
 * free: WAITERS is set exactly when the queue is not empty, and then the
 * count is zero, because released permits go to the queued acquirers first
 * (in order: the head takes what it still needs, possibly only part, before
 * anyone behind it gets any).  So an acquirer that finds WAITERS, or too few
 * permits, queues behind the others and nobody overtakes: fairness with a
 * lock-free fast path for the uncontended case.
 *
 * Who touches what: the state word is changed by CAS from any thread (the
 * fast paths without the lock, everything else under it).  The queue, and
 * every field of a queued waiter, only under the lock.  A waiter leaves the
 * queue with its state set under the lock (READY: all permits assigned;
 * CLOSED), and its future reads that state under the lock too, so a
 * releaser has let go of the semaphore by the time the acquirer returns
 * (the acquirer may then free the semaphore).
 *
 * Lock order: sem->lock is a leaf.  Wakers are woken after it is released
 * (wake list), and replaced wakers are dropped after it.
 */
#include <errno.h>

#include "lock_wait_internal.h"
#include "resource_internal.h"
#include "sync_internal.h"

#define SEM_CLOSED ((uint64_t)1)
#define SEM_WAITERS ((uint64_t)2)
#define SEM_SHIFT 2
#define SEM_ONE ((uint64_t)1 << SEM_SHIFT)

/* The future's phase (owner only). */
enum { ACQ_IDLE, ACQ_QUEUED, ACQ_DONE };

/* A queued waiter's state (under the lock). */
enum { W_WAITING = 1, W_READY, W_CLOSED };

/*
 * In a waiter: value is the number of permits still needed, aux the number
 * assigned to it so far.
 */

static uint64_t permits_of(uint64_t s)
{
	return s >> SEM_SHIFT;
}

static uint64_t add_checked(uint64_t s, uint64_t n)
{
	if (n > WEFT_SEMAPHORE_MAX_PERMITS - permits_of(s))
		weft_panic("semaphore: more than %llu permits",
			   (unsigned long long)WEFT_SEMAPHORE_MAX_PERMITS);
	return s + n * SEM_ONE;
}

int weft_semaphore_init_at(weft_semaphore_t *sem, uint64_t permits,
			   const char *file, int line)
{
	if (permits > WEFT_SEMAPHORE_MAX_PERMITS)
		return -EINVAL;
	/* Not yet shared. */
	__atomic_store_n(&sem->state, permits << SEM_SHIFT, __ATOMIC_RELAXED);
	pthread_mutex_init(&sem->lock, NULL);
	sem->head = sem->tail = NULL;
	weft__res_init(&sem->res, WEFT_RES_SEMAPHORE, file, line);
	return 0;
}

/* The function behind the macro, for callers that take its address. */
int(weft_semaphore_init)(weft_semaphore_t *sem, uint64_t permits)
{
	return weft_semaphore_init_at(sem, permits, NULL, 0);
}

void weft_semaphore_name(weft_semaphore_t *sem, const char *name)
{
	weft__res_name(&sem->res, name);
}

void weft_semaphore_fini(weft_semaphore_t *sem)
{
	if (sem->head)
		weft_panic("semaphore destroyed with acquirers queued");
	weft__res_fini(&sem->res);
	pthread_mutex_destroy(&sem->lock);
}

enum fast_result { FAST_GOT, FAST_CLOSED, FAST_WAIT };

static enum fast_result acquire_fast(weft_semaphore_t *sem, uint32_t n)
{
	uint64_t cur = __atomic_load_n(&sem->state, __ATOMIC_RELAXED);

	do {
		if (cur & SEM_CLOSED)
			return FAST_CLOSED;
		if ((cur & SEM_WAITERS) || permits_of(cur) < n)
			return FAST_WAIT;
		/*
		 * Acquire: the permits' last releaser's writes (the critical
		 * section of the mutex built on us) happen before ours; pairs
		 * with the release CAS in weft_semaphore_release() and
		 * add_permits_unlock().
		 */
	} while (!__atomic_compare_exchange_n(
		&sem->state, &cur, cur - (uint64_t)n * SEM_ONE, true,
		__ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
	return FAST_GOT;
}

bool weft_semaphore_try_acquire(weft_semaphore_t *sem, uint32_t n)
{
	if (acquire_fast(sem, n) != FAST_GOT)
		return false;
	WEFT_RES_EVENT(&sem->res, RES_ACQUIRE, weft__cur_task_id, n);
	return true;
}

/*
 * Called with the lock held; releases it.  Gives @n permits to the queued
 * waiters in order, the rest to the count (clearing WAITERS if the queue
 * is empty), then wakes the waiters it completed.
 */
static void add_permits_unlock(weft_semaphore_t *sem, uint64_t n)
{
	wake_list_t wl;
	weft_waiter_t *w;
	uint64_t cur;

	wake_list_init(&wl);
	for (;;) {
		while (n && (w = sem->head)) {
			uint64_t give = n < w->value ? n : w->value;

			w->value -= give;
			w->aux += give;
			n -= give;
			if (w->value)
				break; /* the head still needs more; n is 0 */
			waitq_pop_front(&sem->head, &sem->tail);
			wake_list_take(&wl, &w->waker);
			/* Last touch: its future may free it once we unlock. */
			w->state = W_READY;
			if (wake_list_full(&wl))
				break;
		}
		if (!wake_list_full(&wl))
			break;
		/* A full batch: wake it outside the lock, then go on. */
		pthread_mutex_unlock(&sem->lock);
		wake_list_wake(&wl);
		pthread_mutex_lock(&sem->lock);
	}
	if (!sem->head) {
		cur = __atomic_load_n(&sem->state, __ATOMIC_RELAXED);
		/*
		 * Release: the permits' releasers' writes happen before a
		 * fast-path acquirer that takes them (pairs with the acquire
		 * CAS in acquire_fast()).
		 */
		while (!__atomic_compare_exchange_n(
			&sem->state, &cur, add_checked(cur & ~SEM_WAITERS, n),
			true, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
	}
	pthread_mutex_unlock(&sem->lock);
	wake_list_wake(&wl);
}

void weft_semaphore_release(weft_semaphore_t *sem, uint32_t n)
{
	uint64_t cur = __atomic_load_n(&sem->state, __ATOMIC_RELAXED);

	if (n == 0)
		return;
	/* Before the permits go: the next holder's acquire comes after. */
	WEFT_RES_EVENT(&sem->res, RES_RELEASE, weft__cur_task_id, n);
	while (!(cur & SEM_WAITERS)) {
		/*
		 * Release: our writes (the critical section) happen before
		 * the next acquirer's; pairs with the acquire CAS in
		 * acquire_fast() and acquire_slow().
		 */
		if (__atomic_compare_exchange_n(
			    &sem->state, &cur, add_checked(cur, n), true,
			    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return;
	}
	/* Acquirers are queued: they get the permits, under the lock. */
	pthread_mutex_lock(&sem->lock);
	add_permits_unlock(sem, n);
}

void weft_semaphore_close(weft_semaphore_t *sem)
{
	uint64_t returned = 0, cur;
	wake_list_t wl;
	weft_waiter_t *w;

	wake_list_init(&wl);
	pthread_mutex_lock(&sem->lock);
	/*
	 * Release: pairs with the acquire load in
	 * weft_semaphore_is_closed().  New acquirers now fail (the slow
	 * path checks CLOSED under the lock), so the queue only shrinks.
	 */
	__atomic_fetch_or(&sem->state, SEM_CLOSED, __ATOMIC_RELEASE);
	while ((w = sem->head)) {
		waitq_pop_front(&sem->head, &sem->tail);
		returned += w->aux;
		w->aux = 0;
		wake_list_take(&wl, &w->waker);
		w->state = W_CLOSED;
		if (wake_list_full(&wl)) {
			pthread_mutex_unlock(&sem->lock);
			wake_list_wake(&wl);
			pthread_mutex_lock(&sem->lock);
		}
	}
	cur = __atomic_load_n(&sem->state, __ATOMIC_RELAXED);
	/* Release: as in add_permits_unlock(), for the returned permits. */
	while (!__atomic_compare_exchange_n(
		&sem->state, &cur, add_checked(cur & ~SEM_WAITERS, returned),
		true, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
	pthread_mutex_unlock(&sem->lock);
	wake_list_wake(&wl);
}

bool weft_semaphore_is_closed(const weft_semaphore_t *sem)
{
	/* Acquire: pairs with the release in weft_semaphore_close(). */
	return __atomic_load_n(&sem->state, __ATOMIC_ACQUIRE) & SEM_CLOSED;
}

uint64_t weft_semaphore_available(const weft_semaphore_t *sem)
{
	/* Relaxed: a snapshot, ordering nothing. */
	return permits_of(__atomic_load_n(&sem->state, __ATOMIC_RELAXED));
}

/* ------------------------------------------------------------- acquire */

void weft_semaphore_acquire_init(weft_semaphore_acquire_t *acq,
				 weft_semaphore_t *sem, uint32_t n)
{
	acq->waiter = (weft_waiter_t){ 0 };
	acq->sem = sem;
	acq->n = n;
	acq->phase = ACQ_IDLE;
	acq->status = 0;
}

/* @told: a RES_WAIT_END said it acquired; else RES_ACQUIRE says it. */
static weft_poll_t acquire_done_told(weft_semaphore_acquire_t *acq,
				     int status, bool told)
{
#if WEFT_PROBE
	/* With the await it was acquired at (RES_SITE). */
	if (status == 0 && !told && __builtin_expect(weft__probe_on(), 0))
		weft__res_emit_acquire(&acq->sem->res, weft__cur_task_id,
				       acq->n);
#else
	(void)told;
#endif
	if (status == 0)
		weft__mutex_holder_set(acq->sem);
	acq->phase = ACQ_DONE;
	acq->status = status;
	weft__coop_progress();
	return WEFT_READY;
}

static weft_poll_t acquire_done(weft_semaphore_acquire_t *acq, int status)
{
	return acquire_done_told(acq, status, false);
}

/* First poll, fast path failed: take what is there and queue for the rest. */
static weft_poll_t acquire_slow(weft_semaphore_acquire_t *acq, weft_cx_t *cx)
{
	weft_semaphore_t *sem = acq->sem;
	uint64_t cur, next, take;
	uint32_t gen = 0;

	pthread_mutex_lock(&sem->lock);
	cur = __atomic_load_n(&sem->state, __ATOMIC_RELAXED);
	do {
		if (cur & SEM_CLOSED) {
			pthread_mutex_unlock(&sem->lock);
			return acquire_done(acq, -EPIPE);
		}
		/* Zero when WAITERS is set (see the top). */
		take = permits_of(cur) < acq->n ? permits_of(cur) : acq->n;
		next = cur - take * SEM_ONE;
		if (take < acq->n)
			next |= SEM_WAITERS;
		/*
		 * Acquire: as in acquire_fast(), for the permits we take.
		 * Fast-path releasers and acquirers still race with us, hence
		 * the CAS even under the lock.
		 */
	} while (!__atomic_compare_exchange_n(&sem->state, &cur, next, true,
					      __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	if (take == acq->n) {
		pthread_mutex_unlock(&sem->lock);
		return acquire_done(acq, 0);
	}
	acq->waiter.value = acq->n - take;
	acq->waiter.aux = take;
	acq->waiter.state = W_WAITING;
	acq->waiter.waker = weft_waker_clone(weft_cx_waker(cx));
#if WEFT_PROBE
	gen = load_relaxed(&weft__probe_listen_gen);
#endif
	/* Before it is linked: a releaser may end the wait at once. */
	WEFT_RES_WAIT(&sem->res, &acq->waiter, WEFT_RES_OP_ACQUIRE);
	waitq_push_back(&sem->head, &sem->tail, &acq->waiter);
	acq->phase = ACQ_QUEUED;
	pthread_mutex_unlock(&sem->lock);
	/*
	 * A mutex's wait, kept for a collector that starts while it lasts
	 * (lock_wait.c), out of the semaphore's lock (a leaf).  After it is
	 * linked is early enough: this task is in this poll, so its wait's
	 * end (a later poll, or its future's fini) comes after.
	 */
	if (sem->res.kind == WEFT_RES_MUTEX)
		acq->waiter.slot = weft__lock_wait_begin(
			&sem->res, WEFT_RES_MUTEX, WEFT_RES_OP_ACQUIRE,
			weft__lock_wait_told(acq->waiter.res, gen));
	return WEFT_PENDING;
}

/* RES_WAIT_END's a2 bits for a wait that ended holding @n permits. */
static uint32_t res_acquired(uint32_t n)
{
	return WEFT_RES_ACQUIRED |
	       (n > 0xffffu ? 0xffffu : n) << WEFT_RES_COUNT_SHIFT;
}

/* Polled again while queued: done, or keep waiting with this cx's waker. */
static weft_poll_t acquire_queued(weft_semaphore_acquire_t *acq, weft_cx_t *cx)
{
	weft_semaphore_t *sem = acq->sem;
	weft_waker_t old;
	uint32_t state;
	bool told;

	pthread_mutex_lock(&sem->lock);
	state = acq->waiter.state;
	if (state == W_WAITING) {
		old = waker_replace(&acq->waiter.waker, weft_cx_waker(cx));
		pthread_mutex_unlock(&sem->lock);
		weft_waker_drop(&old);
		return WEFT_PENDING;
	}
	/*
	 * READY or CLOSED was set under the lock by whoever took us out of
	 * the queue; the lock orders their writes (and the permits' previous
	 * holder's) before our return.
	 */
	pthread_mutex_unlock(&sem->lock);
	/* The lock is ours (or the wait is over): the slot goes first. */
	weft__lock_wait_end(acq->waiter.slot,
			    WEFT_RES_OP_ACQUIRE |
				    (state == W_READY ? 0 : WEFT_RES_CLOSED));
	acq->waiter.slot = 0;
	/* Its RES_WAIT was told: its end says the acquire too. */
	told = acq->waiter.res != 0 && WEFT_PROBE_ON();
	WEFT_RES_WAIT_END(&acq->waiter,
			  WEFT_RES_OP_ACQUIRE |
				  (state == W_READY ? res_acquired(acq->n) :
						      WEFT_RES_CLOSED));
	return acquire_done_told(acq, state == W_READY ? 0 : -EPIPE, told);
}

weft_poll_t weft_semaphore_acquire_poll(weft_semaphore_acquire_t *acq,
					weft_cx_t *cx)
{
	if (acq->phase == ACQ_DONE)
		return WEFT_READY;
	if (!weft__coop_poll(cx))
		return WEFT_PENDING;
	if (acq->phase == ACQ_QUEUED)
		return acquire_queued(acq, cx);
	switch (acquire_fast(acq->sem, acq->n)) {
	case FAST_GOT:
		return acquire_done(acq, 0);
	case FAST_CLOSED:
		return acquire_done(acq, -EPIPE);
	case FAST_WAIT:
		break;
	}
	return acquire_slow(acq, cx);
}

void weft_semaphore_acquire_fini(weft_semaphore_acquire_t *acq)
{
	weft_semaphore_t *sem = acq->sem;
	weft_waker_t old = WEFT_WAKER_EMPTY;

	if (acq->phase != ACQ_QUEUED)
		goto out;
	WEFT_RES_WAIT_END(&acq->waiter,
			  WEFT_RES_OP_ACQUIRE | WEFT_RES_CANCELLED);
	/* Still queued or handed the lock: the semaphore is alive. */
	weft__lock_wait_end(acq->waiter.slot,
			    WEFT_RES_OP_ACQUIRE | WEFT_RES_CANCELLED);
	acq->waiter.slot = 0;
	pthread_mutex_lock(&sem->lock);
	switch (acq->waiter.state) {
	case W_WAITING:
		/* Leave the queue; what was set aside for us moves on. */
		waitq_remove(&sem->head, &sem->tail, &acq->waiter);
		old = acq->waiter.waker;
		acq->waiter.waker = WEFT_WAKER_EMPTY;
		add_permits_unlock(sem, acq->waiter.aux);
		break;
	case W_READY:
		/* Granted but never seen: the whole grant moves on. */
		add_permits_unlock(sem, acq->n);
		break;
	default:
		/* CLOSED: the permits went back to the count at close. */
		pthread_mutex_unlock(&sem->lock);
		break;
	}
	weft_waker_drop(&old);
out:
	acq->phase = ACQ_DONE;
}
