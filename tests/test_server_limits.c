/* SPDX-License-Identifier: MIT */
/*
 * What a peer can make the probe's server do (issue 19), over real
 * sockets: out of descriptors and flooded, its thread stays idle and
 * writes a line a second; over TCP nothing leaves the process before the
 * token (none, a wrong one, none in time: closed with not a byte sent);
 * another uid is refused on the unix socket; 100 idle TCP peers do not
 * lock the owner out; 200 subscribers that never read hold the process's
 * memory to the budget; a record left unfinished and a subscriber that
 * stopped reading are closed; a peer changing its subscription in every
 * frame is closed, and peers that subscribe and leave in a loop make new
 * subscriptions (full updates for all) at most every 200 ms.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test_helpers.h"
#include "server_helpers.h"
#include "thread_cpu.h"

/* ------------------------------------------------------------ helpers */

static long ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000 +
	       (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* VmRSS of this process in KiB. */
static unsigned long rss_kib(void)
{
	char line[128];
	unsigned long kib = 0;
	FILE *f = fopen("/proc/self/status", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lu", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* Lines of @path containing @needle. */
static int count_lines(const char *path, const char *needle, bool show)
{
	char line[512];
	int n = 0;
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, needle))
			n++;
		if (show)
			fputs(line, stdout); /* what a user would see */
	}
	fclose(f);
	return n;
}

/* ------------------------------------------------------------ EMFILE */

/*
 * Connects to @path as fast as it can for @ms, holding up to 200
 * connections (the oldest closed for the next), never reading.  A child
 * process: the flood comes from outside the process that is out of
 * descriptors, as in the issue.
 */
static void flood_child(const char *path, int ms)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct timespec t0;
	int held[200], n = 0;

	memcpy(sun.sun_path, path, strlen(path) + 1);
	for (int i = 0; i < 200; i++)
		held[i] = -1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ms_since(&t0) < ms) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);

		if (fd < 0)
			_exit(3);
		if (connect(fd, (void *)&sun, sizeof(sun))) {
			close(fd); /* the backlog is full: again */
			continue;
		}
		if (held[n] >= 0)
			close(held[n]);
		held[n] = fd;
		n = (n + 1) % 200;
	}
	_exit(0);
}

/*
 * Out of descriptors (RLIMIT_NOFILE 64, all taken) while another process
 * floods the listener for 2 s: the server's thread pauses its listener
 * instead of retrying accept(2) at once for ever (it took a whole core,
 * and wrote 1.2 M lines in 10 s): under 5% of a core, about a line a
 * second on stderr; once descriptors are back, a client attaches.
 */
static void test_server_limits_accept_emfile(void **state)
{
	weft_server_opts_t o = { .workers = 2 };
	char path[300], log[300];
	unsigned long long c0, c1;
	struct rlimit old, low;
	struct timespec t0;
	weft_server_t *srv;
	struct tclient c;
	int cpu_fd, log_fd, saved_err, fds[256], nfds = 0, status;
	int lines, accept_lines;
	long wall_ms;
	pid_t pid;

	(void)state;
	xdg_make();
	snprintf(path, sizeof(path), "%s/emfile.sock", xdg);
	snprintf(log, sizeof(log), "%s/stderr.log", xdg);
	o.unix_path = path;
	assert_int_equal(weft__server_create(&o, &srv), 0);
	cpu_fd = thread_cpu_wait("weft-console");
	/* stderr into a file, to count the lines. */
	log_fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(log_fd >= 0);
	fflush(stderr);
	saved_err = dup(2);
	assert_true(saved_err >= 0);
	assert_int_equal(dup2(log_fd, 2), 2);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		flood_child(path, 2200);
	/* Every descriptor taken, under a low limit. */
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
	clock_gettime(CLOCK_MONOTONIC, &t0);
	c0 = thread_cpu_ns_of(cpu_fd);
	usleep(2000000);
	c1 = thread_cpu_ns_of(cpu_fd);
	wall_ms = ms_since(&t0);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	fflush(stderr);
	assert_int_equal(dup2(saved_err, 2), 2);
	close(saved_err);
	close(log_fd);

	lines = count_lines(log, "weft:", true);
	accept_lines = count_lines(log, "accept:", false);
	print_message("server thread: %.1f ms of CPU in %ld ms out of "
		      "descriptors and flooded (%.2f%%); %d stderr lines, %d "
		      "about accept(2)\n",
		      (double)(c1 - c0) / 1e6, wall_ms,
		      (double)(c1 - c0) / 1e4 / (double)wall_ms, lines,
		      accept_lines);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* A spinning thread takes the whole 2 s. */
	assert_true((double)(c1 - c0) < 0.05 * 1e6 * (double)wall_ms);
	/* It did run out (a line), and said so a line a second at most. */
	assert_true(accept_lines >= 1);
	assert_true(lines <= 4);
	assert_true(nfds < 64);

	/*
	 * Descriptors back: a client attaches.  The flood's connections,
	 * gone with the child, may still fill the unix clients' slots
	 * until the server has read their ends (CI once refused the
	 * client so): tried again, 50 times at most.
	 */
	for (int k = 0;; k++) {
		Weft__V1__Frame *f;

		tc_open(&c, path);
		f = tc_next(&c, 2000);
		if (f && f->body_case == WEFT__V1__FRAME__BODY_HEADER) {
			weft_wire_frame_free(f);
			break;
		}
		if (f)
			weft_wire_frame_free(f);
		tc_close(&c);
		assert_true(k < 50);
		usleep(100000);
	}
	tc_close(&c);
	close(cpu_fd);
	unlink(log);
	weft__server_destroy(srv);
	xdg_remove();
}

/* ------------------------------------------------------------ TCP token */

/*
 * Over TCP nothing leaves before the token: a client that subscribes
 * first, one that sends an empty token, one with a wrong token, one
 * with a longer token that begins with the right one, and one that
 * says nothing are each closed having received not a byte (not even the
 * header, whose hello names the process); the right token is served.
 */
static void test_server_limits_tcp_token(void **state)
{
	weft_server_opts_t o = { .workers = 2,
				 .unix_path = "",
				 .tcp_bind = "127.0.0.1:0",
				 .token = "0123456789abcdef0123456789abcdef",
				 .handshake_ms = 300 };
	char longer[64];
	struct tclient c;
	struct seen seen = { 0 };
	weft_server_stats_t st;
	weft_server_t *srv;
	weft_runtime_t *rt;

	(void)state;
	xdg_make();
	rt = rt_with_server();
	assert_int_equal(weft__server_create(&o, &srv), 0);

	tc_open_tcp(&c, srv);
	tc_subscribe(&c, true, true);
	assert_true(tc_closed_silent(&c, 5000));
	tc_close(&c);

	tc_open_tcp(&c, srv);
	tc_send_token(&c, "");
	assert_true(tc_closed_silent(&c, 5000));
	tc_close(&c);

	tc_open_tcp(&c, srv);
	tc_send_token(&c, "0123456789abcdef0123456789abcdee");
	assert_true(tc_closed_silent(&c, 5000));
	tc_close(&c);

	snprintf(longer, sizeof(longer), "%s0", o.token);
	tc_open_tcp(&c, srv);
	tc_send_token(&c, longer);
	assert_true(tc_closed_silent(&c, 5000));
	tc_close(&c);

	tc_open_tcp(&c, srv); /* silent: closed after handshake_ms */
	assert_true(tc_closed_silent(&c, 5000));
	tc_close(&c);

	weft__server_stats(srv, &st);
	assert_int_equal(st.auth_failed, 4);
	assert_int_equal(st.handshake_closed, 1);

	/* The right token, then a subscription: the header, then data. */
	tc_open_tcp(&c, srv);
	tc_send_token(&c, o.token);
	tc_subscribe(&c, true, false);
	tc_expect_header(&c);
	workload(rt, 2, 50);
	tc_count(&c, &seen, 10000, 2, 0);
	assert_true(seen.updates >= 2);
	tc_close(&c);
	weft__server_destroy(srv);
	weft_runtime_destroy(rt);
	xdg_remove();
}

/* ------------------------------------------------------------ lockout */

/*
 * 130 TCP peers that never send the token: only the 16 newest are held
 * (each newer one closes the oldest, without a byte sent); a peer with
 * the token that comes after them all is served, and the owner's console
 * on the unix socket still attaches and gets data (the issue: 64 idle TCP
 * connections locked the owner out of their own process).
 */
static void test_server_limits_no_lockout(void **state)
{
	/* Held past the test's end: each peer is counted while it lasts. */
	weft_server_opts_t o = { .workers = 2,
				 .tcp_bind = "127.0.0.1:0",
				 .token = "the token",
				 .handshake_ms = 60000 };
	struct tclient *tcp = calloc(130, sizeof(*tcp)), owner, good;
	struct seen seen = { 0 };
	weft_server_stats_t st;
	weft_server_t *srv;
	weft_runtime_t *rt;
	char path[300];
	int closed = 0;

	(void)state;
	assert_non_null(tcp);
	xdg_make();
	rt = rt_with_server();
	snprintf(path, sizeof(path), "%s/lockout.sock", xdg);
	o.unix_path = path;
	assert_int_equal(weft__server_create(&o, &srv), 0);
	for (int i = 0; i < 130; i++)
		tc_open_tcp(&tcp[i], srv);
	for (int tries = 0; tries < 500; tries++) {
		weft__server_stats(srv, &st);
		if (st.accepted + st.refused >= 130)
			break;
		usleep(10000);
	}
	assert_int_equal(st.refused, 0);
	assert_int_equal(st.clients, 16);
	/* The oldest 114 were closed, having been sent nothing. */
	for (int i = 0; i < 130; i++)
		closed += tc_closed_silent(&tcp[i], i < 114 ? 2000 : 0);
	assert_int_equal(closed, 114);

	tc_open_tcp(&good, srv);
	tc_send_token(&good, "the token");
	tc_expect_header(&good);
	tc_close(&good);

	tc_open(&owner, path);
	tc_expect_header(&owner);
	tc_subscribe(&owner, true, false);
	workload(rt, 2, 50);
	tc_count(&owner, &seen, 10000, 2, 0);
	assert_true(seen.updates >= 2);
	tc_close(&owner);
	for (int i = 0; i < 130; i++)
		tc_close(&tcp[i]);
	free(tcp);
	weft__server_destroy(srv);
	weft_runtime_destroy(rt);
	xdg_remove();
}

/*
 * Run as root, a process of another user (nobody, 65534) that reaches
 * the unix socket (its directory and mode opened up by the test) is
 * closed before any byte leaves (SO_PEERCRED).
 */
static void test_server_limits_other_uid(void **state)
{
	weft_server_opts_t o = { .workers = 2 };
	weft_server_stats_t st;
	weft_server_t *srv;
	char path[300];
	pid_t pid;
	int status;

	(void)state;
	if (geteuid() != 0) {
		print_message("SKIPPED: test_server_limits_other_uid needs "
			      "root (to setuid() a child to nobody)\n");
		skip();
	}
	xdg_make();
	snprintf(path, sizeof(path), "%s/uid.sock", xdg);
	o.unix_path = path;
	assert_int_equal(weft__server_create(&o, &srv), 0);
	assert_int_equal(chmod(xdg, 0755), 0);
	assert_int_equal(chmod(path, 0666), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		struct pollfd pfd;
		char b;
		int fd;

		if (setgid(65534) || setuid(65534))
			_exit(3);
		memcpy(sun.sun_path, path, strlen(path) + 1);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (void *)&sun, sizeof(sun)))
			_exit(4);
		/* Closed at once with nothing sent: read() says 0. */
		pfd.fd = fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 5000) != 1)
			_exit(5);
		_exit(read(fd, &b, 1) == 0 ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	weft__server_stats(srv, &st);
	assert_int_equal(st.refused, 1);
	assert_int_equal(st.accepted, 0);
	assert_int_equal(chmod(xdg, 0700), 0);
	weft__server_destroy(srv);
	xdg_remove();
}

/* ------------------------------------------------------------ memory */

/*
 * 200 subscribers to everything that never read, on the default server
 * (its budget from WEFT_CONSOLE_BUFFER_MB, 64 MiB by default), while the
 * service makes events for 4 s (under the 5 s after which a subscriber
 * that does not read is dropped: the budget alone holds it here): the
 * output stays within the budget, and the process's RSS under 256 MB
 * (the issue saw 550 MB with 64 of them; each may hold 8 MiB, 1.6 GB for
 * 200).  The bound was 150 MB until a CI run read 172 MiB: the whole
 * file's binary (RelWithDebInfo) peaked at 128-184 MiB here, at this
 * commit as at the one before it, of which 63 MiB output, two workers'
 * 8 MiB rings, and a malloc arena of the server thread's churning through
 * 192 closed clients' buffers (65 MiB in one pmap); what else varies by
 * 50 MiB from run to run is not found yet.
 */
static void test_server_limits_non_readers_rss(void **state)
{
	enum { N = 200 };
	struct tclient *c = calloc(N, sizeof(*c));
	struct bg_load w = { .tasks = 8, .polls = 2000 };
	unsigned long before, peak = 0, now;
	weft_server_stats_t st;
	struct timespec t0;
	weft_runtime_t *rt;
	pthread_t th;
	int small = 4096;

	(void)state;
	assert_non_null(c);
	xdg_make();
	rt = rt_with_server();
	before = rss_kib();
	for (int i = 0; i < N; i++) {
		tc_open(&c[i], weft__server_unix_path(weft__server_default()));
		setsockopt(c[i].fd, SOL_SOCKET, SO_RCVBUF, &small,
			   sizeof(small));
		tc_subscribe(&c[i], true, true);
	}
	w.rt = rt;
	assert_int_equal(pthread_create(&th, NULL, bg_load_main, &w), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ms_since(&t0) < 4000) {
		usleep(50000);
		now = rss_kib();
		if (now > peak)
			peak = now;
	}
	atomic_store(&w.stop, true);
	pthread_join(th, NULL);
	weft__server_stats(weft__server_default(), &st);
	print_message("%d subscribers not reading: RSS %lu MiB before, %lu "
		      "MiB at most; output %zu MiB at most together, %llu "
		      "dropped over the budget, %llu not reading\n",
		      N, before >> 10, peak >> 10, st.max_total_buffered >> 20,
		      (unsigned long long)st.over_budget,
		      (unsigned long long)st.stalled);
	/* The sanitizers' shadow memory is in RSS: the budget alone then. */
#if !defined(WEFT_TSAN) && !defined(WEFT_ASAN)
	assert_true(peak < 256ul * 1000 * 1000 / 1024);
#endif
	assert_true(st.max_total_buffered <= (64u << 20));
	for (int i = 0; i < N; i++)
		tc_close(&c[i]);
	free(c);
	weft_runtime_destroy(rt);
	xdg_remove();
}

/*
 * A record left unfinished is closed after partial_ms (a peer held 4 MiB
 * a connection that way for as long as it liked); a subscriber whose
 * output has not drained at all for stall_ms is closed, while one that
 * reads goes on.
 */
static void test_server_limits_partial_and_stall(void **state)
{
	weft_server_opts_t o = { .workers = 2,
				 .partial_ms = 300,
				 .stall_ms = 500,
				 .slow_kick_ms = 60000 };
	/* A 100-byte record's prefix and 10 of its bytes. */
	const uint8_t part[] = { 0x0a, 100, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	struct tclient half, lazy, good;
	struct seen seen = { 0 };
	struct bg_load w = { .tasks = 8, .polls = 2000 };
	weft_server_stats_t st;
	weft_server_t *srv;
	weft_runtime_t *rt;
	struct timespec t0;
	char path[300];
	pthread_t th;
	int small = 4096;

	(void)state;
	xdg_make();
	rt = rt_with_server();
	snprintf(path, sizeof(path), "%s/partial.sock", xdg);
	o.unix_path = path;
	assert_int_equal(weft__server_create(&o, &srv), 0);

	tc_open(&half, path);
	tc_expect_header(&half);
	tc_subscribe(&half, false, false); /* it spoke: no handshake close */
	tc_send_raw(&half, part, sizeof(part));
	assert_true(tc_closed_by_server(&half, 5000));
	weft__server_stats(srv, &st);
	assert_int_equal(st.partial_closed, 1);

	tc_open(&lazy, path);
	setsockopt(lazy.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	tc_subscribe(&lazy, true, true);
	tc_open(&good, path);
	tc_expect_header(&good);
	tc_subscribe(&good, true, false);
	w.rt = rt;
	assert_int_equal(pthread_create(&th, NULL, bg_load_main, &w), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		struct seen s1 = { 0 };

		tc_count(&good, &s1, 200, 1, 0); /* keeps reading */
		seen.updates += s1.updates;
		weft__server_stats(srv, &st);
	} while (!st.stalled && ms_since(&t0) < 20000);
	atomic_store(&w.stop, true);
	pthread_join(th, NULL);
	print_message("the subscriber not reading was closed after %ld ms "
		      "(its output stalled for 500)\n",
		      ms_since(&t0));
	assert_int_equal(st.stalled, 1);
	assert_int_equal(st.clients, 1); /* the reader */
	assert_true(seen.updates >= 2);
	assert_true(tc_closed_by_server(&lazy, 10000));
	tc_close(&half);
	tc_close(&lazy);
	tc_close(&good);
	weft__server_destroy(srv);
	weft_runtime_destroy(rt);
	xdg_remove();
}

/* ------------------------------------------------------- a slow reader */

/*
 * A subscriber of updates and events that reads 16 KiB every 10 ms
 * (1.6 MB/s, a console starved of CPU) while the workload makes far more
 * events than that: its updates come in time all the same (the events it
 * cannot read are not sent), not seconds late behind 8 MiB of events.
 * How late: the wall time since its first update less the probe's, at
 * each update (the collector's own delays on a loaded host included).
 */
static void test_server_limits_slow_reader_stays_current(void **state)
{
	weft_server_opts_t o = { .workers = 2 };
	struct bg_load w = { .tasks = 8, .polls = 2000 };
	weft_wire_decoder_t dec;
	struct tclient slow;
	weft_server_t *srv;
	weft_runtime_t *rt;
	struct timespec t0;
	uint64_t first_now = 0, first_wall = 0, lag, worst = 0, skipped = 0;
	unsigned updates = 0;
	static uint8_t buf[16384];
	char path[300];
	pthread_t th;
	int small = 16384;

	(void)state;
	xdg_make();
	rt = rt_with_server();
	snprintf(path, sizeof(path), "%s/slow.sock", xdg);
	o.unix_path = path;
	assert_int_equal(weft__server_create(&o, &srv), 0);
	tc_open(&slow, path);
	setsockopt(slow.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	tc_expect_header(&slow);
	tc_subscribe(&slow, true, true);
	weft_wire_decoder_init(&dec, 0);
	w.rt = rt;
	assert_int_equal(pthread_create(&th, NULL, bg_load_main, &w), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ms_since(&t0) < 4000) {
		ssize_t n = read(slow.fd, buf, sizeof(buf));
		size_t at = 0;

		assert_true(n > 0);
		while (at < (size_t)n) {
			Weft__V1__Frame *f = NULL;
			size_t used;
			int rc = weft_wire_decoder_feed(
				&dec, buf + at, (size_t)n - at, &used, &f);

			assert_true(rc >= 0);
			at += used;
			if (rc != WEFT_WIRE_FRAME || !f)
				continue;
			if (f->body_case == WEFT__V1__FRAME__BODY_UPDATE &&
			    f->update->stats) {
				uint64_t wall = weft_now_ns();
				uint64_t now = f->update->stats->now_ns;

				if (!updates++) {
					first_now = now;
					first_wall = wall;
				}
				lag = (wall - first_wall) > (now - first_now) ?
					      (wall - first_wall) -
						      (now - first_now) :
					      0;
				/* After the first second: the pace known. */
				if (ms_since(&t0) > 1000 && lag > worst)
					worst = lag;
				skipped += f->update->events_not_sent;
			}
			weft_wire_frame_free(f);
		}
		usleep(10000);
	}
	atomic_store(&w.stop, true);
	pthread_join(th, NULL);
	print_message("%u updates, %llu events not sent, the latest at most "
		      "%.0f ms late after the first second\n",
		      updates, (unsigned long long)skipped,
		      (double)worst / 1e6);
	/*
	 * Before: 1 update in the 4 s (the rest behind 8 MiB of events).
	 * Now 30-odd on a quiet host, 19 in a loaded CI, where the lag,
	 * which counts the collector's own delays too, reached 2.1 s.
	 */
	assert_true(updates >= 8);
	assert_true(skipped > 0);
	assert_true(worst < WEFT_MSEC(3000) * slowdown());
	weft_wire_decoder_fini(&dec);
	tc_close(&slow);
	weft__server_destroy(srv);
	weft_runtime_destroy(rt);
	xdg_remove();
}

/* ------------------------------------------------------------ churn */

/*
 * Peers that change what they subscribe to as fast as they can, beside
 * an honest console, with IDLE_TASKS tasks to describe.  Each new stream
 * plan is a new probe subscription: a full pass of the collector and a
 * full update for every client.  Before: one peer changing its
 * subscription in every frame (525,050 in 2 s) took the collector from
 * 12.5 to 290.6 ms of CPU over 2 s and sent the honest console 46 full
 * updates.  Now that peer is closed after its tenth, and new plans are
 * made at most every 200 ms, however many peers ask (REPLAN_MIN_NS).
 */
#define IDLE_TASKS 20000
#define CHURN_MS 2000

/* Appends to @b a Subscribe for updates, the @n-th of a churn: events
 * and the interval change with @n. */
static void churn_subscribe_append(weft_wire_buf_t *b, unsigned n)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Subscribe sub = WEFT__V1__SUBSCRIBE__INIT;

	sub.updates = true;
	sub.events = n & 1;
	sub.interval_ms = n & 2 ? 100 : 250;
	f.body_case = WEFT__V1__FRAME__BODY_SUBSCRIBE;
	f.subscribe = &sub;
	assert_int_equal(weft_wire_record_append(b, &f), 0);
}

/* Reads @honest for @ms, counting its full updates; @churn (if any)
 * connects, subscribes and leaves in a loop meanwhile.  Returns the
 * collector's CPU time over it. */
static unsigned long long churn_for(int fd, struct tclient *honest,
				    const char *churn, int ms, unsigned *fulls,
				    unsigned *cycles)
{
	unsigned long long c0 = thread_cpu_ns_of(fd);
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ms_since(&t0) < ms) {
		Weft__V1__Frame *f;

		if (churn) {
			weft_wire_buf_t b = { 0 };
			struct tclient p;

			churn_subscribe_append(&b, *cycles);
			tc_open(&p, churn);
			/* Refused when the server has not closed the last
			 * ones yet (too many clients, a slow build): what it
			 * sends then fails, which is fine. */
			(void)send(p.fd, b.data, b.len, MSG_NOSIGNAL);
			weft_wire_buf_fini(&b);
			tc_close(&p);
			(*cycles)++;
		}
		while ((f = tc_next(honest, churn ? 0 : 10)) != NULL) {
			if (f->body_case == WEFT__V1__FRAME__BODY_UPDATE &&
			    f->update->full && f->update->stats)
				(*fulls)++;
			weft_wire_frame_free(f);
		}
	}
	return thread_cpu_ns_of(fd) - c0;
}

static void test_server_limits_subscribe_churn(void **state)
{
	weft_server_opts_t o = { .workers = 2, .slow_kick_ms = 60000 };
	struct tclient honest, churner;
	unsigned fulls = 0, cycles = 0, sent = 0;
	unsigned long long quiet, churned;
	weft_server_stats_t st;
	weft_server_t *srv;
	weft_runtime_t *rt;
	struct idle *tasks;
	char path[300];
	int fd;

	(void)state;
	xdg_make();
	rt = rt_with_server();
	snprintf(path, sizeof(path), "%s/churn.sock", xdg);
	o.unix_path = path;
	assert_int_equal(weft__server_create(&o, &srv), 0);
	weft_notify_init(&idle_note);
	tasks = calloc(IDLE_TASKS, sizeof(*tasks));
	assert_non_null(tasks);
	for (int i = 0; i < IDLE_TASKS; i++)
		assert_int_equal(weft_spawn(rt, idle_poll, &tasks[i], NULL), 0);
	tc_open(&honest, path);
	tc_expect_header(&honest);
	tc_subscribe(&honest, true, false);
	fd = thread_cpu_wait("weft-collector");
	assert_true(fd >= 0);
	/* Settled: the first full update and the seed behind. */
	(void)churn_for(fd, &honest, NULL, 1500, &fulls, &cycles);
	fulls = 0;
	quiet = churn_for(fd, &honest, NULL, CHURN_MS, &fulls, &cycles);
	assert_int_equal(fulls, 0);

	/* One peer, a new subscription in every frame: closed at its
	 * eleventh, with the reason. */
	tc_open(&churner, path);
	tc_expect_header(&churner);
	{
		weft_wire_buf_t b = { 0 };

		for (; sent < 1000; sent++)
			churn_subscribe_append(&b, sent);
		/* All at once; what the server reads before it closes. */
		(void)send(churner.fd, b.data, b.len, MSG_NOSIGNAL);
		weft_wire_buf_fini(&b);
	}
	assert_true(tc_closed_by_server(&churner, 5000));
	weft__server_stats(srv, &st);
	assert_int_equal(st.closed_bad, 1);
	tc_close(&churner);

	/*
	 * The same subscription again and again (weft-trace record asks so
	 * for a full update at each checkpoint): not a change, not closed;
	 * it still takes updates, full ones among them.
	 */
	tc_open(&churner, path);
	tc_expect_header(&churner);
	for (int i = 0; i < 40; i++)
		tc_subscribe(&churner, true, false);
	{
		struct seen again = { 0 };

		tc_count(&churner, &again, 5000, 5, 0);
		assert_false(churner.eof);
		assert_true(again.updates >= 5);
		assert_true(again.full >= 1);
	}
	weft__server_stats(srv, &st);
	assert_int_equal(st.closed_bad, 1);
	tc_close(&churner);

	/* Peers that connect, subscribe and leave in a loop, each within
	 * its share: new plans at most every 200 ms (and the tick's 100). */
	churned = churn_for(fd, &honest, path, CHURN_MS, &fulls, &cycles);
	print_message("collector over %d ms: %.1f ms quiet, %.1f ms while "
		      "%u peers came, subscribed and left; full updates to "
		      "the honest console %u; the peer that changed its "
		      "subscription in every frame was closed (of %u sent)\n",
		      CHURN_MS, quiet / 1e6, churned / 1e6, cycles, fulls,
		      sent);
	assert_true(cycles > 100);
	assert_true(fulls <= CHURN_MS / 200 + 2);
	close(fd);
	tc_close(&honest);
	weft__server_destroy(srv);
	weft_notify_waiters(&idle_note);
	weft_runtime_destroy(rt);
	weft_notify_fini(&idle_note);
	free(tasks);
	xdg_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_server_limits_accept_emfile),
		cmocka_unit_test(test_server_limits_tcp_token),
		cmocka_unit_test(test_server_limits_no_lockout),
		cmocka_unit_test(test_server_limits_other_uid),
		cmocka_unit_test(test_server_limits_non_readers_rss),
		cmocka_unit_test(test_server_limits_partial_and_stall),
		cmocka_unit_test(test_server_limits_subscribe_churn),
		cmocka_unit_test(test_server_limits_slow_reader_stays_current),
	};

	/* A write to a peer the server closed fails its assert, never
	 * kills the run. */
	signal(SIGPIPE, SIG_IGN);
	unsetenv("WEFT_CONSOLE");
	unsetenv("WEFT_CONSOLE_BIND");
	unsetenv("WEFT_CONSOLE_TOKEN");
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
