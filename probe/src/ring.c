/* SPDX-License-Identifier: MIT */
/* The event ring: see ring.h for the model and the ordering argument. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pages_internal.h"
#include "ring.h"

int weft__ring_init(weft_ring_t *r, size_t capacity, bool populate)
{
	size_t cap = 64, bytes;
	void *buf;

	while (cap < capacity)
		cap <<= 1;
	memset(r, 0, sizeof(*r));
	bytes = cap * sizeof(weft_event_t);
	/*
	 * @populate: its pages in place up front, on this (registering)
	 * thread; otherwise the producer takes a fault every 128 events on
	 * its first trip round the ring, on its fast path (a worker's first
	 * 8 MiB of events ran 3-10x slower in chained_spawn).  See pages.c
	 * for how, and what it costs: well under 1 ms for the default 8 MiB
	 * with huge pages, once in a thread's life.  The mapping is page
	 * aligned, which covers the 64 the slots want.
	 */
	buf = weft__pages_map(bytes, populate);
	if (!buf)
		return -ENOMEM;
	r->buf = buf;
	r->mask = cap - 1;
	return 0;
}

void weft__ring_fini(weft_ring_t *r)
{
	if (r->buf)
		weft__pages_unmap(r->buf, weft__ring_capacity(r) *
						  sizeof(weft_event_t));
	r->buf = NULL;
}

size_t weft__ring_consume(weft_ring_t *r, weft_event_t *out, size_t max)
{
	/* Relaxed: only the consumer writes head. */
	uint64_t h = load_relaxed(&r->head);
	/* Acquire: pairs with the producer's release store of tail. */
	uint64_t t = load_acquire(&r->tail);
	size_t n = (size_t)(t - h);

	if (n > max)
		n = max;
	for (size_t i = 0; i < n; i++)
		out[i] = r->buf[(h + i) & r->mask];
	/* Release: our slot reads happen before the producer reuses them. */
	store_release(&r->head, h + n);
	return n;
}


/*
 * The end of a push that found the ring half full or more: asks the
 * consumer for a drain, and sets the next mark a sixteenth of the ring on
 * (at most at full).  Returns true, the push's result.
 */
bool weft__ring_ask(weft_ring_t *r)
{
	/* Relaxed: only this thread writes tail. */
	uint64_t t = load_relaxed(&r->tail), cap = r->mask + 1;
	/*
	 * Acquire, as in the push; any head at least as new as the one the
	 * push saw keeps the mark at or before full.
	 */
	uint64_t head = load_acquire(&r->head);

	weft__ring_half_full();
	r->check_at = t + cap / 16 < head + cap ? t + cap / 16 : head + cap;
	return true;
}

uint64_t weft__ring_drops(const weft_ring_t *r)
{
	uint64_t n = 0;

	/* Acquire: pairs with the producer's release (ring.h). */
	for (int i = 0; i < RING_DROP_REASONS; i++)
		n += load_acquire((weft_counter_t *)&r->drops[i]);
	return n;
}

size_t weft__ring_capacity(const weft_ring_t *r)
{
	return (size_t)r->mask + 1;
}
