/* SPDX-License-Identifier: MIT */
/*
 * The model's index of tasks by id (console.h): an open-addressed table
 * of slots into the task records, deleted slots kept until they
 * outnumber the tasks, then rebuilt (model.c makes and frees the
 * records, model_retain.c deletes the finished ones in place).
 */
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "model_internal.h"

/*
 * Ids come in dense runs (the runtime hands them out in blocks), so the
 * low bits spread them best: neighbouring tasks land in neighbouring
 * slots, one cache line for eight, where a multiplicative hash scattered
 * every lookup over the whole table (the console's hottest loop at 40,000
 * new tasks a second).  The higher bits are folded in so that ids a
 * multiple of the capacity apart do not all collide.
 */
static size_t slot_of(uint64_t id, size_t cap)
{
	return (size_t)(id ^ (id >> 17) ^ (id >> 34) ^ (id >> 51)) & (cap - 1);
}

/* The first free slot (empty or deleted) on @id's probe. */
void con_model_hash_put(con_model_t *m, size_t i)
{
	size_t cap = m->hash_cap, j = slot_of(m->tasks[i]->id, cap);

	while (m->hash[j] && m->hash[j] != CON_HASH_TOMB)
		j = (j + 1) & (cap - 1);
	if (m->hash[j] == CON_HASH_TOMB)
		m->hash_tombs--;
	m->hash[j] = (uint32_t)i + 1;
}

/* The index rebuilt for ntasks with @want slots at least (and 1024). */
static void hash_rebuild_at(con_model_t *m, size_t want)
{
	size_t cap = 1024;

	while (cap < want)
		cap *= 2;
	if (cap != m->hash_cap) {
		free(m->hash);
		m->hash = con_xcalloc(cap, sizeof(*m->hash));
		m->hash_cap = cap;
	} else {
		memset(m->hash, 0, cap * sizeof(*m->hash));
	}
	m->hash_tombs = 0;
	/* Each record's id, then its slot, fetched ahead: tasks[] is in
	 * no order, and every record and slot was a miss (issue 21: 3% of
	 * a live console's time at 60,000 tasks a second, a rebuild every
	 * 100,000 tasks gone). */
	for (size_t i = 0; i < m->ntasks; i++) {
		if (i + 16 < m->ntasks)
			__builtin_prefetch(m->tasks[i + 16]);
		if (i + 8 < m->ntasks)
			__builtin_prefetch(
				&m->hash[slot_of(m->tasks[i + 8]->id, cap)], 1);
		con_model_hash_put(m, i);
	}
}

/* Rebuild the index for ntasks at a load of at most a half. */
void con_model_hash_rebuild(con_model_t *m)
{
	hash_rebuild_at(m, 2 * m->ntasks + 2);
}

/*
 * Deleted slots (retention deletes in place, model_retain.c) lengthen
 * the probes as live ones do: once both fill half the index, it is
 * rebuilt at a load of at most a quarter, so that the next rebuild is as
 * many deletions away as there are tasks (a deletion costs O(1),
 * amortised, not a rebuild of the whole index per batch); and smaller
 * once the tasks fill less than a sixteenth of it.  Also once the
 * deleted slots outnumber the tasks: ids are dense and slot_of() keeps
 * their order, so deleted ones make one long run with the live, and a
 * lookup of an id no longer there walked all of it (2,000 tasks of which
 * 1,500 deleted: a miss was a thousand probes; test_console_model's
 * retention case took 11 s, 0.09 s with this, and timed out under
 * valgrind).
 */
void con_model_hash_tidy(con_model_t *m)
{
	if (2 * (m->ntasks + m->hash_tombs) + 2 > m->hash_cap ||
	    m->hash_tombs > m->ntasks + 64 ||
	    (m->hash_cap > 1024 && 16 * (m->ntasks + 1) < m->hash_cap))
		hash_rebuild_at(m, 4 * m->ntasks + 4);
}

size_t con_model_hash_slot(const con_model_t *m, uint64_t id)
{
	size_t j = slot_of(id, m->hash_cap);

	while (m->hash[j] == CON_HASH_TOMB ||
	       m->tasks[m->hash[j] - 1]->id != id)
		j = (j + 1) & (m->hash_cap - 1);
	return j;
}

CON_NOIPA void con_model_task_prefetch(const con_model_t *m, uint64_t id,
				       int stage)
{
	size_t j = slot_of(id, m->hash_cap);
	uint32_t v;

	if (stage == 0) {
		__builtin_prefetch(&m->hash[j]);
		return;
	}
	v = m->hash[j]; /* fetched by stage 0 */
	if (!v || v == CON_HASH_TOMB || v > m->ntasks)
		return;
	if (stage == 1) {
		__builtin_prefetch(&m->tasks[v - 1]);
		return;
	}
	/* Its id and links, its finish time, its flags. */
	__builtin_prefetch(m->tasks[v - 1], 1);
	__builtin_prefetch((const char *)m->tasks[v - 1] + 64, 1);
	__builtin_prefetch(
		(const char *)m->tasks[v - 1] + sizeof(con_task_t) - 1, 1);
}

const con_task_t *con_model_task(const con_model_t *m, uint64_t id)
{
	size_t i = slot_of(id, m->hash_cap);

	while (m->hash[i]) {
		if (m->hash[i] != CON_HASH_TOMB) {
			const con_task_t *t = m->tasks[m->hash[i] - 1];

			if (t->id == id)
				return t;
		}
		i = (i + 1) & (m->hash_cap - 1);
	}
	return NULL;
}
