/* SPDX-License-Identifier: MIT */
/*
 * The collector and the runtime's owned list: naming the tasks spawned
 * before anyone listened, and finishing those whose end a full ring
 * dropped.
 */
#include <stdint.h>
#include <stdlib.h>

#include "collector_internal.h"

/*
 * The runtime's live tasks of owned-list shard @i, into *@buf (grown as
 * needed; the caller frees it).  Returns how many, or SIZE_MAX without
 * memory.
 */
static size_t owned_shard(struct probe *p, unsigned i, weft__task_info_t **buf,
			  size_t *cap)
{
	size_t n;

	while ((n = weft__runtime_tasks(p->rt, i, *buf, *cap)) >
	       *cap) {
		size_t ncap = n + n / 2 + 16;
		weft__task_info_t *nb = realloc(*buf, ncap * sizeof(**buf));

		if (!nb)
			return SIZE_MAX;
		*buf = nb;
		*cap = ncap;
	}
	return n;
}

/*
 * Where @t is parked, from the owned list's @info, when no PARKED_AT has
 * said so: it is sent only when the site changes, so a task parked
 * before anyone listened (the one a dump is for: hung since the start)
 * never sends one.  Returns whether the record changed.
 */
static bool parked_take(task_rec_t *t, const weft__task_info_t *info)
{
	uint32_t line = info->parked_file ? (uint32_t)info->parked_line : 0;

	if (t->parked_seen ||
	    (t->pub.parked_file == info->parked_file &&
	     t->pub.parked_line == line))
		return false;
	t->pub.parked_file = info->parked_file;
	t->pub.parked_line = line;
	return true;
}

/*
 * Tasks spawned before anyone listened.  The collector learns of a task
 * from its events, so one idle since before the first listener (a
 * connection waiting for its next request) would never show, or show
 * without a name.  On the first pass after a listener or a runtime
 * arrives, the runtime's owned list names every live task.  Such a task's
 * state and counts start here (it is not known to have been spawned
 * while we watched: no lost-waker check).
 */
void weft__collector_seed_tasks(struct probe *p, uint64_t now)
{
	weft__task_info_t *buf = NULL;
	size_t cap = 0;

	for (unsigned i = 0; i < WEFT__TASK_SHARDS; i++) {
		size_t n = owned_shard(p, i, &buf, &cap);

		if (n == SIZE_MAX)
			break;
		for (size_t j = 0; j < n; j++) {
			task_rec_t *t =
				weft__collector_task_get(p, buf[j].id, now);

			if (!t)
				continue;
			if (parked_take(t, &buf[j]))
				weft__collector_task_changed(p, t);
			if (t->pub.name || t->pub.file)
				continue;
			t->pub.name = buf[j].name;
			t->pub.file = buf[j].file;
			t->pub.line = (uint32_t)buf[j].line;
			t->pub.state_size = buf[j].state_size;
			t->pub.kind = buf[j].kind;
			weft__collector_leak_spawned(p, t);
			weft__collector_task_changed(p, t);
		}
	}
	free(buf);
}

/*
 * Tasks whose end was dropped.  A record learns that its task finished
 * from the COMPLETE event; where a full ring dropped it, the record would
 * stay live, on the console and in memory, as long as the collector runs.
 * So after drops (at most once a second) the runtime's owned list settles
 * it.  A task is on that list from before its first event until before its
 * COMPLETE (task.c: insert, then the spawn's events; remove, then
 * COMPLETE), and every event this pass folded in was pushed before the
 * pass read its ring's tail (release, acquire), which was before the list
 * is read here under the shards' locks.  So a task of a live record that
 * is not on the list now has completed.  Its record is finished at @now,
 * its status unknown (0), with the events-dropped bit among its warnings.
 * A COMPLETE that was only late (pushed after this pass's snapshot) still
 * sets the time and status when it comes, and takes the bit back.  Only
 * with one runtime: the list is p->rt's, and another's tasks are not on
 * it.  Returns false, with nothing settled, without memory.
 *
 * Which drops: those counted before this pass's snapshot (@drops_before
 * in weft__collector_pass()).  A drop counted during the snapshot can be
 * the end of a task whose first event sits in a ring read before it, left
 * to the next pass; the record that event makes would then wait for the
 * next drop to be settled.  A drop read with acquire in one pass (its
 * count is stored with release, after the producer saw the task's
 * earlier events) has that task's events in the next pass's snapshot.
 */
bool weft__collector_reconcile(struct probe *p, uint64_t now)
{
	weft__task_info_t *buf = NULL;
	size_t cap = 0;
	task_rec_t *t, *next;

	for (t = p->live; t; t = t->lnext)
		t->in_owned = false;
	for (unsigned i = 0; i < WEFT__TASK_SHARDS; i++) {
		size_t n = owned_shard(p, i, &buf, &cap);

		if (n == SIZE_MAX) {
			/* Nothing settled: none is finished. */
			free(buf);
			return false;
		}
		for (size_t j = 0; j < n; j++) {
			if (!(t = weft__collector_task_find(p, buf[j].id)))
				continue;
			t->in_owned = true;
			/*
			 * A PARKED_AT may be among the drops: the list's
			 * site is newer than any event folded in so far
			 * (read after them), and the next event, if one
			 * comes, is newer still.
			 */
			t->parked_seen = false;
			if (parked_take(t, &buf[j]))
				weft__collector_task_changed(p, t);
		}
	}
	free(buf);
	for (t = p->live; t; t = next) {
		weft_event_t end = { .ts = now, .task = t->pub.id,
				     .kind = WEFT_EV_COMPLETE };

		next = t->lnext;
		if (t->in_owned)
			continue;
		weft__collector_on_complete(p, t, &end);
		t->end_unseen = true;
		t->pub.warnings |= 1u << WEFT_WARN_EVENTS_DROPPED;
		p->stats.tasks_end_unseen++;
	}
	return true;
}
