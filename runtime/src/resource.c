/* SPDX-License-Identifier: MIT */
/*
 * Resources' ids and events (resource_internal.h).
 */
#include "resource_internal.h"

#include "atomic_internal.h"
#include "runtime_probe.h"

/*
 * Relaxed: an id only has to be unique, and a fetch_add gives each caller
 * its own value whatever the order.
 */
static _Atomic uint64_t res_next;

void weft__res_init(weft_resource_t *r, uint8_t kind, const char *file,
		    int line)
{
	r->id = fetch_add_relaxed(&res_next, 1) + 1;
	r->name = NULL;
	r->file = file;
	r->line = line > 0 ? (uint32_t)line : 0;
	r->kind = kind;
	r->reserved_[0] = r->reserved_[1] = r->reserved_[2] = 0;
	/* Not yet shared: no generation is 0 (the first listening is 1). */
	__atomic_store_n(&r->gen, 0, __ATOMIC_RELAXED);
	r->reserved2_ = 0;
}

static void announce(weft_resource_t *r, uint64_t ts)
{
	weft__probe_emit_at(ts, WEFT_EV_RES_NEW, 0, r->id, r->kind);
	if (r->file)
		weft__probe_emit_at(ts, WEFT_EV_RES_NAME, r->id, (uintptr_t)r->file,
				    r->line ? r->line : 1);
	/* Relaxed: a name set on another thread shows at its own emit. */
	const char *name = __atomic_load_n(&r->name, __ATOMIC_RELAXED);
	if (name)
		weft__probe_emit_at(ts, WEFT_EV_RES_NAME, r->id,
				    (uintptr_t)name, 0);
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

void weft__res_name(weft_resource_t *r, const char *name)
{
	/* Relaxed: see announce(). */
	__atomic_store_n(&r->name, name, __ATOMIC_RELAXED);
#if WEFT_PROBE
	if (name && weft__probe_on() &&
	    __atomic_load_n(&r->gen, __ATOMIC_RELAXED) ==
		    load_relaxed(&weft__probe_listen_gen))
		weft__probe_emit_at(weft__probe_clock(), WEFT_EV_RES_NAME,
				    r->id, (uintptr_t)name, 0);
#endif
}

void weft__res_emit(weft_resource_t *r, uint8_t kind, uint64_t task,
		    uint32_t a2)
{
	/*
	 * The clock, not the poll's start stamp: holds and waits inside one
	 * poll are measured, and the events stay in order on this ring.
	 */
	uint64_t ts = weft__probe_clock();

	if (!r->id)
		return; /* never initialised: nothing to say */
	if (needs_announce(r))
		announce(r, ts);
	weft__probe_emit_at(ts, kind, task, r->id, a2);
	if (kind == WEFT_EV_RES_ACQUIRE && weft__await_site &&
	    weft__await_site->file)
		weft__probe_emit_at(ts, WEFT_EV_RES_SITE, task,
				    (uintptr_t)weft__await_site->file,
				    (uint32_t)weft__await_site->line);
}

void weft__res_acquired(weft_resource_t *r, uint64_t task, const char *file,
			int line, const char *label)
{
	uint64_t ts = weft__probe_clock();

	if (!r->id)
		return;
	if (needs_announce(r))
		announce(r, ts);
	weft__probe_emit_at(ts, WEFT_EV_RES_ACQUIRE, task, r->id, 1);
	if (file)
		weft__probe_emit_at(ts, WEFT_EV_RES_SITE, task, (uintptr_t)file,
				    line > 0 ? (uint32_t)line : 0);
	if (label)
		weft__probe_emit_at(ts, WEFT_EV_RES_LABEL, task,
				    (uintptr_t)label, 0);
}

void weft__res_emit_id(uint64_t id, uint8_t kind, uint64_t task, uint32_t a2)
{
	weft__probe_emit_at(weft__probe_clock(), kind, task, id, a2);
}

void weft__res_fini(weft_resource_t *r)
{
#if WEFT_PROBE
	if (r->id && weft__probe_on() &&
	    __atomic_load_n(&r->gen, __ATOMIC_RELAXED) ==
		    load_relaxed(&weft__probe_listen_gen))
		weft__probe_emit_at(weft__probe_clock(), WEFT_EV_RES_DROP, 0,
				    r->id, 0);
#endif
	r->id = 0;
}
