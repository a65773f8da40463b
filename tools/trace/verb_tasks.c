/* SPDX-License-Identifier: MIT */
/*
 * weft-trace tasks PID|FILE [--at TIME] [--sort idle|id|name]: every live
 * task, one a line: id, name, state, idle for, spawned at, parked at
 * (the file and line of the await its last pending poll stopped at) and
 * waiting on (the resource it waits on now: its kind and name, or the
 * file:line it was initialised at; "resource ID" when the updates have
 * not described it, "-" for none).  The resources come in the same
 * updates as the tasks (every one in a full update).
 *
 * Live: a subscriber like the console.  The server's first update to a
 * new subscriber is full (every task the collector knows, those parked
 * before anyone listened too, from the runtime's owned list), split into
 * records when large; the next update with stats ends it.  No worker is
 * paused and no task polled: the collector reads what the workers left.
 *
 * A file: its updates, in file order, up to the first one after TIME;
 * each carries the tasks that changed, so the table at TIME is the last
 * record of each task up to then, the finished ones dropped as their
 * last record comes.  Memory: the live tasks, never the file.  The
 * events are passed over (a file's time is its updates', a tenth of a
 * second apart by default).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "live.h"
#include "weft/trace_stream.h"

static const char usage[] =
	"usage: weft-trace tasks PID|FILE [--at TIME] [--sort idle|id|name]\n"
	"Every live task, one a line: id, name, state, idle for, spawned\n"
	"at, parked at (file:line of the await it is parked at) and waiting\n"
	"on (the resource: kind and name or file:line, e.g. \"mutex cache\",\n"
	"\"mpsc demo.c:88\"; \"-\" for none).\n"
	"PID (or unix:PATH, tcp://HOST:PORT): a live process, read from its\n"
	"probe's first full update; no worker is paused, no task polled.\n"
	"FILE: a trace file, the tasks as its updates stood at TIME (default:\n"
	"its end).  TIME: seconds from the trace's start, as weft-trace dump\n"
	"counts them (12.5, 12.5s, 800ms, 2m).\n"
	"--sort: idle (longest idle first, the default), id, or name.\n"
	"Idle for: since the end of the task's last pending poll; \"?\" for\n"
	"a task idle since before the probe listened (sorted first).\n";

enum sort_by { SORT_IDLE, SORT_ID, SORT_NAME };

typedef struct row_s {
	uint64_t id;
	char *name, *file, *parked_file;
	uint32_t line, parked_line;
	uint8_t state;
	uint64_t idle_ns, idle_since_ns;
	uint64_t waiting_on; /* resource id, 0: none */
	struct row_s *next; /* hash chain */
} row_t;

/* A worker in a poll, as the latest update's worker records say. */
typedef struct polling_s {
	uint64_t task, since_ns;
	uint32_t worker;
} polling_t;

struct table {
	row_t **b;
	size_t nb, n;
	polling_t *polling; /* the workers in a poll */
	size_t npolling;
	uint64_t now;       /* the time the table stands at */
	enum sort_by sort;
	tt_restab_t res;    /* the resources, as the updates say */
};

/* tasks: one file's reading */
struct file_read {
	struct table *tab;
	tt_trace_t *t;
	uint64_t at_rel;  /* --at, ns from the start; UINT64_MAX: the end */
	uint64_t base;    /* the first frame's time */
	bool applying;    /* the last update with stats was within TIME */
	bool past;        /* an update after TIME came: the rest is later */
};

static size_t hash(const struct table *t, uint64_t id)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 20) & (t->nb - 1);
}

static row_t **slot(struct table *t, uint64_t id)
{
	row_t **pp = &t->b[hash(t, id)];

	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next;
	return pp;
}

static void grow(struct table *t)
{
	size_t old = t->nb;
	row_t **b = t->b;

	t->nb = old ? 2 * old : 1024;
	t->b = tt_xmalloc(t->nb * sizeof(*t->b));
	memset(t->b, 0, t->nb * sizeof(*t->b));
	for (size_t i = 0; i < old; i++)
		for (row_t *r = b[i], *next; r; r = next) {
			size_t j = hash(t, r->id);

			next = r->next;
			r->next = t->b[j];
			t->b[j] = r;
		}
	free(b);
}

static void row_free(row_t *r)
{
	free(r->name);
	free(r->file);
	free(r->parked_file);
	free(r);
}

static void set_str(char **dst, const char *src)
{
	free(*dst);
	*dst = tt_xstrdup(src);
}

/*
 * One task's record: its latest state.  Name, file and line are left
 * out of a thin record for a task already sent them: the first kept.
 * A finished task's last record takes it off the table.
 */
static void apply_task(struct table *t, const Weft__V1__Task *m)
{
	row_t **pp, *r;

	if (!m->id)
		return;
	pp = slot(t, m->id);
	if (m->finished_ns || m->state == WEFT_TASK_DONE) {
		if ((r = *pp)) {
			*pp = r->next;
			row_free(r);
			t->n--;
		}
		return;
	}
	if (!(r = *pp)) {
		if (t->n + 1 > 2 * t->nb) {
			grow(t);
			pp = slot(t, m->id);
		}
		r = tt_xmalloc(sizeof(*r));
		memset(r, 0, sizeof(*r));
		r->id = m->id;
		r->name = tt_xstrdup("");
		r->file = tt_xstrdup("");
		*pp = r;
		t->n++;
	}
	if (m->name && m->name[0] && !r->name[0])
		set_str(&r->name, m->name);
	if (m->file && m->file[0] && !r->file[0]) {
		set_str(&r->file, m->file);
		r->line = m->line;
	}
	r->state = (uint8_t)m->state;
	r->idle_ns = m->idle_ns;
	r->idle_since_ns = m->idle_since_ns;
	free(r->parked_file);
	r->parked_file = m->parked_line ? tt_xstrdup(m->parked_file) : NULL;
	r->parked_line = m->parked_line;
	r->waiting_on = m->waiting_on;
}

/* @f's tasks through @ti (weft_trace_reader_tasks(), tt_tasks()). */
static void apply_update(struct table *t, const Weft__V1__Frame *f,
			 weft_trace_tasks_t *ti)
{
	const Weft__V1__Update *u = f->update;
	const Weft__V1__Task *m;

	for (size_t i = 0; i < u->n_resources; i++)
		tt_res_note(&t->res, u->resources[i]);
	/*
	 * The workers in a poll: a task's own record says where its last
	 * poll left it, so one stuck in a poll (a blocking call, a
	 * deadlock) reads idle there, parked at an await it has left.  The
	 * workers come in an update's first part, the one with stats: none
	 * there, none polls (the runtime went).
	 */
	if (u->stats)
		t->npolling = 0;
	if (u->n_workers) {
		t->polling = tt_xrealloc(t->polling,
					 u->n_workers * sizeof(*t->polling));
		t->npolling = 0;
		for (size_t i = 0; i < u->n_workers; i++)
			if (u->workers[i]->state == 0 &&
			    u->workers[i]->current_task)
				t->polling[t->npolling++] = (polling_t){
					.task = u->workers[i]->current_task,
					.since_ns =
						u->workers[i]->poll_started_ns,
					.worker = u->workers[i]->index
				};
	}
	while ((m = weft_trace_tasks_next(ti)))
		apply_task(t, m);
}

/* What @r waits on, as printed: "mutex cache", "resource 17", "-". */
static const char *waiting_text(const struct table *t, const row_t *r,
				char *buf, size_t len)
{
	const tt_resource_t *x;

	if (!r->waiting_on)
		snprintf(buf, len, "-");
	else if ((x = tt_res_find(&t->res, r->waiting_on)))
		tt_res_label(x, buf, len);
	else
		snprintf(buf, len, "resource %llu",
			 (unsigned long long)r->waiting_on);
	return buf;
}

/* ------------------------------------------------------------ output */

static const char *state_name(uint8_t s)
{
	static const char *const names[] = { "idle", "scheduled", "running",
					     "done" };

	return s < 4 ? names[s] : "?";
}

/*
 * The idle stretch under way: since the end of its last pending poll.
 * UINT64_MAX: idle since before the probe listened (not known), which
 * sorts first: likely the oldest of all.
 */
static uint64_t idle_for(const struct table *t, const row_t *r)
{
	if (r->state != WEFT_TASK_IDLE)
		return 0;
	if (!r->idle_since_ns)
		return UINT64_MAX;
	return t->now > r->idle_since_ns ? t->now - r->idle_since_ns : 0;
}

static void fmt_ns(char *buf, size_t len, uint64_t ns)
{
	if (ns >= 3600ull * 1000000000u)
		snprintf(buf, len, "%.1fh", (double)ns / 3.6e12);
	else if (ns >= 60ull * 1000000000u)
		snprintf(buf, len, "%.1fm", (double)ns / 6e10);
	else if (ns >= 1000000000u)
		snprintf(buf, len, "%.2fs", (double)ns / 1e9);
	else if (ns >= 1000000u)
		snprintf(buf, len, "%.1fms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.1fus", (double)ns / 1e3);
}

/* The worker polling @r now, or NULL. */
static const polling_t *polled(const struct table *t, const row_t *r)
{
	for (size_t i = 0; i < t->npolling && r->state != WEFT_TASK_DONE; i++)
		if (t->polling[i].task == r->id)
			return &t->polling[i];
	return NULL;
}

/* PARKED AT: its last await's file:line, or the poll it is in. */
static void parked_text(const struct table *t, const row_t *r, char *buf,
			size_t len)
{
	const polling_t *p = polled(t, r);
	char d[16];

	if (p) {
		fmt_ns(d, sizeof(d),
		       p->since_ns && t->now > p->since_ns ?
			       t->now - p->since_ns :
			       0);
		snprintf(buf, len, "in a poll %s on worker %u", d, p->worker);
	} else if (r->parked_line) {
		snprintf(buf, len, "%s:%u",
			 r->parked_file[0] ? r->parked_file : "?",
			 r->parked_line);
	} else {
		snprintf(buf, len, "-");
	}
}

static const struct table *sort_tab;

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static int row_cmp(const void *pa, const void *pb)
{
	const row_t *a = *(const row_t *const *)pa;
	const row_t *b = *(const row_t *const *)pb;
	int c = 0;

	switch (sort_tab->sort) {
	case SORT_IDLE:
		/* Longest idle first: a hung task leads. */
		c = -cmp_u64(idle_for(sort_tab, a), idle_for(sort_tab, b));
		break;
	case SORT_NAME:
		c = strcmp(a->name, b->name);
		break;
	case SORT_ID:
		break;
	}
	return c ? c : cmp_u64(a->id, b->id);
}

/* Column widths from the rows, then the rows: every live task. */
static int print_table(struct table *t)
{
	row_t **rows = t->n ? tt_xmalloc(t->n * sizeof(*rows)) : NULL;
	int wname = 4, wspawn = 10, wparked = 9;
	size_t n = 0;
	char buf[64], parked[4096];

	for (size_t i = 0; i < t->nb; i++)
		for (row_t *r = t->b[i]; r; r = r->next)
			rows[n++] = r;
	sort_tab = t;
	if (n > 1)
		qsort(rows, n, sizeof(*rows), row_cmp);
	for (size_t i = 0; i < n; i++) {
		const row_t *r = rows[i];
		int w;

		w = (int)strlen(r->name[0] ? r->name : "-");
		wname = w > wname ? w : wname;
		w = r->file[0] ? snprintf(buf, sizeof(buf), ":%u", r->line) +
					 (int)strlen(r->file) :
				 1;
		wspawn = w > wspawn ? w : wspawn;
		parked_text(t, r, parked, sizeof(parked));
		w = (int)strlen(parked);
		wparked = w > wparked ? w : wparked;
	}
	printf("%10s  %-*s  %-9s  %9s  %-*s  %-*s  %s\n", "ID", wname, "NAME",
	       "STATE", "IDLE FOR", wspawn, "SPAWNED AT", wparked,
	       "PARKED AT", "WAITING ON");
	for (size_t i = 0; i < n; i++) {
		const row_t *r = rows[i];
		bool in_poll = polled(t, r) != NULL;
		char idle[16], spawn[4096], waiting[320];

		if (r->state != WEFT_TASK_IDLE || in_poll)
			snprintf(idle, sizeof(idle), "-");
		else if (!r->idle_since_ns)
			snprintf(idle, sizeof(idle), "?");
		else
			fmt_ns(idle, sizeof(idle), idle_for(t, r));
		if (r->file[0])
			snprintf(spawn, sizeof(spawn), "%s:%u", r->file,
				 r->line);
		else
			snprintf(spawn, sizeof(spawn), "-");
		parked_text(t, r, parked, sizeof(parked));
		printf("%10llu  %-*s  %-9s  %9s  %-*s  %-*s  %s\n",
		       (unsigned long long)r->id, wname,
		       r->name[0] ? r->name : "-",
		       in_poll ? "running" : state_name(r->state), idle, wspawn,
		       spawn, wparked, parked,
		       waiting_text(t, r, waiting, sizeof(waiting)));
	}
	free(rows);
	return fflush(stdout) || ferror(stdout) ? 1 : 0;
}

static void table_free(struct table *t)
{
	for (size_t i = 0; i < t->nb; i++)
		for (row_t *r = t->b[i], *next; r; r = next) {
			next = r->next;
			row_free(r);
		}
	free(t->b);
	free(t->polling);
	tt_res_free(&t->res);
}

/* ------------------------------------------------------------ live */

static void tasks_live(struct table *tab, const char *target)
{
	Weft__V1__Frame sub_frame = WEFT__V1__FRAME__INIT, *f;
	Weft__V1__Subscribe sub = WEFT__V1__SUBSCRIBE__INIT;
	weft_wire_sites_t sites = { 0 };
	bool in_full = false;
	uint64_t until;
	tt_live_t l;
	int rc;

	tt_live_connect(&l, target, true);
	rc = tt_live_next(&l, 5000, &f);
	if (rc != 1 || f->body_case != WEFT__V1__FRAME__BODY_HEADER)
		tt_die("tasks: %s: no header from the server", target);
	weft_wire_frame_free(f);
	/* Updates only, as often as the server allows: the full one is
	 * sent at once, and the next (with stats) ends its parts soon. */
	sub.updates = true;
	sub.interval_ms = 10;
	sub_frame.body_case = WEFT__V1__FRAME__BODY_SUBSCRIBE;
	sub_frame.subscribe = &sub;
	tt_live_send(&l, &sub_frame);
	until = tt_now_ms() + 10000;
	for (;;) {
		uint64_t now = tt_now_ms();
		const Weft__V1__Update *u;

		if (now >= until)
			tt_die("tasks: %s: no full update within 10 s", target);
		rc = tt_live_next(&l, (int)(until - now), &f);
		if (rc < 0)
			tt_die("tasks: %s: connection closed before a full "
			       "update", target);
		if (rc == 0)
			continue;
		if (f->body_case != WEFT__V1__FRAME__BODY_UPDATE) {
			weft_wire_frame_free(f);
			continue;
		}
		u = f->update;
		if (u->stats && in_full) {
			/* The next update: the full one is whole. */
			weft_wire_frame_free(f);
			break;
		}
		if (u->full) {
			in_full = true;
			tab->now = u->stats ? u->stats->now_ns : 0;
		}
		if (in_full) {
			weft_trace_tasks_t ti;

			if (weft_wire_sites_add_update(&sites, u))
				tt_die("out of memory");
			weft_trace_reader_tasks(NULL, f, &ti);
			ti.sites = &sites; /* the socket's: no reader's */
			apply_update(tab, f, &ti);
		}
		weft_wire_frame_free(f);
	}
	weft_wire_sites_fini(&sites);
	tt_live_close(&l);
}

/* ------------------------------------------------------------ file */

static void file_frame(void *ctx, const Weft__V1__Frame *f)
{
	struct file_read *r = ctx;
	uint64_t at = weft_trace_frame_time(f);

	if (!r->base && at)
		r->base = at;
	if (r->past || f->body_case != WEFT__V1__FRAME__BODY_UPDATE)
		return;
	if (f->update->stats) {
		/* A record with stats starts an update; the others (no
		 * stats) are more of its tasks, split off. */
		if (r->at_rel != UINT64_MAX && at > r->base + r->at_rel) {
			r->past = true;
			r->applying = false;
			return;
		}
		r->applying = true;
		r->tab->now = at;
	}
	if (r->applying) {
		weft_trace_tasks_t ti;

		tt_tasks(r->t, f, &ti);
		apply_update(r->tab, f, &ti);
	}
}

static void tasks_file(struct table *tab, const char *path, uint64_t at_rel)
{
	struct file_read r = { .tab = tab, .at_rel = at_rel };
	weft_event_t ev;
	tt_trace_t t;

	/* File order: the events only pass by, and an early TIME stops
	 * the read as soon as an update after it comes. */
	tt_open(&t, path, true);
	r.t = &t;
	t.on_frame = file_frame;
	t.frame_ctx = &r;
	while (!r.past && tt_next(&t, &ev))
		;
	if (!t.updates)
		tt_die("tasks: %s: no updates in the file (recorded without "
		       "them?)", path);
	if (at_rel != UINT64_MAX && !r.past && tab->now &&
	    tab->now < r.base + at_rel)
		fprintf(stderr,
			"weft-trace: tasks: %s ends before --at (%.3f s); "
			"shown at its end\n",
			path, (double)(tab->now - r.base) / 1e9);
	if (tab->now)
		printf("# at %.3f s of %s\n",
		       (double)(tab->now - r.base) / 1e9, path);
	tt_free(&t);
}

/* A file when one is there by that name; else a live target. */
static bool is_file(const char *what)
{
	struct stat st;

	return stat(what, &st) == 0 && !S_ISSOCK(st.st_mode);
}

int tt_verb_tasks(int argc, char **argv)
{
	struct table tab = { .sort = SORT_IDLE };
	const char *what = NULL, *at = NULL;
	uint64_t at_rel = UINT64_MAX;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(argv[i], "--at")) {
			if (i + 1 >= argc)
				tt_die("tasks: --at needs a TIME "
				       "(weft-trace tasks --help)");
			at = argv[++i];
		} else if (!strcmp(argv[i], "--sort")) {
			const char *s = i + 1 < argc ? argv[++i] : "";

			if (!strcmp(s, "idle"))
				tab.sort = SORT_IDLE;
			else if (!strcmp(s, "id"))
				tab.sort = SORT_ID;
			else if (!strcmp(s, "name"))
				tab.sort = SORT_NAME;
			else
				tt_die("tasks: --sort takes idle, id or name, "
				       "not '%s'", s);
		} else if (argv[i][0] == '-' || what) {
			tt_die("tasks: unexpected argument '%s'", argv[i]);
		} else {
			what = argv[i];
		}
	}
	if (!what)
		tt_die("tasks: no PID or FILE (weft-trace tasks --help)");
	if (at && !tt_window_time(at, &at_rel))
		tt_die("tasks: bad --at '%s' (seconds from the trace's "
		       "start: 12.5, 800ms, 2m)", at);
	grow(&tab);
	if (is_file(what)) {
		tasks_file(&tab, what, at_rel);
	} else {
		if (at)
			tt_die("tasks: --at is for a trace file; %s is a live "
			       "target (or no such file)", what);
		tasks_live(&tab, what);
	}
	rc = print_table(&tab);
	table_free(&tab);
	return rc;
}
