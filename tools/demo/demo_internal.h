/* SPDX-License-Identifier: MIT */
/*
 * What weft-demo's files share: a request as the handlers see it, and
 * the few await helpers every fiber handler uses.  demo.c has the
 * service (routing, connections, the classic mistakes beside their
 * fixes); demo_wait.c the waiting side's routes (a lock convoy, a full
 * blocking pool) and their fixes.
 */
#ifndef WEFT_DEMO_INTERNAL_H
#define WEFT_DEMO_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "weft/weft.h"

#define DEMO_BODY_MAX 256u
#define DEMO_CONVOY_HOLD_MS 2u  /* the "remote call" under demo-session */
#define DEMO_SHARDS 16u
#define DEMO_REPORT_MS 400u
#define DEMO_LOOKUP_MS 1u
#define DEMO_REPORT_SLOTS 2u

enum endpoint {
	EP_FAST,
	EP_FAST_TASK,
	EP_CPU,
	EP_CPU_OFFLOAD,
	EP_LOCK,
	EP_LOCK_ASYNC,
	EP_SLEEP,
	EP_FILE,
	EP_FILE_OFFLOAD,
	EP_CONVOY,
	EP_CONVOY_SHARDED,
	EP_REPORT,
	EP_REPORT_LIMITED,
	EP_LOOKUP,
	EP_COUNT,
};

struct req {
	atomic_int refs;
	enum endpoint ep;
	unsigned ms;
	unsigned user;           /* ?user=N of the /convoy routes */
	int status;              /* response status, set by the handler */
	size_t body_len;
	char body[DEMO_BODY_MAX];
};

static inline void req_release(struct req *r)
{
	if (r && atomic_fetch_sub(&r->refs, 1) == 1)
		free(r);
}

__attribute__((format(printf, 3, 4))) static inline void
req_reply(struct req *r, int status, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(r->body, sizeof(r->body), fmt, ap);
	va_end(ap);
	r->status = status;
	r->body_len = n < 0 ? 0 :
		      (size_t)n >= sizeof(r->body) ? sizeof(r->body) - 1 :
						     (size_t)n;
}

/* A CPU burn the optimiser cannot drop. */
static inline weft_poll_t async_lock_poll_cb(void *arg, weft_cx_t *cx)
{
	return weft_async_mutex_lock_poll(arg, cx);
}

struct blocking_await {
	weft_blocking_t *job;
	void *result;
};

static inline weft_poll_t blocking_poll_cb(void *arg, weft_cx_t *cx)
{
	struct blocking_await *b = arg;

	return weft_blocking_poll(b->job, cx, &b->result);
}

/* demo_wait.c: the waiting side's routes, and their resources made and
 * named (before the runtime) and finalised (after it). */
void *convoy_fiber(void *arg);
void *convoy_sharded_fiber(void *arg);
void *report_fiber(void *arg);
void *report_limited_fiber(void *arg);
void *lookup_fiber(void *arg);
void demo_wait_init(void);
void demo_wait_fini(void);

#endif /* WEFT_DEMO_INTERNAL_H */
