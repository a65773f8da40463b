/* SPDX-License-Identifier: MIT */
/*
 * weft-demo-load: the load mix that makes weft-demo show its mistakes.
 *
 * Steady traffic: --conns keep-alive connections share --rate requests a
 * second of GET /fast, each paced on its own schedule (a slot missed while
 * the server stalls is skipped, not made up in a rush), and one more
 * connection sends GET /lookup 20 times a second (a quick job on the
 * demo's blocking pool).  Bursts: every --burst-every, one request on each
 * of the burst connections at once:
 *
 *   3 x /cpu?ms=N   3 x /lock   1 x /lock-async   1 x /cpu-offload?ms=N
 *   1 x /sleep?ms=N                                  (N = --cpu-ms)
 *
 * so /cpu blocks the workers (the /fast latency jumps with each burst) and
 * /lock holds the blocking mutex across its sleep, beside their fixes.
 * Half a period later, the waiting side's burst:
 *
 *   16 x 8 x /convoy?user=U (U counts up)   5 x /report
 *
 * (each /convoy connection sends its 8 one after the other) so the convoy
 * requests queue on the demo's one lock "demo-session" for a quarter of
 * a second, long enough to show in the console, and
 * the reports hold every thread of the demo's blocking pool (5 by default)
 * for 400 ms while the lookups wait for one.  A burst of its own, so that
 * the fixes' jobs of the first (/cpu-offload) are done before the reports
 * come and do not fill the pool instead.
 * With --fixed every /cpu becomes /cpu-offload, every /lock /lock-async,
 * every /convoy /convoy-sharded and every /report /report-limited: the
 * same work, done right.
 *
 * Threads: one per connection, blocking sockets polled in 100 ms slices so
 * that a stop is seen promptly; the main thread takes SIGINT and SIGTERM
 * (blocked everywhere else), starts the bursts and prints one status line
 * a second: the /fast rate and latency over that second, the slowest
 * /lookup of that second, bursts, errors.  At the end, one summary line
 * per endpoint, with its slowest answer.
 *
 * A request fails when its connection cannot be made, the server closes
 * it, the answer is not "HTTP/1.1 200", or no answer comes within 30 s.
 *
 * Exit status: 0 after --duration or a signal with every request
 * answered 200; 1 when the target cannot be reached at the start, is lost
 * for 3 s, or some request failed; 2 for a usage error.  It is a tool,
 * not the runtime: allocation failures abort.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tool_util.h"

#define LOAD_DEFAULT_TARGET "127.0.0.1:8080"
#define LOAD_MAX_CONNS 256u
#define LOAD_SLICE_MS 100
#define LOAD_ANSWER_TIMEOUT_NS (30ull * 1000000000ull)
#define LOAD_LOST_NS (3ull * 1000000000ull)
#define LOAD_SAMPLES 65536u /* /fast latencies kept per second */
#define LOAD_BUF 4096u
#define LOAD_LOOKUP_RATE 20u /* /lookup requests a second */
#define LOAD_CONVOY_ROUNDS 8 /* /convoy requests per connection a burst */

enum ep {
	EP_FAST,
	EP_CPU,
	EP_CPU_OFFLOAD,
	EP_LOCK,
	EP_LOCK_ASYNC,
	EP_SLEEP,
	EP_CONVOY,
	EP_CONVOY_SHARDED,
	EP_REPORT,
	EP_REPORT_LIMITED,
	EP_LOOKUP,
	EP_N
};

static const char *const ep_names[EP_N] = {
	[EP_FAST] = "/fast",
	[EP_CPU] = "/cpu",
	[EP_CPU_OFFLOAD] = "/cpu-offload",
	[EP_LOCK] = "/lock",
	[EP_LOCK_ASYNC] = "/lock-async",
	[EP_SLEEP] = "/sleep",
	[EP_CONVOY] = "/convoy",
	[EP_CONVOY_SHARDED] = "/convoy-sharded",
	[EP_REPORT] = "/report",
	[EP_REPORT_LIMITED] = "/report-limited",
	[EP_LOOKUP] = "/lookup",
};

/* One request per burst connection, in this order. */
static const enum ep burst_mix[] = {
	EP_CPU,  EP_CPU,        EP_CPU,         EP_LOCK,  EP_LOCK,
	EP_LOCK, EP_LOCK_ASYNC, EP_CPU_OFFLOAD, EP_SLEEP,
};
#define BURST_N (sizeof(burst_mix) / sizeof(burst_mix[0]))

/* The waiting side's burst, half a period after each of the above. */
static const enum ep wait_mix[] = {
	EP_CONVOY, EP_CONVOY, EP_CONVOY, EP_CONVOY, EP_CONVOY, EP_CONVOY,
	EP_CONVOY, EP_CONVOY, EP_CONVOY, EP_CONVOY, EP_CONVOY, EP_CONVOY,
	EP_CONVOY, EP_CONVOY, EP_CONVOY, EP_CONVOY, EP_REPORT, EP_REPORT,
	EP_REPORT, EP_REPORT, EP_REPORT,
};
#define WAIT_N (sizeof(wait_mix) / sizeof(wait_mix[0]))

static struct options {
	const char *target;
	double duration;    /* seconds; 0: until a signal */
	unsigned long rate; /* /fast requests a second, all connections */
	unsigned long conns;
	double burst_every; /* seconds; 0: no bursts */
	unsigned long cpu_ms;
	bool quiet;
	bool fixed; /* the fixes only */
} opt = {
	.target = LOAD_DEFAULT_TARGET,
	.rate = 400,
	.conns = 4,
	.burst_every = 3.0,
	.cpu_ms = 50,
};

static struct addrinfo *addr;
static atomic_bool stop;
static atomic_uint_fast64_t ok[EP_N], failed[EP_N];
static atomic_uint_fast64_t max_us[EP_N];     /* slowest answer, whole run */
static atomic_uint_fast64_t lookup_max_us;    /* this second's */
static atomic_uint user_seq;                  /* ?user= of /convoy */
static atomic_uint_fast64_t last_ok_ns;   /* the last answer of 200 */
static atomic_uint_fast64_t last_fail_ns; /* the last failure */
static char last_err[128];                /* under stat_lock */

/* /fast latencies of the current second, and burst bookkeeping. */
static pthread_mutex_t stat_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t samples[LOAD_SAMPLES]; /* microseconds */
static size_t nsamples;

/* Bursts: [0] the first kind (burst_mix), [1] the waiting side's. */
static pthread_mutex_t burst_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t burst_cond = PTHREAD_COND_INITIALIZER;
static uint64_t burst_gen[2];

#define die(status, ...) tool_die(status, "weft-demo-load", __VA_ARGS__)

static void note_error(const char *what, int err)
{
	pthread_mutex_lock(&stat_lock);
	snprintf(last_err, sizeof(last_err), "%s: %s", what,
		 err == EPROTO ? "answered other than 200" : strerror(err));
	pthread_mutex_unlock(&stat_lock);
}

/* ---------------------------------------------------------- connection */

struct conn {
	int fd;
	size_t have; /* bytes of the next response already read */
	char buf[LOAD_BUF];
};

static int conn_open(struct conn *c)
{
	int fd, one = 1, err;

	fd = socket(addr->ai_family, addr->ai_socktype | SOCK_CLOEXEC,
		    addr->ai_protocol);
	if (fd < 0)
		return errno;
	if (connect(fd, addr->ai_addr, addr->ai_addrlen)) {
		err = errno;
		close(fd);
		return err;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = fd;
	c->have = 0;
	return 0;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->have = 0;
}

/* Reads more of the response; 0, or an errno (ECANCELED on stop). */
static int conn_fill(struct conn *c, uint64_t deadline)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	ssize_t n;

	for (;;) {
		if (atomic_load(&stop))
			return ECANCELED;
		if (tool_now_ns() > deadline)
			return ETIMEDOUT;
		if (poll(&p, 1, LOAD_SLICE_MS) < 0 && errno != EINTR)
			return errno;
		if (!p.revents)
			continue;
		if (c->have == sizeof(c->buf))
			return EMSGSIZE;
		n = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, 0);
		if (n > 0) {
			c->have += (size_t)n;
			return 0;
		}
		if (n == 0)
			return ECONNRESET;
		if (errno != EINTR && errno != EAGAIN)
			return errno;
	}
}

/*
 * Sends GET @path and reads the whole answer.  Returns 0 for a 200,
 * EPROTO for another status, or an errno; on anything but 0 and EPROTO
 * the connection is closed.
 */
static int conn_get(struct conn *c, const char *path)
{
	uint64_t deadline = tool_now_ns() + LOAD_ANSWER_TIMEOUT_NS;
	char req[128];
	size_t len, head, body;
	const char *end, *cl;
	int n, err, status;

	if (c->fd < 0 && (err = conn_open(c)))
		return err;
	n = snprintf(req, sizeof(req),
		     "GET %s HTTP/1.1\r\nHost: weft-demo\r\n\r\n", path);
	for (len = 0; len < (size_t)n;) {
		ssize_t w =
			send(c->fd, req + len, (size_t)n - len, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			err = errno;
			goto out_close;
		}
		len += (size_t)w;
	}
	while (!(end = memmem(c->buf, c->have, "\r\n\r\n", 4)))
		if ((err = conn_fill(c, deadline)))
			goto out_close;
	head = (size_t)(end - c->buf) + 4;
	if (c->have < 12 || memcmp(c->buf, "HTTP/1.1 ", 9) ||
	    sscanf(c->buf + 9, "%3d", &status) != 1) {
		err = EBADMSG;
		goto out_close;
	}
	cl = memmem(c->buf, head, "\r\nContent-Length: ", 18);
	if (!cl || sscanf(cl + 18, "%zu", &body) != 1 ||
	    body > sizeof(c->buf) - head) {
		err = EBADMSG;
		goto out_close;
	}
	while (c->have < head + body)
		if ((err = conn_fill(c, deadline)))
			goto out_close;
	memmove(c->buf, c->buf + head + body, c->have - head - body);
	c->have -= head + body;
	if (memmem(c->buf, head, "\r\nConnection: close\r\n", 21))
		conn_close(c);
	return status == 200 ? 0 : EPROTO;

out_close:
	conn_close(c);
	return err;
}

static void atomic_max(atomic_uint_fast64_t *m, uint64_t v)
{
	uint_fast64_t cur = atomic_load(m);

	while (v > cur && !atomic_compare_exchange_weak(m, &cur, v))
		;
}

/* Counts an answer that took @us microseconds (or a failure). */
static void count(enum ep e, int err, uint64_t us)
{
	if (!err) {
		atomic_fetch_add(&ok[e], 1);
		atomic_store(&last_ok_ns, tool_now_ns());
		atomic_max(&max_us[e], us);
		if (e == EP_LOOKUP)
			atomic_max(&lookup_max_us, us);
	} else if (err != ECANCELED) {
		atomic_fetch_add(&failed[e], 1);
		atomic_store(&last_fail_ns, tool_now_ns());
		note_error(ep_names[e], err);
	}
}

static void sleep_until(uint64_t t)
{
	while (!atomic_load(&stop)) {
		uint64_t now = tool_now_ns();
		struct timespec ts;
		uint64_t d;

		if (now >= t)
			return;
		d = t - now;
		if (d > LOAD_SLICE_MS * 1000000ull)
			d = LOAD_SLICE_MS * 1000000ull;
		ts.tv_sec = (time_t)(d / 1000000000ull);
		ts.tv_nsec = (long)(d % 1000000000ull);
		nanosleep(&ts, NULL);
	}
}

/* ------------------------------------------------------------- threads */

static void *steady_main(void *arg)
{
	struct conn *c = arg;
	uint64_t period = opt.rate ? 1000000000ull * opt.conns / opt.rate : 0;
	uint64_t next = tool_now_ns();

	while (!atomic_load(&stop)) {
		uint64_t t0 = tool_now_ns(), dt;
		int err = conn_get(c, "/fast");

		dt = (tool_now_ns() - t0) / 1000;
		count(EP_FAST, err, dt);
		if (!err) {
			pthread_mutex_lock(&stat_lock);
			if (nsamples < LOAD_SAMPLES)
				samples[nsamples++] = dt > UINT32_MAX ?
							      UINT32_MAX :
							      (uint32_t)dt;
			pthread_mutex_unlock(&stat_lock);
		} else if (err != EPROTO) {
			/* Back off 100 ms. */
			next = tool_now_ns() + 100000000ull;
		}
		next += period;
		if (next < tool_now_ns())
			next = tool_now_ns(); /* skip the slots missed */
		sleep_until(next);
	}
	conn_close(c);
	return NULL;
}

/* GET /lookup at LOAD_LOOKUP_RATE: what every request of a service needs. */
static void *lookup_main(void *arg)
{
	struct conn *c = arg;
	uint64_t period = 1000000000ull / LOAD_LOOKUP_RATE;
	uint64_t next = tool_now_ns();

	while (!atomic_load(&stop)) {
		uint64_t t0 = tool_now_ns();
		int err = conn_get(c, ep_names[EP_LOOKUP]);

		count(EP_LOOKUP, err, (tool_now_ns() - t0) / 1000);
		if (err && err != EPROTO)
			next = tool_now_ns() + 100000000ull; /* back off */
		next += period;
		if (next < tool_now_ns())
			next = tool_now_ns(); /* skip the slots missed */
		sleep_until(next);
	}
	conn_close(c);
	return NULL;
}

struct burster {
	struct conn c;
	enum ep e;
	int kind; /* which burst_gen: 0 burst_mix, 1 wait_mix */
};

static void *burst_main(void *arg)
{
	struct burster *b = arg;
	uint64_t seen = 0;
	char path[64];
	bool convoy;
	int rounds;

	if (opt.fixed && b->e == EP_CPU)
		b->e = EP_CPU_OFFLOAD;
	else if (opt.fixed && b->e == EP_LOCK)
		b->e = EP_LOCK_ASYNC;
	else if (opt.fixed && b->e == EP_CONVOY)
		b->e = EP_CONVOY_SHARDED;
	else if (opt.fixed && b->e == EP_REPORT)
		b->e = EP_REPORT_LIMITED;

	if (b->e == EP_CPU || b->e == EP_CPU_OFFLOAD || b->e == EP_SLEEP)
		snprintf(path, sizeof(path), "%s?ms=%lu", ep_names[b->e],
			 opt.cpu_ms);
	else
		snprintf(path, sizeof(path), "%s", ep_names[b->e]);
	convoy = b->e == EP_CONVOY || b->e == EP_CONVOY_SHARDED;
	rounds = convoy ? LOAD_CONVOY_ROUNDS : 1;
	for (;;) {
		char upath[96];
		const char *p = path;
		uint64_t t0;
		int err;

		pthread_mutex_lock(&burst_lock);
		while (burst_gen[b->kind] == seen && !atomic_load(&stop))
			pthread_cond_wait(&burst_cond, &burst_lock);
		seen = burst_gen[b->kind];
		pthread_mutex_unlock(&burst_lock);
		if (atomic_load(&stop))
			break;
		for (int i = 0; i < rounds && !atomic_load(&stop); i++) {
			/* A user of its own each time: the sharded twin
			 * spreads them over its locks. */
			if (convoy) {
				snprintf(upath, sizeof(upath), "%s?user=%u",
					 path, atomic_fetch_add(&user_seq, 1));
				p = upath;
			}
			t0 = tool_now_ns();
			err = conn_get(&b->c, p);
			count(b->e, err, (tool_now_ns() - t0) / 1000);
		}
	}
	conn_close(&b->c);
	return NULL;
}

/* ------------------------------------------------------------- options */

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* "10", "10s", "500ms", "2m" -> seconds; negative when malformed. */
static double parse_duration(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0 || v > 86400.0 * 365)
		return -1;
	if (!strcmp(end, "") || !strcmp(end, "s"))
		return v;
	if (!strcmp(end, "ms"))
		return v / 1000.0;
	if (!strcmp(end, "m"))
		return v * 60.0;
	return -1;
}

static unsigned long parse_count(const char *name, const char *s,
				 unsigned long min, unsigned long max)
{
	unsigned long v;

	if (!tool_parse_ulong(s, min, max, &v))
		die(2, "bad %s '%s' (want %lu..%lu; see --help)", name, s, min,
		    max);
	return v;
}

static void usage(void)
{
	printf("usage: weft-demo-load [--target HOST:PORT] [--duration D] [--rate N]\n"
	       "                      [--conns N] [--burst-every D] [--cpu-ms N] [--fixed]\n"
	       "                      [--quiet]\n"
	       "\n"
	       "The load mix for weft-demo: steady GET /fast on --conns keep-alive\n"
	       "connections at --rate requests a second in all, GET /lookup at %u a\n"
	       "second on one more, and every --burst-every a burst of one request on\n"
	       "each of %zu more connections at once: 3 x /cpu?ms=N, 3 x /lock,\n"
	       "1 x /lock-async, 1 x /cpu-offload?ms=N and 1 x /sleep?ms=N\n"
	       "(N = --cpu-ms); half a period later a burst on %zu more: 16 x %d x\n"
	       "/convoy?user=U (U counts up; %d in a row on each connection) and\n"
	       "5 x /report.\n"
	       "\n"
	       "  --target HOST:PORT  weft-demo's address (default %s)\n"
	       "  --duration D        stop after D (10s, 500ms, 2m; default: at SIGINT\n"
	       "                      or SIGTERM)\n"
	       "  --rate N            /fast requests a second (default %lu; 0: as fast\n"
	       "                      as the server answers)\n"
	       "  --conns N           /fast connections (default %lu)\n"
	       "  --burst-every D     time between bursts (default 3s; 0: no bursts)\n"
	       "  --cpu-ms N          ms of /cpu, /cpu-offload and /sleep (default %lu)\n"
	       "  --fixed             the fixes only: /cpu-offload for /cpu, /lock-async\n"
	       "                      for /lock, /convoy-sharded for /convoy,\n"
	       "                      /report-limited for /report\n"
	       "  --quiet             no status line each second, only the summary\n"
	       "\n"
	       "Prints a status line each second: the /fast rate and latency over that\n"
	       "second, the slowest /lookup of that second, the bursts so far and the\n"
	       "failed requests; at the end one line per endpoint with its slowest\n"
	       "answer.\n"
	       "exit status: 0 when every request was answered 200; 1 when the target\n"
	       "cannot be reached, is lost for 3 s, or a request failed; 2 for a usage\n"
	       "error\n",
	       LOAD_LOOKUP_RATE, BURST_N, WAIT_N, LOAD_CONVOY_ROUNDS,
	       LOAD_CONVOY_ROUNDS, LOAD_DEFAULT_TARGET, opt.rate,
	       opt.conns, opt.cpu_ms);
}

static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	const char *v;

	if (tool_opt_value(argc, argv, i, name, &v) < 0)
		die(2, "%s needs a value (see --help)", name);
	return v;
}

static void parse_args(int argc, char **argv)
{
	const char *v;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage();
			exit(0);
		} else if (!strcmp(argv[i], "--quiet")) {
			opt.quiet = true;
		} else if (!strcmp(argv[i], "--fixed")) {
			opt.fixed = true;
		} else if ((v = opt_value(argc, argv, &i, "--target"))) {
			opt.target = v;
		} else if ((v = opt_value(argc, argv, &i, "--duration"))) {
			if ((opt.duration = parse_duration(v)) < 0)
				die(2,
				    "bad --duration '%s' (want 10s, 500ms, 2m; see --help)",
				    v);
		} else if ((v = opt_value(argc, argv, &i, "--burst-every"))) {
			if ((opt.burst_every = parse_duration(v)) < 0)
				die(2,
				    "bad --burst-every '%s' (want 3s, 500ms; see --help)",
				    v);
		} else if ((v = opt_value(argc, argv, &i, "--rate"))) {
			opt.rate = parse_count("--rate", v, 0, 1000000);
		} else if ((v = opt_value(argc, argv, &i, "--conns"))) {
			opt.conns =
				parse_count("--conns", v, 1, LOAD_MAX_CONNS);
		} else if ((v = opt_value(argc, argv, &i, "--cpu-ms"))) {
			opt.cpu_ms = parse_count("--cpu-ms", v, 0, 10000);
		} else {
			die(2, "unknown argument '%s' (see --help)", argv[i]);
		}
	}
}

/* Resolves --target ("HOST:PORT", "[V6]:PORT") into addr. */
static void resolve(void)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	const char *colon = strrchr(opt.target, ':');
	char host[256];
	size_t hlen;
	int err;

	if (!colon || colon == opt.target || !colon[1])
		die(2, "bad --target '%s' (want HOST:PORT; see --help)",
		    opt.target);
	hlen = (size_t)(colon - opt.target);
	if (opt.target[0] == '[' && colon[-1] == ']')
		memcpy(host, opt.target + 1, hlen -= 2);
	else if (hlen < sizeof(host))
		memcpy(host, opt.target, hlen);
	if (hlen >= sizeof(host))
		die(2, "bad --target '%s': host too long", opt.target);
	host[hlen] = '\0';
	parse_count("--target port", colon + 1, 1, 65535);
	err = getaddrinfo(host, colon + 1, &hints, &addr);
	if (err)
		die(1, "cannot resolve '%s': %s", opt.target,
		    gai_strerror(err));
}

/* ---------------------------------------------------------------- main */

static void print_second(double t, uint64_t bursts)
{
	static uint32_t sorted[LOAD_SAMPLES];
	uint64_t nfailed = 0, lookup_us = atomic_exchange(&lookup_max_us, 0);
	char lookup[40] = "";
	size_t n;

	pthread_mutex_lock(&stat_lock);
	n = nsamples;
	memcpy(sorted, samples, n * sizeof(*sorted));
	nsamples = 0;
	pthread_mutex_unlock(&stat_lock);
	for (int e = 0; e < EP_N; e++)
		nfailed += atomic_load(&failed[e]);
	qsort(sorted, n, sizeof(*sorted), u32_cmp);
	if (lookup_us)
		snprintf(lookup, sizeof(lookup), "  /lookup max %7.2f ms",
			 lookup_us / 1000.0);
	if (n)
		printf("weft-demo-load: %5.0fs  /fast %5zu req/s  p50 %6.2f ms  "
		       "p99 %7.2f ms  max %7.2f ms%s  bursts %llu  failed %llu\n",
		       t, n, sorted[n / 2] / 1000.0,
		       sorted[n * 99 / 100] / 1000.0, sorted[n - 1] / 1000.0,
		       lookup, (unsigned long long)bursts,
		       (unsigned long long)nfailed);
	else
		printf("weft-demo-load: %5.0fs  /fast     0 req/s%s  bursts %llu  "
		       "failed %llu\n",
		       t, lookup, (unsigned long long)bursts,
		       (unsigned long long)nfailed);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static struct conn steady[LOAD_MAX_CONNS];
	static struct burster bursters[BURST_N + WAIT_N];
	static struct conn lookup_conn;
	pthread_t threads[LOAD_MAX_CONNS + 1 + BURST_N + WAIT_N];
	size_t nthreads = 0;
	uint64_t start, next_burst[2], next_status, end, nfailed = 0;
	struct conn probe = { .fd = -1 };
	sigset_t set;
	bool lost = false;
	int err, sig = 0;

	parse_args(argc, argv);
	resolve();

	/* The target must answer before anything starts. */
	err = conn_open(&probe);
	if (err)
		die(1, "cannot connect to %s: %s", opt.target, strerror(err));
	err = conn_get(&probe, "/fast");
	conn_close(&probe);
	if (err)
		die(1, "%s does not answer GET /fast: %s", opt.target,
		    err == EPROTO ? "not 200" : strerror(err));

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	for (unsigned long i = 0; i < opt.conns; i++) {
		steady[i].fd = -1;
		err = pthread_create(&threads[nthreads], NULL, steady_main,
				     &steady[i]);
		if (err)
			die(1, "thread: %s", strerror(err));
		nthreads++;
	}
	lookup_conn.fd = -1;
	err = pthread_create(&threads[nthreads], NULL, lookup_main,
			     &lookup_conn);
	if (err)
		die(1, "thread: %s", strerror(err));
	nthreads++;
	for (size_t i = 0; opt.burst_every > 0 && i < BURST_N + WAIT_N; i++) {
		bursters[i].c.fd = -1;
		bursters[i].kind = i >= BURST_N;
		bursters[i].e = i < BURST_N ? burst_mix[i] :
					      wait_mix[i - BURST_N];
		err = pthread_create(&threads[nthreads], NULL, burst_main,
				     &bursters[i]);
		if (err)
			die(1, "thread: %s", strerror(err));
		nthreads++;
	}
	if (!opt.quiet) {
		printf("weft-demo-load: %s: /fast at %lu req/s on %lu connections, "
		       "/lookup at %u req/s",
		       opt.target, opt.rate, opt.conns, LOAD_LOOKUP_RATE);
		if (opt.burst_every > 0)
			printf(", a burst of %zu (%s, ...) every %.3g s, "
			       "half a period later one of %zu (%s)",
			       BURST_N,
			       opt.fixed ? "/cpu-offload, /lock-async" :
					   "/cpu, /lock",
			       opt.burst_every, WAIT_N,
			       opt.fixed ? "/convoy-sharded, /report-limited" :
					   "/convoy, /report");
		printf("\n");
		fflush(stdout);
	}

	start = tool_now_ns();
	atomic_store(&last_ok_ns, start);
	end = opt.duration > 0 ? start + (uint64_t)(opt.duration * 1e9) : 0;
	next_burst[0] = start + (uint64_t)(opt.burst_every * 1e9 / 2);
	next_burst[1] = start + (uint64_t)(opt.burst_every * 1e9);
	next_status = start + 1000000000ull;
	for (;;) {
		struct timespec slice = { 0, LOAD_SLICE_MS * 1000000L };
		uint64_t now;

		sig = sigtimedwait(&set, NULL, &slice);
		if (sig > 0)
			break;
		now = tool_now_ns();
		if (end && now >= end)
			break;
		/* Lost: failures, and no answer at all for 3 s. */
		if (atomic_load(&last_fail_ns) > atomic_load(&last_ok_ns) &&
		    now - atomic_load(&last_ok_ns) > LOAD_LOST_NS) {
			lost = true;
			break;
		}
		for (int k = 0; k < 2 && opt.burst_every > 0; k++) {
			if (now < next_burst[k])
				continue;
			pthread_mutex_lock(&burst_lock);
			burst_gen[k]++;
			pthread_cond_broadcast(&burst_cond);
			pthread_mutex_unlock(&burst_lock);
			next_burst[k] += (uint64_t)(opt.burst_every * 1e9);
		}
		if (now >= next_status) {
			if (!opt.quiet)
				print_second((double)(now - start) / 1e9,
					     burst_gen[0]);
			next_status += 1000000000ull;
		}
	}

	atomic_store(&stop, true);
	pthread_mutex_lock(&burst_lock);
	pthread_cond_broadcast(&burst_cond);
	pthread_mutex_unlock(&burst_lock);
	for (size_t i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	freeaddrinfo(addr);

	printf("weft-demo-load: %.1f s, %llu bursts%s%s\n",
	       (double)(tool_now_ns() - start) / 1e9,
	       (unsigned long long)burst_gen[0],
	       sig == SIGINT  ? " (SIGINT)" :
	       sig == SIGTERM ? " (SIGTERM)" :
				"",
	       lost ? " (target lost)" : "");
	for (int e = 0; e < EP_N; e++) {
		printf("weft-demo-load: %-15s %8llu ok %6llu failed",
		       ep_names[e], (unsigned long long)atomic_load(&ok[e]),
		       (unsigned long long)atomic_load(&failed[e]));
		if (atomic_load(&ok[e]))
			printf("  (max %.2f ms)", atomic_load(&max_us[e]) / 1000.0);
		printf("\n");
		nfailed += atomic_load(&failed[e]);
	}
	fflush(stdout);
	if (lost)
		die(1, "lost %s for 3 s: %s", opt.target, last_err);
	if (nfailed)
		die(1, "%llu requests failed; last: %s",
		    (unsigned long long)nfailed, last_err);
	return 0;
}
