/* SPDX-License-Identifier: MIT */
/*
 * Live attach: a connection to a running process's probe server
 * (proto/weft.proto has the protocol).  Connect, expect the
 * FileHeader record first, send a Subscribe (updates and events), then
 * feed every frame to the model as it arrives, exactly as a replay does.
 *
 * The bytes come from whoever owns the loop: tty.c reads them with a
 * libevent bufferevent and hands them to con_live_feed(); --once and the
 * discovery of live processes read with con_live_pump(), a blocking
 * poll loop with a deadline.  Any failure (refused, closed, a record
 * that does not decode, a first frame that is not a header) closes the
 * connection with the reason in error; the caller retries.  The model
 * is never reset, so the last state stays on screen while disconnected
 * (the server's first update after a Subscribe is full).
 *
 * Targets: a pid (its socket in the per-user directory), unix:PATH,
 * tcp://HOST:PORT.  The discovery (con_live_discover) is a small copy of
 * weft-trace list's, which lives in the weft-trace program and exits on
 * bad input.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "console.h"

#include "weft/wire.h"

uint64_t con_live_now_ms(void)
{
	return weft_wire_now_ns() / 1000000u;
}

static void set_error(con_live_t *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_error(con_live_t *l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(l->error, sizeof(l->error), fmt, ap);
	va_end(ap);
}

int con_live_init(con_live_t *l, const char *target)
{
	char *end;
	long pid;

	memset(l, 0, sizeof(*l));
	l->fd = -1;
	if (!strncmp(target, "unix:", 5)) {
		if (!target[5])
			return -EINVAL;
	} else if (!strncmp(target, "tcp://", 6)) {
		const char *colon = strrchr(target + 6, ':');

		if (!colon || !colon[1])
			return -EINVAL;
	} else {
		pid = strtol(target, &end, 10);
		if (!*target || *end || pid <= 0)
			return -EINVAL;
	}
	l->target = con_xstrdup(target);
	return 0;
}

void con_live_fini(con_live_t *l)
{
	con_live_close(l, NULL);
	free(l->target);
	l->target = NULL;
	weft_wire_task_raw_fini(&l->task);
	weft_wire_buf_fini(&l->rest);
	free(l->ev);
	l->ev = NULL;
	l->ev_cap = 0;
	free(l->rbuf);
	l->rbuf = NULL;
}

static int send_subscribe(int fd)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Subscribe sub = WEFT__V1__SUBSCRIBE__INIT;

	sub.updates = true;
	sub.events = true;
	f.body_case = WEFT__V1__FRAME__BODY_SUBSCRIBE;
	f.subscribe = &sub;
	return weft_wire_send(fd, &f);
}

int con_live_request_task(con_live_t *l, uint64_t id)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Control ctl = WEFT__V1__CONTROL__INIT;

	if (!l->connected)
		return -ENOTCONN;
	ctl.op = WEFT__V1__CONTROL_OP__CONTROL_OP_TASK_DETAIL;
	ctl.task = id;
	f.body_case = WEFT__V1__FRAME__BODY_CONTROL;
	f.control = &ctl;
	return weft_wire_send(l->fd, &f);
}

/* The Frame's fields (proto/weft.proto) read from their bytes. */
#define FRAME_UPDATE 4
#define FRAME_EVENTS 5

/*
 * One task of the Update being read (weft_wire_update_walk_raw()).  The
 * tasks after it are found ahead (weft_wire_update_next_task_raw(), the
 * same tasks in the same order for bytes the walk takes) and what
 * applying each reads, its index slot, its place in tasks[] and its
 * record, is fetched 32, 16 and 8 tasks ahead: a task already known (a
 * record sent live, then finished) was a miss on each in turn, a third
 * of the time a task took (issue 21).  Only fetches: bytes the walk
 * reads otherwise fetch the wrong lines, nothing else.
 */
static int live_task(void *ctx, const uint8_t *p, size_t len)
{
	con_live_t *l = ctx;

	while (l->ahead_found < l->ahead_done + CON_LIVE_AHEAD && l->ahead) {
		size_t k = l->ahead_found % CON_LIVE_AHEAD;

		l->ahead_p[k] = weft_wire_update_next_task_raw(
			&l->ahead, l->ahead_end, &l->ahead_len[k]);
		if (!l->ahead_p[k]) {
			l->ahead = NULL;
			break;
		}
		l->ahead_found++;
	}
	for (int s = 0; s < 3; s++) {
		size_t at = l->ahead_done + ((CON_LIVE_AHEAD - 1) >> s);

		if (at < l->ahead_found)
			con_model_task_raw_ahead(
				l->feeding, l->ahead_p[at % CON_LIVE_AHEAD],
				l->ahead_len[at % CON_LIVE_AHEAD], s);
	}
	l->ahead_done++;
	return con_model_task_raw(l->feeding, &l->task, p, len);
}

/*
 * An Update read from its bytes: its tasks one at a time into l->task,
 * each applied as it comes (no protobuf-c, no allocation a task: issue
 * 21, the console's largest cost a task was unpacking and freeing
 * them), its other fields (stats, workers, warnings, resources: small,
 * one set an update) unpacked by protobuf-c and applied after.  Bytes
 * the hand decoders refuse go to protobuf-c whole, as before: the tasks
 * applied already are applied again, which changes nothing; a frame
 * protobuf-c refuses too closes the connection.
 */
static bool take_update(con_live_t *l, con_model_t *m, const uint8_t *p,
			size_t len)
{
	static const uint8_t none[1];
	Weft__V1__Update *u;

	l->ahead = p;
	l->ahead_end = p + len;
	l->ahead_found = l->ahead_done = 0;
	/* Its sites first: its tasks may name them. */
	con_sites_changed();
	if (weft_wire_update_walk_sites_raw(p, len, &m->sites) ||
	    weft_wire_update_walk_raw(p, len, &l->rest, live_task, l))
		return false;
	u = weft__v1__update__unpack(NULL, l->rest.len,
				     l->rest.len ? l->rest.data : none);
	if (!u)
		return false;
	con_model_update(m, u);
	weft__v1__update__free_unpacked(u, NULL);
	return true;
}

/* An EventBatch read from its bytes (con_model_frame()'s, without
 * protobuf-c); one it refuses goes to protobuf-c whole. */
static bool take_events(con_live_t *l, con_model_t *m, const uint8_t *p,
			size_t len)
{
	Weft__V1__EventBatch b;
	int got;

	if (!l->ev) {
		/* Untouched pages cost nothing: room for the largest. */
		l->ev = malloc(WEFT_WIRE_BATCH_MAX * sizeof(*l->ev));
		if (!l->ev)
			return false;
		l->ev_cap = WEFT_WIRE_BATCH_MAX;
	}
	got = weft_wire_batch_decode_raw(p, len, &b, l->ev, l->ev_cap);
	if (got < 0)
		return false;
	m->batches++;
	con_model_events(m, l->ev, (size_t)got);
	return true;
}

/*
 * The decoder's take hook: an Update or an EventBatch, once the header
 * came, is read here from the record's bytes and fed to the model; the
 * decoder then returns WEFT_WIRE_FRAME with no frame.  Anything else,
 * and any bytes the hand decoders refuse (counted in raw_refused), is
 * unpacked by protobuf-c as before: its errors close the connection with
 * the same reason.
 */
static bool live_take(void *ctx, const uint8_t *p, size_t n)
{
	con_live_t *l = ctx;
	const uint8_t *body;
	size_t len;
	uint32_t field;
	bool took;

	if (!l->feeding || !l->got_header)
		return false;
	field = weft_wire_frame_one_raw(p, n, &body, &len);
	if (field == FRAME_UPDATE)
		took = take_update(l, l->feeding, body, len);
	else if (field == FRAME_EVENTS)
		took = take_events(l, l->feeding, body, len);
	else
		return false;
	l->raw_refused += !took;
	return took;
}

static int live_open(con_live_t *l, bool subscribe)
{
	int fd, err;

	con_live_close(l, NULL);
	l->attempts++;
	fd = weft_wire_connect(l->target);
	if (fd < 0) {
		char why[512];

		set_error(l, "cannot connect: %s",
			  weft_wire_connect_why(l->target, fd, why,
						sizeof(why)));
		return fd;
	}
	if (subscribe) {
		err = send_subscribe(fd);
		if (err) {
			close(fd);
			set_error(l, "cannot subscribe: %s", strerror(-err));
			return err;
		}
	}
	con_live_begin(l, fd);
	return 0;
}

void con_live_begin(con_live_t *l, int fd)
{
	l->fd = fd;
	l->connected = true;
	l->got_header = false;
	l->error[0] = '\0';
	weft_wire_decoder_init(&l->dec, WEFT_WIRE_MAX_RECORD);
	l->dec.take = live_take;
	l->dec.take_ctx = l;
	/* One reader: a record longer than a read is put together in a
	 * buffer kept for the next (at most the record limit). */
	l->dec.keep_body = true;
}

int con_live_connect(con_live_t *l)
{
	return live_open(l, true);
}

void con_live_close(con_live_t *l, const char *why)
{
	if (why)
		set_error(l, "%s", why);
	if (!l->connected)
		return;
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	l->connected = false;
	weft_wire_decoder_fini(&l->dec);
}

int con_live_feed(con_live_t *l, con_model_t *m, const void *data, size_t len)
{
	const uint8_t *p = data;

	l->feeding = m;
	while (len) {
		Weft__V1__Frame *f = NULL;
		size_t used = 0;
		int rc = weft_wire_decoder_feed(&l->dec, p, len, &used, &f);

		p += used;
		len -= used;
		if (rc < 0) {
			l->feeding = NULL;
			set_error(l, "bad record at byte %llu: %s",
				  (unsigned long long)l->dec.record_offset,
				  weft_wire_strerror(rc));
			return rc;
		}
		if (rc != WEFT_WIRE_FRAME)
			continue;
		if (!f) { /* taken by live_take(), fed already */
			l->frames++;
			continue;
		}
		if (!l->got_header &&
		    f->body_case != WEFT__V1__FRAME__BODY_HEADER) {
			weft_wire_frame_free(f);
			l->feeding = NULL;
			set_error(l, "the server did not start with a header");
			return -EPROTO;
		}
		l->got_header = true;
		l->frames++;
		con_model_frame(m, f);
		weft_wire_frame_free(f);
	}
	l->feeding = NULL;
	return 0;
}

/*
 * con_live_pump()'s reads: up to CON_LIVE_READ bytes, and after one that
 * emptied the socket, a pause of CON_LIVE_GATHER_MS (never past the
 * deadline) before waiting for more, so that a busy process's stream
 * comes in a few large reads rather than one per collector pass: the
 * console was woken 220 times a second by a /fast-task process
 * (60,000 tasks a second), 42 KiB a read, each wake-up a poll, a read
 * and two context switches (issue 21: a fifth of its time in the
 * kernel).  The server keeps what a pause holds back (90 KiB at that
 * rate) in the client's buffer, 8 MiB at least (WEFT_CONSOLE_BUFFER_MB),
 * and the socket's.  A read under CON_LIVE_GATHER_MIN is a quiet stream's
 * (an idle process's updates): no pause, which would only be one more
 * wake-up.
 */
#define CON_LIVE_READ (256u << 10)
#define CON_LIVE_GATHER_MS 10u
#define CON_LIVE_GATHER_MIN (16u << 10)

int con_live_pump(con_live_t *l, con_model_t *m, uint64_t until_ms)
{
	bool gather = false;

	if (!l->rbuf)
		l->rbuf = con_xmalloc(CON_LIVE_READ);
	while (l->connected) {
		struct pollfd pfd = { .fd = l->fd, .events = POLLIN };
		uint64_t now = con_live_now_ms();
		ssize_t n;
		int rc;

		if (now >= until_ms)
			return 0;
		if (gather) {
			uint64_t ms = until_ms - now < CON_LIVE_GATHER_MS ?
					      until_ms - now :
					      CON_LIVE_GATHER_MS;

			gather = false;
			(void)poll(NULL, 0, (int)ms);
			continue;
		}
		rc = poll(&pfd, 1, (int)(until_ms - now));
		if (rc < 0 && errno != EINTR) {
			rc = -errno;
			con_live_close(l, "poll failed");
			return rc;
		}
		if (rc <= 0)
			continue;
		n = read(l->fd, l->rbuf, CON_LIVE_READ);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		/*
		 * Over TCP, a server closes unanswered for the token: a
		 * clean close, or a reset when our Hello was still unread
		 * in its socket as it closed.
		 */
		if ((n == 0 || (n < 0 && errno == ECONNRESET)) &&
		    !strncmp(l->target, "tcp://", 6) && !l->got_header) {
			con_live_close(l, "closed before the process's hello: "
					  "no token, or a wrong one? "
					  "(--token-file)");
			return -ECONNRESET;
		}
		if (n < 0) {
			rc = -errno;
			set_error(l, "connection lost: %s", strerror(errno));
			con_live_close(l, NULL);
			return rc;
		}
		if (n == 0) {
			bool tcp = !strncmp(l->target, "tcp://", 6);

			con_live_close(l, tcp && !l->got_header ?
						  "closed before the process's "
						  "hello: no token, or a wrong "
						  "one? (--token-file)" :
						  "connection lost: closed by "
						  "the process");
			return -ECONNRESET;
		}
		rc = con_live_feed(l, m, l->rbuf, (size_t)n);
		if (rc < 0) {
			con_live_close(l, NULL);
			return rc;
		}
		gather = (size_t)n < CON_LIVE_READ &&
			 (size_t)n >= CON_LIVE_GATHER_MIN;
	}
	return -ENOTCONN;
}

/* Return: true if @path answered with a header (its hello into @m). */
static bool probe_socket(const char *path, con_model_t *m)
{
	char target[620];
	con_live_t l;
	uint64_t until = con_live_now_ms() + 1000;
	bool ok;

	snprintf(target, sizeof(target), "unix:%s", path);
	if (con_live_init(&l, target))
		return false;
	if (live_open(&l, false)) {
		con_live_fini(&l);
		return false;
	}
	while (l.connected && !l.got_header && con_live_now_ms() < until)
		if (con_live_pump(&l, m,
				  until < con_live_now_ms() + 50 ?
					  until :
					  con_live_now_ms() + 50))
			break;
	ok = l.got_header && m->pid;
	con_live_fini(&l);
	return ok;
}

/* What discovery has found so far. */
typedef struct discover_s {
	char *target;
	size_t len;
	size_t found;
	FILE *out;
} discover_t;

static int discover_one(const char *path, void *arg)
{
	discover_t *dv = arg;
	con_model_t m;
	bool ok;

	con_model_init(&m, path);
	ok = probe_socket(path, &m);
	if (ok) {
		fprintf(dv->out, "%-8u %-16s %7u  %s\n", m.pid, m.process,
			m.nworkers, path);
		if (!dv->found)
			snprintf(dv->target, dv->len, "%u", m.pid);
		dv->found++;
	}
	con_model_fini(&m);
	return ok;
}

int con_live_discover(char *target, size_t len, FILE *list)
{
	discover_t dv = { .target = target, .len = len };
	char *lines = NULL;
	size_t lines_len = 0;
	int err;

	dv.out = open_memstream(&lines, &lines_len);
	if (!dv.out)
		con_die("out of memory");
	err = weft_wire_each_socket(discover_one, &dv);
	fclose(dv.out);
	if (!err && dv.found > 1 && list) {
		fprintf(list, "%-8s %-16s %7s  %s\n", "PID", "NAME", "WORKERS",
			"SOCKET");
		fputs(lines, list);
	}
	free(lines);
	if (err)
		return err;
	if (!dv.found)
		return -ENOENT;
	return dv.found == 1 ? 0 : -E2BIG;
}
