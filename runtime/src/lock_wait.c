/* SPDX-License-Identifier: MIT */
/*
 * Tasks waiting for a lock (an async mutex, a weft_mutex_t), kept whether
 * or not anyone listens (lock_wait_internal.h).
 *
 * The probe learns a wait from its RES_WAIT, emitted only while it
 * listens; a deadlock formed before a console attached (two tasks each
 * parked on the other's mutex since the start: the one a user attaches
 * to find) made no event the collector could ever read, and it said
 * nothing.  So every task's wait for a lock also takes a slot here: the
 * lock, the task, when it began.  A collector that starts reads the slots
 * whose wait it has not heard (weft__runtime_lock_waits()), with each
 * lock's holder, and marks them adopted: such a wait's end then emits
 * the RES_WAIT_END its RES_WAIT would have called for.
 *
 * Cost: a slot is taken only by a task about to sleep for a lock (the
 * slow path, which already takes the lock's queue lock and clones a
 * waker): a shard's mutex and a clock read, twice.  The uncontended
 * lock and unlock pay nothing here.
 *
 * Why the lock a slot names is alive while the collector reads it: a
 * slot is taken before its task waits and let go, under the shard's
 * lock, by the task itself once it holds the lock or has left the queue
 * (weft_semaphore_acquire_fini()), and a lock with a waiter queued, or
 * held, may not be finished (its fini's contract).  The collector reads
 * the lock under the same shard lock.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

#include "lock_wait_internal.h"
#include "resource_internal.h"
#include "runtime_probe.h"
#include "sync_internal.h"

#include "weft/mutex.h"
#include "weft/sync_async.h"
#include "weft/time.h"

#if WEFT_PROBE

#define container_of(p, type, member)                                          \
	((type *)(void *)((char *)(p)-offsetof(type, member)))

#define SHARDS WEFT__LOCK_WAIT_SHARDS
/* Slots a shard holds at most: past that, waits go untold (a handle of
 * 0), as they would without memory. */
#define SLOTS_MAX (1u << 24)

typedef struct slot_s {
	weft_resource_t *res; /* NULL: free (then @task is the next free + 1) */
	weft_runtime_t *rt;
	uint64_t task;
	uint64_t since_ns;
	/* The listening generation whose RES_WAIT told it, 0: untold. */
	uint32_t told_gen;
	/* The generation a collector adopted it in, 0: none. */
	uint32_t adopted_gen;
	uint8_t op;
	uint8_t kind; /* the lock's, as the call site knows it */
} slot_t;

static struct shard_s {
	pthread_mutex_t lock;
	slot_t *v;
	uint32_t n, cap;
	uint32_t free; /* first free slot + 1, 0: none */
} shards[SHARDS] = {
	[0 ... SHARDS - 1] = { .lock = PTHREAD_MUTEX_INITIALIZER },
};

/* A free slot of @s (its lock held), or UINT32_MAX. */
static uint32_t slot_take(struct shard_s *s)
{
	uint32_t i;

	if (s->free) {
		i = s->free - 1;
		s->free = (uint32_t)s->v[i].task;
		return i;
	}
	if (s->n == s->cap) {
		uint32_t ncap = s->cap ? s->cap * 2 : 16;
		slot_t *nv;

		if (ncap > SLOTS_MAX ||
		    !(nv = realloc(s->v, (size_t)ncap * sizeof(*nv))))
			return UINT32_MAX;
		s->v = nv;
		s->cap = ncap;
	}
	return s->n++;
}

uint32_t weft__lock_wait_begin(weft_resource_t *r, uint8_t kind, uint8_t op,
			       uint32_t told)
{
	weft_task_t *t = weft__current_task();
	struct shard_s *s;
	uint32_t i, shard;

	if (!t)
		return 0; /* a plain thread: not a task's wait */
	shard = (uint32_t)(t->id % SHARDS);
	s = &shards[shard];
	pthread_mutex_lock(&s->lock);
	i = slot_take(s);
	if (i != UINT32_MAX)
		s->v[i] = (slot_t){ .res = r,
				    .rt = weft__task_rt(t),
				    .task = t->id,
				    .since_ns = weft_now_ns(),
				    .told_gen = told,
				    .op = op,
				    .kind = kind };
	pthread_mutex_unlock(&s->lock);
	return i == UINT32_MAX ? 0 : i * SHARDS + shard + 1;
}

void weft__lock_wait_end(uint32_t h, uint32_t a2)
{
	struct shard_s *s;
	uint64_t task = 0, id = 0;
	uint32_t i;

	if (!h)
		return;
	s = &shards[(h - 1) % SHARDS];
	i = (h - 1) / SHARDS;
	pthread_mutex_lock(&s->lock);
	/* Adopted by a collector and never told: its end is ours to say. */
	if (s->v[i].adopted_gen && !s->v[i].told_gen) {
		task = s->v[i].task;
		/* Relaxed: the collector gave it its id (weft__res_id()),
		 * under this lock. */
		id = __atomic_load_n(&s->v[i].res->id, __ATOMIC_RELAXED);
	}
	s->v[i].res = NULL;
	s->v[i].task = s->free;
	s->free = i + 1;
	pthread_mutex_unlock(&s->lock);
	if (id && weft__probe_on())
		weft__probe_emit_at(weft__probe_clock(), WEFT_EV_RES_WAIT_END,
				    task, id, a2);
}

/*
 * The task holding lock @r now, 0 if none or not known.  Relaxed: the
 * holder's store is ordered for the collector by the holder's events
 * (weft__runtime_lock_waits() in runtime_probe.h).
 */
static uint64_t holder_of(weft_resource_t *r, uint8_t kind, uint64_t *since,
			  bool *across)
{
	*since = 0;
	*across = false;
	switch (kind) {
	case WEFT_RES_MUTEX:
		return __atomic_load_n(
			&weft__async_mutex_of(
				 container_of(r, weft_semaphore_t, res))
				 ->holder,
			__ATOMIC_RELAXED);
	case WEFT_RES_SYNC_MUTEX: {
		weft_mutex_t *m = container_of(r, weft_mutex_t, res);
		/* Acquire: pairs with taken()'s release (mutex.c). */
		uint64_t task =
			__atomic_load_n(&m->owner_task, __ATOMIC_ACQUIRE);

		/* Its hold's start (CLOCK_MONOTONIC ns, as weft_now_ns()),
		 * this holder's or a later one's. */
		if (task) {
			uint64_t a = __atomic_load_n(&m->across_task,
						     __ATOMIC_RELAXED);

			*since =
				__atomic_load_n(&m->taken_at, __ATOMIC_RELAXED);
			/* Its holder returned PENDING holding it, unheard
			 * (mutex.c weft__mutex_pending_unheard()). */
			*across = a == task;
		}
		return task;
	}
	default:
		return 0;
	}
}

size_t weft__runtime_lock_waits(weft_runtime_t *rt, unsigned shard,
				uint32_t gen, weft__lock_wait_info_t *out,
				size_t cap)
{
	struct shard_s *s = &shards[shard % SHARDS];
	uint64_t holder, held_since;
	bool across;
	size_t n = 0;

	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->n; i++) {
		slot_t *v = &s->v[i];

		if (v->res && v->rt == rt && v->told_gen != gen &&
		    v->adopted_gen != gen)
			n++;
	}
	if (n > cap) {
		pthread_mutex_unlock(&s->lock);
		return n;
	}
	n = 0;
	for (uint32_t i = 0; i < s->n; i++) {
		slot_t *v = &s->v[i];
		weft_resource_t *r = v->res;

		if (!r || v->rt != rt || v->told_gen == gen ||
		    v->adopted_gen == gen)
			continue;
		v->adopted_gen = gen;
		holder = holder_of(r, v->kind, &held_since, &across);
		out[n++] = (weft__lock_wait_info_t){
			.task = v->task,
			.res = weft__res_id(r),
			.holder = holder,
			.holder_since_ns = held_since,
			.holder_across = across,
			.since_ns = v->since_ns,
			/* Relaxed: see resource.c announce(). */
			.name = __atomic_load_n(&r->name, __ATOMIC_RELAXED),
			.file = r->file,
			.line = r->line,
			.kind = v->kind,
			.op = v->op,
		};
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

#else /* !WEFT_PROBE */

size_t weft__runtime_lock_waits(weft_runtime_t *rt, unsigned shard,
				uint32_t gen, weft__lock_wait_info_t *out,
				size_t cap)
{
	(void)rt, (void)shard, (void)gen, (void)out, (void)cap;
	return 0;
}

#endif
