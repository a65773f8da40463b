/* SPDX-License-Identifier: MIT */
/*
 * The worker loop and scheduling.
 *
 * Each worker runs: pick a task (every global_queue_interval ticks the
 * global queue first, so it is never starved; else the LIFO slot, the local
 * queue, then the global queue in a batch), else search (steal half of
 * another worker's queue, at most half the workers searching at once), else
 * park.  After each poll the LIFO slot is drained, at most max_lifo_polls
 * times in a row, so a message-passing pair runs back to back without
 * starving the queue.
 *
 * Scheduling: a task woken or spawned on one of this runtime's workers goes
 * to that worker's LIFO slot (the slot's previous task moves to the back of
 * the local queue) or, for a yield, to the back of the local queue.  Woken
 * or spawned anywhere else, it goes to the global queue.  Whenever work is
 * made visible to other workers, weft__notify_parked() may wake a sleeper
 * (see idle.c); the one exception is a task demoted from the LIFO slot,
 * which this worker runs next itself.  Other workers never steal the LIFO
 * slot; the monitor takes its task when the worker has been in one poll
 * past the stall threshold (monitor.c), and weft_block_in_place() hands
 * it on at once.
 */
#include <errno.h>
#include <string.h>

#include <sys/syscall.h>
#include <unistd.h>

#include "runtime_internal.h"

WEFT_TLS weft_worker_t *weft__cur_worker;
WEFT_TLS weft_runtime_t *weft__cur_rt;
WEFT_TLS uint32_t weft__coop_budget = WEFT_COOP_BUDGET;
WEFT_TLS uint64_t weft__cur_task_id;
WEFT_TLS uint8_t weft__wake_source = WEFT_WAKE_FOREIGN;

bool weft__coop_poll_slow(weft_cx_t *cx)
{
	weft_worker_t *w = weft__cur_worker;

	/* Out of budget: ask to be polled again after the queue. */
	if (w)
		counter_inc(&w->c.forced_yields);
	weft_cx_yield(cx);
	return false;
}

/* Task ids: blocks handed out from one process-wide counter. */
#define ID_BLOCK 1024
/* On a line of its own: main threads spawning remotely hammer it. */
static weft__cacheline_aligned _Atomic uint64_t next_id_block = 1;

uint64_t weft__next_task_id(weft_worker_t *w)
{
	/* Relaxed: ids only need to be unique. */
	if (!w)
		return fetch_add_relaxed(&next_id_block, 1);
	if (w->id_next == w->id_end) {
		w->id_next = fetch_add_relaxed(&next_id_block, ID_BLOCK);
		w->id_end = w->id_next + ID_BLOCK;
	}
	return w->id_next++;
}

void weft__notify_parked(weft_runtime_t *rt)
{
	int index = weft__idle_worker_to_notify(&rt->idle, rt);

	if (index >= 0)
		weft__parker_unpark(&rt->workers[index].parker);
}

/* Tests only (test_runtime): run between a remote push and its notify, to
 * widen that window.  NULL otherwise. */
void (*weft__handed_gap_hook)(void);

static void schedule_remote(weft_runtime_t *rt, weft_task_t *t)
{
	weft_worker_t *w = weft__cur_worker;

	if (w && w->rt == rt)
		counter_inc(&w->c.remote_schedules);
	/*
	 * A closed queue (shutdown) drops the task's reference, which may
	 * free the task and with it the runtime's shell: touch nothing after.
	 */
	if (weft__inject_push(&rt->inject, t)) {
		if (__builtin_expect(weft__handed_gap_hook != NULL, 0))
			weft__handed_gap_hook();
		weft__notify_parked(rt);
	}
}

/*
 * From a thread that is not one of @t's runtime's workers, the push hands
 * the caller's only reference to the global queue: destroy may then close
 * the queue, drop it, finish, and with the task's end free the runtime's
 * shell before the notify that follows the push reads it.  So the shell
 * is held across, as a foreign task allocation holds it
 * (rt->task_balance; weft__runtime_shell_release() frees it if destroy
 * finished meanwhile).  A worker needs no hold: destroy joins the
 * workers before it closes the queue.  (Found by the review of the
 * lock-free global queue; the mutex version had the same gap.)
 */
void weft__schedule_handed(weft_task_t *t)
{
	weft_worker_t *w = weft__cur_worker;
	weft_runtime_t *rt = weft__task_rt(t);

	if (w && w->rt == rt) {
		weft__schedule(t, false);
		return;
	}
	/*
	 * Relaxed: the shell lives through this add (until destroy makes
	 * the balance it stands whatever; after, our task counts in it
	 * until its free, and we hold the task); the release in
	 * weft__runtime_shell_release() orders our last use before a free.
	 */
	atomic_fetch_add_explicit(&rt->task_balance, 1, memory_order_relaxed);
	weft__schedule(t, false);
	weft__runtime_shell_release(rt, 1);
}

/* Returns false when the push overflowed into the global queue. */
static bool push_local(weft_worker_t *w, weft_task_t *t)
{
	counter_inc(&w->c.local_schedules);
	return weft__local_queue_push(&w->queue, t, w->rt, w);
}

void weft__schedule(weft_task_t *t, bool is_yield)
{
	weft_worker_t *w = weft__cur_worker;
	weft_runtime_t *rt = weft__task_rt(t);
	bool notify;

	if (!w || w->rt != rt || w->in_place || load_relaxed(&rt->shutdown)) {
		schedule_remote(rt, t);
		return;
	}
	if (is_yield || rt->disable_lifo) {
		push_local(w, t);
		notify = true;
	} else {
		/* Relaxed: our own slot; see steal_lifo() (monitor.c). */
		weft_task_t *prev = load_relaxed(&w->lifo);

		counter_inc(&w->c.lifo_schedules);
		/*
		 * Empty: a plain store; the monitor's exchange cannot take a
		 * task we also demote.  Release: the task's fields (a new
		 * task's, all of them) are the monitor's once it takes it.
		 * Full: exchange, as the monitor may have taken prev
		 * meanwhile.
		 */
		if (!prev)
			store_release(&w->lifo, t);
		else
			prev = exchange_acq_rel(&w->lifo, t);
		notify = prev != NULL;
		if (prev)
			push_local(w, prev);
	}
	if (notify)
		weft__notify_parked(rt);
}

/* Takes a batch from the global queue: runs one, queues the rest locally. */
static weft_task_t *next_remote(weft_worker_t *w)
{
	weft_runtime_t *rt = w->rt;
	size_t len, max, n;
	uint32_t room;
	weft_task_t *first;

	if (weft__inject_is_empty(&rt->inject))
		return NULL;
	len = weft__inject_len(&rt->inject);
	/* A fair share of the queue, bounded by our free room. */
	max = len / rt->nworkers + 1;
	room = weft__local_queue_free(&w->queue);
	if (max > room + 1)
		max = room + 1;
	if (max > LOCAL_QUEUE_CAP / 2)
		max = LOCAL_QUEUE_CAP / 2;
	first = weft__inject_pop_batch(&rt->inject, max, &n);
	if (!first)
		return NULL;
	counter_add(&w->c.global_schedules, n);
	if (n > 1)
		weft__local_queue_push_batch_unchecked(&w->queue,
						       first->queue_next,
						       (uint32_t)(n - 1));
	first->queue_next = NULL;
	return first;
}

/*
 * Empties the LIFO slot: a plain load and store, or an exchange while the
 * monitor may be taking the task (steal_lifo() in monitor.c has the
 * argument).  lifo_watch first, then the slot: read the other way round,
 * the slot could be read before the monitor's exchange and the flag after
 * its lowering, and both would run the task.  Acquire: a lowering we read
 * comes after the monitor's exchange, which our load of the slot then
 * sees.  A flag from before the monitor raised it is the store-buffer
 * case, where the monitor sees w->cur cleared and backs off.
 */
static inline weft_task_t *lifo_take(weft_worker_t *w)
{
	bool watch = load_acquire(&w->lifo_watch);
	/* Relaxed: our own slot. */
	weft_task_t *t = load_relaxed(&w->lifo);

	if (!t)
		return NULL;
	if (__builtin_expect(watch, 0))
		return exchange_acq_rel(&w->lifo, NULL);
	store_relaxed(&w->lifo, NULL);
	return t;
}

static weft_task_t *next_task(weft_worker_t *w)
{
	weft_task_t *t;

	if (w->tick % w->rt->global_queue_interval == 0) {
		t = next_remote(w);
		if (t)
			return t;
	}
	t = lifo_take(w);
	if (t)
		return t;
	t = weft__local_queue_pop(&w->queue);
	if (t)
		return t;
	return next_remote(w);
}

static uint32_t fast_rand(weft_worker_t *w)
{
	/* xorshift64*: victim selection only. */
	uint64_t x = w->rand;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	w->rand = x;
	return (uint32_t)((x * 0x2545F4914F6CDD1DULL) >> 32);
}

static weft_task_t *steal_work(weft_worker_t *w)
{
	weft_runtime_t *rt = w->rt;
	unsigned n = rt->nworkers;
	unsigned start;

	if (!w->searching) {
		if (!weft__idle_to_searching(&rt->idle))
			return NULL;
		w->searching = true;
	}
	start = n > 1 ? fast_rand(w) % n : 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned v = (start + i) % n;
		uint32_t stolen;
		weft_task_t *t;

		if (v == w->index)
			continue;
		t = weft__local_queue_steal_into(&rt->workers[v].queue,
						 &w->queue, &stolen);
		if (t) {
			counter_add(&w->c.steals, stolen);
			counter_inc(&w->c.steal_ops);
			WEFT_PROBE_EVENT(STEAL, 0, v, stolen);
			return t;
		}
	}
	return next_remote(w);
}

static void stop_searching(weft_worker_t *w)
{
	if (!w->searching)
		return;
	w->searching = false;
	/*
	 * The last searcher found work: there may be more, wake another.
	 * Unconditionally: the one woken searches, and while it does the
	 * producers' pushes wake nobody.  Waking only if work was queued
	 * already (tried: fewer wake-ups in chained_spawn, whose woken
	 * worker had nothing to find) made a remote producer wake a
	 * parked worker push after push instead: spawn_many_remote's
	 * context switches 1.1-1.8 k -> 2.9-3.1 k, ping_pong's 0.6 k ->
	 * 1.1-1.5 k (50 iterations, perf stat).  The one woken also goes
	 * back to park in the driver if its holder left it: without that,
	 * and with the monitor off, a timer ran 281 ms late behind two
	 * busy workers, where it ran 1-4 ms late with it (the review).
	 */
	if (weft__idle_from_searching(&w->rt->idle))
		weft__notify_parked(w->rt);
}

/* One poll; @quiet: without the probe's poll site (see worker_loop()). */
static inline __attribute__((always_inline)) void
run_one(weft_worker_t *w, weft_task_t *t, bool quiet)
{
#if WEFT_PROBE
	if (quiet) {
		weft__task_run_quiet(w, t);
		return;
	}
#endif
	(void)quiet;
	weft__task_run(w, t);
}

/* Whether a chain of LIFO polls must stop: at shutdown, or (in a probe
 * build) when the loop epoch moves on from @epoch, which it does at
 * shutdown too. */
static inline bool chain_stops(weft_runtime_t *rt, uint32_t epoch)
{
#if WEFT_PROBE
	(void)rt;
	/*
	 * Relaxed: the loop's own acquire load follows.  A quiet loop's
	 * chain thus ends at the next link once someone listens, and the
	 * next poll is timed.
	 */
	return load_relaxed(&weft__loop_epoch.v) != epoch;
#else
	(void)epoch;
	return load_relaxed(&rt->shutdown);
#endif
}

static inline __attribute__((always_inline)) void
run_task(weft_worker_t *w, weft_task_t *t, uint32_t epoch, bool quiet)
{
	weft_runtime_t *rt = w->rt;
	unsigned lifo_polls = 0;

	stop_searching(w);
	run_one(w, t, quiet);
	/*
	 * Between the poll's clearing of w->cur and the look at the slot:
	 * the task-state CAS that ended the poll is the barrier on x86.
	 */
	fence_after_rmw();
	while ((t = lifo_take(w)) != NULL) {
		if (++lifo_polls > rt->max_lifo_polls ||
		    chain_stops(rt, epoch)) {
			/*
			 * Demote: the queue gets its turn.  No wake-up for
			 * other workers unless the push spilled tasks to the
			 * global queue: this task was ours to run next
			 * anyway, and handing a chain of spawns to another
			 * core only adds a cache-line round trip per link.
			 */
			if (!push_local(w, t))
				weft__notify_parked(rt);
			return;
		}
		run_one(w, t, quiet);
		fence_after_rmw();
	}
}

void weft_block_in_place(void (*fn)(void *arg), void *arg)
{
	weft_worker_t *w = weft__cur_worker;
	weft_task_t *first = NULL, *last = NULL, *t;
	weft_runtime_t *rt;
	size_t n = 0;

	/* Relaxed: our own field. */
	if (!w || !load_relaxed(&w->cur)) {
		fn(arg);
		return;
	}
	rt = w->rt;
	/*
	 * Exchange: we are inside a poll, where the monitor may take the
	 * slot (steal_lifo() in monitor.c).
	 */
	t = exchange_acq_rel(&w->lifo, NULL);
	if (t) {
		t->queue_next = NULL;
		first = last = t;
		n++;
	}
	while ((t = weft__local_queue_pop(&w->queue)) != NULL) {
		t->queue_next = NULL;
		if (last)
			last->queue_next = t;
		else
			first = t;
		last = t;
		n++;
	}
	if (n) {
		/* A closed queue (shutdown) drops them. */
		if (weft__inject_push_batch(&rt->inject, first, last, n))
			weft__notify_parked(rt);
	} else if (!load_relaxed(&rt->driver.locked) &&
		   weft__driver_has_work(&rt->driver)) {
		weft__notify_parked(rt); /* someone to park in the driver */
	}
	/*
	 * What @fn wakes or spawns is scheduled as from any other thread, to
	 * the global queue (weft__schedule()); the thread stays this
	 * worker's, and the poll this task's (weft__current_task()).
	 */
	w->in_place = true;
	fn(arg);
	w->in_place = false;
}

/* Wakes a worker if any queue holds work (the last searcher's re-check). */
static void notify_if_work_pending(weft_runtime_t *rt)
{
	/*
	 * seq_cst fence: orders our decrement of the idle state before these
	 * loads (pairs with the fence in weft__idle_worker_to_notify()).
	 */
	fence_seqcst();
	for (unsigned i = 0; i < rt->nworkers; i++) {
		if (!weft__local_queue_is_empty(&rt->workers[i].queue)) {
			weft__notify_parked(rt);
			return;
		}
	}
	if (!weft__inject_is_empty(&rt->inject))
		weft__notify_parked(rt);
}

/*
 * Parks until there is work or shutdown.  Returns true if it saw
 * shutdown: the worker is still on the sleepers list then, and must not
 * take another turn (a second park would push it there twice).
 */
static bool park(weft_worker_t *w)
{
	weft_runtime_t *rt = w->rt;
	bool shutdown = false;
	uint64_t now;

	if (load_relaxed(&w->lifo) || !weft__local_queue_is_empty(&w->queue))
		return false;
	if (weft__idle_to_parked(&rt->idle, w->index, w->searching))
		notify_if_work_pending(rt);
	w->searching = false;

	/*
	 * busy_since to 0 first, then busy_ns with release: a reader that
	 * loads busy_ns (acquire) with this stretch in it sees 0, and does
	 * not count the stretch twice; one that loads it without sees 0
	 * (counts it not at all, until the next read) or the start (counts
	 * it once).  The clock is read after the store, so a reader's count
	 * runs past this stretch's end by a store's latency at most, not by
	 * a preemption here.  Ours alone to write.
	 */
	store_relaxed(&w->busy_since, 0);
	now = weft_now_ns();
	store_release(&w->c.busy_ns,
		      load_relaxed(&w->c.busy_ns) + (now - w->busy_start));
	counter_inc(&w->c.parks);
	WEFT_PROBE_EVENT(PARK, 0, 0, 0);
	for (;;) {
		/* Park inside the driver if nobody else holds it. */
		if (weft__driver_try_lock(&rt->driver)) {
			weft__parker_park_driver(&w->parker);
			weft__driver_unlock(&rt->driver);
		} else {
			weft__parker_park(&w->parker);
		}
		/* Acquire: pairs with the release store in destroy. */
		if (load_acquire(&rt->shutdown)) {
			shutdown = true;
			break;
		}
		if (load_relaxed(&w->lifo) ||
		    !weft__local_queue_is_empty(&w->queue)) {
			/*
			 * The driver woke tasks onto this worker.  Still on
			 * the sleepers list: take ourselves off, not
			 * searching.  Already taken off by a notifier: we
			 * were counted as searching.
			 */
			w->searching = !weft__idle_unpark_worker_by_id(
				&rt->idle, w->index);
			break;
		}
		if (!weft__idle_is_parked(&rt->idle, w->index)) {
			/* Woken by a notifier: we are counted as searching. */
			w->searching = true;
			break;
		}
		/* Spurious, or events that woke no task: park again. */
	}
	counter_inc(&w->c.unparks);
	weft__monitor_kick(rt);
	WEFT_PROBE_EVENT(UNPARK, 0, 0, w->searching);
	w->busy_start = weft_now_ns();
	store_relaxed(&w->busy_since, w->busy_start);
	return shutdown;
}

/*
 * A busy worker turns the driver now and then without blocking, so I/O
 * and timers progress even when no worker parks.
 */
static void maintenance(weft_worker_t *w)
{
	driver_t *d = &w->rt->driver;

	if (weft__driver_has_work(d) && weft__driver_try_lock(d)) {
		weft__driver_turn(d, false);
		weft__driver_unlock(d);
	}
}

/*
 * Defined in every build: the probe's API calls it, built in or not.  A
 * line of its own (the struct's alignment pads it), read by every worker
 * each turn and written only at a toggle or a shutdown.
 */
struct weft__loop_epoch_s weft__loop_epoch;

void weft__loop_restart(void)
{
	/*
	 * acq_rel, for its release half: what changed before the bump (the
	 * listening count, a runtime's shutdown flag) is seen by a worker
	 * whose acquire load of the epoch sees this bump or a later one
	 * (later ones continue the release sequence, being RMWs).
	 */
	fetch_add_acq_rel(&weft__loop_epoch.v, 1);
}

/*
 * A worker's turns.  Without the probe built in: until its runtime shuts
 * down.  With it: until the loop epoch moves on from @epoch (listening
 * started or stopped, or a runtime shuts down) or a park saw shutdown;
 * the caller then chooses again.  Made twice in a probe build: @quiet,
 * while nobody listens, polls without the probe's poll site; the other
 * with it.  The turn's check of the epoch replaces the check of the
 * shutdown flag, a load and a compare either way, so the quiet loop
 * costs what a build without the probe does.  A worker in a poll when
 * the epoch moves finishes it untimed, as a poll that began before
 * anyone listened always was; a chain of LIFO polls stops at the next
 * link (chain_stops()).
 */
static inline __attribute__((always_inline)) void
worker_loop(weft_worker_t *w, uint32_t epoch, bool quiet)
{
	weft_runtime_t *rt = w->rt;

#if WEFT_PROBE
	/* Acquire: pairs with weft__loop_restart(). */
	while (load_acquire(&weft__loop_epoch.v) == epoch) {
#else
	(void)epoch;
	/* Acquire: pairs with the release store of shutdown in destroy. */
	while (!load_acquire(&rt->shutdown)) {
#endif
		weft_task_t *t;

		w->tick++;
		if (w->tick % rt->global_queue_interval == 0)
			maintenance(w);
		t = next_task(w);
		if (!t)
			t = steal_work(w);
		if (t) {
			run_task(w, t, epoch, quiet);
			continue;
		}
		if (park(w))
			return;
	}
}

void *weft__worker_main(void *arg)
{
	weft_worker_t *w = arg;
	weft_runtime_t *rt = w->rt;
	char name[16];

	snprintf(name, sizeof(name), "weft-w%u", w->index);
	pthread_setname_np(pthread_self(), name);
	weft__cur_worker = w;
	weft__cur_rt = rt;
	weft__wake_source = WEFT_WAKE_TASK;
	weft__probe_thread_start((uint16_t)w->index);
	{
		clockid_t cid;

		if (!pthread_getcpuclockid(pthread_self(), &cid))
			store_relaxed(&w->cpu_clock, (int32_t)cid);
		/* Release: the clock before the tid, to the monitor's
		 * acquire (it reads neither before the tid is set). */
		store_release(&w->tid, (int32_t)syscall(SYS_gettid));
	}
	w->busy_start = weft_now_ns();
	store_relaxed(&w->busy_since, w->busy_start);

#if WEFT_PROBE
	for (;;) {
		/*
		 * Acquire, both: the epoch first, so that a shutdown that
		 * bumped it before we read it is seen here, not missed by a
		 * loop that would wait for the next bump.
		 */
		uint32_t epoch = load_acquire(&weft__loop_epoch.v);

		if (load_acquire(&rt->shutdown))
			break;
		/*
		 * Relaxed, as a probe site's load, but a C11 one, not
		 * weft__probe_on()'s asm: ordered after the epoch's acquire
		 * by the memory model, not by the compiler's habits.
		 */
		if (load_relaxed(&weft__probe_listening) != 0) {
			/* Its ring made between polls, not in one. */
			weft__probe_ring_ready();
			worker_loop(w, epoch, false);
		} else {
			worker_loop(w, epoch, true);
		}
	}
#else
	worker_loop(w, 0, true);
#endif
	store_relaxed(&w->busy_since, 0);
	store_release(&w->c.busy_ns, load_relaxed(&w->c.busy_ns) +
					     (weft_now_ns() - w->busy_start));
	weft__probe_thread_stop();
	weft__cur_worker = NULL;
	weft__cur_rt = NULL;
	return NULL;
}
