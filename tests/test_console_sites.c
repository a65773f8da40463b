/* SPDX-License-Identifier: MIT */
/*
 * The console names tasks by their spawn sites (weft.proto's Site): the
 * records a delta stream writes (a Task naming its site, the site once,
 * with the first record naming it) build the same named tasks read from
 * their bytes over a real unix socket (console/live.c) as unpacked by
 * protobuf-c (con_model_frame(): the replay's path); a record naming a
 * site not met leaves its task unnamed, counted; a model copied, packed,
 * or saved and loaded (the replay's checkpoints, its side index) keeps
 * the sites, so records after it that name a site met before it are
 * named.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "test_helpers.h"

#include "console.h"
#include "weft/wire.h"

#define SEC 1000000000ull

static void put_header(weft_wire_buf_t *b)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__FileHeader h = WEFT__V1__FILE_HEADER__INIT;
	Weft__V1__Hello hello = WEFT__V1__HELLO__INIT;

	hello.pid = 4242;
	hello.process_name = "svc";
	hello.workers = 2;
	hello.start_ns = 1 * SEC;
	h.magic = "WEFTTRC1";
	h.hello = &hello;
	f.body_case = WEFT__V1__FRAME__BODY_HEADER;
	f.header = &h;
	assert_int_equal(weft_wire_record_append(b, &f), 0);
}

/*
 * Update @k, as the encoder writes it: @k 0 carries site 3 and names it
 * (task 1), names site 9 never sent (task 2), and has task 3 with its own
 * strings and no site (an old file's); @k 1 names site 3 again, without
 * it (task 4).
 */
static void put_update(weft_wire_buf_t *b, unsigned k)
{
	weft_probe_stats_t st = { .now_ns = (2 + k) * SEC, .workers = 2 };
	weft_probe_task_t t[3] = {
		{ .id = 1, .site = 3, .polls = 1, .spawned_ns = SEC },
		{ .id = 2, .site = 9, .polls = 2, .spawned_ns = SEC },
		{ .id = 3,
		  .name = "old",
		  .file = "old.c",
		  .line = 4,
		  .state_size = 8,
		  .polls = 3,
		  .spawned_ns = SEC },
	};
	weft_probe_task_t t4 = {
		.id = 4, .site = 3, .polls = 4, .spawned_ns = 2 * SEC
	};
	const weft_probe_task_t *tp[3] = { &t[0], &t[1], &t[2] };
	const weft_probe_task_t *tp4[1] = { &t4 };
	weft_probe_update_t u = { .stats = &st, .tasks = tp, .ntasks = 3 };
	weft_wire_site_t s = { .id = 3,
			       .name = "three",
			       .file = "3.c",
			       .line = 33,
			       .state_size = 300 };

	if (k) {
		u.tasks = tp4;
		u.ntasks = 1;
	}
	assert_int_equal(weft_wire_update_append_sites(b, &u, &s, k == 0, 0, 0,
						       NULL),
			 0);
}

/* More tasks, named by their records: a model the size of a replay's
 * checkpoints (a few tasks' packed bytes are fewer than their table's
 * room, which con_model_unpack() takes for a lie). */
static void put_fillers(weft_wire_buf_t *b)
{
	enum { N = 400 };
	weft_probe_stats_t st = { .now_ns = 2 * SEC, .workers = 2 };
	static weft_probe_task_t t[N];
	static const weft_probe_task_t *tp[N];
	weft_probe_update_t u = { .stats = &st, .tasks = tp, .ntasks = N };

	for (size_t i = 0; i < N; i++) {
		t[i] = (weft_probe_task_t){ .id = 1000 + i,
					    .name = "filler",
					    .file = "fill.c",
					    .polls = i,
					    .spawned_ns = SEC };
		tp[i] = &t[i];
	}
	assert_int_equal(weft_wire_update_append(b, &u, 0), 0);
}

static void feed_frames(con_model_t *m, const weft_wire_buf_t *b)
{
	weft_wire_decoder_t d;
	size_t off = 0;

	weft_wire_decoder_init(&d, 0);
	while (off < b->len) {
		Weft__V1__Frame *f = NULL;
		size_t used = 0;
		int rc = weft_wire_decoder_feed(&d, b->data + off, b->len - off,
						&used, &f);

		off += used;
		assert_true(rc >= 0);
		if (rc == WEFT_WIRE_FRAME) {
			con_model_frame(m, f);
			weft_wire_frame_free(f);
		}
	}
	weft_wire_decoder_fini(&d);
}

/* @b served to a console connection over a unix socket, pumped into @m. */
static void feed_live(con_model_t *m, const weft_wire_buf_t *b)
{
	char dir[] = "/tmp/weft-console-sites-XXXXXX", target[160];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	con_live_t l;
	int srv, c;
	uint64_t until;

	assert_non_null(mkdtemp(dir));
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/s.sock", dir);
	srv = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(srv >= 0);
	assert_int_equal(bind(srv, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(srv, 1), 0);
	snprintf(target, sizeof(target), "unix:%s", sun.sun_path);
	assert_int_equal(con_live_init(&l, target), 0);
	assert_int_equal(con_live_connect(&l), 0);
	c = accept(srv, NULL, NULL);
	assert_true(c >= 0);
	assert_int_equal(write(c, b->data, b->len), (ssize_t)b->len);
	close(c);
	until = con_live_now_ms() + 10000;
	while (l.connected && con_live_now_ms() < until)
		(void)con_live_pump(&l, m, until);
	/* Every Update read from its bytes, none by protobuf-c. */
	assert_int_equal(l.raw_refused, 0);
	con_live_fini(&l);
	close(srv);
	unlink(sun.sun_path);
	rmdir(dir);
}

static bool unnamed(const con_task_t *t)
{
	return !t->name || !t->name[0];
}

/* Tasks 1 (and 4 when @four) named by site 3, 2 unnamed, 3 its own. */
static void check_named(const con_model_t *m, bool four)
{
	const con_task_t *t;

	assert_non_null(t = con_model_task(m, 1));
	assert_string_equal(t->name, "three");
	assert_string_equal(t->file, "3.c");
	assert_int_equal(t->line, 33);
	assert_int_equal(t->state_size, 300);
	assert_non_null(t = con_model_task(m, 2));
	assert_true(unnamed(t));
	assert_non_null(t = con_model_task(m, 3));
	assert_string_equal(t->name, "old");
	assert_string_equal(t->file, "old.c");
	assert_int_equal(t->state_size, 8);
	if (!four)
		return;
	assert_non_null(t = con_model_task(m, 4));
	assert_string_equal(t->name, "three");
	assert_int_equal(t->line, 33);
	assert_int_equal(t->state_size, 300);
}

static void test_console_sites_live_and_replay(void **state)
{
	weft_wire_buf_t b = { 0 };
	con_model_t live, frames;

	(void)state;
	put_header(&b);
	put_update(&b, 0);
	put_update(&b, 1);
	con_model_init(&live, "live");
	con_model_init(&frames, "replay");
	feed_live(&live, &b);
	feed_frames(&frames, &b);
	check_named(&live, true);
	check_named(&frames, true);
	/* Task 2's site, never met: once each. */
	assert_int_equal(live.sites.unknown, 1);
	assert_int_equal(frames.sites.unknown, 1);
	con_model_fini(&live);
	con_model_fini(&frames);
	weft_wire_buf_fini(&b);
}

/* A model taken after the first update (a replay checkpoint): the second
 * update's task, naming site 3 without it, is named there too. */
static void test_console_sites_kept_by_checkpoints(void **state)
{
	weft_wire_buf_t first = { 0 }, second = { 0 };
	con_model_t m, copy, loaded, unpacked;
	con_saved_t saved;
	con_packed_t pk;

	(void)state;
	put_header(&first);
	put_update(&first, 0);
	put_fillers(&first);
	put_update(&second, 1);
	con_model_init(&m, "replay");
	feed_frames(&m, &first);
	con_model_clone(&copy, &m);
	con_model_save(&saved, &m);
	assert_true(con_model_load(&loaded, saved.p, saved.len));
	con_model_pack(&pk, &m);
	assert_true(con_model_unpack(&unpacked, &pk));
	con_model_t *all[] = { &m, &copy, &loaded, &unpacked };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		assert_int_equal(all[i]->sites.n, 1);
		feed_frames(all[i], &second);
		check_named(all[i], true);
		con_model_fini(all[i]);
	}
	/* Saved bytes cut short do not load. */
	assert_false(con_model_load(&loaded, saved.p, saved.len - 1));
	con_saved_free(&saved);
	con_packed_free(&pk);
	weft_wire_buf_fini(&first);
	weft_wire_buf_fini(&second);
}

/*
 * Update @k of a stream whose site 3 changes its strings each update
 * (the same lengths: the new copies may take the old ones' addresses):
 * task 10 + @k, named by it, and the site.
 */
static void put_site_changed(weft_wire_buf_t *b, unsigned k)
{
	static const char *const names[] = { "three", "THREE", "Three" };
	static const char *const files[] = { "3.c", "4.c", "5.c" };
	weft_probe_stats_t st = { .now_ns = (2 + k) * SEC, .workers = 2 };
	weft_probe_task_t t = { .id = 10 + k,
				.site = 3,
				.polls = 1,
				.spawned_ns = SEC };
	const weft_probe_task_t *tp[1] = { &t };
	weft_probe_update_t u = { .stats = &st, .tasks = tp, .ntasks = 1 };
	weft_wire_site_t site = { .id = 3,
				  .name = names[k],
				  .file = files[k],
				  .line = 33 + k,
				  .state_size = 300 };

	assert_int_equal(weft_wire_update_append_sites(b, &u, &site, 1, 0, 0,
						       NULL),
			 0);
}

/*
 * A site sent again with other strings names the tasks after it with
 * them: the model finds a site's strings by their addresses in its sites
 * (model.c's str_ref_in()), which a site sent again frees and copies.
 */
static void test_console_sites_changed_strings(void **state)
{
	static const char *const names[] = { "three", "THREE", "Three" };
	static const char *const files[] = { "3.c", "4.c", "5.c" };
	weft_wire_buf_t b = { 0 };
	con_model_t live, frames;

	(void)state;
	put_header(&b);
	for (unsigned k = 0; k < 3; k++)
		put_site_changed(&b, k);
	con_model_init(&live, "live");
	con_model_init(&frames, "replay");
	feed_live(&live, &b);
	feed_frames(&frames, &b);
	for (unsigned k = 0; k < 3; k++) {
		const con_model_t *all[] = { &live, &frames };

		for (size_t i = 0; i < 2; i++) {
			const con_task_t *t = con_model_task(all[i], 10 + k);

			assert_non_null(t);
			assert_string_equal(t->name, names[k]);
			assert_string_equal(t->file, files[k]);
			assert_int_equal(t->line, 33 + k);
		}
	}
	con_model_fini(&live);
	con_model_fini(&frames);
	weft_wire_buf_fini(&b);
}

/*
 * A hello of another process (the live console reconnected to a
 * restarted one) forgets the sites: ids are each process's own, and a
 * task of the new one naming site 3 before its Site came is not named
 * by the old process's site 3.  The same process's hello again keeps
 * them.
 */
static void test_console_sites_another_process(void **state)
{
	weft_wire_buf_t first = { 0 }, second = { 0 };
	Weft__V1__Hello hello = WEFT__V1__HELLO__INIT;
	con_model_t m;

	(void)state;
	put_header(&first);
	put_update(&first, 0);
	put_update(&second, 1);
	con_model_init(&m, "live");
	feed_frames(&m, &first);
	assert_non_null(weft_wire_sites_get(&m.sites, 3));

	hello.pid = 4242; /* put_header()'s process again */
	hello.start_ns = 1 * SEC;
	con_model_hello(&m, &hello);
	assert_non_null(weft_wire_sites_get(&m.sites, 3));

	hello.pid = 4343; /* another */
	con_model_hello(&m, &hello);
	assert_null(weft_wire_sites_get(&m.sites, 3));
	feed_frames(&m, &second); /* task 4 names site 3, not sent */
	assert_non_null(con_model_task(&m, 4));
	assert_true(unnamed(con_model_task(&m, 4)));
	con_model_fini(&m);
	weft_wire_buf_fini(&first);
	weft_wire_buf_fini(&second);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_console_sites_live_and_replay),
		cmocka_unit_test(test_console_sites_kept_by_checkpoints),
		cmocka_unit_test(test_console_sites_changed_strings),
		cmocka_unit_test(test_console_sites_another_process),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
