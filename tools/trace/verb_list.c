/* SPDX-License-Identifier: MIT */
/*
 * weft-trace list: the live weft processes of this user, found through
 * the per-user socket directory.  A socket nobody answers on is skipped,
 * and removed if its process is gone (it died without removing it).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "live.h"
#include "weft/wire.h"

static const char usage[] =
	"usage: weft-trace list\n"
	"Lists the live weft processes of this user (pid, process name,\n"
	"workers, socket), from $XDG_RUNTIME_DIR/weft or /tmp/weft-UID.\n";

/* A stale socket whose process is gone (it crashed, or was killed) is
 * removed: the directory is ours, and nobody can be listening. */
static void forget_if_dead(const char *path, const char *name)
{
	char *end;
	long pid = strtol(name, &end, 10);

	if (pid > 0 && !strcmp(end, ".sock") && kill((pid_t)pid, 0) &&
	    errno == ESRCH)
		(void)unlink(path);
}

/* Return: true if @path answered with a hello (printed). */
static bool show(const char *path)
{
	const Weft__V1__Hello *h = NULL;
	Weft__V1__Frame *f = NULL;
	tt_live_t l;
	bool ok = false;

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
	char dir[256], path[600];
	struct dirent *e;
	DIR *d;
	int err;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		tt_die("list: unexpected argument '%s'", argv[i]);
	}
	err = weft_wire_socket_dir(dir, sizeof(dir), 0);
	if (err == -ENOENT) {
		printf("%-8s %-16s %7s  %s\n", "PID", "NAME", "WORKERS",
		       "SOCKET");
		return 0;
	}
	if (err)
		tt_die("list: socket directory %s: %s", dir,
		       err == -EPERM ? "not ours, or open to others: refused" :
				       strerror(-err));
	d = opendir(dir);
	if (!d)
		tt_die("list: %s: %s", dir, strerror(errno));
	printf("%-8s %-16s %7s  %s\n", "PID", "NAME", "WORKERS", "SOCKET");
	while ((e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);

		if (n < 6 || strcmp(e->d_name + n - 5, ".sock"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (!show(path))
			forget_if_dead(path, e->d_name);
	}
	closedir(d);
	return 0;
}
