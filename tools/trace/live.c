/* SPDX-License-Identifier: MIT */
/*
 * weft-trace: connections to live processes (live.h).
 *
 * Targets: a pid (its socket in the per-user directory), unix:PATH, or
 * tcp://HOST:PORT.  Reading keeps the raw bytes of the frame returned
 * last (l->rec) until the next call; bytes of a record still arriving are
 * kept too, so nothing is copied twice.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "live.h"
#include "weft/wire.h"

uint64_t tt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* "30s", "500ms", "2m", "1h", or seconds; 0 for a bad value. */
uint64_t tt_parse_duration_ms(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v <= 0 || v > 1e7)
		return 0;
	if (!*end || !strcmp(end, "s"))
		return (uint64_t)(v * 1000);
	if (!strcmp(end, "ms"))
		return (uint64_t)v;
	if (!strcmp(end, "m"))
		return (uint64_t)(v * 60000);
	if (!strcmp(end, "h"))
		return (uint64_t)(v * 3600000);
	return 0;
}

static void live_init(tt_live_t *l, const char *what)
{
	memset(l, 0, sizeof(*l));
	l->fd = -1;
	snprintf(l->what, sizeof(l->what), "%s", what);
	weft_wire_decoder_init(&l->dec, 0);
}

/* Return: 0, or a negative errno (@l is then closed). */
int tt_live_connect_unix(tt_live_t *l, const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int err;

	live_init(l, path);
	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, path);
	l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l->fd < 0)
		return -errno;
	if (connect(l->fd, (struct sockaddr *)&sun, sizeof(sun))) {
		err = -errno;
		tt_live_close(l);
		return err;
	}
	return 0;
}

static int connect_tcp(tt_live_t *l, const char *hostport)
{
	char host[256];
	const char *colon = strrchr(hostport, ':');
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	size_t hl;
	int err = -ECONNREFUSED;

	live_init(l, hostport);
	if (!colon || !colon[1])
		return -EINVAL;
	hl = (size_t)(colon - hostport);
	if (hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, hostport, hl);
	host[hl] = '\0';
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = '\0';
	}
	if (getaddrinfo(host[0] ? host : "127.0.0.1", colon + 1, &hints, &res))
		return -EINVAL;
	for (ai = res; ai; ai = ai->ai_next) {
		l->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
			       ai->ai_protocol);
		if (l->fd < 0)
			continue;
		if (connect(l->fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			err = 0;
			break;
		}
		err = -errno;
		close(l->fd);
		l->fd = -1;
	}
	freeaddrinfo(res);
	return err;
}

/*
 * tt_live_connect() - connect to a pid, unix:PATH or tcp://HOST:PORT.
 * @die: on failure, print one line and exit 2 (else return the error).
 */
int tt_live_connect(tt_live_t *l, const char *target, bool die)
{
	char dir[256], path[300];
	char *end;
	long pid;
	int err;

	if (!strncmp(target, "unix:", 5)) {
		err = tt_live_connect_unix(l, target + 5);
	} else if (!strncmp(target, "tcp://", 6)) {
		err = connect_tcp(l, target + 6);
		if (err == -EINVAL && die)
			tt_die("bad address '%s' (tcp://HOST:PORT)", target);
	} else {
		pid = strtol(target, &end, 10);
		if (!*target || *end || pid <= 0)
			tt_die("bad target '%s' (a pid, unix:PATH or "
			       "tcp://HOST:PORT)",
			       target);
		err = weft_wire_socket_dir(dir, sizeof(dir), 0);
		if (!err) {
			snprintf(path, sizeof(path), "%s/%ld.sock", dir, pid);
			err = tt_live_connect_unix(l, path);
		}
	}
	if (err && die)
		tt_die("cannot connect to %s: %s", target, strerror(-err));
	return err;
}

void tt_live_close(tt_live_t *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	weft_wire_decoder_fini(&l->dec);
	free(l->buf);
	l->buf = NULL;
}

/* Forgets the bytes before what the decoder still needs. */
static void compact(tt_live_t *l)
{
	size_t keep_from = l->feed;

	if (weft_wire_decoder_mid_record(&l->dec))
		keep_from = (size_t)(l->dec.record_offset - l->base);
	if (!keep_from)
		return;
	memmove(l->buf, l->buf + keep_from, l->len - keep_from);
	l->len -= keep_from;
	l->feed -= keep_from;
	l->base += keep_from;
}

/*
 * tt_live_next() - the next frame, within @ms (-1: no limit).
 * Return: 1 with *f set (and l->rec, l->rec_len its record); 0 on
 * timeout; -1 when the server closed the connection.  A stream that does
 * not decode ends the program (exit 2).
 */
int tt_live_next(tt_live_t *l, int ms, Weft__V1__Frame **f)
{
	uint64_t until = ms < 0 ? UINT64_MAX : tt_now_ms() + (uint64_t)ms;

	*f = NULL;
	l->rec = NULL;
	l->rec_len = 0;
	compact(l);
	for (;;) {
		struct pollfd pfd = { .fd = l->fd, .events = POLLIN };
		uint64_t now;
		size_t used;
		ssize_t n;
		int rc;

		while (l->feed < l->len) {
			rc = weft_wire_decoder_feed(&l->dec, l->buf + l->feed,
						     l->len - l->feed, &used,
						     f);
			l->feed += used;
			if (rc < 0)
				tt_die("%s: bad record at offset %llu: %s",
				       l->what,
				       (unsigned long long)l->dec.record_offset,
				       weft_wire_strerror(rc));
			if (rc == WEFT_WIRE_FRAME) {
				l->rec = l->buf +
					 (l->dec.record_offset - l->base);
				l->rec_len = (size_t)(l->dec.offset -
						      l->dec.record_offset);
				return 1;
			}
		}
		if (l->eof)
			return -1;
		now = tt_now_ms();
		if (now >= until)
			return 0;
		rc = poll(&pfd, 1,
			  until == UINT64_MAX ? -1 :
			  until - now > 1000  ? 1000 :
						(int)(until - now));
		if (rc < 0 && errno != EINTR)
			tt_die("%s: poll: %s", l->what, strerror(errno));
		if (rc <= 0)
			continue;
		if (l->cap - l->len < 65536) {
			size_t cap = l->cap ? l->cap * 2 : 1u << 17;

			l->buf = tt_xrealloc(l->buf, cap);
			l->cap = cap;
		}
		n = read(l->fd, l->buf + l->len, l->cap - l->len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			l->eof = true;
			continue;
		}
		l->len += (size_t)n;
	}
}

void tt_live_send(tt_live_t *l, const Weft__V1__Frame *f)
{
	weft_wire_buf_t b = { 0 };
	size_t off = 0;

	if (weft_wire_record_append(&b, f))
		tt_die("out of memory");
	while (off < b.len) {
		ssize_t n = write(l->fd, b.data + off, b.len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			tt_die("%s: write: %s", l->what, strerror(errno));
		off += (size_t)n;
	}
	weft_wire_buf_fini(&b);
}
