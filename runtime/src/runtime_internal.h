/* SPDX-License-Identifier: MIT */
/*
 * The runtime's internal map: every structure shared between the runtime's
 * source files, and their cross-file functions grouped by the file that
 * defines them.
 *
 * Ownership in one paragraph: a task is owned by its references (the
 * runtime's owned list, a queued notification or a running worker, the join
 * handle, and each waker).  The state word says who may touch what: only the
 * worker that set RUNNING polls the future; only the join handle writes the
 * join waker while JOIN_WAKER is clear; the output and status are written
 * before COMPLETE is published and read after it is observed.
 */
#ifndef WEFT_RUNTIME_INTERNAL_H
#define WEFT_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "weft/weft.h"

#include "atomic_internal.h"
#include "lock_internal.h"
#include "blocking_internal.h"
#include "driver_internal.h"
#include "probe_internal.h"
#include "runtime_probe.h"

typedef struct weft_task_s weft_task_t;
typedef struct weft_worker_s weft_worker_t;

/* ------------------------------------------------------------------ task */

/*
 * The task state word.
 *
 *   RUNNING       a worker is polling the future (it holds one reference)
 *   COMPLETE      the future finished or was cancelled; never polled again
 *   NOTIFIED      a wake-up is pending: the task is, or is about to be, in
 *                 a run queue (holding one reference), or, if RUNNING, it
 *                 will be queued again when the poll returns PENDING
 *   CANCELLED     abort requested; the next worker to run it cancels it
 *   JOIN_INTEREST a join handle exists
 *   JOIN_WAKER    the join waker field is set and belongs to the completer;
 *                 while clear, only the join handle may write that field
 *   OUTPUT_KEPT   a poll that returned PENDING set an output, kept aside
 *                 (task.c) until completion; set by the polling worker,
 *                 never cleared
 *   refs          the reference count, in the bits above REF_SHIFT
 *
 * Transitions (all by CAS or fetch-op on the word, acq_rel):
 *   spawn            -> NOTIFIED | JOIN_INTEREST? , refs = 2 (+1 with join)
 *   to_running       NOTIFIED, !RUNNING, !COMPLETE -> RUNNING; the queue's
 *                    reference becomes the running one.  RUNNING or COMPLETE
 *                    instead: drop the queue's reference.
 *   to_idle          RUNNING -> !RUNNING; if NOTIFIED the running reference
 *                    becomes the queue's (requeued, as a yield); else dropped.
 *                    CANCELLED instead: cancel now.
 *   to_complete      RUNNING -> COMPLETE; wake the join waker if set.
 *   notify_by_ref    idle -> NOTIFIED, +1 ref, submit; RUNNING -> NOTIFIED;
 *                    NOTIFIED or COMPLETE: nothing (a no-op wake).
 *   notify_by_val    the same but consumes the waker's reference.
 *   notify_cancel    like notify_by_ref, also setting CANCELLED.
 */
#define TASK_RUNNING ((uint64_t)1 << 0)
#define TASK_COMPLETE ((uint64_t)1 << 1)
#define TASK_NOTIFIED ((uint64_t)1 << 2)
#define TASK_CANCELLED ((uint64_t)1 << 3)
#define TASK_JOIN_INTEREST ((uint64_t)1 << 4)
#define TASK_JOIN_WAKER ((uint64_t)1 << 5)
#define TASK_OUTPUT_KEPT ((uint64_t)1 << 6)
#define TASK_REF_SHIFT 7
#define TASK_REF_ONE ((uint64_t)1 << TASK_REF_SHIFT)
#define TASK_REF_MASK (~(TASK_REF_ONE - 1))

static inline uint64_t task_refs(uint64_t s)
{
	return s >> TASK_REF_SHIFT;
}

/*
 * What every task spawned with the same spec shares, Rust's vtable in C:
 * the runtime, the future's functions, its name and spawn location, its
 * kind and state size, and the allocation class its block came from.
 * Interned by spawn_rec.c (one record per distinct spec, never freed,
 * immutable once published), so a task carries one pointer instead of
 * seven fields; when the table is full, the record sits at the end of
 * the task's own block instead.
 */
typedef struct weft__spawn_rec_s {
	weft_runtime_t *rt;
	weft_poll_cb poll;
	weft_drop_cb drop;
	const char *name;
	const char *file;
	int line;
	uint32_t state_size;
	uint8_t kind;        /* weft_spawn_t.kind, for the probe */
	uint8_t alloc_class; /* task_alloc.c */
	/*
	 * Its spawn site's id for the probe (SPAWN a2, SITE): its index in
	 * the table + 1, never reused; 0 for a record in a task's block,
	 * whose spawns name and locate themselves (SPAWN_INFO, SPAWN_LOC).
	 */
	uint16_t site;
} weft__spawn_rec_t;

/*
 * 80 bytes: the ten words below, no padding (the future starts 16-byte
 * aligned).  Where two fields share a word they are never live together:
 * the owned-list links die when the task leaves the list (under the
 * shard's lock, before COMPLETE is published), and only then are the
 * output and status written (task.c: task_run(), the cancel paths).
 */
struct weft_task_s {
	/* Hot: touched by every transition. */
	_Atomic uint64_t state;
	/* Link in the global queue or a batch; owned by whoever holds it. */
	weft_task_t *queue_next;
	/* Immutable: the spec's shared part (spawn_rec.c). */
	const weft__spawn_rec_t *rec;
	uint64_t id;
	/*
	 * Owned list links, guarded by the shard's lock, while the task is
	 * on the list; then the output and status, for the join handle:
	 * written before COMPLETE is published, read after it is observed.
	 */
	union {
		weft_task_t *owned_prev;
		void *output;
	};
	union {
		weft_task_t *owned_next;
		int status;
	};
	/* Join: see JOIN_WAKER above. */
	weft_waker_t join_waker;
	/* weft_mutex_t this task holds (mutex.c); its running thread only. */
	struct weft_mutex_s *held_locks;
	/*
	 * Where the task last returned PENDING (weft/future.h), NULL if
	 * not known.  Written by the polling worker before to_idle, read
	 * by any thread: see task_run().
	 */
	_Atomic(const weft_site_t *) parked_at;
	_Alignas(16) unsigned char future[];
};

/* The runtime @t was spawned on. */
static inline weft_runtime_t *weft__task_rt(const weft_task_t *t)
{
	return t->rec->rt;
}

/* Where @t is parked (its last PENDING), NULL if not known; a hint. */
static inline const weft_site_t *weft__task_parked_at(weft_task_t *t)
{
	/* Relaxed: names a static; see task_run(). */
	return load_relaxed(&t->parked_at);
}

/* The context of one poll. */
struct weft_cx_s {
	weft_waker_t waker;
	weft_task_t *task; /* NULL under block_on */
	/*
	 * weft_cx_return()'s value: block_on's output, or a task's, which
	 * task_run() moves into the task once it is off the owned list
	 * (the two share a word), or keeps aside meanwhile (task.c).
	 * returned: weft_cx_return() was called in this poll.
	 */
	void *output;
	bool returned;
	/*
	 * A task's poll: non-zero once the poll called weft_cx_yield(), for
	 * the probe's record of the poll.  A store in the yield, where a
	 * probe site would be a compare and a branch.
	 */
	uintptr_t yielded;
};

/* What a notify transition asks the caller to do. */
enum task_action {
	TASK_ACTION_NONE,
	TASK_ACTION_SUBMIT,
	TASK_ACTION_DEALLOC,
};

/* task.c */
extern const weft_waker_vtable_t weft__task_waker_vtable;
void weft__task_run(weft_worker_t *w, weft_task_t *t);
/* The same without the probe's poll site, for a worker's quiet loop. */
void weft__task_run_quiet(weft_worker_t *w, weft_task_t *t);
/*
 * Bumped (release) when a worker's loop must look again at what it runs
 * in: the probe's listening changed, or a runtime shuts down.  A probe
 * build's worker loop reads it each turn instead of its runtime's
 * shutdown flag (see worker_loop()).
 */
struct weft__loop_epoch_s {
	weft__cacheline_aligned _Atomic uint32_t v;
};
extern __attribute__((
	visibility("hidden"))) struct weft__loop_epoch_s weft__loop_epoch;
/* runtime.c: called, if set, between destroy's store of shutdown and its
 * bump of the loop epoch.  For tests that widen that window. */
extern __attribute__((visibility("hidden"))) void (*weft__shutdown_gap_hook)(
	void);
void weft__task_cancel_at_shutdown(weft_task_t *t);
/*
 * Shutdown, while workers may still poll: idle (neither RUNNING nor
 * COMPLETE) -> RUNNING | CANCELLED, else false.  A claimed task is then
 * cancelled with weft__task_cancel_claimed(), which drops the owned
 * list's reference (the claimer took it off the list).
 */
bool weft__task_claim_idle(weft_task_t *t);
void weft__task_cancel_claimed(weft_task_t *t);
void weft__task_drop_notified(weft_task_t *t);
/* Drops @n references to @t; the last one frees it. */
void weft__task_ref_dec_n(weft_task_t *t, uint64_t n);

/* ----------------------------------------------------------- task_alloc */

/*
 * Block sizes: each 8 bytes short of a multiple of 16, so that glibc's
 * chunk (the block, its 8-byte header, rounded up to 16) wastes nothing:
 * chunks of 112, 176, 256, 512 and 1024 bytes.  176 is an 80-byte
 * header with an 88-byte future (a weft_notified_t, weft-bench's
 * idle-tasks).
 */
#define TASK_ALLOC_CLASSES 5
#define TASK_ALLOC_CLASS_SIZES { 104, 168, 248, 504, 1016 }
#define TASK_ALLOC_DIRECT 0xff

/*
 * The bytes weft_spawn_with() allocates for a task of @state_size bytes
 * (@inline_rec: with its spawn record at the end, spawn_rec.c).
 */
static inline size_t weft__task_block_size(size_t state_size, bool inline_rec)
{
	size_t n = sizeof(weft_task_t) + state_size;

	if (inline_rec)
		n = ((n + 7) & ~(size_t)7) + sizeof(weft__spawn_rec_t);
	return n;
}

typedef struct worker_cache_s {
	void *head;
	uint32_t n;
} worker_cache_t;

/* task_alloc.c */
uint8_t weft__task_alloc_class(size_t size);
void *weft__task_alloc(weft_runtime_t *rt, size_t size, uint8_t cls);
void weft__task_free(weft_runtime_t *rt, void *p, uint8_t cls);
void weft__worker_cache_fini(weft_worker_t *w);

/* ----------------------------------------------------------- spawn_rec */

/* spawn_rec.c */
const weft__spawn_rec_t *weft__spawn_rec_get(weft_runtime_t *rt,
					     const weft_spawn_t *spec);
void weft__spawn_rec_fill(weft__spawn_rec_t *rec, weft_runtime_t *rt,
			  const weft_spawn_t *spec, bool inline_rec);

/* ---------------------------------------------------------- await_site */

/* await_site.c: @site's id (its POLL a2, AWAIT_SITE); 0: none (full). */
uint32_t weft__await_site_id(const weft_site_t *site);

/* ---------------------------------------------------------- local queue */

#define LOCAL_QUEUE_CAP 256u
#define LOCAL_QUEUE_MASK (LOCAL_QUEUE_CAP - 1)

/*
 * A worker's bounded run queue (Tokio's design).  The owner pushes at the
 * tail and pops at the head; one thief at a time steals half from the head.
 * head packs two u32 indices: `steal` (high) and `real` (low).  When they
 * differ a thief has claimed [steal, real) and is copying it out; the owner
 * must not reuse those slots, so capacity is measured from `steal`.
 */
typedef struct local_queue_s {
	weft__cacheline_aligned _Atomic uint64_t head;
	weft__cacheline_aligned _Atomic uint32_t tail;
	weft_task_t *buffer[LOCAL_QUEUE_CAP];
} local_queue_t;

/* local_queue.c */
void weft__local_queue_init(local_queue_t *q);
bool weft__local_queue_push(local_queue_t *q, weft_task_t *t,
			    weft_runtime_t *rt, weft_worker_t *w);
weft_task_t *weft__local_queue_pop(local_queue_t *q);
weft_task_t *weft__local_queue_steal_into(local_queue_t *src,
					  local_queue_t *dst,
					  uint32_t *stolen);
uint32_t weft__local_queue_len(const local_queue_t *q);
bool weft__local_queue_is_empty(const local_queue_t *q);
uint32_t weft__local_queue_free(const local_queue_t *q);
void weft__local_queue_push_batch_unchecked(local_queue_t *q,
					    weft_task_t *first, uint32_t n);
bool weft__local_queue_is_consistent(const local_queue_t *q);

/* ---------------------------------------------------------------- inject */

/*
 * The global (inject) queue.  Producers push onto a lock-free stack
 * (incoming); consumers, one at a time under @lock, move it in push order
 * onto the FIFO head..tail and take from there (inject.c has the
 * argument).
 */
typedef struct inject_s {
	/* Producers' side: newest first; INJECT_CLOSED once closed. */
	weft__cacheline_aligned _Atomic(weft_task_t *) incoming;
	/*
	 * Pushed and not yet taken: never below the true count, briefly
	 * above it; zero means empty (inject.c).
	 */
	_Atomic size_t len;
	/* Consumers' side. */
	weft__cacheline_aligned weft__lock_t lock;
	weft_task_t *head;
	weft_task_t *tail;
	size_t taken_len; /* tasks on head..tail */
} inject_t;

/* inject.c */
void weft__inject_init(inject_t *q);
void weft__inject_fini(inject_t *q);
bool weft__inject_push(inject_t *q, weft_task_t *t);
bool weft__inject_push_batch(inject_t *q, weft_task_t *first,
			     weft_task_t *last, size_t n);
weft_task_t *weft__inject_pop_batch(inject_t *q, size_t max, size_t *n);
void weft__inject_close(inject_t *q);
bool weft__inject_is_empty(const inject_t *q);
size_t weft__inject_len(const inject_t *q);

/* ----------------------------------------------------------------- owned */

#define OWNED_SHARDS WEFT__TASK_SHARDS

/* Every live task, for shutdown; sharded by task id. */
typedef struct owned_shard_s {
	weft__cacheline_aligned weft__lock_t lock;
	weft_task_t *head;
	uint64_t count;
	/*
	 * The probe's walk (weft__owned_shard_info()), while it has let the
	 * lock go: the next task it copies, NULL at the end or with no walk.
	 * An unlink of that task moves it on.
	 */
	weft_task_t *walk_at;
	bool closed;
} owned_shard_t;

typedef struct owned_s {
	owned_shard_t shards[OWNED_SHARDS];
	/* One walk at a time: a shard has one walk_at. */
	pthread_mutex_t walk_lock;
} owned_t;

/* owned.c: called, if set, between two parts of a shard's walk, its lock
 * free.  For tests that change the shard there. */
extern __attribute__((visibility("hidden"))) void (*weft__owned_walk_hook)(
	owned_shard_t *s);

/* owned.c */
void weft__owned_init(owned_t *o);
void weft__owned_fini(owned_t *o);
bool weft__owned_insert(owned_t *o, weft_task_t *t);
void weft__owned_remove(owned_t *o, weft_task_t *t);
void weft__owned_close(owned_t *o);
weft_task_t *weft__owned_pop(owned_t *o);
weft_task_t *weft__owned_take_idle(owned_t *o);

size_t weft__owned_shard_info(owned_t *o, unsigned shard,
			      weft__task_info_t *out, size_t cap);
bool weft__owned_describe(owned_t *o, const weft_task_t *t,
			  weft__task_info_t *out);
uint64_t weft__owned_count(owned_t *o);

/* ------------------------------------------------------------------ park */

/* A one-waiter futex parker; an unpark before a park is not lost. */
typedef struct parker_s {
	_Atomic uint32_t state;
	struct driver_s *driver; /* NULL: never parks in the driver */
} parker_t;

/* park.c */
void weft__parker_init(parker_t *p, struct driver_s *driver);
void weft__parker_park(parker_t *p);
void weft__parker_park_driver(parker_t *p);
void weft__parker_unpark(parker_t *p);
bool weft__parker_in_driver(parker_t *p);

/* ------------------------------------------------------------------ idle */

/*
 * Which workers sleep and how many search.  state packs num_searching (low
 * 16 bits) and num_unparked (high 16 bits); the sleepers list is guarded by
 * lock.  See idle.c for the no-lost-wake-up argument.
 */
typedef struct idle_s {
	weft__cacheline_aligned _Atomic uint32_t state;
	weft__lock_t lock;
	unsigned *sleepers;
	unsigned nsleepers;
	unsigned nworkers;
} idle_t;

/* idle.c */
bool weft__idle_unpark_worker_by_id(idle_t *idle, unsigned index);
int weft__idle_init(idle_t *idle, unsigned nworkers);
void weft__idle_fini(idle_t *idle);
bool weft__idle_to_searching(idle_t *idle);
bool weft__idle_from_searching(idle_t *idle);
bool weft__idle_to_parked(idle_t *idle, unsigned index, bool searching);
bool weft__idle_is_parked(idle_t *idle, unsigned index);
bool weft__idle_all_parked(idle_t *idle);
int weft__idle_worker_to_notify(idle_t *idle, weft_runtime_t *rt);

/* ---------------------------------------------------------------- worker */

/* A worker's counters: written by the worker only (counter_add). */
typedef struct worker_counters_s {
	weft_counter_t polls;
	weft_counter_t steals;
	weft_counter_t steal_ops;
	weft_counter_t parks;
	weft_counter_t unparks;
	weft_counter_t noop_wakes;
	weft_counter_t local_schedules;
	weft_counter_t lifo_schedules;
	weft_counter_t global_schedules;
	weft_counter_t remote_schedules;
	weft_counter_t overflows;
	weft_counter_t spawned;
	weft_counter_t completed;
	weft_counter_t busy_ns;
	weft_counter_t forced_yields;
} worker_counters_t;

struct weft_worker_s {
	/* Shared with thieves. */
	local_queue_t queue;
	/* Owner's, but for the monitor's steal_lifo() (monitor.c). */
	weft__cacheline_aligned weft_runtime_t *rt;
	_Atomic(weft_task_t *) lifo;
	_Atomic bool lifo_watch; /* written by the monitor only */
	bool in_place; /* inside weft_block_in_place() */
	unsigned index;
	uint32_t tick;
	bool searching;
	uint64_t rand;
	uint64_t id_next;
	uint64_t id_end;
	/*
	 * When the worker last unparked (ns), 0 while parked: readers add
	 * the stretch in progress to busy_ns (weft_worker_metrics()), so a
	 * worker that never parks does not read idle.  See park().
	 */
	_Atomic uint64_t busy_since;
	uint64_t busy_start; /* the same, the owner's plain copy */
	/* Tasks of this runtime allocated and freed here (task_alloc.c). */
	uint64_t task_allocs;
	uint64_t task_frees;
	pthread_t thread;
	worker_cache_t cache[TASK_ALLOC_CLASSES];
	/* Written by unparkers. */
	weft__cacheline_aligned parker_t parker;
	/*
	 * Written by the owner, read by metrics readers and the monitor:
	 * the task being polled (NULL between polls) and the counters, the
	 * poll count on the same line.
	 */
	weft__cacheline_aligned _Atomic(weft_task_t *) cur;
	worker_counters_t c;
	/* The poll in progress, published while the probe listens. */
	_Atomic uint64_t probe_task;
	_Atomic uint64_t probe_poll_start;
	/*
	 * The thread's id and CPU clock (monitor.c reads where a stuck
	 * poll's time goes), once it runs: tid 0 before, stored last.
	 */
	_Atomic int32_t tid;
	_Atomic int32_t cpu_clock;
	/*
	 * weft_now_ns() just before its thread was made: its schedstat (CPU
	 * time and run_delay) is zero from then.  Written before
	 * pthread_create(), read once the runtime is published.
	 */
	uint64_t born_ns;
	/*
	 * The weft_mutex_t its thread blocks on now (its name), NULL when
	 * none: a poll stuck there is said to wait for that lock; or the
	 * runtime's own pool lock, whose time is not the task's
	 * (blocking.c).  Stored by the worker around the wait, the since
	 * first (relaxed) and the name with release; loaded by the
	 * collector, the name with acquire, then the since: a name read
	 * comes with its own since or a later one, never an older wait's
	 * (which would read long and, for the pool's lock, excuse a poll:
	 * review).  A hint otherwise, ordering nothing else.
	 */
	_Atomic(const char *) lock_waiting;
	/* Since when (weft__probe_clock_ns()), stored before the name. */
	_Atomic uint64_t lock_wait_since;
	/*
	 * The last long poll's split (runtime_probe.h), written by the
	 * monitor alone, read by the probe: a seqlock, odd while written.
	 * Fields are relaxed atomics so that a reader racing a write
	 * reads a stale or torn copy (then retries), never undefined.
	 */
	weft__cacheline_aligned _Atomic uint32_t split_seq;
	/* A ring of the last long polls' splits: start, from, to, cpu,
	 * wait; split_pos the next slot, split_n the slots filled. */
	_Atomic uint64_t split[WEFT__POLL_SPLITS][5];
	_Atomic uint32_t split_pos, split_n;
	/*
	 * A long poll that began while nobody listened (no POLL event will
	 * end it), published by the monitor for the collector's workers
	 * (weft__runtime_worker_unheard()): its task, when the monitor
	 * first saw it (weft_now_ns()), and the worker's poll count then,
	 * which is also the sequence (0: none).  Written by the monitor
	 * alone.
	 */
	_Atomic uint64_t unheard_polls, unheard_task, unheard_since;
};

/* ---------------------------------------------------------------- monitor */

/* What the monitor last saw of one worker. */
typedef struct monitor_seen_s {
	weft_task_t *cur; /* compared, never dereferenced */
	uint64_t polls;
	uint64_t since; /* when this poll began, as estimated */
	bool acted;
	/*
	 * A long poll seen while no events flow (monitor.c): the first and
	 * the last look that saw it (its length is at least the difference,
	 * however late the monitor's looks came), and its task.
	 */
	uint64_t first_seen, last_seen;
	bool named;
	/*
	 * heard: a look found the poll published for the collector
	 * (w->probe_task set: timed, its POLL event tells it), sticky for
	 * the poll, since a timed poll clears probe_task before its worker
	 * clears cur; unheard: no look did (it began while nobody listened,
	 * and no POLL event will end it), so the monitor tells it;
	 * published: it is in w->unheard_*.
	 */
	bool heard, unheard, published;
	weft__task_info_t info;
	/*
	 * An unheard long poll ended, its warning not yet taken (the
	 * probe's lock was busy: a collector's pass), tried again at the
	 * next looks.
	 */
	bool end_pending, end_split_ok;
	weft__task_info_t end_info;
	uint64_t end_start, end_dur;
	weft__poll_split_t end_split;
	/*
	 * Where a stuck poll's time goes (monitor.c): the worker thread's
	 * /proc stat and schedstat (fds; stat_fd -1: not open yet, -2:
	 * cannot be read) and CPU clock; this poll's first look (CPU time,
	 * time queued for a CPU, when) and the last one.  warned: the
	 * long poll was said while running (named: its task described).
	 */
	int stat_fd, sched_fd;
	clockid_t cpu_clock;
	bool split_first, split_published, warned;
	uint64_t cpu0, delay0, at0, cpu_prev, delay_prev, at_prev;
	uint64_t split_start;
	/*
	 * The weft_mutex_t a look saw the worker blocked on in this poll
	 * (NULL: none), and for how long at the longest; the same for the
	 * ended poll's warning kept.
	 */
	const char *lock, *end_lock;
	uint64_t lock_ns, end_lock_ns;
} monitor_seen_t;

typedef struct monitor_s {
	/* MON_RUNNING, MON_SLEEPING or MON_STOP (monitor.c); a futex word. */
	weft__cacheline_aligned _Atomic uint32_t state;
	bool started;
	pthread_t thread;
	uint64_t stall_ns;
	uint64_t long_poll_ns; /* the probe's threshold; 0: not watched */
	uint64_t interval_ns; /* between looks: half of stall_ns */
	uint64_t last_sample;
	monitor_seen_t *seen; /* one a worker; the monitor's own */
	uint64_t driver_turns_seen;
	uint64_t driver_seen_at;
	/* What it did, for tests and the tools (relaxed). */
	_Atomic uint64_t stalls;      /* polls seen past the threshold */
	_Atomic uint64_t lifo_steals; /* LIFO tasks handed to the others */
	_Atomic uint64_t driver_turns; /* turns of an unattended driver */
} monitor_t;

/* monitor.c */
int weft__monitor_start(weft_runtime_t *rt);
void weft__monitor_stop(weft_runtime_t *rt);
void weft__monitor_wake(monitor_t *m);

struct weft_runtime_s {
	weft_worker_t *workers;
	unsigned nworkers;
	unsigned global_queue_interval;
	unsigned max_lifo_polls;
	bool disable_lifo;
	weft__cacheline_aligned _Atomic bool shutdown;
	weft__cacheline_aligned inject_t inject;
	idle_t idle;
	owned_t owned;
	driver_t driver;
	blocking_pool_t blocking;
	monitor_t monitor;
	/* Foreign-thread counters (atomic RMW: any thread). */
	weft__cacheline_aligned _Atomic uint64_t remote_spawns;
	_Atomic uint64_t remote_wakes;
	/*
	 * Tasks allocated minus freed on threads that are not our workers;
	 * from destroy on, biased by SHELL_DYING plus every live task.  See
	 * weft__runtime_shell_release().
	 */
	weft__cacheline_aligned _Atomic int64_t task_balance;
	/* Runtimes whose destroy left a worker behind (runtime.c). */
	struct weft_runtime_s *abandoned_next;
};

#define SHELL_DYING ((int64_t)1 << 60)

/* This thread's worker, if it is one (set for the thread's lifetime). */
extern WEFT_TLS weft_worker_t *weft__cur_worker;
/* The runtime made current by a worker or a block_on call. */
extern WEFT_TLS weft_runtime_t *weft__cur_rt;
/* The task being polled on this thread, NULL if none. */
static inline weft_task_t *weft__current_task(void)
{
	weft_worker_t *w = weft__cur_worker;

	/* Relaxed: our own store. */
	return w ? load_relaxed(&w->cur) : NULL;
}
/* What a wake on this thread comes from, outside a poll (probe). */
extern WEFT_TLS uint8_t weft__wake_source;

/*
 * Coop budget: each poll may complete WEFT_COOP_BUDGET operations on
 * runtime resources (channels, sockets, timers, joins).  Past that, an
 * operation returns PENDING after waking its task, so the task yields and
 * the worker's queue gets its turn.  Resources call weft__coop_poll()
 * before doing anything and weft__coop_progress() when they completed.
 */
#define WEFT_COOP_BUDGET 128
extern WEFT_TLS uint32_t weft__coop_budget;

bool weft__coop_poll_slow(weft_cx_t *cx);

static inline bool weft__coop_poll(weft_cx_t *cx)
{
	return weft__coop_budget != 0 || weft__coop_poll_slow(cx);
}

static inline void weft__coop_progress(void)
{
	if (weft__coop_budget)
		weft__coop_budget--;
}

/*
 * A worker leaving its park wakes the monitor if it sleeps (it sleeps
 * only while every worker is parked).  Store buffering: the monitor
 * raises MON_SLEEPING, then reads the idle state (both seq_cst); the
 * worker was marked unparked in the idle state (a seq_cst RMW, by its
 * notifier or itself, that happens before this), then fences and reads
 * the monitor's state.  Either the monitor sees a worker unparked and
 * does not sleep, or we see it sleeping and wake it.
 */
static inline void weft__monitor_kick(weft_runtime_t *rt)
{
	fence_seqcst();
	if (load_relaxed(&rt->monitor.state) == 1 /* MON_SLEEPING */)
		weft__monitor_wake(&rt->monitor);
}

/* worker.c */
void *weft__worker_main(void *arg);
void weft__schedule(weft_task_t *t, bool is_yield);
/* weft__schedule() of a task whose only reference the caller hands over. */
void weft__schedule_handed(weft_task_t *t);
/* worker.c: called, if set, between a foreign push and its notify.  For
 * tests that widen that window. */
extern __attribute__((visibility("hidden"))) void (*weft__handed_gap_hook)(void);
void weft__notify_parked(weft_runtime_t *rt);
uint64_t weft__next_task_id(weft_worker_t *w);

/* runtime.c */
void weft__runtime_shell_release(weft_runtime_t *rt, int64_t n);
_Noreturn void weft_panic(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

#endif /* WEFT_RUNTIME_INTERNAL_H */
