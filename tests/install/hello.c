/* SPDX-License-Identifier: MIT */
/*
 * A small program against an installed libweft, from <weft/weft.h> alone:
 * two workers, one task that yields once and returns a value, joined from
 * main; a task spawned with a drop callback through the short form, which
 * takes a weft_mutex_t; the probe listened to, a trace recorded to a
 * file; and the library's version against the headers'.  Prints "ok", and nothing else, when all
 * of it holds.  Built out of tree by tools/install-test.sh, with
 * pkg-config and with find_package(weft), against the shared and the
 * static library.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/weft.h> /* and nothing else of weft */

#define ANSWER 42

struct answer {
	int weft_pc;
};

static weft_poll_t answer_poll(void *arg, weft_cx_t *cx)
{
	struct answer *a = arg;

	WEFT_ASYNC_BEGIN(a);
	WEFT_YIELD(a, cx);
	weft_cx_return(cx, (void *)(uintptr_t)ANSWER);
	WEFT_ASYNC_END(a);
}

static weft_mutex_t lock;
static int dropped;
static int updates; /* the probe's passes seen (under lock) */

static void on_update(void *ctx, const weft_probe_update_t *u)
{
	(void)ctx;
	(void)u;
	weft_mutex_lock(&lock);
	updates++;
	weft_mutex_unlock(&lock);
}

struct owner {
	char *buf;
};

static weft_poll_t owner_poll(void *arg, weft_cx_t *cx)
{
	struct owner *o = arg;

	(void)cx;
	weft_mutex_lock(&lock);
	o->buf[0] = 'w';
	weft_mutex_unlock(&lock);
	return WEFT_READY;
}

static void owner_drop(void *arg)
{
	struct owner *o = arg;

	free(o->buf);
	weft_mutex_lock(&lock);
	dropped++;
	weft_mutex_unlock(&lock);
}

/* The rest of the public API this test covers; 0 or a message. */
static const char *more(weft_runtime_t *rt)
{
	char path[] = "/tmp/weft-install-trace-XXXXXX";
	struct owner o = { malloc(8) };
	weft_probe_sub_t *sub;
	weft_join_t *join;
	int fd, err, recorded;

	if (weft_version() != WEFT_VERSION_HEX ||
	    strcmp(weft_version_string(), WEFT_VERSION_STRING))
		return "library and headers differ in version";
	if (!o.buf)
		return "malloc";
	weft_mutex_init(&lock, "install-lock");
	fd = mkstemp(path);
	if (fd < 0)
		return "mkstemp";
	close(fd);
	/* ENOTSUP: a library built without the probe; the rest holds. */
	err = weft_probe_subscribe(
		&(weft_probe_sub_opts_t){ .on_update = on_update }, &sub);
	if (err && err != -ENOTSUP)
		return "weft_probe_subscribe";
	if (!err) {
		weft_probe_flush();
		weft_mutex_lock(&lock);
		err = updates ? 0 : -1;
		weft_mutex_unlock(&lock);
		weft_probe_unsubscribe(sub);
		if (err)
			return "the probe did not call back after a flush";
	}
	err = weft_trace_start(path, NULL);
	if (err && err != -ENOTSUP)
		return "weft_trace_start";
	recorded = !err;
	if (weft_spawn_drop(rt, "owner", owner_poll, owner_drop, &o, &join))
		return "weft_spawn_drop";
	if (weft_join_wait(join, NULL))
		return "weft_join_wait (owner)";
	weft_join_drop(join);
	if (recorded && weft_trace_stop())
		return "weft_trace_stop";
	unlink(path);
	for (int i = 0; i < 1000; i++) {
		int n;

		weft_mutex_lock(&lock);
		n = dropped;
		weft_mutex_unlock(&lock);
		if (n == 1)
			return NULL;
		usleep(1000);
	}
	return "the drop callback did not run";
}

int main(void)
{
	const char *why;
	weft_config_t config = { .workers = 2 };
	weft_runtime_t *rt;
	weft_join_t *join;
	void *out = NULL;
	int err;

	err = weft_runtime_create(&config, &rt);
	if (err) {
		fprintf(stderr, "weft_runtime_create: %s\n", strerror(-err));
		return 1;
	}
	err = weft_spawn(rt, answer_poll, &(struct answer){ 0 }, &join);
	if (err) {
		fprintf(stderr, "weft_spawn: %s\n", strerror(-err));
		goto out_destroy;
	}
	err = weft_join_wait(join, &out);
	weft_join_drop(join);
	if (err) {
		fprintf(stderr, "weft_join_wait: %s\n", strerror(-err));
		goto out_destroy;
	}
	if ((uintptr_t)out != ANSWER) {
		fprintf(stderr, "task returned %ju, expected %d\n",
			(uintmax_t)(uintptr_t)out, ANSWER);
		err = -1;
		goto out_destroy;
	}
	why = more(rt);
	if (why) {
		fprintf(stderr, "%s\n", why);
		err = -1;
		goto out_destroy;
	}
	printf("ok\n");

out_destroy:
	weft_runtime_destroy(rt);
	return err ? 1 : 0;
}
