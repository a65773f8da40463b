/* SPDX-License-Identifier: MIT */
/*
 * The collector and the runtime's owned list: naming the tasks spawned
 * before anyone listened, and finishing those whose end a full ring
 * dropped or that ended in a gap in listening (weft__collector_gap()).
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

	while ((n = weft__runtime_tasks(p->rt, i, *buf, *cap)) > *cap) {
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
 * Where @t is parked, from the owned list's @info, when no event (a POLL
 * naming its await site, a PARKED_AT) has said so: it is sent only when
 * the site changes, so a task parked before anyone listened (the one a
 * dump is for: hung since the start) never sends one.  Returns whether
 * the record changed.
 */
static bool parked_take(task_rec_t *t, const weft__task_info_t *info)
{
	uint32_t line = info->parked_file ? (uint32_t)info->parked_line : 0;

	if (t->parked_seen || (t->pub.parked_file == info->parked_file &&
			       t->pub.parked_line == line))
		return false;
	t->pub.parked_file = info->parked_file;
	t->pub.parked_line = line;
	return true;
}

/*
 * Left queued or running by a poll not heard (its POLL dropped, or run in
 * a gap in listening), and idle now by the owned list's @info: idle, from
 * now at least.  The list is read after this pass's snapshot, so an
 * event of the task still to come (a wake, a poll) is newer, and takes
 * the record on from idle as it would have (a poll with no wait for a
 * worker counted: missed, not wrong).  Without this, a task woken before
 * a gap and parked in it showed "scheduled" for good.
 */
static void idle_take(struct probe *p, task_rec_t *t,
		      const weft__task_info_t *info, uint64_t now)
{
	if (!info->idle || (t->pub.state != WEFT_TASK_SCHEDULED &&
			    t->pub.state != WEFT_TASK_RUNNING))
		return;
	t->pub.state = WEFT_TASK_IDLE;
	t->idle_since = now;
	t->pub.idle_since_ns = now;
	t->woken_at = 0;
	t->wake_in_poll = 0;
	t->lost_check_at = 0;
	weft__collector_task_changed(p, t);
}

/* @t named from the owned list's @info (a record just made, or one heard
 * of first by its events, whose name the events do not carry). */
static void seed_one(struct probe *p, task_rec_t *t,
		     const weft__task_info_t *info, uint64_t now)
{
	if (parked_take(t, info))
		weft__collector_task_changed(p, t);
	/*
	 * Queued for a worker, and no event of it heard (a record made
	 * idle by weft__collector_task_new()): scheduled.  When it was
	 * woken is not known (woken_at 0: its next poll counts no wait for
	 * a worker).  Not the pass's start: the list is read later than
	 * that (a seed's shards one after another, a reconcile at the
	 * pass's end), and a task woken in between would be told it
	 * waited from before its wake (a review).
	 */
	if (info->queued && t->pub.state == WEFT_TASK_IDLE && !t->pub.polls &&
	    !t->seen_spawn && !t->pub.idle_since_ns) {
		t->pub.state = WEFT_TASK_SCHEDULED;
		t->woken_at = 0;
		weft__collector_task_changed(p, t);
	}
	if (!t->pub.name && !t->pub.file) {
		t->pub.name = info->name;
		t->pub.file = info->file;
		t->pub.line = (uint32_t)info->line;
		t->pub.state_size = info->state_size;
		t->pub.kind = info->kind;
		weft__collector_leak_spawned(p, t);
		weft__collector_task_changed(p, t);
	}
	/*
	 * Lost its waker before anyone listened: the events that would
	 * tell it (clones and drops) went unheard, but the runtime's own
	 * count says it.  Said once a record.
	 */
	if (info->no_waker && !(t->once & (1u << WEFT_WARN_LOST_WAKER))) {
		t->once |= 1u << WEFT_WARN_LOST_WAKER;
		/* Said to an earlier listener, found again. */
		if (weft__collector_said(p, WEFT_WARN_LOST_WAKER, t->pub.id,
					 NULL, 0, 0)) {
			weft__collector_said_again(p, WEFT_WARN_LOST_WAKER, t);
			return;
		}
		weft__collector_warn_task(
			p, WEFT_WARN_LOST_WAKER, t, WEFT_EVENT_NO_WORKER, now,
			0,
			"pending with no waker left: it will never be polled "
			"again (no waker of it in the runtime when this "
			"listener came)");
	}
}

/*
 * A process of many tasks is seeded over several passes (issue 21: a
 * console attaching to 1,000,000 idle tasks waited 2.2-2.6 s for the
 * collector's first pass, two thirds of it faulting in the 550 MB of
 * records, before it had a first screen).  Up to SEED_AT_ONCE live
 * tasks, all in the first pass, as ever (at 100,000 that is quick, 0.3
 * s, and a console fed the tasks as changes peaked at 307-368 bytes a
 * task against 265 fed one full update; at 140,000, 312-314 against
 * 254: the changes' updates hold about 8 MB more in the console while
 * they come, which past 262,144 tasks is under 31 bytes a task).  More: the first pass reads the
 * owned list whole, as ever, but makes records for the SEED_FIRST of
 * lowest id only (the Tasks view's default order: what a console shows
 * first), and publishes.  The following passes seed the rest, an
 * owned-list shard after another, read again then, SEED_RATE a second,
 * no more than the subscribers take in (weft__sub_seed_room(): the
 * server's streams, by what their clients hold), passes at most
 * SEED_INTERVAL_NS apart meanwhile.  Each seeded task goes to the
 * subscribers as a change.
 *
 * Why that is right.  Each part is read from the owned list at the
 * start of its pass, before the pass's snapshot of the rings, as the
 * whole seed was: so the argument of weft__collector_reconcile() holds
 * for each, and a task not yet seeded is, to the collector, one whose
 * events are yet to come.  A task on a shard read is live then (it
 * leaves the list before its COMPLETE is pushed, which this pass or a
 * later one folds in); one that finished before its shard was read is
 * not on it, and is never seeded live.  An event of a task not yet
 * seeded makes its record as for any task first heard of
 * (collector_tasks.c); its shard's read then finds that record (one
 * record a task, never two) and names it.  What it costs: a task that
 * finished before its shard was read keeps no name (its events do not
 * carry it), and a WAKE of one not yet seeded is not counted (a WAKE
 * makes no record; its POLL is).  A shard read with the pass's budget
 * spent midway is read again whole the next pass (those seeded are
 * found).  The live-task count in the stats is the runtime's, right
 * from the first pass.  The task-leak sampler waits for the seed to end
 * (collector_leak.c): seeded over seconds, a site's count rises at
 * every quarter.
 */
#define SEED_AT_ONCE 262144u
#define SEED_FIRST 4096u
#define SEED_RATE 500000u
#define SEED_PASS_MIN 1024u
#define SEED_PASS_MAX 32768u
#define SEED_PASS_FLOOR 64u
_Static_assert(WEFT__TASK_SHARDS <= 64, "a bit a shard in seed_shards");

/* The @n lowest-id of @h[0..*@k), a max-heap by id, with @in offered. */
static void heap_offer(weft__task_info_t *h, size_t *k, size_t n,
		       const weft__task_info_t *in)
{
	size_t i;

	if (*k < n) {
		/* Up from the new leaf. */
		for (i = (*k)++; i && h[(i - 1) / 2].id < in->id;
		     i = (i - 1) / 2)
			h[i] = h[(i - 1) / 2];
		h[i] = *in;
		return;
	}
	if (!n || in->id >= h[0].id)
		return;
	/* In place of the largest, down. */
	for (i = 0;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && h[c + 1].id > h[c].id)
			c++;
		if (h[c].id <= in->id)
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = *in;
}

/*
 * Kind @kind said of task @id with no record at hand (the runtime
 * monitor's warnings): its record, if the collector has one, carries it,
 * as a warning the collector raises does (the tasks view's WARN column).
 */
void weft__collector_mark_task(struct probe *p, uint8_t kind, uint64_t id)
{
	task_rec_t *t = id && p->table ? weft__collector_task_find(p, id) :
					 NULL;

	if (!t || t->pub.warnings & (1u << kind))
		return;
	t->pub.warnings |= 1u << kind;
	weft__collector_task_changed(p, t);
}

/*
 * The kept warnings' tasks, marked on their records: called when records
 * were made from the runtime's list (a seed), so that a task warned
 * before this listener (by the monitor, with nobody listening, or in an
 * earlier listening period) shows it.  At most WARN_KEEP lookups.
 */
void weft__collector_mark_kept(struct probe *p)
{
	uint64_t from = p->warn_seq > WARN_KEEP ? p->warn_seq - WARN_KEEP : 0;

	for (uint64_t s = from; s < p->warn_seq; s++) {
		const weft_probe_warning_t *w = &p->warnings[s % WARN_KEEP];

		weft__collector_mark_task(p, w->kind, w->task);
	}
}

void weft__collector_seed_stop(struct probe *p)
{
	free(p->seed_buf);
	p->seed_buf = NULL;
	p->seed_cap = 0;
	p->seed_shards = 0;
	p->seed_next = 0;
	p->seed_max_id = 0;
}

/*
 * Tasks spawned before anyone listened.  The collector learns of a task
 * from its events, so one idle since before the first listener (a
 * connection waiting for its next request) would never show, or show
 * without a name.  On the first pass after a listener or a runtime
 * arrives, the runtime's owned list names every live task (many: the
 * lowest ids now, the rest over the next passes, above).  Such a task's
 * state and counts start here (it is not known to have been spawned
 * while we watched: no lost-waker check).
 */
void weft__collector_seed_tasks(struct probe *p, uint64_t now)
{
	size_t at_once = p->seed_at_once ? p->seed_at_once : SEED_AT_ONCE;
	size_t first = p->seed_first ? p->seed_first : SEED_FIRST;
	weft__task_info_t *heap = NULL;
	size_t total = 0, k = 0;
	uint64_t max_id = 0;

	weft__collector_seed_stop(p);
	/* How many, each shard's count under its lock (nothing copied). */
	for (unsigned i = 0; i < WEFT__TASK_SHARDS; i++)
		total += weft__runtime_tasks(p->rt, i, NULL, 0);
	/* Without memory for it, or asked to (a file's full update), all
	 * at once. */
	if (total > at_once && !p->seed_whole)
		heap = malloc(first * sizeof(*heap));
	for (unsigned i = 0; i < WEFT__TASK_SHARDS; i++) {
		size_t n = owned_shard(p, i, &p->seed_buf, &p->seed_cap);

		if (n == SIZE_MAX)
			break;
		for (size_t j = 0; j < n; j++) {
			task_rec_t *t;

			if (heap) {
				heap_offer(heap, &k, first, &p->seed_buf[j]);
				if (p->seed_buf[j].id > max_id)
					max_id = p->seed_buf[j].id;
				continue;
			}
			t = weft__collector_task_get(p, p->seed_buf[j].id, now);
			if (t)
				seed_one(p, t, &p->seed_buf[j], now);
		}
	}
	if (!heap) {
		weft__collector_seed_stop(p);
		weft__collector_mark_kept(p);
		return;
	}
	for (size_t j = 0; j < k; j++) {
		task_rec_t *t = weft__collector_task_get(p, heap[j].id, now);

		if (t)
			seed_one(p, t, &heap[j], now);
	}
	free(heap);
	weft__collector_mark_kept(p);
	p->seed_shards = ~(uint64_t)0 >> (64 - WEFT__TASK_SHARDS);
	p->seed_next = 0;
	p->seed_max_id = max_id;
	p->seed_room = SIZE_MAX; /* until the subscribers say */
}

/*
 * Waits for a lock that began before this listening period: a deadlock
 * formed before a console attached (two tasks parked on each other's
 * mutex) made no event, and the wait-for graph would never hold it.  The
 * runtime keeps every task's wait for a lock (lock_wait.c); read here,
 * once a listening period (p->waits_gen: those told in it skipped),
 * after the tasks' seed, before the pass's snapshot (runtime_probe.h says why
 * that order keeps each wait and hold right), each into the resource's
 * records as its events would have made it.  Bounded: at most
 * SEED_WAITS_MAX waits (the deadlock check looks at 256).
 */
#define SEED_WAITS_MAX 65536u

void weft__collector_seed_waits(struct probe *p, uint64_t now)
{
	uint32_t gen = p->waits_gen;
	weft__lock_wait_info_t *buf = NULL;
	size_t cap = 0, total = 0;

	for (unsigned i = 0; i < WEFT__LOCK_WAIT_SHARDS; i++) {
		size_t n;

		while ((n = weft__runtime_lock_waits(p->rt, i, gen, buf, cap)) >
		       cap) {
			weft__lock_wait_info_t *nb;
			size_t ncap = n + n / 2 + 8;

			if (total + n > SEED_WAITS_MAX ||
			    !(nb = realloc(buf, ncap * sizeof(*nb)))) {
				n = 0;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		for (size_t j = 0; j < n; j++)
			weft__collector_res_seed_wait(p, &buf[j], now);
		total += n;
	}
	free(buf);
}

/* Up to @budget more records, a shard after another (see above). */
static void seed_take(struct probe *p, uint64_t now, uint64_t budget)
{
	while (p->seed_shards && budget) {
		unsigned i = p->seed_next;
		size_t n, j;

		if (!(p->seed_shards & ((uint64_t)1 << i))) {
			p->seed_next = (i + 1) % WEFT__TASK_SHARDS;
			continue;
		}
		n = owned_shard(p, i, &p->seed_buf, &p->seed_cap);
		if (n == SIZE_MAX)
			return; /* no memory: again next pass */
		for (j = 0; j < n; j++) {
			uint64_t id = p->seed_buf[j].id;
			task_rec_t *t = weft__collector_task_find(p, id);

			if (!t) {
				if (!budget)
					break;
				budget--;
				if (!(t = weft__collector_task_new(p, id, now)))
					continue;
			}
			seed_one(p, t, &p->seed_buf[j], now);
		}
		if (j < n)
			return; /* this shard again, whole, next pass */
		p->seed_shards &= ~((uint64_t)1 << i);
		p->seed_next = (i + 1) % WEFT__TASK_SHARDS;
	}
	if (!p->seed_shards)
		weft__collector_seed_stop(p);
	/* The records made this pass: the kept warnings of their tasks. */
	weft__collector_mark_kept(p);
}

void weft__collector_seed_more(struct probe *p, uint64_t now, uint64_t dt_ns)
{
	uint64_t budget = (uint64_t)SEED_RATE * dt_ns / 1000000000u;

	if (budget < SEED_PASS_MIN)
		budget = SEED_PASS_MIN;
	if (budget > SEED_PASS_MAX)
		budget = SEED_PASS_MAX;
	if (p->seed_pass)
		budget = p->seed_pass;
	/*
	 * What the subscribers take in now (a console's stream behind), but
	 * never nothing: one console that stopped reading would otherwise
	 * hold the seed (and the leak sampler, which waits for it) for every
	 * subscriber, the recorder included, until the server closes it.
	 * SEED_PASS_FLOOR a pass is a few hundred KB a second at most, which
	 * a slow console's own stream absorbs or skips (its own resync).
	 */
	if (budget > p->seed_room)
		budget = p->seed_room > SEED_PASS_FLOOR ? p->seed_room :
							  SEED_PASS_FLOOR;
	/* A file's full update is due: the rest now (weft__sub_seed_whole()). */
	if (p->seed_whole)
		budget = UINT64_MAX;
	seed_take(p, now, budget);
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
 * it.
 *
 * Tasks whose every event was dropped, their SPAWN and their POLLs (a
 * task that parked for good in a burst: the one a user looks for), are
 * on the list with no record: they get one here, named and placed from
 * the list as the seed's are (seed_one()), up to RECONCILE_NEW_MAX a
 * call; a record a POLL made, its SPAWN dropped, is named so too.  Found so, the argument is the seed's (above): an event of the
 * task still to come, from past this pass's snapshot, finds the record
 * (a SPAWN after its first POLL is already handled so); its COMPLETE
 * finishes it.  Such a task was not seen spawned: no lost-waker check.
 *
 * Returns false, with nothing settled, without memory; false too, the
 * rest settled, when more tasks with no record were left than it made
 * (the next call, a second later, goes on; p->reconcile_more holds the
 * leak sampler meanwhile, as a seed does).
 *
 * Which drops: those counted before this pass's snapshot (@drops_before
 * in weft__collector_pass()).  A drop counted during the snapshot can be
 * the end of a task whose first event sits in a ring read before it, left
 * to the next pass; the record that event makes would then wait for the
 * next drop to be settled.  A drop read with acquire in one pass (its
 * count is stored with release, after the producer saw the task's
 * earlier events) has that task's events in the next pass's snapshot.
 */
#define RECONCILE_NEW_MAX 32768u

bool weft__collector_reconcile(struct probe *p, uint64_t now, bool dropped)
{
	weft__task_info_t *buf = NULL;
	size_t cap = 0, made = 0;
	task_rec_t *t, *next;
	bool more = false;

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
			t = weft__collector_task_find(p, buf[j].id);
			if (!t) {
				/* Every event of it dropped so far (below). */
				if (made == RECONCILE_NEW_MAX) {
					more = true;
					continue;
				}
				if (!(t = weft__collector_task_new(p, buf[j].id,
								   now)))
					continue;
				made++;
			}
			t->in_owned = true;
			/*
			 * Where it parks (a POLL's site, a PARKED_AT) may
			 * be among the drops: the list's site is newer
			 * than any event folded in so far (read after
			 * them), and the next event, if one comes, is
			 * newer still.  Its name too, when its SPAWN was
			 * dropped and a POLL made its record.
			 */
			t->parked_seen = false;
			seed_one(p, t, &buf[j], now);
			idle_take(p, t, &buf[j], now);
		}
	}
	free(buf);
	/* Records made from the list: the kept warnings of their tasks. */
	if (made)
		weft__collector_mark_kept(p);
	for (t = p->live; t; t = next) {
		weft_event_t end = { .ts = now,
				     .task = t->pub.id,
				     .kind = WEFT_EV_COMPLETE };

		next = t->lnext;
		if (t->in_owned)
			continue;
		weft__collector_on_complete(p, t, &end);
		t->end_unseen = true;
		/* Or ended in a gap in listening: unheard, nothing dropped. */
		if (dropped)
			t->pub.warnings |= 1u << WEFT_WARN_EVENTS_DROPPED;
		p->stats.tasks_end_unseen++;
	}
	p->reconcile_more = more;
	return !more;
}
