/* SPDX-License-Identifier: MIT */
/*
 * weft-demo: an HTTP/1.1 keep-alive service whose endpoints reproduce the
 * classic async mistakes beside their fixes, for the probe and the console
 * to find:
 *
 *   /fast             cheap, answered by the connection's task itself
 *   /fast-task        the same in a task of its own (tiny-tasks warning)
 *   /cpu?ms=N         spins N ms inside the task (blocks its worker)
 *   /cpu-offload?ms=N the same spin on the blocking pool
 *   /lock             holds the weft_mutex_t "demo-accounts" across a 5 ms
 *                     sleep (the probe's lock-held-across-await warning)
 *   /lock-async       the same with a weft_async_mutex_t
 *   /sleep?ms=N       a timer
 *   /file             read(2)s a file inside the task
 *   /file-offload     the same read on the blocking pool
 *   /convoy?user=N    holds the one weft_async_mutex_t "demo-session"
 *                     across a 2 ms sleep: concurrent requests queue on it
 *                     (the probe's contention warning)
 *   /convoy-sharded?user=N
 *                     the same under one of 16 shard locks, by N
 *   /report           a 400 ms blocking job "slow-report" on the blocking
 *                     pool, which the demo keeps small (--blocking-threads,
 *                     default 5): a few at once fill it
 *   /report-limited   the same after taking a permit of the semaphore
 *                     "report-slots" (2 permits, fewer than the threads)
 *   /lookup           a 1 ms blocking job "lookup": waits for a pool
 *                     thread behind the reports (the probe's
 *                     blocking-queue warning names them), not behind the
 *                     limited ones
 *
 * Model: an acceptor task (tools/net/tcp_listen.c) hands every connection
 * to a connection task (a stackless state machine) that reads, parses and
 * answers one request at a time, so pipelined requests are answered in
 * order.  Each request that
 * reaches an endpoint other than /fast runs as its own task named
 * "GET /cpu" and so on, spawned with its route's own location (its line in
 * the route table), so the probe attributes long polls and warnings to the
 * endpoint; the connection awaits its join handle.  /fast-task, /cpu,
 * /cpu-offload and /file are stackless state machines; /lock, /lock-async,
 * /sleep, /file-offload and the waiting side's routes (/convoy ...
 * /lookup) are fibers.
 *
 * /fast is answered inline, as an HTTP server on an async runtime answers
 * a request that does not block (hyper in the connection's task): its work
 * is a formatted string, and a task of its own would cost more than that
 * (a spawn, two polls, a join, a wake: ~12 events where the inline answer
 * costs the connection's one poll).  /fast-task is that mistake, kept for
 * the console's tiny-tasks warning and to measure what a task per request
 * costs.
 *
 * A request and its response live in a struct req shared by the connection
 * and the handler task, reference-counted (2 at spawn), so either may go
 * first when the runtime cancels both.
 *
 * The parser (tools/net/http_parse.c, fuzzed by tests/fuzz/fuzz_http.c)
 * has limits:
 * request line 8 KiB (414), header section 16 KiB or 100 fields (431),
 * Content-Length body 1 MiB (413), anything malformed 400;
 * Transfer-Encoding is not implemented (501).  Every error response closes
 * the connection.
 *
 * Shutdown: SIGINT, SIGTERM and SIGHUP are blocked in every thread (the
 * mask is set before the runtime starts its threads, which inherit it) and
 * taken by one thread in sigwait(2), which aborts the acceptor: the
 * listener closes, main's join returns, and weft_runtime_destroy() cancels
 * the connections and removes the probe's socket.  Blocked signals are
 * queued even when their disposition is SIG_IGN (as for a job that a
 * script starts with &), so this works there too.
 *
 * Exit status: 0 after SIGINT, SIGTERM or SIGHUP; 1 when the runtime or
 * the listener cannot be set up; 2 for a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weft/weft.h"
#include "weft/mutex.h"

#include "demo_internal.h"
#include "http_parse.h"
#include "tcp_listen.h"
#include "tool_util.h"

#define DEMO_DEFAULT_LISTEN "127.0.0.1:8080"
#define DEMO_DEFAULT_MS 10u
#define DEMO_MAX_MS 10000u
#define DEMO_LOCK_HOLD_MS 5u
#define DEMO_FILE_CHUNK 65536u
#define DEMO_FILE_MAX (4u * 1024u * 1024u) /* bytes read from --file */
#define DEMO_MAX_USER 1000000000u
/*
 * The blocking pool's default size here: small, so that a few reports fill
 * it, and one more than the load's four /cpu-offload jobs at once (its
 * --fixed burst), so that the fixed mix fits.
 */
#define DEMO_BLOCKING_THREADS 5u
#define DEMO_MAX_BLOCKING_THREADS 512u

static const char *file_path = "/proc/self/exe";
static weft_mutex_t accounts;            /* "demo-accounts" */
static weft_async_mutex_t accounts_async;
static uint64_t balance;                 /* guarded by accounts */
static uint64_t balance_async;           /* guarded by accounts_async */

/* ------------------------------------------------------------ requests */

static uint64_t spin_ms(unsigned ms)
{
	uint64_t end = weft_now_ns() + WEFT_MSEC(ms);
	uint64_t x = 88172645463325252ull;

	do {
		for (int i = 0; i < 1000; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
	} while (weft_now_ns() < end);
	return x;
}

/* Reads --file with read(2): the blocking call of /file. */
static void read_file(char *body, size_t cap, int *status)
{
	static char chunk[DEMO_FILE_CHUNK]; /* contents unused: shared */
	uint32_t hash = 2166136261u;
	size_t total = 0;
	ssize_t n;
	int fd;

	fd = open(file_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*status = 500;
		snprintf(body, cap, "open %s: %s\n", file_path,
			 strerror(errno));
		return;
	}
	while (total < DEMO_FILE_MAX &&
	       (n = read(fd, chunk, sizeof(chunk))) > 0) {
		total += (size_t)n;
		hash = (hash ^ (uint32_t)n) * 16777619u;
	}
	close(fd);
	*status = 200;
	snprintf(body, cap, "read %zu bytes of %s (%08x)\n", total, file_path,
		 hash);
}

/* ------------------------------------------- stackless-state handlers */

struct sm_handler {
	int weft_pc;
	struct req *r;
	weft_blocking_t *job;
};

static void sm_handler_drop(void *arg)
{
	struct sm_handler *h = arg;

	weft_blocking_drop(h->job);
	req_release(h->r);
}

static void fast_reply(struct req *r)
{
	req_reply(r, 200, "fast\n");
}

static weft_poll_t fast_poll(void *arg, weft_cx_t *cx)
{
	struct sm_handler *h = arg;

	(void)cx;
	fast_reply(h->r);
	return WEFT_READY;
}

/* The mistake: the spin runs on the worker, which polls nothing else. */
static weft_poll_t cpu_poll(void *arg, weft_cx_t *cx)
{
	struct sm_handler *h = arg;
	uint64_t x;

	(void)cx;
	x = spin_ms(h->r->ms);
	req_reply(h->r, 200, "spun %u ms on a worker (%llx)\n", h->r->ms,
		  (unsigned long long)(x & 0xffff));
	return WEFT_READY;
}

static void *cpu_job(void *arg)
{
	spin_ms((unsigned)(uintptr_t)arg);
	return NULL;
}

/* The fix: the same spin on the blocking pool; the task only awaits. */
static weft_poll_t cpu_offload_poll(void *arg, weft_cx_t *cx)
{
	struct sm_handler *h = arg;
	int err;

	WEFT_ASYNC_BEGIN(h);
	err = weft_spawn_blocking_with(
		NULL,
		&(weft_blocking_spec_t){ .fn = cpu_job,
					 .arg = (void *)(uintptr_t)h->r->ms,
					 .name = "cpu-offload" },
		&h->job);
	if (err) {
		req_reply(h->r, 503, "spawn_blocking: %s\n", strerror(-err));
		goto out;
	}
	WEFT_AWAIT(h, weft_blocking_poll(h->job, cx, NULL));
	req_reply(h->r, 200, "spun %u ms on the blocking pool\n", h->r->ms);
out:;
	WEFT_ASYNC_END(h);
}

/* The mistake: read(2) on a worker. */
static weft_poll_t file_poll(void *arg, weft_cx_t *cx)
{
	struct sm_handler *h = arg;

	(void)cx;
	read_file(h->r->body, sizeof(h->r->body), &h->r->status);
	h->r->body_len = strlen(h->r->body);
	return WEFT_READY;
}

/* ------------------------------------------------------ fiber handlers */

/*
 * The mistake: the blocking mutex stays locked across the sleep.  Taken
 * with trylock and a yield rather than weft_mutex_lock(), so that a second
 * /lock request yields instead of blocking its worker: with every worker
 * blocked in pthread_mutex_lock the holder could never resume.
 *
 * The yields are a busy-wait (the probe's self-wakes warning), but one
 * that rests 1 ms every LOCK_SPINS tries: while a /cpu burst holds the
 * other workers, the holder's sleep may not end for hundreds of ms, and a
 * waiter yielding all that time made over a million polls a burst (a
 * 10 MB trace of little else, and half a GB of Chrome JSON).  31 yields
 * to a timer wake still make it mostly self-wakes.
 */
#define LOCK_SPINS 32u

static void *lock_fiber(void *arg)
{
	struct req *r = arg;
	uint64_t seen;
	unsigned tries = 0;

	while (!weft_mutex_trylock(&accounts)) {
		int err = ++tries % LOCK_SPINS ? weft_fiber_yield() :
						 weft_fiber_sleep(WEFT_MSEC(1));

		if (err)
			goto out;
	}
	seen = ++balance;
	/* Held across an await: the probe warns here. */
	weft_fiber_sleep(WEFT_MSEC(DEMO_LOCK_HOLD_MS));
	weft_mutex_unlock(&accounts);
	req_reply(r, 200, "locked demo-accounts across a %u ms sleep (%llu)\n",
		  DEMO_LOCK_HOLD_MS, (unsigned long long)seen);
out:
	req_release(r);
	return NULL;
}

/* The fix: the async mutex may be held across the sleep. */
static void *lock_async_fiber(void *arg)
{
	struct req *r = arg;
	weft_async_mutex_lock_t lk;
	uint64_t seen;
	int err;

	weft_async_mutex_lock_init(&lk, &accounts_async);
	err = weft_await(async_lock_poll_cb, &lk);
	weft_async_mutex_lock_fini(&lk);
	if (err)
		goto out;
	seen = ++balance_async;
	err = weft_fiber_sleep(WEFT_MSEC(DEMO_LOCK_HOLD_MS));
	weft_async_mutex_unlock(&accounts_async);
	if (err)
		goto out;
	req_reply(r, 200,
		  "locked the async mutex across a %u ms sleep (%llu)\n",
		  DEMO_LOCK_HOLD_MS, (unsigned long long)seen);
out:
	req_release(r);
	return NULL;
}

static void *sleep_fiber(void *arg)
{
	struct req *r = arg;

	if (!weft_fiber_sleep(WEFT_MSEC(r->ms)))
		req_reply(r, 200, "slept %u ms\n", r->ms);
	req_release(r);
	return NULL;
}

static void *file_job(void *arg)
{
	char *body = malloc(DEMO_BODY_MAX);
	int status;

	(void)arg;
	if (body)
		read_file(body, DEMO_BODY_MAX, &status);
	return body;
}

/* The fix: the read runs on the blocking pool. */
static void *file_offload_fiber(void *arg)
{
	struct req *r = arg;
	struct blocking_await b = { 0 };
	int err;

	err = weft_spawn_blocking_with(
		NULL,
		&(weft_blocking_spec_t){ .fn = file_job,
					 .discard = free,
					 .name = "file-offload" },
		&b.job);
	if (err) {
		req_reply(r, 503, "spawn_blocking: %s\n", strerror(-err));
		goto out;
	}
	err = weft_await(blocking_poll_cb, &b);
	weft_blocking_drop(b.job);
	if (err)
		goto out;
	if (b.result)
		req_reply(r, 200, "%s", (char *)b.result);
	else
		req_reply(r, 500, "out of memory\n");
	free(b.result);
out:
	req_release(r);
	return NULL;
}

/* ------------------------------------------------------------- routing */

/*
 * The routes.  Each entry records its own file and line, and every handler
 * task is spawned with them: the console's tasks view and weft-trace show
 * "GET /cpu" at this table's /cpu line, not one shared spawn site.  The
 * task name is a string literal (the probe keeps the pointer).
 */
struct route {
	const char *path;
	const char *task_name;
	bool takes_ms;
	bool takes_user;        /* ?user=N */
	void (*inline_fn)(struct req *r); /* run by the connection, or */
	weft_poll_cb poll;      /* a state machine, or */
	weft_fiber_fn fiber;    /* a fiber */
	const char *file;       /* the route's spawn location */
	int line;
};

#define ROUTE(p, ms, poll_fn, fiber_fn)                                        \
	{ .path = p, .task_name = "GET " p, .takes_ms = ms,                    \
	  .poll = poll_fn, .fiber = fiber_fn, .file = __FILE__,                \
	  .line = __LINE__ }
#define ROUTE_USER(p, fiber_fn)                                                \
	{ .path = p, .task_name = "GET " p, .takes_user = true,                \
	  .fiber = fiber_fn, .file = __FILE__, .line = __LINE__ }

static const struct route routes[EP_COUNT] = {
	[EP_FAST] = { .path = "/fast", .task_name = "GET /fast",
		      .inline_fn = fast_reply, .file = __FILE__,
		      .line = __LINE__ },
	[EP_FAST_TASK] = ROUTE("/fast-task", false, fast_poll, NULL),
	[EP_CPU] = ROUTE("/cpu", true, cpu_poll, NULL),
	[EP_CPU_OFFLOAD] = ROUTE("/cpu-offload", true, cpu_offload_poll, NULL),
	[EP_LOCK] = ROUTE("/lock", false, NULL, lock_fiber),
	[EP_LOCK_ASYNC] = ROUTE("/lock-async", false, NULL, lock_async_fiber),
	[EP_SLEEP] = ROUTE("/sleep", true, NULL, sleep_fiber),
	[EP_FILE] = ROUTE("/file", false, file_poll, NULL),
	[EP_FILE_OFFLOAD] = ROUTE("/file-offload", false, NULL,
				  file_offload_fiber),
	[EP_CONVOY] = ROUTE_USER("/convoy", convoy_fiber),
	[EP_CONVOY_SHARDED] = ROUTE_USER("/convoy-sharded",
					 convoy_sharded_fiber),
	[EP_REPORT] = ROUTE("/report", false, NULL, report_fiber),
	[EP_REPORT_LIMITED] = ROUTE("/report-limited", false, NULL,
				    report_limited_fiber),
	[EP_LOOKUP] = ROUTE("/lookup", false, NULL, lookup_fiber),
};

#undef ROUTE
#undef ROUTE_USER

/* Spawns @r's handler; on success the task holds one reference. */
static int spawn_handler(struct req *r, weft_join_t **join)
{
	const struct route *rt = &routes[r->ep];
	struct sm_handler h = { .r = r };
	int err;

	atomic_fetch_add(&r->refs, 1);
	if (rt->fiber)
		err = weft_spawn_fiber_with(
			NULL,
			&(weft_fiber_opts_t){ .name = rt->task_name,
					      .file = rt->file,
					      .line = rt->line },
			rt->fiber, r, join);
	else
		err = weft_spawn_with(NULL,
				      &(weft_spawn_t){ .poll = rt->poll,
						       .drop = sm_handler_drop,
						       .state = &h,
						       .size = sizeof(h),
						       .name = rt->task_name,
						       .file = rt->file,
						       .line = rt->line },
				      join);
	if (err)
		atomic_fetch_sub(&r->refs, 1);
	return err;
}

/*
 * Routes a parsed GET or HEAD: the endpoint, or -1 (404); sets @ms and
 * @user for the endpoints that take them.  Returns false for a malformed
 * ms or user (400).
 */
static bool route_find(const http_request_t *hr, int *ep, unsigned *ms,
		       unsigned *user)
{
	const char *q = memchr(hr->target, '?', hr->target_len);
	size_t plen = q ? (size_t)(q - hr->target) : hr->target_len;
	size_t qlen = q ? hr->target_len - plen - 1 : 0;

	*ep = -1;
	*ms = DEMO_DEFAULT_MS;
	*user = 0;
	for (int i = 0; i < EP_COUNT; i++) {
		if (plen != strlen(routes[i].path) ||
		    memcmp(hr->target, routes[i].path, plen))
			continue;
		*ep = i;
		if (routes[i].takes_ms && q)
			return http_parse_query_uint(q + 1, qlen, "ms",
						     DEMO_MAX_MS, ms);
		if (routes[i].takes_user && q)
			return http_parse_query_uint(q + 1, qlen, "user",
						     DEMO_MAX_USER, user);
		return true;
	}
	return true;
}

/* ----------------------------------------------------------- responses */

/* Builds the response in a malloc'd buffer; NULL without memory. */
static char *build_response(int status, const char *body, size_t body_len,
			    bool head, bool close, size_t *out_len)
{
	size_t cap = 256 + body_len;
	char *out = malloc(cap);
	int n;

	if (!out)
		return NULL;
	n = snprintf(out, cap,
		     "HTTP/1.1 %d %s\r\n"
		     "Content-Type: text/plain\r\n"
		     "Content-Length: %zu\r\n"
		     "%s%s"
		     "\r\n",
		     status, http_parse_reason(status), body_len,
		     status == 405 ? "Allow: GET, HEAD\r\n" : "",
		     close ? "Connection: close\r\n" : "");
	if (n < 0 || (size_t)n >= cap) {
		free(out);
		return NULL;
	}
	if (!head) {
		memcpy(out + n, body, body_len);
		n += (int)body_len;
	}
	*out_len = (size_t)n;
	return out;
}

/* ---------------------------------------------------------- connection */

struct conn {
	int weft_pc;
	weft_stream_t *s;
	ssize_t n;
	size_t filled;
	size_t body_left;
	http_request_t p;       /* p.target points into buf until consumed */
	int route;              /* endpoint; -1 404, -2 405 */
	unsigned ms;
	unsigned user;
	struct req *r;
	weft_join_t *join;
	char *out;
	size_t out_len;
	size_t done;
	int status;
	char *buf; /* HTTP_CONN_BUF bytes: off the state, which the probe
		    * flags as a large future above a few KiB */
};

/* Drops @take bytes from the front of the buffer. */
static void conn_consume(struct conn *c, size_t take)
{
	memmove(c->buf, c->buf + take, c->filled - take);
	c->filled -= take;
}

/* Sets c->out to the response to the request just handled. */
static void conn_respond(struct conn *c, int status, const char *body,
			 size_t body_len)
{
	c->out = build_response(status, body, body_len,
				c->p.method == HTTP_HEAD, c->p.close,
				&c->out_len);
	c->done = 0;
}

static weft_poll_t conn_poll(void *arg, weft_cx_t *cx)
{
	struct conn *c = arg;
	int err;

	WEFT_ASYNC_BEGIN(c);
	for (;;) {
		/* Blank lines before a request are ignored (RFC 9112 2.2). */
		while (c->filled >= 2 && c->buf[0] == '\r' && c->buf[1] == '\n')
			conn_consume(c, 2);
		if (http_parse_request(c->buf, c->filled, &c->p) ==
		    HTTP_PARSE_MORE) {
			WEFT_AWAIT(c, weft_stream_read(
					      c->s, cx, c->buf + c->filled,
					      HTTP_CONN_BUF - c->filled,
					      &c->n));
			if (c->n <= 0)
				break;
			c->filled += (size_t)c->n;
			continue;
		}
		/* Routed now: the target goes with the head below. */
		c->route = -2;
		if (!c->p.error && c->p.method != HTTP_OTHER &&
		    !route_find(&c->p, &c->route, &c->ms, &c->user)) {
			c->p.error = 400;
			c->p.close = true;
		}
		if (c->p.error) {
			char msg[64];
			int len = snprintf(msg, sizeof(msg), "%d %s\n",
					   c->p.error,
					   http_parse_reason(c->p.error));

			conn_respond(c, c->p.error, msg, (size_t)len);
			goto write;
		}

		/* The body is read and discarded. */
		conn_consume(c, c->p.head_len);
		c->body_left = c->p.body_len;
		while (c->body_left > 0) {
			if (c->filled == 0) {
				WEFT_AWAIT(c, weft_stream_read(
						      c->s, cx, c->buf,
						      c->body_left <
								      HTTP_CONN_BUF ?
							      c->body_left :
							      HTTP_CONN_BUF,
						      &c->n));
				if (c->n <= 0)
					goto out;
				c->filled = (size_t)c->n;
			}
			{
				size_t take = c->filled < c->body_left ?
						      c->filled :
						      c->body_left;

				conn_consume(c, take);
				c->body_left -= take;
			}
		}

		if (c->route < 0) {
			int st = c->route == -2 ? 405 : 404;
			const char *msg = st == 405 ? "405 Method Not Allowed\n" :
						      "404 Not Found\n";

			conn_respond(c, st, msg, strlen(msg));
			goto write;
		}

		c->r = calloc(1, sizeof(*c->r));
		if (!c->r)
			goto out;
		atomic_init(&c->r->refs, 1);
		c->r->ep = (enum endpoint)c->route;
		c->r->ms = c->ms;
		c->r->user = c->user;
		c->r->status = 500;
		if (routes[c->route].inline_fn) {
			routes[c->route].inline_fn(c->r);
			err = 0;
		} else if ((err = spawn_handler(c->r, &c->join))) {
			req_reply(c->r, 503, "spawn: %s\n", strerror(-err));
		} else {
			WEFT_AWAIT(c,
				   weft_join_poll(c->join, cx, NULL, NULL));
			weft_join_drop(c->join);
			c->join = NULL;
		}
		conn_respond(c, c->r->status, c->r->body, c->r->body_len);
		req_release(c->r);
		c->r = NULL;

write:
		if (!c->out)
			break;
		WEFT_AWAIT(c, weft_stream_write_all(c->s, cx, c->out,
						    c->out_len, &c->done,
						    &c->status));
		free(c->out);
		c->out = NULL;
		if (c->status || c->p.close)
			break;
	}
out:;
	WEFT_ASYNC_END(c);
}

static void conn_drop(void *arg)
{
	struct conn *c = arg;

	if (c->join) {
		weft_join_abort(c->join);
		weft_join_drop(c->join);
	}
	req_release(c->r);
	free(c->out);
	free(c->buf);
	weft_stream_close(c->s);
}

/* tcp_conn_fn: a connection task for every stream accepted. */
static void spawn_conn(weft_stream_t *s, void *arg)
{
	struct conn c = { .s = s };
	int err;

	(void)arg;
	c.buf = malloc(HTTP_CONN_BUF);
	if (!c.buf) {
		weft_stream_close(s);
		return;
	}
	err = weft_spawn_with(NULL,
			      &(weft_spawn_t){ .poll = conn_poll,
					       .drop = conn_drop,
					       .state = &c,
					       .size = sizeof(c),
					       .name = "http-conn",
					       .file = __FILE__,
					       .line = __LINE__ },
			      NULL);
	if (err) {
		fprintf(stderr, "weft-demo: spawn: %s\n", strerror(-err));
		free(c.buf);
		weft_stream_close(s);
	}
}

/* --------------------------------------------------------------- setup */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: weft-demo [--listen HOST:PORT] [--workers N] [--file PATH]\n"
		"                 [--blocking-threads N]\n"
		"       weft-demo --routes\n"
		"\n"
		"An HTTP/1.1 keep-alive service whose endpoints show the classic\n"
		"async mistakes beside their fixes (GET or HEAD):\n"
		"  /fast              a cheap handler, run by the connection's task\n"
		"  /fast-task         the same in a task of its own (a task per\n"
		"                     request: the probe's tiny-tasks warning)\n"
		"  /cpu?ms=N          spins N ms inside the task (blocks its worker)\n"
		"  /cpu-offload?ms=N  the same spin through the blocking pool\n"
		"  /lock              holds the weft_mutex_t \"demo-accounts\" across a\n"
		"                     %u ms sleep (the probe warns)\n"
		"  /lock-async        the same with the async mutex\n"
		"  /sleep?ms=N        a timer\n"
		"  /file              read(2)s PATH inside the task\n"
		"  /file-offload      the same read through the blocking pool\n"
		"  /convoy?user=U     holds the async mutex \"demo-session\" across a\n"
		"                     %u ms sleep: concurrent requests queue on it (the\n"
		"                     probe's contention warning)\n"
		"  /convoy-sharded?user=U\n"
		"                     the same under one of %u shard locks, by U\n"
		"  /report            a %u ms blocking job \"slow-report\" on the\n"
		"                     blocking pool: a few at once fill it\n"
		"  /report-limited    the same with a permit of the semaphore\n"
		"                     \"report-slots\" (%u permits) taken first\n"
		"  /lookup            a %u ms blocking job \"lookup\": behind /report\n"
		"                     it waits for a thread (the probe's blocking-queue\n"
		"                     warning)\n"
		"N is 0..%u (default %u).\n"
		"\n"
		"  --listen HOST:PORT  numeric address (default %s; port 0: any)\n"
		"  --workers N         worker threads (default: $WEFT_WORKERS or CPUs)\n"
		"  --file PATH         the file /file reads (default %s)\n"
		"  --blocking-threads N\n"
		"                      the blocking pool's threads at most (default %u,\n"
		"                      small so that /report fills it; 1..%u)\n"
		"\n"
		"  --routes            list the routes: task name, style, spawn location\n"
		"\n"
		"Environment: the runtime's knobs (README), among them\n"
		"WEFT_METRICS_BIND=HOST:PORT to serve Prometheus metrics at\n"
		"http://HOST:PORT/metrics (WEFT_METRICS_HISTOGRAMS=1: with the\n"
		"poll and scheduling-delay histograms) and WEFT_CONSOLE=off.\n"
		"\n"
		"Prints \"weft-demo listening on HOST:PORT\" on stdout once ready;\n"
		"SIGINT, SIGTERM or SIGHUP shuts it down.\n"
		"exit status: 0 after SIGINT, SIGTERM or SIGHUP; 1 when the runtime\n"
		"or the listener cannot be set up; 2 for a usage error\n",
		DEMO_LOCK_HOLD_MS, DEMO_CONVOY_HOLD_MS, DEMO_SHARDS,
		DEMO_REPORT_MS, DEMO_REPORT_SLOTS, DEMO_LOOKUP_MS, DEMO_MAX_MS,
		DEMO_DEFAULT_MS, DEMO_DEFAULT_LISTEN, file_path,
		DEMO_BLOCKING_THREADS, DEMO_MAX_BLOCKING_THREADS);
}

#define usage_error(fmt, ...)                                                  \
	tool_die(2, "weft-demo", fmt " (see weft-demo --help)", ##__VA_ARGS__)

/* The value of option @name at argv[*i] ("--x V" or "--x=V"), or NULL. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	const char *v;

	if (tool_opt_value(argc, argv, i, name, &v) < 0)
		usage_error("%s needs a value", name);
	return v;
}

/* The thread that takes the signals (see the top of the file). */
struct sig_waiter {
	sigset_t set;
	weft_join_t *acceptor;
	int sig; /* the signal taken; read by main after pthread_join() */
};

static void *sig_waiter_main(void *arg)
{
	struct sig_waiter *w = arg;
	int sig;

	if (sigwait(&w->set, &sig) == 0)
		w->sig = sig;
	weft_join_abort(w->acceptor);
	return NULL;
}

static void print_routes(void)
{
	for (int i = 0; i < EP_COUNT; i++)
		printf("%-20s %-10s %s:%d\n", routes[i].task_name,
		       routes[i].fiber	   ? "fiber" :
		       routes[i].inline_fn ? "inline" :
					     "stackless",
		       routes[i].file, routes[i].line);
}

int main(int argc, char **argv)
{
	weft_config_t config = { .max_blocking_threads =
					 DEMO_BLOCKING_THREADS };
	const char *listen_addr = DEMO_DEFAULT_LISTEN;
	struct tcp_acceptor_spec a = { .prog = "weft-demo",
				       .on_conn = spawn_conn };
	struct sig_waiter sw = { 0 };
	struct sockaddr_storage ss;
	socklen_t sslen;
	pthread_t sig_thread;
	weft_runtime_t *rt;
	unsigned long n;
	const char *v;
	uint16_t port;
	int i, err;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--routes")) {
			print_routes();
			return 0;
		} else if ((v = opt_value(argc, argv, &i, "--listen"))) {
			if (weft_addr_parse(v, &ss, &sslen))
				usage_error("bad --listen address '%s' (want HOST:PORT, numeric)",
					    v);
			listen_addr = v;
		} else if ((v = opt_value(argc, argv, &i, "--workers"))) {
			if (!tool_parse_ulong(v, 1, 1024, &n))
				usage_error("bad --workers '%s' (want 1..1024)", v);
			config.workers = (unsigned)n;
		} else if ((v = opt_value(argc, argv, &i,
					  "--blocking-threads"))) {
			if (!tool_parse_ulong(v, 1, DEMO_MAX_BLOCKING_THREADS,
					      &n))
				usage_error("bad --blocking-threads '%s' (want 1..%u)",
					    v, DEMO_MAX_BLOCKING_THREADS);
			config.max_blocking_threads = (unsigned)n;
		} else if ((v = opt_value(argc, argv, &i, "--file"))) {
			if (!*v)
				usage_error("--file needs a path");
			file_path = v;
		} else {
			usage_error("unknown argument '%s'", argv[i]);
		}
	}

	/* Before any thread exists, so that every thread inherits it. */
	sigemptyset(&sw.set);
	sigaddset(&sw.set, SIGINT);
	sigaddset(&sw.set, SIGTERM);
	sigaddset(&sw.set, SIGHUP);
	err = pthread_sigmask(SIG_BLOCK, &sw.set, NULL);
	if (err) {
		fprintf(stderr, "weft-demo: sigmask: %s\n", strerror(err));
		return 1;
	}

	weft_mutex_init(&accounts, "demo-accounts");
	weft_async_mutex_init(&accounts_async);
	weft_async_mutex_name(&accounts_async, "demo-accounts-async");
	demo_wait_init();
	err = weft_runtime_create(&config, &rt);
	if (err) {
		fprintf(stderr, "weft-demo: runtime: %s\n", strerror(-err));
		return 1;
	}
	err = tcp_listen(rt, listen_addr, &a.l);
	if (!err)
		err = weft_listener_local_port(a.l, &port);
	if (err) {
		fprintf(stderr, "weft-demo: listen on %s: %s\n", listen_addr,
			strerror(-err));
		weft_listener_close(a.l);
		goto out_destroy;
	}

	err = tcp_acceptor_spawn(rt, &a, &sw.acceptor);
	if (err) {
		fprintf(stderr, "weft-demo: spawn: %s\n", strerror(-err));
		goto out_destroy;
	}
	err = pthread_create(&sig_thread, NULL, sig_waiter_main, &sw);
	if (err) {
		fprintf(stderr, "weft-demo: signal thread: %s\n",
			strerror(err));
		weft_join_abort(sw.acceptor); /* its drop closes the listener */
		weft_join_drop(sw.acceptor);
		goto out_destroy;
	}
	{
		/* Print the bound port (the address may say 0). */
		const char *colon = strrchr(listen_addr, ':');

		printf("weft-demo listening on %.*s:%u (%u workers, %u "
		       "blocking threads)\n",
		       (int)(colon - listen_addr), listen_addr, port,
		       weft_runtime_workers(rt), config.max_blocking_threads);
		fflush(stdout);
	}

	/*
	 * -ECANCELED when the signal thread aborted the acceptor; 0 if it
	 * ended by itself, and then the signal thread is woken to finish.
	 */
	err = weft_join_wait(sw.acceptor, NULL);
	if (err != -ECANCELED)
		pthread_kill(sig_thread, SIGTERM);
	pthread_join(sig_thread, NULL);
	weft_join_drop(sw.acceptor);
	if (err == -ECANCELED)
		fprintf(stderr, "weft-demo: %s: shutting down\n",
			sw.sig == SIGINT    ? "SIGINT" :
			sw.sig == SIGHUP    ? "SIGHUP" :
					      "SIGTERM");
	weft_runtime_destroy(rt);
	demo_wait_fini();
	weft_async_mutex_fini(&accounts_async);
	weft_mutex_fini(&accounts);
	return err == -ECANCELED ? 0 : 1;

out_destroy:
	weft_runtime_destroy(rt);
	return 1;
}
