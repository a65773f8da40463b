/* SPDX-License-Identifier: MIT */
/*
 * weft_mutex_t (see mutex.h).  Each thread keeps the list of weft_mutex_t
 * it holds (pushed on lock, unlinked on unlock: a handful at most); the
 * worker checks it when a poll returns PENDING
 * (weft__probe_locks_at_pending()).  The fields besides the pthread mutex
 * are written by the owner while it holds the lock and read by the same
 * thread, so they need no atomics.
 */
#include <string.h>

#include "weft/mutex.h"

#include "probe_internal.h"
#include "runtime_internal.h"

static WEFT_TLS weft_mutex_t *held;

void weft_mutex_init(weft_mutex_t *m, const char *name)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	m->name = name;
}

void weft_mutex_fini(weft_mutex_t *m)
{
	pthread_mutex_destroy(&m->lock);
}

static void taken(weft_mutex_t *m, const char *file, int line)
{
	m->file = file;
	m->line = line;
	m->owner_task = weft__cur_task_id;
	/* ns (not the TSC): the hold time is computed on this thread. */
	m->taken_at = WEFT_PROBE_ON() ? weft__probe_clock_ns() : 0;
	m->held_next = held;
	held = m;
	WEFT_PROBE_EVENT(LOCK_ACQUIRE, m->owner_task, (uintptr_t)m->name, 0);
}

void weft_mutex_lock_at(weft_mutex_t *m, const char *file, int line)
{
	pthread_mutex_lock(&m->lock);
	taken(m, file, line);
}

bool weft_mutex_trylock_at(weft_mutex_t *m, const char *file, int line)
{
	if (pthread_mutex_trylock(&m->lock))
		return false;
	taken(m, file, line);
	return true;
}

void weft_mutex_unlock(weft_mutex_t *m)
{
	weft_mutex_t **pp = &held;

	while (*pp && *pp != m)
		pp = &(*pp)->held_next;
	if (*pp)
		*pp = m->held_next;
	m->held_next = NULL;
	WEFT_PROBE_EVENT(LOCK_RELEASE, m->owner_task, (uintptr_t)m->name, 0);
	m->owner_task = 0;
	pthread_mutex_unlock(&m->lock);
}

bool weft__probe_locks_held(void)
{
	return held != NULL;
}

unsigned weft__probe_locks_at_pending(uint64_t task)
{
	unsigned n = 0;

	for (weft_mutex_t *m = held; m; m = m->held_next) {
		if (m->owner_task != task)
			continue;
		n++;
#if WEFT_PROBE
		if (weft__probe_on()) {
			uint64_t now = weft__probe_clock();
			uint64_t held_ns = m->taken_at
				? weft__probe_clock_ns() - m->taken_at
				: 0;
			uint64_t held_us = held_ns / 1000;

			weft__probe_emit_at(now, WEFT_EV_LOCK_HELD_PENDING, task,
					    (uintptr_t)m->name,
					    held_us > UINT32_MAX ? UINT32_MAX
								 : (uint32_t)held_us);
			weft__probe_emit_at(now, WEFT_EV_LOCK_SITE, task,
					    (uintptr_t)m->file,
					    (uint32_t)m->line);
		}
#endif
	}
	return n;
}
