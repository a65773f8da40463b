/* SPDX-License-Identifier: MIT */
/*
 * weft-demo's waiting side (issue 18): routes that wait rather than run,
 * each beside its fix.  /convoy holds one async mutex ("demo-session")
 * across a 2 ms await, so concurrent requests queue on it;
 * /convoy-sharded takes one of DEMO_SHARDS locks by the user instead.
 * /report puts a 400 ms blocking job on the small pool, so a few fill it
 * and every /lookup waits for a thread; /report-limited takes a permit
 * of "report-slots" first, so lookups always find one.  The probe's
 * contention and blocking-queue warnings name the guilty ones.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "demo_internal.h"

static weft_async_mutex_t session;       /* "demo-session" */
static weft_async_mutex_t session_shards[DEMO_SHARDS]; /* "session-shard-N" */
static char shard_names[DEMO_SHARDS][24]; /* static: the probe keeps them */
static uint64_t session_count;           /* guarded by session */
static uint64_t shard_count[DEMO_SHARDS]; /* each by its shard's lock */
static weft_semaphore_t report_slots;    /* "report-slots" */

/* ---------------------------------------- the waiting side: the convoy */

/*
 * Takes @m, counts the request in *@count and keeps the lock across a
 * DEMO_CONVOY_HOLD_MS sleep, as a handler that makes a remote call under
 * a lock does.  Returns the count, or 0 when cancelled.
 */
static uint64_t session_update(weft_async_mutex_t *m, uint64_t *count)
{
	weft_async_mutex_lock_t lk;
	uint64_t seen;
	int err;

	weft_async_mutex_lock_init(&lk, m);
	err = weft_await(async_lock_poll_cb, &lk); /* the waiters queue here */
	weft_async_mutex_lock_fini(&lk);
	if (err)
		return 0;
	seen = ++*count;
	err = weft_fiber_sleep(WEFT_MSEC(DEMO_CONVOY_HOLD_MS));
	weft_async_mutex_unlock(m);
	return err ? 0 : seen;
}

/*
 * The mistake: every request takes the one lock "demo-session", so
 * concurrent requests queue on it, each for the holds of all those before
 * it (the probe's contention warning names the holder).
 */
void *convoy_fiber(void *arg)
{
	struct req *r = arg;
	uint64_t seen = session_update(&session, &session_count);

	if (seen)
		req_reply(r, 200,
			  "user %u: held demo-session across a %u ms sleep "
			  "(%llu)\n",
			  r->user, DEMO_CONVOY_HOLD_MS,
			  (unsigned long long)seen);
	req_release(r);
	return NULL;
}

/* The fix: the same work under the user's shard of the lock. */
void *convoy_sharded_fiber(void *arg)
{
	struct req *r = arg;
	unsigned k = r->user % DEMO_SHARDS;
	uint64_t seen = session_update(&session_shards[k], &shard_count[k]);

	if (seen)
		req_reply(r, 200,
			  "user %u: held %s across a %u ms sleep (%llu)\n",
			  r->user, shard_names[k], DEMO_CONVOY_HOLD_MS,
			  (unsigned long long)seen);
	req_release(r);
	return NULL;
}

/* ------------------------------- the waiting side: the blocking pool */

static void sleep_blocking_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * A slow report: 400 ms of blocking calls (a big query, a PDF).  Longer
 * than the collector's 250 ms between checks of the resources, so that
 * one check sees the lookups waiting while the reports hold the threads:
 * the blocking-queue warning names the jobs holding them at that check.
 */
static void *report_job(void *arg)
{
	(void)arg;
	sleep_blocking_ms(DEMO_REPORT_MS);
	return NULL;
}

/* What every request needs: a quick blocking call (a cache file, DNS). */
static void *lookup_job(void *arg)
{
	(void)arg;
	sleep_blocking_ms(DEMO_LOOKUP_MS);
	return NULL;
}

/*
 * Awaits a job submitted with weft_spawn_blocking_named() at the caller's
 * line; replies 503 when it could not be queued.  Returns 0 when done.
 */
static int await_job(struct req *r, weft_blocking_t *job, int err)
{
	struct blocking_await b = { .job = job };

	if (err) {
		req_reply(r, 503, "spawn_blocking: %s\n", strerror(-err));
		return err;
	}
	err = weft_await(blocking_poll_cb, &b);
	weft_blocking_drop(job); /* cancelled: the job goes on, detached */
	return err;
}

/*
 * The mistake: the report goes straight to the pool.  A few at once hold
 * every thread for 400 ms, and every other job (each /lookup) waits for
 * one (the probe's blocking-queue warning names the reports).
 */
void *report_fiber(void *arg)
{
	struct req *r = arg;
	weft_blocking_t *job = NULL;
	int err;

	err = weft_spawn_blocking_named(NULL, "slow-report", report_job, NULL,
					&job);
	if (!await_job(r, job, err))
		req_reply(r, 200, "report: %u ms on the blocking pool\n",
			  DEMO_REPORT_MS);
	req_release(r);
	return NULL;
}

static weft_poll_t sem_acquire_poll_cb(void *arg, weft_cx_t *cx)
{
	return weft_semaphore_acquire_poll(arg, cx);
}

/*
 * The fix: a report takes a permit of "report-slots" first, so at most
 * DEMO_REPORT_SLOTS of them hold pool threads and a lookup always finds
 * one.  Reports beyond that wait for a permit, among themselves.
 */
void *report_limited_fiber(void *arg)
{
	struct req *r = arg;
	weft_semaphore_acquire_t acq;
	weft_blocking_t *job = NULL;
	int err;

	weft_semaphore_acquire_init(&acq, &report_slots, 1);
	err = weft_await(sem_acquire_poll_cb, &acq);
	weft_semaphore_acquire_fini(&acq);
	if (err || acq.status)
		goto out;
	err = weft_spawn_blocking_named(NULL, "slow-report", report_job, NULL,
					&job);
	err = await_job(r, job, err);
	/* Cancelled: the job runs on without its permit (shutdown only). */
	weft_semaphore_release(&report_slots, 1);
	if (!err)
		req_reply(r, 200,
			  "report: %u ms on the blocking pool, one of %u "
			  "report-slots\n",
			  DEMO_REPORT_MS, DEMO_REPORT_SLOTS);
out:
	req_release(r);
	return NULL;
}

void *lookup_fiber(void *arg)
{
	struct req *r = arg;
	weft_blocking_t *job = NULL;
	int err;

	err = weft_spawn_blocking_named(NULL, "lookup", lookup_job, NULL, &job);
	if (!await_job(r, job, err))
		req_reply(r, 200, "lookup: %u ms on the blocking pool\n",
			  DEMO_LOOKUP_MS);
	req_release(r);
	return NULL;
}

void demo_wait_init(void)
{
	weft_async_mutex_init(&session);
	weft_async_mutex_name(&session, "demo-session");
	for (unsigned k = 0; k < DEMO_SHARDS; k++) {
		snprintf(shard_names[k], sizeof(shard_names[k]),
			 "session-shard-%u", k);
		weft_async_mutex_init(&session_shards[k]);
		weft_async_mutex_name(&session_shards[k], shard_names[k]);
	}
	weft_semaphore_init(&report_slots, DEMO_REPORT_SLOTS);
	weft_semaphore_name(&report_slots, "report-slots");
}

void demo_wait_fini(void)
{
	weft_semaphore_fini(&report_slots);
	for (unsigned k = 0; k < DEMO_SHARDS; k++)
		weft_async_mutex_fini(&session_shards[k]);
	weft_async_mutex_fini(&session);
}
