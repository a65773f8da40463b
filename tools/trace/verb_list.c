/* SPDX-License-Identifier: MIT */
/*
 * weft-trace list: the live weft processes of this user, found through
 * the per-user socket directory.  A socket nobody answers on is skipped,
 * and removed if its process is gone (it died without removing it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "live.h"
#include "weft/wire.h"

static const char usage[] =
	"usage: weft-trace list\n"
	"Lists the live weft processes of this user (pid, process name,\n"
	"workers, socket), from $XDG_RUNTIME_DIR/weft or /tmp/weft-UID.\n";

/* Return: true if @path answered with a hello (printed). */
static int show(const char *path, void *arg)
{
	const Weft__V1__Hello *h = NULL;
	Weft__V1__Frame *f = NULL;
	tt_live_t l;
	bool ok = false;

	(void)arg;
	if (tt_live_connect_unix(&l, path))
		return false; /* stale: nobody listens */
	if (tt_live_next(&l, 1000, &f) == 1) {
		if (f->body_case == WEFT__V1__FRAME__BODY_HEADER)
			h = f->header->hello;
		else if (f->body_case == WEFT__V1__FRAME__BODY_HELLO)
			h = f->hello;
		if (h) {
			printf("%-8u %-16s %7u  %s\n", h->pid, h->process_name,
			       h->workers, path);
			ok = true;
		}
	}
	weft_wire_frame_free(f);
	tt_live_close(&l);
	return ok;
}

int tt_verb_list(int argc, char **argv)
{
	char dir[256];
	int err;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		tt_die("list: unexpected argument '%s'", argv[i]);
	}
	printf("%-8s %-16s %7s  %s\n", "PID", "NAME", "WORKERS", "SOCKET");
	err = weft_wire_each_socket(show, NULL);
	if (err && err != -ENOENT) {
		weft_wire_socket_dir(dir, sizeof(dir), 0);
		tt_die("list: socket directory %s: %s", dir,
		       err == -EPERM ? "not ours, or open to others: refused" :
				       strerror(-err));
	}
	return 0;
}
