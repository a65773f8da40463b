/* SPDX-License-Identifier: MIT */
/*
 * The collector's record cache: the table of task records (found by id,
 * collector_internal.h), the pools they and their histograms come from,
 * the live and done lists, the retiring of finished tasks, and the waker
 * counts of tasks not recorded yet (weft__collector_early_waker()).
 */
#include <stdlib.h>
#include <string.h>

#include "collector_internal.h"
#include "pages_internal.h"

static void table_grow(struct probe *p)
{
	size_t nsize = p->table_size * 2;
	task_rec_t **nt = calloc(nsize, sizeof(*nt));
	size_t osize = p->table_size;
	task_rec_t **ot = p->table;

	if (!nt)
		return; /* keep the longer chains */
	p->table = nt;
	p->table_size = nsize;
	for (size_t i = 0; i < osize; i++) {
		task_rec_t *t = ot[i];

		while (t) {
			task_rec_t *next = t->hnext;
			size_t h = weft__collector_hash_of(p, t->pub.id);

			t->hnext = nt[h];
			nt[h] = t;
			t = next;
		}
	}
	free(ot);
}

/*
 * A record's polls taken by poll_fast() and not yet counted (task_rec_t's
 * fast_n ...) added to its counts, sums and histograms: out of line, it
 * runs once a task a chunk.
 */
__attribute__((noinline)) void weft__collector_fast_fold(task_rec_t *t)
{
	uint64_t n = t->fast_n, delay = t->fast_delay, dur;

	if (!n)
		return;
	/* Their delays and times end at woken_at (task_rec_t's fast_base). */
	dur = t->woken_at - t->fast_base - delay;
	t->pub.polls += n;
	t->pub.wakes += n;
	t->pub.self_wakes += n;
	t->self_polls += (uint32_t)n;
	t->pub.busy_ns += dur;
	t->self_poll_ns += dur;
	t->pub.scheduled_ns += delay;
	/* Set: fast_n's polls are a task's second or later. */
	t->hist[0].count += n;
	t->hist[0].sum_ns += dur;
	t->hist[1].count += n;
	t->hist[1].sum_ns += delay;
	t->fast_n = 0;
	t->fast_delay = 0;
	/* Looked up: poll_fast() tests the record again (fast_n was not 0,
	 * so it is on the chunk's list). */
	t->fast_listed = TASK_FAST_LISTED;
}

/* weft__collector_task() - what the collector knows of task @id, or NULL;
 * probe.lock held (the record is valid until it is released). */
const weft_probe_task_t *weft__collector_task(struct probe *p, uint64_t id)
{
	task_rec_t *t;

	if (!p->table || !p->table_size)
		return NULL;
	t = weft__collector_task_find(p, id);
	return t ? &t->pub : NULL;
}

static void live_add(struct probe *p, task_rec_t *t)
{
	t->lprev = NULL;
	t->lnext = p->live;
	if (p->live)
		p->live->lprev = t;
	p->live = t;
}

/*
 * Task records and histograms come from pools of blocks: a huge page (2
 * MiB) where the kernel offers them, else 256 KiB.  Taken one calloc() at
 * a time, a service spawning tens of thousands of tasks a second had the
 * collector's malloc arena growing a page per mprotect() and faulting
 * each page in: most of the collector's time in chained_spawn (perf:
 * sysmalloc and the page-fault path, 45%).  Freed items go back on the
 * pool's list; blocks are unmapped only when the collector stops, so the
 * pools hold the peak of what was tracked at once (live tasks plus at
 * most retain_max finished ones).
 */
static size_t pool_block_bytes(void)
{
	size_t huge = weft__pages_huge();

	return huge ? huge : 256u * 1024u;
}

/* Under ASan, an item given back is poisoned until taken again. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POOL_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define POOL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POOL_POISON(p, n) ((void)(p), (void)(n))
#define POOL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

void *weft__collector_pool_get(struct pool *pl, size_t size)
{
	void *it = pl->free;

	if (it) {
		POOL_UNPOISON(it, size);
		pl->free = *(void **)it;
		/*
		 * The next item given back, fetched now for the next call:
		 * it was freed a pass ago and is out of cache, and the
		 * memset below waited on each line of this one (perf,
		 * chained_spawn: the most of task_new's time).
		 */
		if (pl->free)
			for (size_t o = 0; o < size; o += 64)
				__builtin_prefetch((char *)pl->free + o, 1);
	} else {
		if (!pl->left) {
			size_t bytes = pool_block_bytes();
			size_t n = (bytes - sizeof(void *)) / size;
			/*
			 * Faulted in with the mapping, up front: touched a
			 * page at a time, a block's faults were the
			 * collector's main cost in chained_spawn even from a
			 * pool (perf: task_new and the fault path, 45%;
			 * faults are dear in a VM, see pages.c).
			 */
			char *b = weft__pages_map(bytes, true);

			if (!b)
				return NULL;
			/* A mapping where an unmapped block was may still
			 * carry its poison. */
			POOL_UNPOISON(b, bytes);
			/* The block's first word chains the blocks. */
			*(void **)b = pl->blocks;
			pl->blocks = b;
			pl->next = b + sizeof(void *);
			pl->left = n;
		}
		it = pl->next;
		pl->next += size;
		pl->left--;
	}
	memset(it, 0, size);
	return it;
}

static void pool_put(struct pool *pl, void *it, size_t size)
{
	*(void **)it = pl->free;
	pl->free = it;
	/* The link word stays readable: weft__collector_pool_get() takes it. */
	POOL_POISON((char *)it + sizeof(void *), size - sizeof(void *));
}

void weft__collector_pool_fini(struct pool *pl)
{
	while (pl->blocks) {
		void *b = pl->blocks;

		pl->blocks = *(void **)b;
		POOL_UNPOISON(b, pool_block_bytes());
		weft__pages_unmap(b, pool_block_bytes());
	}
	memset(pl, 0, sizeof(*pl));
}

/*
 * Waker events of @id, a task with no record: @delta to its outstanding
 * (a WAKER_CLONE +1, a WAKER_DROP or a WAKE by value -1), @clones and
 * @drops to its counts, held for its record's creation to settle
 * (early_settle()).  A task's first POLL can make its record, its SPAWN
 * read a pass later (a ring read early: see the SPAWN case in
 * collector_events.c); a drop or a wake by value of a clone made in that
 * poll, on another thread, is read before it.  Ignored, the POLL's count
 * of the clone left outstanding at +1 for good: a task left with no
 * waker was never warned.
 *
 * A waker of a task retired long ago (ids are never reused) comes here
 * too, and stays until its slot is wanted.  Its record comes within a
 * pass or two of such an event, or never: a slot older than EARLY_PASSES
 * is free for another id.  A count lost so (a slot taken while young, or
 * one that added a clone: too few would be outstanding, a false "no
 * waker left") makes the records of the next EARLY_PASSES passes
 * wakers_unsure, never checked for a lost waker: a warning missed rather
 * than a wrong one.  One slot an id, by its low bits: a new task's id is
 * next to the one before (weft__collector_hash_of()).
 */
__attribute__((noinline, cold)) void
weft__collector_early_waker(struct probe *p, uint64_t id, int32_t delta,
			    uint32_t clones, uint32_t drops)
{
	struct early_waker *e = &p->early[id & (EARLY_WAKERS - 1)];

	if (e->id != id) {
		if (!e->id)
			p->nearly++;
		else if (e->delta > 0 ||
			 (e->delta < 0 &&
			  p->early_pass - e->pass <= EARLY_PASSES))
			p->early_unsure_until =
				p->early_pass + EARLY_PASSES + 1;
		*e = (struct early_waker){ .id = id, .pass = p->early_pass };
	}
	e->delta += delta;
	e->clones += clones;
	e->drops += drops;
}

/* @t, new: its early waker counts, if any, and whether to trust them. */
static void early_settle(struct probe *p, task_rec_t *t)
{
	struct early_waker *e = &p->early[t->pub.id & (EARLY_WAKERS - 1)];

	if (p->early_pass < p->early_unsure_until)
		t->wakers_unsure = true;
	if (e->id != t->pub.id)
		return;
	t->outstanding += e->delta;
	t->pub.waker_clones += e->clones;
	t->pub.waker_drops += e->drops;
	*e = (struct early_waker){ 0 };
	p->nearly--;
}

/* A task first heard of: out of line, so that finding one saves nothing. */
__attribute__((noinline)) task_rec_t *
weft__collector_task_new(struct probe *p, uint64_t id, uint64_t now)
{
	task_rec_t *t = weft__collector_pool_get(&p->rec_pool, sizeof(*t));
	size_t h;

	if (!t)
		return NULL;
	t->pub.id = id;
	t->pub.spawned_ns = now;
	/* Until its SPAWN says when (collector_events.c). */
	t->pub.spawn_unseen = 1;
	t->pub.state = WEFT_TASK_IDLE;
	t->pub.last_worker = WEFT_EVENT_NO_WORKER;
	t->fast_key = weft__collector_poll_key(WEFT_EVENT_NO_WORKER);
	t->spawn_worker = WEFT_EVENT_NO_WORKER;
	t->woken_on = WEFT_EVENT_NO_WORKER;
	/*
	 * Not idle_since_ns: a record made here is a task heard of first
	 * now (spawned, or seeded from the owned list, parked since before
	 * anyone listened); only a pending POLL says when its stretch began.
	 */
	t->idle_since = now;
	if (p->ntasks >= p->table_size)
		table_grow(p);
	h = weft__collector_hash_of(p, id);
	t->hnext = p->table[h];
	p->table[h] = t;
	p->ntasks++;
	live_add(p, t);
	/* Nothing held and nothing lost (nearly always): two tests.  A
	 * stale slot kept (a retired task's) costs a slot's look. */
	if (p->nearly || p->early_pass < p->early_unsure_until)
		early_settle(p, t);
	return t;
}

void weft__collector_task_free(struct probe *p, task_rec_t *t)
{
	if (p->last_found == t)
		p->last_found = NULL;
	task_rec_t **pp = &p->table[weft__collector_hash_of(p, t->pub.id)];

	while (*pp && *pp != t)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = t->hnext;
	p->ntasks--;
	if (t->site)
		weft__collector_leak_done(p, t);
	if (!t->in_done)
		weft__collector_live_remove(p, t);
	if (t->hist)
		pool_put(&p->hist_pool, t->hist, 2 * sizeof(*t->hist));
	pool_put(&p->rec_pool, t, sizeof(*t));
}

/* The oldest finished task off the done ring, retired: freed, unless
 * publish() still owes its record (it frees it once sent). */
static void done_pop(struct probe *p)
{
	task_rec_t *t = p->done[p->done_first].t;

	p->done_first = (p->done_first + 1) & (p->done_cap - 1);
	p->ndone--;
	t->retired = true;
	if (!t->changed)
		weft__collector_task_free(p, t);
}

void weft__collector_done_push(struct probe *p, task_rec_t *t)
{
	if (p->ndone == p->done_cap) {
		size_t ncap = p->done_cap ? 2 * p->done_cap : 1024;
		struct done_ent *nd = malloc(ncap * sizeof(*nd));

		if (!nd) {
			/* No room to keep one more: the oldest goes now. */
			if (!p->ndone) {
				t->retired = true;
				return; /* freed by publish(), once sent */
			}
			done_pop(p);
		} else {
			/* Unwrapped into the new ring, from its start. */
			for (size_t i = 0; i < p->ndone; i++)
				nd[i] = p->done[(p->done_first + i) &
						(p->done_cap - 1)];
			free(p->done);
			p->done = nd;
			p->done_cap = ncap;
			p->done_first = 0;
		}
	}
	p->done[(p->done_first + p->ndone) & (p->done_cap - 1)] =
		(struct done_ent){ .t = t, .finished_ns = t->pub.finished_ns };
	p->ndone++;
}

/* How far ahead weft__collector_retire() fetches the records it frees. */
#define RETIRE_AHEAD 8

void weft__collector_retire(struct probe *p, uint64_t now)
{
	/*
	 * By age, and by count: a service spawning a million tasks a second
	 * would otherwise keep six million records (gigabytes) in here.
	 * Each record freed is cold (it finished thousands of tasks ago):
	 * the lines task_free() reads of the one RETIRE_AHEAD further on
	 * are fetched meanwhile.
	 */
	while (p->ndone &&
	       (p->done[p->done_first].finished_ns + p->config.retain_ns <
			now ||
		p->ndone > p->config.retain_max)) {
		if (p->ndone > RETIRE_AHEAD) {
			task_rec_t *n = p->done[(p->done_first + RETIRE_AHEAD) &
						(p->done_cap - 1)]
						.t;

			__builtin_prefetch(n, 1);
			__builtin_prefetch(&n->hnext, 1);
			__builtin_prefetch(&n->hist);
			__builtin_prefetch(&n->fast_word);
		}
		done_pop(p);
	}
}
