/* SPDX-License-Identifier: MIT */
/*
 * A worker's local run queue: a 256-slot ring, single producer (the owning
 * worker), consumed by the owner at the head and by one thief at a time.
 *
 * Indices are free-running u32s compared by unsigned difference.  head packs
 * (steal << 32 | real).  Normally steal == real.  A thief first moves `real`
 * forward over the half it takes (claiming [steal, real)), copies those slots
 * into its own queue, then moves `steal` up to `real` (releasing the slots).
 * While a claim is open no other thief may start (steal != real), and the
 * owner measures free space from `steal`, so it never overwrites slots that
 * are being copied.  The owner pops by advancing `real` only.
 *
 * Progress: push and pop are wait-free for the owner except for CAS retries
 * against a concurrent thief; a full queue moves half of itself to the global
 * queue (push never fails).  steal is lock-free.
 */
#include <string.h>

#include "runtime_internal.h"

static inline uint32_t head_steal(uint64_t h)
{
	return (uint32_t)(h >> 32);
}

static inline uint32_t head_real(uint64_t h)
{
	return (uint32_t)h;
}

static inline uint64_t head_pack(uint32_t steal, uint32_t real)
{
	return ((uint64_t)steal << 32) | real;
}

void weft__local_queue_init(local_queue_t *q)
{
	store_relaxed(&q->head, 0);
	store_relaxed(&q->tail, 0);
	memset(q->buffer, 0, sizeof(q->buffer));
}

uint32_t weft__local_queue_len(const local_queue_t *q)
{
	/* Any thread.  Relaxed loads: an estimate, for metrics. */
	uint64_t h = load_relaxed((_Atomic uint64_t *)&q->head);
	uint32_t t = load_relaxed((_Atomic uint32_t *)&q->tail);

	return t - head_steal(h);
}

bool weft__local_queue_is_empty(const local_queue_t *q)
{
	uint64_t h = load_acquire((_Atomic uint64_t *)&q->head);
	uint32_t t = load_acquire((_Atomic uint32_t *)&q->tail);

	return head_real(h) == t;
}

uint32_t weft__local_queue_free(const local_queue_t *q)
{
	/* Owner only: tail is ours; head acquire as in push. */
	uint64_t h = load_acquire((_Atomic uint64_t *)&q->head);
	uint32_t t = load_relaxed((_Atomic uint32_t *)&q->tail);

	return LOCAL_QUEUE_CAP - (t - head_steal(h));
}

/*
 * Moves half the queue plus @t to the global queue.  Returns false when a
 * thief moved head meanwhile (the caller retries the push).
 */
static bool push_overflow(local_queue_t *q, weft_task_t *t, uint32_t head,
			  uint32_t tail, weft_runtime_t *rt)
{
	const uint32_t n = LOCAL_QUEUE_CAP / 2;
	uint64_t expect = head_pack(head, head);
	weft_task_t *first, *prev;

	if (tail - head != LOCAL_QUEUE_CAP)
		weft_panic("local queue overflow with %u tasks", tail - head);

	/*
	 * Claim the oldest half for ourselves by moving both indices.  acq_rel:
	 * acquire pairs with the release in a thief's steal_into (its reads of
	 * the slots finished before we reuse them); release is not needed for
	 * the slots (we read them ourselves) but costs nothing in a CAS.
	 */
	if (!atomic_compare_exchange_strong_explicit(
		    &q->head, &expect, head_pack(head + n, head + n),
		    memory_order_acq_rel, memory_order_relaxed))
		return false;

	first = q->buffer[head & LOCAL_QUEUE_MASK];
	prev = first;
	for (uint32_t i = 1; i < n; i++) {
		weft_task_t *next = q->buffer[(head + i) & LOCAL_QUEUE_MASK];

		prev->queue_next = next;
		prev = next;
	}
	prev->queue_next = t;
	t->queue_next = NULL;
	WEFT_PROBE_EVENT(OVERFLOW, 0, 0, n + 1);
	weft__inject_push_batch(&rt->inject, first, t, n + 1);
	return true;
}

/*
 * A full queue: the loop of weft__local_queue_push() from its first check
 * on, out of line so that the common case saves no registers (with this
 * path inlined GCC saved four on every push and laid the overflow out as
 * the fall-through; 20 → 13 instructions a push, counted with callgrind).
 */
__attribute__((noinline)) static bool
push_full(local_queue_t *q, weft_task_t *t, weft_runtime_t *rt,
	  weft_worker_t *w)
{
	for (;;) {
		/* Acquire and relaxed: as in weft__local_queue_push(). */
		uint64_t h = load_acquire(&q->head);
		uint32_t steal = head_steal(h), real = head_real(h);
		uint32_t tail = load_relaxed(&q->tail);

		if (tail - steal < LOCAL_QUEUE_CAP) {
			q->buffer[tail & LOCAL_QUEUE_MASK] = t;
			/* Release: as in weft__local_queue_push(). */
			store_release(&q->tail, tail + 1);
			return true;
		}
		if (steal != real) {
			/* A thief is mid-copy: it will free room; go global. */
			t->queue_next = NULL;
			weft__inject_push(&rt->inject, t);
			if (w)
				counter_inc(&w->c.overflows);
			return false;
		}
		if (push_overflow(q, t, real, tail, rt)) {
			if (w)
				counter_inc(&w->c.overflows);
			return false;
		}
		/* Lost a race with a thief; retry. */
	}
}

bool weft__local_queue_push(local_queue_t *q, weft_task_t *t,
			    weft_runtime_t *rt, weft_worker_t *w)
{
	/*
	 * Acquire: pairs with the release CAS in steal_into() that ends a
	 * thief's copy, so its reads of the slots we may now overwrite
	 * happened before.
	 */
	uint64_t h = load_acquire(&q->head);
	/* Relaxed: only this thread writes tail. */
	uint32_t tail = load_relaxed(&q->tail);

	if (__builtin_expect(tail - head_steal(h) >= LOCAL_QUEUE_CAP, 0))
		return push_full(q, t, rt, w);
	q->buffer[tail & LOCAL_QUEUE_MASK] = t;
	/*
	 * Release: the slot write above happens before any consumer that
	 * reads this tail (pop, steal_into).
	 */
	store_release(&q->tail, tail + 1);
	return true;
}

void weft__local_queue_push_batch_unchecked(local_queue_t *q,
					    weft_task_t *first, uint32_t n)
{
	/* Owner only; the caller checked weft__local_queue_free() >= n. */
	uint32_t tail = load_relaxed(&q->tail);

	for (uint32_t i = 0; i < n; i++) {
		q->buffer[(tail + i) & LOCAL_QUEUE_MASK] = first;
		first = first->queue_next;
	}
	/* Release: publishes the slots, as in push. */
	store_release(&q->tail, tail + n);
}

weft_task_t *weft__local_queue_pop(local_queue_t *q)
{
	/*
	 * Acquire: orders our slot read after any thief's claim and release
	 * of neighbouring slots (thieves only read the victim's slots; the
	 * slots we pop were written by us).
	 */
	uint64_t h = load_acquire(&q->head);

	for (;;) {
		uint32_t steal = head_steal(h), real = head_real(h);
		uint32_t tail = load_relaxed(&q->tail);
		uint64_t next;

		if (real == tail)
			return NULL;
		/* With a thief's claim open, advance only our index. */
		next = steal == real ? head_pack(real + 1, real + 1)
				     : head_pack(steal, real + 1);
		/*
		 * acq_rel: the CAS decides between us and a thief for slot
		 * `real`; acquire pairs with a thief's release.
		 */
		if (cas_acq_rel(&q->head, &h, next))
			return q->buffer[real & LOCAL_QUEUE_MASK];
	}
}

/*
 * Claims half of @src and copies it to @dst at @dst_tail; returns how many.
 * Does not publish dst's tail.
 */
static uint32_t steal_into2(local_queue_t *src, local_queue_t *dst,
			    uint32_t dst_tail)
{
	/* Acquire: pairs with the release CASes of the owner and thieves. */
	uint64_t prev = load_acquire(&src->head);
	uint64_t next;
	uint32_t n, first;

	for (;;) {
		uint32_t steal = head_steal(prev), real = head_real(prev);
		/*
		 * Acquire: pairs with the owner's release store of tail, so
		 * the slots below it are visible to us.
		 */
		uint32_t tail = load_acquire(&src->tail);

		if (steal != real)
			return 0; /* another thief is copying */
		n = tail - real;
		n -= n / 2;
		if (n == 0 || n > LOCAL_QUEUE_CAP / 2)
			return 0; /* empty, or a stale snapshot */
		next = head_pack(steal, real + n);
		/* acq_rel: claims [real, real + n) against owner and thieves. */
		if (cas_acq_rel(&src->head, &prev, next))
			break;
	}

	first = head_steal(next);
	for (uint32_t i = 0; i < n; i++)
		dst->buffer[(dst_tail + i) & LOCAL_QUEUE_MASK] =
			src->buffer[(first + i) & LOCAL_QUEUE_MASK];

	/*
	 * Close the claim: steal catches up with real (which the owner may
	 * have advanced meanwhile by popping).  Release: our reads of the
	 * slots above happen before the owner reuses them (pairs with the
	 * acquire load of head in push).
	 */
	prev = next;
	for (;;) {
		uint32_t real = head_real(prev);

		next = head_pack(real, real);
		if (cas_acq_rel(&src->head, &prev, next))
			return n;
		if (head_steal(prev) != first)
			weft_panic("local queue: steal claim lost");
	}
}

weft_task_t *weft__local_queue_steal_into(local_queue_t *src,
					  local_queue_t *dst, uint32_t *stolen)
{
	/* dst is the caller's own queue. */
	uint32_t dst_tail = load_relaxed(&dst->tail);
	uint64_t dh = load_acquire(&dst->head);
	weft_task_t *ret;
	uint32_t n;

	*stolen = 0;
	if (dst_tail - head_steal(dh) > LOCAL_QUEUE_CAP / 2)
		return NULL; /* we have enough to do */

	n = steal_into2(src, dst, dst_tail);
	if (n == 0)
		return NULL;
	*stolen = n;
	n--;
	/* Run the last one stolen ourselves; publish the rest. */
	ret = dst->buffer[(dst_tail + n) & LOCAL_QUEUE_MASK];
	if (n > 0)
		/* Release: the copied slots are visible to our thieves. */
		store_release(&dst->tail, dst_tail + n);
	return ret;
}

bool weft__local_queue_is_consistent(const local_queue_t *q)
{
	uint64_t h = load_acquire((_Atomic uint64_t *)&q->head);
	uint32_t t = load_acquire((_Atomic uint32_t *)&q->tail);
	uint32_t steal = head_steal(h), real = head_real(h);

	return (uint32_t)(real - steal) <= LOCAL_QUEUE_CAP &&
	       (uint32_t)(t - real) <= LOCAL_QUEUE_CAP &&
	       (uint32_t)(t - steal) <= LOCAL_QUEUE_CAP;
}
