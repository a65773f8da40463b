/* SPDX-License-Identifier: MIT */
/*
 * Task memory: size-classed caches so that spawning does not go through
 * malloc on every task.  glibc returns a freed arena top to the kernel and
 * faults it back in on the next burst of spawns, which costs more than the
 * spawn itself; recycling blocks avoids that, with bounded memory.
 *
 * Every block is an ordinary malloc() block of its class's size, so any
 * block may always be handed back with free().  Each worker keeps a private
 * free list per class (no atomics, no lock).  Past WORKER_MAX blocks it
 * moves a chain of CHAIN blocks to the depot; an empty list refills with a
 * chain from the depot, else from malloc.  The depot is process-wide (so a
 * task that outlives its runtime can still be recycled), mutex-guarded,
 * and keeps at most DEPOT_BYTES per class; beyond that blocks are freed.
 * Threads that are not workers keep a thread-local cache the same way.
 * The classes' sizes (runtime_internal.h) are glibc's chunk sizes less
 * its 8-byte header, so a block costs its class and nothing more.
 *
 * Recycling hides a use after free from ASan and valgrind, so ASan builds
 * never cache, and WEFT_TASK_CACHE=0 turns caching off at run time (the
 * test script's valgrind phase sets it).
 */
#include <errno.h>
#include <string.h>

#include "knob.h"
#include "runtime_internal.h"

#define WORKER_MAX 512u         /* blocks a worker keeps per class */
#define CHAIN 256u              /* blocks moved to or from the depot at once */
#define DEPOT_BYTES (4u << 20)  /* bytes the depot keeps per class */
#define DEPOT_CHAINS 128u       /* chain slots per class */

static const uint32_t class_size[TASK_ALLOC_CLASSES] = TASK_ALLOC_CLASS_SIZES;

typedef struct block_s {
	struct block_s *next;
} block_t;

typedef struct chain_s {
	block_t *head;
	uint32_t n;
} chain_t;

typedef struct depot_class_s {
	chain_t full[DEPOT_CHAINS]; /* chains of exactly CHAIN blocks */
	uint32_t nfull;
} depot_class_t;

static struct {
	pthread_mutex_t lock;
	depot_class_t cls[TASK_ALLOC_CLASSES];
} depot = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* -1 unknown, 0 off, 1 on; decided once (any thread may race to it). */
static _Atomic int cache_on = -1;

static bool caching(void)
{
	/* Relaxed: every racer computes the same value. */
	int on = load_relaxed(&cache_on);

	if (on < 0) {
		/* Read (and a bad value said) in every build. */
		on = weft__knob_bool("WEFT_TASK_CACHE", true);
#if defined(WEFT_ASAN)
		/* ASan checks each task's own allocation: no cache. */
		on = 0;
#endif
		store_relaxed(&cache_on, on);
	}
	return on;
}

static int class_of(size_t size)
{
	for (int c = 0; c < TASK_ALLOC_CLASSES; c++)
		if (size <= class_size[c])
			return c;
	return TASK_ALLOC_DIRECT;
}

static bool depot_has_room(const depot_class_t *dc, int c, uint32_t n)
{
	uint64_t blocks = (uint64_t)dc->nfull * CHAIN + n;

	return blocks * class_size[c] <= DEPOT_BYTES;
}

static void free_chain(block_t *b)
{
	while (b) {
		block_t *next = b->next;

		free(b);
		b = next;
	}
}

static bool depot_take_chain(int c, chain_t *out)
{
	depot_class_t *dc = &depot.cls[c];
	bool got = false;

	pthread_mutex_lock(&depot.lock);
	if (dc->nfull) {
		*out = dc->full[--dc->nfull];
		got = true;
	}
	pthread_mutex_unlock(&depot.lock);
	return got;
}

static void depot_put_chain(int c, block_t *head)
{
	depot_class_t *dc = &depot.cls[c];

	pthread_mutex_lock(&depot.lock);
	if (dc->nfull < DEPOT_CHAINS && depot_has_room(dc, c, CHAIN)) {
		dc->full[dc->nfull++] = (chain_t){ head, CHAIN };
		head = NULL;
	}
	pthread_mutex_unlock(&depot.lock);
	free_chain(head);
}

/*
 * Counts a task of @rt coming into being: on our own worker in a plain
 * field, elsewhere in rt->task_balance (see weft__runtime_shell_release()).
 */
static void count_alloc(weft_runtime_t *rt, weft_worker_t *w)
{
	if (w && w->rt == rt)
		w->task_allocs++;
	else
		/* Relaxed: a count; destroy reads it after its own RMW. */
		atomic_fetch_add_explicit(&rt->task_balance, 1,
					  memory_order_relaxed);
}

/* A free list (a worker's, or a foreign thread's): refill from the depot. */
static block_t *cache_pop(worker_cache_t *wc, int c)
{
	block_t *b;

	if (!wc->head) {
		chain_t ch;

		if (!depot_take_chain(c, &ch))
			return malloc(class_size[c]);
		wc->head = ch.head;
		wc->n = ch.n;
	}
	b = wc->head;
	wc->head = b->next;
	wc->n--;
	return b;
}

/* Pushes @b; past WORKER_MAX, the newest CHAIN blocks go to the depot. */
static void cache_push(worker_cache_t *wc, int c, block_t *b)
{
	block_t *last;

	b->next = wc->head;
	wc->head = b;
	if (++wc->n <= WORKER_MAX)
		return;
	last = wc->head;
	for (uint32_t i = 1; i < CHAIN; i++)
		last = last->next;
	b = wc->head;
	wc->head = last->next;
	last->next = NULL;
	wc->n -= CHAIN;
	depot_put_chain(c, b);
}

/*
 * Threads that are not workers (a main thread spawning, or dropping join
 * handles) keep a cache of their own too, handed back to the depot when
 * the thread exits.
 */
static WEFT_TLS worker_cache_t foreign[TASK_ALLOC_CLASSES];
static WEFT_TLS bool foreign_registered;
static pthread_once_t foreign_once = PTHREAD_ONCE_INIT;
static pthread_key_t foreign_key;

static void foreign_exit(void *arg)
{
	(void)arg;
	for (int c = 0; c < TASK_ALLOC_CLASSES; c++) {
		free_chain(foreign[c].head);
		foreign[c].head = NULL;
		foreign[c].n = 0;
	}
}

static void foreign_key_create(void)
{
	pthread_key_create(&foreign_key, foreign_exit);
}

static worker_cache_t *foreign_cache(int c)
{
	if (!foreign_registered) {
		foreign_registered = true;
		pthread_once(&foreign_once, foreign_key_create);
		/* Any non-NULL value makes the destructor run at exit. */
		pthread_setspecific(foreign_key, foreign);
	}
	return &foreign[c];
}

/* The class of a block of @size bytes: the same for a size, always. */
uint8_t weft__task_alloc_class(size_t size)
{
	return (uint8_t)(caching() ? class_of(size) : TASK_ALLOC_DIRECT);
}

static void *alloc_block(weft_runtime_t *rt, weft_worker_t *w, size_t size,
			 uint8_t c)
{
	if (c == TASK_ALLOC_DIRECT)
		return malloc(size);
	if (w && w->rt == rt)
		return cache_pop(&w->cache[c], c);
	return cache_pop(foreign_cache(c), c);
}

void *weft__task_alloc(weft_runtime_t *rt, size_t size, uint8_t cls)
{
	weft_worker_t *w = weft__cur_worker;
	void *p = alloc_block(rt, w, size, cls);

	if (p)
		count_alloc(rt, w);
	return p;
}

static void free_block(weft_runtime_t *rt, weft_worker_t *w, void *p,
		       uint8_t cls)
{
	if (cls == TASK_ALLOC_DIRECT) {
		free(p);
		return;
	}
	/* A worker caches blocks of its own runtime's tasks only. */
	if (w && w->rt == rt)
		cache_push(&w->cache[cls], cls, p);
	else
		cache_push(foreign_cache(cls), cls, p);
}

void weft__task_free(weft_runtime_t *rt, void *p, uint8_t cls)
{
	weft_worker_t *w = weft__cur_worker;

	free_block(rt, w, p, cls);
	/*
	 * Last: this may release the runtime's shell (when @rt is being or
	 * has been destroyed, and this was its last task).  On our own
	 * worker the runtime is alive; elsewhere the task kept it alive.
	 */
	if (w && w->rt == rt)
		w->task_frees++;
	else
		weft__runtime_shell_release(rt, 1);
}

void weft__worker_cache_fini(weft_worker_t *w)
{
	for (int c = 0; c < TASK_ALLOC_CLASSES; c++) {
		free_chain(w->cache[c].head);
		w->cache[c].head = NULL;
		w->cache[c].n = 0;
	}
}
