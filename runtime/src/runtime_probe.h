/* SPDX-License-Identifier: MIT */
/*
 * What the runtime offers the probe's collector, and all the collector
 * reads of a runtime beside the public weft_runtime_metrics() and
 * weft_worker_metrics(): a walk of a runtime's live tasks, each worker's
 * poll in progress, and a restart of the workers' loops when the probe's
 * listening changes.  The collector includes this header, never
 * runtime_internal.h: the runtime's structs stay the runtime's own, and it
 * may change them without the probe's files noticing.
 */
#ifndef WEFT_RUNTIME_PROBE_H
#define WEFT_RUNTIME_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "weft/weft.h"

#include "atomic_internal.h"

/* What the probe learns of a live task when it starts listening late. */
typedef struct weft__task_info_s {
	uint64_t id;
	const char *name;
	const char *file;
	int line;
	uint32_t state_size;
	uint8_t kind;
	/*
	 * Where it is parked (weft__task_parked_at()): the await's file and
	 * line as its last PENDING poll left them; NULL and 0 when not known
	 * (never parked, or a poll written by hand).  Read here as well as
	 * from the events (a POLL's await site, or PARKED_AT), because a
	 * task that parked before anyone listened never says so again.
	 */
	const char *parked_file;
	int parked_line;
	/*
	 * Idle, and no waker of it left: nothing but the owned list (and
	 * its join handle) holds a reference, so nothing can wake it, ever
	 * (a waker is a counted reference: every one the runtime stores is
	 * a clone).  Read from the one state word, so a consistent view.
	 */
	bool no_waker;
	/*
	 * Pending and not queued, running, done or being cancelled: parked
	 * until a wake, when read (the same word).  The probe corrects a
	 * record left queued or running by a poll it did not hear (dropped,
	 * or in a gap in listening).
	 */
	bool idle;
	/*
	 * Woken and not yet polled: queued for a worker (not running,
	 * done or being cancelled), when read (the same word).  A record
	 * made from the list is scheduled, not idle (an audit: a task
	 * starved behind two blocked workers showed "idle" to a console
	 * that attached after its wake).
	 */
	bool queued;
} weft__task_info_t;

/*
 * A runtime's live tasks, a shard at a time (ids modulo the shard count):
 * shard @shard's tasks into @out, returning how many were written; or,
 * when the shard holds more than @cap, how many it holds, nothing
 * written (grow and call again).  The shard is walked under its lock in
 * parts, the lock let go between them (owned.c): the walk copies every
 * task on the list when it began that is still on it when reached, once,
 * and none inserted since.  A task is on the list from before its first
 * event until before its COMPLETE (task.c), so one whose events were
 * taken before the walk began is either copied or has completed.
 */
#define WEFT__TASK_SHARDS 64u
size_t weft__runtime_tasks(weft_runtime_t *rt, unsigned shard,
			   weft__task_info_t *out, size_t cap);

/*
 * Worker @i's poll in progress, published while the probe listens: the
 * task's id (0 between polls) and the poll's start (probe clock ticks).
 * Relaxed loads: a hint, the two read apart (a task with the previous
 * poll's start is at worst one warning's time off; the caller rechecks).
 */
void weft__runtime_worker_poll(weft_runtime_t *rt, unsigned i, uint64_t *task,
			       uint64_t *started);

/*
 * Worker @i's poll in progress that began while nobody listened (no POLL
 * event will end it), once the runtime monitor has seen it run past the
 * long-poll threshold: its task's id and when the monitor first saw it
 * (weft_now_ns(), a lower bound of its length).  False if there is none
 * (or the worker has moved on since).
 */
bool weft__runtime_worker_unheard(weft_runtime_t *rt, unsigned i,
				  uint64_t *task, uint64_t *since_ns);

/*
 * Where one long poll's time went, as the runtime monitor read the
 * worker thread's CPU clock and schedstat (monitor.c) over a stretch of
 * it: on a CPU, waiting for one (runnable, the OS ran something else),
 * and the rest asleep in the kernel (a blocking call).  @start: the
 * poll's start in probe clock ticks (w->probe_poll_start when first
 * read; 0 if the probe was off), to match it to its POLL event.
 */
typedef struct weft__poll_split_s {
	uint64_t start;
	uint64_t from_ns, to_ns; /* the stretch read (weft_now_ns()) */
	uint64_t cpu_ns;         /* on a CPU, within it */
	uint64_t wait_ns;        /* waiting for a CPU, within it */
} weft__poll_split_t;

/* Long polls a worker keeps the split of: the collector may come to a
 * poll's event after the worker has run a few more. */
#define WEFT__POLL_SPLITS 8

/*
 * Worker @i's last long polls' splits, newest first, published by the
 * monitor (a seqlock: a consistent copy).  Return: how many (0 before
 * any, where /proc cannot be read, or while a write goes on).
 */
unsigned weft__runtime_poll_splits(weft_runtime_t *rt, unsigned i,
				   weft__poll_split_t out[WEFT__POLL_SPLITS]);

/*
 * Worker @i's thread id (gettid()), 0 until its thread runs: the
 * collector reads the thread's /proc schedstat by it (off-CPU time).
 */
int32_t weft__runtime_worker_tid(weft_runtime_t *rt, unsigned i);

/*
 * When worker @i's thread was made (weft_now_ns(), taken just before):
 * its schedstat reads zero there, a sample before its first poll.
 */
uint64_t weft__runtime_worker_born(weft_runtime_t *rt, unsigned i);

/*
 * The blocking pool's lock as weft__runtime_worker_lock_waiting() names
 * it: a lock of the runtime's own, told by this pointer.  A task's poll
 * waiting for it is not blocked by the task (blocking.c).
 */
extern const char weft__pool_lock_name[];

/*
 * The name of the weft_mutex_t worker @i's thread blocks on now ("?" for
 * one without a name; weft__pool_lock_name for the runtime's), NULL when
 * none; *@since_ns: since when (CLOCK_MONOTONIC ns).
 */
const char *weft__runtime_worker_lock_waiting(weft_runtime_t *rt, unsigned i,
					      uint64_t *since_ns);

/*
 * Worker @i's thread CPU clock (a clockid_t, negative), 0 until its
 * thread runs or if it has none.
 */
int32_t weft__runtime_worker_cpu_clock(weft_runtime_t *rt, unsigned i);

/*
 * A task's wait for a lock that the probe did not hear begin: one that
 * began before this listening period (lock_wait.c).  @holder: the lock's
 * holder when read (0: none, or a plain thread); @since_ns: when the wait
 * began (weft_now_ns()); the rest names the lock as its RES_NEW and
 * RES_NAME would.
 */
typedef struct weft__lock_wait_info_s {
	uint64_t task;
	uint64_t res; /* the lock's resource id */
	uint64_t holder;
	/* When it took the lock (weft_now_ns()), 0 if not known (an async
	 * mutex keeps no clock on its fast path). */
	uint64_t holder_since_ns;
	/* The holder returned PENDING holding it (a weft_mutex_t held
	 * across an await), unheard: nobody listened then. */
	bool holder_across;
	uint64_t since_ns;
	const char *name;
	const char *file;
	uint32_t line;
	uint8_t kind; /* WEFT_RES_MUTEX or WEFT_RES_SYNC_MUTEX */
	uint8_t op;
} weft__lock_wait_info_t;

/*
 * Runtime @rt's tasks waiting for a lock whose RES_WAIT listening
 * generation @gen did not hear, in slot shard @shard, into @out when they
 * fit in @cap (each then adopted: its end emits RES_WAIT_END), and in any
 * case how many (more than @cap: nothing written, nothing adopted).
 *
 * A wait read here is live when read; one whose end is not adopted ended
 * before.  A holder read here whose release was folded in already is not
 * read (its store of 0 comes before its RES_RELEASE's push, which the
 * collector took with acquire); one whose release is still to come is
 * released by it.  So the caller folds these in before its next snapshot
 * of the rings.
 */
#define WEFT__LOCK_WAIT_SHARDS 8u
size_t weft__runtime_lock_waits(weft_runtime_t *rt, unsigned shard,
				uint32_t gen, weft__lock_wait_info_t *out,
				size_t cap);

/* The id of the task being polled on this thread, 0 if none (worker.c). */
extern WEFT_TLS uint64_t weft__cur_task_id;

/*
 * Makes every worker's loop look again at what it runs in (runtime.c): the
 * probe calls it when its listening changes, so the loops switch between
 * timing their polls and not.
 */
void weft__loop_restart(void);

#endif
