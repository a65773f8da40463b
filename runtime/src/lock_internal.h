/* SPDX-License-Identifier: MIT */
/*
 * The runtime's own short locks: the owned list's shards, the global
 * queue's consumers, the idle list.  A futex word (Drepper's "mutex 2",
 * as Rust's standard mutex): 0 free, 1 held, 2 held and maybe waited
 * for.  Taking a free lock is one CAS and releasing it one exchange,
 * where a glibc mutex costs ~50 instructions each way (its type, owner
 * and robust-list checks: counted with callgrind, a quarter of a local
 * spawn-and-run).  Contended, it spins a little, then sleeps on the
 * futex, so that a holder the OS preempted does not burn the other CPU.
 * Not recursive, no owner, no error checks: for critical sections that
 * call nothing that takes another lock or blocks (a few lines, or a walk
 * of one owned-list shard by the probe).  Under ThreadSanitizer each is
 * annotated as a mutex, so that lock-order inversions, double locks and
 * unlocks of a free lock are still reported.
 */
#ifndef WEFT_LOCK_INTERNAL_H
#define WEFT_LOCK_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "atomic_internal.h"

#if defined(WEFT_TSAN)
#include <sanitizer/tsan_interface.h>
#define lock_tsan(call) call
#else
#define lock_tsan(call) ((void)0)
#endif

typedef struct weft__lock_s {
	_Atomic uint32_t state;
} weft__lock_t;

#define WEFT__LOCK_INIT                                                        \
	{                                                                      \
		0                                                              \
	}

void weft__lock_slow(weft__lock_t *l);
void weft__lock_wake(weft__lock_t *l);

static inline void weft__lock_init(weft__lock_t *l)
{
	store_relaxed(&l->state, 0);
	lock_tsan(__tsan_mutex_create(l, 0));
}

static inline void weft__lock(weft__lock_t *l)
{
	uint32_t z = 0;

	lock_tsan(__tsan_mutex_pre_lock(l, 0));
	/*
	 * Acquire: what the last holder wrote before its release exchange
	 * (weft__unlock()) is seen in the critical section.
	 */
	if (!__builtin_expect(atomic_compare_exchange_weak_explicit(
				      &l->state, &z, 1, memory_order_acquire,
				      memory_order_relaxed),
			      1))
		weft__lock_slow(l);
	lock_tsan(__tsan_mutex_post_lock(l, 0, 0));
}

/*
 * Releases @l, and says whether it woke a waiter (or may have: 2, which
 * a waiter woken before takes the lock as, with nobody asleep).
 */
static inline bool weft__unlock_woke(weft__lock_t *l)
{
	/*
	 * Release: the critical section's writes before the lock is free.
	 * 2: someone may sleep on the futex; wake one.
	 */
	uint32_t was;

	lock_tsan(__tsan_mutex_pre_unlock(l, 0));
	was = atomic_exchange_explicit(&l->state, 0, memory_order_release);
	lock_tsan(__tsan_mutex_post_unlock(l, 0));
	if (was == 2)
		weft__lock_wake(l);
	return was == 2;
}

static inline void weft__unlock(weft__lock_t *l)
{
	(void)weft__unlock_woke(l);
}

#endif /* WEFT_LOCK_INTERNAL_H */
