/* SPDX-License-Identifier: MIT */
/*
 * weft-bench-neighbour: the standard neighbour for compare.sh's shared
 * rounds (issue 23): a second process on the same CPUs doing what a small
 * service does between requests, sleeping and waking, with little CPU.
 *
 * Production hosts are shared, and a neighbour that sleeps and wakes
 * costs a runtime's hand-offs far more than one that burns CPU: each of
 * its wake-ups may preempt a thread of ours for a few microseconds, which
 * is harmless to a loop and ruinous to a thread that holds a lock or is
 * about to wake another.  So this neighbour is all wake-ups:
 *
 *   - --conns client threads share --rate requests a second, each on its
 *     own jittered timer (clock_nanosleep), each request 64 bytes over a
 *     socketpair to the server thread and 64 back;
 *   - one server thread waits in epoll_wait, answers each request after
 *     --work-us of work, then, as runtimes do before parking, spins up to
 *     --spin-us looking for the next one before it waits again;
 *   - on each wake-up the server first wakes a second server thread, as a
 *     runtime's worker that finds work wakes a searcher: it spins
 *     --spin-us looking for work (it finds none) and sleeps again;
 *   - one ticker thread sleeps --tick-us at a time, like a timer wheel's
 *     driver.
 *
 * With the defaults (400 requests a second, 1 ms ticks) that is about
 * 2,600 wake-ups a second and under a tenth of one CPU.  Plain C and
 * libc: it links no runtime, so it loads weft, Tokio and Go alike.
 *
 * It runs until SIGTERM or SIGINT (or --duration), then prints one line:
 *   neighbour requests=N ticks=N cpu_ms=X wall_ms=X
 *
 * Exit status: 0; 1 when a system call fails; 2 for a usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tool_util.h"

#define PROG "weft-bench-neighbour"
#define MAX_CONNS 64
#define MSG 64

#define die(status, ...) tool_die(status, PROG, __VA_ARGS__)

struct options {
	unsigned long rate;
	unsigned long conns;
	unsigned long work_us;
	unsigned long spin_us;
	unsigned long tick_us;
	unsigned long duration_ms;
};

static struct options opt = {
	.rate = 400,
	.conns = 4,
	.work_us = 20,
	.spin_us = 50,
	.tick_us = 1000,
	.duration_ms = 0,
};

/* Relaxed: a stop flag and counters read once at the end. */
static atomic_bool stopping;
static atomic_ulong requests, ticks;
static int pairs[MAX_CONNS][2]; /* [0] the client's end, [1] the server's */
static int searcher_fd;         /* eventfd: the server wakes the searcher */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [--rate N] [--conns N] [--work-us N]\n"
		"       [--spin-us N] [--tick-us N] [--duration-ms N]\n"
		"\n"
		"The standard neighbour for tools/bench/compare.sh's shared "
		"rounds: a\n"
		"process that sleeps and wakes as a small service does, with "
		"little CPU.\n"
		"\n"
		"  --rate N         requests a second in all, over the "
		"clients (default 400)\n"
		"  --conns N        client threads, each on its own timer "
		"(default 4, max %d)\n"
		"  --work-us N      the server's work per request (default "
		"20)\n"
		"  --spin-us N      the server spins this long for the next "
		"request\n"
		"                   before it waits in epoll (default 50)\n"
		"  --tick-us N      the ticker thread's sleep (default 1000; "
		"0: no ticker)\n"
		"  --duration-ms N  stop after N ms (default: at SIGTERM or "
		"SIGINT)\n"
		"\n"
		"Prints one line when it stops:\n"
		"  neighbour requests=N ticks=N cpu_ms=X wall_ms=X\n",
		MAX_CONNS);
}

static void spin_for(uint64_t ns)
{
	uint64_t end = tool_now_ns() + ns;

	while (tool_now_ns() < end)
		;
}

static void sleep_until(uint64_t t_ns)
{
	struct timespec ts = { (time_t)(t_ns / 1000000000u),
			       (long)(t_ns % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		if (atomic_load_explicit(&stopping, memory_order_relaxed))
			return;
}

/* A small xorshift: each client's jitter, no shared state. */
static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *client_main(void *arg)
{
	unsigned idx = (unsigned)(uintptr_t)arg;
	int fd = pairs[idx][0];
	uint64_t seed = 0x9e3779b97f4a7c15ull * (idx + 1);
	uint64_t period = 1000000000ull * opt.conns / opt.rate;
	uint64_t t = tool_now_ns();
	char buf[MSG];

	memset(buf, 'a' + (int)idx, sizeof(buf));
	while (!atomic_load_explicit(&stopping, memory_order_relaxed)) {
		/* Each gap 0.5 to 1.5 periods: no lock-step between clients. */
		t += period / 2 + next_rand(&seed) % (period + 1);
		sleep_until(t);
		if (send(fd, buf, sizeof(buf), MSG_NOSIGNAL) != MSG)
			break;
		if (recv(fd, buf, sizeof(buf), MSG_WAITALL) != MSG)
			break;
		atomic_fetch_add_explicit(&requests, 1, memory_order_relaxed);
	}
	return NULL;
}

/* Answers every request pending on the server's ends; returns how many. */
static unsigned serve_ready(void)
{
	char buf[MSG];
	unsigned n = 0;

	for (unsigned i = 0; i < opt.conns; i++) {
		ssize_t got = recv(pairs[i][1], buf, sizeof(buf), MSG_DONTWAIT);

		if (got != MSG)
			continue;
		spin_for(opt.work_us * 1000ull);
		if (send(pairs[i][1], buf, sizeof(buf), MSG_NOSIGNAL) != MSG)
			return n;
		n++;
	}
	return n;
}

static void *server_main(void *arg)
{
	struct epoll_event ev[MAX_CONNS];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	(void)arg;
	if (ep < 0)
		die(1, "epoll_create1: %s", strerror(errno));
	for (unsigned i = 0; i < opt.conns; i++) {
		struct epoll_event e = { .events = EPOLLIN, .data.u32 = i };

		if (epoll_ctl(ep, EPOLL_CTL_ADD, pairs[i][1], &e))
			die(1, "epoll_ctl: %s", strerror(errno));
	}
	while (!atomic_load_explicit(&stopping, memory_order_relaxed)) {
		uint64_t until;

		uint64_t one = 1;

		if (epoll_wait(ep, ev, MAX_CONNS, 100) <= 0)
			continue;
		if (write(searcher_fd, &one, sizeof(one)) != sizeof(one))
			die(1, "eventfd write: %s", strerror(errno));
		serve_ready();
		/* Spin for more before waiting again, as runtimes do. */
		until = tool_now_ns() + opt.spin_us * 1000ull;
		while (tool_now_ns() < until)
			if (serve_ready())
				until = tool_now_ns() + opt.spin_us * 1000ull;
	}
	close(ep);
	return NULL;
}

/* The second worker: woken, it searches a while, then sleeps again. */
static void *searcher_main(void *arg)
{
	uint64_t v;

	(void)arg;
	while (!atomic_load_explicit(&stopping, memory_order_relaxed)) {
		if (read(searcher_fd, &v, sizeof(v)) != sizeof(v))
			break;
		spin_for(opt.spin_us * 1000ull);
	}
	return NULL;
}

static void *ticker_main(void *arg)
{
	uint64_t t = tool_now_ns();

	(void)arg;
	while (!atomic_load_explicit(&stopping, memory_order_relaxed)) {
		t += opt.tick_us * 1000ull;
		sleep_until(t);
		atomic_fetch_add_explicit(&ticks, 1, memory_order_relaxed);
	}
	return NULL;
}

static void parse(int argc, char **argv)
{
	static const struct {
		const char *name;
		unsigned long *v;
		unsigned long min, max;
	} o[] = {
		{ "--rate", &opt.rate, 1, 1000000 },
		{ "--conns", &opt.conns, 1, MAX_CONNS },
		{ "--work-us", &opt.work_us, 0, 1000000 },
		{ "--spin-us", &opt.spin_us, 0, 1000000 },
		{ "--tick-us", &opt.tick_us, 0, 10000000 },
		{ "--duration-ms", &opt.duration_ms, 0, 86400000 },
	};

	for (int i = 1; i < argc; i++) {
		bool known = false;

		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			exit(0);
		}
		for (size_t k = 0; k < sizeof(o) / sizeof(o[0]) && !known;
		     k++) {
			const char *val;
			int r = tool_opt_value(argc, argv, &i, o[k].name, &val);

			if (r == 0)
				continue;
			if (r < 0)
				die(2, "%s needs a value", o[k].name);
			if (!tool_parse_ulong(val, o[k].min, o[k].max, o[k].v))
				die(2, "%s: %s is not a number in %lu..%lu",
				    o[k].name, val, o[k].min, o[k].max);
			known = true;
		}
		if (!known)
			die(2, "unknown argument %s (try --help)", argv[i]);
	}
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_CONNS + 3];
	unsigned nth = 0;
	struct rusage ru;
	uint64_t t0 = tool_now_ns();
	sigset_t set;
	int sig;

	parse(argc, argv);
	/* Blocked everywhere: the main thread takes them with sigtimedwait. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	for (unsigned i = 0; i < opt.conns; i++)
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
			       pairs[i]))
			die(1, "socketpair: %s", strerror(errno));
	searcher_fd = eventfd(0, EFD_CLOEXEC);
	if (searcher_fd < 0)
		die(1, "eventfd: %s", strerror(errno));
	if (pthread_create(&th[nth++], NULL, server_main, NULL) ||
	    pthread_create(&th[nth++], NULL, searcher_main, NULL))
		die(1, "pthread_create failed");
	for (unsigned i = 0; i < opt.conns; i++)
		if (pthread_create(&th[nth++], NULL, client_main,
				   (void *)(uintptr_t)i))
			die(1, "pthread_create failed");
	if (opt.tick_us && pthread_create(&th[nth++], NULL, ticker_main, NULL))
		die(1, "pthread_create failed");
	if (opt.duration_ms) {
		struct timespec ts = { (time_t)(opt.duration_ms / 1000),
				       (long)(opt.duration_ms % 1000) *
					       1000000 };

		sig = sigtimedwait(&set, NULL, &ts);
	} else {
		while ((sig = sigwaitinfo(&set, NULL)) < 0 && errno == EINTR)
			;
	}
	(void)sig;
	atomic_store_explicit(&stopping, true, memory_order_relaxed);
	/* Wake the clients blocked in recv and the server: end the pairs. */
	for (unsigned i = 0; i < opt.conns; i++)
		shutdown(pairs[i][0], SHUT_RDWR);
	{
		uint64_t one = 1; /* and the searcher, blocked in read */

		if (write(searcher_fd, &one, sizeof(one)) != sizeof(one))
			die(1, "eventfd write: %s", strerror(errno));
	}
	for (unsigned i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	getrusage(RUSAGE_SELF, &ru);
	printf("neighbour requests=%lu ticks=%lu cpu_ms=%.1f wall_ms=%.1f\n",
	       atomic_load(&requests), atomic_load(&ticks),
	       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
		       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) /
			       1e3,
	       (double)(tool_now_ns() - t0) / 1e6);
	return 0;
}
