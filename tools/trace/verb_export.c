/* SPDX-License-Identifier: MIT */
/*
 * weft-trace export --chrome FILE -o OUT.json: Chrome trace-event JSON,
 * which Perfetto UI and chrome://tracing open.  One process (the traced
 * pid), one thread track per worker (tid = worker + 1; other threads on
 * tid 0), polls as complete ("X") slices named after their task, steals
 * and parks as thread instants ("i"), sampled queue depths as counters
 * ("C"), a wake and the task's next poll as a flow arrow ("s" / "f"),
 * thread names as metadata ("M").  Times are microseconds from the
 * first event.  --from/--to export a window (trace_window.c): the events
 * stamped within it, and the polls that overlap it cut to it, so that
 * every time is inside it; reading stops a second past --to.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace_tool.h"

static const char usage[] =
	"usage: weft-trace export --chrome FILE [--from TIME] [--to TIME] "
	"-o OUT.json\n"
	"Writes Chrome trace-event JSON (open it in https://ui.perfetto.dev):\n"
	"polls as slices on one track per worker, steals and parks as\n"
	"instants, queue depths as counters, wake -> poll as flow arrows.\n"
	"--from, --to: only that window (Perfetto does not open gigabytes of\n"
	"JSON): the events stamped within it, polls that overlap it cut to\n"
	"it.  TIME: seconds from the trace's first event, as weft-trace dump\n"
	"counts them (2.5, 2.5s, 1500ms, 2m); times in the JSON count from\n"
	"the same event, window or not.\n";

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static unsigned tid_of(uint16_t worker)
{
	return worker == WEFT_EVENT_NO_WORKER ? 0 : (unsigned)worker + 1;
}

static double us(const tt_trace_t *t, uint64_t ns)
{
	return (double)(int64_t)(ns - t->first_ts) / 1e3;
}

/*
 * The last wake of each task not yet followed by its poll, for the
 * wake -> poll flow arrows: open addressing (linear probing) on the task
 * id, grown at half full, a task's slot emptied at its end: the map
 * holds the live tasks.
 */
struct pending_wake {
	uint64_t task; /* 0: empty slot */
	uint64_t ts;
	unsigned tid;
	bool live;
};

struct wake_map {
	struct pending_wake *slot;
	size_t cap, used;
};

static struct pending_wake *wake_find(struct wake_map *m, uint64_t task)
{
	size_t i = (size_t)(task * 0x9e3779b97f4a7c15ull) & (m->cap - 1);

	while (m->slot[i].task && m->slot[i].task != task)
		i = (i + 1) & (m->cap - 1);
	return &m->slot[i];
}

static struct pending_wake *wake_slot(struct wake_map *m, uint64_t task)
{
	struct pending_wake *w;

	if (2 * (m->used + 1) > m->cap) {
		struct wake_map n = { .cap = m->cap ? m->cap * 2 : 1024 };

		n.slot = tt_xmalloc(n.cap * sizeof(*n.slot));
		memset(n.slot, 0, n.cap * sizeof(*n.slot));
		for (size_t i = 0; i < m->cap; i++)
			if (m->slot[i].task)
				*wake_find(&n, m->slot[i].task) = m->slot[i];
		n.used = m->used;
		free(m->slot);
		*m = n;
	}
	w = wake_find(m, task);
	if (!w->task) {
		w->task = task;
		m->used++;
	}
	return w;
}

/* Empties @task's slot, shifting back the ones its probe passed over. */
static void wake_forget(struct wake_map *m, uint64_t task)
{
	struct pending_wake *w;
	size_t i, j, mask = m->cap - 1;

	if (!m->cap || !(w = wake_find(m, task))->task)
		return;
	i = (size_t)(w - m->slot);
	m->used--;
	for (j = (i + 1) & mask; m->slot[j].task; j = (j + 1) & mask) {
		size_t home = (size_t)(m->slot[j].task * 0x9e3779b97f4a7c15ull) &
			      mask;

		/* Moves into the hole only if its home is not in (i, j]. */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->slot[i] = m->slot[j];
			i = j;
		}
	}
	m->slot[i].task = 0;
}

static void export_chrome(tt_trace_t *t, FILE *out, const weft_event_t *first,
			  const tt_window_t *win)
{
	static bool named[65537];
	struct wake_map wakes = { 0 };
	const char *sep = "\n";
	uint64_t flows = 0;
	weft_event_t ev;
	char name[64];

	fprintf(out, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
	fprintf(out,
		"%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,"
		"\"tid\":0,\"args\":{\"name\":",
		sep, t->pid);
	json_str(out, t->process ? t->process : "weft");
	fputs("}}", out);
	sep = ",\n";
	memset(named, 0, sizeof(named));
	ev = *first;
	do {
		const weft_event_t *e = &ev;
		unsigned tid = tid_of(e->worker);

		if (win->set && !tt_window_clip(win, &ev)) {
			if (tt_window_past(win, ev.ts)) {
				tt_window_stop(t);
				break;
			}
			continue;
		}
		if (!named[tid]) {
			named[tid] = true;
			if (tid)
				snprintf(name, sizeof(name), "worker %u",
					 tid - 1);
			else
				snprintf(name, sizeof(name), "other threads");
			fprintf(out,
				"%s{\"ph\":\"M\",\"name\":\"thread_name\","
				"\"pid\":%u,\"tid\":%u,\"args\":{\"name\":"
				"\"%s\"}}",
				sep, t->pid, tid, name);
			fprintf(out,
				"%s{\"ph\":\"M\",\"name\":"
				"\"thread_sort_index\",\"pid\":%u,\"tid\":%u,"
				"\"args\":{\"sort_index\":%u}}",
				sep, t->pid, tid, tid);
		}
		switch (e->kind) {
		case WEFT_EV_WAKE:
			if (e->task) {
				struct pending_wake *w =
					wake_slot(&wakes, e->task);

				w->ts = e->ts;
				w->tid = tid;
				w->live = true;
			}
			break;
		case WEFT_EV_POLL: {
			uint64_t start = e->ts - e->a1;
			struct pending_wake *w =
				e->task && wakes.cap ?
					wake_find(&wakes, e->task) :
					NULL;

			if (start < t->first_ts)
				start = t->first_ts;
			if (w && w->task && w->live && w->ts <= start) {
				/* The wake -> its next poll, as a flow. */
				w->live = false;
				flows++;
				fprintf(out,
					"%s{\"ph\":\"s\",\"cat\":\"wake\","
					"\"name\":\"wake\",\"id\":%llu,"
					"\"ts\":%.3f,\"pid\":%u,\"tid\":%u}",
					sep, (unsigned long long)flows,
					us(t, w->ts), t->pid, w->tid);
				fprintf(out,
					"%s{\"ph\":\"f\",\"bp\":\"e\","
					"\"cat\":\"wake\",\"name\":\"wake\","
					"\"id\":%llu,\"ts\":%.3f,\"pid\":%u,"
					"\"tid\":%u}",
					sep, (unsigned long long)flows,
					us(t, start), t->pid, tid);
			}
			fprintf(out,
				"%s{\"ph\":\"X\",\"cat\":\"poll\",\"name\":",
				sep);
			json_str(out,
				 tt_task_label(t, e->task, name, sizeof(name)));
			fprintf(out,
				",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%u,"
				"\"tid\":%u,\"args\":{\"task\":%llu,"
				"\"result\":\"%s\"}}",
				us(t, start), (double)(e->ts - start) / 1e3,
				t->pid, tid, (unsigned long long)e->task,
				e->a2 & WEFT_POLL_READY ? "ready" : "pending");
			if ((e->a2 & WEFT_POLL_YIELDED) && e->task) {
				/* A yield: a self-wake at the poll's end. */
				struct pending_wake *y =
					wake_slot(&wakes, e->task);

				y->ts = e->ts;
				y->tid = tid;
				y->live = true;
			}
			break;
		}
		case WEFT_EV_COMPLETE:
			wake_forget(&wakes, e->task);
			break;
		case WEFT_EV_STEAL:
			fprintf(out,
				"%s{\"ph\":\"i\",\"s\":\"t\",\"cat\":"
				"\"sched\",\"name\":\"steal\",\"ts\":%.3f,"
				"\"pid\":%u,\"tid\":%u,\"args\":{\"victim\":"
				"%llu,\"tasks\":%u}}",
				sep, us(t, e->ts), t->pid, tid,
				(unsigned long long)e->a1, e->a2);
			break;
		case WEFT_EV_PARK:
		case WEFT_EV_UNPARK:
			fprintf(out,
				"%s{\"ph\":\"i\",\"s\":\"t\",\"cat\":"
				"\"sched\",\"name\":\"%s\",\"ts\":%.3f,"
				"\"pid\":%u,\"tid\":%u}",
				sep, weft_event_kind_name(e->kind),
				us(t, e->ts), t->pid, tid);
			break;
		case WEFT_EV_LOCAL_DEPTH:
			fprintf(out,
				"%s{\"ph\":\"C\",\"name\":\"local queue %u\","
				"\"ts\":%.3f,\"pid\":%u,\"args\":"
				"{\"depth\":%u}}",
				sep, tid ? tid - 1 : 0, us(t, e->ts), t->pid,
				e->a2);
			break;
		case WEFT_EV_GLOBAL_DEPTH:
			fprintf(out,
				"%s{\"ph\":\"C\",\"name\":\"global queue\","
				"\"ts\":%.3f,\"pid\":%u,\"args\":"
				"{\"depth\":%u}}",
				sep, us(t, e->ts), t->pid, e->a2);
			break;
		default:
			break;
		}
	} while (tt_next(t, &ev));
	fputs("\n]}\n", out);
	free(wakes.slot);
}

int tt_verb_export(int argc, char **argv)
{
	const char *path = NULL, *out_path = NULL;
	bool chrome = false;
	weft_event_t first;
	tt_window_t win;
	tt_trace_t t;
	FILE *out;

	tt_window_init(&win);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--chrome")) {
			chrome = true;
			continue;
		}
		if (tt_window_opt(&win, "export", argc, argv, &i))
			continue;
		if (!strcmp(argv[i], "-o")) {
			if (++i >= argc)
				tt_die("export: -o needs a file name");
			out_path = argv[i];
			continue;
		}
		if (argv[i][0] == '-' || path)
			tt_die("export: unexpected argument '%s'", argv[i]);
		path = argv[i];
	}
	if (!chrome)
		tt_die("export: say which format (--chrome)");
	if (!path)
		tt_die("export: no FILE (weft-trace export --help)");
	if (!out_path)
		tt_die("export: no output (-o OUT.json)");
	tt_window_check(&win, "export");
	tt_open(&t, path, false);
	out = strcmp(out_path, "-") ? fopen(out_path, "w") : stdout;
	if (!out)
		tt_die("export: %s: %s", out_path, strerror(errno));
	if (tt_next(&t, &first)) {
		tt_window_start(&win, t.first_ts);
		export_chrome(&t, out, &first, &win);
	} else {
		fputs("{\"traceEvents\":[]}\n", out);
	}
	if (win.set && t.nev && t.last_ts < win.from) {
		/* Nothing of the window: no file that looks like it. */
		if (out != stdout) {
			fclose(out);
			unlink(out_path);
		}
		tt_die("export: %s ends at %.6f s, before --from", path,
		       (double)(t.last_ts - t.first_ts) / 1e9);
	}
	tt_free(&t);
	if ((out != stdout && fclose(out)) || (out == stdout && fflush(out))) {
		fprintf(stderr, "weft-trace: export: %s: write failed\n",
			out_path);
		return 1;
	}
	return 0;
}
