/* SPDX-License-Identifier: MIT */
/*
 * The blocking pool (blocking.c) and the file helpers built on it (fs.c):
 * results from threads and tasks, the thread limit under load, keep-alive
 * expiry, shutdown with jobs in flight, dropped handles, the metrics,
 * whole-file reads and writes, and the source the probe gives a pool
 * thread's wakes.  Public API only.
 *
 * Jobs that must stay busy wait on a tcount_t gate the test opens, so the
 * counts the metrics report are exact rather than timed.  Waiting for the
 * pool to shrink (keep-alive) polls the metrics with a bounded wait; no
 * assertion depends on how fast anything runs.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test_helpers.h"

#include "weft/probe.h"

static weft_runtime_t *rt_create_pool(unsigned workers, unsigned max_threads,
				      uint64_t keep_alive_ns)
{
	weft_config_t cfg = {
		.workers = workers,
		.max_blocking_threads = max_threads,
		.blocking_keep_alive_ns = keep_alive_ns,
	};
	weft_runtime_t *rt = NULL;

	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	assert_non_null(rt);
	return rt;
}

static weft_runtime_metrics_t metrics(weft_runtime_t *rt)
{
	weft_runtime_metrics_t m;

	assert_int_equal(weft_runtime_metrics(rt, &m), 0);
	return m;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/*
 * Polls until the pool reports @threads threads alive, for at most
 * @max_ms (scaled for slow builds).  Return: whether it got there.
 */
static bool wait_threads(weft_runtime_t *rt, uint64_t threads, unsigned max_ms)
{
	unsigned waited = 0, limit = max_ms * slowdown();

	for (;;) {
		weft_runtime_metrics_t m = metrics(rt);

		if (m.blocking_threads == threads)
			return true;
		if (waited >= limit)
			return false;
		sleep_ms(5);
		waited += 5;
	}
}

/* Polls until @n jobs have completed (same bounds as wait_threads()). */
static bool wait_jobs(weft_runtime_t *rt, uint64_t n, unsigned max_ms)
{
	unsigned waited = 0, limit = max_ms * slowdown();

	for (;;) {
		if (metrics(rt).blocking_jobs >= n)
			return true;
		if (waited >= limit)
			return false;
		sleep_ms(5);
		waited += 5;
	}
}

/* ------------------------------------------------------------------ jobs */

static void *add_one(void *arg)
{
	return (void *)((uintptr_t)arg + 1);
}

/* A job that holds its thread until the test opens the gate. */
struct gated {
	tcount_t started; /* +1 when a job starts */
	tcount_t gate;    /* jobs wait for >= 1 */
	_Atomic unsigned ran;
};

static void gated_init(struct gated *g)
{
	tcount_init(&g->started);
	tcount_init(&g->gate);
	atomic_store(&g->ran, 0);
}

static void gated_fini(struct gated *g)
{
	tcount_fini(&g->gate);
	tcount_fini(&g->started);
}

static void *gated_job(void *arg)
{
	struct gated *g = arg;

	tcount_add(&g->started, 1);
	tcount_wait(&g->gate, 1);
	atomic_fetch_add(&g->ran, 1);
	return g;
}

/* ----------------------------------------------------------------- tests */

static void test_blocking_result_from_thread(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	weft_blocking_t *h;
	void *result = NULL;

	(void)state;
	assert_int_equal(weft_spawn_blocking(rt, add_one, (void *)41, &h), 0);
	assert_int_equal(weft_blocking_wait(h, &result), 0);
	assert_int_equal((uintptr_t)result, 42);
	assert_true(weft_blocking_is_finished(h));
	/* Waiting again hands out the same result. */
	result = NULL;
	assert_int_equal(weft_blocking_wait(h, &result), 0);
	assert_int_equal((uintptr_t)result, 42);
	weft_blocking_drop(h);
	weft_runtime_destroy(rt);
}

/*
 * A task awaits a job; the job proves it is not on a worker (block_on
 * works there) and sees the runtime current.
 */
struct where {
	weft_runtime_t *rt;
	_Atomic int block_on_err;
	_Atomic bool rt_current;
};

static weft_poll_t ready_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	(void)cx;
	return WEFT_READY;
}

static void *where_job(void *arg)
{
	struct where *w = arg;

	atomic_store(&w->rt_current, weft_runtime_current() == w->rt);
	atomic_store(&w->block_on_err,
		     weft_block_on(NULL, ready_poll, NULL, NULL));
	return (void *)7;
}

struct await_job {
	int weft_pc;
	struct where *w;
	weft_blocking_t *h;
	void *result;
	int err;
};

static weft_poll_t await_job_poll(void *arg, weft_cx_t *cx)
{
	struct await_job *st = arg;

	WEFT_ASYNC_BEGIN(st);
	st->err = weft_spawn_blocking(NULL, where_job, st->w, &st->h);
	if (st->err) {
		weft_cx_return(cx, (void *)(intptr_t)st->err);
		return WEFT_READY;
	}
	/* A worker may not block on a job. */
	if (weft_blocking_wait(st->h, NULL) != -EDEADLK) {
		weft_cx_return(cx, (void *)(intptr_t)-1000);
		weft_blocking_drop(st->h);
		return WEFT_READY;
	}
	WEFT_AWAIT(st, weft_blocking_poll(st->h, cx, &st->result));
	weft_blocking_drop(st->h);
	weft_cx_return(cx, st->result);
	WEFT_ASYNC_END(st);
}

static void test_blocking_result_from_task(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct where w = { .rt = rt };
	struct await_job st = { .w = &w };
	weft_join_t *j;
	void *out = NULL;

	(void)state;
	atomic_store(&w.block_on_err, -1);
	j = spawn_ok(rt, await_job_poll, NULL, &st, sizeof(st), true);
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_int_equal((intptr_t)out, 7);
	assert_true(atomic_load(&w.rt_current));
	assert_int_equal(atomic_load(&w.block_on_err), 0);
	weft_runtime_destroy(rt);
}

/*
 * Jobs that block do not hold up the workers: with more blocked jobs than
 * workers, a task still runs to completion.
 */
static weft_poll_t noop_poll(void *arg, weft_cx_t *cx)
{
	(void)arg;
	weft_cx_return(cx, (void *)5);
	return WEFT_READY;
}

struct spawn_gated {
	int weft_pc;
	struct gated *g;
	unsigned n;
	unsigned i;
};

/* Queues @n gated jobs, detached, from a worker. */
static weft_poll_t spawn_gated_poll(void *arg, weft_cx_t *cx)
{
	struct spawn_gated *st = arg;

	for (st->i = 0; st->i < st->n; st->i++)
		if (weft_spawn_blocking(NULL, gated_job, st->g, NULL))
			return WEFT_READY;
	weft_cx_return(cx, (void *)1);
	return WEFT_READY;
}

static void test_blocking_jobs_leave_workers_free(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct gated g;
	struct spawn_gated sg;
	weft_join_t *j;
	void *out = NULL;

	(void)state;
	gated_init(&g);
	sg = (struct spawn_gated){ .g = &g, .n = 4 };
	j = spawn_ok(rt, spawn_gated_poll, NULL, &sg, sizeof(sg), true);
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_int_equal((uintptr_t)out, 1);
	tcount_wait(&g.started, 4);
	/* Four jobs hold four pool threads; both workers are free. */
	for (int i = 0; i < 10; i++) {
		j = spawn_ok(rt, noop_poll, NULL, NULL, 0, true);
		assert_int_equal(join_wait_drop(j, &out), 0);
		assert_int_equal((uintptr_t)out, 5);
	}
	assert_int_equal(metrics(rt).blocking_threads_busy, 4);
	tcount_add(&g.gate, 1);
	assert_true(wait_jobs(rt, 4, 10000));
	assert_int_equal(atomic_load(&g.ran), 4);
	weft_runtime_destroy(rt);
	gated_fini(&g);
}

/* Many jobs at once: an exact count, never more than the maximum. */
#define MANY_MAX 8
#define MANY_TASKS 20

struct many {
	_Atomic unsigned running;
	_Atomic unsigned max_running;
	_Atomic unsigned done;
	_Atomic unsigned bad;
};

struct many_arg {
	struct many *m;
	uintptr_t value;
};

static void *many_job(void *arg)
{
	struct many_arg *a = arg;
	struct many *m = a->m;
	unsigned now = atomic_fetch_add(&m->running, 1) + 1;
	unsigned max = atomic_load(&m->max_running);

	while (now > max &&
	       !atomic_compare_exchange_weak(&m->max_running, &max, now))
		;
	/* Long enough for the pool to fill up. */
	if (a->value % 16 == 0)
		sleep_ms(1);
	atomic_fetch_sub(&m->running, 1);
	atomic_fetch_add(&m->done, 1);
	return (void *)(a->value * 3);
}

/* One task's share: spawn @n jobs, await every result, check it. */
struct many_task {
	int weft_pc;
	struct many *m;
	struct many_arg *args;
	weft_blocking_t **h;
	unsigned n;
	unsigned i;
	void *result;
};

static weft_poll_t many_task_poll(void *arg, weft_cx_t *cx)
{
	struct many_task *st = arg;

	WEFT_ASYNC_BEGIN(st);
	for (st->i = 0; st->i < st->n; st->i++) {
		if (weft_spawn_blocking(NULL, many_job, &st->args[st->i],
					&st->h[st->i])) {
			atomic_fetch_add(&st->m->bad, 1);
			st->h[st->i] = NULL;
		}
	}
	for (st->i = 0; st->i < st->n; st->i++) {
		if (!st->h[st->i])
			continue;
		WEFT_AWAIT(st,
			   weft_blocking_poll(st->h[st->i], cx, &st->result));
		if ((uintptr_t)st->result != st->args[st->i].value * 3)
			atomic_fetch_add(&st->m->bad, 1);
		weft_blocking_drop(st->h[st->i]);
	}
	WEFT_ASYNC_END(st);
}

static void test_blocking_many_jobs_bounded_threads(void **state)
{
	unsigned total = scale_count(2000);
	unsigned per = (total + MANY_TASKS - 1) / MANY_TASKS;
	weft_runtime_t *rt = rt_create_pool(2, MANY_MAX, 0);
	struct many m;
	struct many_arg *args;
	weft_blocking_t **h;
	weft_join_t *joins[MANY_TASKS];
	weft_runtime_metrics_t mt;

	(void)state;
	total = per * MANY_TASKS;
	memset(&m, 0, sizeof(m));
	args = calloc(total, sizeof(*args));
	h = calloc(total, sizeof(*h));
	assert_non_null(args);
	assert_non_null(h);
	for (unsigned i = 0; i < total; i++)
		args[i] = (struct many_arg){ .m = &m, .value = i };
	for (unsigned t = 0; t < MANY_TASKS; t++) {
		struct many_task st = {
			.m = &m,
			.args = &args[t * per],
			.h = &h[t * per],
			.n = per,
		};

		joins[t] = spawn_ok(rt, many_task_poll, NULL, &st, sizeof(st),
				    true);
	}
	for (unsigned t = 0; t < MANY_TASKS; t++)
		assert_int_equal(join_wait_drop(joins[t], NULL), 0);

	assert_int_equal(atomic_load(&m.bad), 0);
	assert_int_equal(atomic_load(&m.done), total);
	assert_true(atomic_load(&m.max_running) <= MANY_MAX);
	/* A job counts once its thread is done with it, after the wake. */
	assert_true(wait_jobs(rt, total, 10000));
	mt = metrics(rt);
	assert_true(mt.blocking_threads_peak >= 1);
	assert_true(mt.blocking_threads_peak <= MANY_MAX);
	assert_true(mt.blocking_threads <= MANY_MAX);
	assert_int_equal(mt.blocking_jobs, total);
	assert_int_equal(mt.blocking_queue_depth, 0);
	print_message("many: %u jobs, peak %llu threads, %u at once\n", total,
		      (unsigned long long)mt.blocking_threads_peak,
		      atomic_load(&m.max_running));
	weft_runtime_destroy(rt);
	free(h);
	free(args);
}

/* The metrics while one thread is busy and jobs wait behind it. */
static void test_blocking_metrics_queue(void **state)
{
	weft_runtime_t *rt = rt_create_pool(1, 1, 0);
	weft_blocking_t *h[4];
	weft_runtime_metrics_t m;
	struct gated g;

	(void)state;
	gated_init(&g);
	m = metrics(rt);
	assert_int_equal(m.blocking_threads, 0); /* started lazily */
	assert_int_equal(m.blocking_queue_depth, 0);
	assert_int_equal(weft_spawn_blocking(rt, gated_job, &g, &h[0]), 0);
	tcount_wait(&g.started, 1);
	for (int i = 1; i < 4; i++)
		assert_int_equal(weft_spawn_blocking(rt, gated_job, &g, &h[i]),
				 0);
	m = metrics(rt);
	assert_int_equal(m.blocking_threads, 1);
	assert_int_equal(m.blocking_threads_busy, 1);
	assert_int_equal(m.blocking_threads_idle, 0);
	assert_int_equal(m.blocking_queue_depth, 3);
	assert_int_equal(m.blocking_jobs, 0);
	assert_false(weft_blocking_is_finished(h[0]));

	tcount_add(&g.gate, 1);
	for (int i = 0; i < 4; i++) {
		void *r = NULL;

		assert_int_equal(weft_blocking_wait(h[i], &r), 0);
		assert_ptr_equal(r, &g);
		weft_blocking_drop(h[i]);
	}
	assert_true(wait_jobs(rt, 4, 10000));
	m = metrics(rt);
	assert_int_equal(m.blocking_queue_depth, 0);
	assert_int_equal(m.blocking_threads_peak, 1);
	/* Idle now, kept alive (10 s default). */
	assert_int_equal(m.blocking_threads, 1);
	assert_int_equal(m.blocking_threads_idle, 1);
	assert_int_equal(m.blocking_threads_busy, 0);
	weft_runtime_destroy(rt);
	gated_fini(&g);
}

/* Idle threads leave after the keep-alive; the pool grows again after. */
static void test_blocking_keep_alive_expiry(void **state)
{
	weft_runtime_t *rt = rt_create_pool(2, 16, WEFT_MSEC(50));
	weft_blocking_t *h[4];
	struct gated g;

	(void)state;
	gated_init(&g);
	for (int i = 0; i < 4; i++)
		assert_int_equal(weft_spawn_blocking(rt, gated_job, &g, &h[i]),
				 0);
	/* Four jobs running at once: four threads. */
	tcount_wait(&g.started, 4);
	assert_int_equal(metrics(rt).blocking_threads, 4);
	tcount_add(&g.gate, 1);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(weft_blocking_wait(h[i], NULL), 0);
		weft_blocking_drop(h[i]);
	}
	assert_true(wait_threads(rt, 0, 10000));
	assert_int_equal(metrics(rt).blocking_threads_idle, 0);

	/* Twice more: each exit joins the thread that left before it. */
	for (int round = 0; round < 2; round++) {
		void *r = NULL;

		assert_int_equal(
			weft_spawn_blocking(rt, add_one, (void *)1, &h[0]), 0);
		assert_int_equal(weft_blocking_wait(h[0], &r), 0);
		assert_int_equal((uintptr_t)r, 2);
		weft_blocking_drop(h[0]);
		assert_true(wait_threads(rt, 0, 10000));
	}
	assert_int_equal(metrics(rt).blocking_threads_peak, 4);
	weft_runtime_destroy(rt);
	gated_fini(&g);
}

/* A dropped handle: the job still runs; its result goes to discard. */
static _Atomic unsigned discarded;

static void *malloc_job(void *arg)
{
	struct gated *g = arg;
	void *p;

	if (g)
		gated_job(g);
	p = malloc(64);
	memset(p, 0xab, 64);
	return p;
}

static void discard_free(void *result)
{
	atomic_fetch_add(&discarded, 1);
	free(result);
}

static void test_blocking_drop_handle(void **state)
{
	weft_runtime_t *rt = rt_create_pool(1, 1, 0);
	weft_blocking_spec_t spec = {
		.fn = malloc_job,
		.discard = discard_free,
		.name = "malloc_job",
	};
	weft_blocking_t *h0, *h1, *h2;
	struct gated g;
	void *r = NULL;

	(void)state;
	gated_init(&g);
	atomic_store(&discarded, 0);
	/* h0 holds the one thread; h1 queues behind it and is dropped. */
	spec.arg = &g;
	assert_int_equal(weft_spawn_blocking_with(rt, &spec, &h0), 0);
	tcount_wait(&g.started, 1);
	spec.arg = NULL;
	assert_int_equal(weft_spawn_blocking_with(rt, &spec, &h1), 0);
	assert_int_equal(metrics(rt).blocking_queue_depth, 1);
	weft_blocking_drop(h1);
	/* Detached at spawn. */
	assert_int_equal(weft_spawn_blocking_with(rt, &spec, NULL), 0);
	/* Taken by the handle: never discarded. */
	assert_int_equal(weft_spawn_blocking_with(rt, &spec, &h2), 0);
	tcount_add(&g.gate, 1);
	assert_int_equal(weft_blocking_wait(h0, &r), 0);
	free(r);
	weft_blocking_drop(h0);
	assert_int_equal(weft_blocking_wait(h2, &r), 0);
	free(r);
	weft_blocking_drop(h2);
	assert_true(wait_jobs(rt, 4, 10000));
	/* h1's and the detached job's results; freed after the job ends. */
	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&discarded), 2);
	gated_fini(&g);
}

/*
 * Shutdown with jobs running and queued: every accepted job runs, spawns
 * from then on fail with -ESHUTDOWN, every thread is joined, nothing leaks
 * (ASan).  Handles outlive the runtime.
 */
struct inflight {
	_Atomic unsigned ran;
	_Atomic unsigned respawned;
	_Atomic int refused; /* the error a job saw once destroy began */
	weft_runtime_t *rt;
};

static void *inflight_job(void *arg)
{
	struct inflight *f = arg;

	sleep_ms(1);
	atomic_fetch_add(&f->ran, 1);
	return f;
}

/* Respawns itself until the pool refuses. */
static void *respawn_job(void *arg)
{
	struct inflight *f = arg;

	for (unsigned i = 0; i < 100000; i++) {
		int err = weft_spawn_blocking(NULL, inflight_job, f, NULL);

		if (err) {
			atomic_store(&f->refused, err);
			return NULL;
		}
		atomic_fetch_add(&f->respawned, 1);
		sleep_ms(1);
	}
	return NULL;
}

static void test_blocking_shutdown_in_flight(void **state)
{
	weft_runtime_t *rt = rt_create_pool(2, 4, 0);
	struct inflight f = { .rt = rt };
	weft_blocking_t *kept[10];
	unsigned n = 0, spawned = 0;
	void *r;

	(void)state;
	atomic_store(&f.refused, 0);
	assert_int_equal(weft_spawn_blocking(rt, respawn_job, &f, NULL), 0);
	for (unsigned i = 0; i < 200; i++) {
		weft_blocking_t *h;

		assert_int_equal(weft_spawn_blocking(rt, inflight_job, &f, &h),
				 0);
		spawned++;
		if (i % 20 == 0 && n < 10)
			kept[n++] = h;
		else
			weft_blocking_drop(h);
	}
	/* Most of them are still queued (4 threads, 1 ms each). */
	weft_runtime_destroy(rt);
	assert_int_equal(atomic_load(&f.ran),
			 spawned + atomic_load(&f.respawned));
	assert_int_equal(atomic_load(&f.refused), -ESHUTDOWN);
	for (unsigned i = 0; i < n; i++) {
		assert_true(weft_blocking_is_finished(kept[i]));
		r = NULL;
		assert_int_equal(weft_blocking_wait(kept[i], &r), 0);
		assert_ptr_equal(r, &f);
		weft_blocking_drop(kept[i]);
	}
}

static void test_blocking_errors(void **state)
{
	weft_runtime_t *rt = rt_create(1);
	weft_blocking_spec_t spec = { .fn = NULL };
	weft_blocking_t *h = (weft_blocking_t *)&spec;

	(void)state;
	assert_int_equal(weft_spawn_blocking(rt, NULL, NULL, &h), -EINVAL);
	assert_int_equal(weft_spawn_blocking_with(rt, &spec, &h), -EINVAL);
	assert_int_equal(weft_spawn_blocking_with(rt, NULL, &h), -EINVAL);
	/* No runtime current on this thread. */
	assert_null(weft_runtime_current());
	assert_int_equal(weft_spawn_blocking(NULL, add_one, NULL, &h), -EINVAL);
	/* Nothing was handed out. */
	assert_ptr_equal(h, (weft_blocking_t *)&spec);
	weft_blocking_drop(NULL);
	assert_int_equal(metrics(rt).blocking_threads, 0);
	weft_runtime_destroy(rt);
}

/* ------------------------------------------------------------------- fs */

struct fs_rw {
	int weft_pc;
	const char *path;
	const void *data;
	size_t len;
	weft_fs_write_file_t w;
	weft_fs_read_file_t r;
	int werr;
	int rerr;
	void *out;
	size_t outlen;
};

/* Writes @data to @path (no write when @data is NULL), then reads it. */
static weft_poll_t fs_rw_poll(void *arg, weft_cx_t *cx)
{
	struct fs_rw *st = arg;

	WEFT_ASYNC_BEGIN(st);
	if (st->data) {
		st->werr = weft_fs_write_file_init(&st->w, st->path, st->data,
						   st->len);
		if (st->werr)
			return WEFT_READY;
		WEFT_AWAIT(st, weft_fs_write_file_poll(&st->w, cx, &st->werr));
		weft_fs_write_file_fini(&st->w);
	}
	st->rerr = weft_fs_read_file_init(&st->r, st->path);
	if (st->rerr)
		return WEFT_READY;
	WEFT_AWAIT(st, weft_fs_read_file_poll(&st->r, cx, &st->rerr, &st->out,
					      &st->outlen));
	weft_fs_read_file_fini(&st->r);
	WEFT_ASYNC_END(st);
}

static void fs_roundtrip_one(weft_runtime_t *rt, const char *path, size_t len)
{
	unsigned char *data = malloc(len ? len : 1);
	struct fs_rw st = { .path = path, .len = len };

	assert_non_null(data);
	for (size_t i = 0; i < len; i++)
		data[i] = (unsigned char)(i * 131 + (i >> 8));
	st.data = data;
	assert_int_equal(weft_block_on(rt, fs_rw_poll, &st, NULL), 0);
	assert_int_equal(st.werr, 0);
	assert_int_equal(st.rerr, 0);
	assert_int_equal(st.outlen, len);
	assert_non_null(st.out);
	assert_memory_equal(st.out, data, len);
	assert_int_equal(((char *)st.out)[len], '\0');
	free(st.out);
	free(data);
}

/* The same round trip from a task: results come back as the output. */
struct fs_task {
	int weft_pc;
	struct fs_rw rw;
};

static weft_poll_t fs_task_poll(void *arg, weft_cx_t *cx)
{
	struct fs_task *st = arg;
	struct fs_rw *rw = &st->rw;

	if (fs_rw_poll(rw, cx) == WEFT_PENDING)
		return WEFT_PENDING;
	if (rw->werr || rw->rerr || rw->outlen != rw->len ||
	    (rw->len && memcmp(rw->out, rw->data, rw->len))) {
		free(rw->out);
		weft_cx_return(cx, (void *)1);
		return WEFT_READY;
	}
	free(rw->out);
	weft_cx_return(cx, (void *)2);
	return WEFT_READY;
}

static char tmpdir[64];

static void make_tmpdir(void)
{
	strcpy(tmpdir, "/tmp/weft-test-blocking-XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	char path[512];

	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
		assert_int_equal(unlink(path), 0);
	}
	closedir(d);
	assert_int_equal(rmdir(tmpdir), 0);
}

static void test_blocking_fs_round_trip(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	static const size_t sizes[] = { 0, 1, 4095, 4096, 4097, 1 << 20 };
	char path[128];

	(void)state;
	make_tmpdir();
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(path, sizeof(path), "%s/f%zu", tmpdir, i);
		fs_roundtrip_one(rt, path, sizes[i]);
	}
	/* Overwrite truncates. */
	snprintf(path, sizeof(path), "%s/f5", tmpdir);
	fs_roundtrip_one(rt, path, 10);

	/* From tasks, several at once. */
	{
		weft_join_t *j[8];
		struct fs_task st[8];
		unsigned char data[8][3000];

		for (int k = 0; k < 8; k++) {
			char *p = malloc(128);

			assert_non_null(p);
			snprintf(p, 128, "%s/task%d", tmpdir, k);
			memset(data[k], 'a' + k, sizeof(data[k]));
			st[k] = (struct fs_task){
				.rw = { .path = p,
					.data = data[k],
					.len = 1000u + 250u * (unsigned)k }
			};
			j[k] = spawn_ok(rt, fs_task_poll, NULL, &st[k],
					sizeof(st[k]), true);
		}
		for (int k = 0; k < 8; k++) {
			void *out = NULL;

			assert_int_equal(join_wait_drop(j[k], &out), 0);
			assert_int_equal((uintptr_t)out, 2);
			free((void *)st[k].rw.path);
		}
	}
	weft_runtime_destroy(rt);
	remove_tmpdir();
}

/* Read the file at @path; returns the status. */
static int fs_read_status(weft_runtime_t *rt, const char *path)
{
	struct fs_rw st = { .path = path };

	assert_int_equal(weft_block_on(rt, fs_rw_poll, &st, NULL), 0);
	assert_null(st.out);
	assert_int_equal(st.outlen, 0);
	return st.rerr;
}

static void test_blocking_fs_errors(void **state)
{
	weft_runtime_t *rt = rt_create(1);
	weft_fs_read_file_t r;
	weft_fs_write_file_t w;
	char path[128];
	struct fs_rw st;

	(void)state;
	make_tmpdir();
	snprintf(path, sizeof(path), "%s/missing", tmpdir);
	assert_int_equal(fs_read_status(rt, path), -ENOENT);
	assert_int_equal(fs_read_status(rt, tmpdir), -EISDIR);

	/* Writing into a directory that does not exist. */
	snprintf(path, sizeof(path), "%s/no/such/file", tmpdir);
	st = (struct fs_rw){ .path = path, .data = "x", .len = 1 };
	assert_int_equal(weft_block_on(rt, fs_rw_poll, &st, NULL), 0);
	assert_int_equal(st.werr, -ENOENT);
	assert_int_equal(st.rerr, -ENOENT);

	/* Bad arguments. */
	assert_int_equal(weft_fs_read_file_init(&r, NULL), -EINVAL);
	assert_int_equal(weft_fs_read_file_init(&r, ""), -EINVAL);
	assert_int_equal(weft_fs_write_file_init(&w, path, NULL, 3), -EINVAL);
	assert_int_equal(weft_fs_write_file_init(&w, "", "x", 1), -EINVAL);

	/* Dropped before its first poll, and while running: no leak. */
	assert_int_equal(weft_fs_read_file_init(&r, path), 0);
	weft_fs_read_file_fini(&r);
	snprintf(path, sizeof(path), "%s/dropped", tmpdir);
	assert_int_equal(weft_fs_write_file_init(&w, path, "abc", 3), 0);
	weft_fs_write_file_fini(&w);
	assert_int_equal(access(path, F_OK), -1);
	weft_runtime_destroy(rt);
	remove_tmpdir();
}

/* Polled once (the job is queued), then dropped while it runs. */
struct fs_drop {
	weft_fs_write_file_t w;
	weft_fs_read_file_t r;
	int polled;
};

static weft_poll_t fs_drop_poll(void *arg, weft_cx_t *cx)
{
	struct fs_drop *st = arg;
	int status;
	void *data;
	size_t len;

	if (st->polled++ == 0) {
		/* Either may finish at once; fine either way. */
		if (weft_fs_write_file_poll(&st->w, cx, &status) == WEFT_READY)
			weft_fs_write_file_fini(&st->w);
		if (weft_fs_read_file_poll(&st->r, cx, &status, &data, &len) ==
		    WEFT_READY)
			free(data);
	}
	return WEFT_READY;
}

static void test_blocking_fs_drop_running(void **state)
{
	weft_runtime_t *rt = rt_create(1);
	struct fs_drop st = { 0 };
	char wpath[128];

	(void)state;
	make_tmpdir();
	snprintf(wpath, sizeof(wpath), "%s/w", tmpdir);
	assert_int_equal(weft_fs_write_file_init(&st.w, wpath, "hello", 5), 0);
	assert_int_equal(weft_fs_read_file_init(&st.r, "/proc/self/status"), 0);
	assert_int_equal(weft_block_on(rt, fs_drop_poll, &st, NULL), 0);
	weft_fs_write_file_fini(&st.w);
	weft_fs_read_file_fini(&st.r);
	/* Destroy runs the jobs: the write completes. */
	weft_runtime_destroy(rt);
	{
		int fd = open(wpath, O_RDONLY);
		char buf[8] = { 0 };

		assert_true(fd >= 0);
		assert_int_equal(read(fd, buf, sizeof(buf)), 5);
		assert_string_equal(buf, "hello");
		close(fd);
	}
	remove_tmpdir();
}

/*
 * A job's completion wakes the task awaiting it from the pool's thread:
 * the probe names that wake's source "blocking", not "foreign" (threads
 * outside the runtime).  The task tells the test once its waker is with
 * the handle; only then does the job return, so there is a wake.
 */
struct wake_sources {
	pthread_mutex_t lock;
	unsigned n[256]; /* WAKE events by source */
};

static void wake_sources_events(void *ctx, const weft_event_t *ev, size_t n)
{
	struct wake_sources *w = ctx;

	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < n; i++)
		if (ev[i].kind == WEFT_EV_WAKE)
			w->n[ev[i].a2 & 0xff]++;
	pthread_mutex_unlock(&w->lock);
}

struct await_gated {
	struct gated *g;
	tcount_t *pending; /* +1 once the waker is with the handle */
	weft_blocking_t *h;
};

static weft_poll_t await_gated_poll(void *arg, weft_cx_t *cx)
{
	struct await_gated *st = arg;

	if (!st->h &&
	    weft_spawn_blocking(NULL, gated_job, st->g, &st->h) != 0) {
		weft_cx_return(cx, (void *)-1);
		return WEFT_READY;
	}
	if (weft_blocking_poll(st->h, cx, NULL) == WEFT_READY) {
		weft_blocking_drop(st->h);
		return WEFT_READY;
	}
	tcount_add(st->pending, 1);
	return WEFT_PENDING;
}

static void test_blocking_wake_source(void **state)
{
	static struct wake_sources w;
	weft_probe_sub_t *sub;
	weft_runtime_t *rt;
	struct gated g;
	tcount_t pending;
	struct await_gated st = { .g = &g, .pending = &pending };
	weft_join_t *j;
	void *out = NULL;
	int rc;

	(void)state;
	memset(&w, 0, sizeof(w));
	pthread_mutex_init(&w.lock, NULL);
	rc = weft_probe_subscribe(
		&(weft_probe_sub_opts_t){ .events = true,
					  .on_events = wake_sources_events,
					  .ctx = &w },
		&sub);
	if (rc == -ENOTSUP) {
		pthread_mutex_destroy(&w.lock);
		skip(); /* built without the probe */
	}
	assert_int_equal(rc, 0);
	gated_init(&g);
	tcount_init(&pending);
	rt = rt_create(1);
	j = spawn_ok(rt, await_gated_poll, NULL, &st, sizeof(st), true);
	tcount_wait(&pending, 1);
	tcount_add(&g.gate, 1);
	assert_int_equal(join_wait_drop(j, &out), 0);
	assert_null(out);
	weft_probe_flush();
	weft_probe_unsubscribe(sub);
	weft_runtime_destroy(rt);
	assert_true(w.n[WEFT_WAKE_BLOCKING] >= 1);
	assert_int_equal(w.n[WEFT_WAKE_FOREIGN], 0);
	tcount_fini(&pending);
	gated_fini(&g);
	pthread_mutex_destroy(&w.lock);
}

/* fsync / fdatasync of @fd, then each polled again after READY. */
struct fs_sync_st {
	int weft_pc;
	int fd;
	weft_fs_sync_t op[2];
	int err[2], again[2];
};

static weft_poll_t fs_sync_poll(void *arg, weft_cx_t *cx)
{
	struct fs_sync_st *st = arg;

	WEFT_ASYNC_BEGIN(st);
	st->err[0] = weft_fs_fsync_init(&st->op[0], st->fd);
	if (st->err[0])
		return WEFT_READY;
	WEFT_AWAIT(st, weft_fs_sync_poll(&st->op[0], cx, &st->err[0]));
	st->again[0] = 1;
	(void)weft_fs_sync_poll(&st->op[0], cx, &st->again[0]);
	weft_fs_sync_fini(&st->op[0]);
	st->err[1] = weft_fs_fdatasync_init(&st->op[1], st->fd);
	if (st->err[1])
		return WEFT_READY;
	WEFT_AWAIT(st, weft_fs_sync_poll(&st->op[1], cx, &st->err[1]));
	st->again[1] = 1;
	(void)weft_fs_sync_poll(&st->op[1], cx, &st->again[1]);
	weft_fs_sync_fini(&st->op[1]);
	WEFT_ASYNC_END(st);
}

/*
 * fsync and fdatasync of a written file succeed; of a pipe, fail as the
 * system calls do (-EINVAL); a closed fd is refused at init; the caller's
 * fd may be closed at once (the job syncs its own dup); polled after
 * READY each says its status again; _fini is safe on zeroed operations
 * and after READY twice.
 */
static void test_blocking_fs_sync(void **state)
{
	weft_runtime_t *rt = rt_create_pool(2, 0, 0);
	char path[] = "/tmp/weft-test-sync-XXXXXX";
	struct fs_sync_st st = { 0 };
	weft_fs_read_file_t r0 = { 0 };
	weft_fs_write_file_t w0 = { 0 };
	weft_fs_sync_t s0 = { 0 }, bad;
	int fd = mkstemp(path), p[2];

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "durable", 7), 7);
	st.fd = fd;
	assert_int_equal(weft_block_on(rt, fs_sync_poll, &st, NULL), 0);
	assert_int_equal(st.err[0], 0);
	assert_int_equal(st.err[1], 0);
	assert_int_equal(st.again[0], 0);
	assert_int_equal(st.again[1], 0);
	close(fd);
	unlink(path);

	assert_int_equal(pipe(p), 0);
	st = (struct fs_sync_st){ .fd = p[0] };
	assert_int_equal(weft_block_on(rt, fs_sync_poll, &st, NULL), 0);
	assert_int_equal(st.err[0], -EINVAL);
	assert_int_equal(st.again[0], -EINVAL);
	close(p[0]);
	close(p[1]);

	assert_int_equal(weft_fs_fsync_init(&bad, p[0]), -EBADF);
	weft_fs_sync_fini(&bad);
	weft_fs_sync_fini(&s0);
	weft_fs_read_file_fini(&r0);
	weft_fs_write_file_fini(&w0);
	weft_runtime_destroy(rt);
}

/* A read polled again after READY: the same status, the data went once. */
struct fs_again {
	int weft_pc;
	const char *path;
	weft_fs_read_file_t r;
	int err, err_again;
	void *out, *out_again;
	size_t len, len_again;
};

static weft_poll_t fs_again_poll(void *arg, weft_cx_t *cx)
{
	struct fs_again *st = arg;

	WEFT_ASYNC_BEGIN(st);
	st->err = weft_fs_read_file_init(&st->r, st->path);
	if (st->err)
		return WEFT_READY;
	WEFT_AWAIT(st, weft_fs_read_file_poll(&st->r, cx, &st->err, &st->out,
					      &st->len));
	st->out_again = (void *)1;
	st->len_again = 1;
	(void)weft_fs_read_file_poll(&st->r, cx, &st->err_again,
				     &st->out_again, &st->len_again);
	weft_fs_read_file_fini(&st->r);
	WEFT_ASYNC_END(st);
}

static void test_blocking_fs_poll_after_ready(void **state)
{
	weft_runtime_t *rt = rt_create_pool(1, 0, 0);
	struct fs_again ok = { .path = "/proc/self/stat" };
	struct fs_again missing = { .path = "/nonexistent/weft" };

	(void)state;
	assert_int_equal(weft_block_on(rt, fs_again_poll, &ok, NULL), 0);
	assert_int_equal(ok.err, 0);
	assert_non_null(ok.out);
	assert_true(ok.len > 0);
	assert_int_equal(ok.err_again, 0);
	assert_null(ok.out_again);
	assert_int_equal(ok.len_again, 0);
	free(ok.out);
	assert_int_equal(weft_block_on(rt, fs_again_poll, &missing, NULL), 0);
	assert_int_equal(missing.err, -ENOENT);
	assert_int_equal(missing.err_again, -ENOENT);
	weft_runtime_destroy(rt);
}

static void *sleep_300ms(void *arg)
{
	(void)arg;
	usleep(300000);
	return NULL;
}

/*
 * destroy_timeout's limit is the workers' alone: a pool job that runs
 * past it (run to its end first, without a limit) leaves idle workers
 * joined, not left behind as "still running".
 */
static void test_blocking_destroy_timeout_after_jobs(void **state)
{
	weft_runtime_t *rt = rt_create(2);

	(void)state;
	assert_int_equal(weft_spawn_blocking(rt, sleep_300ms, NULL, NULL), 0);
	usleep(10000); /* the job under way */
	assert_int_equal(weft_runtime_destroy_timeout(rt, 100 * 1000000ull), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocking_result_from_thread),
		cmocka_unit_test(test_blocking_result_from_task),
		cmocka_unit_test(test_blocking_jobs_leave_workers_free),
		cmocka_unit_test(test_blocking_many_jobs_bounded_threads),
		cmocka_unit_test(test_blocking_metrics_queue),
		cmocka_unit_test(test_blocking_keep_alive_expiry),
		cmocka_unit_test(test_blocking_drop_handle),
		cmocka_unit_test(test_blocking_shutdown_in_flight),
		cmocka_unit_test(test_blocking_errors),
		cmocka_unit_test(test_blocking_fs_round_trip),
		cmocka_unit_test(test_blocking_fs_errors),
		cmocka_unit_test(test_blocking_fs_drop_running),
		cmocka_unit_test(test_blocking_fs_sync),
		cmocka_unit_test(test_blocking_fs_poll_after_ready),
		cmocka_unit_test(test_blocking_wake_source),
		cmocka_unit_test(test_blocking_destroy_timeout_after_jobs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
