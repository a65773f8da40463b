/* SPDX-License-Identifier: MIT */
/*
 * What the collector keeps of a resource, shared by its files:
 * collector_resources.c (the RES_* events into these records, the lists
 * published), collector_res_warn.c (the waiting side's warnings, the
 * sweeps) and collector_deadlock.c (cycles of tasks waiting for each
 * other's locks).  Under probe.lock, on the collector thread, as all the
 * collector's state.
 */
#ifndef WEFT_COLLECTOR_RES_INTERNAL_H
#define WEFT_COLLECTOR_RES_INTERNAL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector_internal.h"

/* Resources tracked at most; holders and waiters listed per resource. */
#define RES_MAX (1u << 20)
#define RES_TRACK 4096u
/* The timer wheel's waiters listed (collector_resources.c on_wait()). */
#define RES_TRACK_TIMERS 64u
/* A resource warns at most this often (its waits in between are counted
 * in the next warning). */
#define RES_WARN_EVERY_NS 1000000000ull
/* How often the ongoing waits are looked at. */
#define RES_CHECK_EVERY_NS 250000000ull
/* Ends kept for their starts to come (early_note()). */
#define RES_EARLY 4
/* A dropped resource is kept this long after it was said, so that late
 * events about it (a waiter's end) find it and do not make it anew. */
#define RES_TOMB_NS 2000000000ull
/* acquires_per_s: over windows of this length. */
#define RES_RATE_NS 1000000000ull

typedef struct res_holder_s {
	uint64_t task;
	uint64_t since;
	uint32_t count;
	uint32_t line; /* where it acquired it (RES_SITE), 0: not known */
	const char *file;
	const char *label; /* what for (RES_LABEL: a blocking job's name) */
	/* Read from the runtime's lock, not from an acquire
	 * (weft__collector_res_seed_wait()): any release of the lock ends
	 * it, whatever its stamp. */
	bool seeded;
	/* Seeded, its start not known: @since is when it was read. */
	bool since_unknown;
} res_holder_t;

/* res_waiter_t.dl (collector_deadlock.c): the wait was in the set of
 * deadlocked waits at the last look; a cycle through it was said. */
#define RES_DL_SEEN 0x1u
#define RES_DL_SAID 0x2u

typedef struct res_waiter_s {
	uint64_t task;
	uint64_t since;
	uint8_t op;
	uint8_t dl; /* RES_DL_* */
	/* Heard before a gap in listening: its end may have come in it,
	 * unheard (weft__collector_res_gap()); @polls: its task's polls
	 * then (one more since, and it is let go: res_sweep()). */
	bool unsure;
	uint32_t polls;
} res_waiter_t;

struct res_rec_s {
	weft_probe_resource_t pub;
	weft_hist_t *hists; /* [0] waits, [1] holds; NULL until one ended */
	res_holder_t *holders;
	res_waiter_t *waiters;
	uint32_t nh, caph, nw, capw;
	uint64_t rate_at, rate_acq; /* the rate window's start and count */
	/*
	 * The warning's window: waits past the threshold since the last
	 * warning (or the first), the longest, and the task that held the
	 * resource longest meanwhile (a release, or a hold still going on
	 * when the warning is raised).
	 */
	uint64_t win_waits, win_max_wait, win_first_at;
	uint64_t win_wait_task; /* the longest wait's task */
	uint64_t win_hold_task, win_hold_ns, win_hold_end;
	const char *win_hold_file;
	const char *win_hold_label; /* a blocking job's name */
	uint32_t win_hold_line;
	bool win_hold_unknown; /* began before anyone listened: at least */
	uint64_t warned_at;
	uint64_t ongoing_warned; /* the oldest wait already warned of */
	uint64_t ongoing_said_ns; /* its age then: said again at twice it */
	/* Releases by tasks not listed as holders (a semaphore used as a
	 * signal, or a release read before its acquire): its waiters may be
	 * served by a task that holds nothing, no deadlock to call. */
	uint32_t unheld_releases;
	/* Permits held before a gap in listening, their holders forgotten
	 * (weft__collector_res_gap()): releases by non-holders up to this
	 * many are theirs, not counted unheld. */
	uint32_t gap_permits;
	/* Its waiters heard before a gap in listening (unsure), still
	 * listed: on_wait() looks for the task's own only while any are. */
	uint32_t nunsure;
	/* Ends seen before their starts (early_note()). */
	struct res_early {
		uint64_t task, ts;
		uint8_t kind; /* RES_WAIT_END or RES_RELEASE; 0: free */
	} early[RES_EARLY];
	unsigned nearly;
	bool said_dropped; /* published with its drop: a tombstone now */
	bool changed;
	struct res_rec_s *hnext, *cnext;
};

/* The warnings' window (collector_res_warn.c) and the small steps both
 * files take. */

static inline void res_changed(struct probe *p, res_rec_t *r)
{
	if (r->changed)
		return;
	r->changed = true;
	r->cnext = p->res_changed;
	p->res_changed = r;
	p->nres_changed++;
}

static inline void res_free(res_rec_t *r)
{
	free(r->hists);
	free(r->holders);
	free(r->waiters);
	free(r);
}

/*
 * Whether a wait or hold begun at @since, seen at @now, may have ended
 * unheard: across dropped events, or heard before a gap in listening
 * (@unsure).  Its end may be what was lost, and "still waiting" or
 * "still held" of one long over is a wrong warning, where a missed one
 * is only missed.
 */
static inline bool res_unsure(const struct probe *p, bool unsure,
			      uint64_t since, uint64_t now)
{
	return unsure || weft__collector_across_drops(p, since, now);
}

/* Whether task @id is gone (finished, or no longer known). */
static inline bool task_gone(struct probe *p, uint64_t id)
{
	task_rec_t *t = id ? weft__collector_task_find(p, id) : NULL;

	return id && (!t || t->in_done);
}

/* The task that has held @r longest, now or in a release since the
 * window began, into the window. */
static inline void window_holder(res_rec_t *r, const res_holder_t *h,
				 uint64_t held, uint64_t end)
{
	/* The longest since the window's first wait began. */
	if (held <= r->win_hold_ns && r->win_hold_end >= r->win_first_at)
		return;
	r->win_hold_end = end;
	r->win_hold_ns = held;
	r->win_hold_task = h->task;
	r->win_hold_file = h->file;
	r->win_hold_label = h->label;
	r->win_hold_line = h->line;
	r->win_hold_unknown = h->since_unknown;
}

static inline bool waits_count(const res_rec_t *r, uint8_t op)
{
	switch (r->pub.kind) {
	case WEFT_RES_MUTEX:
	case WEFT_RES_SYNC_MUTEX:
	case WEFT_RES_SEMAPHORE:
		return op == WEFT_RES_OP_ACQUIRE;
	case WEFT_RES_MPSC:
		return op == WEFT_RES_OP_SEND;
	case WEFT_RES_BLOCKING_POOL:
		return op == WEFT_RES_OP_JOB;
	default:
		return false;
	}
}

/*
 * A window of warnings opens with a wait that began at @since: a hold
 * released before then made none of its waits, and is no blame; one
 * released since (the hold the first wait waited for) is kept.
 */
static inline void window_open(res_rec_t *r, uint64_t since)
{
	r->win_first_at = since;
	if (r->win_hold_end >= since)
		return;
	r->win_hold_task = r->win_hold_ns = r->win_hold_end = 0;
	r->win_hold_file = r->win_hold_label = NULL;
	r->win_hold_line = 0;
	r->win_hold_unknown = false;
}

/* Where: "demo.c:40", "demo.c" or "?". */
static inline void fmt_site(char *buf, size_t len, const char *file,
			    uint32_t line)
{
	if (file && line)
		snprintf(buf, len, "%s:%u", weft__base_name(file), line);
	else if (file)
		snprintf(buf, len, "%s", weft__base_name(file));
	else
		snprintf(buf, len, "?");
}

/* "mutex \"cache\"" or "mutex demo.c:40" (where it was initialised). */
static inline void fmt_res(char *buf, size_t len, const res_rec_t *r)
{
	char site[80];

	if (r->pub.name) {
		snprintf(buf, len, "%s \"%s\"",
			 weft_resource_kind_name(r->pub.kind), r->pub.name);
		return;
	}
	fmt_site(site, sizeof(site), r->pub.file, r->pub.line);
	snprintf(buf, len, "%s %s", weft_resource_kind_name(r->pub.kind), site);
}

static inline const char *task_label(const task_rec_t *t)
{
	return t && t->pub.name ? t->pub.name : "unnamed";
}

/* A duration for a warning: "10.7 ms" below a second, "4.6 s" past. */
static inline void fmt_dur(char *buf, size_t len, uint64_t ns)
{
	if (ns < 1000000000ull)
		snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.1f s", (double)ns / 1e9);
}

static inline void holder_drop(res_rec_t *r, uint32_t i)
{
	memmove(&r->holders[i], &r->holders[i + 1],
		(r->nh - i - 1) * sizeof(*r->holders));
	r->nh--;
	if (r->pub.nholders)
		r->pub.nholders--;
}

/* collector_deadlock.c */
void weft__collector_res_deadlocks(struct probe *p, uint64_t now);

#endif /* WEFT_COLLECTOR_RES_INTERNAL_H */
