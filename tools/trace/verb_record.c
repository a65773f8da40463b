/* SPDX-License-Identifier: MIT */
/*
 * weft-trace record TARGET -o FILE [--duration D]: attach to a live
 * process and write what its server sends (the header first, then
 * updates and event batches) to a trace file, records exactly as they
 * came.  Only whole records reach the file, so stopping at any moment
 * (the duration, ^C, the process exiting) leaves a valid trace.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "live.h"

static const char usage[] =
	"usage: weft-trace record TARGET -o FILE [--duration D] [--quiet]\n"
	"Records a live process to a trace file until D passes (30s, 500ms,\n"
	"2m; default: until ^C or the process goes).  TARGET is a pid,\n"
	"unix:PATH or tcp://HOST:PORT.  Progress (events/s, bytes written)\n"
	"goes to stderr once a second.\n";

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
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

int tt_verb_record(int argc, char **argv)
{
	const char *target = NULL, *out = NULL;
	uint64_t duration = 0, start, last, events = 0, last_events = 0;
	uint64_t bytes = 0, frames = 0;
	Weft__V1__Frame sub_frame = WEFT__V1__FRAME__INIT, *f;
	Weft__V1__Subscribe sub = WEFT__V1__SUBSCRIBE__INIT;
	struct sigaction sa = { .sa_handler = on_signal };
	bool quiet = false, tty = isatty(2);
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
			write_all(fd, l.rec, l.rec_len, out);
			bytes += l.rec_len;
			frames++;
			weft_wire_frame_free(f);
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
	tt_live_close(&l);
	if (close(fd)) {
		fprintf(stderr, "weft-trace: record: %s: %s\n", out,
			strerror(errno));
		return 1;
	}
	if (!quiet)
		fprintf(stderr,
			"%swrote %s: %llu frames, %llu events, %llu bytes\n",
			tty ? "\n" : "", out, (unsigned long long)frames,
			(unsigned long long)events, (unsigned long long)bytes);
	return 0;
}
