/* SPDX-License-Identifier: MIT */
/*
 * weft-trace slice FILE [--from T] [--to T] -o OUT: a window of a trace
 * as a trace of its own, which every verb and the console's replay open
 * alone.
 *
 * OUT is FILE's header, then the state at --from as one full update (the
 * live tasks with their names, spawn sites, state and histograms; the
 * live resources; the workers; the stats: each as the last update at or
 * before --from said it), then the updates stamped within the window as
 * they stand, and the events stamped within it, in time order, in
 * batches of one emitting thread.  Warnings raised before the window are
 * left out: they are events of the past, not state (each task's record
 * keeps its warning bits).  An update's thin records leave out what the
 * stream sent before (a task's name, file and line; histograms but once
 * a second), so the state keeps a task's first name and its last
 * histograms beside its last record, and puts them back together.  A
 * record that names its spawn site instead (Task.site) is named by the
 * site (the Sites met before it), and the state carries every Site met
 * before --from (Update.sites): the window's records may name them.  So
 * for await sites: a window's POLL naming one (WEFT_POLL_SITE_SHIFT)
 * announced before --from carries the announcement (AWAIT_SITE) again,
 * once, just before it.
 *
 * One pass in time order (trace_model.c), after a look at the first
 * events for the trace's start, which TIMEs count from.  Memory: the
 * live tasks, resources and workers at a moment (each as one packed
 * record in one allocation, names and files kept once for all), the
 * stream's reorder window, and a batch of events; never the file.  Reading stops once the events are TT_WINDOW_SLACK_NS past --to.
 *
 * OUT is written beside itself as OUT.XXXXXX and renamed when whole: a
 * slice that fails leaves nothing, and an OUT there before stays unless
 * --force (never FILE itself).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace_tool.h"

static const char usage[] =
	"usage: weft-trace slice FILE [--from TIME] [--to TIME] -o OUT "
	"[--force]\n"
	"Writes the window of FILE from --from to --to (both included) to\n"
	"OUT as a trace of its own: FILE's header, the state at --from (the\n"
	"live tasks with their names, spawn sites and state, the resources\n"
	"and workers, as one full update), then the updates and the events\n"
	"stamped within the window.  weft-trace info/stats/tasks/dump/export\n"
	"and weft-console --replay open it alone.\n"
	"TIME: seconds from the trace's first event, as weft-trace dump\n"
	"counts them (2.5, 2.5s, 1500ms, 2m); --from defaults to the start,\n"
	"--to to the end.  Warnings raised before --from are left out.\n"
	"OUT must not exist (--force: replace it); it is written whole or\n"
	"not at all.  A cut-short FILE is read to its last whole record.\n";

/*
 * A task's or a resource's last record, packed without its histograms
 * (a task's without its name, file and line too), and its last
 * histograms, packed: one allocation, made anew for each record.
 */
typedef struct entry_s {
	uint64_t id;
	struct entry_s *next;    /* hash chain */
	const char *name, *file; /* tasks: the first sent (interned); NULL:
				  * none yet */
	uint32_t line;
	uint32_t len;     /* the record's bytes, at data */
	uint32_t hlen[2]; /* the histograms', after it */
	uint8_t hists;    /* bit i: histogram i was sent */
	uint8_t data[];
} entry_t;

typedef struct table_s {
	entry_t **b;
	size_t nb, n;
} table_t;

/* Names and files, each kept once: a million tasks share a few sites. */
typedef struct strtab_s {
	char **b; /* open addressing; NULL: empty */
	size_t nb, n;
} strtab_t;

/* Field numbers of the histograms: Task's (24, 25), Resource's (19, 20). */
static const unsigned task_hist_fields[2] = { 24, 25 };
static const unsigned res_hist_fields[2] = { 19, 20 };

/* What an update record (and the parts split off it) is for. */
enum mode {
	NOTE,  /* at or before --from: noted into the state */
	WRITE, /* within the window: written as it stands */
	SKIP,  /* after --to */
};

struct slice {
	const char *path;
	tt_window_t w;
	/* The state at --from, as the updates say. */
	table_t tasks, res;
	strtab_t strs;
	uint8_t **workers; /* packed Worker records by index */
	size_t *worker_len;
	unsigned nworkers;
	uint8_t *stats;
	size_t stats_len;
	bool have_state; /* an update at or before --from was noted */
	enum mode mode;  /* of the last update record */
	bool opened;     /* the header and the state are written */
	bool have_header;
	weft_wire_sites_t sites; /* every Site met so far */
	/*
	 * Await sites (AWAIT_SITE events) met before the window, by id
	 * (kind 0: not met), and whether the output has one yet: a window's
	 * POLL that names one announced before it gets the announcement
	 * just before it (stamped as the POLL, on its thread), as the
	 * window's readers met none.
	 */
	weft_event_t *awaits;
	bool *awaits_out;
	size_t nawaits;
	/* The output. */
	FILE *out;
	weft_wire_buf_t buf; /* records not yet written */
	weft_wire_events_t enc;
	weft_event_t *ev; /* window events not yet encoded */
	size_t nev;
	uint64_t events, updates, state_tasks, state_res;
};

/* Window events encoded at a time: 64 Ki, 2 MiB. */
#define EVENTS_HELD ((size_t)1 << 16)
/* Written out past this much. */
#define BUF_FLUSH ((size_t)1 << 20)
/* An Update's body at most, so that its record is within the limit. */
#define BODY_MAX ((size_t)WEFT_WIRE_MAX_RECORD - 16)

static char *tmp_path; /* the output being written; removed at exit */

static void tmp_remove(void)
{
	if (tmp_path)
		unlink(tmp_path);
}

static void oom(void)
{
	fputs("weft-trace: out of memory\n", stderr);
	exit(1);
}

static void reserve(weft_wire_buf_t *b, size_t more)
{
	if (weft_wire_buf_reserve(b, more))
		oom();
}

static void put_bytes(weft_wire_buf_t *b, const void *p, size_t n)
{
	reserve(b, n);
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static void put_varint(weft_wire_buf_t *b, uint64_t v)
{
	reserve(b, 10);
	b->len += weft_wire_varint_put(b->data + b->len, v);
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Field @field, length-delimited: its key, @n, then @n bytes at @p. */
static void put_field(weft_wire_buf_t *b, unsigned field, const void *p,
		      size_t n)
{
	put_varint(b, (uint64_t)field << 3 | 2);
	put_varint(b, n);
	put_bytes(b, p, n);
}

static size_t field_len(unsigned field, size_t n)
{
	return varint_len((uint64_t)field << 3 | 2) + varint_len(n) + n;
}

/* ------------------------------------------------------------ state */

static size_t hash(const table_t *t, uint64_t id)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 20) & (t->nb - 1);
}

static entry_t **slot(table_t *t, uint64_t id)
{
	entry_t **pp = &t->b[hash(t, id)];

	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next;
	return pp;
}

static void grow(table_t *t)
{
	size_t old = t->nb;
	entry_t **b = t->b;

	t->nb = old ? 2 * old : 1024;
	t->b = tt_xmalloc(t->nb * sizeof(*t->b));
	memset(t->b, 0, t->nb * sizeof(*t->b));
	for (size_t i = 0; i < old; i++)
		for (entry_t *e = b[i], *next; e; e = next) {
			size_t j = hash(t, e->id);

			next = e->next;
			e->next = t->b[j];
			t->b[j] = e;
		}
	free(b);
}

static const uint8_t *entry_hist(const entry_t *e, int i)
{
	return e->data + e->len + (i ? e->hlen[0] : 0);
}

static void entry_remove(table_t *t, uint64_t id)
{
	entry_t **pp = slot(t, id), *e = *pp;

	if (!e)
		return;
	*pp = e->next;
	free(e);
	t->n--;
}

static void table_free(table_t *t)
{
	for (size_t i = 0; i < t->nb; i++)
		for (entry_t *e = t->b[i], *next; e; e = next) {
			next = e->next;
			free(e);
		}
	free(t->b);
}

static size_t str_hash(const char *str)
{
	size_t h = 14695981039346656037ull;

	for (; *str; str++)
		h = (h ^ (unsigned char)*str) * 1099511628211ull;
	return h;
}

/* @str's copy in @t, made the first time. */
static const char *intern(strtab_t *t, const char *str)
{
	size_t i;

	if (2 * (t->n + 1) > t->nb) {
		strtab_t n = { .nb = t->nb ? 2 * t->nb : 256 };

		n.b = tt_xmalloc(n.nb * sizeof(*n.b));
		memset(n.b, 0, n.nb * sizeof(*n.b));
		for (size_t j = 0; j < t->nb; j++) {
			if (!t->b[j])
				continue;
			for (i = str_hash(t->b[j]) & (n.nb - 1); n.b[i];
			     i = (i + 1) & (n.nb - 1))
				;
			n.b[i] = t->b[j];
		}
		n.n = t->n;
		free(t->b);
		*t = n;
	}
	for (i = str_hash(str) & (t->nb - 1); t->b[i];
	     i = (i + 1) & (t->nb - 1))
		if (!strcmp(t->b[i], str))
			return t->b[i];
	t->n++;
	return t->b[i] = tt_xstrdup(str);
}

static void strtab_free(strtab_t *t)
{
	for (size_t i = 0; i < t->nb; i++)
		free(t->b[i]);
	free(t->b);
}

/*
 * @id's entry anew: @m packed, then the histograms @h (the entry's last
 * ones where NULL), the name, file and line kept.  The entry before it
 * is freed.
 */
static void keep(table_t *t, uint64_t id, const ProtobufCMessage *m,
		 const Weft__V1__Histogram *const h[2], const char *name,
		 const char *file, uint32_t line)
{
	entry_t **pp = slot(t, id), *old = *pp, *e;
	size_t len = protobuf_c_message_get_packed_size(m), hlen[2];

	if (!old && t->n + 1 > 2 * t->nb) {
		grow(t);
		pp = slot(t, id);
	}
	for (int i = 0; i < 2; i++)
		hlen[i] = h[i] ? weft__v1__histogram__get_packed_size(h[i]) :
			  old && old->hists >> i & 1 ? old->hlen[i] :
						       0;
	if (len + hlen[0] + hlen[1] > UINT32_MAX)
		tt_die("slice: a record of %zu bytes", len);
	e = tt_xmalloc(sizeof(*e) + len + hlen[0] + hlen[1]);
	e->id = id;
	e->next = old ? old->next : NULL;
	e->name = name;
	e->file = file;
	e->line = line;
	e->len = (uint32_t)len;
	e->hists = 0;
	protobuf_c_message_pack(m, e->data);
	for (int i = 0; i < 2; i++) {
		uint8_t *dst = e->data + len + (i ? hlen[0] : 0);

		e->hlen[i] = (uint32_t)hlen[i];
		if (h[i]) {
			weft__v1__histogram__pack(h[i], dst);
			e->hists |= 1u << i;
		} else if (old && old->hists >> i & 1) {
			memcpy(dst, entry_hist(old, i), hlen[i]);
			e->hists |= 1u << i;
		}
	}
	*pp = e;
	if (old)
		free(old);
	else
		t->n++;
}

static bool has(const char *s)
{
	return s && s[0];
}

/*
 * A task's record: its last, with the name, file and line it was first
 * sent with (a thin record leaves them out) and its last histograms
 * (sent once a second).  A finished task's last record takes it off.
 */
static void note_task(struct slice *s, const Weft__V1__Task *m)
{
	static char none[1];
	const Weft__V1__Histogram *h[2] = { m->poll_hist, m->sched_hist };
	const char *name = NULL, *file = NULL;
	Weft__V1__Task c = *m;
	const entry_t *e;
	uint32_t line = 0;

	if (!m->id)
		return;
	if (m->finished_ns || m->state == WEFT_TASK_DONE) {
		entry_remove(&s->tasks, m->id);
		return;
	}
	if ((e = *slot(&s->tasks, m->id))) {
		name = e->name;
		file = e->file;
		line = e->line;
	}
	if (!name && has(m->name))
		name = intern(&s->strs, m->name);
	if (!file && has(m->file)) {
		file = intern(&s->strs, m->file);
		line = m->line;
	}
	/* Put back when the state is written: kept once, not per task. */
	c.name = none;
	c.file = none;
	c.line = 0;
	c.poll_hist = NULL;
	c.sched_hist = NULL;
	keep(&s->tasks, m->id, &c.base, h, name, file, line);
}

/* A resource's record: its last, with its last histograms; a dropped
 * one's last record takes it off. */
static void note_resource(struct slice *s, const Weft__V1__Resource *m)
{
	const Weft__V1__Histogram *h[2] = { m->wait_hist, m->hold_hist };
	Weft__V1__Resource c = *m;

	if (!m->id)
		return;
	if (m->dropped_ns) {
		entry_remove(&s->res, m->id);
		return;
	}
	c.wait_hist = NULL;
	c.hold_hist = NULL;
	keep(&s->res, m->id, &c.base, h, NULL, NULL, 0);
}

static void note_worker(struct slice *s, const Weft__V1__Worker *m)
{
	unsigned i = m->index;

	/* The runtime's bound: a larger index is no worker. */
	if (i >= 4096)
		return;
	if (i >= s->nworkers) {
		unsigned n = i + 1;

		s->workers = tt_xrealloc(s->workers, n * sizeof(*s->workers));
		s->worker_len =
			tt_xrealloc(s->worker_len, n * sizeof(*s->worker_len));
		memset(&s->workers[s->nworkers], 0,
		       (n - s->nworkers) * sizeof(*s->workers));
		memset(&s->worker_len[s->nworkers], 0,
		       (n - s->nworkers) * sizeof(*s->worker_len));
		s->nworkers = n;
	}
	s->worker_len[i] = weft__v1__worker__get_packed_size(m);
	s->workers[i] = tt_xrealloc(s->workers[i],
				    s->worker_len[i] ? s->worker_len[i] : 1);
	weft__v1__worker__pack(m, s->workers[i]);
}

static void note_update(struct slice *s, const Weft__V1__Update *u)
{
	for (size_t i = 0; i < u->n_tasks; i++) {
		Weft__V1__Task c = *u->tasks[i]; /* named by its site */

		weft_wire_sites_resolve(&s->sites, &c);
		note_task(s, &c);
	}
	for (size_t i = 0; i < u->n_resources; i++)
		note_resource(s, u->resources[i]);
	for (size_t i = 0; i < u->n_workers; i++)
		note_worker(s, u->workers[i]);
	if (u->stats) {
		s->stats_len = weft__v1__stats__get_packed_size(u->stats);
		s->stats =
			tt_xrealloc(s->stats, s->stats_len ? s->stats_len : 1);
		weft__v1__stats__pack(u->stats, s->stats);
	}
	s->have_state = true;
}

/* ------------------------------------------------------------ output */

static void flush_buf(struct slice *s, bool force)
{
	if (!s->buf.len || (!force && s->buf.len < BUF_FLUSH))
		return;
	if (fwrite(s->buf.data, 1, s->buf.len, s->out) != s->buf.len) {
		fprintf(stderr, "weft-trace: slice: %s: %s\n", tmp_path,
			strerror(errno));
		exit(1);
	}
	s->buf.len = 0;
}

/* One Update record around the @body bytes. */
static void put_update_record(weft_wire_buf_t *b, const weft_wire_buf_t *body)
{
	size_t frame = field_len(4, body->len); /* Frame.update */

	put_varint(b, WEFT_WIRE_RECORD_TAG);
	put_varint(b, frame);
	put_field(b, 4, body->data, body->len);
}

/*
 * An item of the state: Update field @field holding @e's record, a
 * task's name, file and line (Task fields 3, 4, 5) and its histograms
 * (fields @hf), appended: a field after the others is read the same.
 */
static size_t item_len(const entry_t *e, const unsigned hf[2])
{
	size_t n = e->len;

	if (e->name)
		n += field_len(3, strlen(e->name));
	if (e->file)
		n += field_len(4, strlen(e->file));
	if (e->line)
		n += 1 + varint_len(e->line);
	for (int i = 0; i < 2; i++)
		if (e->hists >> i & 1)
			n += field_len(hf[i], e->hlen[i]);
	return n;
}

static void put_item(weft_wire_buf_t *b, unsigned field, const entry_t *e,
		     const unsigned hf[2])
{
	put_varint(b, (uint64_t)field << 3 | 2);
	put_varint(b, item_len(e, hf));
	put_bytes(b, e->data, e->len);
	if (e->name)
		put_field(b, 3, e->name, strlen(e->name));
	if (e->file)
		put_field(b, 4, e->file, strlen(e->file));
	if (e->line) {
		put_varint(b, 5 << 3 | 0);
		put_varint(b, e->line);
	}
	for (int i = 0; i < 2; i++)
		if (e->hists >> i & 1)
			put_field(b, hf[i], entry_hist(e, i), e->hlen[i]);
}

/* Adds @e to the update being built, after closing the record when it
 * would not fit: the records after the first carry only more items. */
static void add_item(struct slice *s, weft_wire_buf_t *body, unsigned field,
		     const entry_t *e, const unsigned hf[2])
{
	size_t n = item_len(e, hf);

	if (body->len && body->len + field_len(field, n) > BODY_MAX) {
		put_update_record(&s->buf, body);
		body->len = 0;
		flush_buf(s, false);
	}
	put_item(body, field, e, hf);
}

/*
 * The state at --from as one full update (Update: stats 1, tasks 2,
 * workers 3, full 5, resources 10), split into records as the recorder
 * splits one: the first has the stats, workers and full flag, the others
 * only more resources and tasks.
 */
static void write_state(struct slice *s)
{
	static const uint8_t full[2] = { 5 << 3 | 0, 1 };
	weft_wire_buf_t body = { 0 };

	if (s->stats)
		put_field(&body, 1, s->stats, s->stats_len);
	for (unsigned i = 0; i < s->nworkers; i++)
		if (s->workers[i])
			put_field(&body, 3, s->workers[i], s->worker_len[i]);
	put_bytes(&body, full, sizeof(full));
	/* Every site met (a field after the others is read the same): the
	 * spawn sites, then the await sites the window's POLLs may name. */
	for (size_t i = 0; i < s->sites.cap + s->sites.await_cap; i++) {
		const weft_wire_site_t *e =
			i < s->sites.cap ? &s->sites.v[i] :
					   &s->sites.await[i - s->sites.cap];
		Weft__V1__Site m = WEFT__V1__SITE__INIT;
		uint8_t *one;
		size_t n;

		if (!e->file)
			continue;
		m.id = e->id;
		m.name = (char *)e->name;
		m.file = (char *)e->file;
		m.line = e->line;
		m.state_size = e->state_size;
		n = weft__v1__site__get_packed_size(&m);
		one = tt_xrealloc(NULL, n);
		weft__v1__site__pack(&m, one);
		put_field(&body, 11, one, n);
		free(one);
	}
	for (size_t i = 0; i < s->res.nb; i++)
		for (entry_t *e = s->res.b[i]; e; e = e->next) {
			add_item(s, &body, 10, e, res_hist_fields);
			s->state_res++;
		}
	for (size_t i = 0; i < s->tasks.nb; i++)
		for (entry_t *e = s->tasks.b[i]; e; e = e->next) {
			add_item(s, &body, 2, e, task_hist_fields);
			s->state_tasks++;
		}
	put_update_record(&s->buf, &body);
	weft_wire_buf_fini(&body);
	s->updates++;
}

/* The window begins: the state at --from goes out, once, first. */
static void open_window(struct slice *s)
{
	if (s->opened)
		return;
	s->opened = true;
	if (s->have_state)
		write_state(s);
	/* Noted no more: free it now. */
	table_free(&s->tasks);
	table_free(&s->res);
	strtab_free(&s->strs);
	memset(&s->tasks, 0, sizeof(s->tasks));
	memset(&s->res, 0, sizeof(s->res));
	memset(&s->strs, 0, sizeof(s->strs));
}

static void flush_events(struct slice *s)
{
	if (!s->nev)
		return;
	if (weft_wire_events_append(&s->enc, &s->buf, s->ev, s->nev))
		oom();
	s->events += s->nev;
	s->nev = 0;
	flush_buf(s, false);
}

static void append_frame(struct slice *s, const Weft__V1__Frame *f)
{
	int err = weft_wire_record_append(&s->buf, f);

	if (err == -ENOMEM)
		oom();
	if (err)
		tt_die("slice: %s: a record too large to write again (%s)",
		       s->path, strerror(-err));
}

/* Every frame as it is read, ahead of the events of its time. */
static void slice_frame(void *ctx, const Weft__V1__Frame *f)
{
	struct slice *s = ctx;
	const Weft__V1__Update *u;

	switch (f->body_case) {
	case WEFT__V1__FRAME__BODY_HEADER:
		/* The first one; a later one (segments run together)
		 * says nothing new. */
		if (!s->have_header)
			append_frame(s, f);
		s->have_header = true;
		return;
	case WEFT__V1__FRAME__BODY_UPDATE:
		break;
	default:
		return; /* event batches: their events come one by one */
	}
	u = f->update;
	if (weft_wire_sites_add_update(&s->sites, u))
		oom();
	if (u->stats) {
		/* A record with stats starts an update; the next ones
		 * without are more of it. */
		uint64_t at = u->stats->now_ns;

		if (at > s->w.to)
			s->mode = SKIP;
		else if (at <= s->w.from && !s->opened)
			s->mode = NOTE;
		else
			s->mode = WRITE;
	}
	if (s->mode == SKIP)
		return;
	if (s->mode == NOTE && !s->opened) {
		note_update(s, u);
		return;
	}
	/* Within the window (or noted too late: the window is open), it
	 * goes out as it stands, after the events handed out before it. */
	open_window(s);
	flush_events(s);
	append_frame(s, f);
	if (u->stats)
		s->updates++;
}

/* Await site @id's slot, grown to it; NULL for 0 or past 2^20 (no
 * runtime numbers that many). */
static weft_event_t *await_slot(struct slice *s, uint64_t id, bool **out)
{
	size_t n = s->nawaits ? s->nawaits : 64;

	if (id == 0 || id > WEFT_WIRE_AWAIT_SITE_MAX)
		return NULL;
	if (id >= s->nawaits) {
		while (n <= id)
			n *= 2;
		/* n is at most 2^21: no overflow. */
		s->awaits = tt_xrealloc(s->awaits, n * sizeof(*s->awaits));
		s->awaits_out =
			tt_xrealloc(s->awaits_out, n * sizeof(*s->awaits_out));
		memset(s->awaits + s->nawaits, 0,
		       (n - s->nawaits) * sizeof(*s->awaits));
		memset(s->awaits_out + s->nawaits, 0,
		       (n - s->nawaits) * sizeof(*s->awaits_out));
		s->nawaits = n;
	}
	*out = &s->awaits_out[id];
	return &s->awaits[id];
}

/* An event before the window: an await site's announcement is kept. */
static void note_before(struct slice *s, const weft_event_t *ev)
{
	weft_event_t *a;
	bool *out;

	if (ev->kind == WEFT_EV_AWAIT_SITE &&
	    (a = await_slot(s, ev->task, &out)))
		*a = *ev;
}

/* A window event, after the announcement it needs that the window lacks. */
static void put_event(struct slice *s, const weft_event_t *ev)
{
	uint64_t id = ev->kind == WEFT_EV_POLL ?
			      ev->a2 >> WEFT_POLL_SITE_SHIFT :
		      ev->kind == WEFT_EV_AWAIT_SITE ? ev->task :
						       0;
	weft_event_t *a;
	bool *out;

	if (id && (a = await_slot(s, id, &out)) && !*out) {
		*out = true;
		if (ev->kind == WEFT_EV_POLL && a->kind) {
			s->ev[s->nev] = *a;
			s->ev[s->nev].ts = ev->ts;
			s->ev[s->nev].worker = ev->worker;
			if (++s->nev == EVENTS_HELD)
				flush_events(s);
		}
	}
	s->ev[s->nev++] = *ev;
	if (s->nev == EVENTS_HELD)
		flush_events(s);
}

/* ------------------------------------------------------------ the verb */

/* The trace's first event's stamp, which TIMEs count from. */
static uint64_t first_stamp(const char *path)
{
	weft_event_t ev;
	tt_trace_t t;
	uint64_t ts;

	tt_open(&t, path, false);
	if (!tt_next(&t, &ev))
		tt_die("slice: %s: no events, nothing to cut", path);
	ts = t.first_ts;
	t.skips_said = true; /* by the cut's own pass, which reads them too */
	tt_free(&t);
	return ts;
}

/* OUT.XXXXXX beside OUT, with the mode a new OUT would get. */
static FILE *open_tmp(const char *out_path)
{
	size_t n = strlen(out_path) + 8;
	mode_t mask = umask(0);
	FILE *fp;
	int fd;

	umask(mask);
	tmp_path = tt_xmalloc(n);
	snprintf(tmp_path, n, "%s.XXXXXX", out_path);
	fd = mkstemp(tmp_path);
	if (fd < 0) {
		int err = errno;

		free(tmp_path);
		tmp_path = NULL;
		tt_die("slice: %s: %s", out_path, strerror(err));
	}
	atexit(tmp_remove);
	(void)fchmod(fd, 0666 & ~mask);
	fp = fdopen(fd, "w");
	if (!fp)
		oom();
	return fp;
}

static void check_out(const char *path, const char *out_path, bool force)
{
	struct stat in, out;

	if (stat(out_path, &out))
		return;
	if (!stat(path, &in) && in.st_dev == out.st_dev &&
	    in.st_ino == out.st_ino)
		tt_die("slice: %s is FILE itself", out_path);
	if (!force)
		tt_die("slice: %s exists (--force replaces it)", out_path);
	if (S_ISDIR(out.st_mode))
		tt_die("slice: %s is a directory", out_path);
}

int tt_verb_slice(int argc, char **argv)
{
	const char *path = NULL, *out_path = NULL;
	struct slice s = { .mode = NOTE };
	bool force = false;
	weft_event_t ev;
	char label[96];
	tt_trace_t t;

	tt_window_init(&s.w);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		if (tt_window_opt(&s.w, "slice", argc, argv, &i))
			continue;
		if (!strcmp(argv[i], "-o")) {
			if (++i >= argc)
				tt_die("slice: -o needs a file name");
			out_path = argv[i];
			continue;
		}
		if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f")) {
			force = true;
			continue;
		}
		if (argv[i][0] == '-' || path)
			tt_die("slice: unexpected argument '%s'", argv[i]);
		path = argv[i];
	}
	if (!path)
		tt_die("slice: no FILE (weft-trace slice --help)");
	if (!out_path)
		tt_die("slice: no output (-o OUT)");
	tt_window_check(&s.w, "slice");
	if (access(path, R_OK))
		tt_die("slice: %s: %s", path, strerror(errno));
	check_out(path, out_path, force);
	s.path = path;
	tt_window_start(&s.w, first_stamp(path));
	s.out = open_tmp(out_path);
	s.ev = tt_xmalloc(EVENTS_HELD * sizeof(*s.ev));
	weft_wire_events_init(&s.enc);
	grow(&s.tasks);
	grow(&s.res);

	/* Updates whole: they are written out again. */
	tt_open_opts(&t, path, false, false);
	t.on_frame = slice_frame;
	t.frame_ctx = &s;
	while (tt_next(&t, &ev)) {
		if (ev.ts < s.w.from) {
			note_before(&s, &ev);
			continue;
		}
		if (ev.ts > s.w.to) {
			if (tt_window_past(&s.w, ev.ts)) {
				tt_window_stop(&t);
				break;
			}
			continue;
		}
		open_window(&s);
		put_event(&s, &ev);
	}
	if (!s.events && !s.nev && t.last_ts < s.w.from)
		tt_die("slice: %s ends at %.6f s, before --from", path,
		       (double)(t.last_ts - s.w.base) / 1e9);
	open_window(&s);
	flush_events(&s);
	flush_buf(&s, true);
	if (fflush(s.out) || fsync(fileno(s.out)) || fclose(s.out)) {
		fprintf(stderr, "weft-trace: slice: %s: write failed: %s\n",
			tmp_path, strerror(errno));
		return 1;
	}
	if (rename(tmp_path, out_path)) {
		fprintf(stderr, "weft-trace: slice: %s: %s\n", out_path,
			strerror(errno));
		return 1;
	}
	free(tmp_path);
	tmp_path = NULL;

	printf("%s: %s of %s: %llu events, %llu updates; at its start %llu "
	       "live tasks, %llu resources\n",
	       out_path, tt_window_label(&s.w, label, sizeof(label)), path,
	       (unsigned long long)s.events, (unsigned long long)s.updates,
	       (unsigned long long)s.state_tasks,
	       (unsigned long long)s.state_res);
	if (t.truncated)
		printf("%s was cut short: read to its last whole record\n",
		       path);
	if (t.skips)
		printf("%s: %llu bytes of torn or damaged records skipped\n",
		       path, (unsigned long long)t.skipped);

	tt_free(&t);
	table_free(&s.tasks);
	table_free(&s.res);
	strtab_free(&s.strs);
	for (unsigned i = 0; i < s.nworkers; i++)
		free(s.workers[i]);
	free(s.workers);
	free(s.worker_len);
	free(s.stats);
	free(s.ev);
	free(s.awaits);
	free(s.awaits_out);
	weft_wire_events_fini(&s.enc);
	weft_wire_sites_fini(&s.sites);
	weft_wire_buf_fini(&s.buf);
	return 0;
}
