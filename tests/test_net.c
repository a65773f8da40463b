/* SPDX-License-Identifier: MIT */
/*
 * Networking (net.c): TCP, UDP and Unix sockets over the driver, on
 * loopback only.  Public API only.
 *
 * Servers and clients are tasks written as WEFT_ASYNC state machines;
 * short sequential flows run in weft_block_on() on the test's thread with
 * the runtime current, so that objects bind to it.  Tasks record what went
 * wrong in atomics (the first failure's line and error) and the test thread
 * asserts afterwards.  A lost wake-up shows up as the ctest TIMEOUT.
 *
 * Every object is closed by the task that owns it (in its drop callback,
 * so cancellation at shutdown closes it too) or by the test thread once
 * the tasks using it have finished.
 */
#include <dirent.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test_helpers.h"

/* ------------------------------------------------------------- helpers */

/* The first failure seen by a task: where, and the error. */
struct failure {
	_Atomic unsigned count;
	_Atomic int line;
	_Atomic int err;
};

static void fail_at(struct failure *f, int line, long err)
{
	int zero = 0;

	if (atomic_compare_exchange_strong(&f->line, &zero, line))
		atomic_store(&f->err, (int)err);
	atomic_fetch_add(&f->count, 1);
}

#define FAIL(f, err) fail_at((f), __LINE__, (err))

static void assert_no_failure(struct failure *f)
{
	if (atomic_load(&f->count))
		print_error("%u failures, first at line %d: error %d (%s)\n",
			    atomic_load(&f->count), atomic_load(&f->line),
			    atomic_load(&f->err),
			    strerror(-atomic_load(&f->err)));
	assert_int_equal(atomic_load(&f->count), 0);
}

static void block_on_ok(weft_runtime_t *rt, weft_poll_cb poll, void *state)
{
	assert_int_equal(weft_block_on(rt, poll, state, NULL), 0);
}

/* Spawns a detached task from a task; its drop callback owns its state. */
static int spawn_detached(weft_poll_cb poll, weft_drop_cb drop,
			  const void *state, size_t size)
{
	weft_spawn_t spec = {
		.poll = poll,
		.drop = drop,
		.state = state,
		.size = size,
		.name = "net-test",
		.file = __FILE__,
		.line = __LINE__,
	};

	return weft_spawn_with(NULL, &spec, NULL);
}

static void pattern(unsigned char *buf, size_t len, unsigned id, unsigned round)
{
	for (size_t j = 0; j < len; j++)
		buf[j] = (unsigned char)(id * 131u + round * 31u +
					 (unsigned)j * 7u + 1u);
}

static unsigned count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n; /* includes ".", ".." and the DIR's own fd: compare only */
}

static void tcp_addr(char *buf, size_t size, uint16_t port)
{
	snprintf(buf, size, "127.0.0.1:%u", port);
}

/* -------------------------------------------------- listener in block_on */

struct listen_fut {
	const char *addr; /* TCP address, or Unix path when is_unix */
	bool is_unix;
	weft_listener_t *l;
	int err;
};

static weft_poll_t listen_poll(void *arg, weft_cx_t *cx)
{
	struct listen_fut *f = arg;

	(void)cx;
	f->err = f->is_unix ? weft_unix_listen(f->addr, 0, &f->l) :
			      weft_tcp_listen(f->addr, 0, &f->l);
	return WEFT_READY;
}

static weft_listener_t *listen_ok(weft_runtime_t *rt, const char *addr,
				  bool is_unix)
{
	struct listen_fut f = { .addr = addr, .is_unix = is_unix };

	block_on_ok(rt, listen_poll, &f);
	assert_int_equal(f.err, 0);
	assert_non_null(f.l);
	return f.l;
}

/* ------------------------------------------- a connected pair in block_on */

struct pair_fut {
	int weft_pc;
	weft_listener_t *l;
	weft_connect_t conn;
	weft_stream_t *c;
	weft_stream_t *s;
	int err;
	int line;
};

static weft_poll_t pair_poll(void *arg, weft_cx_t *cx)
{
	struct pair_fut *p = arg;
	char addr[64];
	uint16_t port;

	WEFT_ASYNC_BEGIN(p);
	p->err = weft_tcp_listen("127.0.0.1:0", 0, &p->l);
	if (p->err)
		goto out_line;
	p->err = weft_listener_local_port(p->l, &port);
	if (p->err)
		goto out_line;
	tcp_addr(addr, sizeof(addr), port);
	p->err = weft_tcp_connect_init(&p->conn, addr);
	if (p->err)
		goto out_line;
	WEFT_AWAIT(p, weft_connect_poll(&p->conn, cx, &p->c, &p->err));
	if (p->err)
		goto out_line;
	WEFT_AWAIT(p, weft_listener_accept(p->l, cx, &p->s, &p->err));
	if (p->err)
		goto out_line;
	goto out;
out_line:
	p->line = __LINE__;
out:
	weft_connect_fini(&p->conn);
	weft_listener_close(p->l);
	p->l = NULL;
	WEFT_ASYNC_END(p);
}

/* A connected TCP pair on @rt: *c the connecting end, *s the accepted. */
static void pair_ok(weft_runtime_t *rt, weft_stream_t **c, weft_stream_t **s)
{
	struct pair_fut p = { 0 };

	block_on_ok(rt, pair_poll, &p);
	if (p.err)
		print_error("pair: %s\n", strerror(-p.err));
	assert_int_equal(p.err, 0);
	*c = p.c;
	*s = p.s;
}

/* One read or write in block_on. */
struct io_fut {
	weft_stream_t *s;
	bool write;
	void *buf;
	size_t len;
	ssize_t n;
};

static weft_poll_t io_poll(void *arg, weft_cx_t *cx)
{
	struct io_fut *f = arg;

	return f->write ? weft_stream_write(f->s, cx, f->buf, f->len, &f->n) :
			  weft_stream_read(f->s, cx, f->buf, f->len, &f->n);
}

static ssize_t read_once(weft_runtime_t *rt, weft_stream_t *s, void *buf,
			 size_t len)
{
	struct io_fut f = { .s = s, .buf = buf, .len = len };

	block_on_ok(rt, io_poll, &f);
	return f.n;
}

static ssize_t write_once(weft_runtime_t *rt, weft_stream_t *s, const void *buf,
			  size_t len)
{
	struct io_fut f = {
		.s = s, .write = true, .buf = (void *)buf, .len = len
	};

	block_on_ok(rt, io_poll, &f);
	return f.n;
}

/* --------------------------------------------------------- echo server */

#define ECHO_BUF 4096

/* One connection: echo until end of stream or error. */
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
	struct echo_conn *e = arg;

	WEFT_ASYNC_BEGIN(e);
	for (;;) {
		WEFT_AWAIT(e, weft_stream_read(e->s, cx, e->buf, sizeof(e->buf),
					       &e->n));
		if (e->n <= 0)
			break;
		e->done = 0;
		WEFT_AWAIT(e,
			   weft_stream_write_all(e->s, cx, e->buf, (size_t)e->n,
						 &e->done, &e->status));
		if (e->status)
			break;
	}
	WEFT_ASYNC_END(e);
}

static void echo_conn_drop(void *arg)
{
	struct echo_conn *e = arg;

	weft_stream_close(e->s);
}

/*
 * Accepts @want connections; echoes on each in its own task, or closes it
 * at once (close_accepted).  Owns the listener.  Output: the count.
 */
struct acceptor {
	int weft_pc;
	weft_listener_t *l;
	unsigned want;
	unsigned got;
	bool close_accepted;
	weft_stream_t *s;
	int status;
	struct failure *f;
};

static weft_poll_t acceptor_poll(void *arg, weft_cx_t *cx)
{
	struct acceptor *a = arg;
	struct echo_conn e = { 0 };
	int err;

	WEFT_ASYNC_BEGIN(a);
	while (a->got < a->want) {
		WEFT_AWAIT(a,
			   weft_listener_accept(a->l, cx, &a->s, &a->status));
		if (a->status) {
			FAIL(a->f, a->status);
			break;
		}
		a->got++;
		if (a->close_accepted) {
			weft_stream_close(a->s);
		} else {
			e.s = a->s;
			err = spawn_detached(echo_conn_poll, echo_conn_drop, &e,
					     sizeof(e));
			if (err) {
				FAIL(a->f, err);
				weft_stream_close(a->s);
			}
		}
		a->s = NULL;
	}
	weft_cx_return(cx, (void *)(uintptr_t)a->got);
	WEFT_ASYNC_END(a);
}

static void acceptor_drop(void *arg)
{
	struct acceptor *a = arg;

	weft_listener_close(a->l);
}

static weft_join_t *spawn_acceptor(weft_runtime_t *rt, weft_listener_t *l,
				   unsigned want, bool close_accepted,
				   struct failure *f)
{
	struct acceptor a = {
		.l = l, .want = want, .close_accepted = close_accepted, .f = f
	};

	return spawn_ok(rt, acceptor_poll, acceptor_drop, &a, sizeof(a), true);
}

/* --------------------------------------------------------- echo clients */

#define ECHO_MAX 2048

struct echo_test {
	char addr[108];
	bool is_unix;
	unsigned rounds;
	_Atomic unsigned ok;
	struct failure f;
	tcount_t done;
};

/* Connects, then @rounds lock-step round trips with exact byte checks. */
struct echo_client {
	int weft_pc;
	struct echo_test *t;
	unsigned id;
	unsigned round;
	weft_connect_t conn;
	weft_stream_t *s;
	int status;
	ssize_t n;
	size_t len;
	size_t done;
	unsigned char out[ECHO_MAX];
	unsigned char in[ECHO_MAX];
};

static weft_poll_t echo_client_poll(void *arg, weft_cx_t *cx)
{
	struct echo_client *c = arg;
	struct echo_test *t = c->t;
	int err;

	WEFT_ASYNC_BEGIN(c);
	err = t->is_unix ? weft_unix_connect_init(&c->conn, t->addr) :
			   weft_tcp_connect_init(&c->conn, t->addr);
	if (err) {
		FAIL(&t->f, err);
		goto out;
	}
	WEFT_AWAIT(c, weft_connect_poll(&c->conn, cx, &c->s, &c->status));
	if (c->status) {
		FAIL(&t->f, c->status);
		goto out;
	}
	for (c->round = 0; c->round < t->rounds; c->round++) {
		c->len = 1 + (c->id * 37u + c->round * 501u) % ECHO_MAX;
		pattern(c->out, c->len, c->id, c->round);
		c->done = 0;
		WEFT_AWAIT(c, weft_stream_write_all(c->s, cx, c->out, c->len,
						    &c->done, &c->status));
		if (c->status) {
			FAIL(&t->f, c->status);
			goto out;
		}
		for (c->done = 0; c->done < c->len; c->done += (size_t)c->n) {
			WEFT_AWAIT(c,
				   weft_stream_read(c->s, cx, c->in + c->done,
						    c->len - c->done, &c->n));
			if (c->n <= 0) {
				FAIL(&t->f, c->n ? c->n : -ENODATA);
				goto out;
			}
		}
		if (memcmp(c->in, c->out, c->len)) {
			FAIL(&t->f, -EBADMSG);
			goto out;
		}
	}
	atomic_fetch_add(&t->ok, 1);
out:
	weft_connect_fini(&c->conn);
	weft_stream_close(c->s);
	c->s = NULL;
	tcount_add(&t->done, 1);
	WEFT_ASYNC_END(c);
}

static void echo_client_drop(void *arg)
{
	struct echo_client *c = arg;

	weft_connect_fini(&c->conn);
	weft_stream_close(c->s);
}

/* Runs @clients echo clients against an echo server on @l. */
static void run_echo(weft_runtime_t *rt, weft_listener_t *l,
		     struct echo_test *t, unsigned clients)
{
	weft_join_t *acc;
	void *got = NULL;

	tcount_init(&t->done);
	acc = spawn_acceptor(rt, l, clients, false, &t->f);
	for (unsigned i = 0; i < clients; i++) {
		struct echo_client c = { .t = t, .id = i };

		spawn_ok(rt, echo_client_poll, echo_client_drop, &c, sizeof(c),
			 false);
	}
	tcount_wait(&t->done, clients);
	assert_no_failure(&t->f);
	assert_int_equal(atomic_load(&t->ok), clients);
	assert_int_equal(join_wait_drop(acc, &got), 0);
	assert_int_equal((uintptr_t)got, clients);
	tcount_fini(&t->done);
}

/* ------------------------------------------------------------------ tests */

static void test_net_addr_parse(void **state)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	static const char *const bad[] = {
		"",
		"127.0.0.1",
		"127.0.0.1:",
		":80",
		"1.2.3:80",
		"127.0.0.1:65536",
		"127.0.0.1:8x",
		"::1:80",
		"[::1]",
		"[::1]80",
		"[::1:80",
		"[]:80",
		"localhost:80",
		"127.0.0.1:123456",
	};
	socklen_t len;

	(void)state;
	assert_int_equal(weft_addr_parse("127.0.0.1:8080", &ss, &len), 0);
	assert_int_equal(len, sizeof(struct sockaddr_in));
	assert_int_equal(sin->sin_family, AF_INET);
	assert_int_equal(ntohs(sin->sin_port), 8080);
	assert_int_equal(ntohl(sin->sin_addr.s_addr), 0x7f000001);
	assert_int_equal(weft_addr_parse("[::1]:0", &ss, &len), 0);
	assert_int_equal(len, sizeof(struct sockaddr_in6));
	assert_int_equal(sin6->sin6_family, AF_INET6);
	assert_int_equal(ntohs(sin6->sin6_port), 0);
	assert_memory_equal(&sin6->sin6_addr, &in6addr_loopback,
			    sizeof(in6addr_loopback));
	assert_int_equal(weft_addr_parse("0.0.0.0:65535", &ss, &len), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(weft_addr_parse(bad[i], &ss, &len), -EINVAL);
}

static void test_net_needs_runtime(void **state)
{
	weft_listener_t *l = NULL;
	weft_udp_t *u = NULL;
	weft_connect_t c;

	(void)state;
	assert_null(weft_runtime_current());
	assert_int_equal(weft_tcp_listen("127.0.0.1:0", 0, &l), -EINVAL);
	assert_int_equal(weft_unix_listen("@weft-test-none", 0, &l), -EINVAL);
	assert_int_equal(weft_udp_bind("127.0.0.1:0", &u), -EINVAL);
	assert_int_equal(weft_tcp_connect_init(&c, "127.0.0.1:1"), -EINVAL);
	weft_connect_fini(&c);
	assert_null(l);
	assert_null(u);
}

#define ECHO_CLIENTS 200
#define ECHO_ROUNDS 8

static void test_net_tcp_echo_200_clients(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct echo_test t = { .rounds = ECHO_ROUNDS };
	weft_listener_t *l = listen_ok(rt, "127.0.0.1:0", false);
	uint16_t port = 0;

	(void)state;
	assert_int_equal(weft_listener_local_port(l, &port), 0);
	assert_true(port != 0);
	tcp_addr(t.addr, sizeof(t.addr), port);
	run_echo(rt, l, &t, ECHO_CLIENTS);
	{
		weft_runtime_metrics_t m;

		/* 200 clients' connects and reads went through the driver. */
		assert_int_equal(weft_runtime_metrics(rt, &m), 0);
		assert_true(m.io_events >= ECHO_CLIENTS);
	}
	weft_runtime_destroy(rt);
}

static void test_net_unix_echo(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct echo_test t = { .rounds = ECHO_ROUNDS, .is_unix = true };
	struct echo_test ta = { .rounds = ECHO_ROUNDS, .is_unix = true };
	weft_listener_t *l;
	uint16_t port;

	(void)state;
	/* A path in the file system... */
	snprintf(t.addr, sizeof(t.addr), "/tmp/weft-test-net-%d.sock",
		 (int)getpid());
	unlink(t.addr);
	l = listen_ok(rt, t.addr, true);
	assert_int_equal(weft_listener_local_port(l, &port), -EAFNOSUPPORT);
	run_echo(rt, l, &t, 20);
	assert_int_equal(unlink(t.addr), 0);

	/* ...and in the abstract namespace. */
	snprintf(ta.addr, sizeof(ta.addr), "@weft-test-net-%d", (int)getpid());
	l = listen_ok(rt, ta.addr, true);
	run_echo(rt, l, &ta, 20);
	weft_runtime_destroy(rt);
}

/* Server side of the half-close test: read to EOF, answer, close. */
struct half_server {
	int weft_pc;
	weft_stream_t *s;
	ssize_t n;
	size_t have;
	size_t done;
	int status;
	struct failure *f;
	char buf[256];
};

static weft_poll_t half_server_poll(void *arg, weft_cx_t *cx)
{
	struct half_server *h = arg;

	WEFT_ASYNC_BEGIN(h);
	memcpy(h->buf, "echo:", 5);
	h->have = 5;
	for (;;) {
		WEFT_AWAIT(h,
			   weft_stream_read(h->s, cx, h->buf + h->have,
					    sizeof(h->buf) - h->have, &h->n));
		if (h->n < 0) {
			FAIL(h->f, h->n);
			goto out;
		}
		if (h->n == 0)
			break;
		h->have += (size_t)h->n;
	}
	/* Our write half is still open although the peer's is shut. */
	WEFT_AWAIT(h, weft_stream_write_all(h->s, cx, h->buf, h->have, &h->done,
					    &h->status));
	if (h->status)
		FAIL(h->f, h->status);
out:
	weft_stream_close(h->s);
	h->s = NULL;
	WEFT_ASYNC_END(h);
}

static void half_server_drop(void *arg)
{
	weft_stream_close(((struct half_server *)arg)->s);
}

struct half_client {
	int weft_pc;
	weft_stream_t *c;
	size_t done;
	int status;
	ssize_t n;
	size_t have;
	int shut;
	ssize_t write_after_shut;
	char buf[256];
};

static weft_poll_t half_client_poll(void *arg, weft_cx_t *cx)
{
	struct half_client *h = arg;

	WEFT_ASYNC_BEGIN(h);
	WEFT_AWAIT(h, weft_stream_write_all(h->c, cx, "hello half-close", 16,
					    &h->done, &h->status));
	if (h->status)
		goto out;
	h->shut = weft_stream_shutdown(h->c, SHUT_WR);
	WEFT_AWAIT(h,
		   weft_stream_write(h->c, cx, "x", 1, &h->write_after_shut));
	for (;;) {
		WEFT_AWAIT(h, weft_stream_read(h->c, cx, h->buf + h->have,
					       sizeof(h->buf) - 1 - h->have,
					       &h->n));
		if (h->n <= 0)
			break;
		h->have += (size_t)h->n;
	}
	h->buf[h->have] = '\0';
out:;
	WEFT_ASYNC_END(h);
}

static void test_net_half_close(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct failure f = { 0 };
	struct half_server hs = { .f = &f };
	struct half_client hc = { 0 };
	weft_stream_t *c, *s;
	weft_join_t *srv;

	(void)state;
	pair_ok(rt, &c, &s);
	hs.s = s;
	srv = spawn_ok(rt, half_server_poll, half_server_drop, &hs, sizeof(hs),
		       true);
	hc.c = c;
	block_on_ok(rt, half_client_poll, &hc);
	assert_int_equal(hc.status, 0);
	assert_int_equal(hc.shut, 0);
	assert_int_equal(hc.write_after_shut, -EPIPE);
	assert_int_equal(hc.n, 0); /* EOF after the answer */
	assert_string_equal(hc.buf, "echo:hello half-close");
	assert_int_equal(join_wait_drop(srv, NULL), 0);
	assert_no_failure(&f);
	/* Still EOF when read again. */
	assert_int_equal(read_once(rt, c, hc.buf, sizeof(hc.buf)), 0);
	weft_stream_close(c);
	weft_runtime_destroy(rt);
}

static void test_net_eof(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	weft_stream_t *c, *s;
	char buf[16];

	(void)state;
	pair_ok(rt, &c, &s);
	assert_int_equal(write_once(rt, s, "bye", 3), 3);
	weft_stream_close(s);
	assert_int_equal(read_once(rt, c, buf, sizeof(buf)), 3);
	assert_memory_equal(buf, "bye", 3);
	assert_int_equal(read_once(rt, c, buf, sizeof(buf)), 0);
	assert_int_equal(read_once(rt, c, buf, sizeof(buf)), 0);
	assert_int_equal(read_once(rt, c, buf, 0), 0);
	weft_stream_close(c);
	weft_runtime_destroy(rt);
}

/* Awaits one read on a stream it does not own; records the result. */
struct reader_once {
	weft_stream_t *s;
	tcount_t *polled;
	ssize_t *result;
	char buf[64];
};

static weft_poll_t reader_once_poll(void *arg, weft_cx_t *cx)
{
	struct reader_once *r = arg;
	weft_poll_t p =
		weft_stream_read(r->s, cx, r->buf, sizeof(r->buf), r->result);

	tcount_add(r->polled, 1);
	return p;
}

static void test_net_peer_reset(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	weft_stream_t *c, *s;
	ssize_t result = 1, n;
	tcount_t polled;
	struct reader_once r;
	weft_join_t *j;

	(void)state;
	tcount_init(&polled);
	pair_ok(rt, &c, &s);
	r = (struct reader_once){ .s = c,
				  .polled = &polled,
				  .result = &result };
	j = spawn_ok(rt, reader_once_poll, NULL, &r, sizeof(r), true);
	tcount_wait(&polled, 1); /* usually pending in its read by now */
	assert_true(weft_stream_fd(s) >= 0);
	assert_int_equal(setsockopt(weft_stream_fd(s), SOL_SOCKET, SO_LINGER,
				    &lg, sizeof(lg)),
			 0);
	weft_stream_close(s); /* sends RST */
	assert_int_equal(join_wait_drop(j, NULL), 0);
	assert_true(result == -ECONNRESET || result == 0);
	/* Writing to a reset connection fails without SIGPIPE. */
	n = write_once(rt, c, "x", 1);
	assert_true(n == -EPIPE || n == -ECONNRESET);
	n = write_once(rt, c, "x", 1);
	assert_true(n == -EPIPE || n == -ECONNRESET);
	n = read_once(rt, c, r.buf, sizeof(r.buf));
	assert_true(n == 0 || n == -ECONNRESET);
	weft_stream_close(c);
	weft_runtime_destroy(rt);
	tcount_fini(&polled);
}

/* ------------------------------------------------------------ accept storm */

#define STORM 1000

struct storm {
	_Atomic unsigned ok;
	struct failure f;
	tcount_t done;
	char addr[64];
};

struct storm_client {
	int weft_pc;
	struct storm *t;
	weft_connect_t conn;
	weft_stream_t *s;
	int status;
};

static weft_poll_t storm_client_poll(void *arg, weft_cx_t *cx)
{
	struct storm_client *c = arg;
	int err;

	WEFT_ASYNC_BEGIN(c);
	err = weft_tcp_connect_init(&c->conn, c->t->addr);
	if (err) {
		FAIL(&c->t->f, err);
		goto out;
	}
	WEFT_AWAIT(c, weft_connect_poll(&c->conn, cx, &c->s, &c->status));
	if (c->status)
		FAIL(&c->t->f, c->status);
	else
		atomic_fetch_add(&c->t->ok, 1);
out:
	weft_connect_fini(&c->conn);
	weft_stream_close(c->s);
	c->s = NULL;
	tcount_add(&c->t->done, 1);
	WEFT_ASYNC_END(c);
}

static void storm_client_drop(void *arg)
{
	struct storm_client *c = arg;

	weft_connect_fini(&c->conn);
	weft_stream_close(c->s);
}

static void test_net_accept_storm(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	weft_listener_t *l = listen_ok(rt, "127.0.0.1:0", false);
	struct storm t = { 0 };
	struct failure af = { 0 };
	weft_join_t *acc;
	uint16_t port;
	void *got = NULL;

	(void)state;
	tcount_init(&t.done);
	assert_int_equal(weft_listener_local_port(l, &port), 0);
	tcp_addr(t.addr, sizeof(t.addr), port);
	acc = spawn_acceptor(rt, l, STORM, true, &af);
	for (unsigned i = 0; i < STORM; i++) {
		struct storm_client c = { .t = &t };

		spawn_ok(rt, storm_client_poll, storm_client_drop, &c,
			 sizeof(c), false);
	}
	tcount_wait(&t.done, STORM);
	assert_no_failure(&t.f);
	assert_int_equal(atomic_load(&t.ok), STORM);
	assert_int_equal(join_wait_drop(acc, &got), 0);
	assert_no_failure(&af);
	assert_int_equal((uintptr_t)got, STORM);
	weft_runtime_destroy(rt);
	tcount_fini(&t.done);
}

/* -------------------------------------------------------- large transfer */

#define XFER_CHUNK (256u << 10)
#define XFER_RBUF (64u << 10)

static unsigned char xfer_byte(uint64_t off, unsigned seed)
{
	return (unsigned char)(((off * 2654435761u) >> 11) ^ seed ^ off);
}

/* Writes @total pattern bytes in write_all chunks, then shuts down. */
struct xfer_writer {
	int weft_pc;
	weft_stream_t *s;
	unsigned char *buf; /* XFER_CHUNK bytes, the test's */
	size_t total;
	size_t sent;
	size_t chunk;
	size_t done;
	unsigned seed;
	int status;
	struct failure *f;
};

static weft_poll_t xfer_writer_poll(void *arg, weft_cx_t *cx)
{
	struct xfer_writer *w = arg;

	WEFT_ASYNC_BEGIN(w);
	while (w->sent < w->total) {
		w->chunk = w->total - w->sent < XFER_CHUNK ?
				   w->total - w->sent :
				   XFER_CHUNK;
		for (size_t j = 0; j < w->chunk; j++)
			w->buf[j] = xfer_byte(w->sent + j, w->seed);
		w->done = 0;
		WEFT_AWAIT(w, weft_stream_write_all(w->s, cx, w->buf, w->chunk,
						    &w->done, &w->status));
		if (w->status) {
			FAIL(w->f, w->status);
			goto out;
		}
		w->sent += w->chunk;
	}
	w->status = weft_stream_shutdown(w->s, SHUT_WR);
	if (w->status)
		FAIL(w->f, w->status);
out:;
	WEFT_ASYNC_END(w);
}

/* Reads to EOF, checking every byte; output: the byte count. */
struct xfer_reader {
	int weft_pc;
	weft_stream_t *s;
	unsigned char *buf; /* XFER_RBUF bytes, the test's */
	size_t got;
	ssize_t n;
	unsigned seed;
	struct failure *f;
};

static weft_poll_t xfer_reader_poll(void *arg, weft_cx_t *cx)
{
	struct xfer_reader *r = arg;

	WEFT_ASYNC_BEGIN(r);
	for (;;) {
		WEFT_AWAIT(r, weft_stream_read(r->s, cx, r->buf, XFER_RBUF,
					       &r->n));
		if (r->n < 0) {
			FAIL(r->f, r->n);
			break;
		}
		if (r->n == 0)
			break;
		for (ssize_t j = 0; j < r->n; j++) {
			if (r->buf[j] !=
			    xfer_byte(r->got + (size_t)j, r->seed)) {
				FAIL(r->f, -EBADMSG);
				goto out;
			}
		}
		r->got += (size_t)r->n;
	}
out:
	weft_cx_return(cx, (void *)(uintptr_t)r->got);
	WEFT_ASYNC_END(r);
}

static void test_net_large_transfer(void **state)
{
	const size_t total = (size_t)8 << 20;
	weft_runtime_t *rt = rt_create(2);
	struct failure f = { 0 };
	weft_stream_t *ends[2];
	unsigned char *wbuf[2], *rbuf[2];
	weft_join_t *joins[4];
	void *got;

	(void)state;
	pair_ok(rt, &ends[0], &ends[1]);
	/* Each end: one writer task and one reader task, concurrently. */
	for (int i = 0; i < 2; i++) {
		struct xfer_writer w = { .s = ends[i],
					 .total = total + (size_t)i * 4099,
					 .seed = 0x11u * (unsigned)(i + 1),
					 .f = &f };
		struct xfer_reader r = { .s = ends[i],
					 .seed = 0x11u * (unsigned)(2 - i),
					 .f = &f };

		wbuf[i] = malloc(XFER_CHUNK);
		rbuf[i] = malloc(XFER_RBUF);
		assert_non_null(wbuf[i]);
		assert_non_null(rbuf[i]);
		w.buf = wbuf[i];
		r.buf = rbuf[i];
		joins[2 * i] = spawn_ok(rt, xfer_writer_poll, NULL, &w,
					sizeof(w), true);
		joins[2 * i + 1] = spawn_ok(rt, xfer_reader_poll, NULL, &r,
					    sizeof(r), true);
	}
	for (int i = 0; i < 4; i++) {
		got = NULL;
		assert_int_equal(join_wait_drop(joins[i], &got), 0);
		/* Reader on end 0 gets what end 1 wrote, and vice versa. */
		if (i == 1)
			assert_int_equal((uintptr_t)got, total + 4099);
		if (i == 3)
			assert_int_equal((uintptr_t)got, total);
	}
	assert_no_failure(&f);
	for (int i = 0; i < 2; i++) {
		weft_stream_close(ends[i]);
		free(wbuf[i]);
		free(rbuf[i]);
	}
	weft_runtime_destroy(rt);
}

/* ------------------------------------------------------------------- UDP */

struct udp_fut {
	int weft_pc;
	const char *bind_addr;
	weft_udp_t *a;
	weft_udp_t *b;
	uint16_t aport;
	uint16_t bport;
	struct sockaddr_storage to;
	socklen_t tolen;
	struct sockaddr_storage from;
	socklen_t fromlen;
	ssize_t n;
	char buf[64];
	char baddr[64];
	int err;
	int line;
};

#define UDP_CHECK(u, cond, e)                                                  \
	do {                                                                   \
		if (!(cond)) {                                                 \
			(u)->err = (e) ? (int)(e) : -EPROTO;                   \
			(u)->line = __LINE__;                                  \
			goto out;                                              \
		}                                                              \
	} while (0)

static uint16_t port_of_ss(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ?
		       ntohs(((const struct sockaddr_in *)ss)->sin_port) :
		       ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

static weft_poll_t udp_poll(void *arg, weft_cx_t *cx)
{
	struct udp_fut *u = arg;
	int err;

	WEFT_ASYNC_BEGIN(u);
	err = weft_udp_bind(u->bind_addr, &u->a);
	if (err == -EADDRNOTAVAIL || err == -EAFNOSUPPORT) {
		u->err = err; /* no IPv6 here: the caller skips */
		goto out;
	}
	UDP_CHECK(u, err == 0, err);
	err = weft_udp_bind(u->bind_addr, &u->b);
	UDP_CHECK(u, err == 0, err);
	err = weft_udp_local_port(u->a, &u->aport);
	UDP_CHECK(u, err == 0 && u->aport, err);
	err = weft_udp_local_port(u->b, &u->bport);
	UDP_CHECK(u, err == 0 && u->bport, err);
	snprintf(u->baddr, sizeof(u->baddr),
		 u->bind_addr[0] == '[' ? "[::1]:%u" : "127.0.0.1:%u",
		 u->bport);
	err = weft_addr_parse(u->baddr, &u->to, &u->tolen);
	UDP_CHECK(u, err == 0, err);

	/* send_to / recv_from, then the reply to the sender's address. */
	WEFT_AWAIT(u, weft_udp_send_to(u->a, cx, "ping", 4,
				       (struct sockaddr *)&u->to, u->tolen,
				       &u->n));
	UDP_CHECK(u, u->n == 4, u->n);
	WEFT_AWAIT(u, weft_udp_recv_from(u->b, cx, u->buf, sizeof(u->buf),
					 &u->from, &u->fromlen, &u->n));
	UDP_CHECK(u, u->n == 4 && !memcmp(u->buf, "ping", 4), u->n);
	UDP_CHECK(u, port_of_ss(&u->from) == u->aport, 0);
	WEFT_AWAIT(u, weft_udp_send_to(u->b, cx, "pong!", 5,
				       (struct sockaddr *)&u->from, u->fromlen,
				       &u->n));
	UDP_CHECK(u, u->n == 5, u->n);
	WEFT_AWAIT(u, weft_udp_recv(u->a, cx, u->buf, sizeof(u->buf), &u->n));
	UDP_CHECK(u, u->n == 5 && !memcmp(u->buf, "pong!", 5), u->n);

	/* Connected: send / recv; a datagram longer than the buffer. */
	err = weft_udp_connect(u->a, u->baddr);
	UDP_CHECK(u, err == 0, err);
	WEFT_AWAIT(u, weft_udp_send(u->a, cx, "a longer datagram", 17, &u->n));
	UDP_CHECK(u, u->n == 17, u->n);
	WEFT_AWAIT(u, weft_udp_recv(u->b, cx, u->buf, 8, &u->n));
	UDP_CHECK(u, u->n == 8 && !memcmp(u->buf, "a longer", 8), u->n);
	/* A zero-length datagram is one too. */
	WEFT_AWAIT(u, weft_udp_send(u->a, cx, "", 0, &u->n));
	UDP_CHECK(u, u->n == 0, u->n);
	WEFT_AWAIT(u, weft_udp_recv_from(u->b, cx, u->buf, sizeof(u->buf), NULL,
					 NULL, &u->n));
	UDP_CHECK(u, u->n == 0, u->n);
out:
	weft_udp_close(u->a);
	weft_udp_close(u->b);
	u->a = u->b = NULL;
	WEFT_ASYNC_END(u);
}

static void test_net_udp_round_trip(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct udp_fut u4 = { .bind_addr = "127.0.0.1:0" };
	struct udp_fut u6 = { .bind_addr = "[::1]:0" };

	(void)state;
	block_on_ok(rt, udp_poll, &u4);
	if (u4.err)
		print_error("udp: line %d: %d\n", u4.line, u4.err);
	assert_int_equal(u4.err, 0);
	block_on_ok(rt, udp_poll, &u6);
	if (u6.err == -EADDRNOTAVAIL || u6.err == -EAFNOSUPPORT)
		print_message("udp: no IPv6 loopback, [::1] part skipped\n");
	else if (u6.err)
		print_error("udp6: line %d: %d\n", u6.line, u6.err);
	assert_true(u6.err == 0 || u6.err == -EADDRNOTAVAIL ||
		    u6.err == -EAFNOSUPPORT);
	weft_runtime_destroy(rt);
}

/*
 * A connected UDP socket whose peer is gone: the ICMP error is reported
 * once (-ECONNREFUSED), then the socket waits again.  The error readiness
 * is transient; a driver that kept it would make the next receive spin in
 * EAGAIN forever (this test would hit its TIMEOUT).
 */
struct udp_recv_fut {
	weft_udp_t *u;
	char buf[16];
	ssize_t n;
};

static weft_poll_t udp_recv_poll(void *arg, weft_cx_t *cx)
{
	struct udp_recv_fut *r = arg;

	return weft_udp_recv(r->u, cx, r->buf, sizeof(r->buf), &r->n);
}

struct udp_refused_fut {
	int weft_pc;
	weft_udp_t *u;
	weft_udp_t *gone;
	struct udp_recv_fut r;
	weft_timeout_t to;
	char addr[64];
	uint16_t port;
	ssize_t sent;
	ssize_t first;
	int first_status;
	int second_status;
	int err;
};

static weft_poll_t udp_refused_poll(void *arg, weft_cx_t *cx)
{
	struct udp_refused_fut *f = arg;

	WEFT_ASYNC_BEGIN(f);
	/* A port that was just bound, then closed. */
	f->err = weft_udp_bind("127.0.0.1:0", &f->gone);
	if (f->err)
		goto out;
	f->err = weft_udp_local_port(f->gone, &f->port);
	weft_udp_close(f->gone);
	if (f->err)
		goto out;
	tcp_addr(f->addr, sizeof(f->addr), f->port);
	f->err = weft_udp_bind("127.0.0.1:0", &f->u);
	if (f->err)
		goto out;
	f->err = weft_udp_connect(f->u, f->addr);
	if (f->err)
		goto out;
	WEFT_AWAIT(f, weft_udp_send(f->u, cx, "x", 1, &f->sent));
	f->r.u = f->u;
	weft_timeout_init(&f->to, WEFT_SEC(5));
	WEFT_AWAIT(f, weft_timeout_poll_fn(&f->to, cx, udp_recv_poll, &f->r,
					   &f->first_status));
	weft_timeout_fini(&f->to);
	f->first = f->r.n;
	weft_timeout_init(&f->to, WEFT_MSEC(50));
	WEFT_AWAIT(f, weft_timeout_poll_fn(&f->to, cx, udp_recv_poll, &f->r,
					   &f->second_status));
	weft_timeout_fini(&f->to);
out:
	weft_udp_close(f->u);
	f->u = NULL;
	WEFT_ASYNC_END(f);
}

static void test_net_udp_refused_is_transient(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct udp_refused_fut f = { 0 };

	(void)state;
	block_on_ok(rt, udp_refused_poll, &f);
	assert_int_equal(f.err, 0);
	assert_int_equal(f.sent, 1);
	assert_int_equal(f.first_status, 0);
	assert_int_equal(f.first, -ECONNREFUSED);
	assert_int_equal(f.second_status, -ETIMEDOUT);
	weft_runtime_destroy(rt);
}

/* ----------------------------------------------------- connect refused */

struct refused_fut {
	int weft_pc;
	weft_listener_t *l;
	weft_connect_t conn;
	weft_stream_t *s;
	int err;
	int status;
	int again;
};

static weft_poll_t refused_poll(void *arg, weft_cx_t *cx)
{
	struct refused_fut *f = arg;
	char addr[64];
	uint16_t port;

	WEFT_ASYNC_BEGIN(f);
	/* A port that was just free: bind one, then close it. */
	f->err = weft_tcp_listen("127.0.0.1:0", 0, &f->l);
	if (f->err)
		goto out;
	f->err = weft_listener_local_port(f->l, &port);
	weft_listener_close(f->l);
	if (f->err)
		goto out;
	tcp_addr(addr, sizeof(addr), port);
	f->err = weft_tcp_connect_init(&f->conn, addr);
	if (f->err)
		goto out;
	WEFT_AWAIT(f, weft_connect_poll(&f->conn, cx, &f->s, &f->status));
	/* Polling again after READY is an error, not a second attempt. */
	WEFT_AWAIT(f, weft_connect_poll(&f->conn, cx, &f->s, &f->again));
	weft_connect_fini(&f->conn);
out:;
	WEFT_ASYNC_END(f);
}

static void test_net_connect_refused(void **state)
{
	weft_runtime_t *rt = rt_create(2);
	struct refused_fut f = { 0 };
	struct listen_fut lf = { .addr = "/nonexistent-dir/x.sock",
				 .is_unix = true };
	struct echo_test t = { .is_unix = true };

	(void)state;
	block_on_ok(rt, refused_poll, &f);
	assert_int_equal(f.err, 0);
	assert_int_equal(f.status, -ECONNREFUSED);
	assert_int_equal(f.again, -EALREADY);
	assert_null(f.s);

	/* Unix: no such path; bad paths fail at once. */
	block_on_ok(rt, listen_poll, &lf);
	assert_int_equal(lf.err, -ENOENT);
	snprintf(t.addr, sizeof(t.addr), "/tmp/weft-test-net-none-%d.sock",
		 (int)getpid());
	tcount_init(&t.done);
	{
		struct echo_client c = { .t = &t };

		spawn_ok(rt, echo_client_poll, echo_client_drop, &c, sizeof(c),
			 false);
	}
	tcount_wait(&t.done, 1);
	assert_int_equal(atomic_load(&t.f.count), 1);
	assert_int_equal(atomic_load(&t.f.err), -ENOENT);
	tcount_fini(&t.done);
	weft_runtime_destroy(rt);
}

/* -------------------------------------------------- coop budget on reads */

/* Reads @want bytes one at a time: each read finds data ready. */
struct byte_reader {
	int weft_pc;
	weft_stream_t *s;
	size_t want;
	size_t got;
	ssize_t n;
	unsigned char byte;
	struct failure *f;
};

static weft_poll_t byte_reader_poll(void *arg, weft_cx_t *cx)
{
	struct byte_reader *r = arg;

	WEFT_ASYNC_BEGIN(r);
	for (r->got = 0; r->got < r->want; r->got++) {
		WEFT_AWAIT(r, weft_stream_read(r->s, cx, &r->byte, 1, &r->n));
		if (r->n != 1) {
			FAIL(r->f, r->n ? r->n : -ENODATA);
			break;
		}
		if (r->byte != (unsigned char)(r->got * 7u)) {
			FAIL(r->f, -EBADMSG);
			break;
		}
	}
	WEFT_ASYNC_END(r);
}

struct write_all_fut {
	weft_stream_t *s;
	const void *buf;
	size_t len;
	size_t done;
	int status;
};

static weft_poll_t write_all_poll(void *arg, weft_cx_t *cx)
{
	struct write_all_fut *w = arg;

	return weft_stream_write_all(w->s, cx, w->buf, w->len, &w->done,
				     &w->status);
}

static void test_net_coop_budget(void **state)
{
	const size_t len = 64u << 10;
	weft_runtime_t *rt = rt_create(2);
	struct failure f = { 0 };
	struct byte_reader r = { .want = len, .f = &f };
	struct write_all_fut w = { .len = len };
	uint64_t before = worker_sum(rt, WORKER_COUNTER(forced_yields));
	unsigned char *buf = malloc(len);
	weft_stream_t *c, *s;
	weft_join_t *j;

	(void)state;
	assert_non_null(buf);
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(i * 7u);
	pair_ok(rt, &c, &s);
	r.s = s;
	j = spawn_ok(rt, byte_reader_poll, NULL, &r, sizeof(r), true);
	w.s = c;
	w.buf = buf;
	block_on_ok(rt, write_all_poll, &w);
	assert_int_equal(w.status, 0);
	assert_int_equal(w.done, len);
	assert_int_equal(join_wait_drop(j, NULL), 0);
	assert_no_failure(&f);
	/* 64 Ki ready reads cannot all fit in one poll's budget. */
	assert_true(worker_sum(rt, WORKER_COUNTER(forced_yields)) > before);
	weft_stream_close(c);
	weft_stream_close(s);
	free(buf);
	weft_runtime_destroy(rt);
}

/* ------------------------------------------------ shutdown closes the fds */

/* Everything after destroy, with no runtime current. */
struct after_fut {
	weft_stream_t *c;
	weft_stream_t *s;
	weft_listener_t *l;
	weft_udp_t *u;
	ssize_t rd, wr, urecv, usend;
	int acc;
	size_t done;
	int wa;
	int step;
};

static weft_poll_t after_poll(void *arg, weft_cx_t *cx)
{
	struct after_fut *a = arg;
	weft_stream_t *out = (weft_stream_t *)1;
	char buf[8];

	/* Each is READY at once: a detached registration never waits. */
	if (weft_stream_read(a->c, cx, buf, sizeof(buf), &a->rd) !=
		    WEFT_READY ||
	    weft_stream_write(a->s, cx, "x", 1, &a->wr) != WEFT_READY ||
	    weft_stream_write_all(a->s, cx, "xy", 2, &a->done, &a->wa) !=
		    WEFT_READY ||
	    weft_listener_accept(a->l, cx, &out, &a->acc) != WEFT_READY ||
	    weft_udp_recv(a->u, cx, buf, sizeof(buf), &a->urecv) !=
		    WEFT_READY ||
	    weft_udp_send(a->u, cx, "x", 1, &a->usend) != WEFT_READY ||
	    out != NULL)
		a->step = -1;
	return WEFT_READY;
}

struct after_setup {
	weft_stream_t *c;
	weft_stream_t *s;
	weft_listener_t *l;
	weft_udp_t *u;
	int err;
};

static weft_poll_t after_setup_poll(void *arg, weft_cx_t *cx)
{
	struct after_setup *a = arg;

	(void)cx;
	a->err = weft_tcp_listen("127.0.0.1:0", 0, &a->l);
	if (!a->err)
		a->err = weft_udp_bind("127.0.0.1:0", &a->u);
	return WEFT_READY;
}

static void test_net_shutdown_closes_fds(void **state)
{
	unsigned fds_before = count_fds();
	weft_runtime_t *rt = rt_create(2);
	struct after_setup st = { 0 };
	struct after_fut a = { 0 };
	struct reader_once r;
	tcount_t polled;
	ssize_t result = 1;
	struct sockaddr_storage ss;
	socklen_t sslen;
	uint16_t port;

	(void)state;
	tcount_init(&polled);
	pair_ok(rt, &st.c, &st.s);
	block_on_ok(rt, after_setup_poll, &st);
	assert_int_equal(st.err, 0);
	assert_true(count_fds() > fds_before);
	/*
	 * A task pending in a read of a stream it does not own: it is
	 * cancelled at shutdown and its waker is still registered when the
	 * driver detaches the stream.
	 */
	r = (struct reader_once){ .s = st.c,
				  .polled = &polled,
				  .result = &result };
	spawn_ok(rt, reader_once_poll, NULL, &r, sizeof(r), false);
	tcount_wait(&polled, 1);

	weft_runtime_destroy(rt);
	/* The runtime's own fds and the four sockets are closed. */
	assert_int_equal(count_fds(), fds_before);

	a = (struct after_fut){ .c = st.c, .s = st.s, .l = st.l, .u = st.u };
	block_on_ok(NULL, after_poll, &a);
	assert_int_equal(a.step, 0);
	assert_int_equal(a.rd, -ESHUTDOWN);
	assert_int_equal(a.wr, -ESHUTDOWN);
	assert_int_equal(a.wa, -ESHUTDOWN);
	assert_int_equal(a.acc, -ESHUTDOWN);
	assert_int_equal(a.urecv, -ESHUTDOWN);
	assert_int_equal(a.usend, -ESHUTDOWN);
	assert_int_equal(weft_stream_shutdown(st.c, SHUT_RDWR), -ESHUTDOWN);
	assert_int_equal(weft_stream_set_nodelay(st.c, true), -ESHUTDOWN);
	assert_int_equal(weft_stream_fd(st.c), -ESHUTDOWN);
	assert_int_equal(weft_stream_peer_addr(st.c, &ss, &sslen), -ESHUTDOWN);
	assert_int_equal(weft_stream_local_addr(st.s, &ss, &sslen), -ESHUTDOWN);
	assert_int_equal(weft_listener_local_port(st.l, &port), -ESHUTDOWN);
	assert_int_equal(weft_udp_local_port(st.u, &port), -ESHUTDOWN);
	assert_int_equal(weft_udp_connect(st.u, "127.0.0.1:9"), -ESHUTDOWN);

	/* Closing afterwards frees them, without closing any fd twice. */
	weft_stream_close(st.c);
	weft_stream_close(st.s);
	weft_listener_close(st.l);
	weft_udp_close(st.u);
	assert_int_equal(count_fds(), fds_before);
	tcount_fini(&polled);
}

/* A server task owning its sockets: cancelled at shutdown, it closes them. */
static void test_net_shutdown_cancels_owners(void **state)
{
	unsigned fds_before = count_fds();
	weft_runtime_t *rt = rt_create(2);
	weft_listener_t *l = listen_ok(rt, "127.0.0.1:0", false);
	struct failure f = { 0 };
	struct echo_test t = { .rounds = 1000000 };
	uint16_t port;

	(void)state;
	assert_int_equal(weft_listener_local_port(l, &port), 0);
	tcp_addr(t.addr, sizeof(t.addr), port);
	tcount_init(&t.done);
	/* The acceptor waits for one more connection than there will be. */
	weft_join_drop(spawn_acceptor(rt, l, 5, false, &f));
	for (unsigned i = 0; i < 4; i++) {
		struct echo_client c = { .t = &t, .id = i };

		spawn_ok(rt, echo_client_poll, echo_client_drop, &c, sizeof(c),
			 false);
	}
	/* Clients, servers and the acceptor are all mid-flight. */
	usleep(50 * 1000);
	weft_runtime_destroy(rt);
	assert_int_equal(count_fds(), fds_before);
	assert_int_equal(atomic_load(&t.ok), 0);
	assert_no_failure(&f);
	tcount_fini(&t.done);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_net_addr_parse),
		cmocka_unit_test(test_net_needs_runtime),
		cmocka_unit_test(test_net_tcp_echo_200_clients),
		cmocka_unit_test(test_net_unix_echo),
		cmocka_unit_test(test_net_half_close),
		cmocka_unit_test(test_net_eof),
		cmocka_unit_test(test_net_peer_reset),
		cmocka_unit_test(test_net_accept_storm),
		cmocka_unit_test(test_net_large_transfer),
		cmocka_unit_test(test_net_udp_round_trip),
		cmocka_unit_test(test_net_udp_refused_is_transient),
		cmocka_unit_test(test_net_connect_refused),
		cmocka_unit_test(test_net_coop_budget),
		cmocka_unit_test(test_net_shutdown_closes_fds),
		cmocka_unit_test(test_net_shutdown_cancels_owners),
	};
	struct rlimit rl;

	/* The accept storm holds ~2000 fds at its peak. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
