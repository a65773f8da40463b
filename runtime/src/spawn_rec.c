/* SPDX-License-Identifier: MIT */
/*
 * Spawn records: what every task spawned with the same spec shares (its
 * runtime, poll and drop functions, name, spawn location, kind and state
 * size, and so its allocation class), interned once, so that a task
 * carries one pointer to them instead of the seven fields (issue 21: an
 * idle task's memory).  Rust gets the same from a vtable per future type,
 * made by the compiler; here a spawn looks its record up.
 *
 * The table is process-wide and insert-only: records live in a static
 * array, are filled before they are published and never change or go
 * after that, so a task may hold a pointer to its record for as long as
 * it lives (and outlive its runtime).  A program has a few spawn sites;
 * a record of a runtime that is gone is kept, harmless (a later runtime
 * at the same address finds it, as right for it as for the first).
 *
 * Lookups take no lock: open addressing over slots that go from NULL to
 * a record once (release), read with acquire.  Inserts are serialised by
 * a mutex and look again under it.  When the table is full, or a key's
 * probe sequence is, weft__spawn_rec_get() returns NULL and the spawn
 * keeps the record in its task's own block instead (task.c).
 */
#include <pthread.h>
#include <string.h>

#include "runtime_internal.h"
#include "ring.h"

#define REC_MAX 4096u   /* records */
/* A record's index + 1 is its spawn site's id, which a ring's bitmap of
 * sites announced covers (ring.h). */
_Static_assert(REC_MAX <= WEFT_RING_SITES, "site ids fit the rings' bitmaps");
#define REC_SLOTS 8192u /* hash slots, a power of two */
#define REC_PROBES 32u  /* slots a key may look at */

static weft__spawn_rec_t recs[REC_MAX];
static _Atomic(const weft__spawn_rec_t *) slots[REC_SLOTS];
static unsigned nrecs; /* insert_lock */
/*
 * Set once nrecs reaches REC_MAX, so that a spawn of a spec the table has
 * no room for goes to its task's block without taking insert_lock (every
 * such spawn would, the table's free slots never running out).
 */
static _Atomic bool full;
static pthread_mutex_t insert_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v;
	h *= 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

static uint64_t key_hash(const weft_runtime_t *rt, const weft_spawn_t *spec)
{
	uint64_t h = 0;

	h = mix(h, (uintptr_t)rt);
	h = mix(h, (uintptr_t)spec->poll);
	h = mix(h, (uintptr_t)spec->drop);
	h = mix(h, (uintptr_t)spec->name);
	h = mix(h, (uintptr_t)spec->file);
	h = mix(h, ((uint64_t)(uint32_t)spec->line << 32) ^
			   (uint64_t)spec->size ^
			   ((uint64_t)(uint8_t)spec->kind << 56));
	return h;
}

static bool key_equal(const weft__spawn_rec_t *r, const weft_runtime_t *rt,
		      const weft_spawn_t *spec)
{
	return r->rt == rt && r->poll == spec->poll && r->drop == spec->drop &&
	       r->name == spec->name && r->file == spec->file &&
	       r->line == spec->line && r->state_size == spec->size &&
	       r->kind == (uint8_t)spec->kind;
}

void weft__spawn_rec_fill(weft__spawn_rec_t *rec, weft_runtime_t *rt,
			  const weft_spawn_t *spec, bool inline_rec)
{
	rec->rt = rt;
	rec->poll = spec->poll;
	rec->drop = spec->drop;
	rec->name = spec->name;
	rec->file = spec->file;
	rec->line = spec->line;
	rec->state_size = (uint32_t)spec->size;
	rec->kind = (uint8_t)spec->kind;
	rec->alloc_class = weft__task_alloc_class(
		weft__task_block_size(spec->size, inline_rec));
	rec->site = 0; /* weft__spawn_rec_get() numbers the table's */
}

/*
 * The record for @rt and @spec, or the first empty slot of its probe
 * sequence in *@empty (NULL: none).  Any thread; under insert_lock for a
 * definite answer.
 */
static const weft__spawn_rec_t *lookup(uint64_t h, const weft_runtime_t *rt,
				       const weft_spawn_t *spec,
				       _Atomic(const weft__spawn_rec_t *) **empty)
{
	*empty = NULL;
	for (unsigned i = 0; i < REC_PROBES; i++) {
		_Atomic(const weft__spawn_rec_t *) *slot =
			&slots[(h + i) & (REC_SLOTS - 1)];
		/*
		 * Acquire: pairs with the release in weft__spawn_rec_get()
		 * that published the record, so its fields, written before,
		 * are seen.
		 */
		const weft__spawn_rec_t *r = load_acquire(slot);

		if (!r) {
			*empty = slot;
			return NULL;
		}
		if (key_equal(r, rt, spec))
			return r;
	}
	return NULL;
}

/* The table's record for @rt and @spec (weft__spawn_rec_get()). */
static const weft__spawn_rec_t *get_slow(weft_runtime_t *rt,
					 const weft_spawn_t *spec)
{
	_Atomic(const weft__spawn_rec_t *) *empty;
	uint64_t h = key_hash(rt, spec);
	const weft__spawn_rec_t *r = lookup(h, rt, spec, &empty);
	weft__spawn_rec_t *rec;

	/*
	 * Relaxed: a hint.  Stale false, we take the lock and find the
	 * table full under it.  Set, it stays set (no record ever goes);
	 * seen before the last insert's slot, that spawn keeps its record
	 * in its block, as right as the shared one.
	 */
	if (r || !empty || load_relaxed(&full))
		return r;
	pthread_mutex_lock(&insert_lock);
	/* Again: another thread may have inserted it meanwhile. */
	r = lookup(h, rt, spec, &empty);
	if (r || !empty || nrecs == REC_MAX)
		goto out_unlock;
	rec = &recs[nrecs++];
	if (nrecs == REC_MAX)
		store_relaxed(&full, true);
	weft__spawn_rec_fill(rec, rt, spec, false);
	rec->site = (uint16_t)nrecs; /* its index + 1 */
	/*
	 * Release: orders the record's fields before the slot that names
	 * it; pairs with the acquire in lookup().  Tasks that hold it are
	 * published to other threads by their own release (the queue, the
	 * state word) after this.
	 */
	store_release(empty, rec);
	r = rec;
out_unlock:
	pthread_mutex_unlock(&insert_lock);
	return r;
}

/*
 * Each thread's last records, by poll function, file and line: a loop
 * that spawns from one site (the common case: a task per request, per
 * connection, per item) finds its record with one compare of the key
 * instead of the hash and the probe (~100 instructions of a ~780
 * instruction spawn-and-run under callgrind).  Records are never freed
 * nor changed once published, so a thread may keep pointers to them.
 */
#define MEMO 4u
static WEFT_TLS const weft__spawn_rec_t *memo[MEMO];

const weft__spawn_rec_t *weft__spawn_rec_get(weft_runtime_t *rt,
					     const weft_spawn_t *spec)
{
	/* The file and line too: every fiber's poll function is one. */
	unsigned i =
		(unsigned)((uintptr_t)spec->poll >> 4 ^
			   (uintptr_t)spec->file >> 3 ^ (unsigned)spec->line) &
		(MEMO - 1);
	const weft__spawn_rec_t *r = memo[i];

	if (r && key_equal(r, rt, spec))
		return r;
	r = get_slow(rt, spec);
	if (r)
		memo[i] = r;
	return r;
}
