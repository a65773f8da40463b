/* SPDX-License-Identifier: MIT */
/*
 * The metrics endpoint (probe/src/metrics_http.c, metrics_text.c): a real
 * runtime, an endpoint on a free port of 127.0.0.1, real sockets.  A
 * scrape in both formats and its exposition's shape, 404 and 405, a
 * request head over the bound closed, a client that trickles a byte at
 * a time closed at its deadline while another scrape is answered,
 * connections over the bound closed on accept, bad bind addresses, out
 * of descriptors (the listener pauses, one line a second), and a
 * long poll counted in weft_warnings_total with nobody listening.
 * (tests/metrics_prom.sh checks the text with promtool and the Python
 * client's strict parsers, and against a real Prometheus.)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "test_helpers.h"
#include "thread_cpu.h"

#include "weft/metrics_endpoint.h"
#include "weft/probe.h"

#ifndef WEFT_PROBE
#define WEFT_PROBE 1
#endif

#define TIMEOUT_MS 600
#define MAX_CONNS 4

struct fix {
	weft_runtime_t *rt;
	weft_metrics_endpoint_t *ep;
	int port;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int setup(void **state)
{
	static struct fix f;
	weft_config_t cfg = { .workers = 2 };
	weft_metrics_endpoint_opts_t o = { .bind = "127.0.0.1:0",
					   .max_conns = MAX_CONNS,
					   .timeout_ms = TIMEOUT_MS };

	memset(&f, 0, sizeof(f));
	if (weft_runtime_create(&cfg, &f.rt))
		return -1;
	if (weft_metrics_endpoint_create(&o, &f.ep))
		return -1;
	f.port = weft_metrics_endpoint_port(f.ep);
	*state = &f;
	return f.port > 0 ? 0 : -1;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	weft_metrics_endpoint_destroy(f->ep);
	weft_runtime_destroy(f->rt);
	return 0;
}

static int dial(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (void *)&sin, sizeof(sin)), 0);
	return fd;
}

/* Everything the peer sends until it closes, within @ms; NULL on time
 * out.  A reset counts as the end. */
static char *read_all(int fd, int ms)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	uint64_t end = now_ms() + (uint64_t)ms;

	assert_non_null(buf);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int left = (int)(end - now_ms());
		ssize_t n;

		if (left <= 0 || poll(&p, 1, left) <= 0) {
			free(buf);
			return NULL;
		}
		if (len + 4096 > cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		n = recv(fd, buf + len, cap - len - 1, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return buf;
}

static char *http(int port, const char *req)
{
	int fd = dial(port);
	char *r;

	assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL),
			 (ssize_t)strlen(req));
	r = read_all(fd, 3000);
	close(fd);
	assert_non_null(r);
	return r;
}

static char *scrape(int port, bool om)
{
	return http(port, om ? "GET /metrics HTTP/1.1\r\nHost: t\r\n"
			       "Accept: application/openmetrics-text;"
			       "version=1.0.0,text/plain;q=0.5\r\n\r\n"
			     : "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
}

/*
 * The exposition's shape: each sample line is NAME[{k="v",...}] VALUE
 * with a name of a family declared by # TYPE before it, each family
 * declared once.
 */
static void check_shape(const char *body, bool om)
{
	char fams[64][96];
	unsigned nf = 0;
	const char *line = body;

	while (*line) {
		const char *nl = strchr(line, '\n');
		char l[512];
		size_t n;

		assert_non_null(nl);
		n = (size_t)(nl - line);
		assert_true(n < sizeof(l));
		memcpy(l, line, n);
		l[n] = '\0';
		line = nl + 1;
		if (!strncmp(l, "# TYPE ", 7)) {
			char *sp = strchr(l + 7, ' ');

			assert_non_null(sp);
			*sp = '\0';
			for (unsigned i = 0; i < nf; i++)
				assert_string_not_equal(fams[i], l + 7);
			assert_true(nf < 64);
			assert_true(strlen(l + 7) < sizeof(fams[0]));
			memcpy(fams[nf++], l + 7, strlen(l + 7) + 1);
			continue;
		}
		if (l[0] == '#')
			continue;
		/* A sample of a declared family. */
		bool found = false;
		size_t nlen = strcspn(l, "{ ");

		for (unsigned i = 0; i < nf && !found; i++) {
			size_t fl = strlen(fams[i]);

			found = nlen >= fl && !strncmp(l, fams[i], fl);
		}
		assert_true(found);
		/* A value after the last space. */
		char *v = strrchr(l, ' '), *end;

		assert_non_null(v);
		strtod(v + 1, &end);
		assert_true(end != v + 1 && *end == '\0');
	}
	if (om)
		assert_non_null(strstr(body, "# EOF\n"));
}

static void test_metrics_scrape(void **state)
{
	struct fix *f = *state;
	char *r = scrape(f->port, false), *body;

	assert_true(!strncmp(r, "HTTP/1.1 200 OK\r\n", 17));
	assert_non_null(strstr(r, "Content-Type: text/plain; version=0.0.4"));
	body = strstr(r, "\r\n\r\n");
	assert_non_null(body);
	body += 4;
	assert_non_null(strstr(body, "# TYPE weft_worker_polls_total counter"));
	assert_non_null(strstr(body, "weft_worker_polls_total{worker=\"1\"} "));
	assert_non_null(strstr(body, "weft_tasks_alive "));
	assert_non_null(strstr(body, "weft_blocking_threads{state=\"idle\"} "));
	assert_non_null(strstr(body, "weft_warnings_total{kind=\"long-poll\"} "));
	assert_non_null(strstr(body, "weft_build_info{version=\""));
	/* One runtime: no runtime label; and a scrape turns no events on. */
	assert_null(strstr(body, "runtime=\""));
	assert_null(strstr(body, "# EOF"));
	assert_false(weft_probe_listening());
	check_shape(body, false);
	free(r);
}

static void test_metrics_openmetrics(void **state)
{
	struct fix *f = *state;
	char *r = scrape(f->port, true), *body;

	assert_true(!strncmp(r, "HTTP/1.1 200 OK\r\n", 17));
	assert_non_null(strstr(r, "Content-Type: application/openmetrics-text; "
				  "version=1.0.0"));
	body = strstr(r, "\r\n\r\n") + 4;
	assert_non_null(strstr(body, "# TYPE weft_worker_polls counter\n"));
	assert_non_null(strstr(body, "# UNIT weft_worker_busy_seconds seconds\n"));
	assert_non_null(strstr(body, "# TYPE weft_build info\n"));
	/* # EOF ends it. */
	assert_string_equal(body + strlen(body) - 6, "# EOF\n");
	check_shape(body, true);
	free(r);
}

static void test_metrics_not_found(void **state)
{
	struct fix *f = *state;
	char *r;

	r = http(f->port, "GET / HTTP/1.1\r\n\r\n");
	assert_true(!strncmp(r, "HTTP/1.1 404 ", 13));
	free(r);
	r = http(f->port, "GET /metricsx HTTP/1.0\r\n\r\n");
	assert_true(!strncmp(r, "HTTP/1.1 404 ", 13));
	free(r);
	r = http(f->port, "POST /metrics HTTP/1.1\r\n\r\n");
	assert_true(!strncmp(r, "HTTP/1.1 405 ", 13));
	free(r);
	r = http(f->port, "garbage\r\n\r\n");
	assert_true(!strncmp(r, "HTTP/1.1 400 ", 13));
	free(r);
	/* The endpoint still answers. */
	r = scrape(f->port, false);
	assert_true(!strncmp(r, "HTTP/1.1 200 ", 13));
	free(r);
}

/* 1 MB of headers: 431 (or a reset) long before it is all sent. */
static void test_metrics_oversized_head(void **state)
{
	struct fix *f = *state;
	int fd = dial(f->port);
	char line[1024];
	size_t sent = 0;
	char *r;

	memset(line, 'a', sizeof(line));
	memcpy(line, "X-A: ", 5);
	line[sizeof(line) - 2] = '\r';
	line[sizeof(line) - 1] = '\n';
	assert_true(send(fd, "GET /metrics HTTP/1.1\r\n", 23, MSG_NOSIGNAL) ==
		    23);
	while (sent < (1u << 20)) {
		ssize_t n = send(fd, line, sizeof(line),
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };

			/* The server stopped reading: no room for more. */
			if (poll(&p, 1, 1000) <= 0)
				break;
			continue;
		}
		if (n <= 0)
			break; /* closed: EPIPE or ECONNRESET */
		sent += (size_t)n;
	}
	/*
	 * Closed: a 431 first, or reset with it unread.  The whole megabyte
	 * may have gone into the kernel's buffers first (loopback's grow to
	 * megabytes): the endpoint read at most 8 KiB of it.
	 */
	r = read_all(fd, 3000);
	assert_non_null(r);
	assert_true(r[0] == '\0' || !strncmp(r, "HTTP/1.1 431 ", 13));
	free(r);
	close(fd);
	r = scrape(f->port, false);
	assert_true(!strncmp(r, "HTTP/1.1 200 ", 13));
	free(r);
}

/* A byte every 100 ms: closed at its deadline, not kept alive by them;
 * meanwhile another client is answered at once. */
static void test_metrics_slow_client(void **state)
{
	struct fix *f = *state;
	static const char req[] = "GET /metrics HTTP/1.1\r\nX-Slow: yes\r\n";
	int fd = dial(f->port);
	uint64_t start = now_ms();
	bool closed = false;
	char *r;

	for (size_t i = 0; i < sizeof(req) - 1 && !closed; i++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (send(fd, &req[i], 1, MSG_NOSIGNAL) != 1) {
			closed = true;
			break;
		}
		if (i == 2) {
			r = scrape(f->port, false);
			assert_true(!strncmp(r, "HTTP/1.1 200 ", 13));
			free(r);
		}
		/* Readable: EOF (or a reset) from the server. */
		if (poll(&p, 1, 100) > 0)
			closed = true;
	}
	assert_true(closed);
	/* Not before its deadline, and not long after. */
	assert_true(now_ms() - start >= TIMEOUT_MS - 50);
	assert_true(now_ms() - start < TIMEOUT_MS + 1000);
	close(fd);
}

/* Over MAX_CONNS at once: the extra one is closed on accept. */
static void test_metrics_busy(void **state)
{
	struct fix *f = *state;
	int fds[MAX_CONNS], extra;
	char *r;

	for (int i = 0; i < MAX_CONNS; i++)
		fds[i] = dial(f->port);
	/* Let the endpoint accept them all before the extra one. */
	usleep(100 * 1000);
	extra = dial(f->port);
	assert_true(send(extra, "GET /metrics HTTP/1.1\r\n\r\n", 25,
			 MSG_NOSIGNAL) <= 25);
	r = read_all(extra, 2000);
	assert_non_null(r);
	assert_true(r[0] == '\0' || !strncmp(r, "HTTP/1.1 503 ", 13));
	free(r);
	close(extra);
	for (int i = 0; i < MAX_CONNS; i++)
		close(fds[i]);
	usleep(100 * 1000);
	r = scrape(f->port, false);
	assert_true(!strncmp(r, "HTTP/1.1 200 ", 13));
	free(r);
}

/*
 * Out of descriptors (RLIMIT_NOFILE 64, all taken) with a scrape waiting
 * in the backlog: the endpoint's thread pauses its listener instead of
 * retrying accept(2) at once (under 5% of a core), says so in one line a
 * second at most, and answers the scrape once descriptors are back.
 */
static void test_metrics_accept_emfile(void **state)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n";
	struct fix *f = *state;
	char log[] = "/tmp/weft-test-metrics-XXXXXX", line[512];
	unsigned long long c0, c1;
	struct rlimit old, low;
	int cpu_fd, log_fd, saved_err, c, fds[256], nfds = 0, lines = 0;
	uint64_t t0, wall;
	FILE *lf;
	char *r;

	cpu_fd = thread_cpu_wait("weft-metrics");
	log_fd = mkstemp(log);
	assert_true(log_fd >= 0);
	fflush(stderr);
	saved_err = dup(2);
	assert_true(saved_err >= 0);
	assert_int_equal(dup2(log_fd, 2), 2);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c >= 0);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 64;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	while (nfds < 256) {
		int fd = dup(0);

		if (fd < 0)
			break;
		fds[nfds++] = fd;
	}
	{
		struct sockaddr_in sin = { .sin_family = AF_INET,
					   .sin_port =
						   htons((uint16_t)f->port) };

		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		/* The kernel completes it; the endpoint cannot accept it. */
		assert_int_equal(connect(c, (void *)&sin, sizeof(sin)), 0);
	}
	assert_int_equal(send(c, req, sizeof(req) - 1, MSG_NOSIGNAL),
			 (ssize_t)sizeof(req) - 1);
	t0 = now_ms();
	c0 = thread_cpu_ns_of(cpu_fd);
	usleep(1500 * 1000);
	c1 = thread_cpu_ns_of(cpu_fd);
	wall = now_ms() - t0;
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	r = read_all(c, 3000);
	close(c);
	fflush(stderr);
	assert_int_equal(dup2(saved_err, 2), 2);
	close(saved_err);
	close(log_fd);
	lf = fopen(log, "r");
	assert_non_null(lf);
	while (fgets(line, sizeof(line), lf)) {
		fputs(line, stdout);
		lines += strstr(line, "accept:") != NULL;
	}
	fclose(lf);
	unlink(log);
	close(cpu_fd);
	print_message("metrics thread: %.1f ms of CPU in %llu ms out of "
		      "descriptors; %d lines\n",
		      (double)(c1 - c0) / 1e6, (unsigned long long)wall, lines);
	assert_true(nfds < 64);
	assert_true((double)(c1 - c0) < 0.05 * 1e6 * (double)wall);
	assert_true(lines >= 1 && lines <= 2);
	assert_non_null(r);
	assert_true(!strncmp(r, "HTTP/1.1 200 ", 13));
	free(r);
}

static void test_metrics_bad_bind(void **state)
{
	static const char *const bad[] = { "", "nonsense", "127.0.0.1:",
					   "127.0.0.1:99999", "localhost:80x",
					   "host.example:9100" };
	weft_metrics_endpoint_opts_t o = { 0 };
	weft_metrics_endpoint_t *ep = NULL;

	(void)state;
	assert_int_equal(weft_metrics_endpoint_create(&o, &ep), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o.bind = bad[i];
		assert_int_equal(weft_metrics_endpoint_create(&o, &ep),
				 -EINVAL);
	}
	assert_null(ep);
	assert_int_equal(weft_metrics_text(7, &(char *){ NULL }, NULL),
			 -EINVAL);
}

/* A task that computes 40 ms in one poll, with nobody listening. */
/* The calling thread's CPU time, ms. */
static uint64_t cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/*
 * 100 ms of CPU, not of wall time: on a crowded host (the TSan phase runs
 * tests side by side) a wall-time spin is mostly the OS's doing, which
 * the monitor rightly calls preemption, not a long poll.
 */
static weft_poll_t spin_poll(void *arg, weft_cx_t *cx)
{
	uint64_t end = cpu_ms() + 100;

	(void)arg;
	(void)cx;
	while (cpu_ms() < end)
		;
	return WEFT_READY;
}

/*
 * Warnings of the kinds the monitor raises on a long poll: long-poll and
 * never-yielded, or preempted where a crowded host (a sanitizer build,
 * tests in parallel) held the spinning thread off its CPU for most of it.
 */
static uint64_t long_polls(void)
{
	static const char *const kinds[] = { "long-poll", "never-yielded",
					     "preempted" };
	char *t = NULL, *at, key[96];
	uint64_t v = 0;

	assert_int_equal(weft_metrics_text(WEFT_METRICS_PROMETHEUS, &t, NULL),
			 0);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		snprintf(key, sizeof(key), "weft_warnings_total{kind=\"%s\"} ",
			 kinds[i]);
		at = strstr(t, key);
		assert_non_null(at);
		v += strtoull(at + strlen(key), NULL, 10);
	}
	free(t);
	return v;
}

static void test_metrics_warnings_unheard(void **state)
{
	struct fix *f = *state;
	uint64_t before = long_polls(), end;
	weft_join_t *j;

	/* Without the probe the monitor raises no warnings. */
	if (!WEFT_PROBE)
		skip();
	assert_false(weft_probe_listening());
	/*
	 * The runtime monitor raises it; it may take a moment.  Its look
	 * runs at nice 19 and may miss a poll on a crowded host: up to
	 * three polls.
	 */
	for (int tries = 0; tries < 3 && long_polls() == before; tries++) {
		assert_int_equal(weft_spawn(f->rt, spin_poll, &(int){ 0 }, &j),
				 0);
		weft_join_wait(j, NULL);
		weft_join_drop(j);
		end = now_ms() + 1000;
		while (long_polls() == before && now_ms() < end)
			usleep(20 * 1000);
	}
	assert_true(long_polls() > before);
	assert_false(weft_probe_listening());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metrics_scrape),
		cmocka_unit_test(test_metrics_openmetrics),
		cmocka_unit_test(test_metrics_not_found),
		cmocka_unit_test(test_metrics_oversized_head),
		cmocka_unit_test(test_metrics_slow_client),
		cmocka_unit_test(test_metrics_busy),
		cmocka_unit_test(test_metrics_bad_bind),
		cmocka_unit_test(test_metrics_accept_emfile),
		cmocka_unit_test(test_metrics_warnings_unheard),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
