/* SPDX-License-Identifier: MIT */
/*
 * The console's live path (console/live.c) over a real unix socket: the
 * frames a server sends, Updates and EventBatches read from their bytes
 * (issue 21), build the same model as the same frames unpacked by
 * protobuf-c and fed to con_model_frame() (tasks with every field,
 * thin records, histograms, waits, finished tasks, workers, warnings,
 * resources, events); an Update the hand decoder refuses but protobuf-c
 * reads is applied as before and counted; a truncated or corrupt Update
 * is refused, counted, and closes the connection with the decoder's
 * reason, the model intact.
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

/* ------------------------------------------------------------- frames */

static void put(weft_wire_buf_t *b, const Weft__V1__Frame *f)
{
	assert_int_equal(weft_wire_record_append(b, f), 0);
}

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
	put(b, &f);
}

/* Update @k: tasks k*100+1 .. k*100+50 changed, the first half thin
 * after the first update, some finished, some with histograms, waits,
 * a place; workers, a warning and a resource. */
static void put_update(weft_wire_buf_t *b, unsigned k)
{
	enum { N = 50 };
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Update u = WEFT__V1__UPDATE__INIT;
	Weft__V1__Stats st = WEFT__V1__STATS__INIT;
	Weft__V1__Task t[N], *tp[N];
	Weft__V1__Histogram h[2] = { WEFT__V1__HISTOGRAM__INIT,
				     WEFT__V1__HISTOGRAM__INIT };
	uint32_t buckets[5] = { 1, 0, 7, 3, 9 };
	Weft__V1__TaskWait w[2] = { WEFT__V1__TASK_WAIT__INIT,
				    WEFT__V1__TASK_WAIT__INIT };
	Weft__V1__TaskWait *wp[2] = { &w[0], &w[1] };
	Weft__V1__Worker wk[2] = { WEFT__V1__WORKER__INIT,
				   WEFT__V1__WORKER__INIT };
	Weft__V1__Worker *wkp[2] = { &wk[0], &wk[1] };
	Weft__V1__WorkerCounters c = WEFT__V1__WORKER_COUNTERS__INIT;
	Weft__V1__Warning x = WEFT__V1__WARNING__INIT, *xp = &x;
	Weft__V1__Resource r = WEFT__V1__RESOURCE__INIT, *rp = &r;
	uint64_t holders[1] = { 3 };

	st.now_ns = (2 + k) * SEC;
	st.start_ns = 1 * SEC;
	st.workers = 2;
	st.live_tasks = N;
	st.polls_per_s = 1000 + k;
	st.spawned_tasks = 100 * k;
	h[0].buckets = buckets;
	h[0].n_buckets = 5;
	h[0].count = 20;
	h[0].sum_ns = 12345;
	h[0].max_ns = 999;
	h[1].count = 3;
	h[1].outliers = 1;
	w[0].resource = 77;
	w[0].total_ns = 5000;
	w[0].waits = 2;
	w[1].resource = 78;
	w[1].total_ns = 100;
	w[1].waits = 1;
	for (unsigned i = 0; i < N; i++) {
		/* Half of them come again in every update (thin after the
		 * first), half are new each time. */
		uint64_t id = i < N / 2 ? i + 1 : 100 * k + i + 1;

		weft__v1__task__init(&t[i]);
		tp[i] = &t[i];
		t[i].id = id;
		t[i].parent = i ? 1 : 0;
		if (k == 0 || i >= N / 2) {
			t[i].name = i % 3 ? "http-conn" : "worker job";
			t[i].file = "demo.c";
			t[i].line = 500 + i;
		}
		t[i].state_size = 64 + i;
		t[i].kind = i % 2;
		t[i].state = i % 4;
		t[i].last_worker = i % 2;
		t[i].status = i % 5 == 0 ? -ECANCELED : 0;
		t[i].spawned_ns = (1 + k) * SEC + i;
		t[i].polls = 10 * k + i;
		t[i].busy_ns = 1000 * i + k;
		t[i].scheduled_ns = 7 * i;
		t[i].idle_ns = 11 * i;
		t[i].wakes = i;
		t[i].self_wakes = i / 2;
		t[i].waker_clones = i / 3;
		t[i].waker_drops = i / 4;
		t[i].max_poll_ns = 900 + i;
		t[i].warnings = i % 7 == 0 ? 2 : 0;
		t[i].locks_held = i % 2;
		if (i % 4 == 1 && i >= N / 2) {
			t[i].state = WEFT_TASK_DONE;
			t[i].finished_ns = (1 + k) * SEC + 1000 * i;
		}
		if (i % 6 == 0) {
			t[i].poll_hist = &h[0];
			t[i].sched_hist = &h[1];
		}
		if (i % 8 == 3) {
			t[i].waited = wp;
			t[i].n_waited = 2;
		}
		if (i % 3 == 2) {
			t[i].parked_file = k % 2 ? "net.c" : "chan.c";
			t[i].parked_line = 40 + k;
			t[i].idle_since_ns = (1 + k) * SEC;
			t[i].waiting_on = 77;
			t[i].waiting_since_ns = (1 + k) * SEC + 5;
			t[i].waiting_op = 1;
		}
	}
	c.polls = 100 * k;
	c.steals = k;
	wk[0].counters = &c;
	wk[0].queue_depth = k;
	wk[0].polls_per_s = 500;
	wk[0].busy_ratio = 0.5;
	wk[1].index = 1;
	wk[1].state = 2;
	wk[1].stolen_out = k;
	x.seq = k + 1;
	x.kind = 1;
	x.task = 2;
	x.task_name = "http-conn";
	x.file = "demo.c";
	x.line = 9;
	x.at_ns = (2 + k) * SEC;
	x.detail = "held across an await";
	r.id = 77;
	r.kind = 1;
	r.name = "queue";
	r.file = "chan.c";
	r.line = 3;
	r.created_ns = 1 * SEC;
	r.nholders = 1;
	r.holders = holders;
	r.n_holders = 1;
	u.stats = &st;
	u.tasks = tp;
	u.n_tasks = N;
	u.workers = wkp;
	u.n_workers = 2;
	u.warnings = &xp;
	u.n_warnings = 1;
	u.resources = &rp;
	u.n_resources = 1;
	u.full = k == 0;
	f.body_case = WEFT__V1__FRAME__BODY_UPDATE;
	f.update = &u;
	put(b, &f);
}

static void put_events(weft_wire_buf_t *b, unsigned k)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	weft_wire_batch_t batch;
	weft_event_t ev[40];

	memset(ev, 0, sizeof(ev));
	for (unsigned i = 0; i < 40; i++) {
		ev[i].ts = (2 + k) * SEC + 1000 * i;
		ev[i].task = 100 * k + i % 50 + 1;
		ev[i].kind = i % 3 ? WEFT_EV_POLL : WEFT_EV_WAKE;
		ev[i].worker = 1;
		ev[i].a1 = i % 3 ? 500 + i : ev[i].task + 1;
	}
	weft_wire_batch_init(&batch);
	assert_int_equal(weft_wire_batch_encode(&batch, ev, 40), 40);
	f.body_case = WEFT__V1__FRAME__BODY_EVENTS;
	f.events = &batch.msg;
	put(b, &f);
	weft_wire_batch_fini(&batch);
}

/* A record holding the Frame bytes @frame (@n < 128 bytes). */
static void put_raw(weft_wire_buf_t *b, const uint8_t *frame, size_t n)
{
	assert_true(n < 128);
	assert_int_equal(weft_wire_buf_reserve(b, n + 2), 0);
	b->data[b->len++] = WEFT_WIRE_RECORD_TAG;
	b->data[b->len++] = (uint8_t)n;
	memcpy(b->data + b->len, frame, n);
	b->len += n;
}

/* --------------------------------------------------------- the feeds */

/* Every record unpacked by protobuf-c and fed to con_model_frame(). */
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

/*
 * The bytes served to a console connection over a unix socket (the
 * console connects and subscribes, the server writes @b and closes),
 * pumped into @m.  Return: the pump's last result (-ECONNRESET: the
 * server's close, read to the end).
 */
static int feed_live(con_model_t *m, con_live_t *l, const weft_wire_buf_t *b)
{
	char dir[] = "/tmp/weft-console-live-XXXXXX", target[160];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int srv, c, rc = 0;
	uint64_t until;

	assert_non_null(mkdtemp(dir));
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/s.sock", dir);
	srv = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(srv >= 0);
	assert_int_equal(bind(srv, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(srv, 1), 0);
	snprintf(target, sizeof(target), "unix:%s", sun.sun_path);
	assert_int_equal(con_live_init(l, target), 0);
	assert_int_equal(con_live_connect(l), 0);
	c = accept(srv, NULL, NULL);
	assert_true(c >= 0);
	/* Small enough for the socket's buffer: written whole at once. */
	assert_true(b->len < 100000);
	assert_int_equal(write(c, b->data, b->len), (ssize_t)b->len);
	close(c);
	until = con_live_now_ms() + 10000;
	while (l->connected && con_live_now_ms() < until)
		rc = con_live_pump(l, m, until);
	close(srv);
	unlink(sun.sun_path);
	rmdir(dir);
	return rc;
}

/* ------------------------------------------------------------ compare */

static void task_same(const con_task_t *a, const con_task_t *b)
{
	con_task_t x = *a, y = *b;

	assert_non_null(b);
	assert_string_equal(a->name, b->name);
	assert_string_equal(a->file, b->file);
	assert_string_equal(a->parked_file, b->parked_file);
	assert_int_equal(a->hist != NULL, b->hist != NULL);
	if (a->hist)
		assert_memory_equal(a->hist, b->hist, 2 * sizeof(*a->hist));
	assert_int_equal(a->nwaited, b->nwaited);
	if (a->nwaited)
		assert_memory_equal(a->waited, b->waited,
				    a->nwaited * sizeof(*a->waited));
	/* The rest, field by field (the pointers and flags aside). */
	x.name = y.name = x.file = y.file = NULL;
	x.parked_file = y.parked_file = NULL;
	x.hist = y.hist = NULL;
	x.waited = y.waited = NULL;
	x.dirty = y.dirty = x.listed = y.listed = x.doomed = y.doomed = 0;
	assert_memory_equal(&x, &y, sizeof(x));
}

static void models_same(const con_model_t *a, const con_model_t *b)
{
	assert_int_equal(a->ntasks, b->ntasks);
	assert_int_equal(a->nfinished, b->nfinished);
	for (size_t i = 0; i < a->ntasks; i++)
		task_same(a->tasks[i], con_model_task(b, a->tasks[i]->id));
	assert_memory_equal(&a->stats, &b->stats, sizeof(a->stats));
	assert_int_equal(a->now_ns, b->now_ns);
	assert_int_equal(a->updates, b->updates);
	assert_int_equal(a->batches, b->batches);
	assert_int_equal(a->events, b->events);
	assert_int_equal(a->bad_frames, b->bad_frames);
	assert_int_equal(a->nrecent, b->nrecent);
	assert_memory_equal(a->recent, b->recent,
			    a->nrecent * sizeof(*a->recent));
	assert_int_equal(a->nworkers, b->nworkers);
	for (uint32_t i = 0; i < a->nworkers; i++) {
		assert_memory_equal(&a->workers[i].counters,
				    &b->workers[i].counters,
				    sizeof(a->workers[i].counters));
		assert_int_equal(a->workers[i].queue_depth,
				 b->workers[i].queue_depth);
		assert_int_equal(a->workers[i].stolen_by_others,
				 b->workers[i].stolen_by_others);
		assert_int_equal(a->workers[i].state, b->workers[i].state);
	}
	assert_int_equal(a->nwarnings, b->nwarnings);
	for (size_t i = 0; i < a->nwarnings; i++)
		assert_string_equal(a->warnings[i].detail,
				    b->warnings[i].detail);
	assert_int_equal(a->nres, b->nres);
	assert_int_equal(a->pid, b->pid);
	assert_string_equal(a->process, b->process);
	assert_true(con_model_is_consistent(b));
}

/* ---------------------------------------------------------------- tests */

/*
 * Ten updates and event batches: the live path (hand decoders, no
 * frame refused) builds the model protobuf-c and con_model_frame() do.
 */
static void test_console_live_same_as_frames(void **state)
{
	weft_wire_buf_t b = { 0 };
	con_model_t a, m;
	con_live_t l;
	int rc;

	(void)state;
	put_header(&b);
	for (unsigned k = 0; k < 10; k++) {
		put_update(&b, k);
		put_events(&b, k);
	}
	con_model_init(&a, "frames");
	con_model_init(&m, "live");
	feed_frames(&a, &b);
	rc = feed_live(&m, &l, &b);
	assert_int_equal(rc, -ECONNRESET);
	assert_int_equal(l.frames, 21);
	assert_int_equal(l.raw_refused, 0);
	assert_int_equal(a.updates, 10);
	assert_int_equal(a.batches, 10);
	models_same(&a, &m);
	con_live_fini(&l);
	con_model_fini(&a);
	con_model_fini(&m);
	weft_wire_buf_fini(&b);
}

/*
 * A task with a field the hand decoder does not know (protobuf-c skips
 * it): the Update goes to protobuf-c, counted, applied as before.
 */
static void test_console_live_unknown_field(void **state)
{
	/* Frame{update{tasks{id 7, field 100 = 1}}} */
	static const uint8_t frame[] = { 0x22, 0x07, 0x12, 0x05, 0x08,
					 0x07, 0xa0, 0x06, 0x01 };
	weft_wire_buf_t b = { 0 };
	con_model_t a, m;
	con_live_t l;

	(void)state;
	put_header(&b);
	put_update(&b, 0);
	put_raw(&b, frame, sizeof(frame));
	put_update(&b, 1);
	con_model_init(&a, "frames");
	con_model_init(&m, "live");
	feed_frames(&a, &b);
	assert_int_equal(feed_live(&m, &l, &b), -ECONNRESET);
	assert_int_equal(l.raw_refused, 1);
	assert_int_equal(l.frames, 4);
	assert_non_null(con_model_task(&m, 7));
	models_same(&a, &m);
	con_live_fini(&l);
	con_model_fini(&a);
	con_model_fini(&m);
	weft_wire_buf_fini(&b);
}

/*
 * An Update cut short inside a task (a varint running off its end), and
 * one whose task claims more bytes than the Update has: refused by the
 * hand decoder, counted, refused by protobuf-c too, and the connection
 * closed with the decoder's reason; what came before stays, consistent.
 */
static void test_console_live_corrupt_update(void **state)
{
	/* Frame{update{tasks{id 127, name "abc", polls <cut varint>}}} */
	static const uint8_t cut[] = {
		0x22, 0x0c, 0x12, 0x0a, 0x08, 0x7f, 0x1a,
		0x03, 'a',  'b',  'c',  0x68, 0xff, 0xff
	};
	/* Frame{update{tasks: 0x40 bytes claimed, 2 there}} */
	static const uint8_t over[] = { 0x22, 0x04, 0x12, 0x40, 0x08, 0x7e };
	const struct {
		const uint8_t *p;
		size_t n;
	} bad[] = { { cut, sizeof(cut) }, { over, sizeof(over) } };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		weft_wire_buf_t b = { 0 };
		con_model_t a, m;
		con_live_t l;
		int rc;

		put_header(&b);
		put_update(&b, 0);
		put_events(&b, 0);
		con_model_init(&a, "frames");
		feed_frames(&a, &b); /* the good part */
		put_raw(&b, bad[i].p, bad[i].n);
		put_update(&b, 1); /* never read */
		con_model_init(&m, "live");
		rc = feed_live(&m, &l, &b);
		assert_int_equal(rc, -EBADMSG);
		assert_false(l.connected);
		assert_int_equal(l.raw_refused, 1);
		assert_int_equal(l.frames, 3);
		assert_non_null(strstr(l.error, "frame does not decode"));
		assert_null(con_model_task(&m, 127));
		assert_null(con_model_task(&m, 126));
		models_same(&a, &m);
		con_live_fini(&l);
		con_model_fini(&a);
		con_model_fini(&m);
		weft_wire_buf_fini(&b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_console_live_same_as_frames),
		cmocka_unit_test(test_console_live_unknown_field),
		cmocka_unit_test(test_console_live_corrupt_update),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
