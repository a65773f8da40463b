/* SPDX-License-Identifier: MIT */
/*
 * Await sites' ids, for the probe (POLL a2 and AWAIT_SITE: see
 * weft/probe_events.h).  Each WEFT_AWAIT, WEFT_YIELD and fiber await is a
 * static weft_site_t; a pending poll whose task now parks at another one
 * names it by a small number in its POLL rather than by a PARKED_AT event
 * of its own (issue 21: two events of a /fast-task request's twelve).
 * The number is the site's place in a process-wide table, + 1: given
 * once, never reused, so a reader that met a site's announcement may
 * trust the id for as long as the process runs.
 *
 * The table is keyed by the site's address: weft_site_t keeps the two
 * fields WEFT_AWAIT makes (a public layout, and a const static: no room
 * for an id in it).  It is insert-only, as the spawn records are
 * (spawn_rec.c): lookups take no lock (open addressing over slots that go
 * from NULL to a site once, with release; read with acquire), inserts are
 * serialised by a mutex and look again under it.  Each thread keeps the
 * last sites it looked up in a small direct-mapped cache of its own, so
 * that a worker whose tasks park at a few places pays two loads and a
 * compare a change of place.  Full (or a key's probe sequence is): 0, no
 * id, and the poll says where with a PARKED_AT, as before.
 *
 * Keyed by the address alone, and never forgotten: code unloaded
 * (dlclose()) and other code loaded at the same address would have its
 * site found under the old one's id, its polls shown at the old site's
 * file and line (readers keep an id's place for the process's life).
 * Not detected: await sites, like spawn names (spawn_rec.c), require code
 * that is never unloaded (weft/future.h, weft_site_t).
 */
#include <pthread.h>

#include "runtime_internal.h"
#include "ring.h"

#define SITE_MAX 4096u /* ids 1 .. SITE_MAX */
/* A ring's bitmap of await sites announced covers every id (ring.h). */
_Static_assert(SITE_MAX <= WEFT_RING_AWAITS, "ids fit the rings' bitmaps");
_Static_assert(SITE_MAX <= UINT16_MAX, "ids fit the slots' ids");
#define SLOTS 8192u /* hash slots, a power of two */
#define PROBES 32u  /* slots a key may look at */
#define CACHE 8u    /* a thread's cache, a power of two */

static _Atomic(const weft_site_t *) keys[SLOTS];
/* Slot i's site's id: written before keys[i] is published, never after. */
static uint16_t ids[SLOTS];
static unsigned nsites; /* insert_lock */
/* Set once nsites reaches SITE_MAX: no lock taken for a table full. */
static _Atomic bool full;
static pthread_mutex_t insert_lock = PTHREAD_MUTEX_INITIALIZER;

/* The thread's last sites: the owner's alone, so plain accesses. */
static WEFT_TLS struct {
	const weft_site_t *site;
	uint32_t id;
} cache[CACHE];

static uint64_t hash_of(const weft_site_t *site)
{
	uint64_t h = (uintptr_t)site * 0x9e3779b97f4a7c15ull;

	return h ^ (h >> 29);
}

/* Slot index of @site, or of the first empty slot of its sequence in
 * *@empty (SLOTS: none); the id, 0 when not in the table. */
static uint32_t lookup(const weft_site_t *site, uint64_t h, unsigned *empty)
{
	*empty = SLOTS;
	for (unsigned i = 0; i < PROBES; i++) {
		unsigned k = (unsigned)((h + i) & (SLOTS - 1));
		/*
		 * Acquire: pairs with the release in slow() that published
		 * the key, so the id written before it is seen.
		 */
		const weft_site_t *s = load_acquire(&keys[k]);

		if (!s) {
			*empty = k;
			return 0;
		}
		if (s == site)
			return ids[k];
	}
	return 0;
}

/* The table's answer for @site, inserting it if need be. */
__attribute__((noinline)) static uint32_t slow(const weft_site_t *site)
{
	uint64_t h = hash_of(site);
	unsigned empty;
	uint32_t id = lookup(site, h, &empty);

	/*
	 * Relaxed: a hint.  Stale false, we take the lock and find the
	 * table full under it; set, it stays set (no site ever goes).
	 */
	if (id || empty == SLOTS || load_relaxed(&full))
		return id;
	pthread_mutex_lock(&insert_lock);
	/* Again: another thread may have inserted it meanwhile. */
	id = lookup(site, h, &empty);
	if (id || empty == SLOTS || nsites == SITE_MAX)
		goto out_unlock;
	id = ++nsites;
	if (nsites == SITE_MAX)
		store_relaxed(&full, true);
	ids[empty] = (uint16_t)id;
	/*
	 * Release: orders the id before the key that makes the slot found;
	 * pairs with the acquire in lookup().
	 */
	store_release(&keys[empty], site);
out_unlock:
	pthread_mutex_unlock(&insert_lock);
	return id;
}

uint32_t weft__await_site_id(const weft_site_t *site)
{
	/* Sites are 16 bytes apart at best: the bits above those pick. */
	unsigned k = (unsigned)((uintptr_t)site >> 4) & (CACHE - 1);
	uint32_t id;

	if (__builtin_expect(cache[k].site == site, 1))
		return cache[k].id;
	id = slow(site);
	/* Not one without an id: a full table is asked again, cheaply. */
	if (id) {
		cache[k].site = site;
		cache[k].id = id;
	}
	return id;
}
