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
 *
 * The JSON is formatted by hand into a 64 KiB buffer written whole
 * (struct jout): printf's formatting was most of the verb's time.  Byte
 * for byte what the printf formats made: integers in decimal, times
 * "%.3f" of whole nanoseconds over 1e3, which for a magnitude under
 * 2^50 ns (13 days) is exactly the integer's microseconds and three
 * digits (the double's error is far below half a thousandth); past
 * that, snprintf as before.
 */
#include <errno.h>
#include <stdarg.h>
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

/* The output: a buffer written whole when it fills. */
#define JOUT_CAP ((size_t)1 << 16)
/* Room a record's fixed parts take at most (names escaped apart). */
#define JOUT_RECORD 512

struct jout {
	FILE *f;
	char *buf;
	size_t len;
};

static void jo_flush(struct jout *o)
{
	if (o->len)
		fwrite(o->buf, 1, o->len, o->f);
	o->len = 0;
}

/* Room for @n more bytes. */
static inline void jo_room(struct jout *o, size_t n)
{
	if (o->len + n > JOUT_CAP)
		jo_flush(o);
}

static inline void jo_mem(struct jout *o, const char *s, size_t n)
{
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

/* A string literal (no room check: a record's room was asked for). */
#define jo_lit(o, s) jo_mem((o), (s), sizeof(s) - 1)

/* Two digits at a time: a division per two (the stamps are long). */
static const char digits2[201] = "00010203040506070809"
				 "10111213141516171819"
				 "20212223242526272829"
				 "30313233343536373839"
				 "40414243444546474849"
				 "50515253545556575859"
				 "60616263646566676869"
				 "70717273747576777879"
				 "80818283848586878889"
				 "90919293949596979899";

static inline void jo_u64(struct jout *o, uint64_t v)
{
	char tmp[20];
	size_t n = 0;

	while (v >= 100) {
		unsigned d = (unsigned)(v % 100) * 2;

		v /= 100;
		n += 2;
		tmp[sizeof(tmp) - n] = digits2[d];
		tmp[sizeof(tmp) - n + 1] = digits2[d + 1];
	}
	if (v >= 10) {
		n += 2;
		tmp[sizeof(tmp) - n] = digits2[v * 2];
		tmp[sizeof(tmp) - n + 1] = digits2[v * 2 + 1];
	} else {
		tmp[sizeof(tmp) - ++n] = (char)('0' + v);
	}
	jo_mem(o, tmp + sizeof(tmp) - n, n);
}

/* "%.3f" of @ns / 1e3 (the file comment has why it is the same). */
static void jo_us(struct jout *o, int64_t ns)
{
	uint64_t m = ns < 0 ? -(uint64_t)ns : (uint64_t)ns, f;

	if (m >= (1ull << 50)) {
		o->len += (size_t)snprintf(o->buf + o->len, 64, "%.3f",
					   (double)ns / 1e3);
		return;
	}
	if (ns < 0)
		o->buf[o->len++] = '-';
	jo_u64(o, m / 1000);
	f = m % 1000;
	o->buf[o->len] = '.';
	o->buf[o->len + 1] = (char)('0' + f / 100);
	o->buf[o->len + 2] = digits2[f % 100 * 2];
	o->buf[o->len + 3] = digits2[f % 100 * 2 + 1];
	o->len += 4;
}

/* printf into the buffer (the rare records). */
__attribute__((format(printf, 2, 3))) static void
jo_printf(struct jout *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	jo_room(o, JOUT_RECORD);
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->len, JOUT_CAP - o->len, fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < JOUT_CAP - o->len) {
		o->len += (size_t)n;
		return;
	}
	/* Longer than the room left: straight out. */
	jo_flush(o);
	va_start(ap, fmt);
	vfprintf(o->f, fmt, ap);
	va_end(ap);
}

/* @n bytes of @s escaped for a JSON string: quotes and backslashes,
 * control characters as \u00XX (what json_str() printed). */
static void jo_esc(struct jout *o, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";

	jo_room(o, 6 * n);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			o->buf[o->len++] = '\\';
			o->buf[o->len++] = (char)c;
		} else if (c < 0x20) {
			jo_lit(o, "\\u00");
			o->buf[o->len++] = hex[c >> 4];
			o->buf[o->len++] = hex[c & 15];
		} else {
			o->buf[o->len++] = (char)c;
		}
	}
}

/* @s as a JSON string, in pieces that fit the buffer. */
static void jo_json(struct jout *o, const char *s)
{
	size_t n = strlen(s), piece = JOUT_CAP / 8;

	jo_room(o, 1);
	o->buf[o->len++] = '"';
	for (size_t at = 0; at < n; at += piece)
		jo_esc(o, s + at, n - at < piece ? n - at : piece);
	jo_room(o, 1);
	o->buf[o->len++] = '"';
}

/* tt_task_label() of @id as a JSON string: the task's name (its first
 * 63 bytes, as the label's buffer held), or "task ID". */
static void jo_label(struct jout *o, const tt_trace_t *t, uint64_t id)
{
	const tt_task_t *k = tt_task(t, id);

	jo_room(o, 2 + 6 * 63);
	o->buf[o->len++] = '"';
	if (k && k->name[0]) {
		jo_esc(o, k->name, strnlen(k->name, 63));
	} else {
		jo_lit(o, "task ");
		jo_u64(o, id);
	}
	o->buf[o->len++] = '"';
}

static unsigned tid_of(uint16_t worker)
{
	return worker == WEFT_EVENT_NO_WORKER ? 0 : (unsigned)worker + 1;
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

/*
 * A task's home slot: ids in runs of 8 keep their order in 8 slots (the
 * runtime hands ids out in blocks, and the live tasks' events are mostly
 * of ids close together: fewer cache lines), the runs scattered.
 */
static inline size_t wake_home(const struct wake_map *m, uint64_t task)
{
	return (size_t)((((task >> 3) * 0x9e3779b97f4a7c15ull) >> 32) << 3 |
			(task & 7)) &
	       (m->cap - 1);
}

static struct pending_wake *wake_find(struct wake_map *m, uint64_t task)
{
	size_t i = wake_home(m, task);

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
		size_t home = wake_home(m, m->slot[j].task);

		/* Moves into the hole only if its home is not in (i, j]. */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->slot[i] = m->slot[j];
			i = j;
		}
	}
	m->slot[i].task = 0;
}

/* A record's "ts" and the rest of its fixed parts: ,"pid":P,"tid":T}. */
static inline void jo_pid_tid(struct jout *o, unsigned pid, unsigned tid)
{
	jo_lit(o, ",\"pid\":");
	jo_u64(o, pid);
	jo_lit(o, ",\"tid\":");
	jo_u64(o, tid);
}

static inline int64_t rel(const tt_trace_t *t, uint64_t ns)
{
	return (int64_t)(ns - t->first_ts);
}

/*
 * A sampled queue depth (@e's a2) as a counter ("C"): the track is
 * "local queue @worker" when @local, else "global queue".
 */
static void jo_depth(struct jout *o, const tt_trace_t *t, const weft_event_t *e,
		     bool local, unsigned worker)
{
	jo_lit(o, ",\n{\"ph\":\"C\",\"name\":\"");
	if (local) {
		jo_lit(o, "local queue ");
		jo_u64(o, worker);
	} else {
		jo_lit(o, "global queue");
	}
	jo_lit(o, "\",\"ts\":");
	jo_us(o, rel(t, e->ts));
	jo_lit(o, ",\"pid\":");
	jo_u64(o, t->pid);
	jo_lit(o, ",\"args\":{\"depth\":");
	jo_u64(o, e->a2);
	jo_lit(o, "}}");
}

static void export_chrome(tt_trace_t *t, struct jout *o,
			  const weft_event_t *first, const tt_window_t *win)
{
	static bool named[65537];
	struct wake_map wakes = { 0 };
	const char *sep = "\n";
	uint64_t flows = 0;
	weft_event_t ev;
	char name[64];

	jo_printf(o, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
	jo_printf(o,
		  "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,"
		  "\"tid\":0,\"args\":{\"name\":",
		  sep, t->pid);
	jo_json(o, t->process ? t->process : "weft");
	jo_room(o, JOUT_RECORD);
	jo_lit(o, "}}");
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
			jo_printf(o,
				  "%s{\"ph\":\"M\",\"name\":\"thread_name\","
				  "\"pid\":%u,\"tid\":%u,\"args\":{\"name\":"
				  "\"%s\"}}",
				  sep, t->pid, tid, name);
			jo_printf(o,
				  "%s{\"ph\":\"M\",\"name\":"
				  "\"thread_sort_index\",\"pid\":%u,\"tid\":%u,"
				  "\"args\":{\"sort_index\":%u}}",
				  sep, t->pid, tid, tid);
		}
		jo_room(o, JOUT_RECORD);
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
				jo_lit(o, ",\n{\"ph\":\"s\",\"cat\":\"wake\","
					  "\"name\":\"wake\",\"id\":");
				jo_u64(o, flows);
				jo_lit(o, ",\"ts\":");
				jo_us(o, rel(t, w->ts));
				jo_pid_tid(o, t->pid, w->tid);
				jo_lit(o, "},\n{\"ph\":\"f\",\"bp\":\"e\","
					  "\"cat\":\"wake\",\"name\":\"wake\","
					  "\"id\":");
				jo_u64(o, flows);
				jo_lit(o, ",\"ts\":");
				jo_us(o, rel(t, start));
				jo_pid_tid(o, t->pid, tid);
				jo_lit(o, "}");
			}
			jo_lit(o, ",\n{\"ph\":\"X\",\"cat\":\"poll\",\"name\":");
			jo_label(o, t, e->task);
			jo_room(o, JOUT_RECORD);
			jo_lit(o, ",\"ts\":");
			jo_us(o, rel(t, start));
			jo_lit(o, ",\"dur\":");
			if (e->ts - start >= (1ull << 50))
				o->len += (size_t)snprintf(
					o->buf + o->len, 64, "%.3f",
					(double)(e->ts - start) / 1e3);
			else
				jo_us(o, (int64_t)(e->ts - start));
			jo_pid_tid(o, t->pid, tid);
			jo_lit(o, ",\"args\":{\"task\":");
			jo_u64(o, e->task);
			if (e->a2 & WEFT_POLL_READY)
				jo_lit(o, ",\"result\":\"ready\"}}");
			else
				jo_lit(o, ",\"result\":\"pending\"}}");
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
			jo_lit(o, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":"
				  "\"sched\",\"name\":\"steal\",\"ts\":");
			jo_us(o, rel(t, e->ts));
			jo_pid_tid(o, t->pid, tid);
			jo_lit(o, ",\"args\":{\"victim\":");
			jo_u64(o, e->a1);
			jo_lit(o, ",\"tasks\":");
			jo_u64(o, e->a2);
			jo_lit(o, "}}");
			break;
		case WEFT_EV_PARK:
		case WEFT_EV_UNPARK:
			jo_lit(o, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":"
				  "\"sched\",\"name\":\"");
			jo_mem(o, weft_event_kind_name(e->kind),
			       strlen(weft_event_kind_name(e->kind)));
			jo_lit(o, "\",\"ts\":");
			jo_us(o, rel(t, e->ts));
			jo_pid_tid(o, t->pid, tid);
			jo_lit(o, "}");
			break;
		case WEFT_EV_LOCAL_DEPTH:
			jo_depth(o, t, e, true, tid ? tid - 1 : 0);
			break;
		case WEFT_EV_GLOBAL_DEPTH:
			jo_depth(o, t, e, false, 0);
			break;
		default:
			break;
		}
	} while (tt_next(t, &ev));
	jo_printf(o, "\n]}\n");
	free(wakes.slot);
}

int tt_verb_export(int argc, char **argv)
{
	const char *path = NULL, *out_path = NULL;
	bool chrome = false;
	weft_event_t first;
	tt_window_t win;
	tt_trace_t t;
	struct jout o;
	bool bad;
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
	t.prefetch_tasks = true; /* a poll's name, each */
	out = strcmp(out_path, "-") ? fopen(out_path, "w") : stdout;
	if (!out)
		tt_die("export: %s: %s", out_path, strerror(errno));
	if (tt_next(&t, &first)) {
		o = (struct jout){ .f = out, .buf = tt_xmalloc(JOUT_CAP) };
		tt_window_start(&win, t.first_ts);
		export_chrome(&t, &o, &first, &win);
		jo_flush(&o);
		free(o.buf);
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
	/* ferror(): a write that failed before the last (fclose() says
	 * only whether its own flush did). */
	bad = ferror(out);
	if (out != stdout ? fclose(out) : fflush(out))
		bad = true;
	if (bad) {
		fprintf(stderr, "weft-trace: export: %s: write failed\n",
			out_path);
		return 1;
	}
	return 0;
}
