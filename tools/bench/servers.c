/* SPDX-License-Identifier: MIT */
/*
 * weft-bench echo-server / http-server: the network servers of the anchor
 * benchmarks (anchors/tokio-bench `serve()`), in weft style: the acceptor
 * is a task on the workers, and every connection gets its own task, a
 * WEFT_ASYNC state machine over a weft_stream_t.
 *
 *   echo-server  reads up to 4 KiB and writes it back (write_all), until
 *                end of stream or an error: Tokio's echo_conn().
 *   http-server  HTTP/1.1 keep-alive: the requests are framed by the
 *                tools' parser (tools/net/http_parse.c; a Content-Length
 *                body is skipped); each is answered with the same fixed
 *                200 "Hello, World!" response, pipelined requests in order
 *                and with one write per read: Tokio's http_conn().  A
 *                malformed request, or a head that fills the 8 KiB
 *                buffer, closes the connection.
 *
 * Both listen on 127.0.0.1:PORT, set TCP_NODELAY on every connection and
 * run until killed, on 2 workers unless --workers says otherwise (the
 * anchors run Tokio with 2).  The listener and the acceptor are the
 * tools' (tools/net/tcp_listen.c): an accept error is reported and
 * retried after 10 ms, as in the anchor.
 *
 * Exit status: 1 when the runtime or the listener cannot be set up; 2 for
 * a usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "http_hello.h"
#include "http_parse.h"
#include "tcp_listen.h"
#include "tool_util.h"

#define ECHO_BUF 4096
#define HTTP_MAX_HEADER 8192
#define SERVER_WORKERS 2
#define SERVER_MAX_WORKERS 1024

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
 * Consumes the complete requests at the start of the buffer (blank lines
 * before one are skipped, RFC 9112 2.2) and counts them as owed responses.
 * Return: false for a malformed request, or when a request fills the
 * whole buffer.
 */
static bool http_frame(struct http_conn *c)
{
	http_request_t req;
	size_t start = 0, left;

	for (;;) {
		while (c->filled - start >= 2 && c->buf[start] == '\r' &&
		       c->buf[start + 1] == '\n')
			start += 2;
		left = c->filled - start;
		if (left == 0 || http_parse_request(c->buf + start, left,
						    &req) == HTTP_PARSE_MORE)
			break;
		if (req.error)
			return false;
		if (req.body_len > left - req.head_len)
			break; /* its body is still coming */
		start += req.head_len + req.body_len;
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
		if (!http_frame(c))
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

/* ---------------------------------------------------------- connections */

static void conn_spawn(weft_stream_t *s, weft_spawn_t *spec)
{
	int err;

	spec->file = __FILE__;
	spec->line = __LINE__;
	err = weft_spawn_with(NULL, spec, NULL);
	if (err) {
		fprintf(stderr, "weft-bench: spawn: %s\n", strerror(-err));
		weft_stream_close(s);
	}
}

/* tcp_conn_fn of echo-server: a task per connection. */
static void echo_conn_spawn(weft_stream_t *s, void *arg)
{
	struct echo_conn c = { .s = s };

	(void)arg;
	conn_spawn(s, &(weft_spawn_t){ .poll = echo_conn_poll,
				       .drop = echo_conn_drop,
				       .state = &c,
				       .size = sizeof(c),
				       .name = "echo-conn" });
}

/* tcp_conn_fn of http-server. */
static void http_conn_spawn(weft_stream_t *s, void *arg)
{
	struct http_conn c = { .s = s };

	(void)arg;
	conn_spawn(s, &(weft_spawn_t){ .poll = http_conn_poll,
				       .drop = http_conn_drop,
				       .state = &c,
				       .size = sizeof(c),
				       .name = "http-conn" });
}

/* --------------------------------------------------------------- setup */

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

#define server_usage_error(...) tool_die(2, "weft-bench", __VA_ARGS__)

static unsigned long parse_number(const char *what, const char *s,
				  unsigned long min, unsigned long max)
{
	unsigned long v;

	if (!tool_parse_ulong(s, min, max, &v))
		server_usage_error("bad %s: '%s' (want %lu..%lu)", what, s, min,
				   max);
	return v;
}

int bench_server_main(int argc, char **argv)
{
	weft_config_t config = { .workers = SERVER_WORKERS };
	/* argv[0] is the subcommand. */
	struct tcp_acceptor_spec a = {
		.prog = "weft-bench",
		.on_conn = strcmp(argv[0], "http-server") ? echo_conn_spawn :
							    http_conn_spawn,
	};
	const char *port_arg = NULL, *v;
	weft_runtime_t *rt;
	weft_join_t *join;
	char addr[32];
	int i, r, err;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			server_usage(stdout);
			exit(0);
		} else if ((r = tool_opt_value(argc, argv, &i, "--workers",
					       &v))) {
			if (r < 0)
				server_usage_error("--workers needs a value");
			config.workers = (unsigned)parse_number(
				"--workers", v, 1, SERVER_MAX_WORKERS);
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
	err = tcp_listen(rt, addr, &a.l);
	if (err) {
		fprintf(stderr, "weft-bench: listen on %s: %s\n", addr,
			strerror(-err));
		weft_runtime_destroy(rt);
		return 1;
	}
	fprintf(stderr, "weft %s listening on %s (%u workers)\n", argv[0], addr,
		weft_runtime_workers(rt));

	/* The accept loop runs as a task on the workers, as in the anchor. */
	err = tcp_acceptor_spawn(rt, &a, &join);
	if (err) {
		weft_runtime_destroy(rt);
		bench_die("weft_spawn", err);
	}
	err = weft_join_wait(join, NULL);
	weft_join_drop(join);
	weft_runtime_destroy(rt);
	return err ? 1 : 0;
}
