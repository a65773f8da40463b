/* SPDX-License-Identifier: MIT */
/*
 * The probe's face inside libweft: what the runtime calls at each probe
 * site, and the pieces of the probe shared between its files.
 *
 * Cost model.  Counters are always on and live in the runtime (plain
 * per-worker fields).  Events flow only while someone listens (a console,
 * a recorder, the flight recorder, a test): each site first reads
 * weft__probe_listening (a compare with memory and a branch) and skips
 * everything else when it is zero.  A poll has no site at all while
 * nobody listens: the worker runs a quiet copy of its loop then
 * (worker.c, worker_loop()).  When listening, an event is a TLS load (the
 * thread's ring), a clock read, a 32-byte store and a release store of
 * the ring's tail.
 * Built with WEFT_PROBE=OFF, every site compiles to nothing.
 *
 * Rings are per thread: a worker gets one when it starts; any other thread
 * that emits (a waker woken from a plain thread, a blocking-pool thread)
 * registers one lazily.  A thread that exits leaves its ring to the
 * collector, which drains and frees it.
 */
#ifndef WEFT_PROBE_INTERNAL_H
#define WEFT_PROBE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "weft/probe_events.h"

#include "atomic_internal.h"
#include "ring.h"

struct weft_runtime_s;

#ifndef WEFT_PROBE
#define WEFT_PROBE 1
#endif

/* ---------------------------------------------------------------- clock */

/*
 * Event timestamps: the TSC where it is invariant (constant and nonstop),
 * else CLOCK_MONOTONIC nanoseconds.  The collector converts to ns.
 */
extern __attribute__((visibility("hidden"))) bool weft__probe_use_tsc;

/* clock.c */
uint64_t weft__probe_clock_ns(void);
void weft__probe_clock_init(void);
/* Converts a raw event timestamp to CLOCK_MONOTONIC ns. */
uint64_t weft__probe_clock_to_ns(uint64_t raw);
/*
 * The conversion's constants, for the collector's merge, which converts
 * each event's stamp (and a POLL's or BLOCKING_END's duration) to
 * CLOCK_MONOTONIC ns as it copies it.
 * tsc false: the stamps are ns already.
 */
struct weft__probe_clock_conv {
	bool tsc;
	uint64_t base_tsc;
	uint64_t base_ns;
	uint64_t ns_per_tick_q32;
};
void weft__probe_clock_conv_get(struct weft__probe_clock_conv *c);

static inline uint64_t
weft__probe_clock_conv_ts(const struct weft__probe_clock_conv *c, uint64_t raw)
{
	__extension__ typedef unsigned __int128 u128;

	if (raw >= c->base_tsc)
		return c->base_ns + (uint64_t)(((u128)(raw - c->base_tsc) *
						c->ns_per_tick_q32) >>
					       32);
	return c->base_ns -
	       (uint64_t)(((u128)(c->base_tsc - raw) * c->ns_per_tick_q32) >>
			  32);
}

/* One event's stamp (and a POLL's or BLOCKING_END's duration) to ns;
 * @c->tsc is the caller's to check. */
static inline void
weft__probe_clock_conv_event(const struct weft__probe_clock_conv *c,
			     weft_event_t *ev)
{
	uint64_t raw = ev->ts;

	ev->ts = weft__probe_clock_conv_ts(c, raw);
	/*
	 * A duration becomes end - start, both converted: scaled alone it
	 * rounds apart from them by 1 ns, and the collector's ts - a1 then
	 * lands after a wake stamped with the poll's start, which it must
	 * count as in the poll.
	 */
	if (ev->kind == WEFT_EV_POLL || ev->kind == WEFT_EV_BLOCKING_END)
		ev->a1 = ev->ts - weft__probe_clock_conv_ts(c, raw - ev->a1);
}
/* Refines the TSC rate over a longer baseline (collector thread only). */
void weft__probe_clock_calibrate(void);
/* "tsc 2.09 GHz (invariant)" or "clock_gettime(CLOCK_MONOTONIC)". */
const char *weft__probe_clock_describe(void);

static inline uint64_t weft__probe_clock(void)
{
#if defined(__x86_64__)
	if (weft__probe_use_tsc) {
		uint32_t lo, hi;

		__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
		return ((uint64_t)hi << 32) | lo;
	}
#endif
	return weft__probe_clock_ns();
}

/* ---------------------------------------------------------------- emit */

/* Non-zero while anyone listens; read (relaxed) at each probe site. */
/* Hidden: PC-relative in libweft.so, no GOT load at each site. */
extern __attribute__((visibility("hidden"))) _Atomic uint32_t
	weft__probe_listening;
/*
 * Counts the listening periods (listening going 0 -> non-zero, or a
 * collector starting: probe.c): a resource announces itself once per
 * period (resource_internal.h), a ring tells each spawn site once per
 * period (ring.h).
 */
extern __attribute__((visibility("hidden"))) _Atomic uint32_t
	weft__probe_listen_gen;
/* This thread's ring, or NULL until it first emits. */
extern WEFT_TLS weft_ring_t *weft__probe_ring;
/* This thread's worker index, or WEFT_EVENT_NO_WORKER. */
extern WEFT_TLS uint16_t weft__probe_worker;
/*
 * While a worker polls with the probe listening: the poll's start stamp.
 * Events emitted during the poll (wakes, waker clones and drops, spawns)
 * take it instead of reading the clock again, which is most of an event's
 * cost; they stay in order (after the previous poll's end, before this
 * poll's own record, stamped at its end).
 */
extern WEFT_TLS uint64_t weft__probe_poll_ts;

/*
 * probe.c: true on the collector thread, where subscribers' callbacks run
 * under probe.lock.  The public calls that take that lock (or wait for
 * the collector) check it and refuse (-EDEADLK), or panic where they
 * return nothing, instead of deadlocking silently.
 */
extern __attribute__((visibility("hidden"))) WEFT_TLS bool weft__in_collector;

/* probe.c: set by the preloadable shim for raw pthread mutexes. */
extern __attribute__((visibility("hidden"))) void (*weft__probe_raw_hook)(
	uint64_t task);

/* mutex.c */
struct weft_task_s;
unsigned weft__probe_locks_at_pending(struct weft_task_s *t);
/* The same with nobody listening: marked, warned at unlock (mutex.c). */
void weft__mutex_pending_unheard(struct weft_task_s *t);

/* probe.c */
weft_ring_t *weft__probe_ring_register(void);
/*
 * A worker about to poll with the probe listening, between polls: its
 * ring made now, and populated (weft__probe_ring_register() populates
 * none inside a poll), so that no poll pays for it.
 */
void weft__probe_ring_ready(void);
void weft__probe_runtime_attach(struct weft_runtime_s *rt);
void weft__probe_runtime_detach(struct weft_runtime_s *rt);
void weft__probe_runtime_gone(void);
void weft__probe_thread_start(uint16_t worker);
void weft__probe_thread_stop(void);
/* The long-poll threshold (WEFT_LONG_POLL), ns; loads the config. */
uint64_t weft__probe_long_poll_ns(void);

/* collector_warnings.c */
struct weft__task_info_s;
/*
 * The runtime's monitor saw, while no events flowed, task @t's poll on
 * @worker run past the long-poll threshold since @start_ns: for @dur_ns
 * so far (@ended false: never-yielded) or in all (@ended: long-poll);
 * @split, where its time went (or NULL: not known); @lock, the
 * weft_mutex_t its thread was seen blocked on (NULL: none) for at least
 * @lock_ns of it.  Return: whether it
 * was taken (raised, folded, or said as the OS's); false while running
 * and mostly the OS's doing so far, or when probe.lock is busy (only
 * tried: the monitor asks again at its next look).  Raised with the
 * collector's warnings, so the next subscriber gets it.
 */
struct weft__poll_split_s;
bool weft__probe_monitor_long_poll(const struct weft__task_info_s *t,
				   uint16_t worker, uint64_t start_ns,
				   uint64_t dur_ns, bool ended,
				   const struct weft__poll_split_s *split,
				   const char *lock, uint64_t lock_ns);

/*
 * The same for a lock: with nobody listening, task @t held weft_mutex_t
 * @lock, taken at @file:@line, across an await, and released it at
 * @at_ns after @held_ns; @blocked threads began to block on it meanwhile.  Raised with the collector's warnings.  Called
 * on a worker: only tries probe.lock; false (not raised) if it is busy.
 */
bool weft__probe_unheard_lock_held(const struct weft__task_info_s *t,
				   uint16_t worker, const char *lock,
				   const char *file, int line, uint64_t at_ns,
				   uint64_t held_ns, uint32_t blocked);

static inline __attribute__((always_inline)) bool weft__probe_on(void)
{
#if defined(__x86_64__) && defined(__GNUC__) && !defined(WEFT_NO_ASM_GOTO)
	/*
	 * A compare with memory and a branch: two instructions a site, where
	 * the compiler makes three of an atomic load (it never folds one
	 * into the compare), and a site nobody listens to is most of what
	 * the probe costs a yield (callgrind).  An aligned 32-bit load is
	 * atomic on x86-64 and the asm is volatile, re-read at every site:
	 * the same relaxed load as below, in fewer instructions.
	 */
	__asm__ goto("cmpl $0, %0\n\tjne %l[on]"
		     :
		     : "m"(*(const uint32_t *)&weft__probe_listening)
		     : "cc"
		     : on);
	return false;
on:
	return true;
#else
	/*
	 * Relaxed: a listener that starts a moment late misses a few
	 * events, which is all it can expect.
	 */
	return load_relaxed(&weft__probe_listening) != 0;
#endif
}

/*
 * The first event of a thread: registers its ring, then emits.  Out of
 * line so that the emit itself makes no call but, past half a ring, the
 * one in tail position that asks for a drain (ring.h).
 */
__attribute__((noinline, cold)) void
weft__probe_emit_first(uint64_t ts, uint8_t kind, uint64_t task, uint64_t a1,
		       uint32_t a2);

static inline void weft__probe_emit_at(uint64_t ts, uint8_t kind,
				       uint64_t task, uint64_t a1, uint32_t a2)
{
	weft_ring_t *r = weft__probe_ring;
	weft_event_t ev;

	if (__builtin_expect(r == NULL, 0)) {
		weft__probe_emit_first(ts, kind, task, a1, a2);
		return;
	}
	ev.ts = ts;
	ev.task = task;
	ev.a1 = a1;
	ev.a2 = a2;
	ev.worker = weft__probe_worker;
	ev.kind = kind;
	ev.flags = 0;
	weft__ring_push_spsc(r, &ev);
}

static inline void weft__probe_emit(uint8_t kind, uint64_t task, uint64_t a1,
				    uint32_t a2)
{
	uint64_t ts = weft__probe_poll_ts;

	weft__probe_emit_at(ts ? ts : weft__probe_clock(), kind, task, a1, a2);
}

/*
 * weft__probe_emit() out of line, for the sites in the runtime's hot
 * paths.  Inlined there, the emit's clock read and ring push need
 * registers that the compiler then saves on entry to the whole function,
 * listening or not (8-11 instructions a call in task_waker_wake_by_ref and
 * the local queue's push, counted with callgrind); behind a call, the
 * site is a load, a test and a branch.
 */
__attribute__((noinline)) void weft__probe_emit_slow(uint8_t kind,
							   uint64_t task,
							   uint64_t a1,
							   uint32_t a2);

#if WEFT_PROBE
#define WEFT_PROBE_ON() weft__probe_on()
#define WEFT_PROBE_EVENT(kind, task, a1, a2)                                   \
	do {                                                                   \
		if (__builtin_expect(weft__probe_on(), 0))                     \
			weft__probe_emit_slow(WEFT_EV_##kind, (task), (a1),    \
					      (a2));                           \
	} while (0)
#define WEFT_PROBE_CLOCK() weft__probe_clock()
#else
#define WEFT_PROBE_ON() false
/* Not evaluated (sizeof), only type-checked: no unused warnings. */
#define WEFT_PROBE_EVENT(kind, task, a1, a2)                                   \
	((void)sizeof((task) + (a1) + (a2)))
#define WEFT_PROBE_CLOCK() ((uint64_t)0)
#endif

#endif /* WEFT_PROBE_INTERNAL_H */
