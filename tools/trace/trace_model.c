/* SPDX-License-Identifier: MIT */
/*
 * Loading a trace file into the model (trace_tool.h): the reader's frames
 * one by one; events decoded from their batches, then put in time order
 * (stable, so each thread keeps its own order); task names and locations
 * from every Update; warnings as they were raised.  A file cut short is
 * loaded up to its last whole record and marked truncated.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "weft/trace_reader.h"
#include "trace_tool.h"

void tt_die(const char *fmt, ...)
{
	va_list ap;

	fputs("weft-trace: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(TT_EXIT_BAD_INPUT);
}

void *tt_xrealloc(void *p, size_t n)
{
	if (n == 0)
		tt_die("internal error: zero-sized allocation");
	p = realloc(p, n);
	if (!p) {
		fputs("weft-trace: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

void *tt_xmalloc(size_t n)
{
	return tt_xrealloc(NULL, n);
}

char *tt_xstrdup(const char *s)
{
	size_t n = strlen(s ? s : "") + 1;
	char *p = tt_xmalloc(n);

	memcpy(p, s ? s : "", n);
	return p;
}

static size_t bucket(const tt_trace_t *t, uint64_t id)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 20) % t->ntask_buckets;
}

const tt_task_t *tt_task(const tt_trace_t *t, uint64_t id)
{
	for (tt_task_t *k = t->tasks[bucket(t, id)]; k; k = k->next)
		if (k->id == id)
			return k;
	return NULL;
}

const char *tt_task_label(const tt_trace_t *t, uint64_t id, char *buf,
			  size_t len)
{
	const tt_task_t *k = tt_task(t, id);

	if (k && k->name[0])
		snprintf(buf, len, "%s", k->name);
	else
		snprintf(buf, len, "task %llu", (unsigned long long)id);
	return buf;
}

static void task_note(tt_trace_t *t, const Weft__V1__Task *m)
{
	tt_task_t *k = (tt_task_t *)tt_task(t, m->id);

	if (!k) {
		size_t b = bucket(t, m->id);

		k = tt_xmalloc(sizeof(*k));
		memset(k, 0, sizeof(*k));
		k->id = m->id;
		k->next = t->tasks[b];
		t->tasks[b] = k;
		t->ntasks++;
	} else if (k->name[0] || !m->name[0]) {
		return; /* the first name seen stays */
	} else {
		free(k->name);
		free(k->file);
	}
	k->name = tt_xstrdup(m->name);
	k->file = tt_xstrdup(m->file);
	k->line = m->line;
}

static char *join_argv(const Weft__V1__Hello *h)
{
	size_t n = 1;
	char *s;

	for (size_t i = 0; i < h->n_argv; i++)
		n += strlen(h->argv[i]) + 1;
	s = tt_xmalloc(n);
	s[0] = '\0';
	for (size_t i = 0; i < h->n_argv; i++) {
		if (i)
			strcat(s, " ");
		strcat(s, h->argv[i]);
	}
	return s;
}

static void header_note(tt_trace_t *t, const Weft__V1__FileHeader *h)
{
	const Weft__V1__Hello *hello = h->hello;

	t->format_version = h->format_version;
	t->segment = h->segment;
	if (h->format_version != WEFT_TRACE_FORMAT_VERSION)
		tt_die("%s: trace format version %u, this tool reads %u",
		       t->path, h->format_version, WEFT_TRACE_FORMAT_VERSION);
	if (!hello)
		return;
	t->pid = hello->pid;
	t->process = tt_xstrdup(hello->process_name);
	t->cmdline = join_argv(hello);
	t->host = tt_xstrdup(hello->hostname);
	t->clock = tt_xstrdup(hello->clock);
	t->workers = hello->workers;
	t->start_ns = hello->start_ns;
	t->start_realtime_ns = hello->start_realtime_ns;
}

static void update_note(tt_trace_t *t, const Weft__V1__Update *u)
{
	for (size_t i = 0; i < u->n_tasks; i++)
		task_note(t, u->tasks[i]);
	if (u->stats) {
		t->events_dropped = u->stats->events_dropped;
		t->tasks_end_unseen = u->stats->tasks_end_unseen;
		if (u->stats->workers > t->workers)
			t->workers = u->stats->workers;
	}
	for (size_t i = 0; i < u->n_workers; i++) {
		const Weft__V1__Worker *w = u->workers[i];

		if (w->index >= 64)
			continue;
		t->worker_drops[w->index] = w->events_dropped;
		if (w->index + 1 > t->nworker_drops)
			t->nworker_drops = w->index + 1;
	}
	for (size_t i = 0; i < u->n_warnings; i++) {
		const Weft__V1__Warning *w = u->warnings[i];
		tt_warning_t *x;

		t->warnings = tt_xrealloc(t->warnings,
					  (t->nwarnings + 1) * sizeof(*x));
		x = &t->warnings[t->nwarnings++];
		x->kind = w->kind;
		x->worker = w->worker;
		x->task = w->task;
		x->at_ns = w->at_ns;
		x->value_ns = w->value_ns;
		x->detail = tt_xstrdup(w->detail);
	}
}

struct keyed {
	weft_event_t ev;
	size_t i;
};

/* Time order; ties keep the order of the file. */
static int keyed_cmp(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;

	if (x->ev.ts != y->ev.ts)
		return x->ev.ts < y->ev.ts ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

void tt_load(tt_trace_t *t, const char *path)
{
	weft_trace_reader_t r;
	Weft__V1__Frame *f;
	size_t cap = 0;
	int rc;

	memset(t, 0, sizeof(*t));
	t->path = path;
	t->ntask_buckets = 4096;
	t->tasks = calloc(t->ntask_buckets, sizeof(*t->tasks));
	if (!t->tasks)
		tt_die("out of memory");
	rc = weft_trace_reader_open(&r, path);
	if (rc)
		tt_die("%s: %s", path, strerror(-rc));
	while ((rc = weft_trace_reader_next(&r, &f)) == 1) {
		uint64_t before = t->bytes;

		t->frames++;
		t->bytes = r.dec.offset;
		switch (f->body_case) {
		case WEFT__V1__FRAME__BODY_HEADER:
			if (t->frames == 1)
				header_note(t, f->header);
			break;
		case WEFT__V1__FRAME__BODY_UPDATE:
			t->updates++;
			update_note(t, f->update);
			break;
		case WEFT__V1__FRAME__BODY_EVENTS: {
			size_t n = f->events->count;
			int got;

			t->batches++;
			t->event_bytes += t->bytes - before;
			if (t->nev + n > cap) {
				cap = (t->nev + n) * 2;
				t->ev = tt_xrealloc(t->ev,
						    cap * sizeof(*t->ev));
			}
			got = n ? weft_wire_batch_decode(f->events,
							  t->ev + t->nev, n) :
				  0;
			if (got < 0)
				tt_die("%s: bad event batch in the record at "
				       "byte %llu",
				       path, (unsigned long long)before);
			t->nev += (size_t)got;
			break;
		}
		default:
			t->others++;
			break;
		}
		if (t->frames > 1)
			weft_wire_frame_free(f);
	}
	if (rc < 0)
		tt_die("%s: %s (record at byte %llu)", path,
		       weft_trace_reader_strerror(rc),
		       (unsigned long long)r.error_offset);
	if (!t->frames)
		tt_die("%s: empty file, not a weft trace", path);
	t->truncated = r.truncated;
	weft_trace_reader_close(&r);

	/* Stable time order: qsort is not stable, so sort (ts, index). */
	if (t->nev > 1) {
		struct keyed *k = tt_xmalloc(t->nev * sizeof(*k));

		for (size_t i = 0; i < t->nev; i++) {
			k[i].ev = t->ev[i];
			k[i].i = i;
		}
		qsort(k, t->nev, sizeof(*k), keyed_cmp);
		for (size_t i = 0; i < t->nev; i++)
			t->ev[i] = k[i].ev;
		free(k);
	}
}

/*
 * The probe's drops, where they were: by each worker's ring, the rest on
 * other threads' rings.  Nothing when none were.
 */
void tt_print_drops(FILE *out, const tt_trace_t *t)
{
	uint64_t on_workers = 0;

	if (!t->events_dropped)
		return;
	fprintf(out, "dropped:     %llu events by the probe's rings (",
		(unsigned long long)t->events_dropped);
	for (unsigned i = 0; i < t->nworker_drops; i++) {
		on_workers += t->worker_drops[i];
		fprintf(out, "worker %u: %llu, ", i,
			(unsigned long long)t->worker_drops[i]);
	}
	fprintf(out, "other threads: %llu); figures from events are "
		     "approximate\n",
		(unsigned long long)(t->events_dropped > on_workers ?
					     t->events_dropped - on_workers :
					     0));
}

void tt_free(tt_trace_t *t)
{
	for (size_t b = 0; b < t->ntask_buckets; b++) {
		tt_task_t *k = t->tasks[b];

		while (k) {
			tt_task_t *next = k->next;

			free(k->name);
			free(k->file);
			free(k);
			k = next;
		}
	}
	free(t->tasks);
	for (size_t i = 0; i < t->nwarnings; i++)
		free(t->warnings[i].detail);
	free(t->warnings);
	free(t->ev);
	free(t->process);
	free(t->cmdline);
	free(t->host);
	free(t->clock);
}
