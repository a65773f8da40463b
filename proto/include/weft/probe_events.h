/* SPDX-License-Identifier: MIT */
/*
 * The probe's event kinds, as one X-macro list: the C enum, the names the
 * tools print and the wire protocol's mapping all come from here, so they
 * cannot drift.  X(NAME, value, "label", "what the fields mean").
 *
 * Every event is one fixed-size record (weft_event_t): a timestamp, the
 * task it concerns (0 if none), two kind-specific arguments and the
 * emitting worker (0xffff for a thread that is not a worker).
 */
#ifndef WEFT_PROBE_EVENTS_H
#define WEFT_PROBE_EVENTS_H

#include <stdint.h>

#include "weft/common.h"

#define WEFT_EVENT_KINDS(X)                                                    \
	X(SPAWN, 1, "spawn",                                                   \
	  "a1=parent task, a2=kind | site id << WEFT_SPAWN_SITE_SHIFT (0: "    \
	  "no site, SPAWN_INFO and SPAWN_LOC follow)")                         \
	X(SPAWN_INFO, 2, "spawn-info",                                         \
	  "a1=name (static string), a2=state size; follows a SPAWN of no "     \
	  "site")                                                              \
	X(SPAWN_LOC, 3, "spawn-loc",                                           \
	  "a1=file (static string), a2=line; follows SPAWN_INFO")              \
	X(POLL, 4, "poll",                                                     \
	  "ts=end, a1=duration, a2=WEFT_POLL_READY | WEFT_POLL_YIELDED | "     \
	  "clones of its own waker << WEFT_POLL_CLONES_SHIFT | await site "    \
	  "id << WEFT_POLL_SITE_SHIFT (0: where it parks did not change)")     \
	X(WAKE, 5, "wake",                                                     \
	  "a1=waking task (0: none), a2=source | WEFT_WAKE_BY_VAL")            \
	X(WAKER_CLONE, 6, "waker-clone",                                       \
	  "a clone not counted in a POLL (WEFT_POLL_CLONES_SHIFT)")            \
	X(WAKER_DROP, 7, "waker-drop", "")                                     \
	X(SCHEDULE, 8, "schedule", "a2=where the task went")                   \
	X(STEAL, 9, "steal", "a1=victim worker, a2=tasks stolen")              \
	X(PARK, 10, "park", "a2=where (futex or driver)")                      \
	X(UNPARK, 11, "unpark", "a2=reason")                                   \
	X(OVERFLOW, 12, "overflow", "a2=tasks moved to the global queue")      \
	X(COMPLETE, 13, "complete", "a2=status")                               \
	X(LOCK_ACQUIRE, 14, "lock-acquire",                                    \
	  "a1=lock, a2=us the taker blocked for it (0: none, or not timed)")   \
	X(LOCK_RELEASE, 15, "lock-release", "a1=lock, a2=held ns")             \
	X(LOCK_HELD_PENDING, 16, "lock-held-across-await",                     \
	  "a1=lock, a2=held ns so far")                                        \
	X(BLOCKING_START, 17, "blocking-start",                                \
	  "task=spawner (0: none), a1=the job's name (static string, 0: "      \
	  "none)")                                                             \
	X(BLOCKING_END, 18, "blocking-end",                                    \
	  "task=spawner (0: none), ts=end, a1=duration")                       \
	X(TIMER_FIRE, 19, "timer-fire", "a2=timers fired")                     \
	X(IO_READY, 20, "io-ready", "a1=fd, a2=readiness")                     \
	X(GLOBAL_DEPTH, 21, "global-depth", "a2=global queue depth (sampled)") \
	X(LOCAL_DEPTH, 22, "local-depth", "a2=local queue depth (sampled)")    \
	X(LOCK_SITE, 23, "lock-site",                                          \
	  "a1=file where taken (static string), a2=line (0: a raw pthread "    \
	  "mutex, whose release is not told); follows a LOCK_*")               \
	X(MARK, 24, "mark", "an application's own mark: a1, a2 are its own")   \
	X(PARKED_AT, 25, "parked-at",                                          \
	  "a1=file of the await (static string; 0: not known), a2=line; "      \
	  "follows a POLL that returned PENDING elsewhere than the last, "     \
	  "when that POLL names no await site (WEFT_POLL_SITE_SHIFT)")         \
	X(RES_NEW, 26, "resource-new",                                         \
	  "a1=resource id, a2=kind (weft_resource_kind_t); announces it, at "  \
	  "its init or before its first event after listening began")          \
	X(RES_NAME, 27, "resource-name",                                       \
	  "task=the resource's id (not a task's), a1=its name or the file "    \
	  "it was initialised in (static string), a2=line (0: a1 is a name)")  \
	X(RES_WAIT, 28, "resource-wait",                                       \
	  "task=waiter, a1=resource id, a2=op (weft_resource_op_t): the "      \
	  "task queued on it")                                                 \
	X(RES_WAIT_END, 29, "resource-wait-end",                               \
	  "task=waiter, a1=resource id, a2=op | WEFT_RES_CANCELLED, _CLOSED "  \
	  "or _ACQUIRED: its wait ended (served unless flagged)")              \
	X(RES_ACQUIRE, 30, "resource-acquire",                                 \
	  "task=new holder, a1=resource id, a2=count (permits)")               \
	X(RES_RELEASE, 31, "resource-release",                                 \
	  "task=releasing task (0: none), a1=resource id, a2=count")           \
	X(RES_OWNER, 32, "resource-owner",                                     \
	  "task=the task it serves now (a channel's receiver), a1=resource "   \
	  "id")                                                                \
	X(RES_DROP, 33, "resource-drop", "a1=resource id: it was finalised")   \
	X(RES_SITE, 34, "resource-site",                                       \
	  "task=holder, a1=file of the await that acquired it (static "        \
	  "string), a2=line; follows a RES_ACQUIRE")                           \
	X(RES_LABEL, 35, "resource-label",                                     \
	  "task=holder, a1=what it holds it for (static string: a blocking "   \
	  "job's name); follows a RES_ACQUIRE")                                \
	X(LOCK_HELD_END, 36, "lock-held-end",                                  \
	  "task=the holder, a1=lock (as in its LOCK_HELD_PENDING), "           \
	  "a2=threads that began to block on it meanwhile: a weft_mutex_t "    \
	  "held across an await was released")                                 \
	X(SITE, 37, "spawn-site",                                              \
	  "task=the site's id (not a task's), a1=name (static string), "       \
	  "a2=state size; announces a spawn site on its ring, before the "     \
	  "ring's first SPAWN of it in a listening period; SITE_LOC follows")  \
	X(SITE_LOC, 38, "spawn-site-loc",                                      \
	  "task=the site's id, a1=file (static string), a2=line; follows "     \
	  "SITE")                                                              \
	X(AWAIT_SITE, 39, "await-site",                                        \
	  "task=the await site's id (not a task's), a1=file (static "          \
	  "string), a2=line; announces an await site on its ring, before "     \
	  "the ring's first POLL naming it in a listening period")             \
	X(RT_WAIT, 40, "runtime-wait",                                         \
	  "a1=what (WEFT_RT_WAIT_*), a2=us; stamped at its start: a task's "   \
	  "poll blocked in the runtime's own work (a lock, a thread's start)")

typedef enum weft_event_kind_e {
#define WEFT_X_ENUM(name, value, label, doc) WEFT_EV_##name = value,
	WEFT_EVENT_KINDS(WEFT_X_ENUM)
#undef WEFT_X_ENUM
	WEFT_EV_MAX
} weft_event_kind_t;

/*
 * Resources (RES_* events): what tasks wait on.  Ids come from one
 * counter per process, never reused; names and kinds travel once, in
 * RES_NEW and RES_NAME.
 */
#define WEFT_RESOURCE_KINDS(X)                                                 \
	X(MUTEX, 1, "mutex")           /* weft_async_mutex_t */              \
	X(SEMAPHORE, 2, "semaphore")                                          \
	X(NOTIFY, 3, "notify")                                                \
	X(MPSC, 4, "mpsc")             /* a bounded channel */               \
	X(ONESHOT, 5, "oneshot")                                              \
	X(COUNTDOWN, 6, "countdown")                                          \
	X(BLOCKING_POOL, 7, "blocking-pool")                                  \
	X(TIMER_WHEEL, 8, "timer-wheel")                                      \
	X(IO, 9, "io")                                                        \
	X(SYNC_MUTEX, 10, "sync-mutex") /* weft_mutex_t */

typedef enum weft_resource_kind_e {
#define WEFT_X_ENUM(name, value, label) WEFT_RES_##name = value,
	WEFT_RESOURCE_KINDS(WEFT_X_ENUM)
#undef WEFT_X_ENUM
	WEFT_RES_KIND_MAX
} weft_resource_kind_t;

/* What a waiter waits for (RES_WAIT, RES_WAIT_END a2, low byte). */
#define WEFT_RESOURCE_OPS(X)                                                   \
	X(ACQUIRE, 1, "acquire") /* a lock or permits */                       \
	X(NOTIFIED, 2, "notified")                                             \
	X(SEND, 3, "send")         /* room in a full channel */                \
	X(RECV, 4, "recv")         /* a message */                             \
	X(JOB, 5, "job")           /* a blocking job, queued for a thread */   \
	X(DONE, 6, "completion")   /* a countdown's zero, a oneshot value */   \
	X(SLEEP, 7, "sleep")       /* a timer's deadline (the timer wheel) */  \
	X(READABLE, 8, "readable") /* an fd's readiness (io) */                \
	X(WRITABLE, 9, "writable")

typedef enum weft_resource_op_e {
#define WEFT_X_ENUM(name, value, label) WEFT_RES_OP_##name = value,
	WEFT_RESOURCE_OPS(WEFT_X_ENUM)
#undef WEFT_X_ENUM
	WEFT_RES_OP_MAX
} weft_resource_op_t;

#define WEFT_RES_OP_MASK 0xffu
/* RES_WAIT_END a2: the wait ended unserved (the future was dropped). */
#define WEFT_RES_CANCELLED 0x100u
/* RES_WAIT_END a2: the resource was closed under the waiter. */
#define WEFT_RES_CLOSED 0x200u
/*
 * RES_WAIT_END a2: served, and the waiter now holds it (a lock; permits,
 * their count in bits 16-31, saturated): the acquire in the same event,
 * no RES_ACQUIRE follows.  Where it acquired it is where it waited (the
 * task's PARKED_AT).
 */
#define WEFT_RES_ACQUIRED 0x400u
#define WEFT_RES_COUNT_SHIFT 16

/*
 * Spawn sites (SPAWN a2).  A spawn is one event: its kind in the low byte
 * and, above it, the id of its site, the spawn record every task spawned
 * with the same spec shares (name, file, line, state size, kind).  Ids
 * are the process's, never reused, and mean the same record for as long
 * as it runs.  A ring announces a site (SITE, SITE_LOC) before its first
 * SPAWN of it in each listening period, so a reader meets the site before
 * any task of it on that ring; a SPAWN whose site it never met (the
 * announcement dropped, a reader that came late) is a task of a site not
 * known, never another site's.  Site 0: no id (the record table was
 * full, or a trace from before sites), and SPAWN_INFO and SPAWN_LOC
 * follow the SPAWN as they always did.
 */
#define WEFT_SPAWN_KIND_MASK 0xffu
#define WEFT_SPAWN_SITE_SHIFT 8

/* What a poll's thread waited for in the runtime (WEFT_EV_RT_WAIT a1). */
#define WEFT_RT_WAIT_POOL_SUBMIT 1u /* a blocking-pool submission */

/* Sources of a wake (WEFT_EV_WAKE a2). */
#define WEFT_WAKE_SOURCES(X)                                                   \
	X(SELF, 0, "self")                                                    \
	X(TASK, 1, "task")                                                    \
	X(IO, 2, "io")                                                        \
	X(TIMER, 3, "timer")                                                  \
	X(FOREIGN, 4, "foreign")                                              \
	X(BLOCKING, 5, "blocking")

/* POLL a2: the poll returned READY. */
#define WEFT_POLL_READY 0x1u
/*
 * POLL a2: the task woke itself during the poll with weft_cx_yield (a
 * yield).  That self-wake has no WAKE record of its own: it is this
 * poll's, at the poll's end, when the task went back to the queue.
 */
#define WEFT_POLL_YIELDED 0x2u
/*
 * POLL a2, bits 2-5: clones of the task's own waker made during the poll
 * (registering with a resource, the common case), up to
 * WEFT_POLL_CLONES_MAX; each has no WAKER_CLONE of its own.  Any other
 * clone (of another task's waker, outside a poll, past the maximum) is a
 * WAKER_CLONE event.  Small enough to keep a2 under 128 (one varint byte
 * on the wire) in a POLL that names no await site: most of them.  A reader counts them as it counts WAKER_CLONE, knowing
 * that the POLL, stamped at the poll's end, comes after a drop or wake
 * of such a clone made by another thread during the poll: a task's
 * clones minus its drops can be short until its POLL is read.  0 in a
 * trace from before (its clones are all WAKER_CLONE events).
 */
#define WEFT_POLL_CLONES_SHIFT 2
#define WEFT_POLL_CLONES_MAX 15u
/*
 * POLL a2, bits 6 and up: a PENDING poll's await site, when the task now
 * parks elsewhere than after its last pending poll (what PARKED_AT says,
 * folded into the POLL: one event where there were two).  Await sites
 * are numbered as spawn sites are: ids of the process, never reused, each
 * one WEFT_AWAIT's, WEFT_YIELD's or fiber await's place for as long as it
 * runs.  A ring announces a site (AWAIT_SITE: its file and line) before
 * its first POLL naming it in each listening period, so a reader meets
 * the site before any poll of it on that ring; a POLL whose site it never
 * met parks its task at a place not known, never at another site.  A
 * reader that came late (a file begun mid-run, a rotated segment, a
 * snapshot, a second client) or lost the announcement learns every site
 * its collector knows from the Updates' sites (weft/wire.h:
 * WEFT_WIRE_AWAIT_SITE_BASE), sent as spawn sites are.  0: the task
 * parks where it did (or the poll was READY), or the site has no id (the
 * runtime's table full, the thread's ring could not be registered, or
 * the ring had no room for the announcement; or a trace from before):
 * then a PARKED_AT follows the POLL when the place changed, as it always
 * did.
 */
#define WEFT_POLL_SITE_SHIFT 6

/* Set in a WAKE's a2 when the waker was consumed (wake, not wake_by_ref). */
#define WEFT_WAKE_BY_VAL 0x100u

typedef enum weft_wake_source_e {
#define WEFT_X_ENUM(name, value, label) WEFT_WAKE_##name = value,
	WEFT_WAKE_SOURCES(WEFT_X_ENUM)
#undef WEFT_X_ENUM
} weft_wake_source_t;

/* Where a scheduled task went (WEFT_EV_SCHEDULE a2). */
#define WEFT_SCHED_WHERES(X)                                                   \
	X(LIFO, 0, "lifo")                                                    \
	X(LOCAL, 1, "local")                                                  \
	X(YIELD, 2, "yield")                                                  \
	X(GLOBAL, 3, "global")

typedef enum weft_sched_where_e {
#define WEFT_X_ENUM(name, value, label) WEFT_SCHED_##name = value,
	WEFT_SCHED_WHERES(WEFT_X_ENUM)
#undef WEFT_X_ENUM
} weft_sched_where_t;

#define WEFT_EVENT_NO_WORKER 0xffffu

/* One event: 32 bytes, fixed for good (weft/common.h): a record format. */
typedef struct weft_event_s {
	uint64_t ts;      /* raw clock (TSC ticks or ns): see the collector */
	uint64_t task;    /* task id, 0 for none */
	uint64_t a1;
	uint32_t a2;
	uint16_t worker;  /* emitting worker, or WEFT_EVENT_NO_WORKER */
	uint8_t kind;     /* weft_event_kind_t */
	uint8_t flags;
} weft_event_t;

#ifdef __cplusplus
static_assert(sizeof(weft_event_t) == 32, "events are 32 bytes");
#else
_Static_assert(sizeof(weft_event_t) == 32, "events are 32 bytes");
#endif

/**
 * weft_event_task() - the task @e concerns.
 * @e: an event.
 *
 * RES_NAME's task field holds its resource's id, SITE's and SITE_LOC's a
 * spawn site's, AWAIT_SITE's an await site's: a reader that picks a
 * task's events (a filter, a detail view) must not take those for the
 * task of the same number.
 *
 * Context: any thread (reads @e only).
 * Return: the task's id, 0 for none.
 */
static inline uint64_t weft_event_task(const weft_event_t *e)
{
	return e->kind == WEFT_EV_RES_NAME || e->kind == WEFT_EV_SITE ||
			       e->kind == WEFT_EV_SITE_LOC ||
			       e->kind == WEFT_EV_AWAIT_SITE ?
		       0 :
		       e->task;
}

#ifdef __cplusplus
extern "C" {
#endif

/**
 * weft_event_kind_name() - "poll", "wake", ...; "?" for an unknown kind.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the label, a static string; "?" for an unknown value.
 */
WEFT_EXTERN const char *weft_event_kind_name(unsigned kind);
/**
 * weft_resource_kind_name() - "mutex", "mpsc", ...; "?" if unknown.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the label, a static string; "?" for an unknown value.
 */
WEFT_EXTERN const char *weft_resource_kind_name(unsigned kind);
/**
 * weft_resource_kind_contends() - whether a wait on @kind is contention.
 *
 * A waiter on a lock, permits, a pool's thread or room a channel's
 * receiver makes waits for a holder to let go: contention, which views
 * set apart.  A sleep waits on the timer wheel, a listener in accept or an
 * idle connection on its fd, a receiver for a message or a notify: by
 * design, however long, with no holder to blame.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: true for a kind whose waits are contention; false otherwise,
 * an unknown kind included.
 */
WEFT_EXTERN bool weft_resource_kind_contends(unsigned kind);
/**
 * weft_resource_op_name() - "acquire", "send", ...; "?" if unknown.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the label of @op's low byte (flags are ignored), a static string;
 * "?" if unknown.
 */
WEFT_EXTERN const char *weft_resource_op_name(unsigned op);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_PROBE_EVENTS_H */
