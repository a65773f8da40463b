/* SPDX-License-Identifier: MIT */
/*
 * weft-bench-io-ceiling: what the kernel allows a server on this machine,
 * with no runtime at all, so that a runtime's I/O figures (weft's, Tokio's)
 * can be read against a ceiling measured the same way (issue 23).
 *
 *   weft-bench-io-ceiling uring|epoll echo|http PORT [--threads N]
 *
 * N threads (default 2, as the runtimes' workers), each with its own
 * SO_REUSEPORT listener on 127.0.0.1:PORT, so that the kernel spreads the
 * connections and no thread ever touches another's: no locks, no wakes,
 * no queues.  Per connection the least work a server can do:
 *
 *   uring: a ring per thread (SINGLE_ISSUER | DEFER_TASKRUN), multishot
 *          accept, multishot receive into a ring of provided buffers,
 *          each reply sent from the buffer it arrived in (echo) or from a
 *          static response (http), one io_uring_enter a turn for all the
 *          thread's connections;
 *   epoll: edge-triggered epoll per thread, read until EAGAIN, a write a
 *          reply.
 *
 * echo sends back what it reads; http answers every request (a head ended
 * by an empty line; bodies are not expected) with the same 13-byte
 * "Hello, World!" as weft-bench's http-server.  Runs until SIGINT or
 * SIGTERM.  A reference, not a server to copy: no partial-send handling
 * beyond saying so (a 64-byte loopback send is never short), no limits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_hello.h"

#ifdef WEFT_HAVE_URING
#include <liburing.h>
#endif

#define MAX_THREADS 64
#define MAX_FD 65536
#define BUF_SIZE 2048
#define NBUFS 1024 /* provided buffers a ring (a power of two) */
#define BGID 1

/* Replies to a read holding up to this many requests go in one send. */
#define HTTP_BATCH 16
static char http_batch[HTTP_BATCH * HTTP_RESP_LEN];

static int port;
static bool http;

static void die(const char *what, int err)
{
	fprintf(stderr, "weft-bench-io-ceiling: %s: %s\n", what, strerror(err));
	exit(1);
}

static int listener(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		die("socket", errno);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)))
		die("setsockopt", errno);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 1024))
		die("bind/listen", errno);
	return fd;
}

static void nodelay(int fd)
{
	int one = 1;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/*
 * Requests completed by @p[0..n) on @fd: heads end with "\r\n\r\n",
 * matched across reads (@state: how much of it the last read ended on).
 */
static unsigned count_requests(uint8_t *state, const char *p, size_t n)
{
	static const char end[] = "\r\n\r\n";
	unsigned got = 0, s = *state;

	for (size_t i = 0; i < n; i++) {
		if (p[i] == end[s])
			s++;
		else
			s = p[i] == '\r';
		if (s == 4) {
			got++;
			s = 0;
		}
	}
	*state = (uint8_t)s;
	return got;
}

/* ---------------------------------------------------------------- epoll */

/* A reply, said to be short if it is (a 64-byte loopback write never is). */
static void write_all(int fd, const char *p, size_t len)
{
	if (write(fd, p, len) != (ssize_t)len)
		fprintf(stderr, "weft-bench-io-ceiling: short write\n");
}

static void *epoll_thread(void *arg)
{
	static _Thread_local uint8_t state[MAX_FD];
	struct epoll_event ev, evs[256];
	int lfd = listener(), ep = epoll_create1(EPOLL_CLOEXEC);
	char buf[BUF_SIZE];

	(void)arg;
	if (ep < 0)
		die("epoll_create1", errno);
	ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = lfd };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev))
		die("epoll_ctl", errno);
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == lfd) {
				int c = accept4(lfd, NULL, NULL,
						SOCK_NONBLOCK | SOCK_CLOEXEC);

				if (c < 0 || c >= MAX_FD) {
					if (c >= 0)
						close(c);
					continue;
				}
				nodelay(c);
				state[c] = 0;
				ev = (struct epoll_event){ .events = EPOLLIN |
								     EPOLLET,
							   .data.fd = c };
				if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev))
					close(c);
				continue;
			}
			for (;;) {
				ssize_t r = read(fd, buf, sizeof(buf));
				unsigned k;

				if (r <= 0) {
					if (r == 0 || errno != EAGAIN)
						close(fd);
					break;
				}
				if (!http) {
					write_all(fd, buf, (size_t)r);
					continue;
				}
				/* Every request answered, a batch a write. */
				k = count_requests(&state[fd], buf, (size_t)r);
				while (k) {
					unsigned m =
						k < HTTP_BATCH ? k : HTTP_BATCH;

					write_all(fd, http_batch,
						  m * HTTP_RESP_LEN);
					k -= m;
				}
			}
		}
	}
	return NULL;
}

/* ---------------------------------------------------------------- uring */

#ifdef WEFT_HAVE_URING
enum { OP_ACCEPT = 1, OP_RECV, OP_SEND };

/* user_data: the op in the top byte, a buffer id, the fd. */
static uint64_t ud(unsigned op, unsigned bid, int fd)
{
	return (uint64_t)op << 56 | (uint64_t)bid << 32 | (uint32_t)fd;
}

struct uthread {
	struct io_uring ring;
	struct io_uring_buf_ring *br;
	char *bufs;
	uint8_t state[MAX_FD];
};

static struct io_uring_sqe *sqe_get(struct io_uring *ring)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe) {
		/* The SQ is full: hand it to the kernel and take a slot. */
		io_uring_submit(ring);
		sqe = io_uring_get_sqe(ring);
		if (!sqe)
			die("io_uring_get_sqe", EBUSY);
	}
	return sqe;
}

static void buf_give(struct uthread *u, unsigned bid)
{
	io_uring_buf_ring_add(u->br, u->bufs + (size_t)bid * BUF_SIZE, BUF_SIZE,
			      (unsigned short)bid,
			      io_uring_buf_ring_mask(NBUFS), 0);
	io_uring_buf_ring_advance(u->br, 1);
}

static void recv_arm(struct uthread *u, int fd)
{
	struct io_uring_sqe *sqe = sqe_get(&u->ring);

	io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BGID;
	io_uring_sqe_set_data64(sqe, ud(OP_RECV, 0, fd));
}

static void on_recv(struct uthread *u, struct io_uring_cqe *cqe, int fd)
{
	if (cqe->res > 0) {
		unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
		const char *in = u->bufs + (size_t)bid * BUF_SIZE;
		struct io_uring_sqe *sqe;
		unsigned k;

		if (!http) {
			/* The buffer goes back once its send completes. */
			sqe = sqe_get(&u->ring);
			io_uring_prep_send(sqe, fd, in, (size_t)cqe->res,
					   MSG_NOSIGNAL);
			io_uring_sqe_set_data64(sqe, ud(OP_SEND, bid, fd));
		} else {
			/*
			 * Every request answered, a batch a send, linked so
			 * that they go out in order.
			 */
			k = count_requests(&u->state[fd], in, (size_t)cqe->res);
			buf_give(u, bid);
			while (k) {
				unsigned m = k < HTTP_BATCH ? k : HTTP_BATCH;

				sqe = sqe_get(&u->ring);
				io_uring_prep_send(sqe, fd, http_batch,
						   m * HTTP_RESP_LEN,
						   MSG_NOSIGNAL);
				io_uring_sqe_set_data64(sqe,
							ud(OP_SEND, NBUFS, fd));
				k -= m;
				if (k)
					sqe->flags |= IOSQE_IO_LINK;
			}
		}
	} else if (cqe->res != -ENOBUFS) {
		/* The peer closed (0) or an error: the multishot has ended. */
		close(fd);
		return;
	}
	if (!(cqe->flags & IORING_CQE_F_MORE))
		recv_arm(u, fd);
}

static void *uring_thread(void *arg)
{
	struct uthread *u = calloc(1, sizeof(*u));
	struct io_uring_params p = { 0 };
	struct io_uring_buf_reg reg = { 0 };
	struct io_uring_sqe *sqe;
	int lfd = listener(), rc;

	(void)arg;
	if (!u)
		die("calloc", ENOMEM);
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		  IORING_SETUP_COOP_TASKRUN;
	rc = io_uring_queue_init_params(4096, &u->ring, &p);
	if (rc)
		die("io_uring_queue_init_params", -rc);
	if (posix_memalign((void **)&u->br, 4096,
			   NBUFS * sizeof(struct io_uring_buf)))
		die("posix_memalign", ENOMEM);
	u->bufs = malloc((size_t)NBUFS * BUF_SIZE);
	if (!u->bufs)
		die("malloc", ENOMEM);
	io_uring_buf_ring_init(u->br);
	reg.ring_addr = (uintptr_t)u->br;
	reg.ring_entries = NBUFS;
	reg.bgid = BGID;
	rc = io_uring_register_buf_ring(&u->ring, &reg, 0);
	if (rc)
		die("io_uring_register_buf_ring", -rc);
	for (unsigned i = 0; i < NBUFS; i++)
		buf_give(u, i);

	sqe = sqe_get(&u->ring);
	io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT, 0, lfd));
	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;

		rc = io_uring_submit_and_wait(&u->ring, 1);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
			die("io_uring_submit_and_wait", -rc);
		io_uring_for_each_cqe(&u->ring, head, cqe)
		{
			uint64_t d = cqe->user_data;
			unsigned op = (unsigned)(d >> 56);
			unsigned bid = (unsigned)(d >> 32) & 0xffffffu;
			int fd = (int)(uint32_t)d;

			seen++;
			switch (op) {
			case OP_ACCEPT:
				if (cqe->res >= 0 && cqe->res < MAX_FD) {
					nodelay(cqe->res);
					u->state[cqe->res] = 0;
					recv_arm(u, cqe->res);
				} else if (cqe->res >= 0) {
					close(cqe->res);
				}
				if (!(cqe->flags & IORING_CQE_F_MORE))
					die("multishot accept ended",
					    cqe->res < 0 ? -cqe->res : EIO);
				break;
			case OP_RECV:
				on_recv(u, cqe, fd);
				break;
			case OP_SEND:
				if (bid < NBUFS)
					buf_give(u, bid);
				if (cqe->res < 0 && cqe->res != -EPIPE &&
				    cqe->res != -ECONNRESET)
					fprintf(stderr,
						"weft-bench-io-ceiling: send: "
						"%s\n",
						strerror(-cqe->res));
				break;
			default:
				break;
			}
		}
		io_uring_cq_advance(&u->ring, seen);
	}
	return NULL;
}
#endif

static void usage(FILE *f)
{
	fprintf(f,
		"usage: weft-bench-io-ceiling uring|epoll echo|http PORT "
		"[--threads N]\n"
		"\n"
		"A server with no runtime, the ceiling for the runtimes' echo\n"
		"and HTTP figures: N threads (default 2), each with its own\n"
		"SO_REUSEPORT listener on 127.0.0.1:PORT and its own io_uring\n"
		"(multishot accept and receive, provided buffers) or epoll.\n"
		"Runs until SIGINT or SIGTERM.\n");
}

int main(int argc, char **argv)
{
	pthread_t tid[MAX_THREADS];
	void *(*fn)(void *) = epoll_thread;
	unsigned long n = 2;
	char *end;
	sigset_t set;
	int sig;

	if (argc == 2 &&
	    (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc != 4 && !(argc == 6 && !strcmp(argv[4], "--threads"))) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "uring")) {
#ifdef WEFT_HAVE_URING
		fn = uring_thread;
#else
		fprintf(stderr, "weft-bench-io-ceiling: built without "
				"liburing\n");
		return 1;
#endif
	} else if (strcmp(argv[1], "epoll")) {
		fprintf(stderr, "weft-bench-io-ceiling: unknown backend %s\n",
			argv[1]);
		return 2;
	}
	if (!strcmp(argv[2], "http"))
		http = true;
	else if (strcmp(argv[2], "echo")) {
		fprintf(stderr, "weft-bench-io-ceiling: unknown server %s\n",
			argv[2]);
		return 2;
	}
	port = (int)strtol(argv[3], &end, 10);
	if (*end || port <= 0 || port > 65535) {
		fprintf(stderr, "weft-bench-io-ceiling: bad port %s\n",
			argv[3]);
		return 2;
	}
	if (argc == 6) {
		n = strtoul(argv[5], &end, 10);
		if (*end || n == 0 || n > MAX_THREADS) {
			fprintf(stderr,
				"weft-bench-io-ceiling: --threads wants "
				"1-%d\n",
				MAX_THREADS);
			return 2;
		}
	}
	for (unsigned i = 0; i < HTTP_BATCH; i++)
		memcpy(http_batch + i * HTTP_RESP_LEN, http_resp,
		       HTTP_RESP_LEN);

	/* The threads inherit the mask; main takes the signals. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	for (unsigned long i = 0; i < n; i++) {
		int rc = pthread_create(&tid[i], NULL, fn, NULL);

		if (rc)
			die("pthread_create", rc);
	}
	sigwait(&set, &sig);
	return 0;
}
