/* SPDX-License-Identifier: MIT */
/*
 * weft_mutex_t: a blocking mutex (a futex word of its own) that the probe
 * watches.  Each lock records where it was taken and by which task; when a
 * task's poll returns PENDING (or a fiber suspends) while the task holds
 * one, the probe raises "lock held across await" naming the lock, where it
 * was taken, the task and how long it has been held.
 *
 * This is the C form of holding a std::sync::MutexGuard across .await in
 * Rust: the worker goes on to run other tasks while the lock stays taken,
 * so any of them that wants it blocks the worker thread (or deadlocks).
 * Hold a weft_mutex_t only for short critical sections that do not await;
 * to hold a lock across an await, use the async mutex (sync_async.h).
 *
 * Unlike a pthread mutex it may be unlocked by any thread: a task that
 * held one across an await resumes, and unlocks, on whichever worker
 * polls it next.  That mistake is made slow (others block on the lock
 * meanwhile) and visible (the warning), never undefined.
 */
#ifndef WEFT_MUTEX_H
#define WEFT_MUTEX_H

#include "weft/common.h"
#include "weft/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_mutex_s {
	/* private: 0 free, 1 taken, 2 taken and maybe waited for; an
	 * atomic word (plain here so that C++ can include the header) */
	uint32_t state;
	const char *name;               /* private: static string */
	const char *file;               /* private: where last taken */
	int line;                       /* private */
	/* private: threads that began to block on it during this hold
	 * (about: counted only while the probe is compiled in); atomic */
	uint32_t blocked;
	uint64_t owner_task;            /* private */
	uint64_t taken_at;              /* private: probe clock */
	struct weft_mutex_s *held_next; /* private: the thread's held list */
	/* private: held across an await by this task (its top bit: the
	 * probe heard it, LOCK_HELD_PENDING) */
	uint64_t across_task;
	/* private: the probe's resource (SYNC_MUTEX): its holders and
	 * waiters while someone listens, as the async primitives' */
	weft_resource_t res;
} weft_mutex_t;

/* The resource kind of a weft_mutex_t (WEFT_RES_SYNC_MUTEX, checked in
 * mutex.c): this header does not include the probe's. */
#define WEFT__MUTEX_RES_KIND 10

/*
 * WEFT_MUTEX_INITIALIZER() - a weft_mutex_t ready to use, named @nm (a
 * static string, or NULL), as weft_mutex_init() makes it:
 *
 *	static weft_mutex_t stats_mu = WEFT_MUTEX_INITIALIZER("stats");
 *
 * A zeroed one (a static never initialised) works too, unnamed.
 */
#define WEFT_MUTEX_INITIALIZER(nm)                                             \
	{                                                                      \
		.name = (nm),                                                  \
		.res = {.name = (nm),                                          \
			.kind = WEFT__MUTEX_RES_KIND }                         \
	}

/**
 * weft_mutex_init() - @name is a static string shown by the tools.
 *
 * Context: any thread, before the mutex is shared; a task may call it
 * (never blocks).
 */
WEFT_EXTERN void weft_mutex_init(weft_mutex_t *m, const char *name);

/**
 * weft_mutex_fini() - destroy an unlocked mutex.
 *
 * Context: any thread, once nobody holds or waits for it (not checked: it
 * frees nothing); a task may call it (never blocks).
 */
WEFT_EXTERN void weft_mutex_fini(weft_mutex_t *m);

/**
 * weft_mutex_lock_at() - lock, recording @file and @line.
 *
 * Context: any thread; a task may call it, but a contended lock blocks the
 * worker thread (a futex wait), and holding it across an await raises the
 * probe's warning; not recursive.
 */
WEFT_EXTERN void weft_mutex_lock_at(weft_mutex_t *m, const char *file,
				    int line);

/**
 * weft_mutex_trylock_at() - true if taken.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: true if the caller now holds @m, false if it was taken.
 */
WEFT_EXTERN bool weft_mutex_trylock_at(weft_mutex_t *m, const char *file,
				       int line);

/**
 * weft_mutex_unlock() - unlock, from any thread (see above).
 *
 * Context: any thread (not only the locker's); a task may call it (never
 * blocks).  Unlocking a mutex that is not locked is a bug: it panics
 * (abort, with the mutex's name on stderr) when it finds the mutex
 * unlocked; a second unlock after another holder took it releases that
 * holder's lock, unseen.
 */
WEFT_EXTERN void weft_mutex_unlock(weft_mutex_t *m);

#define weft_mutex_lock(m) weft_mutex_lock_at((m), __FILE__, __LINE__)
#define weft_mutex_trylock(m) weft_mutex_trylock_at((m), __FILE__, __LINE__)

#ifdef __cplusplus
}
#endif

#endif /* WEFT_MUTEX_H */
