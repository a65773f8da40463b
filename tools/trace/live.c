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
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "live.h"
#include "weft/wire.h"

uint64_t tt_now_ms(void)
{
	return weft_wire_now_ns() / 1000000u;
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
	live_init(l, path);
	l->fd = weft_wire_connect_unix(path);
	if (l->fd < 0) {
		int err = l->fd;

		tt_live_close(l);
		return err;
	}
	return 0;
}

/*
 * tt_live_connect() - connect to a pid, unix:PATH or tcp://HOST:PORT.
 * @die: on failure, print one line and exit 2 (else return the error).
 */
int tt_live_connect(tt_live_t *l, const char *target, bool die)
{
	int fd;

	live_init(l, target);
	fd = weft_wire_connect(target);
	if (fd == -EINVAL && die)
		tt_die("bad target '%s' (a pid, unix:PATH or tcp://HOST:PORT)",
		       target);
	if (fd < 0) {
		tt_live_close(l);
		if (die) {
			char why[512];

			tt_die("cannot connect to %s: %s", target,
			       weft_wire_connect_why(target, fd, why,
						     sizeof(why)));
		}
		return fd;
	}
	l->fd = fd;
	return 0;
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
	int err = weft_wire_send(l->fd, f);

	if (err == -ENOMEM)
		tt_die("out of memory");
	if (err)
		tt_die("%s: write: %s", l->what, strerror(-err));
}
