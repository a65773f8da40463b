/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the probe's server tests (test_server.c,
 * test_server_limits.c): a workload of yielders (yielders.h), a temporary
 * XDG_RUNTIME_DIR, and a client that speaks the protocol over a real
 * socket (unix or TCP), reading with a deadline.
 */
#ifndef WEFT_TEST_SERVER_HELPERS_H
#define WEFT_TEST_SERVER_HELPERS_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "test_helpers.h"
#include "yielders.h"

#include "weft/probe.h"
#include "weft/wire.h"

#include "server_internal.h"

/* ------------------------------------------------------------ workload */

/* Runs the workload (@tasks yielders of @polls polls, or 4 of 200) on its
 * own thread, again and again, until told to stop. */
struct bg_load {
	weft_runtime_t *rt;
	int tasks, polls;
	_Atomic bool stop;
};

static inline void *bg_load_main(void *arg)
{
	struct bg_load *w = arg;

	while (!atomic_load(&w->stop))
		workload(w->rt, w->tasks ? w->tasks : 4,
			 w->polls ? w->polls : 200);
	return NULL;
}

/* A task that waits on @idle_note until the test ends (the test inits
 * the note, and wakes and finis it at its end). */
static weft_notify_t idle_note;

struct idle {
	int weft_pc;
	weft_notified_t nd;
};

static inline weft_poll_t idle_poll(void *arg, weft_cx_t *cx)
{
	struct idle *t = arg;

	WEFT_ASYNC_BEGIN(t);
	weft_notified_init(&t->nd, &idle_note);
	WEFT_AWAIT(t, weft_notified_poll(&t->nd, cx));
	weft_notified_fini(&t->nd);
	WEFT_ASYNC_END(t);
}

/* ------------------------------------------------------------ temp dirs */

static char xdg[256];

static inline void xdg_make(void)
{
	snprintf(xdg, sizeof(xdg), "%s/weft-test-server-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(xdg));
	assert_int_equal(setenv("XDG_RUNTIME_DIR", xdg, 1), 0);
}

static inline void xdg_remove(void)
{
	char p[300];

	snprintf(p, sizeof(p), "%s/weft", xdg);
	(void)rmdir(p);
	assert_int_equal(rmdir(xdg), 0);
	unsetenv("XDG_RUNTIME_DIR");
}

static inline weft_runtime_t *rt_with_server(void)
{
	weft_config_t cfg = { .workers = 2 };
	weft_runtime_t *rt;

	assert_int_equal(weft_runtime_create(&cfg, &rt), 0);
	assert_non_null(weft__server_default());
	return rt;
}

/* ------------------------------------------------------------ a client */

struct tclient {
	int fd;
	weft_wire_decoder_t dec;
	uint8_t buf[1 << 16];
	size_t len, pos;
	bool eof;
};

static inline void tc_open(struct tclient *c, const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	memset(c, 0, sizeof(*c));
	assert_true(strlen(path) < sizeof(sun.sun_path));
	memcpy(sun.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c->fd >= 0);
	assert_int_equal(connect(c->fd, (void *)&sun, sizeof(sun)), 0);
	weft_wire_decoder_init(&c->dec, 0);
}

static inline void tc_close(struct tclient *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	weft_wire_decoder_fini(&c->dec);
}

/* The next frame, or NULL at EOF or after @ms without one (@ms 0: only
 * what has come already). */
static inline Weft__V1__Frame *tc_next(struct tclient *c, int ms)
{
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		Weft__V1__Frame *f = NULL;
		struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
		struct timespec t1;
		size_t used;
		ssize_t n;
		long left;
		int rc;

		while (c->pos < c->len) {
			rc = weft_wire_decoder_feed(&c->dec, c->buf + c->pos,
						    c->len - c->pos, &used, &f);
			c->pos += used;
			assert_true(rc >= 0);
			if (rc == WEFT_WIRE_FRAME)
				return f;
		}
		if (c->eof)
			return NULL;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		left = ms - ((t1.tv_sec - t0.tv_sec) * 1000 +
			     (t1.tv_nsec - t0.tv_nsec) / 1000000);
		/* At the deadline (or with @ms 0), one look without waiting. */
		if (poll(&pfd, 1, left > 0 ? (int)left : 0) <= 0)
			return NULL;
		n = read(c->fd, c->buf, sizeof(c->buf));
		if (n <= 0) {
			c->eof = true;
			return NULL;
		}
		c->len = (size_t)n;
		c->pos = 0;
	}
}

static inline void tc_send_raw(struct tclient *c, const void *p, size_t n)
{
	assert_int_equal(write(c->fd, p, n), (ssize_t)n);
}

static inline void tc_send(struct tclient *c, const Weft__V1__Frame *f)
{
	weft_wire_buf_t b = { 0 };

	assert_int_equal(weft_wire_record_append(&b, f), 0);
	tc_send_raw(c, b.data, b.len);
	weft_wire_buf_fini(&b);
}

static inline void tc_subscribe_ex(struct tclient *c, bool updates, bool events,
				   uint32_t interval_ms,
				   Weft__V1__Filter *filter)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Subscribe s = WEFT__V1__SUBSCRIBE__INIT;

	s.updates = updates;
	s.events = events;
	s.interval_ms = interval_ms;
	s.filter = filter;
	f.body_case = WEFT__V1__FRAME__BODY_SUBSCRIBE;
	f.subscribe = &s;
	tc_send(c, &f);
}

static inline void tc_subscribe(struct tclient *c, bool updates, bool events)
{
	tc_subscribe_ex(c, updates, events, 0, NULL);
}

/* Reads the header the server sends first and checks its hello. */
static inline void tc_expect_header(struct tclient *c)
{
	Weft__V1__Frame *f = tc_next(c, 10000);

	assert_non_null(f);
	assert_int_equal(f->body_case, WEFT__V1__FRAME__BODY_HEADER);
	assert_string_equal(f->header->magic, WEFT_TRACE_MAGIC);
	assert_non_null(f->header->hello);
	assert_int_equal(f->header->hello->pid, (uint32_t)getpid());
	assert_int_equal(f->header->hello->workers, 2);
	weft_wire_frame_free(f);
}

/* Reads until the server closes; true if it did within @ms. */
static inline bool tc_closed_by_server(struct tclient *c, int ms)
{
	struct timespec t0, t1;
	Weft__V1__Frame *f;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((f = tc_next(c, ms)) != NULL) {
		weft_wire_frame_free(f);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (t1.tv_sec - t0.tv_sec > ms / 1000 + 1)
			break; /* still streaming: not closed */
	}
	return c->eof;
}

struct seen {
	unsigned updates, full, batches;
	uint64_t a_task;
	uint64_t skipped;
};

/*
 * Reads frames until @want_updates updates and @want_batches event batches
 * were seen, for @ms at most in all (updates come every pass whatever
 * happens: a wait per frame would never end while batches do not come).
 */
static inline void tc_count(struct tclient *c, struct seen *s, int ms,
			    unsigned want_updates, unsigned want_batches)
{
	Weft__V1__Frame *f;
	struct timespec t0, t1;
	long left = ms;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((s->updates < want_updates || s->batches < want_batches) &&
	       left > 0 && (f = tc_next(c, (int)left)) != NULL) {
		if (f->body_case == WEFT__V1__FRAME__BODY_UPDATE) {
			s->updates++;
			s->full += f->update->full;
			if (f->update->updates_skipped > s->skipped)
				s->skipped = f->update->updates_skipped;
			for (size_t i = 0; i < f->update->n_tasks; i++)
				if (!strcmp(f->update->tasks[i]->name,
					    "yielder"))
					s->a_task = f->update->tasks[i]->id;
		} else if (f->body_case == WEFT__V1__FRAME__BODY_EVENTS) {
			s->batches++;
		}
		weft_wire_frame_free(f);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		left = ms - ((t1.tv_sec - t0.tv_sec) * 1000 +
			     (t1.tv_nsec - t0.tv_nsec) / 1000000);
	}
}

/* A TCP client of @srv, connected; nothing sent, the header not read. */
static inline void tc_open_tcp(struct tclient *c, weft_server_t *srv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	memset(c, 0, sizeof(*c));
	weft_wire_decoder_init(&c->dec, 0);
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c->fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)weft__server_tcp_port(srv));
	assert_int_equal(connect(c->fd, (void *)&sin, sizeof(sin)), 0);
}

/* Sends the Hello that carries @token (a TCP client's first record). */
static inline void tc_send_token(struct tclient *c, const char *token)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Hello h = WEFT__V1__HELLO__INIT;

	h.token = (char *)token;
	f.body_case = WEFT__V1__FRAME__BODY_HELLO;
	f.hello = &h;
	tc_send(c, &f);
}

/*
 * Whether the server closed @c within @ms having sent it nothing at all
 * (not a byte: what a peer without the token must get).
 */
static inline bool tc_closed_silent(struct tclient *c, int ms)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	char b;

	if (poll(&pfd, 1, ms) != 1)
		return false;
	return read(c->fd, &b, 1) == 0;
}

#endif /* WEFT_TEST_SERVER_HELPERS_H */
