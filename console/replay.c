/* SPDX-License-Identifier: MIT */
/*
 * Replaying a trace file: the whole file is read once into decoded
 * frames, each stamped with a time (an Update's now, an EventBatch's
 * first event; made non-decreasing), and fed to the model up to the
 * replay clock.  Seeking back rebuilds the model from the first frame,
 * keeping its sort and filter: updates carry only changes, so there is
 * no other way to know the state at an earlier time.
 *
 * A file cut short replays up to its last whole record; a malformed
 * record ends the replay there with the reason kept in error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"

#include "weft/trace_reader.h"

static uint64_t frame_time(const Weft__V1__Frame *f)
{
	switch (f->body_case) {
	case WEFT__V1__FRAME__BODY_UPDATE:
		return f->update->stats ? f->update->stats->now_ns : 0;
	case WEFT__V1__FRAME__BODY_EVENTS:
		return f->events->base_ts;
	default:
		return 0;
	}
}

int con_replay_open(con_replay_t *r, const char *path)
{
	weft_trace_reader_t rd;
	Weft__V1__Frame *f;
	size_t cap = 0;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = weft_trace_reader_open(&rd, path);
	if (rc) {
		fprintf(stderr, "weft-console: %s: %s\n", path, strerror(-rc));
		return rc;
	}
	while ((rc = weft_trace_reader_next(&rd, &f)) == 1) {
		if (f->body_case == WEFT__V1__FRAME__BODY_HEADER) {
			/* The reader owns the header frame: keep a hello. */
			Weft__V1__Frame *h;
			size_t len = weft__v1__frame__get_packed_size(f);
			uint8_t *buf = con_xmalloc(len ? len : 1);

			weft__v1__frame__pack(f, buf);
			h = weft__v1__frame__unpack(NULL, len, buf);
			free(buf);
			if (!h)
				continue;
			f = h;
		}
		if (r->n == cap) {
			cap = cap ? 2 * cap : 1024;
			r->frames = con_xreallocarray(r->frames, cap,
						      sizeof(*r->frames));
			r->at = con_xreallocarray(r->at, cap, sizeof(*r->at));
		}
		r->frames[r->n] = f;
		r->at[r->n] = frame_time(f);
		if (r->n && r->at[r->n] < r->at[r->n - 1])
			r->at[r->n] = r->at[r->n - 1];
		if (!r->first_ns && r->at[r->n])
			r->first_ns = r->at[r->n];
		r->n++;
	}
	if (rc < 0) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s (record at byte %llu)",
			 weft_trace_reader_strerror(rc),
			 (unsigned long long)rd.error_offset);
		r->error = con_xstrdup(msg);
		if (!r->n) {
			fprintf(stderr, "weft-console: %s: %s\n", path, msg);
			weft_trace_reader_close(&rd);
			return rc;
		}
	}
	r->truncated = rd.truncated;
	weft_trace_reader_close(&rd);
	if (!r->n) {
		fprintf(stderr, "weft-console: %s: empty file\n", path);
		return -ENODATA;
	}
	r->last_ns = r->at[r->n - 1];
	r->pos_ns = r->first_ns;
	return 0;
}

void con_replay_close(con_replay_t *r)
{
	for (size_t i = 0; i < r->n; i++)
		weft_wire_frame_free(r->frames[i]);
	free(r->frames);
	free(r->at);
	free(r->error);
	memset(r, 0, sizeof(*r));
}

static void model_reset(con_model_t *m)
{
	char *target = con_xstrdup(m->target);
	con_task_col_t col = m->sort_col;
	bool inv = m->sort_invert;
	char filter[sizeof(m->filter)];
	con_mode_t mode = m->mode;
	uint64_t retain = m->retain_ns;
	size_t retain_max = m->retain_max;

	memcpy(filter, m->filter, sizeof(filter));
	con_model_fini(m);
	con_model_init(m, target);
	free(target);
	con_model_set_sort(m, col, inv);
	con_model_set_filter(m, filter);
	m->mode = mode;
	m->retain_ns = retain;
	m->retain_max = retain_max;
}

void con_replay_seek(con_replay_t *r, con_model_t *m, uint64_t pos_ns)
{
	if (pos_ns < r->pos_ns && r->next) {
		model_reset(m);
		r->next = 0;
	}
	while (r->next < r->n && r->at[r->next] <= pos_ns)
		con_model_frame(m, r->frames[r->next++]);
	r->pos_ns = pos_ns;
}

uint64_t con_replay_next_warning(const con_replay_t *r)
{
	for (size_t i = r->next; i < r->n; i++) {
		const Weft__V1__Frame *f = r->frames[i];

		if (f->body_case == WEFT__V1__FRAME__BODY_UPDATE &&
		    f->update->n_warnings)
			return r->at[i];
	}
	return 0;
}

static int ev_cmp_ts(const void *a, const void *b)
{
	const weft_event_t *x = a, *y = b;

	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/*
 * Walks back from the current position through the event batches until
 * @max events of the task are found (batches of different threads
 * overlap in time, so a few more are gathered, then sorted) or the file's
 * start, or 4096 batches back (a detail opened on a quiet task of a big
 * file costs a bounded time).  Malformed batches are skipped.
 */
size_t con_replay_task_events(const con_replay_t *r, uint64_t id,
			      weft_event_t *out, size_t max)
{
	static weft_event_t ev[WEFT_WIRE_BATCH_MAX];
	size_t cap = 2 * max + 64, n = 0, batches = 0, scanned = 0;
	weft_event_t *got;

	if (!id || !max)
		return 0;
	got = con_xcalloc(cap, sizeof(*got));
	for (size_t i = r->next; i-- > 0 && batches < 64 && scanned < 4096;) {
		const Weft__V1__Frame *f = r->frames[i];
		int k;

		if (f->body_case != WEFT__V1__FRAME__BODY_EVENTS ||
		    f->events->count > WEFT_WIRE_BATCH_MAX)
			continue;
		scanned++;
		k = weft_wire_batch_decode(f->events, ev, f->events->count);
		for (int j = k - 1; j >= 0 && n < cap; j--)
			if (ev[j].task == id)
				got[n++] = ev[j];
		/* Once enough are found, a few more batches for the overlap. */
		if (n >= max)
			batches++;
		if (n == cap)
			break;
	}
	qsort(got, n, sizeof(*got), ev_cmp_ts);
	if (n > max) {
		memmove(got, got + (n - max), max * sizeof(*got));
		n = max;
	}
	memcpy(out, got, n * sizeof(*out));
	free(got);
	return n;
}
