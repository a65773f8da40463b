/* SPDX-License-Identifier: MIT */
/*
 * The async mutex: a semaphore of one permit (sync_semaphore.c), so it is
 * FIFO-fair, its uncontended lock and unlock are one CAS each, and
 * dropping a queued lock future passes a lock it was just handed to the
 * next in line.  Holding it across an await is what it is for: unlike a
 * blocking mutex, a task waiting for it returns PENDING and its worker
 * runs other tasks, including the holder.
 *
 * Ordering: unlock releases the permit with release semantics and lock
 * acquires it (fast path) or is handed it under the semaphore's lock
 * (slow path), so a critical section happens before the next one.
 */
#include "resource_internal.h"
#include "sync_internal.h"

void weft_async_mutex_init_at(weft_async_mutex_t *m, const char *file,
			      int line)
{
	/* One permit never exceeds the maximum. */
	(void)weft_semaphore_init_at(&m->sem, 1, file, line);
	m->holder = 0;
	/* Not yet shared: the probe sees a mutex, not a semaphore. */
	m->sem.res.kind = WEFT_RES_MUTEX;
}

/* The function behind the macro, for callers that take its address. */
void(weft_async_mutex_init)(weft_async_mutex_t *m)
{
	weft_async_mutex_init_at(m, NULL, 0);
}

void weft_async_mutex_name(weft_async_mutex_t *m, const char *name)
{
	weft__res_name(&m->sem.res, name);
}

void weft_async_mutex_fini(weft_async_mutex_t *m)
{
	weft_semaphore_fini(&m->sem);
}

bool weft_async_mutex_try_lock(weft_async_mutex_t *m)
{
	if (!weft_semaphore_try_acquire(&m->sem, 1))
		return false;
	weft__mutex_holder_set(&m->sem);
	return true;
}

void weft_async_mutex_unlock(weft_async_mutex_t *m)
{
	if (weft_semaphore_available(&m->sem) != 0)
		weft_panic("async mutex %p unlocked while not locked",
			   (void *)m);
#if WEFT_PROBE
	/* Before the release: weft__mutex_holder_set(). */
	__atomic_store_n(&m->holder, 0, __ATOMIC_RELAXED);
#endif
	weft_semaphore_release(&m->sem, 1);
}

void weft_async_mutex_lock_init(weft_async_mutex_lock_t *lk,
				weft_async_mutex_t *m)
{
	weft_semaphore_acquire_init(&lk->acq, &m->sem, 1);
}

weft_poll_t weft_async_mutex_lock_poll(weft_async_mutex_lock_t *lk,
				       weft_cx_t *cx)
{
	/* Never closed, so READY always means locked (and the semaphore
	 * set the holder: weft__mutex_holder_set()). */
	return weft_semaphore_acquire_poll(&lk->acq, cx);
}

void weft_async_mutex_lock_fini(weft_async_mutex_lock_t *lk)
{
	weft_semaphore_acquire_fini(&lk->acq);
}
