/* SPDX-License-Identifier: MIT */
/*
 * Fiber tasks: a plain C function run as a task on its own stack, so that
 * code that waits reads as straight-line code:
 *
 *	static void *handler(void *arg)
 *	{
 *		weft_stream_t *s = arg;
 *		...
 *		if (weft_fiber_sleep(WEFT_MSEC(10)))
 *			return NULL;        // cancelled
 *		...
 *	}
 *
 *	weft_spawn_fiber(rt, "handler", handler, s, NULL);
 *
 * weft_await() polls any future from inside a fiber and suspends the fiber
 * (not the worker) while it is pending.  The console and the probe see a
 * fiber as an ordinary task: one poll per resumption.
 *
 * Stacks: default 64 KiB (weft_fiber_opts_t.stack_size), taken from a pool,
 * with a PROT_NONE guard page below each.  Overflowing a fiber's stack
 * kills the process with a message naming the fiber.
 *
 * Thread-local storage: a fiber may resume on a different worker thread
 * after any weft_await() (or any call that awaits).  Never keep the address
 * of a thread-local variable, or a value read from one (errno included),
 * across an await; read it again afterwards.
 *
 * Where it waits: weft_await() and the calls below that await record the
 * caller's file and line (they are macros over the functions of the same
 * name), so that a fiber parked in one shows that line as its task's
 * place (weft_site_t, weft/future.h); a future awaited with WEFT_AWAIT
 * inside shows its own, innermost, instead.  Calling the function itself,
 * (weft_await)(poll, state) or through a pointer, records no place.
 *
 * Cancellation: when a fiber task is aborted or the runtime shuts down, the
 * fiber is resumed once more and every weft_await() from then on returns
 * -ECANCELED at once; the function must then return (cleaning up as it
 * goes, like any error path).
 */
#ifndef WEFT_FIBER_H
#define WEFT_FIBER_H

#include "weft/common.h"
#include "weft/future.h"
#include "weft/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void *(*weft_fiber_fn)(void *arg);

/* Caller-filled and may grow (weft/common.h): reserved_ must be zero. */
typedef struct weft_fiber_opts_s {
	size_t stack_size; /* usable bytes; 0: 64 KiB; rounded up to pages */
	const char *name;
	const char *file; /* spawn location */
	int line;
	uint64_t reserved_[4]; /* zero (weft/common.h) */
} weft_fiber_opts_t;

#define WEFT_FIBER_STACK_DEFAULT (64u * 1024u)

/**
 * weft_spawn_fiber_with() - spawn @fn(@arg) as a fiber task.
 * @rt: the runtime, or NULL for the current one.
 * @opts: stack size, name and location (may be NULL).
 * @join: receives a join handle (the output is fn's return value), or NULL.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: 0; -EINVAL (no @fn, no runtime, or a reserved word not zero);
 * -ENOMEM (no memory or no stack); -ESHUTDOWN when @rt is shutting down.
 */
WEFT_EXTERN int weft_spawn_fiber_with(weft_runtime_t *rt,
				      const weft_fiber_opts_t *opts,
				      weft_fiber_fn fn, void *arg,
				      weft_join_t **join);

static inline int weft__spawn_fiber_at(weft_runtime_t *rt, const char *name,
				       weft_fiber_fn fn, void *arg,
				       const char *file, int line,
				       weft_join_t **join)
{
	weft_fiber_opts_t opts = { 0, name, file, line, { 0 } };

	return weft_spawn_fiber_with(rt, &opts, fn, arg, join);
}

/* Spawns with a name, recording the call's file and line (which line of
 * a call over several: see weft_spawn() in weft/runtime.h). */
#define weft_spawn_fiber(rt, task_name, fn, arg, join_out)                     \
	weft__spawn_fiber_at((rt), (task_name), (fn), (arg), __FILE__,        \
			     __LINE__, (join_out))

/**
 * weft_await() - run a future to completion from inside a fiber.
 * @poll: the future's poll function.
 * @state: the future's state.
 *
 * Outside a fiber, on a plain thread, this is weft_block_on() with the
 * current runtime.
 *
 * Context: a fiber, which it suspends (not the worker); a plain thread (not
 * a worker), which it blocks as weft_block_on() does; a task that is not a
 * fiber gets -EPERM.
 * Return: 0 once the future is READY; -ECANCELED when the fiber is being
 * cancelled (the future may not have finished: drop it); -EPERM when called
 * from a task that is not a fiber; on a plain thread, weft_block_on()'s
 * -EINVAL (NULL @poll) or -ENOMEM.
 */
WEFT_EXTERN int weft_await(weft_poll_cb poll, void *state);

/**
 * weft_in_fiber() - true when running on a fiber's stack.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: true on a fiber's stack, else false.
 */
WEFT_EXTERN bool weft_in_fiber(void);

/**
 * weft_fiber_yield() - let the worker's other tasks run, then continue.
 *
 * Context: as weft_await(); on a plain thread it returns at once.
 * Return: 0, -ECANCELED or -EPERM as weft_await().
 */
WEFT_EXTERN int weft_fiber_yield(void);

/**
 * weft_fiber_sleep() - sleep for @ns nanoseconds.
 *
 * Context: as weft_await(); on a plain thread it blocks for @ns and needs a
 * runtime current (without one the timer panics).
 * Return: 0, -ECANCELED or -EPERM as weft_await().
 */
WEFT_EXTERN int weft_fiber_sleep(uint64_t ns);

/**
 * weft_fiber_join() - await a task; the handle stays valid.
 * @status: receives the task's status (0 or -ECANCELED), may be NULL.
 * @out: receives its output, may be NULL.
 *
 * Context: as weft_await(); on a plain thread it blocks until the task
 * completes.
 * Return: 0, -ECANCELED or -EPERM as weft_await().
 */
WEFT_EXTERN int weft_fiber_join(weft_join_t *join, int *status, void **out);

/*
 * The awaiting calls, each with its caller's site, so that the tools
 * show where a fiber is parked (the _at forms are private: call the
 * names above).  The site goes as an argument, never through a
 * thread-local from the caller's code: a fiber may resume on another
 * thread.  Statement expressions, for the static site: without GNU C the
 * plain functions are called, and fibers show no place.
 */
WEFT_EXTERN int weft__fiber_await_at(const weft_site_t *site,
				     weft_poll_cb poll, void *state);
WEFT_EXTERN int weft__fiber_yield_at(const weft_site_t *site);
WEFT_EXTERN int weft__fiber_sleep_at(const weft_site_t *site, uint64_t ns);
WEFT_EXTERN int weft__fiber_join_at(const weft_site_t *site,
				    weft_join_t *join, int *status,
				    void **out);

#if defined(__GNUC__)
#define WEFT__FIBER_SITE                                                       \
	static const weft_site_t weft__site = { __FILE__, __LINE__ }
#define weft_await(poll, state)                                                \
	__extension__({                                                        \
		WEFT__FIBER_SITE;                                              \
		weft__fiber_await_at(&weft__site, (poll), (state));            \
	})
#define weft_fiber_yield()                                                     \
	__extension__({                                                        \
		WEFT__FIBER_SITE;                                              \
		weft__fiber_yield_at(&weft__site);                             \
	})
#define weft_fiber_sleep(ns)                                                   \
	__extension__({                                                        \
		WEFT__FIBER_SITE;                                              \
		weft__fiber_sleep_at(&weft__site, (ns));                       \
	})
#define weft_fiber_join(join, status, out)                                     \
	__extension__({                                                        \
		WEFT__FIBER_SITE;                                              \
		weft__fiber_join_at(&weft__site, (join), (status), (out));     \
	})
#endif

#ifdef __cplusplus
}
#endif

#endif /* WEFT_FIBER_H */
