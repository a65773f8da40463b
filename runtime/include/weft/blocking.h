/* SPDX-License-Identifier: MIT */
/*
 * The blocking pool: run a plain C function that blocks (a file read, a
 * DNS lookup, a compression pass) on threads of its own, never on a
 * worker, and await its result from a task.
 *
 * Each runtime has one pool.  Its threads start on demand, up to
 * weft_config_t.max_blocking_threads (default 512); a thread with nothing
 * to do waits weft_config_t.blocking_keep_alive_ns (default 10 s) for a
 * new job and then exits.  Jobs wait in one FIFO queue when every thread
 * is busy and the maximum is reached.
 *
 * Every accepted job runs exactly once, to completion: dropping its handle
 * does not cancel it (the job goes on, detached, like weft_join_drop()),
 * and weft_runtime_destroy() runs the jobs still queued before it joins
 * the pool's threads.  So @arg is always handed to @fn, and @fn may own
 * it.  A result nobody takes (the handle was dropped first) is passed to
 * the spec's discard callback, if any.
 *
 * Jobs run with the runtime current (weft_runtime_current()), so they may
 * spawn tasks and, being on plain threads, call weft_block_on() or
 * weft_blocking_wait() (beware: waiting for a job queued behind the caller
 * deadlocks once every pool thread waits so).
 */
#ifndef WEFT_BLOCKING_H
#define WEFT_BLOCKING_H

#include "weft/common.h"
#include "weft/future.h"
#include "weft/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A blocking job's function; its return value is the job's result. */
typedef void *(*weft_blocking_cb)(void *arg);
/* Frees a result that no handle took (see weft_blocking_spec_t). */
typedef void (*weft_blocking_discard_cb)(void *result);

/* A handle on one blocking job: awaitable, then dropped.  Opaque. */
typedef struct weft_blocking_s weft_blocking_t;

/*
 * What to run.  Fill with designated initialisers.  Caller-filled and may
 * grow (weft/common.h): reserved_ must be zero.
 */
typedef struct weft_blocking_spec_s {
	weft_blocking_cb fn;              /* required */
	void *arg;                        /* passed to @fn */
	weft_blocking_discard_cb discard; /* optional: result nobody took */
	const char *name;                 /* static string, or NULL */
	const char *file;                 /* where submitted (WEFT_HERE) */
	int line;
	uint64_t reserved_[4]; /* zero (weft/common.h) */
} weft_blocking_spec_t;

/**
 * weft_spawn_blocking_with() - queue a job on the blocking pool.
 * @rt: the runtime, or NULL for weft_runtime_current().
 * @spec: the job.
 * @out: receives the handle, or NULL to detach the job at once.
 *
 * Never blocks on the job: it is queued, an idle pool thread is signalled
 * or a new one started (the caller pays for pthread_create(), tens of
 * microseconds), and the call returns.  Safe from tasks, plain threads
 * and pool threads.
 *
 * Context: any thread (a task, a plain thread, a pool job); a task may call
 * it: it never waits for the job (it may start a pool thread).
 * Return: 0; -EINVAL (no runtime, no function, or a reserved word not
 * zero); -ENOMEM; -EAGAIN when the pool has no thread and cannot start one; -ESHUTDOWN once
 * weft_runtime_destroy() has begun.  On error nothing was queued and
 * neither callback will run.
 */
WEFT_EXTERN int weft_spawn_blocking_with(weft_runtime_t *rt,
					 const weft_blocking_spec_t *spec,
					 weft_blocking_t **out);

/**
 * weft_spawn_blocking() - queue @fn(@arg) on the blocking pool.
 * @rt: the runtime, or NULL for weft_runtime_current().
 * @fn: the function.
 * @arg: its argument.
 * @out: receives the handle, or NULL to detach the job.
 *
 * weft_spawn_blocking_with() with no discard callback and no name.
 *
 * Context: as weft_spawn_blocking_with(): any thread; a task may call it.
 * Return: as weft_spawn_blocking_with().
 */
WEFT_EXTERN int weft_spawn_blocking(weft_runtime_t *rt, weft_blocking_cb fn,
				    void *arg, weft_blocking_t **out);

/*
 * The short forms record the call's file and line, as weft_spawn() does,
 * and the named one a name (a static string): the console and the
 * blocking-queue warning say whose jobs fill the pool by them.
 *
 *	weft_spawn_blocking(rt, fn, arg, out)
 *	weft_spawn_blocking_named(rt, name, fn, arg, out)
 */
static inline int weft__spawn_blocking_at(weft_runtime_t *rt, const char *name,
					  weft_blocking_cb fn, void *arg,
					  const char *file, int line,
					  weft_blocking_t **out)
{
	/* Every field, in order: C and C++ alike. */
	weft_blocking_spec_t spec = { fn, arg, NULL, name, file, line, { 0 } };

	return weft_spawn_blocking_with(rt, &spec, out);
}

#define weft_spawn_blocking(rt, fn, arg, out)                                  \
	weft__spawn_blocking_at((rt), NULL, (fn), (arg), __FILE__, __LINE__,  \
				(out))
#define weft_spawn_blocking_named(rt, name, fn, arg, out)                      \
	weft__spawn_blocking_at((rt), (name), (fn), (arg), __FILE__,          \
				__LINE__, (out))

/**
 * weft_blocking_poll() - await the job's result.
 * @h: the handle.
 * @cx: the polling context.
 * @result: receives what the job's function returned (may be NULL).
 *
 * Once READY the result belongs to the caller (the discard callback will
 * not see it) and polling again is READY with the same value.
 *
 * Context: the task (or weft_block_on() future) that owns @h, inside its
 * poll; one poller at a time.
 * Return: WEFT_READY once the job has run, else WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_blocking_poll(weft_blocking_t *h, weft_cx_t *cx,
					   void **result);

/**
 * weft_blocking_wait() - block the calling (non-worker) thread until the
 * job has run.
 * @h: the handle; stays valid.
 * @result: receives the job's result (may be NULL).
 *
 * Context: any thread but a worker: it blocks until the job has run (a task
 * awaits weft_blocking_poll() instead); a pool job may call it (see the
 * file comment on deadlock).
 * Return: 0; -EDEADLK when called from a worker thread; -ENOMEM.
 */
WEFT_EXTERN int weft_blocking_wait(weft_blocking_t *h, void **result);

/**
 * weft_blocking_is_finished() - true once the job has run.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: true once the job has run (acquire: its result may then be
 * taken).
 */
WEFT_EXTERN bool weft_blocking_is_finished(const weft_blocking_t *h);

/**
 * weft_blocking_drop() - release the handle.
 * @h: the handle; NULL is ignored (a zeroed state's handle).
 *
 * A job that has not run yet still runs (queued or running, it is not
 * cancelled); its result then goes to the discard callback.  Everything
 * the pool allocated for the job is freed once both it and the handle are
 * done.  Safe on a zeroed future (NULL) and after READY, and required
 * then too.  Once only: it releases the handle.
 *
 * Context: any thread, by the handle's owner, not during a poll of @h; a
 * task may call it (never blocks).
 */
WEFT_EXTERN void weft_blocking_drop(weft_blocking_t *h);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_BLOCKING_H */
