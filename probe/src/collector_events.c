/* SPDX-License-Identifier: MIT */
/*
 * The collector's events, folded into task and worker records (one
 * chunk of the pass at a time, in time order: collector_drain.c), with
 * the warnings an event raises.  The per-event path: its helpers are
 * inline (the record cache's in collector_internal.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector_internal.h"
#include "weft/wire.h"

/*
 * Self-wakes: a busy-wait, not cooperative chunking.  A task that spins
 * on a condition (poll, find nothing, wake itself, again) does nothing
 * in its polls; one that chunks long work (a chunk, a yield, repeat:
 * the recommended pattern) does work in each.  Said once, when over half
 * of at least 16 wakes are its own and the polls that ended so average
 * under BUSY_WAIT_POLL_NS.
 */
#define BUSY_WAIT_POLL_NS 10000u

__attribute__((noinline, cold)) static void
warn_self_wakes(struct probe *p, task_rec_t *t, const weft_event_t *ev)
{
	char d[160];

	t->once |= 1u << WEFT_WARN_SELF_WAKES;
	snprintf(d, sizeof(d),
		 "busy-waits: woke itself for %llu of %llu wakes, doing "
		 "%.1f us a poll (await the condition instead)",
		 (unsigned long long)t->pub.self_wakes,
		 (unsigned long long)t->pub.wakes,
		 (double)t->self_poll_ns / t->self_polls / 1e3);
	weft__collector_warn_task(p, WEFT_WARN_SELF_WAKES, t, ev->worker,
				  ev->ts, 0, d);
}

/* The once bit first: a task that yields in a loop comes here on every
 * poll. */
static inline void check_self_wakes(struct probe *p, task_rec_t *t,
				    const weft_event_t *ev)
{
	if (!(t->once & (1u << WEFT_WARN_SELF_WAKES)) && t->pub.wakes >= 16 &&
	    t->pub.self_wakes * 2 > t->pub.wakes && t->self_polls >= 16 &&
	    t->self_poll_ns < (uint64_t)t->self_polls * BUSY_WAIT_POLL_NS)
		warn_self_wakes(p, t, ev);
}

/*
 * A poll that ended woken by its own task (a yield, told by its record's
 * WEFT_POLL_YIELDED, or a wake of itself in the poll): a self-wake, and
 * its time counted toward telling a busy-wait from chunked work.
 */
static void self_wake_poll(struct probe *p, task_rec_t *t,
			   const weft_event_t *ev, uint64_t dur)
{
	if (ev->a2 & WEFT_POLL_YIELDED) {
		t->pub.wakes++;
		t->pub.self_wakes++;
	}
	t->self_in_poll = false;
	t->self_polls++;
	t->self_poll_ns += dur;
	check_self_wakes(p, t, ev);
}

/*
 * The clones of its own waker the task made in the poll that @ev ends
 * (WEFT_POLL_CLONES_SHIFT), counted as WAKER_CLONE events are.  Read at
 * the poll's end, after any drop or by-value wake of them that another
 * thread made during the poll (merged by time, those come first):
 * outstanding may go below zero meanwhile and is right again here.  The
 * one reader of it, the lost-waker check, looks only at a task idle
 * since a POLL read (and for a second), so never in between.
 */
static inline void poll_clones(task_rec_t *t, const weft_event_t *ev)
{
	uint32_t n = (ev->a2 >> WEFT_POLL_CLONES_SHIFT) & WEFT_POLL_CLONES_MAX;

	/* A test and a branch for a poll of none (a yield loop's). */
	if (n) {
		t->pub.waker_clones += n;
		t->outstanding += n;
	}
}

/*
 * A pending POLL naming await site @id (not 0): where @t parks from now,
 * as a PARKED_AT after the POLL says it (the folded form of one).  A site
 * not met (its announcement dropped, or made before this collector came)
 * parks it at a place not known, never at another site; and leaves the
 * place to the owned list's next read (parked_seen false:
 * collector_reconcile.c), which knows it.
 */
__attribute__((noinline)) static void poll_parked(struct probe *p,
						  task_rec_t *t, uint32_t id)
{
	const struct await_site *s = id < p->nawaits ? &p->awaits[id] : NULL;

	if (s && s->file) {
		t->pub.parked_file = s->file;
		t->pub.parked_line = s->line;
		t->parked_seen = true;
		return;
	}
	p->awaits_unknown++;
	t->pub.parked_file = NULL;
	t->pub.parked_line = 0;
	t->parked_seen = false;
}

/*
 * A long poll of @t on @worker, [@start, @end], that blocked on a
 * weft_mutex_t for most of its own time (@own): *@why names the lock
 * and the wait, where it said "asleep in the kernel (a blocking call)".
 * The task's poll did block its worker; the lock is what it waited for.
 */
static void lock_wait_why(struct probe *p, const task_rec_t *t, uint16_t worker,
			  uint64_t start, uint64_t end, uint64_t own, char *why,
			  size_t len)
{
	const struct worker_lock_wait_s *l;

	if (!weft__collector_has_worker(p, worker))
		return;
	l = &p->wk[worker].lock_wait;
	if (l->task != t->pub.id || l->at < start || l->at > end ||
	    2 * l->wait_ns < own)
		return;
	snprintf(why, len,
		 ": waiting %.1f ms for lock \"%s\" (a weft_mutex_t "
		 "another thread held)",
		 (double)l->wait_ns / 1e6, l->name ? l->name : "?");
}

/*
 * How long @t's poll on @worker, begun at @start, waited for the
 * runtime's own locks (RT_WAIT, told before the POLL on the same ring):
 * all told since the worker's last long poll when the first of them
 * began in this one, else the last when it did.  The worker's tally
 * starts again.
 */
static uint64_t rt_wait_in(struct probe *p, const task_rec_t *t,
			   uint16_t worker, uint64_t start)
{
	struct worker_rt_wait_s *r;
	uint64_t ns = 0;

	if (!weft__collector_has_worker(p, worker))
		return 0;
	r = &p->wk[worker].rt_wait;
	if (r->task == t->pub.id)
		ns = r->first >= start ? r->ns :
		     r->last >= start  ? r->last_ns :
					 0;
	*r = (struct worker_rt_wait_s){ 0 };
	return ns;
}

static void on_rt_wait(struct probe *p, const weft_event_t *ev)
{
	struct worker_rt_wait_s *r;
	uint64_t ns = (uint64_t)ev->a2 * 1000, from = ev->ts; /* its start */

	if (!ev->task || !weft__collector_has_worker(p, ev->worker))
		return;
	r = &p->wk[ev->worker].rt_wait;
	if (r->task != ev->task)
		*r = (struct worker_rt_wait_s){ .task = ev->task,
						.first = from };
	r->last = from;
	r->last_ns = ns;
	r->ns += ns;
}

static void on_poll(struct probe *p, task_rec_t *t, const weft_event_t *ev)
{
	uint64_t dur = ev->a1, start = ev->ts - (dur < ev->ts ? dur : ev->ts);
	/* Both histograms count from the task's second poll: found once. */
	weft_hist_t *h = t->pub.polls ? weft__collector_task_hist(p, t) : NULL;

	poll_clones(t, ev);
	/* Parked elsewhere than after its last pending poll (rare). */
	if (__builtin_expect(ev->a2 >> WEFT_POLL_SITE_SHIFT, 0))
		poll_parked(p, t, ev->a2 >> WEFT_POLL_SITE_SHIFT);

	if (t->pub.state == WEFT_TASK_SCHEDULED && t->woken_at &&
	    start >= t->woken_at) {
		uint64_t delay = start - t->woken_at;
		bool over = weft__collector_delay_news(p, t, delay);

		t->pub.scheduled_ns += delay;
		if (h)
			weft_hist_add(&h[1], delay);
		/*
		 * Woken by a poll that woke many: its delay is the burst's
		 * (one wake-burst warning says them all), or held until
		 * the waking poll ends and tells whether it was one.
		 */
		if (t->wake_seq &&
		    weft__collector_burst_delay(p, t, ev, delay, over))
			over = false;
		if (over)
			weft__collector_warn_sched_delay(p, t, ev->worker,
							 start, delay);
	}
	/*
	 * The wake this poll answered is spent; one of the run that came in
	 * the poll (the task queued again from its end, below) keeps it:
	 * the wait to the next poll is that burst's, as its fellows' are.
	 * Not when the wake in the poll was its own, after a burst's wake
	 * the poll answered: that run ended before the poll began.
	 */
	if (t->wake_seq && (!t->wake_in_poll || t->wake_in_poll < start ||
			    !weft__collector_burst_reaches(p, t, start)))
		t->wake_seq = 0;
	{
		uint16_t before = t->pub.polls ? t->pub.last_worker :
						 t->spawn_worker;

		if (before != WEFT_EVENT_NO_WORKER && before != ev->worker &&
		    ev->worker != WEFT_EVENT_NO_WORKER) {
			t->moved++;
			t->moved_at = ev->ts;
		}
	}
	t->pub.polls++;
	t->pub.busy_ns += dur;
	t->pub.last_worker = ev->worker;
	t->fast_key = weft__collector_poll_key(ev->worker);
	if (dur > t->pub.max_poll_ns)
		t->pub.max_poll_ns = dur;
	if (h)
		weft_hist_add(&h[0], dur);
	if (weft__collector_has_worker(p, ev->worker) &&
	    dur > p->wk[ev->worker].max_poll)
		p->wk[ev->worker].max_poll = dur;

	if (dur >= p->config.long_poll_ns) {
		char why[160], d[sizeof(why) + 64];
		uint64_t own = weft__collector_poll_why(p, ev->worker, start, 0,
							dur, why, sizeof(why));
		/*
		 * Its time in the runtime's own work is not its own: asleep
		 * on a futex, it reads as its own in the split.
		 */
		uint64_t rt = rt_wait_in(p, t, ev->worker, start);
		uint64_t own_t = weft__collector_own_less_rt(own, dur, rt);
		bool by_rt = rt && own >= p->config.long_poll_ns &&
			     own_t < p->config.long_poll_ns;

		if (by_rt)
			own = own_t;
		lock_wait_why(p, t, ev->worker, start, ev->ts, own, why,
			      sizeof(why));

		if (weft__collector_has_worker(p, ev->worker)) {
			struct worker_long_s *l = &p->wk[ev->worker].lng;

			l->task = t->pub.id;
			l->start = start;
			l->end = ev->ts;
			l->by_os = by_rt || weft__collector_by_os(p, own, dur);
			l->by_rt = by_rt;
			snprintf(l->name, sizeof(l->name), "%s",
				 t->pub.name ? t->pub.name : "");
		}
		/*
		 * Long by the OS's doing, not the task's: said as such.  A
		 * poll whose own part is under the threshold and whose wait
		 * is shorter still is said by neither: it was not long but
		 * for the OS, so it is not its task's to be blamed for.
		 * Nor one long by the runtime's lock waits.
		 */
		if (by_rt) {
			weft__collector_warn_rt_wait(p, ev->worker, start, dur,
						     own, rt,
						     WEFT_RT_WAIT_POOL_SUBMIT);
		} else if (weft__collector_by_os(p, own, dur)) {
			weft__collector_warn_preempted(p, ev->worker, start,
						       dur, own);
		} else if (own >= p->config.long_poll_ns && t->last_long_warn &&
			   ev->ts <= t->last_long_warn + 1000000000u) {
			/* One row a second a task; the rest counted in its
			 * fold and said there, none lost. */
			weft__collector_warn_task_held(p, WEFT_WARN_LONG_POLL,
						       t, ev->worker, start,
						       dur);
		} else if (own >= p->config.long_poll_ns) {
			t->last_long_warn = ev->ts;
			/* No split to tell the OS's part from the task's
			 * (no schedstat, a runtime just described): said. */
			snprintf(d, sizeof(d),
				 "one poll ran %.1f ms and blocked worker "
				 "%u%s",
				 (double)dur / 1e6, ev->worker,
				 why[0] ? why :
					  " (how long the OS held it off a "
					  "CPU is not known)");
			weft__collector_warn_task(p, WEFT_WARN_LONG_POLL, t,
						  ev->worker, start, dur, d);
		}
	}

	if ((ev->a2 & WEFT_POLL_YIELDED) || t->self_in_poll)
		self_wake_poll(p, t, ev, dur);
	if (t->in_done) {
		/*
		 * Finished already: a poll folded in after the task's end,
		 * which weft__collector_reconcile() took for finished (the
		 * poll pushed after that pass's snapshot), or whose end came
		 * from another ring read first.  It stays DONE.
		 */
	} else if (ev->a2 & WEFT_POLL_READY) {
		t->pub.state = WEFT_TASK_DONE;
		t->pub.idle_since_ns = 0;
		if (dur < 2000 && t->pub.polls == 1)
			weft__collector_tiny(p, t);
	} else if (ev->a2 & WEFT_POLL_YIELDED) {
		/* Back in a queue from the poll's end (a wake in the poll
		 * came first, and counts from when it came). */
		t->pub.state = WEFT_TASK_SCHEDULED;
		t->pub.idle_since_ns = 0;
		t->woken_at = t->wake_in_poll >= start ? t->wake_in_poll :
							 ev->ts;
		t->woken_on = ev->worker;
	} else if (t->wake_in_poll >= start) {
		/* Woken while it ran: its worker queues it at the end. */
		t->pub.state = WEFT_TASK_SCHEDULED;
		t->pub.idle_since_ns = 0;
		t->woken_at = t->wake_in_poll;
		t->woken_on = ev->worker;
	} else {
		/*
		 * Idle from the poll's end: published as idle_since_ns, so a
		 * reader counts a task that stays pending (one parked on a
		 * notify nobody signals) as idle all along, not only once a
		 * wake ends the stretch and adds it to idle_ns.
		 */
		t->pub.state = WEFT_TASK_IDLE;
		t->idle_since = ev->ts;
		t->pub.idle_since_ns = ev->ts;
		t->lost_check_at = 0;
	}
	t->wake_in_poll = 0;
	weft__collector_task_changed(p, t);
	/* The wakes of the poll that ended here are counted. */
	if (ev->worker < p->nworker_slots && p->wk[ev->worker].run_open)
		weft__collector_burst_poll_end(p, ev);
}

/*
 * A poll poll_fast() is taking whose duration @dur is not under its
 * worker's gate (p->wk_gate): false (nothing changed) when it is long or
 * the worker has a wake run open (on_poll() takes it then); else the
 * worker's max_poll raised to it if need be, and the gate set again.
 * Out of line: once a worker a chunk, and at a new maximum.
 */
__attribute__((noinline)) static bool
poll_fast_gate(struct probe *p, uint64_t *gates, unsigned worker, uint64_t dur)
{
	worker_rec_t *w = &p->wk[worker];
	uint64_t g, lng = p->config.long_poll_ns;

	if (dur >= lng || w->run_open)
		return false;
	if (dur > w->max_poll)
		w->max_poll = dur;
	g = w->max_poll + 1;
	gates[worker] = g < lng ? g : lng;
	return true;
}

/*
 * What every poll poll_fast() takes checks and sets of its delay and its
 * worker (@worker, a slot of p->wk; @gates: p->wk_gate): false (nothing
 * changed) when on_poll() is to take it, as it is for @dur over @ts or
 * long.  Sets *@delay: the poll's start (@ts - @dur) - woken_at.
 */
static inline __attribute__((always_inline)) bool
poll_fast_delay(struct probe *p, task_rec_t *t, uint64_t *gates,
		unsigned worker, uint64_t ts, uint64_t dur, uint64_t *delay)
{
	uint64_t start, d;

	/*
	 * Made here, not with poll_fast()'s tests: kept across them, it
	 * was spilled and loaded again (callgrind).  A duration over its
	 * stamp (on_poll() takes its start as 0) is the subtraction's
	 * borrow: a compare and a branch fewer than a test of its own.
	 */
	if (__builtin_sub_overflow(ts, dur, &start))
		return false;
	/*
	 * start - woken_at, which is under start only when woken_at is set
	 * (not 0) and not after start: on_poll() counts no delay otherwise.
	 */
	d = start - t->woken_at;
	if (d >= start)
		return false;
	/* A delay warning to raise: not here. */
	if (weft__collector_delay_news(p, t, d))
		return false;
	/*
	 * Under the worker's gate: not long, not over its max_poll, no run
	 * open on it (three tests and a worker record's address each poll
	 * before, 6 instructions in the profile).
	 */
	if (__builtin_expect(dur >= gates[worker], 0) &&
	    !poll_fast_gate(p, gates, worker, dur))
		return false;
	/*
	 * The state stays SCHEDULED (idle_since_ns stays 0), from the
	 * poll's end: no wake in it (wake_in_poll 0).  The end as start +
	 * @dur (@ts, with no borrow above): kept to here, @ts was spilled
	 * to the stack and loaded back twice (callgrind).
	 */
	t->woken_at = start + dur;
	*delay = d;
	return true;
}

/*
 * A poll poll_fast() takes of a task whose busy-wait warning is not said
 * yet (its first polls, or chunked work, never said): counted now, and
 * checked.  Out of the fast loop's way (noinline): its tests are
 * poll_fast()'s with the once bit's, and its counts on_poll()'s.
 */
__attribute__((noinline)) static bool
poll_fast_unsaid(struct probe *p, task_rec_t *t, const weft_event_t *ev,
		 uint64_t *gates, weft_hist_t *h)
{
	uint64_t dur = ev->a1, delay;

	if (!poll_fast_delay(p, t, gates, ev->worker, ev->ts, dur, &delay))
		return false;
	if (dur > t->pub.max_poll_ns)
		t->pub.max_poll_ns = dur;
	t->pub.scheduled_ns += delay;
	weft_hist_add(&h[1], delay);
	t->pub.polls++;
	t->pub.busy_ns += dur;
	weft_hist_add(&h[0], dur);
	/* self_wake_poll() */
	t->pub.wakes++;
	t->pub.self_wakes++;
	t->self_polls++;
	t->self_poll_ns += dur;
	check_self_wakes(p, t, ev);
	return true;
}

/*
 * on_poll() for the poll nearly every event of a yielding task is: a
 * yield (the poll ended woken by itself, not READY) of a task known
 * since an earlier poll, queued, on the worker of its last poll, short,
 * that no warning, wake burst or move is to be told about.  Exactly
 * what on_poll() does then, without its tests for the rest: false
 * (nothing done but the task marked changed and listed) when it is none
 * of those, and on_poll() takes it.  Inline in the loop
 * (weft__collector_process()), with no call nor on_poll()'s frame.
 * @gates: p->wk_gate (the count of worker slots is read where a record
 * is not clean: held in a register too, it pushed the poll's stamp to
 * the stack).  @fast: the chunk's
 * list of records with polls taken here (task_rec_t's fast_listed),
 * which the loop folds in at its end.
 *
 * Once the task's busy-wait warning is said, nothing of the chunk reads
 * its counts but a lookup of its record, which folds them in
 * (weft__collector_task_find()): the counts and sums that every such
 * poll adds to (polls, wakes, self_wakes, self_polls, busy, scheduled,
 * the histograms' counts and sums) are added up in fast_n and fast_delay
 * (their time from woken_at and fast_base) and folded in once
 * (weft__collector_fast_fold()).  Nor does
 * anything else change it: until a lookup (or the chunk's end) folds
 * them in, the record stays as such a poll left it, TASK_FAST_CLEAN,
 * and the next one tests only what its event may change.
 * test_collector's test_yields_counted,
 * test_interleaved_yields_counted and test_yield_after_pending_poll
 * check it against the events.
 */
static inline __attribute__((always_inline)) bool
poll_fast(struct probe *p, task_rec_t *t, const weft_event_t *ev,
	  uint64_t *gates, task_rec_t **fast)
{
	uint64_t dur = ev->a1, ts = ev->ts, delay;
	weft_hist_t *h = t->hist;
	unsigned worker = ev->worker;

	/*
	 * The caller compared the event's word with t->fast_key: a POLL, a2
	 * exactly YIELDED (a yield that cloned its waker, rare, goes to
	 * on_poll(), which counts the clones, poll_clones(), so that this
	 * path pays nothing for them), on the worker of its last poll.
	 * Whether it is long is its worker's gate's to say
	 * (poll_fast_delay()).
	 */
	/*
	 * fast_word as TASK_FAST_WORD: changed (publish() has it listed),
	 * clean (fast_listed TASK_FAST_CLEAN), not finished, no wake of
	 * itself in the poll, no wake burst (wake_seq) to hold its delay.
	 * Clean, the record is as this path's last poll of it left it:
	 * its histograms made (t->hist, set from a task's second poll on:
	 * polls > 0), queued, no wake in a poll, its busy-wait warning
	 * said, last polled on a worker with a record (worker slots are
	 * only ever added in a chunk: @worker, its last, still has one).
	 * They are tested here only when it is not.
	 */
	if (__builtin_expect(t->fast_word != TASK_FAST_WORD, 0)) {
		if ((t->fast_word &
		     ~(TASK_FAST_WORD | TASK_FAST_LISTED_BITS)) ||
		    !h || t->pub.state != WEFT_TASK_SCHEDULED ||
		    t->wake_in_poll || worker >= p->nworker_slots)
			return false;
		/* Marked now if need be (on_poll() would mark it too, at
		 * this same event: the same place in publish()'s order). */
		weft__collector_task_changed(p, t);
		if (t->fast_listed == TASK_FAST_UNLISTED) {
			t->fast_listed = TASK_FAST_LISTED;
			t->fnext = *fast;
			*fast = t;
		}
		if (!(t->once & (1u << WEFT_WARN_SELF_WAKES)))
			return poll_fast_unsaid(p, t, ev, gates, h);
		/*
		 * Clean from this poll, counted below (fast_n not 0), until
		 * a lookup folds its counts in; not, if poll_fast_delay()
		 * leaves it to on_poll().  fast_n is 0 here (a fold, or
		 * nothing counted, made it not clean): the sums start from
		 * woken_at now (task_rec_t's fast_base).
		 */
		t->fast_listed = TASK_FAST_CLEAN;
		t->fast_base = t->woken_at;
	}
	if (!poll_fast_delay(p, t, gates, worker, ts, dur, &delay)) {
		/* On the list, to be tested whole by its next poll. */
		t->fast_listed = TASK_FAST_LISTED;
		return false;
	}
	/* The counts for weft__collector_fast_fold(). */
	t->fast_n++;
	t->fast_delay += delay;
	weft_hist_add_bucket(&h[1], delay);
	if (delay > h[1].max_ns)
		h[1].max_ns = delay;
	weft_hist_add_bucket(&h[0], dur);
	/*
	 * max_poll_ns is never under h[0]'s max (every poll counted in h[0]
	 * is in it, and the first poll too): a poll under h[0]'s max is
	 * under both, one test for the two.
	 */
	if (dur > h[0].max_ns) {
		h[0].max_ns = dur;
		if (dur > t->pub.max_poll_ns)
			t->pub.max_poll_ns = dur;
	}
	return true;
}

static void on_wake(struct probe *p, task_rec_t *t, const weft_event_t *ev)
{
	t->pub.wakes++;
	if (ev->a1 == t->pub.id) {
		t->pub.self_wakes++;
		t->self_in_poll = true;
	} else {
		weft__collector_burst_wake(p, t, ev);
	}
	if (ev->a2 & WEFT_WAKE_BY_VAL)
		t->outstanding--;
	/*
	 * A wake handed over a pass late, stamped before the last poll we
	 * folded in, is taken as news: the task shows queued from it.  It
	 * may be stale (the poll ran on it), but it may as well be real: a
	 * wake made in a poll carries that poll's start, which can be long
	 * before it happened.  Telling them apart needs a stamp of its own.
	 */
	if (t->pub.state == WEFT_TASK_IDLE) {
		t->pub.idle_ns +=
			ev->ts > t->idle_since ? ev->ts - t->idle_since : 0;
		t->pub.state = WEFT_TASK_SCHEDULED;
		t->pub.idle_since_ns = 0;
		t->woken_at = ev->ts;
		t->woken_on = ev->worker;
		/*
		 * It may be in a poll we have not seen end (a task taken for
		 * idle by a misjudged poll): if so, that poll's record ends
		 * it SCHEDULED, not IDLE, as any wake in a poll does.
		 */
		t->wake_in_poll = ev->ts;
	} else if (t->pub.state == WEFT_TASK_SCHEDULED) {
		t->wake_in_poll = ev->ts;
	}
	check_self_wakes(p, t, ev);
	weft__collector_task_changed(p, t);
}

void weft__collector_on_complete(struct probe *p, task_rec_t *t,
				 const weft_event_t *ev)
{
	if (t->end_unseen) {
		/* Late, not lost (weft__collector_reconcile()). */
		t->end_unseen = false;
		t->pub.warnings &= ~(1u << WEFT_WARN_EVENTS_DROPPED);
		p->stats.tasks_end_unseen--;
	}
	t->pub.state = WEFT_TASK_DONE;
	t->pub.idle_since_ns = 0;
	t->pub.waiting_on = 0;
	t->pub.waiting_since_ns = 0;
	t->pub.waiting_op = 0;
	t->pub.status = (int32_t)ev->a2;
	t->pub.finished_ns = ev->ts;
	if (!t->in_done) {
		if (t->site)
			weft__collector_leak_done(p, t);
		weft__collector_live_remove(p, t);
		t->in_done = true;
		weft__collector_done_push(p, t);
	}
	weft__collector_task_changed(p, t);
}

/* ----------------------------------------------------------- spawn sites */

/* The sites' tables, as the rings announce them: collector_sites.c. */

static void warn_large_future(struct probe *p, task_rec_t *t,
			      const weft_event_t *ev)
{
	char d[160];

	/* Where it was spawned too: the row names the task, not the site. */
	if (t->pub.file)
		snprintf(d, sizeof(d),
			 "its future's state is %u bytes (spawned at %s:%u): "
			 "keep big buffers behind a pointer",
			 t->pub.state_size, weft__base_name(t->pub.file),
			 t->pub.line);
	else
		snprintf(d, sizeof(d), "its future's state is %u bytes",
			 t->pub.state_size);
	weft__collector_warn_task(p, WEFT_WARN_LARGE_FUTURE, t, ev->worker,
				  ev->ts, 0, d);
}

/*
 * A large future's SPAWN_INFO: its warning waits for the SPAWN_LOC
 * pushed right after it, which a pass may read only the next time (the
 * ring read between the two pushes): said at once, it went out with no
 * location, and the location patched into the kept copy later reached
 * no subscriber.  Kept by task (p->large_pends) meanwhile; said at once,
 * unlocated, when no slot is free.
 */
static void large_future_pend(struct probe *p, task_rec_t *t,
			      const weft_event_t *ev)
{
	if (t->pub.file) {
		warn_large_future(p, t, ev);
		return;
	}
	for (unsigned i = 0; i < LARGE_PENDS; i++)
		if (!p->large_pends[i].task ||
		    p->large_pends[i].task == t->pub.id) {
			p->large_pends[i].task = t->pub.id;
			p->large_pends[i].ends = 0;
			return;
		}
	warn_large_future(p, t, ev);
}

/* @t's SPAWN_LOC: its large future's warning, if it waits, said now. */
static void large_future_located(struct probe *p, task_rec_t *t,
				 const weft_event_t *ev)
{
	for (unsigned i = 0; i < LARGE_PENDS; i++)
		if (p->large_pends[i].task == t->pub.id) {
			p->large_pends[i].task = 0;
			warn_large_future(p, t, ev);
			return;
		}
}

void weft__collector_large_pends_said(struct probe *p)
{
	for (unsigned i = 0; i < LARGE_PENDS; i++) {
		struct large_pending *l = &p->large_pends[i];
		task_rec_t *t;

		/* The end of its own pass, then of the next. */
		if (!l->task || ++l->ends < 2)
			continue;
		t = weft__collector_task_find(p, l->task);
		if (t) {
			weft_event_t ev = { .ts = t->pub.spawned_ns,
					    .worker = t->spawn_worker };

			warn_large_future(p, t, &ev);
		}
		l->task = 0;
	}
}

/*
 * A SPAWN's site (@site, not 0): @t named and located by it, if met.  A
 * site not met leaves @t as it was (unnamed, or named by the owned list's
 * seed): a dropped announcement costs its tasks their names, never gives
 * them another's.
 */
static void spawn_site(struct probe *p, task_rec_t *t, const weft_event_t *ev,
		       uint32_t site)
{
	const struct spawn_site *s = site < p->nsites ? &p->sites[site] : NULL;

	if (!s || s->have != (SITE_HAVE_NAME | SITE_HAVE_LOC)) {
		p->sites_unknown++;
		return;
	}
	t->pub.site = site;
	t->pub.name = s->name;
	t->pub.state_size = s->state_size;
	t->pub.file = s->file;
	t->pub.line = s->line;
	if (s->state_size >= p->config.large_future_bytes)
		warn_large_future(p, t, ev);
	weft__collector_leak_spawned(p, t);
}

/*
 * Whether an event of @kind may create the record of a task not known:
 * only those the task makes while it exists and that say something of it
 * (its spawn, its polls, a lock held across its await, its end).  A waker
 * can outlive its task by any time (in a waiter list, a timer), so can a
 * blocking job, and so can a weft_mutex_t it took and never released
 * (released later, anywhere, the release names it): a wake, a release or
 * a job's end arriving after the task was retired must not bring it back,
 * as a record that would never finish nor expire.
 */
static bool creates_task(uint8_t kind)
{
	switch (kind) {
	case WEFT_EV_SPAWN:
	case WEFT_EV_SPAWN_INFO:
	case WEFT_EV_SPAWN_LOC:
	case WEFT_EV_POLL:
	case WEFT_EV_COMPLETE:
	case WEFT_EV_LOCK_HELD_PENDING:
		return true;
	default:
		return false;
	}
}

/*
 * Inlined into its loop (weft__collector_process()), as it was into the
 * pass when the collector was one file: left to itself, GCC keeps it out
 * of line there, its buffers for warnings being large beside the loop's
 * frame (large-stack-frame-growth), and each event paid a call.
 */
static inline __attribute__((always_inline)) void
process(struct probe *p, const weft_event_t *ev)
{
	task_rec_t *t = NULL;

	/*
	 * Polls and wakes first, each with the lookup its kind needs: they
	 * are nearly every event, and going through creates_task() and then
	 * the switch cost them two dispatches an event (callgrind).
	 */
	if (ev->kind == WEFT_EV_POLL) {
		if (ev->task &&
		    (t = weft__collector_task_get(p, ev->task, ev->ts)))
			on_poll(p, t, ev);
		return;
	}
	if (ev->kind == WEFT_EV_WAKE) {
		if (ev->task && (t = weft__collector_task_find(p, ev->task)))
			on_wake(p, t, ev);
		else if (ev->task && (ev->a2 & WEFT_WAKE_BY_VAL))
			/* A waker gone before its task's record came. */
			weft__collector_early_waker(p, ev->task, -1, 0, 0);
		return;
	}
	/* Spawn and await sites: their task field is the site's id. */
	_Static_assert(WEFT_EV_SITE_LOC == WEFT_EV_SITE + 1 &&
			       WEFT_EV_AWAIT_SITE == WEFT_EV_SITE + 2,
		       "the sites' kinds are one range");
	if (ev->kind >= WEFT_EV_SITE && ev->kind <= WEFT_EV_AWAIT_SITE) {
		if (ev->kind == WEFT_EV_AWAIT_SITE)
			weft__collector_on_await_site(p, ev);
		else
			weft__collector_on_site(p, ev);
		return;
	}
	/* Resources: their task field may be a resource's id (RES_NAME). */
	if (ev->kind >= WEFT_EV_RES_NEW && ev->kind <= WEFT_EV_RES_LABEL) {
		weft__collector_res_event(p, ev);
		return;
	}
	/*
	 * A seed under way (collector_reconcile.c): a task live at its
	 * first read and not seeded yet that ends is let go unseen, not
	 * shown as a finished task with no name, spawned at its end.  One
	 * spawned since (with an id from a worker's older block, up to
	 * seed_max_id) has its record from its SPAWN.
	 */
	if (ev->task)
		t = creates_task(ev->kind) && !(ev->kind == WEFT_EV_COMPLETE &&
						p->seed_shards &&
						ev->task <= p->seed_max_id) ?
			    weft__collector_task_get(p, ev->task, ev->ts) :
		    ev->kind != WEFT_EV_STEAL ?
			    weft__collector_task_find(p, ev->task) :
			    NULL;
	switch (ev->kind) {
	case WEFT_EV_SPAWN:
		if (!t)
			break;
		t->seen_spawn = true;
		t->pub.spawn_unseen = 0;
		t->spawn_worker = ev->worker;
		t->pub.parent = ev->a1;
		t->pub.kind = (uint8_t)(ev->a2 & WEFT_SPAWN_KIND_MASK);
		t->pub.spawned_ns = ev->ts;
		/* Site 0: a trace from before sites, or a record with none;
		 * its SPAWN_INFO and SPAWN_LOC follow. */
		if (ev->a2 >> WEFT_SPAWN_SITE_SHIFT)
			spawn_site(p, t, ev, ev->a2 >> WEFT_SPAWN_SITE_SHIFT);
		/*
		 * Queued from its spawn, unless its polls came first: a pass
		 * takes each ring up to the tail it saw, and a ring read
		 * early can leave the spawn to the next pass while the ring
		 * of the worker that stole and ran the task, read a moment
		 * later, had its polls (and its end).  Waker events of it
		 * read before its record were held for it
		 * (weft__collector_early_waker()).
		 */
		if (!t->pub.polls && !t->in_done) {
			t->pub.state = WEFT_TASK_SCHEDULED;
			t->pub.idle_since_ns = 0;
			t->woken_at = ev->ts;
			t->woken_on = ev->worker;
		}
		weft__collector_task_changed(p, t);
		break;
	case WEFT_EV_SPAWN_INFO:
		if (!t)
			break;
		t->pub.name = (const char *)(uintptr_t)ev->a1;
		t->pub.state_size = ev->a2;
		if (ev->a2 >= p->config.large_future_bytes)
			large_future_pend(p, t, ev);
		break;
	case WEFT_EV_SPAWN_LOC:
		if (!t)
			break;
		t->pub.file = (const char *)(uintptr_t)ev->a1;
		t->pub.line = ev->a2;
		weft__collector_leak_spawned(p, t);
		large_future_located(p, t, ev);
		break;
	case WEFT_EV_PARKED_AT:
		/*
		 * Where its pending poll stopped (a1: the await's file, a
		 * static string of the process; 0: not known).  Sent only
		 * when it changed, so it stays until the next one; the owned
		 * list gives it to a task that parked before we listened.
		 */
		if (!t)
			break;
		t->pub.parked_file = (const char *)(uintptr_t)ev->a1;
		t->pub.parked_line = ev->a1 ? ev->a2 : 0;
		t->parked_seen = true;
		weft__collector_task_changed(p, t);
		break;
	case WEFT_EV_WAKER_CLONE:
		if (t) {
			t->pub.waker_clones++;
			t->outstanding++;
		} else if (ev->task) {
			weft__collector_early_waker(p, ev->task, 1, 1, 0);
		}
		break;
	case WEFT_EV_WAKER_DROP:
		if (t) {
			t->pub.waker_drops++;
			t->outstanding--;
		} else if (ev->task) {
			weft__collector_early_waker(p, ev->task, -1, 0, 1);
		}
		break;
	case WEFT_EV_COMPLETE:
		if (t)
			weft__collector_on_complete(p, t, ev);
		break;
	case WEFT_EV_STEAL:
		weft__collector_steal(p, ev->worker, (unsigned)ev->a1, ev->a2);
		break;
	case WEFT_EV_LOCK_HELD_PENDING:
		if (!t)
			break;
		weft__collector_lock_heard(p, ev);
		t->pub.locks_held++;
		break;
	case WEFT_EV_LOCK_SITE:
		weft__collector_lock_site(p, ev);
		break;
	case WEFT_EV_LOCK_HELD_END:
		weft__collector_lock_released(p, ev);
		break;
	case WEFT_EV_RT_WAIT:
		on_rt_wait(p, ev);
		break;
	case WEFT_EV_LOCK_ACQUIRE:
		/* Waited a millisecond or more: see on_poll(). */
		if (ev->a2 >= 1000 && ev->task &&
		    weft__collector_has_worker(p, ev->worker))
			p->wk[ev->worker].lock_wait =
				(struct worker_lock_wait_s){
					.task = ev->task,
					.at = ev->ts,
					.wait_ns = (uint64_t)ev->a2 * 1000,
					.name = (const char *)(uintptr_t)ev->a1
				};
		break;
	default:
		break;
	}
}

/*
 * The pass's chunk of @n events, into the records.  A poll whose task
 * heads its hash bucket (nearly every one: hash_of()) and that
 * poll_fast() takes is done there; every other event, and a poll
 * poll_fast() leaves, goes through process().  The table and its mask
 * are held in locals, taken again after each event process() took (which
 * may grow them): kept in p, each fast event loaded them again, a store
 * to a record being free to alias them.  The workers' gates (p->wk_gate)
 * are read from p at each poll (held in a local too, they pushed a poll's
 * delay to the stack), and start each chunk at 0: the config and the
 * workers' max_poll may have changed since the last.  At the end, the counts
 * poll_fast() kept aside are folded into their records, so that between
 * chunks (the subscribers', the rest of the pass) every record is whole.
 */
void weft__collector_process(struct probe *p, size_t n)
{
	const weft_event_t *ev = p->chunk, *end = ev + n;
	task_rec_t **tab = p->table, *fast = NULL;
	size_t mask = p->table_size - 1;

	if (p->nworker_slots)
		memset(p->wk_gate, 0, p->nworker_slots * sizeof(*p->wk_gate));
	for (; ev < end; ev++) {
		if (ev->kind == WEFT_EV_POLL) {
			/* Task 0 is no record's: it finds none here. */
			task_rec_t *t = tab[ev->task & mask];

			if (t && t->pub.id == ev->task) {
				/*
				 * Its a2, worker and flags in one compare
				 * with fast_key (the word holds its kind
				 * too): a yield poll_fast() may take.
				 */
				if (weft__collector_event_word(ev) ==
					    t->fast_key &&
				    poll_fast(p, t, ev, p->wk_gate, &fast))
					continue;
				/* As weft__collector_task_get() finds it. */
				if (t->fast_n)
					weft__collector_fast_fold(t);
				p->last_found = t;
				on_poll(p, t, ev);
			} else {
				process(p, ev);
			}
		} else {
			process(p, ev);
		}
		tab = p->table;
		mask = p->table_size - 1;
	}
	/* No record is freed in a chunk: the list's are all there. */
	while (fast) {
		task_rec_t *t = fast;

		fast = t->fnext;
		t->fnext = NULL;
		weft__collector_fast_fold(t);
		t->fast_listed = TASK_FAST_UNLISTED;
	}
}
