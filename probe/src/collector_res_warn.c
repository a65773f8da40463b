/* SPDX-License-Identifier: MIT */
/*
 * The waiting side's warnings (issue 18), from what collector_resources.c
 * keeps of each resource: contention (waiters of a lock or semaphore kept
 * past WEFT_CONTENTION), channel-full (senders of a bounded channel kept
 * as long), blocking-queue (pool jobs kept as long waiting for a busy
 * thread); and the sweeps of waiters and holders whose task is gone.
 * A wait that goes on is said again each time it has doubled, with its
 * age.  Looked at every 250 ms (weft__collector_res_check()), the
 * deadlocks too (collector_deadlock.c).
 */
#include <stdio.h>

#include "collector_res_internal.h"

/*
 * Whether @w, a wait on @id heard before a gap in listening, may still go
 * on: its task shows it (one it began after, or whose end it heard, shows
 * another, or none), and has not been polled since (a review: a task that
 * ran on, waiting on nothing the probe knows, kept it for good).  If not,
 * the task's WAITING ON it goes with it.  A task polled while still
 * waiting, or waiting on two at once (a receive under a timeout's sleep),
 * loses it too: missed rather than listed wrong.
 */
static bool unsure_waits(struct probe *p, const res_waiter_t *w, uint64_t id)
{
	task_rec_t *t = weft__collector_task_find(p, w->task);

	if (!t || t->pub.waiting_on != id)
		return false;
	if ((uint32_t)t->pub.polls == w->polls)
		return true;
	t->pub.waiting_on = 0;
	t->pub.waiting_since_ns = 0;
	t->pub.waiting_op = 0;
	weft__collector_task_changed(p, t);
	return false;
}

/*
 * Waiters and holders whose task is gone: a countdown or a channel left
 * in a select, a semaphore's permits consumed (never released) by tasks
 * that finished while it serves as a signal, events lost to full rings.
 * A mutex keeps a holder that finished: a lock a finished task still
 * holds is worth seeing.  So does a semaphore used as a lock
 * (sem_pairs()): its permits taken by a task that finished are leaked,
 * and what its waiters wait for (an audit: a
 * handler's error path that never released read "held longest by a task
 * not seen").  And waiters heard before a gap in listening that wait on
 * something else now (unsure_waits()).
 */
/*
 * Whether semaphore @r is used as a lock: its holders have released
 * permits (a hold ended), and nobody has released any without holding
 * them.  Then a permit kept by a task that finished is leaked.  Not a
 * token bucket (permits consumed for good, refilled by another task)
 * nor a signal (released by tasks that never acquired), whose takers
 * finish holding permits by design (a review).
 */
static bool sem_pairs(const res_rec_t *r)
{
	return !r->unheld_releases && r->hists && r->hists[1].count;
}

static void res_sweep(struct probe *p, res_rec_t *r)
{
	bool changed = false;

	for (uint32_t i = 0; i < r->nw;) {
		if (task_gone(p, r->waiters[i].task) ||
		    (r->waiters[i].unsure &&
		     !unsure_waits(p, &r->waiters[i], r->pub.id))) {
			r->nunsure -= r->waiters[i].unsure;
			memmove(&r->waiters[i], &r->waiters[i + 1],
				(r->nw - i - 1) * sizeof(*r->waiters));
			r->nw--;
			if (r->pub.nwaiters)
				r->pub.nwaiters--;
			changed = true;
		} else {
			i++;
		}
	}
	if (r->pub.kind == WEFT_RES_SEMAPHORE && !sem_pairs(r)) {
		for (uint32_t i = 0; i < r->nh;) {
			if (task_gone(p, r->holders[i].task)) {
				holder_drop(r, i);
				changed = true;
			} else {
				i++;
			}
		}
	}
	if (changed)
		res_changed(p, r);
}

/* --------------------------------------------------------- warnings */

/*
 * Raised on the guilty task when it is known (folded with its spawn
 * site's others, as every task's warnings are), else on none.
 */
static void res_warn(struct probe *p, uint8_t kind, task_rec_t *t, uint64_t now,
		     uint64_t value, const char *detail)
{
	if (t)
		weft__collector_warn_task(p, kind, t, WEFT_EVENT_NO_WORKER, now,
					  value, detail);
	else
		weft__collector_warn(p, kind, NULL, WEFT_EVENT_NO_WORKER, now,
				     value, "%s", detail);
}

/*
 * Contention: waiters of a lock or semaphore kept past the threshold.
 * The warning's task is the one that held it longest (a release in the
 * window, or a hold going on now), with where it acquired it.
 */
static void warn_contention(struct probe *p, res_rec_t *r, uint64_t now,
			    uint64_t waiting_now, uint64_t oldest)
{
	/* Cut to the warning's detail when raised. */
	char what[160], acq[112], held[112], d[640], max[32], hold[64];
	char waits[64];
	size_t len;
	task_rec_t *t = r->win_hold_task ?
				weft__collector_task_find(p, r->win_hold_task) :
				NULL;

	fmt_res(what, sizeof(what), r);
	/* Where it was acquired, when known. */
	acq[0] = 0;
	if (r->win_hold_file) {
		size_t k = (size_t)snprintf(acq, sizeof(acq), ", acquired at ");

		fmt_site(acq + k, sizeof(acq) - k, r->win_hold_file,
			 r->win_hold_line);
	}
	/*
	 * A hold seen of no task (task 0: weft_block_on(), or a plain
	 * thread's weft_mutex_t) is a thread's; "a task not seen" only when
	 * no hold was seen at all.
	 */
	if (r->win_hold_task)
		snprintf(held, sizeof(held), "task %llu (%s)",
			 (unsigned long long)r->win_hold_task, task_label(t));
	else if (r->win_hold_end)
		snprintf(held, sizeof(held), "a thread, not a task");
	else
		snprintf(held, sizeof(held), "a task not seen");
	fmt_dur(max, sizeof(max), r->win_max_wait);
	/* A hold that began before anyone listened: what was seen of it. */
	if (r->win_hold_unknown) {
		char seen[24];

		fmt_dur(seen, sizeof(seen), r->win_hold_ns);
		if (r->win_hold_ns >= 1000000)
			snprintf(hold, sizeof(hold),
				 "since before anyone listened (at least %s)",
				 seen);
		else
			snprintf(hold, sizeof(hold),
				 "since before anyone listened");
	} else {
		fmt_dur(hold, sizeof(hold), r->win_hold_ns);
	}
	/* A wait going on: its age now, however often said before. */
	len = (size_t)snprintf(waits, sizeof(waits), ", %llu now",
			       (unsigned long long)waiting_now);
	if (waiting_now && oldest && now > oldest) {
		char age[32];

		fmt_dur(age, sizeof(age), now - oldest);
		snprintf(waits + len, sizeof(waits) - len, ", waiting %s", age);
	}
	/*
	 * Still held by a task that finished: a lock or permits it never
	 * gave back (res_sweep() keeps such holders).  Said so, and where
	 * it took them; how long is since then, and the wait's age says it.
	 */
	if (r->win_hold_task && r->win_hold_end == now && t &&
	    (t->in_done || t->pub.state == WEFT_TASK_DONE))
		snprintf(d, sizeof(d),
			 "%s: %llu waits > %.0f ms (max %s, %llu now); held by "
			 "%s, which ended holding it%s%s",
			 what, (unsigned long long)r->win_waits,
			 (double)p->config.contention_ns / 1e6, max,
			 (unsigned long long)waiting_now, held,
			 acq[0] ? ";" : "", acq[0] ? acq + 1 : "");
	else
		snprintf(d, sizeof(d),
			 "%s: %llu waits > %.0f ms (max %s%s); held longest by "
			 "%s, %s%s",
			 what, (unsigned long long)r->win_waits,
			 (double)p->config.contention_ns / 1e6, max, waits,
			 held, hold, acq);
	res_warn(p, WEFT_WARN_CONTENTION, t, now, r->win_max_wait, d);
}

/*
 * What channel @r's receiver @t is doing now, as far as its events tell,
 * into @buf: parked (where, on what, for how long), or woken and not
 * seen since (a poll not ended, or a queue: no event tells which).
 */
static void rx_doing(const res_rec_t *r, const task_rec_t *t, uint64_t now,
		     char *buf, size_t size)
{
	char site[80], where[88], dur[32], age[40];

	if (t->pub.state == WEFT_TASK_DONE || t->in_done) {
		snprintf(buf, size, "has finished");
		return;
	}
	if (t->pub.state != WEFT_TASK_IDLE) {
		/* Woken: its POLL comes at its end, so a poll running for
		 * seconds and a wait in a queue read the same (the long-poll
		 * and scheduling-delay warnings tell them apart). */
		if (t->woken_at && now > t->woken_at) {
			fmt_dur(dur, sizeof(dur), now - t->woken_at);
			snprintf(buf, size, "in a poll or queued for %s", dur);
		} else {
			snprintf(buf, size, "in a poll or queued");
		}
		return;
	}
	if (t->pub.waiting_on == r->pub.id) {
		/* Full, and its receiver waits for a message: a wake-up lost
		 * (the lost-waker check names it), or a pass between the
		 * send's wait and its wake. */
		snprintf(buf, size, "parked receiving from it");
		return;
	}
	/* Where, if an await site told it; for how long, if known. */
	where[0] = age[0] = '\0';
	if (t->pub.parked_file) {
		fmt_site(site, sizeof(site), t->pub.parked_file,
			 t->pub.parked_line);
		snprintf(where, sizeof(where), " at %s", site);
	}
	if (t->pub.idle_since_ns && now > t->pub.idle_since_ns) {
		fmt_dur(dur, sizeof(dur), now - t->pub.idle_since_ns);
		snprintf(age, sizeof(age), " for %s", dur);
	}
	snprintf(buf, size, "parked%s%s", where, age);
}

/* Whether any task or thread waits to send on @r now. */
static bool send_waits(const res_rec_t *r)
{
	for (uint32_t i = 0; i < r->nw; i++)
		if (waits_count(r, r->waiters[i].op))
			return true;
	return false;
}

/*
 * The tasks waiting to send on @r, into @buf: the spawn site with the
 * most of them ("6 producer (svc.c:60)"), and how many others ("+2").
 * Sites are told apart among the first SITES met; the waiters of others
 * count as others.
 */
static void tx_waiting(struct probe *p, const res_rec_t *r, char *buf,
		       size_t size)
{
	enum { SITES = 8 };
	struct {
		const task_rec_t *t; /* one of the site's tasks */
		uint32_t n;
	} g[SITES];
	uint32_t ng = 0, n = 0, threads = 0, unseen = 0, best = 0;
	char site[80];
	size_t len;

	for (uint32_t i = 0; i < r->nw; i++) {
		const res_waiter_t *w = &r->waiters[i];
		const task_rec_t *t;
		uint32_t k;

		if (!waits_count(r, w->op))
			continue;
		n++;
		if (!w->task) {
			threads++;
			continue;
		}
		t = weft__collector_task_find(p, w->task);
		if (!t) {
			unseen++;
			continue;
		}
		for (k = 0; k < ng; k++)
			if (g[k].t->pub.name == t->pub.name &&
			    g[k].t->pub.file == t->pub.file &&
			    g[k].t->pub.line == t->pub.line)
				break;
		if (k == ng) {
			if (ng == SITES)
				continue;
			g[ng].t = t;
			g[ng++].n = 0;
		}
		if (++g[k].n > g[best].n)
			best = k;
	}
	if (!n) {
		/* The window's waits have ended: its longest's task. */
		const task_rec_t *t =
			r->win_wait_task ?
				weft__collector_task_find(p, r->win_wait_task) :
				NULL;

		if (!t) {
			snprintf(buf, size, "none now");
			return;
		}
		fmt_site(site, sizeof(site), t->pub.file, t->pub.line);
		snprintf(buf, size, "none now, longest %llu %s (%s)",
			 (unsigned long long)t->pub.id, task_label(t), site);
		return;
	}
	if (!ng) {
		snprintf(buf, size, "%u %s", n,
			 threads == n ? (n == 1 ? "thread" : "threads") :
			 unseen == n  ? (n == 1 ? "task not seen" :
						  "tasks not seen") :
					"threads and tasks not seen");
		return;
	}
	fmt_site(site, sizeof(site), g[best].t->pub.file, g[best].t->pub.line);
	len = (size_t)snprintf(buf, size, "%u %s (%s)", g[best].n,
			       task_label(g[best].t), site);
	if (n > g[best].n && len < size)
		snprintf(buf + len, size - len, " +%u", n - g[best].n);
}

/*
 * Channel-full: senders kept waiting for room past the threshold.  The
 * warning's task is the channel's receiver (RES_OWNER): it did not keep
 * up.  Said with what it is doing now and who waits to send (an audit:
 * the senders were not named).
 */
static void warn_channel_full(struct probe *p, res_rec_t *r, uint64_t now)
{
	/* Cut to the warning's detail when raised: the receiver first. */
	char what[160], rx[160], doing[96], tx[160], d[640];
	task_rec_t *t = r->pub.owner ?
				weft__collector_task_find(p, r->pub.owner) :
				NULL;

	fmt_res(what, sizeof(what), r);
	/* What it does now only while sends wait: once the window's waits
	 * have ended, now is not when they waited (an audit saw a wait at
	 * start-up told with where the receiver was 250 ms later). */
	doing[0] = '\0';
	if (t && send_waits(r))
		rx_doing(r, t, now, doing, sizeof(doing));
	if (t) {
		snprintf(rx, sizeof(rx), "receiver %llu (%s)%s%s",
			 (unsigned long long)r->pub.owner, task_label(t),
			 doing[0] ? " " : "", doing);
	} else if (r->pub.owner) {
		snprintf(rx, sizeof(rx), "receiver %llu not seen",
			 (unsigned long long)r->pub.owner);
	} else {
		/* The receiver is known by its first receive (RES_OWNER): a
		 * task stuck before it is not one the channel can name. */
		snprintf(rx, sizeof(rx), "no receive seen yet");
	}
	tx_waiting(p, r, tx, sizeof(tx));
	snprintf(d, sizeof(d),
		 "%s full: %llu sends > %.0f ms, max %.1f ms; %s; senders %s",
		 what, (unsigned long long)r->win_waits,
		 (double)p->config.contention_ns / 1e6,
		 (double)r->win_max_wait / 1e6, rx, tx);
	res_warn(p, WEFT_WARN_CHANNEL_FULL, t, now, r->win_max_wait, d);
}

/*
 * Blocking-queue, of a convoy over when looked at: no job runs now, the
 * window's longest hold (a job released since its first wait began) is
 * what held the threads.  @d holds the detail's first @len bytes.
 */
static void warn_pool_gone(struct probe *p, res_rec_t *r, uint64_t now, char *d,
			   size_t size, size_t len)
{
	task_rec_t *t = r->win_hold_task ?
				weft__collector_task_find(p, r->win_hold_task) :
				NULL;
	char site[80];

	fmt_site(site, sizeof(site), r->win_hold_file, r->win_hold_line);
	if (len >= size)
		len = size - 1; /* (cannot be: the start is short) */
	if (!r->win_hold_end)
		snprintf(d + len, size - len, "no job was seen hold a thread");
	else if (r->win_hold_task)
		snprintf(d + len, size - len,
			 "held longest by \"%s\" (%s) of task %llu (%s), "
			 "%.1f ms",
			 r->win_hold_label ? r->win_hold_label : "unnamed",
			 site, (unsigned long long)r->win_hold_task,
			 task_label(t), (double)r->win_hold_ns / 1e6);
	else
		snprintf(d + len, size - len,
			 "held longest by \"%s\" (%s) of a plain thread, "
			 "%.1f ms",
			 r->win_hold_label ? r->win_hold_label : "unnamed",
			 site, (double)r->win_hold_ns / 1e6);
	res_warn(p, WEFT_WARN_BLOCKING_QUEUE, t, now, r->win_max_wait, d);
}

/*
 * Blocking-queue: jobs kept waiting for a pool thread past the
 * threshold.  What held the threads: the jobs running now, grouped by
 * the task that submitted them and their name; the warning's task is the
 * one with the most (the longest-held on a tie).
 */
static void warn_blocking_queue(struct probe *p, res_rec_t *r, uint64_t now,
				uint64_t waiting_now)
{
	/*
	 * The jobs holding the threads, grouped by their name and by what
	 * submitted them: the submitting tasks' name and spawn site (a route
	 * spawns a task a request, each with its job), or a plain thread.
	 * Each group keeps its longest-running job's task.
	 */
	enum { TOP = 3 };
	struct grp {
		const char *label, *file; /* the job's name, submit site */
		uint32_t line, n;
		const char *tname, *tfile; /* the submitting tasks' */
		uint32_t tline;
		bool thread;          /* submitted by a plain thread */
		bool many;            /* by more than one task */
		uint64_t task, since; /* the longest-running */
	} g[TOP] = { { 0 } };
	unsigned ng = 0, best = 0, others = 0;
	char d[512], who[TOP][200], site[80];
	task_rec_t *t;
	size_t len;

	for (uint32_t i = 0; i < r->nh; i++) {
		const res_holder_t *h = &r->holders[i];
		const task_rec_t *ht;
		const char *tname, *tfile;
		uint32_t tline;
		unsigned k;

		/* Held across drops: it may have ended in them (its
		 * release dropped), a job no thread runs. */
		if (weft__collector_across_drops(p, h->since, now))
			continue;
		ht = h->task ? weft__collector_task_find(p, h->task) : NULL;
		tname = ht ? ht->pub.name : NULL;
		tfile = ht ? ht->pub.file : NULL;
		tline = ht ? ht->pub.line : 0;
		for (k = 0; k < ng; k++)
			if (g[k].label == h->label && g[k].file == h->file &&
			    g[k].line == h->line && g[k].tname == tname &&
			    g[k].tfile == tfile && g[k].tline == tline &&
			    g[k].thread == !h->task)
				break;
		if (k == ng) {
			if (ng == TOP) {
				others += h->count ? h->count : 1;
				continue;
			}
			g[ng++] = (struct grp){ .label = h->label,
						.file = h->file,
						.line = h->line,
						.tname = tname,
						.tfile = tfile,
						.tline = tline,
						.thread = !h->task,
						.task = h->task,
						.since = h->since };
		}
		/* A task's jobs on several threads: one holder, counted. */
		g[k].n += h->count ? h->count : 1;
		g[k].many |= h->task != g[k].task;
		if (h->since < g[k].since) {
			g[k].since = h->since;
			g[k].task = h->task;
		}
	}
	for (unsigned k = 1; k < ng; k++)
		if (g[k].n > g[best].n ||
		    (g[k].n == g[best].n && g[k].since < g[best].since))
			best = k;
	for (unsigned k = 0; k < ng; k++) {
		fmt_site(site, sizeof(site), g[k].file, g[k].line);
		if (g[k].thread)
			snprintf(who[k], sizeof(who[k]),
				 "%u x \"%s\" (%s) of a plain thread", g[k].n,
				 g[k].label ? g[k].label : "unnamed", site);
		else if (!g[k].many)
			snprintf(who[k], sizeof(who[k]),
				 "%u x \"%s\" (%s) of task %llu (%s)", g[k].n,
				 g[k].label ? g[k].label : "unnamed", site,
				 (unsigned long long)g[k].task,
				 g[k].tname ? g[k].tname : "unnamed");
		else
			snprintf(who[k], sizeof(who[k]),
				 "%u x \"%s\" (%s) of %s tasks", g[k].n,
				 g[k].label ? g[k].label : "unnamed", site,
				 g[k].tname ? g[k].tname : "unnamed");
	}
	len = (size_t)snprintf(d, sizeof(d),
			       "pool full: %llu jobs waited > %.0f ms (max "
			       "%.1f ms, %llu now); ",
			       (unsigned long long)r->win_waits,
			       (double)p->config.contention_ns / 1e6,
			       (double)r->win_max_wait / 1e6,
			       (unsigned long long)waiting_now);
	if (!ng) {
		/*
		 * The convoy is over: its jobs ended and its waits too
		 * since the last look (a look every 250 ms).  The guilty
		 * one is the window's longest-held job.
		 */
		warn_pool_gone(p, r, now, d, sizeof(d), len);
		return;
	}
	/*
	 * The jobs seen on its threads, not a count of them: the pool's
	 * size is not known here, and a job held across drops is left out
	 * ("its 3 threads ran 3 x" read as a pool of 3, an outside tester
	 * said, of a pool of 4).
	 */
	if (len < sizeof(d))
		len += (size_t)snprintf(d + len, sizeof(d) - len,
					"on its threads: ");
	for (unsigned k = 0; k < ng && len < sizeof(d); k++) {
		unsigned o = (best + k) % ng; /* the guilty first */

		len += (size_t)snprintf(d + len, sizeof(d) - len, "%s%s",
					k ? ", " : "", who[o]);
	}
	if (others && len < sizeof(d))
		snprintf(d + len, sizeof(d) - len, ", %u more", others);
	t = ng && g[best].task ? weft__collector_task_find(p, g[best].task) :
				 NULL;
	res_warn(p, WEFT_WARN_BLOCKING_QUEUE, t, now, r->win_max_wait, d);
}

static void res_check_one(struct probe *p, res_rec_t *r, uint64_t now)
{
	uint64_t oldest = 0, oldest_task = 0, waiting = 0;
	bool fresh;

	/* The waits going on now count too: a convoy that never ends. */
	for (uint32_t i = 0; i < r->nw; i++) {
		const res_waiter_t *w = &r->waiters[i];

		/* Across drops, its end may be among the lost events. */
		if (!waits_count(r, w->op) || now < w->since ||
		    now - w->since <= p->config.contention_ns ||
		    res_unsure(p, w->unsure, w->since, now))
			continue;
		waiting++;
		if (!oldest || w->since < oldest) {
			oldest = w->since;
			oldest_task = w->task;
		}
	}
	r->pub.oldest_wait_ns = r->nw ? r->waiters[0].since : 0;
	/*
	 * A wait going on is said once, then again each time it has
	 * doubled since (at most every RES_WARN_EVERY_NS): a hang reads as
	 * long as it is, not as the threshold it first passed.
	 */
	fresh = oldest && (oldest != r->ongoing_warned ||
			   now - oldest >= 2 * r->ongoing_said_ns);
	if (fresh && now - oldest > r->win_max_wait) {
		/* A wait still going on is longer than any that ended. */
		if (!r->win_waits)
			window_open(r, oldest);
		r->win_max_wait = now - oldest;
		r->win_wait_task = oldest_task;
	}
	if (!r->win_waits && !fresh)
		return;
	if (r->warned_at && now < r->warned_at + RES_WARN_EVERY_NS)
		return;
	/*
	 * Waits going on and nobody seen holding it: the holder's start may
	 * be on a ring read a pass later than the waits', or the pool's
	 * threads are still starting with their first jobs (20 ms under
	 * TSan).  The culprit is waited for, up to a second of the oldest
	 * wait; then the warning says it was not seen.
	 */
	if (r->pub.kind != WEFT_RES_MPSC && waiting && !r->nh &&
	    !r->win_hold_end && now - oldest < RES_WARN_EVERY_NS)
		return;
	/*
	 * A hold going on now may be the longest; not one across drops,
	 * whose release may be among them (as a wait's end, above): held
	 * "ever longer", it would be every warning's culprit.
	 */
	for (uint32_t i = 0; i < r->nh; i++)
		if ((now > r->holders[i].since ||
		     r->holders[i].since_unknown) &&
		    !weft__collector_across_drops(p, r->holders[i].since, now))
			window_holder(r, &r->holders[i],
				      now - r->holders[i].since, now);
	if (!r->win_waits)
		r->win_waits = waiting;
	if (r->pub.kind == WEFT_RES_MPSC)
		warn_channel_full(p, r, now);
	else if (r->pub.kind == WEFT_RES_BLOCKING_POOL)
		warn_blocking_queue(p, r, now, waiting);
	else
		warn_contention(p, r, now, waiting, oldest);
	r->warned_at = now;
	r->ongoing_warned = oldest;
	r->ongoing_said_ns = oldest ? now - oldest : 0;
	/* The holds said stay, for a next window whose first wait they made
	 * (window_open()). */
	r->win_waits = r->win_max_wait = 0;
}

void weft__collector_res_check(struct probe *p, uint64_t now)
{
	if (!p->res_table || now < p->res_checked_at + RES_CHECK_EVERY_NS)
		return;
	p->res_checked_at = now;
	for (size_t i = 0; i < p->res_table_size; i++) {
		res_rec_t **pp = &p->res_table[i], *r;

		while ((r = *pp)) {
			/* A tombstone past its time: forgotten. */
			if (r->said_dropped && !r->changed &&
			    now > r->pub.dropped_ns + RES_TOMB_NS) {
				*pp = r->hnext;
				p->nres--;
				res_free(r);
				continue;
			}
			pp = &r->hnext;
			if (r->pub.dropped_ns)
				continue;
			if (r->nw ||
			    (r->nh && r->pub.kind == WEFT_RES_SEMAPHORE))
				res_sweep(p, r);
			if (r->pub.kind != WEFT_RES_MUTEX &&
			    r->pub.kind != WEFT_RES_SYNC_MUTEX &&
			    r->pub.kind != WEFT_RES_SEMAPHORE &&
			    r->pub.kind != WEFT_RES_MPSC &&
			    r->pub.kind != WEFT_RES_BLOCKING_POOL)
				continue;
			if (r->win_waits || r->nw)
				res_check_one(p, r, now);
		}
	}
	weft__collector_res_deadlocks(p, now);
}
