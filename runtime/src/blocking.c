/* SPDX-License-Identifier: MIT */
/*
 * The blocking pool: plain threads that run blocking C functions off the
 * workers, and the handles that await their results.
 *
 * Threads.  Started lazily by the spawner when no thread is idle and fewer
 * than max_threads are alive; each takes jobs from the FIFO until it is
 * empty, then waits on the condvar up to keep_alive_ns for a notification
 * and exits if none came.  A thread leaving on keep-alive puts itself in
 * `exited` and joins the thread that was there before, so at most one
 * finished thread is ever left unjoined; shutdown joins it and every live
 * thread.  Everything in the pool is guarded by its one lock (see
 * blocking_internal.h); pthread_create() runs under it, as in Tokio, so a
 * failure is seen and undone by the same critical section.
 *
 * Shutdown (weft_runtime_destroy(), first thing, while the workers still
 * run): refuse new jobs with -ESHUTDOWN, wake every idle thread, and join
 * them all once they have run every job still queued.  Queued jobs are run
 * rather than cancelled so that each accepted job's function sees its
 * argument exactly once (it may own it), and so that a job handing its
 * result to a task finds the workers still there.  A job that never
 * returns makes destroy wait forever, as in Tokio.
 *
 * Handles.  A job and its handle are one allocation with two references
 * (the pool's and the handle's).  state bits: DONE (the result is written),
 * WAKER (the waker field is set and belongs to the completer; while clear,
 * only the handle writes it), DROPPED (no handle any more).  The protocol
 * is the oneshot's (oneshot.c).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "abi_internal.h"
#include "resource_internal.h"
#include "runtime_internal.h"

#define B_DONE 1u
#define B_WAKER 2u
#define B_DROPPED 4u

struct weft_blocking_s {
	weft_blocking_t *queue_next; /* pool lock */
	weft_blocking_cb fn;
	void *arg;
	weft_blocking_discard_cb discard;
	const char *name;
	const char *file; /* where it was submitted, or NULL */
	int line;
	uint64_t task; /* the task that spawned the job, 0 for none (probe) */
	/* While the probe listens: the pool's resource id when its wait for
	 * a thread was told (RES_WAIT), else 0. */
	uint64_t waited;
	void *result; /* written before DONE is published */
	weft_waker_t waker;
	_Atomic uint32_t state;
	_Atomic uint32_t refs;
	bool taken; /* the handle took the result; handle side only */
	/* job_complete() took the waker and woke it by value: the last
	 * reference must not drop it.  The completer's, before its release. */
	bool woken;
};

/* The pool this thread belongs to, for the destroy-from-a-job check. */
static WEFT_TLS blocking_pool_t *cur_pool;

/* ------------------------------------------------------------- handles */

static void job_release(weft_blocking_t *j)
{
	/*
	 * acq_rel: release orders our uses of the job before the free by
	 * whoever drops the last reference; acquire (on that last drop)
	 * orders everyone else's uses, the result and `taken` included,
	 * before our free.
	 */
	if (fetch_sub_acq_rel(&j->refs, 1) != 1)
		return;
	if ((load_relaxed(&j->state) & B_DONE) && !j->taken && j->discard)
		j->discard(j->result);
	if (!j->woken)
		weft_waker_drop(&j->waker);
	free(j);
}

/* Publishes the result and wakes the handle's waker, if it set one. */
static void job_complete(weft_blocking_t *j)
{
	/*
	 * acq_rel: release publishes the result (pairs with the acquire in
	 * weft_blocking_poll()); acquire pairs with the handle's release of
	 * WAKER, so the waker field is fully written before we take it.
	 */
	uint32_t prev = atomic_fetch_or_explicit(&j->state, B_DONE,
						 memory_order_acq_rel);

	/*
	 * The handle never writes the field once DONE is set, but may still
	 * read it (will_wake): wake a copy by value (one WAKE, no WAKER_DROP
	 * at the free) and tell the last reference's job_release() not to
	 * drop the field (as the oneshot does).
	 */
	if ((prev & B_WAKER) && !(prev & B_DROPPED)) {
		weft_waker_t w = j->waker;

		j->woken = true;
		weft_waker_wake(&w);
	}
}

static weft_poll_t handle_ready(weft_blocking_t *h, void **result)
{
	weft__coop_progress();
	h->taken = true;
	if (result)
		*result = h->result;
	return WEFT_READY;
}

weft_poll_t weft_blocking_poll(weft_blocking_t *h, weft_cx_t *cx, void **result)
{
	const weft_waker_t *w = weft_cx_waker(cx);
	uint32_t s;

	if (!weft__coop_poll(cx))
		return WEFT_PENDING;
	/* Acquire: pairs with the release in job_complete(). */
	s = load_acquire(&h->state);
	if (s & B_DONE)
		return handle_ready(h, result);
	if (s & B_WAKER) {
		if (weft_waker_will_wake(&h->waker, w))
			return WEFT_PENDING;
		/* Take the field back: clear WAKER unless done. */
		do {
			if (s & B_DONE)
				return handle_ready(h, result);
			/*
			 * acq_rel: acquire makes DONE's result visible if
			 * the CAS fails on it; clearing gives the field
			 * back to us.
			 */
		} while (!cas_acq_rel(&h->state, &s, s & ~B_WAKER));
	}
	weft_waker_drop(&h->waker);
	h->waker = weft_waker_clone(w);
	/* Acquire: DONE seen here means the result is read next. */
	s = load_acquire(&h->state);
	do {
		if (s & B_DONE)
			return handle_ready(h, result);
		/*
		 * acq_rel: release publishes the waker to job_complete()
		 * (pairs with its acquire); acquire pairs with its release
		 * when the CAS fails on DONE.
		 */
	} while (!cas_acq_rel(&h->state, &s, s | B_WAKER));
	return WEFT_PENDING;
}

bool weft_blocking_is_finished(const weft_blocking_t *h)
{
	/* Acquire: a caller that sees DONE may then poll for the result. */
	return load_acquire(&((weft_blocking_t *)h)->state) & B_DONE;
}

struct wait_state {
	weft_blocking_t *h;
	void *result;
};

static weft_poll_t wait_poll(void *arg, weft_cx_t *cx)
{
	struct wait_state *st = arg;

	return weft_blocking_poll(st->h, cx, &st->result);
}

int weft_blocking_wait(weft_blocking_t *h, void **result)
{
	struct wait_state st = { .h = h };
	int err;

	err = weft_block_on(NULL, wait_poll, &st, NULL);
	if (err)
		return err;
	if (result)
		*result = st.result;
	return 0;
}

void weft_blocking_drop(weft_blocking_t *h)
{
	if (!h)
		return;
	/*
	 * Relaxed: DROPPED only spares the completer a useless wake-up; the
	 * reference count orders the free.
	 */
	atomic_fetch_or_explicit(&h->state, B_DROPPED, memory_order_relaxed);
	job_release(h);
}

/* --------------------------------------------------------------- threads */

static void queue_push(blocking_pool_t *p, weft_blocking_t *j)
{
	j->queue_next = NULL;
	if (p->tail)
		p->tail->queue_next = j;
	else
		p->head = j;
	p->tail = j;
	p->queued++;
}

static weft_blocking_t *queue_pop(blocking_pool_t *p)
{
	weft_blocking_t *j = p->head;

	if (j) {
		p->head = j->queue_next;
		if (!p->head)
			p->tail = NULL;
		j->queue_next = NULL;
		p->queued--;
	}
	return j;
}

#if WEFT_PROBE
/*
 * A job while the probe listens: its wait for a thread ends, it holds one
 * of the pool's threads (a resource: whose job, submitted where, named
 * what), timed between a start and an end event.  The pool outlives its
 * threads' jobs: its resource is there throughout.
 */
__attribute__((noinline)) static void run_job_probed(blocking_pool_t *p,
						     weft_blocking_t *j)
{
	uint64_t start, end;

	if (j->waited)
		weft__res_emit_id(j->waited, WEFT_EV_RES_WAIT_END, j->task,
				  WEFT_RES_OP_JOB);
	weft__res_acquired(&p->res, j->task, j->file, j->line, j->name);
	start = weft__probe_clock();
	weft__probe_emit_at(start, WEFT_EV_BLOCKING_START, j->task,
			    (uintptr_t)j->name, 0);
	j->result = j->fn(j->arg);
	end = weft__probe_clock();
	weft__probe_emit_at(end, WEFT_EV_BLOCKING_END, j->task, end - start,
			    0);
	weft__res_emit(&p->res, WEFT_EV_RES_RELEASE, j->task, 1);
}
#endif

static void run_job(blocking_pool_t *p, weft_blocking_t *j)
{
#if WEFT_PROBE
	if (__builtin_expect(weft__probe_on(), 0))
		run_job_probed(p, j);
	else
#else
	(void)p;
#endif
		j->result = j->fn(j->arg);
	job_complete(j);
	job_release(j);
}

/*
 * Waits for a notification, shutdown or the end of the keep-alive.
 * Called and returns with the lock held.
 *
 * Return: false when the keep-alive ran out (the thread should exit).
 */
static bool idle_wait(blocking_pool_t *p)
{
	struct timespec ts;
	uint64_t deadline;

	p->nidle++;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	deadline = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec +
		   p->keep_alive_ns;
	ts.tv_sec = (time_t)(deadline / 1000000000u);
	ts.tv_nsec = (long)(deadline % 1000000000u);
	for (;;) {
		int rc = pthread_cond_timedwait(&p->cond, &p->lock, &ts);

		/* A notification first: the spawner took us off nidle. */
		if (p->nnotify) {
			p->nnotify--;
			return true;
		}
		if (p->shutdown) {
			p->nidle--;
			return true;
		}
		if (rc == ETIMEDOUT) {
			p->nidle--;
			return false;
		}
		/* Spurious: wait on, to the same deadline. */
	}
}

static void *pool_thread_main(void *arg)
{
	blocking_thread_t *self = arg;
	blocking_pool_t *p = self->pool;
	blocking_thread_t *prev = NULL;

	pthread_setname_np(pthread_self(), "weft-blocking");
	cur_pool = p;
	weft__cur_rt = p->rt;
	/*
	 * Wakes from here (a job completing wakes the task awaiting it, or
	 * a job wakes tasks itself) are the pool's, not those of a thread
	 * foreign to the runtime (the thread-local default): the probe and
	 * the console say "blocking".
	 */
	weft__wake_source = WEFT_WAKE_BLOCKING;

	/* Lock order: the pool lock alone; jobs run without it. */
	pthread_mutex_lock(&p->lock);
	for (;;) {
		weft_blocking_t *j = queue_pop(p);

		if (j) {
			pthread_mutex_unlock(&p->lock);
			run_job(p, j);
			pthread_mutex_lock(&p->lock);
			p->completed++;
			continue;
		}
		if (p->shutdown || !idle_wait(p))
			break;
	}
	p->nthreads--;
	if (!p->shutdown) {
		/* Keep-alive: leave the live list; shutdown cannot see us. */
		if (self->prev)
			self->prev->next = self->next;
		else
			p->threads = self->next;
		if (self->next)
			self->next->prev = self->prev;
		prev = p->exited;
		p->exited = self;
	}
	/* Else shutdown joins us from the live list. */
	pthread_mutex_unlock(&p->lock);

	if (prev) {
		pthread_join(prev->thread, NULL);
		free(prev);
	}
	weft__cur_rt = NULL;
	cur_pool = NULL;
	return NULL;
}

const char weft__pool_lock_name[] = "the blocking pool's own lock";

/*
 * A submission made in a task's poll, timed while someone listens.  It
 * takes the pool lock, which pool threads hold too, briefly; it may wake
 * an idle thread (pthread_cond_signal(), which can block on the condvar's
 * own lock that a waiter holds) or start one (pthread_create(), mmap and
 * clone).  A pool thread the OS keeps off a CPU with either lock held (a
 * busy host) makes this worker sleep: an outside tester's fixed twin, its
 * pool used as it should be, had its workers asleep up to 139 ms in
 * submissions under three busy loops, and the probe blamed the task
 * polled for "a blocking call".  That time is the runtime's and the OS's.
 * So the worker names the pool's lock while it submits (a look at a poll
 * still running leaves that time out of the task's), and an RT_WAIT
 * stamped at the submission's start tells its length after (a poll that
 * ended): the probe takes it out of the task's own time.
 */
struct rt_timed {
	weft_worker_t *wk;
	uint64_t raw0; /* the event's stamp */
	uint64_t ns0;  /* for its length: the conversion is the collector's */
};

static void rt_timed_begin(struct rt_timed *t)
{
	t->wk = NULL;
	t->raw0 = t->ns0 = 0;
#if WEFT_PROBE
	if (WEFT_PROBE_ON() && weft__cur_task_id && weft__cur_worker) {
		t->wk = weft__cur_worker;
		t->raw0 = weft__probe_clock();
		t->ns0 = weft__probe_clock_ns();
		/* Since, then the name (release): runtime_internal.h. */
		store_relaxed(&t->wk->lock_wait_since, t->ns0);
		store_release(&t->wk->lock_waiting, weft__pool_lock_name);
	}
#endif
}

static void rt_timed_end(struct rt_timed *t)
{
#if WEFT_PROBE
	uint64_t us;

	if (!t->wk)
		return;
	store_relaxed(&t->wk->lock_waiting, NULL);
	us = (weft__probe_clock_ns() - t->ns0) / 1000;
	/* Under 100 us is no part of a long poll worth telling. */
	if (us >= 100 && WEFT_PROBE_ON())
		weft__probe_emit_at(t->raw0, WEFT_EV_RT_WAIT, weft__cur_task_id,
				    WEFT_RT_WAIT_POOL_SUBMIT,
				    us > UINT32_MAX ? UINT32_MAX :
						      (uint32_t)us);
#else
	(void)t;
#endif
}

/* Starts one thread.  Called with the lock held. */
static int start_thread(blocking_pool_t *p)
{
	blocking_thread_t *t = malloc(sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->pool = p;
	t->prev = NULL;
	t->next = p->threads;
	/* The new thread takes the lock before it reads anything here. */
	if (pthread_create(&t->thread, NULL, pool_thread_main, t)) {
		free(t);
		return -EAGAIN;
	}
	if (p->threads)
		p->threads->prev = t;
	p->threads = t;
	p->nthreads++;
	if (p->nthreads > p->peak)
		p->peak = p->nthreads;
	return 0;
}

int weft_spawn_blocking_with(weft_runtime_t *rt,
			     const weft_blocking_spec_t *spec,
			     weft_blocking_t **out)
{
	blocking_pool_t *p;
	weft_blocking_t *j;
	struct rt_timed timed;
	bool queued = false;
	int err = 0;

	if (!rt)
		rt = weft__cur_rt;
	if (!rt || !spec || !spec->fn ||
	    !weft__reserved_zero(spec->reserved_, sizeof(spec->reserved_)))
		return -EINVAL;
	p = &rt->blocking;
	j = malloc(sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->fn = spec->fn;
	j->arg = spec->arg;
	j->discard = spec->discard;
	j->name = spec->name;
	j->file = spec->file;
	j->line = spec->line;
	j->task = weft__cur_task_id;
	j->waited = 0;
	j->result = NULL;
	j->waker = WEFT_WAKER_EMPTY;
	j->taken = false;
	j->woken = false;
	store_relaxed(&j->state, out ? 0 : B_DROPPED);
	store_relaxed(&j->refs, out ? 2 : 1);

	/* Lock order: the pool lock alone. */
	rt_timed_begin(&timed);
	pthread_mutex_lock(&p->lock);
	if (p->shutdown) {
		err = -ESHUTDOWN;
		goto out_unlock;
	}
	queue_push(p, j);
	if (p->nidle) {
		p->nidle--;
		p->nnotify++;
		pthread_cond_signal(&p->cond);
	} else if (p->nthreads < p->max_threads) {
		err = start_thread(p);
		if (err && p->nthreads) {
			/* A busy thread will take it when it is done. */
			err = 0;
			queued = true;
		} else if (err) {
			/* Nobody to run it: it is alone in the queue. */
			queue_pop(p);
		}
	} else {
		/* Every thread is busy: the first one done takes it. */
		queued = true;
	}
	/*
	 * A job that waits for a busy thread to be done waits on the pool
	 * (not one that an idle or a new thread takes: a thread's start-up
	 * is no queue).  Told under the lock, before a thread can take it:
	 * the wait's start is stamped before its end, and the job's fields
	 * are the pool thread's once it is popped.
	 */
	if (queued && WEFT_PROBE_ON())
		j->waited = weft__res_emit(&p->res, WEFT_EV_RES_WAIT, j->task,
					   WEFT_RES_OP_JOB);
out_unlock:
	pthread_mutex_unlock(&p->lock);
	rt_timed_end(&timed);
	if (err) {
		free(j);
		return err;
	}
	if (out)
		*out = j;
	return 0;
}

/* The function behind the macro, for callers that take its address. */
int(weft_spawn_blocking)(weft_runtime_t *rt, weft_blocking_cb fn, void *arg,
			 weft_blocking_t **out)
{
	weft_blocking_spec_t spec = { .fn = fn, .arg = arg };

	return weft_spawn_blocking_with(rt, &spec, out);
}

/* --------------------------------------------------------------- the pool */

void weft__blocking_init(blocking_pool_t *p, weft_runtime_t *rt,
			 unsigned max_threads, uint64_t keep_alive_ns)
{
	pthread_condattr_t attr;

	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	/* Keep-alive deadlines are CLOCK_MONOTONIC, immune to clock steps. */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &attr);
	pthread_condattr_destroy(&attr);
	p->rt = rt;
	p->max_threads = max_threads ? max_threads :
				       BLOCKING_DEFAULT_MAX_THREADS;
	p->keep_alive_ns = keep_alive_ns ? keep_alive_ns :
					   BLOCKING_DEFAULT_KEEP_ALIVE_NS;
	weft__res_init(&p->res, WEFT_RES_BLOCKING_POOL, NULL, 0);
	weft__res_name(&p->res, "blocking pool");
}

void weft__blocking_shutdown(blocking_pool_t *p)
{
	blocking_thread_t *t, *exited;

	if (cur_pool == p)
		weft_panic("weft_runtime_destroy() called from its own "
			   "blocking pool");
	/* Lock order: the pool lock alone. */
	pthread_mutex_lock(&p->lock);
	p->shutdown = true;
	pthread_cond_broadcast(&p->cond);
	/*
	 * The set is final: no thread starts after the flag, and a thread
	 * that leaves from now on stays on the live list.
	 */
	t = p->threads;
	p->threads = NULL;
	exited = p->exited;
	p->exited = NULL;
	pthread_mutex_unlock(&p->lock);

	while (t) {
		blocking_thread_t *next = t->next;

		pthread_join(t->thread, NULL);
		free(t);
		t = next;
	}
	if (exited) {
		pthread_join(exited->thread, NULL);
		free(exited);
	}
	pthread_mutex_lock(&p->lock);
	if (p->head || p->nthreads)
		weft_panic("blocking pool: jobs or threads left at shutdown");
	pthread_mutex_unlock(&p->lock);
}

void weft__blocking_fini(blocking_pool_t *p)
{
	weft__res_fini(&p->res);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
}

void weft__blocking_metrics(blocking_pool_t *p, weft_runtime_metrics_t *out)
{
	/* Lock order: the pool lock alone; a consistent snapshot. */
	pthread_mutex_lock(&p->lock);
	out->blocking_threads = p->nthreads;
	/* A notified thread has a job waiting for it: busy. */
	out->blocking_threads_idle = p->nidle;
	out->blocking_threads_busy = p->nthreads - p->nidle;
	out->blocking_threads_peak = p->peak;
	out->blocking_queue_depth = p->queued;
	out->blocking_jobs = p->completed;
	pthread_mutex_unlock(&p->lock);
}
