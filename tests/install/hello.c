/* SPDX-License-Identifier: MIT */
/*
 * The smallest program against an installed libweft: two workers, one task
 * that yields once and returns a value, joined from main.  Prints "ok", and
 * nothing else, when the value comes back.  Built out of tree by
 * tools/install-test.sh, with pkg-config and with find_package(weft),
 * against the shared and the static library.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <weft/weft.h>

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

int main(void)
{
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
	printf("ok\n");

out_destroy:
	weft_runtime_destroy(rt);
	return err ? 1 : 0;
}
