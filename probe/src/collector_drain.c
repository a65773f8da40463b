/* SPDX-License-Identifier: MIT */
/*
 * The collector's drain: a snapshot of every ring's run at the pass's
 * start, merged by time a chunk at a time into p->chunk straight from the
 * rings, the slots taken given back to their producers, and the rings of
 * threads gone freed once drained.
 */
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "knob.h"
#include "collector_internal.h"

/* A run's head stamp, cached: the heap compares it O(log k) a run. */
static inline void seg_head(struct seg_s *s)
{
	const weft_ring_t *r = &s->e->ring;

	s->ts = r->buf[s->pos & r->mask].ts;
}

static void heap_down(struct seg_s **h, size_t n, size_t j)
{
	for (;;) {
		size_t l = 2 * j + 1, r = l + 1, m = j;

		if (l < n && h[l]->ts < h[m]->ts)
			m = l;
		if (r < n && h[r]->ts < h[m]->ts)
			m = r;
		if (m == j)
			return;
		struct seg_s *t = h[j];
		h[j] = h[m];
		h[m] = t;
		j = m;
	}
}

/*
 * What the rings hold when a collector starts is an earlier listening
 * period's: events a site pushed after the last collector's last pass (it
 * saw someone listening just before the last one left), or pushed while
 * subscribers had no collector (one that failed to start).  Not this
 * period's to tell: an outside tester saw them reach the next attach.
 * Rings registered meanwhile are taken in first, as a pass takes them
 * (acquire: their entries whole).  Under probe.lock, before the new
 * period's first event can be pushed (listening is raised after this).
 * Each ring's head is moved to its tail (acquire: the slots before it
 * written; release on head: our "reads" done, pairs with the producer's
 * acquire on a full ring), and its drops so far taken as seen.
 */
void weft__collector_rings_forget(struct probe *p)
{
	ring_entry_t **pp = &p->rings;
	ring_entry_t *fresh = atomic_exchange_explicit(
		&weft__probe_new_rings, NULL, memory_order_acquire);

	while (*pp)
		pp = &(*pp)->next;
	while (fresh) {
		ring_entry_t *next = fresh->next;

		fresh->next = *pp;
		*pp = fresh;
		fresh = next;
	}
	for (ring_entry_t *e = p->rings; e; e = e->next) {
		store_release(&e->ring.head, load_acquire(&e->ring.tail));
		e->drops_seen = weft__ring_drops(&e->ring);
	}
}

/*
 * Snapshots every ring: one run per ring from its head to the tail it has
 * now (p->segs, p->heap).  Rings of threads gone are flagged (e->last) to
 * be freed once their run is taken.  Returns the number of runs, or 0
 * without memory for them (the events wait for the next pass).
 */
size_t weft__collector_snapshot(struct probe *p)
{
	ring_entry_t **pp = &p->rings;
	size_t nsegs = 0;

	p->fill = 0;
again:
	for (; *pp; pp = &(*pp)->next) {
		ring_entry_t *e = *pp;
		/* Acquire: pairs with ring_orphan(); all its pushes are in. */
		bool orphan = load_acquire(&e->orphan);
		size_t cap = weft__ring_capacity(&e->ring);
		/* Relaxed: only the collector writes head. */
		uint64_t head = load_relaxed(&e->ring.head);
		/*
		 * Acquire: pairs with the producer's release store of tail;
		 * every slot before it is written and ours to read.
		 */
		uint64_t tail = load_acquire(&e->ring.tail);
		uint64_t drops;

		if (nsegs == p->segs_cap) {
			size_t ncap = p->segs_cap ? 2 * p->segs_cap : 16;
			struct seg_s *ns = malloc(ncap * sizeof(*ns));
			struct seg_s **nh = malloc(ncap * sizeof(*nh));

			if (!ns || !nh) {
				free(ns);
				free(nh);
				/* No pass: no ring is drained, none freed. */
				for (ring_entry_t *r = p->rings; r; r = r->next)
					r->last = false;
				return 0;
			}
			free(p->segs);
			free(p->heap);
			p->segs = ns;
			p->heap = nh;
			p->segs_cap = ncap;
			/* A new array: start over (nothing taken yet). */
			pp = &p->rings;
			nsegs = 0;
			p->fill = 0;
			goto again;
		}
		if ((double)(tail - head) / (double)cap > p->fill)
			p->fill = (double)(tail - head) / (double)cap;
		if (tail != head)
			p->segs[nsegs++] = (struct seg_s){ e, head, tail, 0 };
		drops = weft__ring_drops(&e->ring);
		p->drops_total += drops - e->drops_seen;
		if (weft__collector_has_worker(p, e->worker))
			p->wk[e->worker].drops += drops - e->drops_seen;
		else
			p->other_drops += drops - e->drops_seen;
		e->drops_seen = drops;
		e->last = orphan;
	}
	/*
	 * Rings registered since the last pass, taken only now, after the
	 * known rings' tails were read, and read in turn: an event seen
	 * above that followed (through a task handed over, a lock) one in a
	 * new ring makes that ring's push happen before our exchange, so its
	 * event is in this pass too.  Taken first, a ring pushed meanwhile
	 * would miss this pass while what followed its first event made it
	 * (a task's COMPLETE before its SPAWN).  Acquire: pairs with the
	 * release push in weft__probe_ring_register; each entry and its ring
	 * are whole.  Appended at *pp, the end of the list, so that the
	 * loop above goes on with them.
	 */
	{
		ring_entry_t *fresh = atomic_exchange_explicit(
			&weft__probe_new_rings, NULL, memory_order_acquire);

		if (fresh) {
			while (fresh) {
				ring_entry_t *next = fresh->next;

				fresh->next = *pp;
				*pp = fresh;
				fresh = next;
			}
			goto again;
		}
	}
	for (size_t i = 0; i < nsegs; i++) {
		p->heap[i] = &p->segs[i];
		seg_head(&p->segs[i]);
	}
	for (size_t i = nsegs / 2; i-- > 0;)
		heap_down(p->heap, nsegs, i);
	return nsegs;
}

/*
 * Ring lines given back to the producer out of our caches (clflushopt),
 * so that it writes them again, a lap later, from memory rather than from
 * the collector's core.  On this project's CI guests a line fetched back
 * from the other vCPU is dear (the c2c probe: 100-670 ns), and sequential
 * misses to memory are what a core's prefetchers hide best.  Measured
 * (tools/bench/README.md, session 7): probe_event, marks written while the
 * collector drained on the other vCPU, ran 8.2-17.8 ns an event in half
 * the runs and 3.4-3.8 with the flush in every run; yield_many with
 * events, median 48.3 -> 42.5 ns an op, for about 2.2 ns an event more on
 * the collector.  Whole lines only (one
 * half taken waits for the next run).  clflushopt keeps a line coherent
 * whoever writes it next: a hint to the caches, no part of the ring's
 * protocol.  WEFT_PROBE_RING_FLUSH=0 turns it off.
 */
#if defined(__x86_64__)
bool weft__collector_flush_offered(void)
{
	unsigned a, b, c, d;
	if (!weft__knob_bool("WEFT_PROBE_RING_FLUSH", true))
		return false;
	/* CPUID.(7,0):EBX[23] (valgrind's CPU says no, and means it). */
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return false;
	return (b & bit_CLFLUSHOPT) != 0;
}

static void flush_taken(const weft_ring_t *r, uint64_t from, uint64_t to)
{
	/* Locals: the asm's char operand may alias them, and they would be
	 * loaded again each line. */
	weft_event_t *buf = r->buf;
	uint64_t mask = r->mask;

	/* Two 32-byte slots a 64-byte line; the buffer is page aligned. */
	for (uint64_t q = from & ~(uint64_t)1; q + 2 <= to; q += 2)
		__asm__ volatile("clflushopt %0"
				 : "+m"(*(volatile char *)&buf[q & mask]));
}
#else
bool weft__collector_flush_offered(void)
{
	return false;
}

static void flush_taken(const weft_ring_t *r, uint64_t from, uint64_t to)
{
	(void)r, (void)from, (void)to;
}
#endif

/*
 * @m events from @src (a stretch of a ring, in its order) to @d, each
 * converted to ns as it is copied (weft__collector_conv_copy()).
 */
static inline __attribute__((always_inline)) void
copy_run(const struct weft__probe_clock_conv *cv, weft_event_t *d,
	 const weft_event_t *src, uint64_t m)
{
	const weft_event_t *e = src + m;

	if (!cv->tsc) {
		memcpy(d, src, m * sizeof(*d));
		return;
	}
	/* Unrolled: the loop's own compare and branch an event (and the
	 * two pointers' adds) were 4 of its 30 instructions (callgrind). */
#pragma GCC unroll 4
	for (; src < e; src++, d++)
		weft__collector_conv_copy(cv, d, src);
}

/*
 * The head run's events up to the next run's head: its first, then each
 * while its stamp is not after @bound, @k at most, from ring position
 * *@pos (advanced), converted to ns (@tsc) as they are copied to @d.
 * Returns the end of what it copied.  Past the first, in stretches the
 * ring's end splits, walked by pointer: indexed by position, each event
 * cost a mask, a shift and the next slot's address twice (callgrind).
 * The same events as a test of each next stamp against @bound, not a
 * stretch's last: a ring is not always in time order (a wake in a poll
 * carries the poll's start).  tests/test_collector_drain.c checks the
 * order.
 */
static inline __attribute__((always_inline)) weft_event_t *
merge_run(const struct weft__probe_clock_conv *cv, bool tsc, weft_event_t *d,
	  const weft_event_t *buf, uint64_t mask, uint64_t *pos, uint64_t k,
	  uint64_t bound)
{
	uint64_t p = *pos;

	/*
	 * The head alone first: with two busy workers the runs alternate
	 * an event or two at a time, and a stretch's set-up would cost
	 * more than it saves.
	 */
	if (tsc)
		weft__collector_conv_copy(cv, d, &buf[p & mask]);
	else
		*d = buf[p & mask];
	d++;
	p++;
	if (!--k || buf[p & mask].ts > bound) {
		*pos = p;
		return d;
	}
	for (;;) {
		uint64_t i = p & mask, m = mask + 1 - i;
		const weft_event_t *src = buf + i, *e;

		if (m > k)
			m = k;
		e = src + m;
		do {
			if (tsc)
				weft__collector_conv_copy(cv, d, src);
			else
				*d = *src;
			d++;
			src++;
		} while (src < e && src->ts <= bound);
		m = (uint64_t)(src - (buf + i));
		p += m;
		k -= m;
		/* Stopped by a stamp, taken all, or at the ring's end with
		 * its start still to test. */
		if (src < e || !k || buf[p & mask].ts > bound)
			break;
	}
	*pos = p;
	return d;
}

/*
 * Takes the next chunk of the pass's events, earliest first, into
 * p->chunk: a k-way merge over the runs' heads (each ring is in time
 * order), O(log k) an event, read straight from the rings.  Gives the
 * slots taken back to their producers.  Returns how many (0: the pass's
 * events are all taken).  @nheap: the runs left, updated.  Out of line:
 * it runs once a chunk, and inlined into the pass its loop lost the
 * clock's constants to the stack (callgrind).
 */
__attribute__((noinline)) size_t weft__collector_take_chunk(struct probe *p,
							    size_t *nheap)
{
	struct seg_s **h = p->heap;
	size_t n = *nheap, out = 0;
	struct weft__probe_clock_conv cv;
	uint64_t from;

	/*
	 * Each event is converted to ns as it is copied, while its slot is
	 * in L1: a sweep of its own over the chunk afterwards went through
	 * the chunk (larger than L1) once more.  The merge
	 * compares the raw stamps, in the rings and in the heap alike.
	 */
	weft__probe_clock_conv_get(&cv);

	/*
	 * The earliest run gives events up to the next run's head (runs of
	 * a ring tend to come in stretches: a busy worker's while another
	 * idles), then goes back into the heap.
	 */
	while (n && out < CHUNK_EVENTS) {
		struct seg_s *s = h[0];
		const weft_ring_t *r = &s->e->ring;
		uint64_t bound = UINT64_MAX, k = s->end - s->pos, pos, mask;
		const weft_event_t *buf;
		weft_event_t *d;

		if (n > 1)
			bound = h[1]->ts;
		if (n > 2 && h[2]->ts < bound)
			bound = h[2]->ts;
		if (k > CHUNK_EVENTS - out)
			k = CHUNK_EVENTS - out;
		from = pos = s->pos;
		/*
		 * The ring's fields and the run's position in locals: a
		 * store of a weft_event_t may alias any uint64_t, and in
		 * memory they were loaded (and pos stored) again each event.
		 */
		buf = r->buf;
		mask = r->mask;
		d = &p->chunk[out];
		if (n == 1) {
			/*
			 * The last run (one worker's, nearly always, when one
			 * worker runs): all of it, with no stamp to compare,
			 * in at most two stretches the ring's end splits.
			 */
			while (k) {
				uint64_t i = pos & mask, m = mask + 1 - i;

				if (m > k)
					m = k;
				copy_run(&cv, d, buf + i, m);
				d += m;
				pos += m;
				k -= m;
			}
		} else if (cv.tsc) {
			d = merge_run(&cv, true, d, buf, mask, &pos, k, bound);
		} else {
			d = merge_run(&cv, false, d, buf, mask, &pos, k, bound);
		}
		out = (size_t)(d - p->chunk);
		s->pos = pos;
		if (p->flush_rings)
			flush_taken(r, from, pos);
		if (s->pos == s->end)
			h[0] = h[--n];
		else
			seg_head(s);
		heap_down(h, n, 0);
	}
	*nheap = n;
	/*
	 * Release: our reads of the slots taken happen before the producer
	 * sees them free (pairs with its acquire load of head on a full
	 * ring).  Every run's, taken from this chunk or not: a store of the
	 * same value is harmless, and the runs are few.
	 */
	for (size_t i = 0; i < p->nsegs_pass; i++)
		store_release(&p->segs[i].e->ring.head, p->segs[i].pos);
	return out;
}

/* Frees the rings of threads gone, whose last events were just taken. */
void weft__collector_free_orphans(struct probe *p)
{
	ring_entry_t **pp = &p->rings;

	while (*pp) {
		ring_entry_t *e = *pp;

		if (e->last) {
			*pp = e->next;
			weft__ring_fini(&e->ring);
			free(e);
			continue;
		}
		pp = &e->next;
	}
}
