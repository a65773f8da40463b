/* SPDX-License-Identifier: MIT */
/*
 * TCP, UDP and Unix stream sockets over the driver's edge-triggered
 * readiness (driver.c, io_backend.h).
 *
 * Every object is an fd plus its io_reg_t; the fd lives in the registration
 * (reg->fd), which is the one place shutdown changes it.  An operation
 * takes one unit of the coop budget, then loops: wait for the direction's
 * readiness (weft__io_poll_ready(), which registers the waker when not
 * ready), try the syscall, and on EAGAIN clear the readiness it was given
 * and wait again.  Clearing with the event of that poll never erases a
 * newer edge (the tick in the readiness word), and the poll after the
 * clear registers the waker before re-checking: no wake-up is lost.  A
 * short read or write also clears, saving the syscall that would only say
 * EAGAIN (Tokio does the same); the closed and shutdown bits are never
 * cleared, so end of stream keeps being READY.
 *
 * Sockets are registered only once they have left the kernel's CLOSE state
 * (after listen(2), connect(2) or accept4(2); a UDP socket after bind(2)):
 * epoll reports a fresh unconnected stream socket as EPOLLHUP, which would
 * set the final closed bits on a socket about to connect.
 *
 * Shutdown ("shutdown closes registered fds"): the driver keeps every live
 * registration on a list; weft_runtime_destroy() ends in
 * weft__driver_fini(), which closes the fd of each registration still on
 * it, sets IO_SHUTDOWN (a readiness bit that makes every poll READY) and
 * wakes its wakers.  Here every operation checks the bit in the event it
 * got from the poll (no cost on the fast path) and returns -ESHUTDOWN
 * before touching the fd; the synchronous calls check it first.  Closing
 * calls weft__io_deregister(), which frees a detached registration at once
 * and says so (-ESHUTDOWN), so the fd is not closed twice and the freed
 * driver is never touched.  The usual case is earlier: the tasks owning
 * sockets are cancelled at shutdown and their drop callbacks close them,
 * which deregisters them while the driver is still there.
 *
 * Threads: a stream's reader and writer use separate wakers and separate
 * readiness bits (poll_ready hands out an event masked to its direction),
 * so one reader task and one writer task may run concurrently.  Close must
 * not race with anything on the same object.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "weft/net.h"

#include "driver_internal.h"
#include "runtime_internal.h"

struct weft_listener_s {
	io_reg_t *reg;
	int family;
};

struct weft_stream_s {
	io_reg_t *reg;
	int family;
};

struct weft_udp_s {
	io_reg_t *reg;
	int family;
};

/* ----------------------------------------------------------- addresses */

static int parse_port(const char *s, uint16_t *port)
{
	unsigned long v = 0;
	size_t i;

	for (i = 0; s[i]; i++) {
		if (s[i] < '0' || s[i] > '9' || i == 5)
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (i == 0 || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

int weft_addr_parse(const char *str, struct sockaddr_storage *out,
		    socklen_t *len)
{
	char host[INET6_ADDRSTRLEN];
	const char *h, *end, *port_str;
	uint16_t port;
	size_t hlen;
	int family;

	if (!str || !out || !len)
		return -EINVAL;
	if (str[0] == '[') {
		h = str + 1;
		end = strchr(h, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		port_str = end + 2;
		family = AF_INET6;
	} else {
		h = str;
		end = strrchr(str, ':');
		if (!end)
			return -EINVAL;
		port_str = end + 1;
		family = AF_INET;
	}
	hlen = (size_t)(end - h);
	if (hlen == 0 || hlen >= sizeof(host))
		return -EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	if (parse_port(port_str, &port))
		return -EINVAL;

	memset(out, 0, sizeof(*out));
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)out;

		if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
			return -EINVAL;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		*len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;

		if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
			return -EINVAL;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		*len = sizeof(*sin6);
	}
	return 0;
}

/* A Unix address; a leading '@' names the abstract namespace. */
static int unix_addr(const char *path, struct sockaddr_un *sun, socklen_t *len)
{
	size_t n;

	if (!path || !*path)
		return -EINVAL;
	n = strlen(path);
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (path[0] == '@') {
		if (n > sizeof(sun->sun_path))
			return -ENAMETOOLONG;
		/* sun_path[0] stays '\0'; the name has no terminator. */
		memcpy(sun->sun_path + 1, path + 1, n - 1);
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	} else {
		if (n >= sizeof(sun->sun_path))
			return -ENAMETOOLONG;
		memcpy(sun->sun_path, path, n + 1);
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
				   1);
	}
	return 0;
}

static int port_of(const struct sockaddr_storage *ss, uint16_t *port)
{
	if (ss->ss_family == AF_INET)
		*port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
	else if (ss->ss_family == AF_INET6)
		*port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	else
		return -EAFNOSUPPORT;
	return 0;
}

/* ------------------------------------------------------- registrations */

static bool reg_is_shutdown(const io_reg_t *r)
{
	/*
	 * Acquire: pairs with the release in detach_regs() (driver.c); the
	 * bit clear means the fd is still ours (shutdown never races with
	 * the object's users: see net.h).
	 */
	return load_acquire(&((io_reg_t *)r)->readiness) & IO_SHUTDOWN;
}

/* Closes the fd of @r unless the driver already did; frees @r. */
static void reg_close(io_reg_t *r)
{
	/* Read first: after deregistering, the driver may free @r. */
	int fd = r->fd;

	if (weft__io_deregister(r) == 0)
		close(fd);
}

/*
 * Registers @fd with @d and stores the registration at *@reg.  On failure
 * the fd is closed.
 */
static int reg_open(driver_t *d, int fd, io_reg_t **reg)
{
	int err = weft__io_register(d, fd, reg);

	if (err)
		close(fd);
	return err;
}

static int local_addr(const io_reg_t *r, struct sockaddr_storage *addr,
		      socklen_t *len)
{
	if (reg_is_shutdown(r))
		return -ESHUTDOWN;
	*len = sizeof(*addr);
	return getsockname(r->fd, (struct sockaddr *)addr, len) ? -errno : 0;
}

static int local_port(const io_reg_t *r, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int err = local_addr(r, &ss, &len);

	return err ? err : port_of(&ss, port);
}

/* -------------------------------------------------------- the I/O loop */

struct op_args {
	void *buf;
	size_t len;
	const struct sockaddr *to;
	socklen_t tolen;
	struct sockaddr_storage *from;
	socklen_t *fromlen;
};

typedef ssize_t (*op_fn)(int fd, struct op_args *a);

/*
 * One operation on @r in direction @dir (see the file comment).  A result
 * of at least 0 but below @short_below clears the readiness: for streams,
 * a short transfer means the kernel buffer is drained or full.
 *
 * Return: READY with *@n the result or -errno, or PENDING (waker
 * registered, or out of budget and yielding).
 */
static inline weft_poll_t io_op(io_reg_t *r, enum io_dir dir, weft_cx_t *cx,
				op_fn op, struct op_args *a, size_t short_below,
				ssize_t *n)
{
	uint32_t ev;
	ssize_t ret;

	if (!weft__coop_poll(cx))
		return WEFT_PENDING;
	for (;;) {
		if (weft__io_poll_ready(r, dir, cx, &ev) == WEFT_PENDING)
			return WEFT_PENDING;
		if (ev & IO_SHUTDOWN) {
			ret = -ESHUTDOWN;
			break;
		}
		ret = op(r->fd, a);
		if (ret >= 0) {
			/*
			 * Not IO_ERROR: a pending error is reported by the
			 * next call, which must not wait for it.
			 */
			if (ret > 0 && (size_t)ret < short_below)
				weft__io_clear_ready(r, ev & ~IO_ERROR);
			break;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			weft__io_clear_ready(r, ev);
			continue;
		}
		if (errno == EINTR)
			continue;
		ret = -errno;
		break;
	}
	weft__coop_progress();
	*n = ret;
	return WEFT_READY;
}

static ssize_t recv_op(int fd, struct op_args *a)
{
	return recv(fd, a->buf, a->len, 0);
}

static ssize_t send_op(int fd, struct op_args *a)
{
	return send(fd, a->buf, a->len, MSG_NOSIGNAL);
}

static ssize_t sendto_op(int fd, struct op_args *a)
{
	return sendto(fd, a->buf, a->len, MSG_NOSIGNAL, a->to, a->tolen);
}

static ssize_t recvfrom_op(int fd, struct op_args *a)
{
	*a->fromlen = sizeof(*a->from);
	return recvfrom(fd, a->buf, a->len, 0, (struct sockaddr *)a->from,
			a->fromlen);
}

static ssize_t accept_op(int fd, struct op_args *a)
{
	(void)a;
	return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/* --------------------------------------------------------------- stream */

/* A stream over connected @fd, registered with @d; closes @fd on error. */
static int stream_new(driver_t *d, int fd, int family, weft_stream_t **out)
{
	weft_stream_t *s = malloc(sizeof(*s));
	int err;

	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	err = reg_open(d, fd, &s->reg);
	if (err) {
		free(s);
		return err;
	}
	s->family = family;
	*out = s;
	return 0;
}

weft_poll_t weft_stream_read(weft_stream_t *s, weft_cx_t *cx, void *buf,
			     size_t len, ssize_t *n)
{
	struct op_args a = { .buf = buf, .len = len };

	if (len == 0) {
		*n = 0;
		return WEFT_READY;
	}
	return io_op(s->reg, IO_DIR_READ, cx, recv_op, &a, len, n);
}

weft_poll_t weft_stream_write(weft_stream_t *s, weft_cx_t *cx, const void *buf,
			      size_t len, ssize_t *n)
{
	struct op_args a = { .buf = (void *)buf, .len = len };

	if (len == 0) {
		*n = 0;
		return WEFT_READY;
	}
	return io_op(s->reg, IO_DIR_WRITE, cx, send_op, &a, len, n);
}

weft_poll_t weft_stream_write_all(weft_stream_t *s, weft_cx_t *cx,
				  const void *buf, size_t len, size_t *done,
				  int *status)
{
	ssize_t n;

	while (*done < len) {
		if (weft_stream_write(s, cx, (const char *)buf + *done,
				      len - *done, &n) == WEFT_PENDING)
			return WEFT_PENDING;
		if (n < 0) {
			*status = (int)n;
			return WEFT_READY;
		}
		/* send(2) on a stream never returns 0 for a non-empty buffer. */
		*done += (size_t)n;
	}
	*status = 0;
	return WEFT_READY;
}

int weft_stream_shutdown(weft_stream_t *s, int how)
{
	if (reg_is_shutdown(s->reg))
		return -ESHUTDOWN;
	return shutdown(s->reg->fd, how) ? -errno : 0;
}

int weft_stream_set_nodelay(weft_stream_t *s, bool on)
{
	int v = on;

	if (reg_is_shutdown(s->reg))
		return -ESHUTDOWN;
	if (s->family == AF_UNIX)
		return -EOPNOTSUPP;
	return setsockopt(s->reg->fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v)) ?
		       -errno :
		       0;
}

int weft_stream_local_addr(const weft_stream_t *s,
			   struct sockaddr_storage *addr, socklen_t *len)
{
	return local_addr(s->reg, addr, len);
}

int weft_stream_peer_addr(const weft_stream_t *s, struct sockaddr_storage *addr,
			  socklen_t *len)
{
	if (reg_is_shutdown(s->reg))
		return -ESHUTDOWN;
	*len = sizeof(*addr);
	return getpeername(s->reg->fd, (struct sockaddr *)addr, len) ? -errno :
								       0;
}

int weft_stream_fd(const weft_stream_t *s)
{
	return reg_is_shutdown(s->reg) ? -ESHUTDOWN : s->reg->fd;
}

void weft_stream_close(weft_stream_t *s)
{
	if (!s)
		return;
	reg_close(s->reg);
	free(s);
}

/* -------------------------------------------------------------- connect */

static int connect_start(weft_connect_t *c, const struct sockaddr *addr,
			 socklen_t len)
{
	driver_t *d = weft__driver_current();
	int fd;

	memset(c, 0, sizeof(*c));
	if (!d)
		return -EINVAL;
	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	/* Connect before registering: see the file comment. */
	if (connect(fd, addr, len) == 0) {
		c->connected = true;
	} else if (errno != EINPROGRESS && errno != EINTR) {
		/* Reported by the first poll, like a later failure. */
		c->status = -errno;
		close(fd);
		return 0;
	}
	return stream_new(d, fd, addr->sa_family, &c->stream);
}

int weft_tcp_connect_init_addr(weft_connect_t *c, const struct sockaddr *addr,
			       socklen_t len)
{
	if (!addr ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) {
		memset(c, 0, sizeof(*c));
		return -EINVAL;
	}
	return connect_start(c, addr, len);
}

int weft_tcp_connect_init(weft_connect_t *c, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int err = weft_addr_parse(addr, &ss, &len);

	if (err) {
		memset(c, 0, sizeof(*c));
		return err;
	}
	return connect_start(c, (struct sockaddr *)&ss, len);
}

int weft_unix_connect_init(weft_connect_t *c, const char *path)
{
	struct sockaddr_un sun;
	socklen_t len;
	int err = unix_addr(path, &sun, &len);

	if (err) {
		memset(c, 0, sizeof(*c));
		return err;
	}
	return connect_start(c, (struct sockaddr *)&sun, len);
}

/*
 * The outcome of a non-blocking connect once the socket is writable.
 * Return: 0 connected; -EINPROGRESS not yet; else the error.
 */
static int connect_result(int fd, uint32_t ev)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(int);
	int soerr = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len))
		return -errno;
	if (soerr)
		return -soerr;
	len = sizeof(ss);
	if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0)
		return 0;
	if (errno != ENOTCONN)
		return -errno;
	/* Closed with no error left to report: do not wait forever. */
	if (ev & (IO_WRITE_CLOSED | IO_ERROR))
		return -ENOTCONN;
	return -EINPROGRESS;
}

weft_poll_t weft_connect_poll(weft_connect_t *c, weft_cx_t *cx,
			      weft_stream_t **out, int *status)
{
	io_reg_t *r;
	uint32_t ev;
	int err;

	if (c->status) {
		err = c->status;
		c->status = -EALREADY;
		goto out_fail;
	}
	if (!c->stream) {
		err = -EALREADY;
		goto out_fail;
	}
	r = c->stream->reg;
	while (!c->connected) {
		if (weft__io_poll_ready(r, IO_DIR_WRITE, cx, &ev) ==
		    WEFT_PENDING)
			return WEFT_PENDING;
		if (ev & IO_SHUTDOWN) {
			err = -ESHUTDOWN;
			goto out_close;
		}
		err = connect_result(r->fd, ev);
		if (err == 0)
			break;
		if (err != -EINPROGRESS)
			goto out_close;
		weft__io_clear_ready(r, ev);
	}
	*out = c->stream;
	c->stream = NULL;
	c->status = -EALREADY;
	*status = 0;
	return WEFT_READY;

out_close:
	weft_stream_close(c->stream);
	c->stream = NULL;
	c->status = -EALREADY;
out_fail:
	*out = NULL;
	*status = err;
	return WEFT_READY;
}

void weft_connect_fini(weft_connect_t *c)
{
	weft_stream_close(c->stream);
	c->stream = NULL;
}

/* ------------------------------------------------------------- listener */

static int listen_on(const struct sockaddr *addr, socklen_t len, int backlog,
		     weft_listener_t **out)
{
	driver_t *d = weft__driver_current();
	weft_listener_t *l;
	int fd, one = 1, err;

	if (!d)
		return -EINVAL;
	if (backlog <= 0)
		backlog = WEFT_NET_DEFAULT_BACKLOG;
	l = malloc(sizeof(*l));
	if (!l)
		return -ENOMEM;
	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0) {
		err = -errno;
		goto out_free;
	}
	if (addr->sa_family != AF_UNIX &&
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one))) {
		err = -errno;
		goto out_close_fd;
	}
	/* Listen before registering: see the file comment. */
	if (bind(fd, addr, len) || listen(fd, backlog)) {
		err = -errno;
		goto out_close_fd;
	}
	err = reg_open(d, fd, &l->reg);
	if (err)
		goto out_free;
	l->family = addr->sa_family;
	*out = l;
	return 0;

out_close_fd:
	close(fd);
out_free:
	free(l);
	return err;
}

int weft_tcp_listen_addr(const struct sockaddr *addr, socklen_t len,
			 int backlog, weft_listener_t **out)
{
	if (!addr ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return -EINVAL;
	return listen_on(addr, len, backlog, out);
}

int weft_tcp_listen(const char *addr, int backlog, weft_listener_t **out)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int err = weft_addr_parse(addr, &ss, &len);

	return err ? err : listen_on((struct sockaddr *)&ss, len, backlog, out);
}

int weft_unix_listen(const char *path, int backlog, weft_listener_t **out)
{
	struct sockaddr_un sun;
	socklen_t len;
	int err = unix_addr(path, &sun, &len);

	return err ? err :
		     listen_on((struct sockaddr *)&sun, len, backlog, out);
}

weft_poll_t weft_listener_accept(weft_listener_t *l, weft_cx_t *cx,
				 weft_stream_t **out, int *status)
{
	ssize_t fd;
	int err;

	do {
		if (io_op(l->reg, IO_DIR_READ, cx, accept_op, NULL, 0, &fd) ==
		    WEFT_PENDING)
			return WEFT_PENDING;
		/* Reset before we took it: take the next one. */
	} while (fd == -ECONNABORTED);
	if (fd < 0) {
		*out = NULL;
		*status = (int)fd;
		return WEFT_READY;
	}
	/* Not shut down (io_op said so), so the driver is there. */
	err = stream_new(l->reg->driver, (int)fd, l->family, out);
	if (err)
		*out = NULL;
	*status = err;
	return WEFT_READY;
}

int weft_listener_local_port(const weft_listener_t *l, uint16_t *port)
{
	return local_port(l->reg, port);
}

int weft_listener_local_addr(const weft_listener_t *l,
			     struct sockaddr_storage *addr, socklen_t *len)
{
	return local_addr(l->reg, addr, len);
}

void weft_listener_close(weft_listener_t *l)
{
	if (!l)
		return;
	reg_close(l->reg);
	free(l);
}

/* ------------------------------------------------------------------ UDP */

int weft_udp_bind_addr(const struct sockaddr *addr, socklen_t len,
		       weft_udp_t **out)
{
	driver_t *d = weft__driver_current();
	weft_udp_t *u;
	int fd, err;

	if (!d || !addr ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return -EINVAL;
	u = malloc(sizeof(*u));
	if (!u)
		return -ENOMEM;
	fd = socket(addr->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0) {
		err = -errno;
		goto out_free;
	}
	if (bind(fd, addr, len)) {
		err = -errno;
		close(fd);
		goto out_free;
	}
	err = reg_open(d, fd, &u->reg);
	if (err)
		goto out_free;
	u->family = addr->sa_family;
	*out = u;
	return 0;

out_free:
	free(u);
	return err;
}

int weft_udp_bind(const char *addr, weft_udp_t **out)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int err = weft_addr_parse(addr, &ss, &len);

	return err ? err : weft_udp_bind_addr((struct sockaddr *)&ss, len, out);
}

int weft_udp_connect(weft_udp_t *u, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int err = weft_addr_parse(addr, &ss, &len);

	if (err)
		return err;
	if (reg_is_shutdown(u->reg))
		return -ESHUTDOWN;
	return connect(u->reg->fd, (struct sockaddr *)&ss, len) ? -errno : 0;
}

weft_poll_t weft_udp_send(weft_udp_t *u, weft_cx_t *cx, const void *buf,
			  size_t len, ssize_t *n)
{
	struct op_args a = { .buf = (void *)buf, .len = len };

	return io_op(u->reg, IO_DIR_WRITE, cx, send_op, &a, 0, n);
}

weft_poll_t weft_udp_recv(weft_udp_t *u, weft_cx_t *cx, void *buf, size_t len,
			  ssize_t *n)
{
	struct op_args a = { .buf = buf, .len = len };

	return io_op(u->reg, IO_DIR_READ, cx, recv_op, &a, 0, n);
}

weft_poll_t weft_udp_send_to(weft_udp_t *u, weft_cx_t *cx, const void *buf,
			     size_t len, const struct sockaddr *to,
			     socklen_t tolen, ssize_t *n)
{
	struct op_args a = {
		.buf = (void *)buf, .len = len, .to = to, .tolen = tolen
	};

	return io_op(u->reg, IO_DIR_WRITE, cx, sendto_op, &a, 0, n);
}

weft_poll_t weft_udp_recv_from(weft_udp_t *u, weft_cx_t *cx, void *buf,
			       size_t len, struct sockaddr_storage *from,
			       socklen_t *fromlen, ssize_t *n)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct op_args a = {
		.buf = buf,
		.len = len,
		.from = from ? from : &ss,
		.fromlen = fromlen ? fromlen : &sslen,
	};

	return io_op(u->reg, IO_DIR_READ, cx, recvfrom_op, &a, 0, n);
}

int weft_udp_local_port(const weft_udp_t *u, uint16_t *port)
{
	return local_port(u->reg, port);
}

void weft_udp_close(weft_udp_t *u)
{
	if (!u)
		return;
	reg_close(u->reg);
	free(u);
}
