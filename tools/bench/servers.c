/* SPDX-License-Identifier: MIT */
/*
 * weft-bench echo-server / http-server: the network servers of the anchor
 * benchmarks (anchors/tokio-bench `serve()`), in weft style: the acceptor
 * is a task on the workers, and every connection gets its own task, a
 * WEFT_ASYNC state machine over a weft_stream_t.
 *
 *   echo-server  reads up to 4 KiB and writes it back (write_all), until
 *                end of stream or an error: Tokio's echo_conn().
 *   http-server  hand-written HTTP/1.1 keep-alive: every request ends at
 *                "\r\n\r\n" (no bodies); each is answered with the same
 *                fixed 200 "Hello, World!" response, pipelined requests in
 *                order and with one write per read: Tokio's http_conn().
 *                A header that fills the 8 KiB buffer closes the
 *                connection.
 *
 * Both listen on 127.0.0.1:PORT, set TCP_NODELAY on every connection and
 * run until killed, on 2 workers unless --workers says otherwise (the
 * anchors run Tokio with 2).  An accept error is reported and retried
 * after 10 ms, as in the anchor.
 *
 * Exit status: 1 when the runtime or the listener cannot be set up; 2 for
 * a usage error.
 */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define ECHO_BUF 4096
#define HTTP_MAX_HEADER 8192
#define SERVER_WORKERS 2
#define SERVER_MAX_WORKERS 1024

static const char http_resp[] = "HTTP/1.1 200 OK\r\n"
				"Content-Type: text/plain\r\n"
				"Content-Length: 13\r\n"
				"\r\n"
				"Hello, World!";
#define HTTP_RESP_LEN (sizeof(http_resp) - 1)

/*
 * Responses are all the same bytes, so the answers to a batch of
 * pipelined requests are a prefix of this buffer: up to HTTP_RESP_BATCH
 * copies, built once before the server starts.
 */
#define HTTP_RESP_BATCH 64
static char http_resp_batch[HTTP_RESP_LEN * HTTP_RESP_BATCH];

/* ---------------------------------------------------------------- echo */

struct echo_conn {
	int weft_pc;
	weft_stream_t *s;
	ssize_t n;
	size_t done;
	int status;
	unsigned char buf[ECHO_BUF];
};

static weft_poll_t echo_conn_poll(void *arg, weft_cx_t *cx)
{
	struct echo_conn *c = arg;

	WEFT_ASYNC_BEGIN(c);
	for (;;) {
		WEFT_AWAIT(c, weft_stream_read(c->s, cx, c->buf, sizeof(c->buf),
					       &c->n));
		if (c->n <= 0)
			break;
		c->done = 0;
		WEFT_AWAIT(c,
			   weft_stream_write_all(c->s, cx, c->buf, (size_t)c->n,
						 &c->done, &c->status));
		if (c->status)
			break;
	}
	WEFT_ASYNC_END(c);
}

static void echo_conn_drop(void *arg)
{
	struct echo_conn *c = arg;

	weft_stream_close(c->s);
}

/* ---------------------------------------------------------------- http */

struct http_conn {
	int weft_pc;
	weft_stream_t *s;
	ssize_t n;
	size_t filled;  /* bytes of buf holding unanswered input */
	size_t pending; /* responses owed for the requests parsed */
	size_t batch;
	size_t done;
	int status;
	char buf[HTTP_MAX_HEADER];
};

/*
 * Consumes the complete requests at the start of the buffer (each ends at
 * "\r\n\r\n") and counts them as owed responses.
 * Return: false when a request header fills the whole buffer.
 */
static bool http_parse(struct http_conn *c)
{
	size_t start = 0;
	const char *end;

	while ((end = memmem(c->buf + start, c->filled - start, "\r\n\r\n",
			     4))) {
		start = (size_t)(end - c->buf) + 4;
		c->pending++;
	}
	if (start > 0) {
		memmove(c->buf, c->buf + start, c->filled - start);
		c->filled -= start;
	} else if (c->filled == sizeof(c->buf)) {
		return false;
	}
	return true;
}

static weft_poll_t http_conn_poll(void *arg, weft_cx_t *cx)
{
	struct http_conn *c = arg;

	WEFT_ASYNC_BEGIN(c);
	for (;;) {
		WEFT_AWAIT(c,
			   weft_stream_read(c->s, cx, c->buf + c->filled,
					    sizeof(c->buf) - c->filled, &c->n));
		if (c->n <= 0)
			break;
		c->filled += (size_t)c->n;
		if (!http_parse(c))
			break;
		/* One write per batch (one in all, unless > 64 pipelined). */
		while (c->pending > 0) {
			c->batch = c->pending < HTTP_RESP_BATCH ?
					   c->pending :
					   HTTP_RESP_BATCH;
			c->done = 0;
			WEFT_AWAIT(c, weft_stream_write_all(
					      c->s, cx, http_resp_batch,
					      c->batch * HTTP_RESP_LEN,
					      &c->done, &c->status));
			if (c->status)
				goto out;
			c->pending -= c->batch;
		}
	}
out:;
	WEFT_ASYNC_END(c);
}

static void http_conn_drop(void *arg)
{
	struct http_conn *c = arg;

	weft_stream_close(c->s);
}

/* ------------------------------------------------------------ acceptor */

struct acceptor {
	int weft_pc;
	weft_listener_t *l;
	bool http;
	weft_stream_t *s;
	int status;
	weft_sleep_t backoff;
};

/* Hands @s to a new connection task, or closes it. */
static void spawn_conn(struct acceptor *a, weft_stream_t *s)
{
	weft_spawn_t spec = {
		.name = a->http ? "http-conn" : "echo-conn",
		.file = __FILE__,
		.line = __LINE__,
	};
	struct echo_conn echo = { .s = s };
	struct http_conn http = { .s = s };
	int err;

	if (a->http) {
		spec.poll = http_conn_poll;
		spec.drop = http_conn_drop;
		spec.state = &http;
		spec.size = sizeof(http);
	} else {
		spec.poll = echo_conn_poll;
		spec.drop = echo_conn_drop;
		spec.state = &echo;
		spec.size = sizeof(echo);
	}
	/* Tokio's servers set it too (anchors: `s.set_nodelay(true)`). */
	weft_stream_set_nodelay(s, true);
	err = weft_spawn_with(NULL, &spec, NULL);
	if (err) {
		fprintf(stderr, "weft-bench: spawn: %s\n", strerror(-err));
		weft_stream_close(s);
	}
}

static weft_poll_t acceptor_poll(void *arg, weft_cx_t *cx)
{
	struct acceptor *a = arg;

	WEFT_ASYNC_BEGIN(a);
	for (;;) {
		WEFT_AWAIT(a,
			   weft_listener_accept(a->l, cx, &a->s, &a->status));
		if (a->status == 0) {
			spawn_conn(a, a->s);
			a->s = NULL;
			continue;
		}
		fprintf(stderr, "weft-bench: accept: %s\n",
			strerror(-a->status));
		if (a->status == -ESHUTDOWN)
			break;
		weft_sleep_init(&a->backoff, WEFT_MSEC(10));
		WEFT_AWAIT(a, weft_sleep_poll(&a->backoff, cx));
		weft_sleep_fini(&a->backoff);
	}
	WEFT_ASYNC_END(a);
}

static void acceptor_drop(void *arg)
{
	struct acceptor *a = arg;

	weft_sleep_fini(&a->backoff);
	weft_listener_close(a->l);
}

/* --------------------------------------------------------------- setup */

struct listen_state {
	const char *addr;
	weft_listener_t *l;
	int err;
};

/* Runs under weft_block_on() so that the listener binds to the runtime. */
static weft_poll_t listen_poll(void *arg, weft_cx_t *cx)
{
	struct listen_state *ls = arg;

	(void)cx;
	ls->err = weft_tcp_listen(ls->addr, 0, &ls->l);
	return WEFT_READY;
}

static void server_usage(FILE *f)
{
	fprintf(f,
		"usage: weft-bench echo-server PORT [--workers N]\n"
		"       weft-bench http-server PORT [--workers N]\n"
		"\n"
		"Serves on 127.0.0.1:PORT until killed, a task per connection:\n"
		"  echo-server  echoes every byte back\n"
		"  http-server  HTTP/1.1 keep-alive, \"Hello, World!\" to every request\n"
		"\n"
		"  --workers N  worker threads (default %d, as the anchors)\n"
		"\n"
		"exit status: 1 when the runtime or the listener cannot be set up;\n"
		"2 for a usage error\n",
		SERVER_WORKERS);
}

__attribute__((noreturn, format(printf, 1, 2))) static void
server_usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("weft-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static unsigned long parse_number(const char *what, const char *s,
				  unsigned long min, unsigned long max)
{
	unsigned long v;
	char *end;

	errno = 0;
	if (*s < '0' || *s > '9')
		goto out_bad;
	v = strtoul(s, &end, 10);
	if (errno || *end != '\0' || v < min || v > max)
		goto out_bad;
	return v;

out_bad:
	server_usage_error("bad %s: '%s' (want %lu..%lu)", what, s, min, max);
}

int bench_server_main(int argc, char **argv)
{
	weft_config_t config = { .workers = SERVER_WORKERS };
	struct listen_state ls = { 0 };
	struct acceptor a = { 0 };
	const char *port_arg = NULL;
	weft_runtime_t *rt;
	weft_join_t *join;
	char addr[32];
	int i, err;

	/* argv[0] is the subcommand. */
	a.http = strcmp(argv[0], "http-server") == 0;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			server_usage(stdout);
			exit(0);
		} else if (!strncmp(argv[i], "--workers=", 10)) {
			config.workers = (unsigned)parse_number(
				"--workers", argv[i] + 10, 1,
				SERVER_MAX_WORKERS);
		} else if (!strcmp(argv[i], "--workers")) {
			if (++i == argc)
				server_usage_error("--workers needs a value");
			config.workers = (unsigned)parse_number(
				"--workers", argv[i], 1, SERVER_MAX_WORKERS);
		} else if (argv[i][0] != '-' && !port_arg) {
			port_arg = argv[i];
		} else {
			server_usage_error(
				"unknown argument '%s' (see weft-bench %s --help)",
				argv[i], argv[0]);
		}
	}
	if (!port_arg)
		server_usage_error("%s needs a PORT (see weft-bench %s --help)",
				   argv[0], argv[0]);
	snprintf(addr, sizeof(addr), "127.0.0.1:%lu",
		 parse_number("PORT", port_arg, 1, 65535));
	for (i = 0; i < HTTP_RESP_BATCH; i++)
		memcpy(http_resp_batch + (size_t)i * HTTP_RESP_LEN, http_resp,
		       HTTP_RESP_LEN);

	err = weft_runtime_create(&config, &rt);
	if (err)
		bench_die("weft_runtime_create", err);
	ls.addr = addr;
	err = weft_block_on(rt, listen_poll, &ls, NULL);
	if (!err)
		err = ls.err;
	if (err) {
		fprintf(stderr, "weft-bench: listen on %s: %s\n", addr,
			strerror(-err));
		weft_runtime_destroy(rt);
		return 1;
	}
	fprintf(stderr, "weft %s listening on %s (%u workers)\n", argv[0], addr,
		weft_runtime_workers(rt));

	/* The accept loop runs as a task on the workers, as in the anchor. */
	a.l = ls.l;
	err = weft_spawn_with(rt,
			      &(weft_spawn_t){ .poll = acceptor_poll,
					       .drop = acceptor_drop,
					       .state = &a,
					       .size = sizeof(a),
					       .name = "acceptor",
					       .file = __FILE__,
					       .line = __LINE__ },
			      &join);
	if (err) {
		weft_listener_close(ls.l);
		weft_runtime_destroy(rt);
		bench_die("weft_spawn", err);
	}
	err = weft_join_wait(join, NULL);
	weft_join_drop(join);
	weft_runtime_destroy(rt);
	return err ? 1 : 0;
}
