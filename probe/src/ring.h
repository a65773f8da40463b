/* SPDX-License-Identifier: MIT */
/*
 * A single-producer single-consumer ring of fixed-size event records.
 *
 * The producer is the thread the ring belongs to (a worker, or a foreign
 * thread that registered lazily); the consumer is the collector.  Indices
 * are free-running u64s (they never wrap in practice) compared by
 * difference; the capacity is a power of two.  tail is written only by the
 * producer, head only by the consumer, each on its own cache line.  The
 * producer re-reads head only when its tail reaches a private mark
 * (check_at): half the ring past the head it last saw; past half, every
 * sixteenth of the ring, and at full.
 *
 * Half full or more, the push ends by asking the consumer for a drain
 * (weft__ring_ask(), weft__ring_half_full(): the collector's pass comes
 * now, not at its interval), so a burst after a quiet spell, when the
 * collector has stretched its interval, is drained before it overflows.
 * That is the one system call a producer makes: a futex wake, once until
 * the collector takes the request, at most every sixteenth of the ring.
 *
 * Progress: wait-free on both sides.  A full ring drops the new event and
 * counts the drop (by reason) in a producer-owned counter: the producer
 * never waits, allocates or locks.
 */
#ifndef WEFT_PROBE_RING_H
#define WEFT_PROBE_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft/probe_events.h"

#include "atomic_internal.h"

enum ring_drop_reason {
	RING_DROP_FULL = 0,    /* the collector fell behind */
	RING_DROP_REASONS
};

/* Spawn site ids a ring's bitmap covers (1 .. WEFT_RING_SITES). */
#define WEFT_RING_SITES 4096u
/* Await site ids a ring's bitmap covers (1 .. WEFT_RING_AWAITS). */
#define WEFT_RING_AWAITS 4096u

typedef struct weft_ring_s {
	/* Producer side. */
	weft__cacheline_aligned _Atomic uint64_t tail;
	uint64_t check_at; /* look at head again when tail gets here */
	weft_counter_t drops[RING_DROP_REASONS];
	/*
	 * The spawn sites this ring has announced (SITE, SITE_LOC; bit id - 1)
	 * in listening period sites_gen (weft__probe_listen_gen): a site is
	 * announced on every ring that spawns from it, before its first
	 * SPAWN there, so the collector meets it first whatever order the
	 * rings are read in (runtime/src/task.c).  The producer's alone.
	 */
	uint32_t sites_gen;
	uint64_t sites_told[WEFT_RING_SITES / 64];
	/*
	 * The same for await sites (AWAIT_SITE, before the first POLL that
	 * names one: runtime/src/task.c), in listening period awaits_gen.
	 */
	uint32_t awaits_gen;
	uint64_t awaits_told[WEFT_RING_AWAITS / 64];
	/* Consumer side. */
	weft__cacheline_aligned _Atomic uint64_t head;
	/* Fixed at creation. */
	weft__cacheline_aligned weft_event_t *buf;
	uint64_t mask;
} weft_ring_t;

/* ring.c */
/* @populate: fault the whole buffer in now (see ring.c). */
int weft__ring_init(weft_ring_t *r, size_t capacity, bool populate);
void weft__ring_fini(weft_ring_t *r);
size_t weft__ring_consume(weft_ring_t *r, weft_event_t *out, size_t max);
uint64_t weft__ring_drops(const weft_ring_t *r);
size_t weft__ring_capacity(const weft_ring_t *r);
bool weft__ring_ask(weft_ring_t *r);
/* Defined by the ring's consumer (probe.c): a ring is half full. */
void weft__ring_half_full(void);

/* Producer only.  Returns false (and counts a drop) when full. */
static inline bool weft__ring_push_spsc(weft_ring_t *r, const weft_event_t *ev)
{
	/* Relaxed: only this thread writes tail. */
	uint64_t t = load_relaxed(&r->tail), head;
	bool ask = false;

	/* Invariant: check_at <= the head last seen + capacity. */
	if (__builtin_expect(t >= r->check_at, 0)) {
		/*
		 * Acquire: pairs with the consumer's release store of head,
		 * so its reads of the slots we are about to reuse are done.
		 */
		head = load_acquire(&r->head);
		if (t - head > r->mask) {
			/* Full: look again on the next push. */
			r->check_at = t;
			/*
			 * Release: what this thread pushed, and what it saw
			 * pushed (a spawn's events before the task ran here),
			 * is seen by the collector that reads the count with
			 * acquire (weft__ring_drops(); the collector's
			 * reconcile() relies on it: collector_reconcile.c).
			 */
			store_release(&r->drops[RING_DROP_FULL],
				      load_relaxed(&r->drops[RING_DROP_FULL]) +
					      1);
			return false;
		}
		/* Half full or more: weft__ring_ask() sets the mark. */
		ask = t - head >= (r->mask + 1) / 2;
		r->check_at = head + (r->mask + 1) / 2;
	}
	r->buf[t & r->mask] = *ev;
	/* Release: the record is written before the consumer sees tail. */
	store_release(&r->tail, t + 1);
	/*
	 * Last, with nothing left to do: a call here saves no registers on
	 * the fast path (a call before the write kept the whole event live
	 * across it, and cost every push a frame).
	 */
	if (__builtin_expect(ask, 0))
		return weft__ring_ask(r);
	return true;
}

/*
 * weft__ring_push_spsc()'s common case alone: false, with nothing done,
 * when the push would have to look at head (at its mark: half full, or
 * full), which the caller then does through weft__ring_push_spsc().  No
 * call in it, so a caller whose own slow path is a tail call saves no
 * registers (the resources' emits, runtime/src/resource.c).  Orders as
 * weft__ring_push_spsc(): the record is written before the release store
 * of tail that publishes it.
 */
static inline bool weft__ring_push_fast(weft_ring_t *r, const weft_event_t *ev)
{
	/* Relaxed: only this thread writes tail. */
	uint64_t t = load_relaxed(&r->tail);

	if (__builtin_expect(t >= r->check_at, 0))
		return false;
	r->buf[t & r->mask] = *ev;
	/* Release: the record is written before the consumer sees tail. */
	store_release(&r->tail, t + 1);
	return true;
}

#endif /* WEFT_PROBE_RING_H */
