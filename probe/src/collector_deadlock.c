/* SPDX-License-Identifier: MIT */
/*
 * Deadlocks: tasks that wait for each other's locks, found in what the
 * collector keeps of the resources now (collector_resources.c), each
 * cycle said once as a DEADLOCK warning naming its tasks, the locks each
 * holds and where it took them, and the lock each waits for.
 *
 * The wait-for graph: a task waiting to acquire a lock-like resource (an
 * async mutex, a semaphore, a sync mutex) waits for every task that holds
 * it.  A waiting task is stuck for good when every holder of what it
 * waits for is stuck too; the stuck set is the greatest such set (all
 * waiters first, then those with a holder outside taken out until none
 * is).  Each stuck task has a stuck successor, so following them from any
 * ends in a cycle; a cycle is said when each of its waits was stuck at
 * the previous look too (events of one moment may be read a pass apart:
 * a release not read yet would make a cycle that never was), and no
 * cycle through the same waits was said (RES_DL_SAID on each waiter: a
 * new wait, after an abort or a timeout, is a new record).
 *
 * Never a cycle that is not one: only the state now (a waiter that
 * acquired, a holder that released are gone from the lists), no wait or
 * hold across dropped events, no semaphore released by a task that did
 * not hold it (a signal: its waiters may be served by anyone), no holder
 * that is not a task or is not listed.  Bounded: at most DL_MAX waits a
 * look, each on a resource of at most DL_HOLDERS holders (the stuck set
 * in at most DL_MAX rounds of DL_MAX x DL_HOLDERS searches, one or two
 * in practice), on the collector thread under probe.lock, as all its
 * state.
 */
#include <stdio.h>
#include <stdlib.h>

#include "collector_res_internal.h"

/* Waits looked at in one check, at most (the rest are taken as not
 * stuck: a cycle through them is not said, nor one through their tasks'
 * holds). */
#define DL_MAX 256u
/* Holders of one resource, at most, for its waits to be looked at (a
 * semaphore held by more: its waits are taken as not stuck). */
#define DL_HOLDERS 16u

struct dl_node {
	uint64_t task;
	res_rec_t *r;    /* what it waits for */
	res_waiter_t *w; /* its wait there */
	bool in;         /* stuck */
	uint32_t walk;   /* the walk that reached it (0: none yet) */
	uint32_t next;   /* the stuck successor the walk took */
};

static bool lock_like(const res_rec_t *r)
{
	switch (r->pub.kind) {
	case WEFT_RES_MUTEX:
	case WEFT_RES_SYNC_MUTEX:
		return true;
	case WEFT_RES_SEMAPHORE:
		return !r->unheld_releases;
	default:
		return false;
	}
}

static int node_cmp(const void *a, const void *b)
{
	const struct dl_node *x = a, *y = b;

	return x->task < y->task ? -1 : x->task > y->task;
}

/* The node of @task, or UINT32_MAX.  @v is sorted by task. */
static uint32_t node_of(const struct dl_node *v, uint32_t n, uint64_t task)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (v[mid].task < task)
			lo = mid + 1;
		else if (v[mid].task > task)
			hi = mid;
		else
			return mid;
	}
	return UINT32_MAX;
}

/* Whether @r's wait of @w can be part of a deadlock, by itself. */
static bool wait_usable(struct probe *p, const res_rec_t *r,
			const res_waiter_t *w, uint64_t now)
{
	if (!w->task || w->op != WEFT_RES_OP_ACQUIRE || now < w->since ||
	    res_unsure(p, w->unsure, w->since, now) || task_gone(p, w->task))
		return false;
	/* Every holder listed, each a task, none held across drops. */
	if (!r->nh || r->nh > DL_HOLDERS || r->pub.nholders != r->nh)
		return false;
	for (uint32_t k = 0; k < r->nh; k++)
		if (!r->holders[k].task ||
		    weft__collector_across_drops(p, r->holders[k].since, now))
			return false;
	return true;
}

/* The waits now, sorted by task; a task listed twice is neither. */
static uint32_t collect(struct probe *p, struct dl_node *v, uint64_t now)
{
	uint32_t n = 0, m = 0;

	for (size_t i = 0; i < p->res_table_size; i++) {
		for (res_rec_t *r = p->res_table[i]; r; r = r->hnext) {
			if (r->pub.dropped_ns || !r->nw || !lock_like(r))
				continue;
			for (uint32_t k = 0; k < r->nw; k++) {
				res_waiter_t *w = &r->waiters[k];

				/* Past DL_MAX, not looked at: their tasks
				 * are taken as not stuck. */
				if (n == DL_MAX || !wait_usable(p, r, w, now)) {
					w->dl = 0;
					continue;
				}
				v[n++] = (struct dl_node){ .task = w->task,
							   .r = r,
							   .w = w,
							   .in = true };
			}
		}
	}
	qsort(v, n, sizeof(*v), node_cmp);
	for (uint32_t i = 0; i < n; i++) {
		if ((i + 1 < n && v[i + 1].task == v[i].task) ||
		    (i && v[i - 1].task == v[i].task)) {
			v[i].w->dl = 0;
			continue;
		}
		v[m++] = v[i];
	}
	return m;
}

/* Takes out the waits with a holder that is not stuck, until none is. */
static void stuck_set(struct dl_node *v, uint32_t n)
{
	bool changed = true;

	while (changed) {
		changed = false;
		for (uint32_t i = 0; i < n; i++) {
			const res_rec_t *r = v[i].r;

			if (!v[i].in)
				continue;
			for (uint32_t k = 0; k < r->nh; k++) {
				uint32_t j = node_of(v, n, r->holders[k].task);

				if (j == UINT32_MAX || !v[j].in) {
					v[i].in = false;
					changed = true;
					break;
				}
			}
		}
	}
}

/* The holder of @r that is task @task. */
static const res_holder_t *holder_is(const res_rec_t *r, uint64_t task)
{
	for (uint32_t k = 0; k < r->nh; k++)
		if (r->holders[k].task == task)
			return &r->holders[k];
	return NULL;
}

/*
 * "file:line", or "line N" when @file is the last one said (@last):
 * a cycle's sites are mostly in one file.
 */
static void site_short(char *buf, size_t len, const char *file, uint32_t line,
		       const char **last)
{
	if (file && line && *last && !strcmp(weft__base_name(file), *last)) {
		snprintf(buf, len, "line %u", line);
		return;
	}
	fmt_site(buf, len, file, line);
	if (file)
		*last = weft__base_name(file);
}

/* A resource as said in a cycle: its kind too when @kind or unnamed. */
static void res_short(char *buf, size_t len, const res_rec_t *r, bool kind)
{
	if (kind || !r->pub.name)
		fmt_res(buf, len, r);
	else
		snprintf(buf, len, "\"%s\"", r->pub.name);
}

enum {
	DL_NO_KINDS = 1,   /* a resource's kind at its first mention only */
	DL_NO_ACQUIRE = 2, /* not where each lock was taken */
	DL_NO_SPAWN = 4,   /* not where each task was spawned */
	DL_SHORT = 8,      /* "at" for "acquired at" */
	DL_NO_SPAWN1 = 16, /* not where the first task was spawned */
};

/*
 * The cycle @c[0..n) (each waits for what the next holds, the last for
 * what the first holds) told into @d, a task at a time: "(x.c:40) holds
 * mutex "a" (acquired at line 15), waits for mutex "b"; task 2 name
 * (line 41) holds ...", with as much as @drop leaves.  The first task's
 * id and name are the warning's own (the tools say them before the
 * detail), and the file of a site the same as the one before is not said
 * again.  Return: its length (as snprintf's).
 */
static size_t tell(struct probe *p, const struct dl_node *v, const uint32_t *c,
		   uint32_t n, unsigned drop, char *d, size_t size)
{
	const char *last = NULL;
	size_t len = 0;

	for (uint32_t i = 0; i < n && len < size; i++) {
		const struct dl_node *a = &v[c[i]];
		const struct dl_node *prev = &v[c[(i + n - 1) % n]];
		const task_rec_t *t = weft__collector_task_find(p, a->task);
		const res_holder_t *h = holder_is(prev->r, a->task);
		/* Cut to the detail when said. */
		char held[160], acq[128], want[160], spawn[256];

		res_short(held, sizeof(held), prev->r,
			  !(drop & DL_NO_KINDS) || i == 0);
		res_short(want, sizeof(want), a->r, !(drop & DL_NO_KINDS));
		if (i == 0) {
			/*
			 * The warning's task: the tools say its id and name
			 * before the detail, which says where it was
			 * spawned.
			 */
			spawn[0] = '\0';
			if (!(drop & (DL_NO_SPAWN | DL_NO_SPAWN1)) && t &&
			    t->pub.file) {
				char site[80];

				site_short(site, sizeof(site), t->pub.file,
					   t->pub.line, &last);
				snprintf(spawn, sizeof(spawn), "(%s)", site);
			}
		} else if (drop & DL_NO_SPAWN) {
			snprintf(spawn, sizeof(spawn), "task %llu %s",
				 (unsigned long long)a->task, task_label(t));
		} else {
			char site[80];

			site_short(site, sizeof(site), t ? t->pub.file : NULL,
				   t ? t->pub.line : 0, &last);
			snprintf(spawn, sizeof(spawn), "task %llu %s (%s)",
				 (unsigned long long)a->task, task_label(t),
				 site);
		}
		acq[0] = '\0';
		if (!(drop & DL_NO_ACQUIRE) && h && h->file) {
			char site[80];

			site_short(site, sizeof(site), h->file, h->line, &last);
			snprintf(acq, sizeof(acq), " (%s %s)",
				 drop & DL_SHORT ? "at" : "acquired at", site);
		}
		len += (size_t)snprintf(d + len, size - len,
					"%s%s%sholds %s%s, waits for %s",
					i ? "; " : "", spawn,
					spawn[0] ? " " : "", held, acq, want);
	}
	return len;
}

static void say_cycle(struct probe *p, const struct dl_node *v,
		      const uint32_t *c, uint32_t n, uint64_t now)
{
	static const unsigned drops[] = {
		0,
		DL_NO_KINDS,
		DL_NO_KINDS | DL_SHORT,
		DL_NO_KINDS | DL_SHORT | DL_NO_ACQUIRE,
		DL_NO_KINDS | DL_SHORT | DL_NO_ACQUIRE | DL_NO_SPAWN1,
		DL_NO_KINDS | DL_SHORT | DL_NO_ACQUIRE | DL_NO_SPAWN,
	};
	/*
	 * The warning's detail holds 159 characters: the most that fits,
	 * leaving out the kinds of the locks named again, then shorter
	 * words, then where the locks were taken, then the first task's
	 * spawn site (the warning's own, which the tools show beside it),
	 * then the others'.  Where each task was spawned says which code
	 * to look at; where each lock was taken is in the task's detail
	 * (the locks it holds), a key away.  An outside audit found a
	 * two-task cycle said with the locks' sites and no task's, and a
	 * three-task one with neither.
	 */
	enum { FIT = sizeof(((weft_probe_warning_t *)0)->detail) - 1 };
	char d[1024], tail[48], age[32];
	uint64_t newest = 0;
	size_t len = 0;
	task_rec_t *t;

	for (uint32_t i = 0; i < n; i++)
		if (v[c[i]].w->since > newest)
			newest = v[c[i]].w->since;
	fmt_dur(age, sizeof(age), now > newest ? now - newest : 0);
	snprintf(tail, sizeof(tail), "; waiting %s", age);
	for (size_t k = 0; k < sizeof(drops) / sizeof(drops[0]); k++) {
		len = tell(p, v, c, n, drops[k], d, sizeof(d));
		if (len + strlen(tail) <= FIT)
			break;
	}
	/* Still too long (a long cycle): cut, the tail kept. */
	if (len + strlen(tail) > FIT) {
		len = FIT - strlen(tail) - 3;
		memcpy(d + len, "...", 4);
		len += 3;
	}
	snprintf(d + len, sizeof(d) - len, "%s", tail);
	/*
	 * The same cycle said before, to an earlier listener, its age
	 * aside (the text up to the tail's "; waiting ", so that a cycle
	 * whose text begins another's is not taken for it): found again
	 * after a gap, not said again.
	 */
	t = weft__collector_task_find(p, v[c[0]].task);
	if (weft__collector_said(p, WEFT_WARN_DEADLOCK, t ? t->pub.id : 0, d,
				 len + strlen("; waiting "), 0)) {
		if (t)
			weft__collector_said_again(p, WEFT_WARN_DEADLOCK, t);
		return;
	}
	if (t)
		weft__collector_warn_task(p, WEFT_WARN_DEADLOCK, t,
					  WEFT_EVENT_NO_WORKER, now,
					  now > newest ? now - newest : 0, d);
	else
		weft__collector_warn(p, WEFT_WARN_DEADLOCK, NULL,
				     WEFT_EVENT_NO_WORKER, now,
				     now > newest ? now - newest : 0, "%s", d);
}

/*
 * From stuck node @start, the walk @walk: its successors until a node
 * reached before.  Reached in this walk, the cycle from it; in an
 * earlier one, nothing new.
 */
static void walk_from(struct probe *p, struct dl_node *v, uint32_t n,
		      uint32_t start, uint32_t walk, uint32_t *c, uint64_t now)
{
	uint32_t i = start, nc = 0, low;
	bool seen = true, said = true;

	while (!v[i].walk) {
		const res_rec_t *r = v[i].r;
		uint32_t j = UINT32_MAX;

		v[i].walk = walk;
		for (uint32_t k = 0; k < r->nh && j == UINT32_MAX; k++) {
			j = node_of(v, n, r->holders[k].task);
			if (j != UINT32_MAX && !v[j].in)
				j = UINT32_MAX;
		}
		if (j == UINT32_MAX)
			return; /* (cannot be: a stuck wait's holders are) */
		v[i].next = j;
		i = j;
	}
	if (v[i].walk != walk)
		return;
	/* The cycle from i, the lowest task first (one telling a cycle). */
	low = i;
	for (uint32_t j = v[i].next; j != i; j = v[j].next)
		if (v[j].task < v[low].task)
			low = j;
	c[nc++] = low;
	for (uint32_t j = v[low].next; j != low; j = v[j].next)
		c[nc++] = j;
	for (uint32_t k = 0; k < nc; k++) {
		seen &= (v[c[k]].w->dl & RES_DL_SEEN) != 0;
		said &= (v[c[k]].w->dl & RES_DL_SAID) != 0;
	}
	if (!seen || said)
		return;
	say_cycle(p, v, c, nc, now);
	for (uint32_t k = 0; k < nc; k++)
		v[c[k]].w->dl |= RES_DL_SAID;
}

void weft__collector_res_deadlocks(struct probe *p, uint64_t now)
{
	struct dl_node *v;
	uint32_t *c, n, walk = 0;

	if (!p->res_table)
		return;
	v = malloc(DL_MAX * sizeof(*v));
	c = malloc(DL_MAX * sizeof(*c));
	if (!v || !c)
		goto out_free;
	n = collect(p, v, now);
	stuck_set(v, n);
	for (uint32_t i = 0; i < n; i++)
		if (v[i].in && !v[i].walk)
			walk_from(p, v, n, i, ++walk, c, now);
	/* What the next look takes as seen before. */
	for (uint32_t i = 0; i < n; i++) {
		if (v[i].in)
			v[i].w->dl |= RES_DL_SEEN;
		else
			v[i].w->dl = 0;
	}
out_free:
	free(c);
	free(v);
}
