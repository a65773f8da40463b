/* SPDX-License-Identifier: MIT */
/*
 * Resources' ids and events (resource_internal.h).
 */
#include "resource_internal.h"

#include "atomic_internal.h"
#include "runtime_probe.h"

/*
 * Relaxed: an id only has to be unique, and a fetch_add gives each caller
 * its own value whatever the order.  Taken when a resource is first
 * announced, not at init: a primitive made per request while nobody
 * listens writes nothing shared.
 */
static _Atomic uint64_t res_next;

/*
 * @r's id, given it now if it has none.  Two threads announcing it at
 * once: one CAS wins, the other takes the winner's id (relaxed: the id is
 * a name, ordering nothing).
 */
uint64_t weft__res_id(weft_resource_t *r)
{
	uint64_t id = __atomic_load_n(&r->id, __ATOMIC_RELAXED), want;

	if (id)
		return id;
	want = fetch_add_relaxed(&res_next, 1) + 1;
	if (__atomic_compare_exchange_n(&r->id, &id, want, false,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return want;
	return id;
}

static bool needs_announce(weft_resource_t *r);

static void announce(weft_resource_t *r, uint64_t id, uint64_t ts)
{
	/* Relaxed: a name set on another thread shows at its own emit. */
	const char *name = __atomic_load_n(&r->name, __ATOMIC_RELAXED);

	/* Relaxed: a zeroed weft_mutex_t's is stored at its first event
	 * (mutex.c mutex_res()), the same value by every thread. */
	weft__probe_emit_at(ts, WEFT_EV_RES_NEW, 0, id,
			    __atomic_load_n(&r->kind, __ATOMIC_RELAXED));
	if (r->file)
		weft__probe_emit_at(ts, WEFT_EV_RES_NAME, id,
				    (uintptr_t)r->file, r->line ? r->line : 1);
	if (name)
		weft__probe_emit_at(ts, WEFT_EV_RES_NAME, id, (uintptr_t)name,
				    0);
}

/* @r's id, announced first if this listening period has not heard it. */
static __attribute__((noinline)) uint64_t heard(weft_resource_t *r, uint64_t ts)
{
	uint64_t id = weft__res_id(r);

	if (needs_announce(r))
		announce(r, id, ts);
	return id;
}

/*
 * Whether @r must be announced before an event now: its generation is not
 * the listening period's.  Relaxed both: two threads that race here both
 * announce, which the collector takes as a repeat; a thread that sees the
 * new generation stored by another announces nothing, and the other's
 * RES_NEW, stamped before the store, sorts before its event.
 */
static bool needs_announce(weft_resource_t *r)
{
	uint32_t gen = load_relaxed(&weft__probe_listen_gen);

	if (__atomic_load_n(&r->gen, __ATOMIC_RELAXED) == gen)
		return false;
	__atomic_store_n(&r->gen, gen, __ATOMIC_RELAXED);
	return true;
}

/*
 * Within a poll, the poll's start stamp, as the other events a poll makes
 * take (probe_internal.h): a clock read is most of an event's cost.  Waits
 * are then measured from poll to poll (a wait's end is in a poll that
 * began after the wake that ended it).  Elsewhere (a blocking pool thread,
 * a plain thread), the clock.
 */
static uint64_t stamp(void)
{
	uint64_t ts = weft__probe_poll_ts;

	return ts ? ts : weft__probe_clock();
}

/*
 * An acquire or a release: the clock, always.  Their order across
 * threads is what holders are made of, and a poll's stamp can be older
 * than a release on another worker that an acquire in that poll came
 * after (the fast path: a lock freed while the poll ran), which read
 * as the acquire before the release.
 */
static uint64_t stamp_hold(uint8_t kind)
{
	return kind == WEFT_EV_RES_ACQUIRE || kind == WEFT_EV_RES_RELEASE ?
		       weft__probe_clock() :
		       stamp();
}

void weft__res_name(weft_resource_t *r, const char *name)
{
	/* Relaxed: see announce(). */
	__atomic_store_n(&r->name, name, __ATOMIC_RELAXED);
#if WEFT_PROBE
	if (name && weft__probe_on() &&
	    __atomic_load_n(&r->gen, __ATOMIC_RELAXED) ==
		    load_relaxed(&weft__probe_listen_gen))
		weft__probe_emit_at(weft__probe_clock(), WEFT_EV_RES_NAME,
				    weft__res_id(r), (uintptr_t)name, 0);
#endif
}

/*
 * @r's id if it has one and this listening period heard of it: three loads
 * and a compare on every event but a resource's first, which heard()
 * takes (out of line: a contended handoff emits three events, and the
 * call and the announcing's registers were a fifth of their cost).
 * Relaxed: as in needs_announce().
 */
static inline uint64_t heard_now(weft_resource_t *r)
{
	uint64_t id = __atomic_load_n(&r->id, __ATOMIC_RELAXED);

	return __atomic_load_n(&r->gen, __ATOMIC_RELAXED) ==
			       load_relaxed(&weft__probe_listen_gen) ?
		       id :
		       0;
}

/*
 * The stamp of an event of @kind when it needs no call: the poll's, or a
 * TSC read.  False when only clock_gettime() would do.
 */
static inline bool stamp_fast(uint8_t kind, uint64_t *ts)
{
	uint64_t poll = weft__probe_poll_ts;

	if (poll && kind != WEFT_EV_RES_ACQUIRE &&
	    kind != WEFT_EV_RES_RELEASE) {
		*ts = poll;
		return true;
	}
#if defined(__x86_64__)
	if (weft__probe_use_tsc) {
		uint32_t lo, hi;

		__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
		*ts = ((uint64_t)hi << 32) | lo;
		return true;
	}
#endif
	return false;
}

/*
 * Event @kind about @id for @task, when it can be pushed with no call
 * (stamp_fast(), weft__ring_push_fast()).  A contended handoff emits
 * three; with a call anywhere in them the compiler saved five registers
 * on entry and restored them, a fifth of their cost (callgrind).
 */
static inline bool emit_fast(uint8_t kind, uint64_t task, uint64_t id,
			     uint32_t a2)
{
	weft_ring_t *ring = weft__probe_ring;
	weft_event_t ev;

	if (__builtin_expect(!ring || !stamp_fast(kind, &ev.ts), 0))
		return false;
	ev.task = task;
	ev.a1 = id;
	ev.a2 = a2;
	ev.worker = weft__probe_worker;
	ev.kind = kind;
	ev.flags = 0;
	return weft__ring_push_fast(ring, &ev);
}

/* weft__res_emit() the long way: announcing, a clock call, a full ring. */
static __attribute__((noinline)) uint64_t
res_emit_slow(weft_resource_t *r, uint8_t kind, uint64_t task, uint32_t a2)
{
	uint64_t ts = stamp_hold(kind), id = heard(r, ts);

	weft__probe_emit_at(ts, kind, task, id, a2);
	return id;
}

uint64_t weft__res_emit(weft_resource_t *r, uint8_t kind, uint64_t task,
			uint32_t a2)
{
	uint64_t id = heard_now(r);

	if (__builtin_expect(id && emit_fast(kind, task, id, a2), 1))
		return id;
	/* In tail position: see emit_fast(). */
	return res_emit_slow(r, kind, task, a2);
}

uint64_t weft__res_emit_clock(weft_resource_t *r, uint8_t kind, uint64_t task,
			      uint32_t a2)
{
	uint64_t ts = weft__probe_clock(), id = heard_now(r);

	if (!id)
		id = heard(r, ts);
	weft__probe_emit_at(ts, kind, task, id, a2);
	return id;
}

void weft__res_emit_acquire(weft_resource_t *r, uint64_t task, uint32_t n)
{
	uint64_t ts = weft__probe_clock(), id = heard_now(r);
	const weft_site_t *site = weft__await_site;

	if (__builtin_expect(!id, 0))
		id = heard(r, ts);
	weft__probe_emit_at(ts, WEFT_EV_RES_ACQUIRE, task, id, n);
	/* The await this poll evaluated last: the acquiring future's. */
	if (site && site->file)
		weft__probe_emit_at(ts, WEFT_EV_RES_SITE, task,
				    (uintptr_t)site->file,
				    (uint32_t)site->line);
}

void weft__res_acquired(weft_resource_t *r, uint64_t task, const char *file,
			int line, const char *label)
{
	uint64_t ts = weft__probe_clock(), id = heard_now(r);

	if (!id)
		id = heard(r, ts);
	weft__probe_emit_at(ts, WEFT_EV_RES_ACQUIRE, task, id, 1);
	if (file)
		weft__probe_emit_at(ts, WEFT_EV_RES_SITE, task, (uintptr_t)file,
				    line > 0 ? (uint32_t)line : 0);
	if (label)
		weft__probe_emit_at(ts, WEFT_EV_RES_LABEL, task,
				    (uintptr_t)label, 0);
}

static __attribute__((noinline)) void
res_emit_id_slow(uint64_t id, uint8_t kind, uint64_t task, uint32_t a2)
{
	weft__probe_emit_at(stamp(), kind, task, id, a2);
}

void weft__res_emit_id(uint64_t id, uint8_t kind, uint64_t task, uint32_t a2)
{
	if (__builtin_expect(!emit_fast(kind, task, id, a2), 0))
		res_emit_id_slow(id, kind, task, a2);
}

void weft__res_drop(weft_resource_t *r)
{
#if WEFT_PROBE
	uint64_t id = __atomic_load_n(&r->id, __ATOMIC_RELAXED);

	if (weft__probe_on() && __atomic_load_n(&r->gen, __ATOMIC_RELAXED) ==
					load_relaxed(&weft__probe_listen_gen))
		weft__probe_emit_at(weft__probe_clock(), WEFT_EV_RES_DROP, 0,
				    id, 0);
#else
	(void)r;
#endif
}
