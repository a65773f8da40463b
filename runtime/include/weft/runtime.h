/* SPDX-License-Identifier: MIT */
/*
 * The runtime: N worker threads running tasks with work stealing, plus the
 * calls that spawn tasks, join them and run a future from a plain thread.
 *
 * A task owns one allocation holding its future's state inline.  Tasks are
 * spawned with a name and the source location of the spawn (captured by
 * the weft_spawn() macros), run on whichever worker picks them up, and may
 * move between workers whenever they return WEFT_PENDING.
 *
 * Threads: weft_spawn*() may be called from any thread; weft_block_on() and
 * weft_join_wait() only from threads that are not workers of a runtime.
 */
#ifndef WEFT_RUNTIME_H
#define WEFT_RUNTIME_H

#include "weft/common.h"
#include "weft/future.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_runtime_s weft_runtime_t;
typedef struct weft_join_s weft_join_t;

/*
 * Runtime configuration; zero fields take the defaults.  Caller-filled
 * and may grow (weft/common.h): fill it with a designated initialiser,
 * which zeroes reserved_.
 */
typedef struct weft_config_s {
	/* Worker threads.  Default: $WEFT_WORKERS, else the CPU count. */
	unsigned workers;
	/* Ticks between forced checks of the global queue.  Default 61. */
	unsigned global_queue_interval;
	/* Consecutive polls from the LIFO slot before it is demoted.  Default 3. */
	unsigned max_lifo_polls;
	/* Disable the LIFO slot altogether. */
	bool disable_lifo;
	/* Blocking pool threads at most (weft/blocking.h).  Default 512. */
	unsigned max_blocking_threads;
	/* How long an idle blocking pool thread waits for a job before it
	 * exits, in nanoseconds.  Default 10 s. */
	uint64_t blocking_keep_alive_ns;
	uint64_t reserved_[8]; /* zero (weft/common.h) */
} weft_config_t;

/**
 * weft_runtime_create() - start a runtime and its worker threads.
 * @config: the configuration, or NULL for the defaults.
 * @out: receives the runtime.
 *
 * Context: any thread but a probe subscriber's callback (-EDEADLK there:
 * it attaches to the probe); a task may call it (it starts threads, and
 * waits for nothing else).
 * The I/O backend is $WEFT_IO's: "auto" (unset or empty) is epoll while
 * the io_uring backend is slower (see the README); "epoll" forces epoll;
 * "uring" forces io_uring.
 *
 * Return: 0; -EINVAL for a bad configuration ($WEFT_WORKERS included, or
 * a reserved word not zero); -EOPNOTSUPP when $WEFT_IO is "uring" and
 * io_uring cannot be used (not built in, or refused by the kernel or its
 * seccomp policy; said in one line on stderr); -ENOMEM; -EAGAIN when a
 * thread cannot be started; -EDEADLK (from a probe subscriber's callback).
 */
WEFT_EXTERN int weft_runtime_create(const weft_config_t *config,
				    weft_runtime_t **out);

/**
 * weft_runtime_destroy() - shut down and free a runtime.
 * @rt: the runtime; NULL is ignored.
 *
 * First the blocking pool (weft/blocking.h) stops taking jobs (-ESHUTDOWN),
 * runs every job it has queued or running, and joins its threads.  Then it
 * stops the workers after their current poll, and cancels every task that
 * has not completed: each future's drop callback runs once, and tasks waiting
 * on a join handle see -ECANCELED.  Tasks not being polled are cancelled
 * first, while the workers finish their last polls, so a poll blocked on
 * something such a task holds (a lock its drop releases) is let go.
 * Spawning after this has begun fails with -ESHUTDOWN.  Must not be called
 * from a worker or a blocking job of @rt.
 *
 * It waits at most 5 s for the workers' last polls: past that it is
 * weft_runtime_destroy_timeout() giving up (below).
 *
 * Wakers and join handles of @rt's tasks stay usable from any thread,
 * during and after destroy (waking a task of a destroyed runtime does
 * nothing; dropping the last reference frees it).  Calls that take @rt
 * itself (spawn, block_on) must not race with or follow destroy.
 *
 * Context: any thread but a worker or a blocking-pool thread of @rt or a
 * probe subscriber's callback (each panics); it blocks until the pool's
 * jobs have run and the workers have
 * stopped (a worker of another runtime calling it blocks that worker).
 */
WEFT_EXTERN void weft_runtime_destroy(weft_runtime_t *rt);

/**
 * weft_runtime_destroy_timeout() - weft_runtime_destroy(), waiting at most
 * @timeout_ns for the workers' last polls.
 *
 * A worker still in a poll at the deadline (a blocking call that never
 * returns, an endless loop) is left behind: its thread is detached, one
 * line on stderr names it and the task it polls, and the runtime's memory
 * is kept for good (the poll may touch it when it returns; the worker then
 * exits).  The tasks that were cancelled stay cancelled; the rest, and the
 * driver's sockets and timers, are neither cancelled nor freed.
 *
 * Context: as weft_runtime_destroy(); it blocks for the pool's jobs without
 * a limit, then at most @timeout_ns for the workers.
 * Return: 0 (also for a NULL @rt); -ETIMEDOUT when a worker was left
 * behind.
 */
WEFT_EXTERN int weft_runtime_destroy_timeout(weft_runtime_t *rt,
					     uint64_t timeout_ns);

/**
 * weft_runtime_current() - the runtime whose worker (or block_on call) is
 * running on this thread.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the runtime of this thread's worker, weft_block_on() call or
 * blocking job, or NULL.
 */
WEFT_EXTERN weft_runtime_t *weft_runtime_current(void);

/**
 * weft_block_in_place() - run a blocking call from inside a poll.
 * @fn: the blocking call.
 * @arg: its argument.
 *
 * For a task that knows it is about to block its worker (a blocking
 * syscall, a library without an async API, a long computation) and cannot
 * move the work to the blocking pool (weft/blocking.h).  First the worker
 * hands on what it holds: the task in its LIFO slot and its local queue go
 * to the global queue, and a parked worker is woken to take them (and the
 * driver, if nobody turns it).  Then @fn(@arg) runs on this thread; tasks
 * it wakes or spawns go to the global queue, not behind the blocking call.
 * The runtime has one worker fewer until @fn returns.  Outside a task's
 * poll on a worker it just calls @fn(@arg).
 *
 * Without it, a worker stuck in one poll for more than the stall
 * threshold (WEFT_STALL_US, 1 ms) is found by the runtime's monitor, which
 * hands the same work on then: this call only spares that millisecond.
 *
 * Context: a task inside its poll on a worker (anywhere else it just calls
 * @fn); it blocks this thread for as long as @fn runs.
 */
WEFT_EXTERN void weft_block_in_place(void (*fn)(void *arg), void *arg);

/**
 * weft_runtime_workers() - the number of worker threads of @rt.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the worker count, fixed at weft_runtime_create().
 */
WEFT_EXTERN unsigned weft_runtime_workers(const weft_runtime_t *rt);

/*
 * What to spawn.  Fill with designated initialisers; see weft_spawn().
 * Caller-filled and may grow (weft/common.h): reserved_ must be zero.
 */
typedef struct weft_spawn_s {
	weft_poll_cb poll;     /* required */
	weft_drop_cb drop;     /* optional: releases what the state owns */
	const void *state;     /* copied into the task; NULL means zeroed */
	size_t size;           /* bytes of state */
	const char *name;      /* static string, or NULL */
	const char *file;      /* spawn location (static string) */
	int line;
	int kind;              /* 0 a future; 1 a fiber (weft_spawn_fiber) */
	uint64_t reserved_[4]; /* zero (weft/common.h) */
} weft_spawn_t;

/**
 * weft_spawn_with() - spawn a task.
 * @rt: the runtime, or NULL for weft_runtime_current().
 * @spec: the future; its state is copied into the task.
 * @join: receives a join handle, or NULL to detach the task.
 *
 * From a worker the task is queued on that worker (its LIFO slot); from any
 * other thread it goes to the global queue and a parked worker is woken.
 *
 * Context: any thread; a task may call it (never blocks); not racing with
 * or after weft_runtime_destroy() of @rt.
 * Return: 0; -EINVAL (no runtime, no poll function, a state larger than 4
 * GiB, or a reserved word not zero); -ENOMEM; -ESHUTDOWN when @rt is
 * shutting down.  On error nothing was spawned and the drop callback was
 * not called.
 */
WEFT_EXTERN int weft_spawn_with(weft_runtime_t *rt, const weft_spawn_t *spec,
				weft_join_t **join);

/*
 * The short forms.  Each copies *state_ptr (its size is taken from the
 * pointer's type) and records the call's file and line, as the tools
 * show them:
 *
 *	weft_spawn(rt, poll, state_ptr, join_out)
 *	weft_spawn_named(rt, name, poll, state_ptr, join_out)
 *	weft_spawn_drop(rt, name, poll, drop, state_ptr, join_out)
 *
 * weft_spawn_drop() takes the drop callback that releases what the state
 * owns (a timer, a lock, a buffer), run once when the task's state dies,
 * completed or cancelled.  For weft_spawn_with() itself, WEFT_HERE fills
 * in the location: &(weft_spawn_t){ .poll = p, ..., WEFT_HERE }.
 *
 * Which line a call spread over several lines records depends on the
 * compiler: GCC's __LINE__ there is the line of the macro's name, clang's
 * the line of its closing parenthesis.  Both are lines of the call; keep
 * the name and the closing parenthesis on one line where it matters.
 * The forms are functions underneath, so C++ may use them too.
 */
#define WEFT_HERE .file = __FILE__, .line = __LINE__

static inline int weft__spawn_at(weft_runtime_t *rt, const char *name,
				 weft_poll_cb poll, weft_drop_cb drop,
				 const void *state, size_t size,
				 const char *file, int line, weft_join_t **join)
{
	/* Every field, in order: C and C++ alike, no missing initialiser. */
	weft_spawn_t spec = {
		poll, drop, state, size, name, file, line, 0, { 0 },
	};

	return weft_spawn_with(rt, &spec, join);
}

#define weft_spawn(rt, poll_fn, state_ptr, join_out)                           \
	weft_spawn_named((rt), NULL, poll_fn, state_ptr, join_out)

#define weft_spawn_named(rt, task_name, poll_fn, state_ptr, join_out)          \
	weft__spawn_at((rt), (task_name), (poll_fn), NULL, (state_ptr),       \
		       sizeof(*(state_ptr)), __FILE__, __LINE__, (join_out))

#define weft_spawn_drop(rt, task_name, poll_fn, drop_fn, state_ptr, join_out)  \
	weft__spawn_at((rt), (task_name), (poll_fn), (drop_fn), (state_ptr),  \
		       sizeof(*(state_ptr)), __FILE__, __LINE__, (join_out))

/**
 * weft_join_poll() - await a task.
 * @join: the join handle.
 * @cx: the polling context.
 * @status: receives 0, or -ECANCELED when the task was aborted or cancelled
 * at shutdown (may be NULL).
 * @out: receives the task's output (weft_cx_return()) (may be NULL).
 *
 * The handle stays valid after READY; release it with weft_join_drop().
 *
 * Context: the task (or weft_block_on() future) that owns @join, inside its
 * poll; one poller at a time.
 * Return: WEFT_READY once the task has completed (*@status and *@out set),
 * else WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_join_poll(weft_join_t *join, weft_cx_t *cx,
				       int *status, void **out);

/**
 * weft_join_wait() - block the calling (non-worker) thread until the task
 * completes.
 * @join: the join handle; stays valid.
 * @out: receives the task's output (may be NULL).
 *
 * Context: any thread but a worker: it blocks until the task completes (a
 * task awaits weft_join_poll() instead).
 * Return: 0; -ECANCELED when the task was aborted or cancelled; -EDEADLK
 * when called from a worker thread; -ENOMEM (weft_block_on()'s).
 */
WEFT_EXTERN int weft_join_wait(weft_join_t *join, void **out);

/**
 * weft_join_is_finished() - true once the task has completed.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: true once the task has completed or was cancelled.
 */
WEFT_EXTERN bool weft_join_is_finished(const weft_join_t *join);

/**
 * weft_join_abort() - cancel the task.
 *
 * A task that is not running is cancelled by the next worker that picks it
 * up; a running task is cancelled after its current poll.  A completed task
 * is unaffected.  Cancelling runs the future's drop callback.
 *
 * Context: any thread; a task may call it (never blocks: the drop callback
 * runs later, on a worker).
 */
WEFT_EXTERN void weft_join_abort(weft_join_t *join);

/**
 * weft_join_id() - the task's id (unique within the process).
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the task's id.
 */
WEFT_EXTERN uint64_t weft_join_id(const weft_join_t *join);

/**
 * weft_join_drop() - release the handle; the task goes on, detached.
 * @join: the handle; NULL is ignored (a zeroed state's handle).
 *
 * Safe on a zeroed future (NULL) and after READY, and required then too.
 * Once only: it releases the handle.
 *
 * Context: any thread, by the handle's owner, not during a poll of @join; a
 * task may call it (never blocks).
 */
WEFT_EXTERN void weft_join_drop(weft_join_t *join);

/**
 * weft_join_all() - await several tasks in order, releasing each handle.
 * @joins: the handles; each is released and set to NULL once complete.
 * @n: the number of handles.
 * @outs: receives each task's output (may be NULL).
 * @cursor: progress, zero before the first call.
 * @cx: the polling context.
 *
 * Context: the task (or weft_block_on() future) that owns @joins, inside
 * its poll.
 * Return: WEFT_READY once every task has completed (outputs in @outs), else
 * WEFT_PENDING.
 */
WEFT_EXTERN weft_poll_t weft_join_all(weft_join_t **joins, size_t n,
				      void **outs, size_t *cursor,
				      weft_cx_t *cx);

/**
 * weft_block_on() - run a future to completion on the calling thread.
 * @rt: the runtime to make current meanwhile (spawns go to it); may be NULL.
 * @poll: the future's poll function.
 * @state: the future's state (caller-owned; not copied).
 * @out: receives the value passed to weft_cx_return() (may be NULL).
 *
 * The thread sleeps while the future is pending.
 *
 * Context: any thread but a worker (-EDEADLK): it blocks the thread until
 * the future is READY; a blocking job may call it.
 * Return: 0; -EINVAL for a NULL @poll; -EDEADLK when called from a worker
 * thread; -ENOMEM.
 */
WEFT_EXTERN int weft_block_on(weft_runtime_t *rt, weft_poll_cb poll,
			      void *state, void **out);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_RUNTIME_H */
