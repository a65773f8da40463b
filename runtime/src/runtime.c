/* SPDX-License-Identifier: MIT */
/*
 * Runtime life cycle (create, destroy), block_on from plain threads, and
 * the metrics readers.
 *
 * Shutdown order: raise the flag and unpark every worker; close the owned
 * list (spawns now fail) and cancel every task not being polled (so that
 * a worker blocked on what such a task holds is let go); join the workers
 * (each finishes its current poll and leaves), each by the deadline, else
 * leave it and the whole runtime behind (see weft_runtime_destroy_timeout
 * in runtime.h); close the global queue (pushes drop their task); cancel
 * the tasks that were being polled; finally drop the notifications still
 * sitting in local queues and LIFO slots.  Tasks are freed when their last reference goes.
 * Before all that, the blocking pool stops taking jobs, runs those it has
 * and joins its threads (blocking.c), while the workers can still run the
 * tasks those jobs wake.
 *
 * The shell: a task may outlive its runtime (a thread that is not a worker
 * may hold a waker or a join handle), and waking it reaches the global
 * queue, the idle state and the parkers.  Those (the runtime struct and
 * its workers array) are the shell, freed only when destroy is done and
 * the last task is gone.  Counting costs the workers nothing: each counts
 * its own allocations and frees in plain fields; other threads count in
 * rt->task_balance.  Destroy, with the workers joined, adds the workers'
 * net count plus SHELL_DYING plus one for itself; from then on every free
 * elsewhere takes one off, and whoever brings it down to SHELL_DYING frees
 * the shell.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "abi_internal.h"
#include "runtime_internal.h"

#define MAX_WORKERS 4096

const char *weft_version_string(void)
{
	return WEFT_VERSION_STRING;
}

unsigned weft_version(void)
{
	return WEFT_VERSION_HEX;
}

void weft_panic(const char *fmt, ...)
{
	va_list ap;

	fputs("weft: panic: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

static int parse_workers_env(unsigned *out)
{
	const char *s = getenv("WEFT_WORKERS");
	char *end;
	unsigned long v;

	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v == 0 || v > MAX_WORKERS) {
		fprintf(stderr,
			"weft: WEFT_WORKERS=%s is not a number from 1 to %d\n",
			s, MAX_WORKERS);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

int weft_runtime_create(const weft_config_t *config, weft_runtime_t **out)
{
	weft_config_t cfg = config ? *config : (weft_config_t){ 0 };
	weft_runtime_t *rt;
	unsigned started;
	int err;

	if (!out || !weft__reserved_zero(cfg.reserved_, sizeof(cfg.reserved_)))
		return -EINVAL;
	/* A probe callback: attaching to the probe takes the lock the
	 * collector holds for it. */
	if (weft__in_collector)
		return -EDEADLK;
	if (cfg.workers == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		cfg.workers = n > 0 ? (unsigned)n : 1;
		err = parse_workers_env(&cfg.workers);
		if (err)
			return err;
	}
	if (cfg.workers > MAX_WORKERS)
		return -EINVAL;
	if (cfg.global_queue_interval == 0)
		cfg.global_queue_interval = 61;
	if (cfg.max_lifo_polls == 0)
		cfg.max_lifo_polls = 3;

	rt = aligned_alloc(WEFT_CACHELINE, sizeof(*rt));
	if (!rt)
		return -ENOMEM;
	memset(rt, 0, sizeof(*rt));
	rt->nworkers = cfg.workers;
	rt->global_queue_interval = cfg.global_queue_interval;
	rt->max_lifo_polls = cfg.max_lifo_polls;
	rt->disable_lifo = cfg.disable_lifo;
	store_relaxed(&rt->shutdown, false);
	store_relaxed(&rt->task_balance, 0);
	rt->workers = aligned_alloc(WEFT_CACHELINE,
				    sizeof(weft_worker_t) * cfg.workers);
	if (!rt->workers) {
		err = -ENOMEM;
		goto out_free_rt;
	}
	memset(rt->workers, 0, sizeof(weft_worker_t) * cfg.workers);
	err = weft__idle_init(&rt->idle, cfg.workers);
	if (err)
		goto out_free_workers;
	err = weft__driver_init(&rt->driver);
	if (err)
		goto out_idle_fini;
	weft__inject_init(&rt->inject);
	weft__owned_init(&rt->owned);
	weft__blocking_init(&rt->blocking, rt, cfg.max_blocking_threads,
			    cfg.blocking_keep_alive_ns);

	for (unsigned i = 0; i < cfg.workers; i++) {
		weft_worker_t *w = &rt->workers[i];

		weft__local_queue_init(&w->queue);
		w->rt = rt;
		w->index = i;
		w->rand = 0x9E3779B97F4A7C15ULL * (i + 1);
		weft__parker_init(&w->parker, &rt->driver);
	}
	for (started = 0; started < cfg.workers; started++) {
		weft_worker_t *w = &rt->workers[started];

		w->born_ns = weft_now_ns();
		if (pthread_create(&w->thread, NULL, weft__worker_main, w)) {
			err = -EAGAIN;
			goto out_stop_workers;
		}
	}
	err = weft__monitor_start(rt);
	if (err)
		goto out_stop_workers;
	/* The probe's hook: it also starts the console's socket and
	 * WEFT_TRACE's recording (zero configuration). */
	weft__probe_runtime_attach(rt);
	*out = rt;
	return 0;

out_stop_workers:
	store_release(&rt->shutdown, true);
	weft__loop_restart(); /* a probe build's workers read the epoch */
	for (unsigned i = 0; i < started; i++)
		weft__parker_unpark(&rt->workers[i].parker);
	for (unsigned i = 0; i < started; i++)
		pthread_join(rt->workers[i].thread, NULL);
	weft__blocking_fini(&rt->blocking);
	weft__owned_fini(&rt->owned);
	weft__inject_fini(&rt->inject);
	weft__driver_fini(&rt->driver);
out_idle_fini:
	weft__idle_fini(&rt->idle);
out_free_workers:
	free(rt->workers);
out_free_rt:
	free(rt);
	return err;
}

static void shell_free(weft_runtime_t *rt)
{
	weft__owned_fini(&rt->owned);
	weft__inject_fini(&rt->inject);
	weft__idle_fini(&rt->idle);
	free(rt->workers);
	free(rt);
}

void weft__runtime_shell_release(weft_runtime_t *rt, int64_t n)
{
	/*
	 * acq_rel: release orders our last use of the shell before its free;
	 * acquire (for the one that frees) collects everyone else's.
	 */
	int64_t prev = atomic_fetch_sub_explicit(&rt->task_balance, n,
						 memory_order_acq_rel);

	if (prev == SHELL_DYING + n)
		shell_free(rt);
}

/* Tests only (test_runtime): run between destroy's store of shutdown and
 * its bump of the loop epoch, to widen that window.  NULL otherwise. */
void (*weft__shutdown_gap_hook)(void);

/*
 * Runtimes a destroy left behind (a worker still in a poll at its
 * deadline), kept reachable: their memory must outlive that poll.
 */
static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_runtime_t *abandoned;

#define DESTROY_WAIT_NS (5ull * 1000000000u)

/* Joins @w's thread by @deadline (CLOCK_REALTIME); false if still busy. */
/*
 * Cancels every task of @rt not being polled (shutdown: the owned list is
 * closed), so that a worker blocked on what one of them holds (a lock its
 * drop releases) is let go.
 */
static void cancel_idle(weft_runtime_t *rt)
{
	weft_task_t *t;

	for (t = weft__owned_take_idle(&rt->owned); t;) {
		weft_task_t *next = t->owned_next;

		weft__task_cancel_claimed(t);
		t = next;
	}
}

/* How often destroy looks again for tasks gone idle while it joins. */
#define JOIN_STEP_NS 10000000

static bool join_worker(weft_worker_t *w, const struct timespec *deadline)
{
	weft__task_info_t info;
	bool named;

	/*
	 * In steps, cancelling the tasks gone idle since the last look: a
	 * task whose poll was ending as destroy first looked (it had said,
	 * inside that poll, that it was parked) becomes idle only after,
	 * and a worker blocked on what it holds would wait for good (seen
	 * in test_runtime's destroy_frees_worker_blocked_on_idle_task).
	 */
	for (;;) {
		struct timespec step;

		clock_gettime(CLOCK_REALTIME, &step);
		step.tv_nsec += JOIN_STEP_NS;
		if (step.tv_nsec >= 1000000000) {
			step.tv_sec++;
			step.tv_nsec -= 1000000000;
		}
		if (step.tv_sec > deadline->tv_sec ||
		    (step.tv_sec == deadline->tv_sec &&
		     step.tv_nsec >= deadline->tv_nsec)) {
			if (pthread_timedjoin_np(w->thread, NULL, deadline) ==
			    0)
				return true;
			break;
		}
		if (pthread_timedjoin_np(w->thread, NULL, &step) == 0)
			return true;
		cancel_idle(w->rt);
	}
	/*
	 * Relaxed: what it was polling, for the message.  The poll may end
	 * (and free the task) any moment: looked up on the owned list, not
	 * dereferenced here.
	 */
	named = weft__owned_describe(&w->rt->owned, load_relaxed(&w->cur),
				     &info);
	if (named)
		fprintf(stderr,
			"weft: destroy: worker %u is still in a poll of task "
			"%llu (\"%s\", spawned at %s:%d); leaving it behind, "
			"and the runtime's memory with it\n",
			w->index, (unsigned long long)info.id,
			info.name ? info.name : "?",
			info.file ? info.file : "?", info.line);
	else
		fprintf(stderr,
			"weft: destroy: worker %u is still running; leaving "
			"it behind, and the runtime's memory with it\n",
			w->index);
	pthread_detach(w->thread);
	return false;
}

void weft_runtime_destroy(weft_runtime_t *rt)
{
	weft_runtime_destroy_timeout(rt, DESTROY_WAIT_NS);
}

int weft_runtime_destroy_timeout(weft_runtime_t *rt, uint64_t timeout_ns)
{
	struct timespec deadline;
	unsigned left = 0;
	int64_t live = 0;
	weft_task_t *t;

	if (!rt)
		return 0;
	if (weft__cur_worker && weft__cur_worker->rt == rt)
		weft_panic("weft_runtime_destroy() called from its own worker");
	if (weft__in_collector)
		weft_panic("weft_runtime_destroy() called from a probe callback: "
			   "it waits for the probe");
	/*
	 * The blocking pool first, while the workers still run: its queued
	 * and running jobs finish and may still wake tasks.
	 */
	weft__blocking_shutdown(&rt->blocking);

	/*
	 * The workers' time starts now, as documented: the pool's jobs, run
	 * without a limit, took it before (an audit's 2 s jobs left idle
	 * workers "still running", behind).
	 */
	clock_gettime(CLOCK_REALTIME, &deadline);
	if (timeout_ns > (uint64_t)INT32_MAX * 1000000000u)
		timeout_ns = (uint64_t)INT32_MAX * 1000000000u;
	deadline.tv_sec += (time_t)(timeout_ns / 1000000000u);
	deadline.tv_nsec += (long)(timeout_ns % 1000000000u);
	if (deadline.tv_nsec >= 1000000000) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000;
	}

	/* Its console connections close and its socket goes, if ours. */
	weft__probe_runtime_detach(rt);
	/* Release: pairs with the workers' acquire loads of shutdown. */
	store_release(&rt->shutdown, true);
	if (weft__shutdown_gap_hook)
		weft__shutdown_gap_hook();
	weft__loop_restart(); /* a probe build's workers read the epoch */
	for (unsigned i = 0; i < rt->nworkers; i++)
		weft__parker_unpark(&rt->workers[i].parker);
	/*
	 * Spawns fail from here on.  Every task not being polled is
	 * cancelled now, while the workers finish their last polls: a worker
	 * blocked on what an idle task holds (a lock its drop releases) is
	 * let go instead of hanging the join.
	 */
	weft__owned_close(&rt->owned);
	cancel_idle(rt);
	for (unsigned i = 0; i < rt->nworkers; i++)
		left += !join_worker(&rt->workers[i], &deadline);
	/* After the workers: it turns the driver for one stuck meanwhile. */
	weft__monitor_stop(rt);
	if (left) {
		/*
		 * A poll still running may touch anything of the runtime
		 * when it returns: keep it all, reachable.
		 */
		pthread_mutex_lock(&abandoned_lock);
		rt->abandoned_next = abandoned;
		abandoned = rt;
		pthread_mutex_unlock(&abandoned_lock);
		weft__probe_runtime_gone();
		return -ETIMEDOUT;
	}

	/* The workers' counts are final now (pthread_join orders them). */
	for (unsigned i = 0; i < rt->nworkers; i++)
		live += (int64_t)(rt->workers[i].task_allocs -
				  rt->workers[i].task_frees);
	/* Relaxed add: the release side is weft__runtime_shell_release(). */
	atomic_fetch_add_explicit(&rt->task_balance, live + SHELL_DYING + 1,
				  memory_order_relaxed);

	weft__inject_close(&rt->inject);
	while ((t = weft__owned_pop(&rt->owned)) != NULL)
		weft__task_cancel_at_shutdown(t);
	for (unsigned i = 0; i < rt->nworkers; i++) {
		weft_worker_t *w = &rt->workers[i];

		t = load_relaxed(&w->lifo); /* the workers are joined */
		if (t) {
			weft__task_drop_notified(t);
			store_relaxed(&w->lifo, NULL);
		}
		while ((t = weft__local_queue_pop(&w->queue)) != NULL)
			weft__task_drop_notified(t);
	}
	weft__probe_runtime_gone();

	for (unsigned i = 0; i < rt->nworkers; i++)
		weft__worker_cache_fini(&rt->workers[i]);
	weft__blocking_fini(&rt->blocking);
	weft__driver_fini(&rt->driver);
	/* Our own hold on the shell. */
	weft__runtime_shell_release(rt, 1);
	return 0;
}

weft_runtime_t *weft_runtime_current(void)
{
	return weft__cur_rt;
}

unsigned weft_runtime_workers(const weft_runtime_t *rt)
{
	return rt->nworkers;
}

/* ------------------------------------------------------------ block_on */

/* A refcounted parker: the waker of a block_on call may outlive it. */
typedef struct thread_waker_s {
	parker_t parker;
	_Atomic uint32_t refs;
} thread_waker_t;

static const weft_waker_vtable_t thread_waker_vtable;

static void thread_waker_release(thread_waker_t *tw)
{
	/* acq_rel: the usual last-reference free; see weft__task_ref_dec_n(). */
	if (fetch_sub_acq_rel(&tw->refs, 1) == 1)
		free(tw);
}

static weft_waker_t thread_waker_clone(const void *data)
{
	thread_waker_t *tw = (thread_waker_t *)data;

	/* Relaxed: made from a live reference. */
	fetch_add_relaxed(&tw->refs, 1);
	return (weft_waker_t){ &thread_waker_vtable, tw };
}

static void thread_waker_wake_by_ref(const void *data)
{
	weft__parker_unpark(&((thread_waker_t *)data)->parker);
}

static void thread_waker_wake(const void *data)
{
	thread_waker_wake_by_ref(data);
	thread_waker_release((thread_waker_t *)data);
}

static void thread_waker_drop(const void *data)
{
	thread_waker_release((thread_waker_t *)data);
}

static const weft_waker_vtable_t thread_waker_vtable = {
	.clone = thread_waker_clone,
	.wake = thread_waker_wake,
	.wake_by_ref = thread_waker_wake_by_ref,
	.drop = thread_waker_drop,
};

int weft_block_on(weft_runtime_t *rt, weft_poll_cb poll, void *state,
		  void **out)
{
	weft_runtime_t *saved = weft__cur_rt;
	struct weft_cx_s cx;
	thread_waker_t *tw;

	if (weft__cur_worker)
		return -EDEADLK;
	if (!poll)
		return -EINVAL;
	tw = malloc(sizeof(*tw));
	if (!tw)
		return -ENOMEM;
	weft__parker_init(&tw->parker, NULL);
	store_relaxed(&tw->refs, 1);

	if (rt)
		weft__cur_rt = rt;
	cx.waker = (weft_waker_t){ &thread_waker_vtable, tw };
	cx.task = NULL;
	cx.output = NULL;
	cx.returned = false;
	cx.yielded = 0;
	for (;;) {
		weft__coop_budget = WEFT_COOP_BUDGET;
		if (poll(state, &cx) == WEFT_READY)
			break;
		weft__parker_park(&tw->parker);
	}
	weft__cur_rt = saved;
	thread_waker_release(tw);
	if (out)
		*out = cx.output;
	return 0;
}

/* ------------------------------------------------------------- metrics */

int weft_runtime_metrics(const weft_runtime_t *crt, weft_runtime_metrics_t *out)
{
	weft_runtime_t *rt = (weft_runtime_t *)crt;
	uint64_t spawned;

	if (!rt || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->workers = rt->nworkers;
	out->live_tasks = weft__owned_count(&rt->owned);
	out->global_queue_depth = weft__inject_len(&rt->inject);
	/* Relaxed: statistics. */
	out->remote_spawns = load_relaxed(&rt->remote_spawns);
	out->remote_wakes = load_relaxed(&rt->remote_wakes);
	spawned = out->remote_spawns;
	for (unsigned i = 0; i < rt->nworkers; i++) {
		spawned += load_relaxed(&rt->workers[i].c.spawned);
		out->forced_yields +=
			load_relaxed(&rt->workers[i].c.forced_yields);
	}
	out->spawned_tasks = spawned;
	out->timers = load_relaxed(&rt->driver.ntimers);
	out->timers_fired = load_relaxed(&rt->driver.timers_fired);
	out->io_events = load_relaxed(&rt->driver.io_events);
	weft__blocking_metrics(&rt->blocking, out);
	return 0;
}

int weft_worker_metrics(const weft_runtime_t *crt, unsigned index,
			weft_worker_metrics_t *out)
{
	weft_runtime_t *rt = (weft_runtime_t *)crt;
	const worker_counters_t *c;

	if (!rt || !out)
		return -EINVAL;
	if (index >= rt->nworkers)
		return -ERANGE;
	c = &rt->workers[index].c;
	memset(out, 0, sizeof(*out)); /* reserved_ included */
	/* Relaxed loads: single-writer counters, whole values. */
#define READ(f) out->f = load_relaxed((weft_counter_t *)&c->f)
	READ(polls);
	READ(steals);
	READ(steal_ops);
	READ(parks);
	READ(unparks);
	READ(noop_wakes);
	READ(local_schedules);
	READ(lifo_schedules);
	READ(global_schedules);
	READ(remote_schedules);
	READ(overflows);
	READ(spawned);
	READ(completed);
	/* Acquire: pairs with park()'s release (worker.c). */
	out->busy_ns = load_acquire((weft_counter_t *)&c->busy_ns);
	{
		uint64_t since = load_relaxed(&rt->workers[index].busy_since);
		uint64_t now = weft_now_ns();

		/* The stretch in progress: a worker that never parks. */
		if (since && now > since)
			out->busy_ns += now - since;
	}
	READ(forced_yields);
#undef READ
	out->local_queue_depth =
		weft__local_queue_len(&rt->workers[index].queue);
	return 0;
}

unsigned weft__runtime_poll_splits(weft_runtime_t *rt, unsigned i,
				   weft__poll_split_t out[WEFT__POLL_SPLITS])
{
	weft_worker_t *w = &rt->workers[i];

	for (int tries = 0; tries < 8; tries++) {
		/* Acquire: the fields read below are the ones this count
		 * was published with (pairs with the writer's release). */
		uint32_t seq = load_acquire(&w->split_seq), pos, n;

		if (!seq)
			return 0;
		if (seq & 1)
			continue;
		pos = load_relaxed(&w->split_pos);
		n = load_relaxed(&w->split_n);
		if (n > WEFT__POLL_SPLITS)
			n = WEFT__POLL_SPLITS;
		for (uint32_t k = 0; k < n; k++) {
			/* Newest first: the slot before pos, and back. */
			_Atomic uint64_t *v =
				w->split[(pos + WEFT__POLL_SPLITS - 1 - k) %
					 WEFT__POLL_SPLITS];

			out[k] = (weft__poll_split_t){
				.start = load_relaxed(&v[0]),
				.from_ns = load_relaxed(&v[1]),
				.to_ns = load_relaxed(&v[2]),
				.cpu_ns = load_relaxed(&v[3]),
				.wait_ns = load_relaxed(&v[4]),
			};
		}
		/* Acquire fence: the reads above before the recheck. */
		fence_acquire();
		if (load_relaxed(&w->split_seq) == seq)
			return n;
	}
	return 0;
}

void weft__runtime_worker_poll(weft_runtime_t *rt, unsigned i, uint64_t *task,
			       uint64_t *started)
{
	weft_worker_t *w = &rt->workers[i];

	/* Relaxed: the worker's published poll is a hint (runtime_probe.h). */
	*task = load_relaxed(&w->probe_task);
	*started = load_relaxed(&w->probe_poll_start);
}

bool weft__runtime_worker_unheard(weft_runtime_t *rt, unsigned i,
				  uint64_t *task, uint64_t *since_ns)
{
	weft_worker_t *w = &rt->workers[i];
	/* Acquire: the task and start read next are this count's (pairs
	 * with unheard_publish()'s release, monitor.c). */
	uint64_t polls = load_acquire(&w->unheard_polls);

	if (!polls)
		return false;
	*task = load_relaxed(&w->unheard_task);
	*since_ns = load_relaxed(&w->unheard_since);
	/*
	 * Acquire fence, then the count again: had the monitor begun to
	 * write another poll's meanwhile, its clearing of the count is
	 * seen here (unheard_publish()'s release fence).  Then still the
	 * worker's poll (relaxed: a hint, as weft__runtime_worker_poll()).
	 */
	fence_acquire();
	if (load_relaxed(&w->unheard_polls) != polls)
		return false;
	/*
	 * cur first (acquire, as the monitor reads it): the count's bump
	 * for a poll comes before its cur's release store, so a cur of the
	 * next poll is read with the next count, and refused.
	 */
	return load_acquire(&w->cur) && load_relaxed(&w->c.polls) == polls;
}

int32_t weft__runtime_worker_tid(weft_runtime_t *rt, unsigned i)
{
	/* Acquire: pairs with the release in weft__worker_main() (the tid
	 * stored last, after the thread's CPU clock). */
	return load_acquire(&rt->workers[i].tid);
}

uint64_t weft__runtime_worker_born(weft_runtime_t *rt, unsigned i)
{
	/* Written before the thread and the runtime's publication. */
	return rt->workers[i].born_ns;
}

const char *weft__runtime_worker_lock_waiting(weft_runtime_t *rt, unsigned i,
					      uint64_t *since_ns)
{
	/* Acquire: the since stored before this name, or a later one
	 * (see the field). */
	const char *name = load_acquire(&rt->workers[i].lock_waiting);

	*since_ns = load_relaxed(&rt->workers[i].lock_wait_since);
	return name;
}

int32_t weft__runtime_worker_cpu_clock(weft_runtime_t *rt, unsigned i)
{
	/* Acquire on the tid first: the clock was stored before it. */
	if (!load_acquire(&rt->workers[i].tid))
		return 0;
	return load_relaxed(&rt->workers[i].cpu_clock);
}
