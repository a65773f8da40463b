/* SPDX-License-Identifier: MIT */
/*
 * The primitives' side of resources (weft/resource.h): an id at init, and
 * the RES_* events (weft/probe_events.h) their operations emit while the
 * probe listens.
 *
 * Announcing.  A resource is named to the probe lazily: its first event
 * in a listening period (weft__probe_listen_gen) is preceded by RES_NEW
 * and RES_NAME, so a resource made before anyone listened is named too,
 * and one that nobody ever waits on while anyone listens costs nothing.
 * Two threads may both announce it at once: the collector takes a second
 * RES_NEW for the same id as a repeat.
 */
#ifndef WEFT_RESOURCE_INTERNAL_H
#define WEFT_RESOURCE_INTERNAL_H

#include "weft/resource.h"
#include "weft/probe_events.h"

#include "probe_internal.h"

/*
 * Gives @r a kind and the place it was initialised (or none); its id is
 * taken when it is first announced.  Inline: a oneshot is made per
 * request, and the call was half of what a resource cost it (callgrind,
 * ping_pong).  Generation 0 is no listening period's (the first is 1):
 * not yet announced.
 */
static inline void weft__res_init(weft_resource_t *r, uint8_t kind,
				  const char *file, int line)
{
	*r = (weft_resource_t){ .file = file,
				.line = line > 0 ? (uint32_t)line : 0,
				.kind = kind };
}

/* @r's id, given it now if it has none (never 0). */
uint64_t weft__res_id(weft_resource_t *r);

/* Names @r (a static string); re-announces it if it was announced. */
void weft__res_name(weft_resource_t *r, const char *name);

/*
 * Emits event @kind about @r for @task: announces @r first if this
 * listening period has not heard of it (its id is taken then: a resource
 * nobody heard of has none).  Return: the id.  Out of line: the
 * operations' fast paths keep a load, a test and a branch.
 */
__attribute__((noinline)) uint64_t weft__res_emit(weft_resource_t *r,
							uint8_t kind,
							uint64_t task,
							uint32_t a2);

/*
 * weft__res_emit() stamped with the clock, not with the poll's start as
 * a wait's events are: a wait that blocks its thread within one poll (a
 * weft_mutex_t's) begins and ends inside it.
 */
__attribute__((noinline)) uint64_t weft__res_emit_clock(weft_resource_t *r,
							uint8_t kind,
							uint64_t task,
							uint32_t a2);

/*
 * RES_ACQUIRE of @n by @task, then RES_SITE naming the await this poll
 * evaluated last, when there is one: for an acquire future's READY (not
 * a try_lock, whose site would be some earlier await's).
 */
__attribute__((noinline)) void
weft__res_emit_acquire(weft_resource_t *r, uint64_t task, uint32_t n);

/*
 * The same by id alone, for a waiter whose resource may be gone (freed by
 * its owner once the waiter was unlinked): no announcing, which the
 * waiter's RES_WAIT did.
 */
__attribute__((noinline)) void weft__res_emit_id(uint64_t id,
						       uint8_t kind,
						       uint64_t task,
						       uint32_t a2);

/*
 * A waiter queues on @r: remembers the task and the resource in @w and
 * emits RES_WAIT for @op (while the probe listens; else clears them).
 */
#define WEFT_RES_WAIT(rp, w, op)                                              \
	do {                                                                   \
		(w)->res = 0;                                                  \
		if (WEFT_PROBE_ON()) {                                         \
			(w)->task = weft__cur_task_id;                         \
			(w)->res = weft__res_emit((rp), WEFT_EV_RES_WAIT,      \
						  (w)->task, (op));            \
		}                                                              \
	} while (0)

/* Waiter @w's wait ended (@a2: op | flags); nothing if RES_WAIT was not
 * emitted. */
#define WEFT_RES_WAIT_END(w, a2)                                               \
	do {                                                                   \
		if ((w)->res && WEFT_PROBE_ON())                               \
			weft__res_emit_id((w)->res, WEFT_EV_RES_WAIT_END,      \
					  (w)->task, (a2));                    \
		(w)->res = 0;                                                  \
	} while (0)

/*
 * RES_ACQUIRE of @r by @task, then RES_SITE with @file:@line (where it
 * was asked for) and RES_LABEL with @label, each when known: a blocking
 * job, started on a pool thread, says whose it is and what.
 */
__attribute__((noinline)) void
weft__res_acquired(weft_resource_t *r, uint64_t task, const char *file,
		   int line, const char *label);

/* weft__res_fini() for a resource that has an id. */
void weft__res_drop(weft_resource_t *r);

/*
 * At _fini: RES_DROP if @r was announced while the probe listens.  A
 * resource nobody heard of has no id (relaxed: only this thread, which
 * owns @r at its end, can see an id that matters, the announcing
 * thread's store having happened before whatever handed @r's end here).
 */
static inline void weft__res_fini(weft_resource_t *r)
{
	if (__atomic_load_n(&r->id, __ATOMIC_RELAXED))
		weft__res_drop(r);
}

#if WEFT_PROBE
#define WEFT_RES_EVENT(rp, kind, task, a2)                                     \
	do {                                                                   \
		if (__builtin_expect(weft__probe_on(), 0))                     \
			weft__res_emit((rp), WEFT_EV_##kind, (task), (a2));    \
	} while (0)
#else
#define WEFT_RES_EVENT(rp, kind, task, a2)                                     \
	((void)sizeof((rp)->id + (task) + (a2)))
#endif

#endif /* WEFT_RESOURCE_INTERNAL_H */
