/* SPDX-License-Identifier: MIT */
/*
 * weft_mutex_t (see mutex.h).  The task being polled keeps the list of
 * weft_mutex_t it holds (t->held_locks: pushed on lock, unlinked on
 * unlock); the worker checks it when the poll returns PENDING
 * (weft__probe_locks_at_pending()).  The list lives in the task, not in
 * the thread, because a task that holds one across an await (the very
 * mistake being caught) may resume, and unlock, on another worker.  Only
 * the thread running the task touches its list: the task state machine
 * makes that exclusive, so no atomics are needed.  A lock taken outside a
 * task (a plain thread) is not tracked.
 *
 * Unlocking from a task other than the one that locked leaves the owner's
 * list alone: its entry is skipped from then on (owner_task no longer
 * matches) and must not outlive the mutex.
 *
 * The lock is a futex word (Drepper, "Futexes Are Tricky", mutex 2): 0
 * free, 1 taken, 2 taken and maybe waited for.  Lock: 0 -> 1 with a CAS;
 * else swap in 2 and sleep while the word is 2, until a swap finds it 0.
 * Unlock: swap in 0; if it was 2, wake one sleeper.  Any thread may
 * unlock, which a pthread mutex does not allow: a task that held the lock
 * across an await unlocks on whichever worker resumes it.
 */
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "weft/mutex.h"

#include "lock_wait_internal.h"
#include "probe_internal.h"
#include "resource_internal.h"
#include "runtime_internal.h"

/* The header's plain word, as the atomic it is (same size and alignment). */
static _Atomic uint32_t *word(weft_mutex_t *m)
{
	_Static_assert(sizeof(_Atomic uint32_t) == sizeof(uint32_t) &&
			       _Alignof(_Atomic uint32_t) == _Alignof(uint32_t),
		       "weft_mutex_t.state is an atomic word");
	return (_Atomic uint32_t *)&m->state;
}

_Static_assert(WEFT__MUTEX_RES_KIND == WEFT_RES_SYNC_MUTEX,
	       "WEFT_MUTEX_INITIALIZER's resource kind");

/*
 * @m's resource, with its kind: one made by weft_mutex_init() or
 * WEFT_MUTEX_INITIALIZER has it; one zeroed (a static never initialised,
 * which works as a lock) is given it at its first event, so that the
 * probe names it a mutex and its waits enter the wait-for graph.  Only
 * while the probe listens.  Relaxed: every thread stores the same value,
 * which orders nothing; announce() (resource.c) reads it so.
 */
static weft_resource_t *mutex_res(weft_mutex_t *m)
{
	if (__builtin_expect(!__atomic_load_n(&m->res.kind, __ATOMIC_RELAXED),
			     0))
		__atomic_store_n(&m->res.kind, (uint8_t)WEFT_RES_SYNC_MUTEX,
				 __ATOMIC_RELAXED);
	return &m->res;
}

void weft_mutex_init(weft_mutex_t *m, const char *name)
{
	memset(m, 0, sizeof(*m));
	m->name = name;
	weft__res_init(&m->res, WEFT_RES_SYNC_MUTEX, NULL, 0);
	m->res.name = name;
}

void weft_mutex_fini(weft_mutex_t *m)
{
	weft__res_fini(&m->res);
}

/*
 * across_task's top bit: its LOCK_HELD_PENDING was emitted.  across_task
 * is the holder's to write (relaxed: a collector reads it, lock_wait.c
 * holder_of(), to tell a hold across an await that began before anyone
 * listened; it orders nothing).
 */
#define ACROSS_HEARD WEFT__MUTEX_ACROSS_HEARD

static void lock_slow(weft_mutex_t *m, uint32_t c)
{
	_Atomic uint32_t *w = word(m);

#if WEFT_PROBE
	/*
	 * Relaxed: a count for the warning of a hold across an await
	 * (unlock), orders nothing; reset by each new holder (taken()).
	 */
	__atomic_fetch_add(&m->blocked, 1, __ATOMIC_RELAXED);
#endif
	/*
	 * Acquire on the swap that finds it free: the holder's critical
	 * section (its release swap in unlock) happens before ours.  Marked
	 * 2 while we may sleep, so that its unlock wakes somebody; a thread
	 * that takes it this way keeps the 2 (a wake too many at worst).
	 */
	if (c != 2)
		c = atomic_exchange_explicit(w, 2, memory_order_acquire);
	while (c != 0) {
		syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, 2, NULL,
			NULL, 0);
		c = atomic_exchange_explicit(w, 2, memory_order_acquire);
	}
}

#if WEFT_PROBE
static void unheard_release(weft_mutex_t *m, weft_task_t *t,
			    uint32_t blocked);
#endif

/* @waited_us: how long the taker blocked for it (0: not, or not known). */
static void taken(weft_mutex_t *m, const char *file, int line,
		  uint32_t waited_us)
{
	weft_task_t *t = weft__current_task();

	m->file = file;
	m->line = line;
	/* Relaxed: see lock_slow(). */
	__atomic_store_n(&m->blocked, 0, __ATOMIC_RELAXED);
	/*
	 * ns (not the TSC): the hold time is computed on this thread.  Read
	 * whether or not anyone listens, so that a lock held across an
	 * await has its real hold time in the warning raised when
	 * it is released (unheard_release()).  Atomic, before the owner:
	 * a collector reads both (lock_wait.c holder_of()).
	 */
#if WEFT_PROBE
	__atomic_store_n(&m->taken_at, weft__probe_clock_ns(),
			 __ATOMIC_RELAXED);
#else
	m->taken_at = 0;
#endif
	/*
	 * Release: a collector that reads this owner (acquire) reads this
	 * hold's start above, not an older one's.
	 */
	__atomic_store_n(&m->owner_task, t ? t->id : 0, __ATOMIC_RELEASE);
	m->held_next = NULL;
	if (t) {
		m->held_next = t->held_locks;
		t->held_locks = m;
	}
	WEFT_PROBE_EVENT(LOCK_ACQUIRE, m->owner_task, (uintptr_t)m->name,
			 waited_us);
	/* Its holder as a resource's (deadlocks, the resources view). */
	if (WEFT_PROBE_ON())
		weft__res_acquired(mutex_res(m), m->owner_task, file, line,
				   NULL);
}

void weft_mutex_lock_at(weft_mutex_t *m, const char *file, int line)
{
	uint32_t c = 0, waited_us = 0;

	/* Acquire: as in lock_slow(). */
	if (!atomic_compare_exchange_strong_explicit(word(m), &c, 1,
						     memory_order_acquire,
						     memory_order_relaxed)) {
#if WEFT_PROBE
		/*
		 * Timed while someone listens: a task's poll blocked here is
		 * waiting for this lock, which its long-poll warning names
		 * (else "a blocking call").  Two clock reads on the slow
		 * path only.
		 */
		uint64_t t0 = WEFT_PROBE_ON() ? weft__probe_clock_ns() : 0;
		bool listening = t0 != 0;
		weft_worker_t *wk = weft__cur_worker;

		uint64_t task = t0 ? weft__cur_task_id : 0, res = 0;

		/*
		 * Since, then the name (release): runtime_internal.h.  Also
		 * while nobody listens: the runtime monitor's warning of a
		 * poll blocked here names the lock (a clock read more, on
		 * the slow path).
		 */
		if (wk) {
			if (!t0)
				t0 = weft__probe_clock_ns();
			store_relaxed(&wk->lock_wait_since, t0);
			store_release(&wk->lock_waiting,
				      m->name ? m->name : "?");
		}
		/*
		 * A task's wait, as on an async mutex: the collector's
		 * wait-for graph then has it (two tasks that take two
		 * weft_mutex_t in opposite orders block their workers for
		 * good, and nothing said why).  Stamped with the clock:
		 * it begins and ends within one poll.
		 */
		uint32_t gen = load_relaxed(&weft__probe_listen_gen), slot;

		if (task)
			res = weft__res_emit_clock(mutex_res(m),
						   WEFT_EV_RES_WAIT, task,
						   WEFT_RES_OP_ACQUIRE);
		/* Kept for a collector that starts while it lasts. */
		slot = weft__lock_wait_begin(&m->res, WEFT_RES_SYNC_MUTEX,
					     WEFT_RES_OP_ACQUIRE,
					     weft__lock_wait_told(res, gen));
		lock_slow(m, c);
		weft__lock_wait_end(slot, WEFT_RES_OP_ACQUIRE);
		if (wk)
			store_relaxed(&wk->lock_waiting, NULL);
		if (res && WEFT_PROBE_ON())
			weft__probe_emit_at(weft__probe_clock(),
					    WEFT_EV_RES_WAIT_END, task, res,
					    WEFT_RES_OP_ACQUIRE);
		if (listening) {
			uint64_t us = (weft__probe_clock_ns() - t0) / 1000;

			waited_us = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
		}
#else
		lock_slow(m, c);
#endif
	}
	taken(m, file, line, waited_us);
}

bool weft_mutex_trylock_at(weft_mutex_t *m, const char *file, int line)
{
	uint32_t c = 0;

	if (!atomic_compare_exchange_strong_explicit(word(m), &c, 1,
						     memory_order_acquire,
						     memory_order_relaxed))
		return false;
	taken(m, file, line, 0);
	return true;
}

void weft_mutex_unlock(weft_mutex_t *m)
{
	weft_task_t *t = weft__current_task();

	/*
	 * Unlocked twice, or never locked: a bug of the caller's, said
	 * loudly as weft_async_mutex_unlock() says it, rather than a
	 * release that lets a second holder in.  Relaxed: our own lock (or
	 * its hand-over to us) is what made the word non-zero.
	 */
	if (atomic_load_explicit(word(m), memory_order_relaxed) == 0)
		weft_panic("mutex \"%s\" unlocked while not locked",
			   m->name ? m->name : "?");

	if (t && m->owner_task == t->id) {
		weft_mutex_t **pp = &t->held_locks;

		while (*pp && *pp != m)
			pp = &(*pp)->held_next;
		if (*pp)
			*pp = m->held_next;
	}
	m->held_next = NULL;
#if WEFT_PROBE
	if (__builtin_expect(__atomic_load_n(&m->across_task,
					     __ATOMIC_RELAXED) != 0,
			     0)) {
		uint64_t was =
			__atomic_load_n(&m->across_task, __ATOMIC_RELAXED);
		uint64_t across = was & ~ACROSS_HEARD;
		/* Relaxed: see lock_slow(). */
		uint32_t blocked =
			__atomic_exchange_n(&m->blocked, 0, __ATOMIC_RELAXED);

		/*
		 * Its warning waits for this release, to say how long it
		 * was held and who blocked meanwhile: by event when its
		 * pending poll was heard and someone still listens, else
		 * straight into the probe's warnings.
		 */
		if (across == m->owner_task) {
			if ((was & ACROSS_HEARD) && weft__probe_on())
				weft__probe_emit(WEFT_EV_LOCK_HELD_END, across,
						 (uintptr_t)m->name, blocked);
			else
				unheard_release(m, t, blocked);
		}
		__atomic_store_n(&m->across_task, 0, __ATOMIC_RELAXED);
	}
#endif
	{
		uint64_t owner = m->owner_task;

		/*
		 * Cleared before the RES_RELEASE is pushed: a collector that
		 * folded that event in reads the clear (lock_wait.c).
		 */
		__atomic_store_n(&m->owner_task, 0, __ATOMIC_RELAXED);
		WEFT_PROBE_EVENT(LOCK_RELEASE, owner, (uintptr_t)m->name, 0);
		WEFT_RES_EVENT(mutex_res(m), RES_RELEASE, owner, 1);
	}
	/* Release: our critical section before the next holder's acquire. */
	if (atomic_exchange_explicit(word(m), 0, memory_order_release) == 2)
		syscall(SYS_futex, (uint32_t *)word(m), FUTEX_WAKE_PRIVATE, 1,
			NULL, NULL, 0);
}

unsigned weft__probe_locks_at_pending(weft_task_t *t)
{
	unsigned n = 0;

	for (weft_mutex_t *m = t->held_locks; m; m = m->held_next) {
		/* Relaxed: its guard may have moved to another thread. */
		if (__atomic_load_n(&m->owner_task, __ATOMIC_RELAXED) != t->id)
			continue;
		n++;
#if WEFT_PROBE
		if (weft__probe_on()) {
			uint64_t now = weft__probe_clock();

			/* Its release says the rest (LOCK_HELD_END). */
			__atomic_store_n(&m->across_task, t->id | ACROSS_HEARD,
					 __ATOMIC_RELAXED);
			uint64_t held_ns = m->taken_at
				? weft__probe_clock_ns() - m->taken_at
				: 0;
			uint64_t held_us = held_ns / 1000;

			weft__probe_emit_at(now, WEFT_EV_LOCK_HELD_PENDING, t->id,
					    (uintptr_t)m->name,
					    held_us > UINT32_MAX ? UINT32_MAX
								 : (uint32_t)held_us);
			weft__probe_emit_at(now, WEFT_EV_LOCK_SITE, t->id,
					    (uintptr_t)m->file,
					    (uint32_t)m->line);
		}
#endif
	}
	return n;
}

#if WEFT_PROBE
/*
 * With nobody listening, task @t returned PENDING holding weft_mutex_t:
 * each such lock is marked, and its unlock raises the warning with the
 * real hold time (unheard_release()), straight into the probe's kept
 * warnings, which the next console gets.  (While someone listens, the
 * timed poll reports it, weft__probe_locks_at_pending().)
 */
void weft__mutex_pending_unheard(weft_task_t *t)
{
	for (weft_mutex_t *m = t->held_locks; m; m = m->held_next)
		if (__atomic_load_n(&m->owner_task, __ATOMIC_RELAXED) == t->id)
			__atomic_store_n(&m->across_task, t->id,
					 __ATOMIC_RELAXED);
}

/* The unlock of a lock held across an await, with nobody listening. */
static void unheard_release(weft_mutex_t *m, weft_task_t *t, uint32_t blocked)
{
	weft__task_info_t info = { .id = __atomic_load_n(&m->across_task,
							 __ATOMIC_RELAXED) &
					 ~ACROSS_HEARD };
	weft_worker_t *w = weft__cur_worker;
	uint64_t now = weft__probe_clock_ns();

	if (t && t->id == info.id) {
		info.name = t->rec->name;
		info.file = t->rec->file;
		info.line = t->rec->line;
	}
	/* Never waits for the probe's lock: busy, the warning is lost. */
	(void)weft__probe_unheard_lock_held(
		&info, w ? (uint16_t)w->index : WEFT_EVENT_NO_WORKER, m->name,
		m->file, m->line, now, now > m->taken_at ? now - m->taken_at : 0,
		blocked);
}
#endif
