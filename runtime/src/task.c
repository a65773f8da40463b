/* SPDX-License-Identifier: MIT */
/*
 * Tasks: allocation, the state machine documented in runtime_internal.h,
 * task wakers and spawning; join handles are in join.c.
 *
 * References: the owned list holds one until the task completes; a queued
 * notification (or the running worker) holds one; the join handle one;
 * each waker clone one.  The last one out frees the task (and drops the
 * join waker, if any, unless the completer took it: it is only ever read
 * by the completer while JOIN_INTEREST and JOIN_WAKER are both set, and
 * the completer wakes it by value).
 */
#include <errno.h>
#include <string.h>

#include "abi_internal.h"
#include "runtime_internal.h"

_Static_assert(sizeof(weft_task_t) % 16 == 0, "task header keeps alignment");
/* Ten words (runtime_internal.h): an idle task's memory, issue 21. */
_Static_assert(sizeof(weft_task_t) == 80, "task header is 80 bytes");

/*
 * The await this thread evaluated last (weft/future.h): stored by
 * WEFT_AWAIT, WEFT_YIELD and the fiber awaits, taken by task_run() after
 * each poll.  Thread-local, so plain accesses.
 */
WEFT_TLS const weft_site_t *weft__await_site;

static void task_dealloc(weft_task_t *t)
{
	/* Read first: an inline record goes with the block. */
	weft_runtime_t *rt = weft__task_rt(t);
	uint8_t cls = t->rec->alloc_class;
	/*
	 * Relaxed: every other reference is gone, and the last one's
	 * acq_rel drop ordered their writes of the word before this read.
	 * COMPLETE with JOIN_WAKER: the completer took the join waker and
	 * woke it by value (task_complete()); it is not ours to drop.
	 */
	uint64_t s = load_relaxed(&t->state);

	if ((s & (TASK_COMPLETE | TASK_JOIN_WAKER)) !=
	    (TASK_COMPLETE | TASK_JOIN_WAKER))
		weft_waker_drop(&t->join_waker);
	weft__task_free(rt, t, cls);
}

static void ref_inc(weft_task_t *t)
{
	/*
	 * Relaxed: a new reference is made from an existing one, which keeps
	 * the task alive meanwhile; nothing is published by it.
	 */
	uint64_t prev = fetch_add_relaxed(&t->state, TASK_REF_ONE);

	if (task_refs(prev) == 0 || task_refs(prev) > ((uint64_t)1 << 56))
		weft_panic("task %llu: reference count overflow",
			   (unsigned long long)t->id);
}

void weft__task_ref_dec_n(weft_task_t *t, uint64_t n)
{
	/*
	 * acq_rel: release orders our uses of the task before the free by
	 * whoever drops the last reference; acquire (on that last drop)
	 * makes everyone else's uses happen before our free.
	 */
	uint64_t prev = fetch_sub_acq_rel(&t->state, n * TASK_REF_ONE);

	if (task_refs(prev) < n)
		weft_panic("task %llu: reference count underflow",
			   (unsigned long long)t->id);
	if (task_refs(prev) == n)
		task_dealloc(t);
}

void weft__task_drop_notified(weft_task_t *t)
{
	weft__task_ref_dec_n(t, 1);
}

/* --------------------------------------------------------- notification */

static void count_noop_wake(void)
{
	weft_worker_t *w = weft__cur_worker;

	if (w)
		counter_inc(&w->c.noop_wakes);
}

static enum task_action notify_by_ref(weft_task_t *t)
{
	uint64_t cur = load_relaxed(&t->state), next;
	enum task_action action;

	do {
		if (cur & (TASK_COMPLETE | TASK_NOTIFIED)) {
			count_noop_wake();
			return TASK_ACTION_NONE;
		}
		if (cur & TASK_RUNNING) {
			next = cur | TASK_NOTIFIED;
			action = TASK_ACTION_NONE;
		} else {
			next = (cur | TASK_NOTIFIED) + TASK_REF_ONE;
			action = TASK_ACTION_SUBMIT;
		}
		/*
		 * acq_rel: release orders what the waker wrote before the
		 * wake (a sent value, a freed slot) before the poll that
		 * follows, whose to_running acquires this word.  A no-op
		 * wake (already NOTIFIED or COMPLETE) stores nothing and so
		 * orders nothing: resources must publish their data through
		 * their own state (as oneshot and countdown do), never
		 * through the wake alone.
		 */
	} while (!cas_acq_rel(&t->state, &cur, next));
	return action;
}

static enum task_action notify_by_val(weft_task_t *t)
{
	uint64_t cur = load_relaxed(&t->state), next;
	enum task_action action;

	do {
		if (cur & TASK_RUNNING) {
			/* The running reference keeps it alive. */
			next = (cur | TASK_NOTIFIED) - TASK_REF_ONE;
			action = TASK_ACTION_NONE;
		} else if (cur & (TASK_COMPLETE | TASK_NOTIFIED)) {
			/* A no-op wake: just drop our reference. */
			next = cur - TASK_REF_ONE;
			action = task_refs(next) == 0 ? TASK_ACTION_DEALLOC
						      : TASK_ACTION_NONE;
		} else {
			/* Our reference becomes the queue's. */
			next = cur | TASK_NOTIFIED;
			action = TASK_ACTION_SUBMIT;
		}
		/* acq_rel: as in notify_by_ref; acquire also for DEALLOC. */
	} while (!cas_acq_rel(&t->state, &cur, next));
	if (action == TASK_ACTION_DEALLOC ||
	    (action == TASK_ACTION_NONE && !(cur & TASK_RUNNING)))
		count_noop_wake();
	return action;
}

static void count_remote_wake(weft_task_t *t)
{
	weft_runtime_t *rt = weft__task_rt(t);

	if (!weft__cur_worker || weft__cur_worker->rt != rt)
		fetch_add_relaxed(&rt->remote_wakes, 1);
}

/* Where a wake of @t comes from, for the probe. */
static inline uint32_t wake_source(const weft_task_t *t)
{
	uint64_t cur = weft__cur_task_id;

	if (cur)
		return cur == t->id ? WEFT_WAKE_SELF : WEFT_WAKE_TASK;
	return weft__wake_source;
}

/*
 * The waker's entry points test the probe once and, when someone listens,
 * divert to an out-of-line twin that emits and then does the same work.
 * Inlined in place, even an out-of-line emit call makes the compiler save
 * a register on entry to every wake (counted with callgrind: 3-4
 * instructions a wake, listening or not); diverted, the unlistened path
 * is a load, a test and a branch.
 */
static inline void wake_by_val(weft_task_t *t)
{
	switch (notify_by_val(t)) {
	case TASK_ACTION_SUBMIT:
		count_remote_wake(t);
		weft__schedule_handed(t);
		break;
	case TASK_ACTION_DEALLOC:
		task_dealloc(t);
		break;
	case TASK_ACTION_NONE:
		break;
	}
}

static inline void wake_by_ref(weft_task_t *t)
{
	if (notify_by_ref(t) == TASK_ACTION_SUBMIT) {
		count_remote_wake(t);
		weft__schedule(t, false);
	}
}

#if WEFT_PROBE
/*
 * Clones of the polled task's own waker made during its timed poll
 * (poll_probed()): told in the poll's record (POLL a2), not one
 * WAKER_CLONE each.  The polling thread's alone.  poll_task: the task in
 * that poll (0: none), set by poll_probed() only.  Not weft__cur_task_id,
 * which task_complete() sets to a dying task while its drop runs, maybe
 * inside another task's poll (a runtime destroyed from a task of
 * another): a clone that drop makes of its own waker is its own
 * WAKER_CLONE, not one in the polled task's POLL.
 */
static WEFT_TLS uint32_t poll_clones;
static WEFT_TLS uint64_t poll_task;

__attribute__((noinline)) static weft_waker_t
task_waker_clone_probed(weft_task_t *t)
{
	ref_inc(t);
	/*
	 * In a timed poll of this very task (poll_task), and room left in
	 * the count: counted in the POLL.  Any other clone (another
	 * task's waker, outside a poll, past the count's bits) is an event.
	 */
	if (t->id == poll_task && poll_clones < WEFT_POLL_CLONES_MAX)
		poll_clones++;
	else
		weft__probe_emit(WEFT_EV_WAKER_CLONE, t->id, 0, 0);
	return (weft_waker_t){ &weft__task_waker_vtable, t };
}

__attribute__((noinline)) static void
task_waker_wake_probed(weft_task_t *t)
{
	weft__probe_emit(WEFT_EV_WAKE, t->id, weft__cur_task_id,
			 wake_source(t) | WEFT_WAKE_BY_VAL);
	wake_by_val(t);
}

__attribute__((noinline)) static void
task_waker_wake_by_ref_probed(weft_task_t *t)
{
	weft__probe_emit(WEFT_EV_WAKE, t->id, weft__cur_task_id,
			 wake_source(t));
	wake_by_ref(t);
}

__attribute__((noinline)) static void
task_waker_drop_probed(weft_task_t *t)
{
	weft__probe_emit(WEFT_EV_WAKER_DROP, t->id, 0, 0);
	weft__task_ref_dec_n(t, 1);
}

/* In a void function: when listening, make @call instead and return. */
#define PROBE_DIVERT(call)                                                     \
	do {                                                                   \
		if (__builtin_expect(weft__probe_on(), 0)) {                   \
			call;                                                  \
			return;                                                \
		}                                                              \
	} while (0)
#else
#define PROBE_DIVERT(call) ((void)0)
#endif

static weft_waker_t task_waker_clone(const void *data)
{
	weft_task_t *t = (weft_task_t *)data;

#if WEFT_PROBE
	if (__builtin_expect(weft__probe_on(), 0))
		return task_waker_clone_probed(t);
#endif
	ref_inc(t);
	return (weft_waker_t){ &weft__task_waker_vtable, t };
}

static void task_waker_wake(const void *data)
{
	weft_task_t *t = (weft_task_t *)data;

	PROBE_DIVERT(task_waker_wake_probed(t));
	wake_by_val(t);
}

static void task_waker_wake_by_ref(const void *data)
{
	weft_task_t *t = (weft_task_t *)data;

	PROBE_DIVERT(task_waker_wake_by_ref_probed(t));
	wake_by_ref(t);
}

static void task_waker_drop(const void *data)
{
	weft_task_t *t = (weft_task_t *)data;

	PROBE_DIVERT(task_waker_drop_probed(t));
	weft__task_ref_dec_n(t, 1);
}

const weft_waker_vtable_t weft__task_waker_vtable = {
	.clone = task_waker_clone,
	.wake = task_waker_wake,
	.wake_by_ref = task_waker_wake_by_ref,
	.drop = task_waker_drop,
};

/* ------------------------------------------------------- kept outputs */

/*
 * A value weft_cx_return() was given in a poll that then returned
 * PENDING.  The task's own word for its output is an owned-list link
 * until the task completes (runtime_internal.h), so such a value waits
 * here, keyed by task id, until the task completes or is cancelled.
 * Rare (a task sets its output in the poll that returns READY), so
 * lists under one lock, hashed by id; the task's OUTPUT_KEPT bit lets
 * every other completion skip the lock.
 *
 * The bit is set (relaxed) by the poll that keeps the value, on the
 * task's state word, before that poll's to_idle.  Whoever completes the
 * task later has done an RMW on the same word after it (to_running, a
 * claim, or to_idle itself), so by coherence its load of the word sees
 * the bit; the entry itself is guarded by kept_lock.
 */
#define KEPT_BUCKETS 256u

struct kept_output {
	struct kept_output *next;
	uint64_t id;
	void *value;
};

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept_output *kept_heads[KEPT_BUCKETS]; /* kept_lock */

static struct kept_output **kept_bucket(const weft_task_t *t)
{
	return &kept_heads[t->id & (KEPT_BUCKETS - 1)];
}

/* From a poll of @t that returned PENDING, on its polling worker. */
static void kept_put(weft_task_t *t, void *value)
{
	struct kept_output **head = kept_bucket(t), *k;

	pthread_mutex_lock(&kept_lock);
	for (k = *head; k; k = k->next)
		if (k->id == t->id)
			break;
	if (!k) {
		k = malloc(sizeof(*k));
		if (!k) {
			pthread_mutex_unlock(&kept_lock);
			fprintf(stderr,
				"weft: out of memory keeping task %llu's "
				"output: its join will read NULL\n",
				(unsigned long long)t->id);
			return;
		}
		k->id = t->id;
		k->next = *head;
		*head = k;
	}
	k->value = value;
	pthread_mutex_unlock(&kept_lock);
	/* Relaxed: see above; the running worker's RMW, to_idle's next. */
	atomic_fetch_or_explicit(&t->state, TASK_OUTPUT_KEPT,
				 memory_order_relaxed);
}

/*
 * Takes @t's kept output out of the list: the value, or NULL.  The
 * caller completes @t and has done an RMW on its state word (see above).
 */
static void *kept_take(weft_task_t *t)
{
	struct kept_output **pp;
	void *value = NULL;

	/* Relaxed: see above. */
	if (__builtin_expect(!(load_relaxed(&t->state) & TASK_OUTPUT_KEPT), 1))
		return NULL;
	pthread_mutex_lock(&kept_lock);
	for (pp = kept_bucket(t); *pp; pp = &(*pp)->next) {
		struct kept_output *k = *pp;

		if (k->id != t->id)
			continue;
		*pp = k->next;
		value = k->value;
		free(k);
		break;
	}
	pthread_mutex_unlock(&kept_lock);
	return value;
}

/* ------------------------------------------------------------ running */

/*
 * RUNNING -> COMPLETE.  The caller holds the running reference (or, at
 * shutdown, the owned list's) and releases it afterwards.
 */
static inline __attribute__((always_inline)) void
task_complete(weft_task_t *t, int status, void *output)
{
	weft_drop_cb drop = t->rec->drop;
	uint64_t cur, next;

	if (drop) {
		/*
		 * The drop runs as the task: what its futures' _fini say
		 * (the end of a sleep's or a lock's wait) names it, at
		 * completion, cancel and shutdown alike.
		 */
		uint64_t was = weft__cur_task_id;

		weft__cur_task_id = t->id;
		drop(t->future);
		weft__cur_task_id = was;
	}
	/*
	 * Off the owned list (the caller took it off, under the shard's
	 * lock): the links' words are the output's and the status's now.
	 */
	t->output = output;
	t->status = status;
	/*
	 * The event goes out before COMPLETE is published: a thread that
	 * joins (weft_join_wait) and then stops a recording must find it
	 * in this worker's ring, and the release below orders the ring's
	 * write before the joiner's acquire of the state.
	 */
	WEFT_PROBE_EVENT(COMPLETE, t->id, 0, (uint32_t)status);
	cur = load_relaxed(&t->state);
	do {
		next = (cur & ~TASK_RUNNING) | TASK_COMPLETE;
		/*
		 * acq_rel: release publishes output and status to the join
		 * handle (pairs with its acquire load); acquire pairs with
		 * the join handle's release when it set JOIN_WAKER, so the
		 * waker we are about to read is fully written.
		 */
	} while (!cas_acq_rel(&t->state, &cur, next));

	/*
	 * JOIN_WAKER is only set while JOIN_INTEREST is (weft_join_drop()
	 * clears both before completion), and neither the handle nor anyone
	 * else changes it once COMPLETE is set: so COMPLETE with JOIN_WAKER
	 * says, for good, that the waker is ours, and we wake it by value
	 * (one WAKE, no WAKER_DROP at the free, one RMW on the joiner's
	 * word fewer).  The handle may still read the field (will_wake), so
	 * we wake a copy and leave the field as it is: task_dealloc() knows
	 * from the same two bits not to drop it.
	 */
	if ((cur & TASK_JOIN_INTEREST) && (cur & TASK_JOIN_WAKER)) {
		weft_waker_t w = t->join_waker;

		weft_waker_wake(&w);
	}
}

#if WEFT_PROBE
/*
 * Announces await site @id (@site) on @r (AWAIT_SITE, stamped @ts) unless
 * this ring did in this listening period.  Return: whether the collector
 * will have met the site by this ring's next event; false (the event
 * dropped) leaves it untold, and the poll says where with a PARKED_AT.
 *
 * Per ring, as spawn sites are (site_told()): on one ring the
 * announcement is always before the POLL that names the site, whatever
 * order the collector reads the rings in.  Relaxed load of the
 * generation, for the reason given there: a stale one at worst takes a
 * site for told that a reader never met, which then shows as a place not
 * known, never as another site (ids are not reused).
 */
static bool await_told(weft_ring_t *r, uint32_t id, const weft_site_t *site,
		       uint64_t ts)
{
	uint32_t gen = load_relaxed(&weft__probe_listen_gen);
	unsigned i = id - 1u;
	uint64_t bit = 1ull << (i % 64);
	weft_event_t ev = { .ts = ts,
			    .task = id,
			    .a1 = (uintptr_t)site->file,
			    .a2 = (uint32_t)site->line,
			    .worker = weft__probe_worker,
			    .kind = WEFT_EV_AWAIT_SITE };

	if (__builtin_expect(r->awaits_gen != gen, 0)) {
		memset(r->awaits_told, 0, sizeof(r->awaits_told));
		r->awaits_gen = gen;
	}
	if (r->awaits_told[i / 64] & bit)
		return true;
	if (!weft__ring_push_spsc(r, &ev))
		return false;
	r->awaits_told[i / 64] |= bit;
	return true;
}

/*
 * A poll while the probe listens: timed, published for the never-yielded
 * check, and followed by the lock checks.  Out of line so that the
 * common path (nobody listening) stays small.
 */
__attribute__((noinline)) static weft_poll_t
poll_probed(weft_worker_t *w, weft_task_t *t, weft_cx_t *cx)
{
	uint64_t start = weft__probe_clock(), end;
	const weft_site_t *site = NULL;
	bool parked_at = false;
	weft_ring_t *ring;
	weft_poll_t r;
	uint32_t a2;

	/* Relaxed: a hint for the collector's never-yielded check. */
	store_relaxed(&w->probe_poll_start, start);
	store_relaxed(&w->probe_task, t->id);
	weft__probe_poll_ts = start;
	poll_clones = 0;
	poll_task = t->id;
	r = t->rec->poll(t->future, cx);
	poll_task = 0;
	/* Moved on if the poll's first event made this thread's ring. */
	start = weft__probe_poll_ts;
	weft__probe_poll_ts = 0;
	end = weft__probe_clock();
	store_relaxed(&w->probe_task, 0);
	a2 = (uint32_t)r | (cx->yielded ? WEFT_POLL_YIELDED : 0) |
	     poll_clones << WEFT_POLL_CLONES_SHIFT;
	if (r == WEFT_PENDING) {
		/*
		 * Where it is parked, when that changed since its last
		 * PENDING (task_run() stores it next): a task that awaits
		 * on one line again and again says so once.  Said in the
		 * POLL, by the site's id (WEFT_POLL_SITE_SHIFT), announced
		 * first on this ring if need be; a site with no id, or one
		 * the ring had no room to announce: a PARKED_AT after the
		 * POLL, as before.  A change the collector missed
		 * (listening started later, the ring was full) stays in the
		 * task's parked_at, for a walk of the live tasks to read.
		 */
		site = weft__await_site;
		if (site != load_relaxed(&t->parked_at)) {
			uint32_t id = site ? weft__await_site_id(site) : 0;

			/*
			 * The POLL is this thread's first event: its ring
			 * made now, after the poll's stamps (its making is
			 * not the task's time); NULL: nobody listens.
			 */
			ring = weft__probe_ring;
			if (id && !ring)
				ring = weft__probe_ring_register();
			if (id && ring && await_told(ring, id, site, end))
				a2 |= id << WEFT_POLL_SITE_SHIFT;
			else
				parked_at = true;
		}
	}
	weft__probe_emit_at(end, WEFT_EV_POLL, t->id, end - start, a2);
	/* Locks held across the await: only worth a look if heard. */
	if (r == WEFT_PENDING) {
		if (parked_at)
			weft__probe_emit_at(end, WEFT_EV_PARKED_AT, t->id,
					    site ? (uintptr_t)site->file : 0,
					    site ? (uint32_t)site->line : 0);
		if (t->held_locks)
			weft__probe_locks_at_pending(t);
		if (weft__probe_raw_hook)
			weft__probe_raw_hook(t->id);
	}
	return r;
}
#endif

/*
 * Runs one poll of @t.  @timed: with the probe's poll site, which times
 * the poll when someone listens.  Made twice (weft__task_run and, in a
 * probe build, weft__task_run_quiet without the site) so that a worker
 * whose loop runs while nobody listens pays nothing a poll for it: the
 * worker switches between them when listening starts or stops (see
 * worker_loop()).
 */
static inline __attribute__((always_inline)) void
task_run(weft_worker_t *w, weft_task_t *t, bool timed)
{
	uint64_t cur = load_relaxed(&t->state), next;
	const weft_site_t *site;
	struct weft_cx_s cx;
	void *output = NULL;
	int status = 0;
	weft_poll_t r;

	/* to_running: the queue's reference becomes the running one. */
	do {
		if (!(cur & TASK_NOTIFIED))
			weft_panic("task %llu queued without NOTIFIED",
				   (unsigned long long)t->id);
		if (cur & (TASK_RUNNING | TASK_COMPLETE)) {
			weft__task_drop_notified(t);
			return;
		}
		next = (cur | TASK_RUNNING) & ~TASK_NOTIFIED;
		/*
		 * acq_rel: acquire pairs with the release of the wake that
		 * queued us and of the previous poll's to_idle, so the
		 * future's state and what the waker published are visible.
		 */
	} while (!cas_acq_rel(&t->state, &cur, next));

	if (next & TASK_CANCELLED)
		goto cancel;

	cx.waker = (weft_waker_t){ &weft__task_waker_vtable, t };
	cx.task = t;
	cx.output = NULL;
	cx.returned = false;
	cx.yielded = 0;
	counter_inc(&w->c.polls);
	weft__coop_budget = WEFT_COOP_BUDGET;
	weft__cur_task_id = t->id;
	/*
	 * Release, after the poll count: a monitor that reads this (acquire)
	 * sees the count and our emptying of the LIFO slot before the poll
	 * (monitor.c, steal_lifo()).  A plain store on x86, as the
	 * thread-local it replaces was.
	 */
	store_release(&w->cur, t);
#if WEFT_PROBE
	if (timed && __builtin_expect(weft__probe_on(), 0))
		r = poll_probed(w, t, &cx);
	else
#else
	(void)timed;
#endif
		r = t->rec->poll(t->future, &cx);
	weft__cur_task_id = 0;
	/*
	 * Relaxed: ordered before the worker's next look at its LIFO slot by
	 * the task-state CAS that ends every poll (to_idle or complete) and
	 * fence_after_rmw() in run_task() (worker.c).
	 */
	store_relaxed(&w->cur, NULL);
	/*
	 * The site is cleared after every poll, READY too, so that the next
	 * task's poll on this thread, written by hand, does not find this
	 * one's.  Read only after a PENDING (an instruction less a READY).
	 */
	if (r == WEFT_READY) {
		weft__await_site = NULL;
		/* One kept from an earlier poll, or none: taken either way. */
		output = kept_take(t);
		if (cx.returned)
			output = cx.output;
		goto complete;
	}
	/* Kept for the READY poll (see kept_put()); rare. */
	if (__builtin_expect(cx.returned, 0))
		kept_put(t, cx.output);
	site = weft__await_site;
	weft__await_site = NULL;
	/*
	 * Relaxed: a hint that names a static (never freed), read by other
	 * threads (a task dump through the owned list, the monitor) with no
	 * other data hanging on it.  Stored before to_idle, whose release
	 * orders it before the next poll's store on any worker (to_running
	 * acquires), so the task's sites stay in poll order.
	 */
	store_relaxed(&t->parked_at, site);
#if WEFT_PROBE
	/*
	 * A weft_mutex_t held across this await, with nobody listening (the
	 * timed poll's site reports it otherwise): one load a PENDING.
	 */
	if (__builtin_expect(t->held_locks != NULL, 0) && !weft__probe_on())
		weft__mutex_pending_unheard(t);
#endif

	/* to_idle */
	cur = load_relaxed(&t->state);
	for (;;) {
		if (cur & TASK_CANCELLED)
			goto cancel;
		next = cur & ~TASK_RUNNING;
		if (!(cur & TASK_NOTIFIED))
			next -= TASK_REF_ONE;
		/*
		 * acq_rel: release orders this poll's writes to the future
		 * before the next poll on any worker (pairs with to_running).
		 */
		if (cas_acq_rel(&t->state, &cur, next))
			break;
	}
	if (next & TASK_NOTIFIED) {
		/* Woken during its poll (a yield): back of the queue. */
		weft__schedule(t, true);
	} else if (task_refs(next) == 0) {
		task_dealloc(t);
	}
	return;

cancel:
	(void)kept_take(t);
	output = NULL;
	status = -ECANCELED;
complete:
	/*
	 * Off the owned list before COMPLETE is published, so that a joiner
	 * that sees it complete never counts it among the live tasks (and
	 * before task_complete() writes the output over the links).
	 */
	weft__owned_remove(&weft__task_rt(t)->owned, t);
	counter_inc(&w->c.completed);
	task_complete(t, status, output);
	/* The running reference and the owned list's. */
	weft__task_ref_dec_n(t, 2);
}

void weft__task_run(weft_worker_t *w, weft_task_t *t)
{
	task_run(w, t, true);
}

#if WEFT_PROBE
void weft__task_run_quiet(weft_worker_t *w, weft_task_t *t)
{
	task_run(w, t, false);
}
#endif

bool weft__task_claim_idle(weft_task_t *t)
{
	uint64_t cur = load_relaxed(&t->state), next;

	do {
		if (cur & (TASK_RUNNING | TASK_COMPLETE))
			return false;
		/*
		 * NOTIFIED stays: the queued notification finds the task
		 * RUNNING, then COMPLETE, and drops its reference.
		 */
		next = cur | TASK_RUNNING | TASK_CANCELLED;
		/* acq_rel: acquire the last poll's writes to the future. */
	} while (!cas_acq_rel(&t->state, &cur, next));
	return true;
}

void weft__task_cancel_claimed(weft_task_t *t)
{
	/* Off the list already (weft__owned_take_idle()). */
	(void)kept_take(t);
	task_complete(t, -ECANCELED, NULL);
	weft__task_ref_dec_n(t, 1); /* the owned list's */
}

void weft__task_cancel_at_shutdown(weft_task_t *t)
{
	/* Called with the owned list's reference; no worker runs now. */
	uint64_t cur = load_relaxed(&t->state), next;

	do {
		if (cur & TASK_COMPLETE)
			goto out;
		if (cur & TASK_RUNNING)
			weft_panic("task %llu running at shutdown",
				   (unsigned long long)t->id);
		next = cur | TASK_RUNNING | TASK_CANCELLED;
		/* acq_rel: acquire the last poll's writes to the future. */
	} while (!cas_acq_rel(&t->state, &cur, next));
	/* Off the list already (weft__owned_pop()). */
	(void)kept_take(t);
	task_complete(t, -ECANCELED, NULL);
out:
	weft__task_ref_dec_n(t, 1);
}

/* ---------------------------------------------------------------- spawn */

#if WEFT_PROBE
/*
 * Announces @rec's site on @r (SITE, SITE_LOC, stamped @ts) unless this
 * ring did in this listening period.  Return: whether the collector will
 * have met the site by this ring's next event.  Both events pushed or the
 * site is not marked told: a ring that dropped half of it tells it again
 * at the site's next spawn, and this spawn names itself the old way.
 *
 * Per ring, not per record: a spawn inside a poll is stamped with the
 * poll's start, which can be older than another ring's announcement of
 * the same site, and the collector merges rings by stamp; on one ring
 * the SITE is always before the SPAWN.  Relaxed load of the generation:
 * one stale a moment after listening began makes this ring announce its
 * sites twice (the collector takes a repeat) or, at worst, take a site
 * for told that the collector never met, which then shows as not known,
 * never as another site (ids are not reused).
 */
static bool site_told(weft_ring_t *r, const weft__spawn_rec_t *rec, uint64_t ts)
{
	uint32_t gen = load_relaxed(&weft__probe_listen_gen);
	unsigned i = rec->site - 1u;
	uint64_t bit = 1ull << (i % 64);
	weft_event_t ev = { .ts = ts,
			    .task = rec->site,
			    .a1 = (uintptr_t)rec->name,
			    .a2 = rec->state_size,
			    .worker = weft__probe_worker,
			    .kind = WEFT_EV_SITE };

	if (__builtin_expect(r->sites_gen != gen, 0)) {
		memset(r->sites_told, 0, sizeof(r->sites_told));
		r->sites_gen = gen;
	}
	if (r->sites_told[i / 64] & bit)
		return true;
	if (!weft__ring_push_spsc(r, &ev))
		return false;
	ev.kind = WEFT_EV_SITE_LOC;
	ev.a1 = (uintptr_t)rec->file;
	ev.a2 = (uint32_t)rec->line;
	if (!weft__ring_push_spsc(r, &ev))
		return false;
	r->sites_told[i / 64] |= bit;
	return true;
}

/*
 * The spawn's event, out of line (see the waker's entry points): one
 * SPAWN naming its site, the site announced first where this ring has
 * not yet; or, for a record with no site (or a site this ring could not
 * announce), the SPAWN and its SPAWN_INFO and SPAWN_LOC.
 */
__attribute__((noinline)) static void
spawn_probed(const weft_task_t *t, const weft_spawn_t *spec)
{
	const weft__spawn_rec_t *rec = t->rec;
	weft_ring_t *r = weft__probe_ring;
	uint32_t a2 = (uint32_t)spec->kind & WEFT_SPAWN_KIND_MASK;
	uint64_t ts;

	/*
	 * The thread's first event: its ring first, which moves a poll's
	 * start on (weft__probe_ring_register()), so every event below
	 * takes the new one.  NULL: nobody listens any more.
	 */
	if (__builtin_expect(!r, 0) && !(r = weft__probe_ring_register()))
		return;
	ts = weft__probe_poll_ts ? weft__probe_poll_ts : weft__probe_clock();
	if (rec->site && site_told(r, rec, ts)) {
		weft__probe_emit_at(ts, WEFT_EV_SPAWN, t->id, weft__cur_task_id,
				    a2 | (uint32_t)rec->site
						    << WEFT_SPAWN_SITE_SHIFT);
		return;
	}
	weft__probe_emit_at(ts, WEFT_EV_SPAWN, t->id, weft__cur_task_id, a2);
	weft__probe_emit_at(ts, WEFT_EV_SPAWN_INFO, t->id,
			    (uintptr_t)spec->name, rec->state_size);
	weft__probe_emit_at(ts, WEFT_EV_SPAWN_LOC, t->id,
			    (uintptr_t)spec->file, (uint32_t)spec->line);
}
#endif

int weft_spawn_with(weft_runtime_t *rt, const weft_spawn_t *spec,
		    weft_join_t **join)
{
	weft_worker_t *w = weft__cur_worker;
	const weft__spawn_rec_t *rec;
	weft__spawn_rec_t own;
	size_t size;
	weft_task_t *t;
	uint8_t cls;

	if (!rt)
		rt = weft__cur_rt;
	if (!rt || !spec || !spec->poll ||
	    !weft__reserved_zero(spec->reserved_, sizeof(spec->reserved_)))
		return -EINVAL;
	if (spec->size > UINT32_MAX)
		return -EINVAL;
	if (load_relaxed(&rt->shutdown))
		return -ESHUTDOWN;

	rec = weft__spawn_rec_get(rt, spec);
	if (rec) {
		size = weft__task_block_size(spec->size, false);
		cls = rec->alloc_class;
	} else {
		/* The table is full: the record goes in the task's block. */
		weft__spawn_rec_fill(&own, rt, spec, true);
		size = weft__task_block_size(spec->size, true);
		cls = own.alloc_class;
	}
	t = weft__task_alloc(rt, size, cls);
	if (!t)
		return -ENOMEM;
	if (!rec) {
		weft__spawn_rec_t *in =
			(weft__spawn_rec_t *)((unsigned char *)t + size -
					      sizeof(own));

		*in = own;
		rec = in;
	}
	/* Not yet shared: a relaxed store is enough. */
	store_relaxed(&t->state, TASK_NOTIFIED | TASK_REF_ONE * (join ? 3 : 2) |
					 (join ? TASK_JOIN_INTEREST : 0));
	t->queue_next = NULL;
	t->rec = rec;
	if (w && w->rt == rt) {
		t->id = weft__next_task_id(w);
	} else {
		t->id = weft__next_task_id(NULL);
	}
	t->join_waker = WEFT_WAKER_EMPTY;
	/* The output and status are written at completion (task_complete). */
	t->held_locks = NULL;
	/* Not yet shared: a relaxed store is enough. */
	store_relaxed(&t->parked_at, NULL);
	if (spec->size) {
		if (spec->state)
			memcpy(t->future, spec->state, spec->size);
		else
			memset(t->future, 0, spec->size);
	}

	if (!weft__owned_insert(&rt->owned, t)) {
		weft__task_free(rt, t, cls);
		return -ESHUTDOWN;
	}
	if (w && w->rt == rt)
		counter_inc(&w->c.spawned);
	else
		fetch_add_relaxed(&rt->remote_spawns, 1);
	if (join)
		*join = (weft_join_t *)t;
#if WEFT_PROBE
	if (__builtin_expect(weft__probe_on(), 0))
		spawn_probed(t, spec);
#endif
	weft__schedule(t, false);
	return 0;
}

/* ------------------------------------------------------------- context */

const weft_waker_t *weft_cx_waker(weft_cx_t *cx)
{
	return &cx->waker;
}

void weft_cx_return(weft_cx_t *cx, void *value)
{
	/* A task's goes to it when it completes (task_run()). */
	cx->output = value;
	cx->returned = true;
}

/* A yield's wake of its own RUNNING task (see weft_cx_yield). */
static inline void self_notify(weft_task_t *t)
{
	if (fetch_or_acq_rel(&t->state, TASK_NOTIFIED) & TASK_NOTIFIED)
		count_noop_wake();
}

void weft_cx_yield(weft_cx_t *cx)
{
	weft_task_t *t = cx->task;

	/*
	 * In a task: RUNNING -> RUNNING|NOTIFIED, so to_idle requeues it at
	 * the back (weft__schedule with is_yield).  Under block_on: the
	 * parker is left NOTIFIED and the next park returns at once.
	 *
	 * The common case, a task polled with its own waker, skips the
	 * vtable: the task is RUNNING on this thread (cx->task is set only
	 * by task_run() for the poll in progress), so the wake can only
	 * set NOTIFIED (notify_by_ref's RUNNING branch; COMPLETE is set by
	 * this thread alone, after the poll).  acq_rel as in notify_by_ref,
	 * though only this thread's to_idle reads the bit.
	 */
	if (t && cx->waker.vtable == &weft__task_waker_vtable &&
	    cx->waker.data == t) {
#if WEFT_PROBE
		/*
		 * A timed poll's record says it yielded (one event a yield,
		 * not two).  An untimed one has no record, and its yield
		 * goes unseen: the probe off, or a listener come during the
		 * poll (the worker's loop times the next one).
		 */
		cx->yielded = 1;
#endif
		self_notify(t);
		return;
	}
	weft_waker_wake_by_ref(&cx->waker);
}
