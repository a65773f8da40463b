/* SPDX-License-Identifier: MIT */
/*
 * weft-loadgen: a lock-step TCP echo load generator for the echo servers
 * (weft-bench echo-server, the anchors' tokio-bench/go-bench echo-server).
 *
 * It holds -c connections to 127.0.0.1:PORT.  Each has one message of -s
 * bytes in flight at a time: write it, wait until exactly that many bytes
 * have come back, compare them byte for byte with what was sent (the
 * contents depend on the connection and the sequence number, so a reply
 * from the wrong connection or an old message does not match), record the
 * round-trip time, send the next.  The first -w seconds are a warm-up;
 * then the round trips that complete within the next -d seconds are
 * counted and their times kept, for exact percentiles (nearest rank).
 *
 * One thread, one epoll instance (level-triggered: EPOLLIN always,
 * EPOLLOUT only while a message is partly written).  It is a tool, not the
 * runtime: allocation failures abort.
 *
 * Output, one line on stdout:
 *   shape=tcp_echo runtime=LABEL conns=N msg_bytes=N duration_s=X
 *   msgs_per_s=X rtt_us_p50=X rtt_us_p90=X rtt_us_p99=X rtt_us_p999=X
 *   rtt_us_max=X rtt_us_mean=X
 *
 * Exit status: 0; 1 when a connection fails or the server closes one; 2
 * for a usage error or an echo that does not match.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tool_util.h"

#define MAX_CONNS 10000
#define MAX_MSG (1u << 20)
#define MAX_SECS 3600.0
#define EVENTS 256

struct conn {
	int fd;
	unsigned id;
	uint32_t seq;
	size_t written; /* of the message in flight */
	size_t got;     /* of its echo */
	uint64_t sent_ns;
	bool want_out;
	unsigned char *out;
	unsigned char *in;
};

struct options {
	unsigned long port;
	unsigned long conns;
	unsigned long size;
	double duration;
	double warmup;
	const char *label;
};

/* Round-trip times of the measured window, ns (saturated at 2^32-1). */
struct samples {
	uint32_t *v;
	size_t n;
	size_t cap;
	uint64_t sum;
	uint32_t max;
};

static int epfd;
static struct samples samples;
static uint64_t t_measure, t_end;

/* -------------------------------------------------------------- helpers */

#define die(status, ...) tool_die(status, "weft-loadgen", __VA_ARGS__)

/* malloc(n * size), rejecting zero sizes and overflow; never fails. */
static void *xmallocarray(size_t n, size_t size)
{
	void *p;

	if (n == 0 || size == 0 || n > SIZE_MAX / size)
		die(1, "bad allocation size %zu x %zu", n, size);
	p = malloc(n * size);
	if (!p)
		die(1, "out of memory");
	return p;
}

static void samples_add(struct samples *s, uint64_t ns)
{
	uint32_t v = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;

	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 1u << 16;
		uint32_t *nv = xmallocarray(cap, sizeof(*nv));

		if (s->n)
			memcpy(nv, s->v, s->n * sizeof(*nv));
		free(s->v);
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n++] = v;
	s->sum += v;
	if (v > s->max)
		s->max = v;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile @q (0..1] of the sorted samples, in µs. */
static double pct_us(const struct samples *s, double q)
{
	size_t rank = (size_t)(q * (double)s->n + 0.999999);

	if (rank == 0)
		rank = 1;
	if (rank > s->n)
		rank = s->n;
	return (double)s->v[rank - 1] / 1000.0;
}

/* ---------------------------------------------------------- connections */

static void fill(struct conn *c, size_t size)
{
	for (size_t j = 0; j < size; j++)
		c->out[j] = (unsigned char)(c->id * 167u + c->seq * 13u +
					    (uint32_t)j * 5u + 3u);
}

static void set_want_out(struct conn *c, bool want)
{
	struct epoll_event ev = {
		.events = EPOLLIN | (want ? EPOLLOUT : 0),
		.data.ptr = c,
	};

	if (c->want_out == want)
		return;
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev))
		die(1, "epoll_ctl: %s", strerror(errno));
	c->want_out = want;
}

/* Writes what is left of the message in flight. */
static void flush(struct conn *c, size_t size)
{
	while (c->written < size) {
		ssize_t n = send(c->fd, c->out + c->written, size - c->written,
				 MSG_NOSIGNAL);

		if (n > 0) {
			c->written += (size_t)n;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			set_want_out(c, true);
			return;
		} else if (errno != EINTR) {
			die(1, "conn %u: send: %s", c->id, strerror(errno));
		}
	}
	set_want_out(c, false);
}

static void send_next(struct conn *c, size_t size, uint64_t now)
{
	c->seq++;
	fill(c, size);
	c->written = 0;
	c->got = 0;
	c->sent_ns = now;
	flush(c, size);
}

/* Reads the echo; once complete, checks it, records it, sends the next. */
static void on_readable(struct conn *c, size_t size)
{
	uint64_t now;
	ssize_t n;

	for (;;) {
		n = recv(c->fd, c->in + c->got, size - c->got, 0);
		if (n > 0) {
			c->got += (size_t)n;
			if (c->got == size)
				break;
		} else if (n == 0) {
			die(1, "conn %u: the server closed the connection",
			    c->id);
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			return;
		} else if (errno != EINTR) {
			die(1, "conn %u: recv: %s", c->id, strerror(errno));
		}
	}
	now = tool_now_ns();
	if (c->written != size)
		die(2, "conn %u: echo came back before the message was sent",
		    c->id);
	if (memcmp(c->in, c->out, size))
		die(2, "conn %u: echo mismatch at message %u", c->id, c->seq);
	if (now >= t_measure && now < t_end)
		samples_add(&samples, now - c->sent_ns);
	if (now < t_end)
		send_next(c, size, now);
}

static void conn_open(struct conn *c, unsigned id, const struct options *o)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons((uint16_t)o->port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	int one = 1;

	c->id = id;
	c->out = xmallocarray(o->size, 1);
	c->in = xmallocarray(o->size, 1);
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		die(1, "socket: %s", strerror(errno));
	if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		die(1, "TCP_NODELAY: %s", strerror(errno));
	/* Blocking connect: the connections are set up before timing. */
	if (connect(c->fd, (struct sockaddr *)&sin, sizeof(sin)))
		die(1, "connect to 127.0.0.1:%lu: %s", o->port,
		    strerror(errno));
	if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK))
		die(1, "fcntl: %s", strerror(errno));
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev))
		die(1, "epoll_ctl: %s", strerror(errno));
}

/* -------------------------------------------------------------- options */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: weft-loadgen -p PORT [-c CONNS] [-s BYTES] [-d SECS] [-w SECS] [-l LABEL]\n"
		"\n"
		"Lock-step TCP echo load on 127.0.0.1:PORT: each connection sends one\n"
		"message, waits for its exact echo, records the round trip, repeats.\n"
		"\n"
		"  -p, --port PORT       the echo server's port (required)\n"
		"  -c, --conns N         connections (default 64)\n"
		"  -s, --size BYTES      message size (default 64)\n"
		"  -d, --duration SECS   measured time (default 5)\n"
		"  -w, --warmup SECS     unmeasured time before it (default 1)\n"
		"  -l, --label NAME      the runtime= field of the output (default unknown)\n"
		"  -h, --help            this text\n"
		"\n"
		"output: shape=tcp_echo runtime=LABEL conns=N msg_bytes=N duration_s=X\n"
		"        msgs_per_s=X rtt_us_p50=X rtt_us_p90=X rtt_us_p99=X ...\n"
		"exit status: 0; 1 when a connection fails or is closed; 2 for a usage\n"
		"error or an echo mismatch\n");
}

static unsigned long parse_ulong(const char *opt, const char *s,
				 unsigned long min, unsigned long max)
{
	unsigned long v;

	if (!tool_parse_ulong(s, min, max, &v))
		die(2, "bad value for %s: '%s' (want %lu..%lu)", opt, s, min,
		    max);
	return v;
}

static double parse_secs(const char *opt, const char *s, double min)
{
	double v;
	char *end;

	errno = 0;
	if ((*s < '0' || *s > '9') && *s != '.')
		goto out_bad;
	v = strtod(s, &end);
	if (errno || *end || v < min || v > MAX_SECS)
		goto out_bad;
	return v;

out_bad:
	die(2, "bad value for %s: '%s' (want seconds, %g..%g)", opt, s, min,
	    MAX_SECS);
}

static void parse_args(struct options *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "conns", required_argument, NULL, 'c' },
		{ "size", required_argument, NULL, 's' },
		{ "duration", required_argument, NULL, 'd' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "label", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	*o = (struct options){ .conns = 64,
			       .size = 64,
			       .duration = 5,
			       .warmup = 1,
			       .label = "unknown" };
	opterr = 0; /* our own one-line messages */
	while ((opt = getopt_long(argc, argv, ":p:c:s:d:w:l:h", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'p':
			o->port = parse_ulong("-p", optarg, 1, 65535);
			break;
		case 'c':
			o->conns = parse_ulong("-c", optarg, 1, MAX_CONNS);
			break;
		case 's':
			o->size = parse_ulong("-s", optarg, 1, MAX_MSG);
			break;
		case 'd':
			o->duration = parse_secs("-d", optarg, 0.001);
			break;
		case 'w':
			o->warmup = parse_secs("-w", optarg, 0);
			break;
		case 'l':
			if (!*optarg || strpbrk(optarg, " \t\n="))
				die(2, "bad label '%s' (no spaces or '=')",
				    optarg);
			o->label = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			die(2, "%s needs a value (see --help)",
			    argv[optind - 1]);
		default:
			die(2, "unknown option '%s' (see --help)",
			    argv[optind - 1]);
		}
	}
	if (optind < argc)
		die(2, "unexpected argument '%s' (see --help)", argv[optind]);
	if (!o->port)
		die(2, "-p PORT is required (see --help)");
}

/* ----------------------------------------------------------------- main */

int main(int argc, char **argv)
{
	struct epoll_event evs[EVENTS];
	struct options o;
	struct conn *conns;
	uint64_t t0;

	parse_args(&o, argc, argv);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		die(1, "epoll_create1: %s", strerror(errno));
	conns = xmallocarray(o.conns, sizeof(*conns));
	memset(conns, 0, o.conns * sizeof(*conns));
	for (unsigned i = 0; i < o.conns; i++)
		conn_open(&conns[i], i, &o);

	t0 = tool_now_ns();
	t_measure = t0 + (uint64_t)(o.warmup * 1e9);
	t_end = t_measure + (uint64_t)(o.duration * 1e9);
	for (unsigned i = 0; i < o.conns; i++)
		send_next(&conns[i], o.size, tool_now_ns());

	for (;;) {
		uint64_t now = tool_now_ns();
		int n;

		if (now >= t_end)
			break;
		n = epoll_wait(epfd, evs, EVENTS,
			       (int)((t_end - now + 999999) / 1000000));
		if (n < 0 && errno != EINTR)
			die(1, "epoll_wait: %s", strerror(errno));
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;

			if (evs[i].events & EPOLLOUT)
				flush(c, o.size);
			if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				on_readable(c, o.size);
		}
	}

	for (unsigned i = 0; i < o.conns; i++) {
		close(conns[i].fd);
		free(conns[i].out);
		free(conns[i].in);
	}
	free(conns);
	close(epfd);
	if (samples.n == 0)
		die(1, "no round trip completed in the measured window");
	qsort(samples.v, samples.n, sizeof(*samples.v), cmp_u32);
	printf("shape=tcp_echo runtime=%s conns=%lu msg_bytes=%lu "
	       "duration_s=%.1f msgs_per_s=%.0f rtt_us_p50=%.1f "
	       "rtt_us_p90=%.1f rtt_us_p99=%.1f rtt_us_p999=%.1f "
	       "rtt_us_max=%.1f rtt_us_mean=%.1f\n",
	       o.label, o.conns, o.size, o.duration,
	       (double)samples.n / o.duration, pct_us(&samples, 0.50),
	       pct_us(&samples, 0.90), pct_us(&samples, 0.99),
	       pct_us(&samples, 0.999), (double)samples.max / 1000.0,
	       (double)samples.sum / (double)samples.n / 1000.0);
	free(samples.v);
	return 0;
}
