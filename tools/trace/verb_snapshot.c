/* SPDX-License-Identifier: MIT */
/*
 * weft-trace snapshot TARGET -o FILE: ask a live process's flight
 * recorder (WEFT_TRACE_FLIGHT_MB or WEFT_TRACE_FLIGHT_S) for what it
 * keeps, through a Control frame, and write it to a trace file.  The server sends the records
 * then a Control SNAPSHOT frame that ends them (with an error, if any).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "live.h"

static const char usage[] =
	"usage: weft-trace snapshot TARGET -o FILE\n"
	"Writes the flight recorder of a live process (started with\n"
	"WEFT_TRACE_FLIGHT_MB=N and/or WEFT_TRACE_FLIGHT_S=SECONDS) to FILE:\n"
	"a header, every known task, then the kept records.  TARGET is a\n"
	"pid, unix:PATH or tcp://HOST:PORT.\n";

int tt_verb_snapshot(int argc, char **argv)
{
	const char *target = NULL, *out = NULL;
	Weft__V1__Frame req = WEFT__V1__FRAME__INIT, *f;
	Weft__V1__Control ctl = WEFT__V1__CONTROL__INIT;
	uint64_t bytes = 0;
	tt_live_t l;
	int fd = -1, rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			out = argv[++i];
		} else if (argv[i][0] == '-' || target) {
			tt_die("snapshot: unexpected argument '%s'", argv[i]);
		} else {
			target = argv[i];
		}
	}
	if (!target)
		tt_die("snapshot: no TARGET (weft-trace snapshot --help)");
	if (!out)
		tt_die("snapshot: no -o FILE (weft-trace snapshot --help)");
	tt_live_connect(&l, target, true);
	rc = tt_live_next(&l, 5000, &f);
	if (rc != 1 || f->body_case != WEFT__V1__FRAME__BODY_HEADER)
		tt_die("snapshot: %s: no header from the server", target);
	weft_wire_frame_free(f);

	ctl.op = WEFT__V1__CONTROL_OP__CONTROL_OP_SNAPSHOT;
	req.body_case = WEFT__V1__FRAME__BODY_CONTROL;
	req.control = &ctl;
	tt_live_send(&l, &req);
	for (;;) {
		rc = tt_live_next(&l, 30000, &f);
		if (rc != 1)
			tt_die("snapshot: %s: %s", target,
			       rc ? "connection closed" : "no reply");
		if (f->body_case == WEFT__V1__FRAME__BODY_CONTROL &&
		    f->control->op ==
			    WEFT__V1__CONTROL_OP__CONTROL_OP_SNAPSHOT) {
			if (f->control->error && f->control->error[0]) {
				fprintf(stderr,
					"weft-trace: snapshot: %s: %s\n",
					target, f->control->error);
				exit(1);
			}
			weft_wire_frame_free(f);
			break;
		}
		if (fd < 0) {
			fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				  0644);
			if (fd < 0)
				tt_die("snapshot: %s: %s", out,
				       strerror(errno));
		}
		for (size_t off = 0; off < l.rec_len;) {
			ssize_t w = write(fd, l.rec + off, l.rec_len - off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				fprintf(stderr,
					"weft-trace: snapshot: %s: %s\n", out,
					strerror(errno));
				exit(1);
			}
			off += (size_t)w;
		}
		bytes += l.rec_len;
		weft_wire_frame_free(f);
	}
	tt_live_close(&l);
	if (fd >= 0 && close(fd)) {
		fprintf(stderr, "weft-trace: snapshot: %s: %s\n", out,
			strerror(errno));
		return 1;
	}
	fprintf(stderr, "wrote %s: %llu bytes\n", out,
		(unsigned long long)bytes);
	return 0;
}
