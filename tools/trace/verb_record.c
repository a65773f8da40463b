/* SPDX-License-Identifier: MIT */
/*
 * weft-trace record TARGET -o FILE [--duration D]: attach to a live
 * process and write what its server sends (the header first, then
 * updates and event batches) to a trace file, records exactly as they
 * came.  Only whole records reach the file, so stopping at any moment
 * (the duration, ^C, the process exiting) leaves a valid trace.
 *
 * Checkpoint marks, as the in-process recorder writes them
 * (probe/src/recorder_ckpt.c; weft/wire.h, weft_wire_ckpt_*), so that a
 * replay of a long recording seeks at once: every full update the
 * server sends is held until its records end (the first record, full
 * set, and the records without stats right after it), then written
 * after a mark that names its time, its offset, the previous mark's and
 * its length.  Once the file has grown --checkpoint-every bytes (16 MiB
 * by default) past the last mark, and 32 times that mark's full update,
 * the tool subscribes again: the server owes it, and sends it alone, a
 * full update (a resync; the process's other clients see nothing of
 * it).  A full update streamed in parts (over 4,096 tasks) has its
 * first part after the mark and the rest later, as the server sends it:
 * a replay from the mark names the tasks of the rest as it reads them.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "live.h"

static const char usage[] =
	"usage: weft-trace record TARGET -o FILE [--duration D] [--quiet]\n"
	"                         [--checkpoint-every SIZE]\n"
	"Records a live process to a trace file until D passes (30s, 500ms,\n"
	"2m; default: until ^C or the process goes).  TARGET is a pid,\n"
	"unix:PATH or tcp://HOST:PORT.  Progress (events/s, bytes written)\n"
	"goes to stderr once a second.  A checkpoint (a full update after a\n"
	"mark, for replay to seek from) every SIZE of file (16M by default;\n"
	"K, M, G suffixes; 0: none but the first).\n";

/* The spacing of marks: at least this times the last full update. */
#define CKPT_RATIO 32u
/* A full update held at most this long: what a server sends past it
 * goes to the file after the mark, as the rest of a streamed one does
 * (memory bounded whatever the server sends). */
#define HOLD_MAX (64u << 20)

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* "16M", "512K", "0": bytes, or UINT64_MAX when not a size. */
static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;

	if (!isdigit((unsigned char)s[0]))
		return UINT64_MAX;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || v > (1ull << 40))
		return UINT64_MAX;
	switch (*end) {
	case 'K':
		v <<= 10, end++;
		break;
	case 'M':
		v <<= 20, end++;
		break;
	case 'G':
		v <<= 30, end++;
		break;
	}
	return *end ? UINT64_MAX : v;
}

static void write_all(int fd, const uint8_t *p, size_t n, const char *path)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			fprintf(stderr, "weft-trace: record: %s: %s\n", path,
				strerror(errno));
			exit(1);
		}
		p += w;
		n -= (size_t)w;
	}
}

/* A full update held until its records end, and the marks so far. */
struct ckpt {
	uint64_t every;   /* bytes between marks, at least; 0: none */
	uint64_t due;     /* the file offset that asks for the next */
	uint64_t last;    /* the last mark's offset (0: none yet) */
	uint64_t time_ns; /* the held update's now */
	bool asked, held;
	unsigned marks;
	weft_wire_buf_t buf; /* the held update's records */
};

/* The held full update, after its mark, at file offset *@bytes. */
static void ckpt_flush(struct ckpt *k, int fd, uint64_t *bytes,
		       const char *path)
{
	weft_wire_ckpt_t c = { .time_ns = k->time_ns,
			       .offset = *bytes,
			       .prev = k->last,
			       .full_bytes = k->buf.len };
	uint8_t mark[WEFT_WIRE_CKPT_LEN];
	uint64_t gap;

	if (!k->held)
		return;
	weft_wire_ckpt_put(mark, &c);
	write_all(fd, mark, sizeof(mark), path);
	write_all(fd, k->buf.data, k->buf.len, path);
	k->last = *bytes;
	*bytes += sizeof(mark) + k->buf.len;
	gap = (uint64_t)CKPT_RATIO * k->buf.len;
	k->due = *bytes + (k->every > gap ? k->every : gap);
	k->buf.len = 0;
	k->held = false;
	k->marks++;
}

/*
 * Frame @f, whose record is @l's, into the file at *@bytes: held while
 * it is, or starts, a full update (ckpt_flush() writes it when its
 * records end).
 */
static void put_frame(struct ckpt *k, const tt_live_t *l,
		      const Weft__V1__Frame *f, int fd, uint64_t *bytes,
		      const char *path)
{
	const Weft__V1__Update *u =
		f->body_case == WEFT__V1__FRAME__BODY_UPDATE ? f->update : NULL;

	if (k->held && u && !u->full && !u->stats &&
	    k->buf.len + l->rec_len <= HOLD_MAX) {
		/* More of the held update (a record past the size cap). */
		if (weft_wire_buf_reserve(&k->buf, l->rec_len))
			tt_die("record: out of memory");
		memcpy(k->buf.data + k->buf.len, l->rec, l->rec_len);
		k->buf.len += l->rec_len;
		return;
	}
	ckpt_flush(k, fd, bytes, path);
	if (u && u->full) {
		if (weft_wire_buf_reserve(&k->buf, l->rec_len))
			tt_die("record: out of memory");
		memcpy(k->buf.data, l->rec, l->rec_len);
		k->buf.len = l->rec_len;
		k->time_ns = u->stats ? u->stats->now_ns : 0;
		k->held = true;
		k->asked = false;
		return;
	}
	write_all(fd, l->rec, l->rec_len, path);
	*bytes += l->rec_len;
}

int tt_verb_record(int argc, char **argv)
{
	const char *target = NULL, *out = NULL;
	uint64_t duration = 0, start, last, events = 0, last_events = 0;
	uint64_t bytes = 0, frames = 0;
	Weft__V1__Frame sub_frame = WEFT__V1__FRAME__INIT, *f;
	Weft__V1__Subscribe sub = WEFT__V1__SUBSCRIBE__INIT;
	struct sigaction sa = { .sa_handler = on_signal };
	bool quiet = false, tty = isatty(2);
	struct ckpt k = { .every = 16u << 20 };
	tt_live_t l;
	int fd, rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			out = argv[++i];
		} else if (!strcmp(argv[i], "--duration") && i + 1 < argc) {
			duration = tt_parse_duration_ms(argv[++i]);
			if (!duration)
				tt_die("record: bad duration '%s' (30s, "
				       "500ms, 2m)",
				       argv[i]);
		} else if (!strcmp(argv[i], "--checkpoint-every") &&
			   i + 1 < argc) {
			k.every = parse_size(argv[++i]);
			if (k.every == UINT64_MAX)
				tt_die("record: bad size '%s' (16M, 512K, 0)",
				       argv[i]);
		} else if (!strcmp(argv[i], "--quiet")) {
			quiet = true;
		} else if (argv[i][0] == '-' || target) {
			tt_die("record: unexpected argument '%s'", argv[i]);
		} else {
			target = argv[i];
		}
	}
	if (!target)
		tt_die("record: no TARGET (weft-trace record --help)");
	if (!out)
		tt_die("record: no -o FILE (weft-trace record --help)");
	tt_live_connect(&l, target, true);

	/* The server speaks first: the header that starts the file. */
	rc = tt_live_next(&l, 5000, &f);
	if (rc != 1 || f->body_case != WEFT__V1__FRAME__BODY_HEADER)
		tt_die("record: %s: no header from the server", target);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		tt_die("record: %s: %s", out, strerror(errno));
	write_all(fd, l.rec, l.rec_len, out);
	bytes += l.rec_len;
	weft_wire_frame_free(f);

	sub.updates = true;
	sub.events = true;
	sub_frame.body_case = WEFT__V1__FRAME__BODY_SUBSCRIBE;
	sub_frame.subscribe = &sub;
	tt_live_send(&l, &sub_frame);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	start = last = tt_now_ms();
	while (!stop) {
		uint64_t now = tt_now_ms();
		int wait = 200;

		if (duration) {
			if (now - start >= duration)
				break;
			if (duration - (now - start) < (uint64_t)wait)
				wait = (int)(duration - (now - start));
		}
		rc = tt_live_next(&l, wait, &f);
		if (rc < 0)
			break; /* the process went */
		if (rc == 1) {
			if (f->body_case == WEFT__V1__FRAME__BODY_EVENTS)
				events += f->events->count;
			put_frame(&k, &l, f, fd, &bytes, out);
			frames++;
			weft_wire_frame_free(f);
		}
		/* Time for a checkpoint: the same subscription again, for
		 * a full update of ours (asked once until it comes). */
		if (k.every && k.marks && !k.asked && !k.held &&
		    bytes >= k.due) {
			tt_live_send(&l, &sub_frame);
			k.asked = true;
		}
		now = tt_now_ms();
		if (!quiet && now - last >= 1000) {
			fprintf(stderr,
				"%srecording %s: %.0f events/s, %llu events, "
				"%.2f MiB written%s",
				tty ? "\r" : "", target,
				(double)(events - last_events) * 1000.0 /
					(double)(now - last),
				(unsigned long long)events,
				(double)bytes / (1 << 20), tty ? "" : "\n");
			last = now;
			last_events = events;
		}
	}
	ckpt_flush(&k, fd, &bytes, out);
	weft_wire_buf_fini(&k.buf);
	tt_live_close(&l);
	if (close(fd)) {
		fprintf(stderr, "weft-trace: record: %s: %s\n", out,
			strerror(errno));
		return 1;
	}
	if (!quiet)
		fprintf(stderr,
			"%swrote %s: %llu frames, %llu events, %llu bytes, "
			"%u checkpoints\n",
			tty ? "\n" : "", out, (unsigned long long)frames,
			(unsigned long long)events, (unsigned long long)bytes,
			k.marks);
	return 0;
}
