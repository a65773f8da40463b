/* SPDX-License-Identifier: MIT */
/*
 * Task detail: one task's identity and figures, where it is parked and
 * the resource it waits on, its poll-time and
 * scheduled-time histograms (non-empty buckets as bars, with p50, p90,
 * p99 and max), waker counts, the warnings it raised, the locks it held
 * across an await (name, where taken, how long) and its recent events.
 * The task is the session's detail_task, else the Tasks view's
 * selection.
 *
 * Locks: the probe reports a weft_mutex_t held when a poll returns
 * PENDING as a lock-held-across-await warning whose detail names the
 * lock and where it was taken (the events carry only the addresses of
 * those strings), so the lines come from the task's warnings, newest
 * first, one per lock and site.  The locks it holds now ("locks held"):
 * the weft_mutex_t its watched events took and did not release, and the
 * lock resources (async mutex, semaphore) listing it among their
 * holders, each with the whole count waiting on it.  Its warnings: its
 * record's bits and the kinds of the rows kept that name it.  Events:
 * the model's watched task (con_session_watch), newest first.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "console.h"

#define LOCK_ROWS 4

static uint64_t detail_id(const con_session_t *s)
{
	return s->detail_task ? s->detail_task : con_tasks_selected(s);
}

/* Up to @rows rows of histogram at (x, y); returns the rows used. */
static int hist_draw(con_grid_t *g, int x, int y, int rows, int width,
		     const char *title, const weft_hist_t *h)
{
	char a[16], b[16], c[16], d[16];
	int first = -1, last = -1, used = 0;
	uint32_t max = 0;

	con_grid_printf(g, x, y + used++, CON_ROLE_TITLE,
			"%s  n=%llu  p50 %s  p90 %s  p99 %s  max %s", title,
			(unsigned long long)h->count,
			con_fmt_ns(a, sizeof(a), weft_hist_percentile(h, 50)),
			con_fmt_ns(b, sizeof(b), weft_hist_percentile(h, 90)),
			con_fmt_ns(c, sizeof(c), weft_hist_percentile(h, 99)),
			con_fmt_ns(d, sizeof(d), h->max_ns));
	for (int i = 0; i < WEFT_HIST_BUCKETS; i++)
		if (h->buckets[i]) {
			if (first < 0)
				first = i;
			last = i;
			if (h->buckets[i] > max)
				max = h->buckets[i];
		}
	if (first < 0) {
		con_grid_put(g, x + 2, y + used++, CON_ROLE_DIM, "(empty)");
		return used;
	}
	for (int i = first; i <= last && used < rows; i++) {
		char up[16];
		int cx;

		cx = con_grid_printf(
			g, x + 2, y + used, CON_ROLE_NORMAL, "<=%-7s ",
			con_fmt_ns(up, sizeof(up),
				   weft_hist_bucket_upper((unsigned)i)));
		cx = con_grid_bar(g, cx, y + used, width,
				  (double)h->buckets[i] / max, CON_ROLE_SPARK);
		con_grid_printf(g, cx, y + used, CON_ROLE_NORMAL, " %u",
				h->buckets[i]);
		used++;
	}
	return used;
}

/*
 * "held lock \"NAME\" (taken at SITE) across an await, ..." (collector_events.c):
 * NAME and SITE into @name and @site.  Return: false when @d is not in
 * that form.
 */
static bool lock_parse(const char *d, char *name, size_t nlen, char *site,
		       size_t slen)
{
	static const char pre[] = "held lock \"", mid[] = "\" (taken at ",
			  post[] = ") across an await";
	const char *n, *m, *e;

	if (strncmp(d, pre, sizeof(pre) - 1))
		return false;
	n = d + sizeof(pre) - 1;
	m = strstr(n, mid);
	if (!m)
		return false;
	e = strstr(m + sizeof(mid) - 1, post);
	if (!e)
		return false;
	snprintf(name, nlen, "%.*s", (int)(m - n), n);
	m += sizeof(mid) - 1;
	snprintf(site, slen, "%.*s", (int)(e - m), m);
	return true;
}

/*
 * The name and site of lock @lock (the address the events carry): a
 * LOCK_HELD_PENDING event of the task for that lock at the very time of
 * one of its lock warnings ties the address to the warning's text.
 */
static bool lock_name(const con_model_t *m, const con_task_t *t, uint64_t lock,
		      char *name, size_t nlen, char *site, size_t slen)
{
	int tries = 0;

	for (size_t i = 0; tries < 16; i++) {
		const weft_event_t *e = con_model_watch_event(m, i);

		if (!e)
			return false;
		if (e->kind != WEFT_EV_LOCK_HELD_PENDING || e->a1 != lock)
			continue;
		tries++; /* bounded: each try reads every warning kept */
		for (size_t k = 0; k < m->nwarnings; k++) {
			const con_warning_t *w = &m->warnings[k];

			if (w->task == t->id && w->at_ns == e->ts &&
			    w->kind == WEFT_WARN_LOCK_HELD_ACROSS_AWAIT &&
			    lock_parse(w->detail, name, nlen, site, slen))
				return true;
		}
	}
	return false;
}

/* A weft_mutex_t taken, by its address, and since when. */
struct held_lock {
	uint64_t lock, since;
};

/*
 * Locks (weft_mutex_t) the task holds now, by its recent events: taken
 * and not yet released (only what the watched events still show), at
 * most @max into @held.  Returns how many.
 */
static int held_now(const con_model_t *m, const con_task_t *t,
		    struct held_lock *held, int max)
{
	int nheld = 0;

	if (t->state == WEFT_TASK_DONE)
		return 0;
	for (size_t i = CON_WATCH_EVENTS; i-- > 0;) {
		const weft_event_t *e = con_model_watch_event(m, i);

		if (!e || e->task != t->id)
			continue;
		if (e->kind == WEFT_EV_LOCK_ACQUIRE && nheld < max) {
			held[nheld].lock = e->a1;
			held[nheld++].since = e->ts;
		} else if (e->kind == WEFT_EV_LOCK_RELEASE) {
			for (int k = nheld - 1; k >= 0; k--)
				if (held[k].lock == e->a1) {
					held[k] = held[--nheld];
					break;
				}
		}
	}
	return nheld;
}

/* Whether holding a resource of @kind is holding a lock. */
static bool lock_kind(unsigned kind)
{
	return kind == WEFT_RES_MUTEX || kind == WEFT_RES_SEMAPHORE ||
	       kind == WEFT_RES_SYNC_MUTEX;
}

/*
 * The @i-th lock resource (async mutex, semaphore) listing @t among its
 * holders, as the resources' last records say; NULL past the last.
 */
static const con_resource_t *res_held(const con_model_t *m, const con_task_t *t,
				      size_t i)
{
	if (t->state == WEFT_TASK_DONE)
		return NULL;
	for (size_t k = 0; k < m->nres; k++) {
		const con_resource_t *r = m->res[k];

		if (r->dropped_ns || !lock_kind(r->kind))
			continue;
		for (uint8_t h = 0; h < r->nholders_kept; h++)
			if (r->holders[h] == t->id) {
				if (!i--)
					return r;
				break;
			}
	}
	return NULL;
}

/* The locks @t holds now: weft_mutex_t by its events, and the lock
 * resources that list it among their holders. */
static unsigned locks_now(const con_model_t *m, const con_task_t *t)
{
	struct held_lock held[8];
	unsigned n = (unsigned)held_now(m, t, held, 8);

	for (size_t i = 0; res_held(m, t, i); i++)
		n++;
	return n;
}

/*
 * The warning kinds raised on @t: its record's bits, and the kinds of
 * the warning rows kept that name it (a row may come before, or without,
 * a record of its task carrying the bit).
 */
static uint32_t warned_kinds(const con_model_t *m, const con_task_t *t)
{
	uint32_t bits = t->warnings;

	for (size_t i = 0; i < m->nwarnings; i++)
		if (m->warnings[i].task == t->id && m->warnings[i].kind < 32)
			bits |= 1u << m->warnings[i].kind;
	return bits;
}

/*
 * Locks the task holds now: the weft_mutex_t by its recent events, and
 * the lock resources listing it among their holders, with how many wait
 * on each.  Returns the rows used.
 */
static int held_now_draw(const con_model_t *m, const con_task_t *t,
			 con_grid_t *g, int y, int rows)
{
	struct held_lock held[8];
	int nheld = held_now(m, t, held, 8), used = 0;
	const con_resource_t *r;

	for (int k = 0; k < nheld && used < rows; k++) {
		char name[96], site[96], dur[16];
		uint64_t now = m->now_ns > held[k].since ? m->now_ns :
							   held[k].since;

		con_fmt_ns(dur, sizeof(dur), now - held[k].since);
		if (lock_name(m, t, held[k].lock, name, sizeof(name), site,
			      sizeof(site)))
			con_grid_printf(g, 3, y + used++, CON_ROLE_WARN,
					"held now: \"%s\"  taken at %s  for %s",
					name, site, dur);
		else
			con_grid_printf(g, 3, y + used++, CON_ROLE_WARN,
					"held now: lock %#llx  for %s",
					(unsigned long long)held[k].lock, dur);
	}
	for (size_t i = 0; (r = res_held(m, t, i)) && used < rows; i++) {
		char label[CON_RES_STR_MAX + 16];

		con_grid_printf(g, 3, y + used++,
				r->nwaiters ? CON_ROLE_WARN : CON_ROLE_NORMAL,
				"held now: %s %s  (%u waiting on it)",
				weft_resource_kind_name(r->kind),
				con_res_label(r, label, sizeof(label)),
				r->nwaiters);
	}
	return used;
}

/* Up to @rows lock lines at @y; returns the rows used. */
static int locks_draw(const con_model_t *m, const con_task_t *t, con_grid_t *g,
		      int y, int rows)
{
	char seen[LOCK_ROWS][192];
	int used = 0, nseen = 0;
	size_t more = 0;

	con_grid_printf(g, 1, y + used++, CON_ROLE_TITLE,
			"locks held across an await: %u", t->locks_held);
	for (size_t i = 0; i < m->nwarnings; i++) {
		const con_warning_t *w = con_warnings_row(m, i);
		char name[96], site[96], key[192], held[16], ago[16];
		bool dup = false;

		if (w->task != t->id ||
		    w->kind != WEFT_WARN_LOCK_HELD_ACROSS_AWAIT)
			continue;
		if (!lock_parse(w->detail, name, sizeof(name), site,
				sizeof(site))) {
			snprintf(name, sizeof(name), "?");
			snprintf(site, sizeof(site), "%s", w->detail);
		}
		snprintf(key, sizeof(key), "%s@%s", name, site);
		for (int k = 0; k < nseen; k++)
			dup |= !strcmp(seen[k], key);
		if (dup)
			continue;
		if (nseen == LOCK_ROWS || used >= rows) {
			more++;
			continue;
		}
		snprintf(seen[nseen++], sizeof(seen[0]), "%s", key);
		con_grid_printf(
			g, 3, y + used++, CON_ROLE_BAD,
			"\"%s\"  taken at %s  held %s  (%s ago)", name, site,
			con_fmt_ns(held, sizeof(held), w->value_ns),
			con_fmt_ns(ago, sizeof(ago),
				   m->now_ns > w->at_ns ? m->now_ns - w->at_ns :
							  0));
	}
	if (more && used < rows)
		con_grid_printf(g, 3, y + used++, CON_ROLE_DIM,
				"(and %zu more)", more);
	else if (!nseen && t->locks_held && used < rows)
		con_grid_put(g, 3, y + used++, CON_ROLE_DIM,
			     "(the warnings naming them are no longer kept)");
	used += held_now_draw(m, t, g, y + used, rows - used);
	return used;
}

/* "mutex cache" or "resource 17": resource @id as the events name it. */
static const char *res_text(const con_model_t *m, uint64_t id, char *buf,
			    size_t len)
{
	const con_resource_t *r = con_model_resource(m, id);
	char label[CON_RES_STR_MAX + 16];

	if (!r)
		snprintf(buf, len, "resource %llu", (unsigned long long)id);
	else
		snprintf(buf, len, "%s %s", weft_resource_kind_name(r->kind),
			 con_res_label(r, label, sizeof(label)));
	return buf;
}

/*
 * snprintf() into @buf, cut to fit: an event's row is as wide as the
 * screen, and a long resource name is cut with it.  A function of our own
 * so that GCC's -Wformat-truncation (Release builds: -O3 inlines
 * res_text() and sees a name up to CON_RES_STR_MAX) does not take a cut
 * meant for the screen for a mistake.
 */
static void __attribute__((format(printf, 3, 4)))
text_fit(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* One event of the task, as text. */
static void event_text(const con_model_t *m, const weft_event_t *e, char *buf,
		       size_t len)
{
	char a[16], r[CON_RES_STR_MAX + 32];

	switch (e->kind) {
	case WEFT_EV_RES_WAIT:
		text_fit(buf, len, "waits on %s (%s)",
			 res_text(m, e->a1, r, sizeof(r)),
			 weft_resource_op_name(e->a2));
		break;
	case WEFT_EV_RES_WAIT_END:
		text_fit(buf, len, "wait on %s ended%s",
			 res_text(m, e->a1, r, sizeof(r)),
			 e->a2 & WEFT_RES_CANCELLED ? ", cancelled" :
			 e->a2 & WEFT_RES_CLOSED    ? ", closed" :
						      "");
		break;
	case WEFT_EV_RES_ACQUIRE:
	case WEFT_EV_RES_RELEASE:
		text_fit(buf, len, "%s %s (%u)",
			 e->kind == WEFT_EV_RES_ACQUIRE ? "acquired" :
							  "released",
			 res_text(m, e->a1, r, sizeof(r)), e->a2);
		break;
	case WEFT_EV_RES_OWNER:
		text_fit(buf, len, "now served by %s",
			 res_text(m, e->a1, r, sizeof(r)));
		break;
	case WEFT_EV_POLL: {
		/* Its clones of its own waker (once a waker-clone row each). */
		unsigned cl = (e->a2 >> WEFT_POLL_CLONES_SHIFT) &
			      WEFT_POLL_CLONES_MAX;
		uint32_t site = e->a2 >> WEFT_POLL_SITE_SHIFT, line;
		char c[32] = "", at[40] = "";

		if (cl)
			snprintf(c, sizeof(c), ", %u waker clone%s", cl,
				 cl > 1 ? "s" : "");
		/*
		 * Where it parks now, folded in (a PARKED_AT's text): the
		 * line of the site, as the stream announced it; not known
		 * when it did not (before the console came).
		 */
		if (site && (line = con_awaits_line(m, site)))
			snprintf(at, sizeof(at), ", parked at line %u", line);
		else if (site)
			snprintf(at, sizeof(at), ", parked (where not known)");
		text_fit(buf, len, "polled %s -> %s%s%s%s",
			 con_fmt_ns(a, sizeof(a), e->a1),
			 e->a2 & WEFT_POLL_READY ? "ready" : "pending",
			 e->a2 & WEFT_POLL_YIELDED ? ", yielded" : "", c, at);
		break;
	}
	case WEFT_EV_WAKE: {
#define WAKE_LABEL(name, value, label) [value] = label,
		static const char *const src[] = { WEFT_WAKE_SOURCES(
			WAKE_LABEL) };
#undef WAKE_LABEL
		unsigned w = e->a2 & 0xff;

		text_fit(buf, len, "woken by %s%s%.0llu%s",
			 w < sizeof(src) / sizeof(*src) ? src[w] : "?",
			 e->a1 ? " " : "", (unsigned long long)e->a1,
			 e->a2 & WEFT_WAKE_BY_VAL ? "" : " (by ref)");
		break;
	}
	case WEFT_EV_SCHEDULE: {
		static const char *const where[] = { "lifo", "local", "yield",
						     "global" };

		text_fit(buf, len, "scheduled (%s)",
			 e->a2 < 4 ? where[e->a2] : "?");
		break;
	}
	case WEFT_EV_SPAWN:
		text_fit(buf, len, "spawned by task %llu",
			 (unsigned long long)e->a1);
		break;
	case WEFT_EV_COMPLETE:
		if ((int32_t)e->a2 == -ECANCELED)
			text_fit(buf, len, "cancelled");
		else
			text_fit(buf, len, "completed, status %d",
				 (int32_t)e->a2);
		break;
	case WEFT_EV_PARKED_AT:
		/* a1 is the file's address in the process: the line only
		 * (the file is in the task's record, above). */
		if (e->a1)
			text_fit(buf, len, "parked at line %u", e->a2);
		else
			text_fit(buf, len, "parked (where not known)");
		break;
	case WEFT_EV_AWAIT_SITE:
		/* No task's: a site's announcement (the detail never shows
		 * one, its task field being the site's id). */
		text_fit(buf, len, "await site %llu at line %u",
			 (unsigned long long)e->task, e->a2);
		break;
	case WEFT_EV_LOCK_ACQUIRE:
	case WEFT_EV_LOCK_RELEASE:
		text_fit(buf, len, "%s lock %#llx",
			 e->kind == WEFT_EV_LOCK_ACQUIRE ? "took" : "released",
			 (unsigned long long)e->a1);
		break;
	case WEFT_EV_SPAWN_INFO:
		text_fit(buf, len, "state %u bytes", e->a2);
		break;
	case WEFT_EV_SPAWN_LOC:
		text_fit(buf, len, "spawned at line %u", e->a2);
		break;
	case WEFT_EV_LOCK_SITE:
		text_fit(buf, len, "the lock was taken at line %u", e->a2);
		break;
	case WEFT_EV_RES_SITE:
		/* a1 is the file's address in the process: the line only
		 * (an audit saw the raw "resource-site a1=... a2=25"). */
		text_fit(buf, len, "acquired it at line %u", e->a2);
		break;
	case WEFT_EV_BLOCKING_START:
		text_fit(buf, len, "a blocking job it spawned started");
		break;
	case WEFT_EV_BLOCKING_END:
		text_fit(buf, len, "a blocking job it spawned ran %s",
			 con_fmt_ns(a, sizeof(a), e->a1));
		break;
	case WEFT_EV_LOCK_HELD_PENDING:
		text_fit(buf, len, "returned pending holding lock %#llx (%s)",
			 (unsigned long long)e->a1,
			 con_fmt_ns(a, sizeof(a), (uint64_t)e->a2 * 1000));
		break;
	default:
		text_fit(buf, len, "%s  a1=%llu a2=%u",
			 weft_event_kind_name(e->kind),
			 (unsigned long long)e->a1, e->a2);
	}
}

/* The newest events that fit in @rows at @y. */
static void events_draw(const con_session_t *s, con_grid_t *g, int y, int rows)
{
	const con_model_t *m = s->model;
	const weft_event_t *first = con_model_watch_event(m, 0);
	int used = 0;

	con_grid_printf(g, 1, y + used++, CON_ROLE_TITLE,
			"recent events (newest first, %llu seen; s since "
			"start, worker, kind)",
			(unsigned long long)m->nwatch);
	if (!first) {
		con_grid_put(g, 3, y + used, CON_ROLE_DIM,
			     "(none yet: events show while the detail is "
			     "open)");
		return;
	}
	for (size_t i = 0; used < rows; i++) {
		const weft_event_t *e = con_model_watch_event(m, i);
		char wk[8], what[160];

		if (!e)
			break;
		event_text(m, e, what, sizeof(what));
		con_fmt_worker(wk, sizeof(wk), e->worker);
		con_grid_printf(g, 3, y + used++,
				e->kind == WEFT_EV_LOCK_HELD_PENDING ?
					CON_ROLE_BAD :
					CON_ROLE_NORMAL,
				"%11.6f  w%-3s %-12s %s",
				(double)(e->ts > con_time_base(s) ?
						 e->ts - con_time_base(s) :
						 0) /
					1e9,
				wk, weft_event_kind_name(e->kind), what);
	}
}

/* Whether the task's recent events take a lock. */
static bool takes_locks(const con_model_t *m, const con_task_t *t)
{
	for (size_t i = 0;; i++) {
		const weft_event_t *e = con_model_watch_event(m, i);

		if (!e)
			return false;
		if (e->task == t->id && e->kind == WEFT_EV_LOCK_ACQUIRE)
			return true;
	}
}

/*
 * Where the task has waited longest: its total per resource (ended
 * waits), longest first, on one row.  Return: the next row.
 */
static int waited_draw(con_grid_t *g, const con_model_t *m, const con_task_t *t,
		       int y)
{
	char line[512], label[CON_RES_STR_MAX + 16], total[16];
	size_t at = 0;

	at += (size_t)snprintf(line, sizeof(line), "waited longest on:");
	for (unsigned i = 0; i < t->nwaited && at < sizeof(line); i++) {
		const weft_probe_task_wait_t *w = &t->waited[i];
		const con_resource_t *r = con_model_resource(m, w->res);

		if (r)
			con_res_label(r, label, sizeof(label));
		else
			snprintf(label, sizeof(label), "%llu",
				 (unsigned long long)w->res);
		at += (size_t)snprintf(
			line + at, sizeof(line) - at, "%s %s %s %s in %u",
			i ? "," : "",
			r ? weft_resource_kind_name(r->kind) : "resource",
			label, con_fmt_ns(total, sizeof(total), w->total_ns),
			w->waits);
	}
	con_grid_put(g, 1, y++, CON_ROLE_NORMAL, line);
	return y;
}

/* A task in a poll now: on which worker, for how long, its last await. */
static void polled_draw(con_grid_t *g, int y, const con_model_t *m,
			const con_task_t *t, const con_worker_t *pw)
{
	char a[16], last[320];
	uint64_t ran = pw->poll_started_ns && m->now_ns > pw->poll_started_ns ?
			       m->now_ns - pw->poll_started_ns :
			       0;

	if (t->parked_line)
		snprintf(last, sizeof(last), " (its last await %s:%u)",
			 t->parked_file[0] ? t->parked_file : "?",
			 t->parked_line);
	else
		last[0] = '\0';
	con_grid_printf(g, 1, y, CON_ROLE_BAD,
			"in a poll on worker %u for %s%s", pw->index,
			con_fmt_ns(a, sizeof(a), ran), last);
}

static void detail_draw(const con_session_t *s, con_grid_t *g, int top,
			int rows)
{
	const con_model_t *m = s->model;
	uint64_t id = detail_id(s);
	const con_task_t *t = id ? con_model_task(m, id) : NULL;
	const con_worker_t *pw;
	char a[16], b[16], c[16], d[16], wk[8];
	int y = top, x, half, left;
	uint32_t warned;

	if (!t) {
		con_grid_put(g, 1, y, CON_ROLE_DIM,
			     id ? "(task not known, or no longer retained)" :
				  "(no task selected: pick one in Tasks, "
				  "Enter)");
		return;
	}
	con_grid_fill_row(g, y, CON_ROLE_COLUMN);
	con_grid_printf(g, 0, y++, CON_ROLE_COLUMN,
			" task %llu  %s  (%s, %s)  parent %llu",
			(unsigned long long)t->id,
			t->name[0] ? t->name : "(unnamed)",
			t->kind ? "fiber" : "future",
			con_task_status_name(m, t),
			(unsigned long long)t->parent);
	con_grid_printf(g, 1, y++, CON_ROLE_NORMAL,
			"spawned at %s:%u   state %u bytes   last worker %s",
			t->file[0] ? t->file : "?", t->line, t->state_size,
			con_fmt_worker(wk, sizeof(wk), t->last_worker));
	/* In a poll now (stuck?), or where its last pending poll stopped. */
	if (t->state == WEFT_TASK_DONE)
		;
	else if ((pw = con_task_polled_by(m, t)))
		polled_draw(g, y++, m, t, pw);
	else if (t->parked_line)
		con_grid_printf(g, 1, y++, CON_ROLE_NORMAL, "parked at %s:%u%s",
				t->parked_file[0] ? t->parked_file : "?",
				t->parked_line,
				t->state == WEFT_TASK_IDLE ?
					"" :
					" (its last await; woken since)");
	else
		con_grid_put(g, 1, y++, CON_ROLE_DIM,
			     "parked at: not known (never pending, or a poll "
			     "written by hand)");
	/* What it waits on (RES_WAIT to RES_WAIT_END), and since when. */
	if (t->state != WEFT_TASK_DONE && t->waiting_on) {
		char what[CON_RES_STR_MAX + 32], since[16];

		con_task_waiting_text(m, t, what, sizeof(what));
		/* Its wait ends at its next poll: one woken since waits for
		 * a worker, not on the resource (an audit read "waiting on
		 * timer-wheel" of a task whose timer had fired, starved). */
		con_grid_printf(
			g, 1, y++, CON_ROLE_WARN, "waiting on %s (%s) for %s%s",
			what, weft_resource_op_name(t->waiting_op),
			con_fmt_ns(since, sizeof(since),
				   t->waiting_since_ns &&
						   m->now_ns >
							   t->waiting_since_ns ?
					   m->now_ns - t->waiting_since_ns :
					   0),
			con_task_shown_state(m, t) == WEFT_TASK_SCHEDULED ?
				"; woken since, queued for a worker" :
				"");
	} else if (t->state == WEFT_TASK_IDLE && !t->idle_since_ns) {
		/* Parked since before anyone listened: its wait was never
		 * heard (an audit read "no resource" of a task hung on a
		 * oneshot).  The runtime keeps only mutex waits. */
		con_grid_put(g, 1, y++, CON_ROLE_DIM,
			     "waiting on: not known (parked since before "
			     "anyone listened; only mutex waits are kept)");
	} else if (t->state == WEFT_TASK_IDLE) {
		con_grid_put(g, 1, y++, CON_ROLE_DIM,
			     "waiting on: no resource the probe knows");
	} else if (con_task_shown_state(m, t) == WEFT_TASK_SCHEDULED) {
		con_grid_put(g, 1, y++, CON_ROLE_DIM,
			     "waiting on: nothing (woken)");
	} else if (t->state != WEFT_TASK_DONE) {
		con_grid_put(g, 1, y++, CON_ROLE_DIM,
			     "waiting on: nothing (in a poll)");
	}
	if (t->nwaited)
		y = waited_draw(g, m, t, y);
	con_grid_printf(g, 1, y++, CON_ROLE_NORMAL,
			"polls %llu   busy %s   scheduled %s   idle %s   "
			"max poll %s",
			(unsigned long long)t->polls,
			con_fmt_ns(a, sizeof(a), t->busy_ns),
			con_fmt_ns(b, sizeof(b), t->scheduled_ns),
			con_task_idle_unknown(m, t) ?
				"? (since before anyone listened)" :
				con_fmt_ns(c, sizeof(c),
					   con_task_idle_ns(m, t)),
			con_fmt_ns(d, sizeof(d), t->max_poll_ns));
	con_grid_printf(g, 1, y++, CON_ROLE_NORMAL,
			"wakes %llu (self %llu)   locks held %u",
			(unsigned long long)t->wakes,
			(unsigned long long)t->self_wakes, locks_now(m, t));
	/*
	 * Clones less drops are not the wakers held: a wake by value uses
	 * a clone up with no drop (weft_probe_task_t), and how many did is
	 * not in the record.  Said, so that a joiner's "clones 1, drops 0"
	 * is not read as a waker still held.
	 */
	con_grid_printf(g, 1, y++, CON_ROLE_NORMAL,
			"waker clones %llu, drops %llu: the rest woken by "
			"value or held",
			(unsigned long long)t->waker_clones,
			(unsigned long long)t->waker_drops);
	x = con_grid_put(g, 1, y, CON_ROLE_NORMAL, "warnings:");
	warned = warned_kinds(m, t);
	if (!warned)
		con_grid_put(g, x + 1, y, CON_ROLE_GOOD, "none");
	for (unsigned k = 1; k < 32; k++)
		if (warned & (1u << k))
			x = con_grid_printf(g, x + 1, y, CON_ROLE_BAD, "%s",
					    weft_warning_kind_name(k));
	y += 2;
	if (t->locks_held || takes_locks(m, t) || res_held(m, t, 0)) {
		y += locks_draw(m, t, g, y, LOCK_ROWS + 2);
		y++;
	}
	left = top + rows - y;
	/* Histograms take about half of what is left, events the rest. */
	half = left > 16 ? (left - 6) / 4 : 2;
	if (!t->hist) {
		con_grid_put(g, 1, y, CON_ROLE_DIM,
			     "(no histograms yet: polled fewer than twice)");
		y += 2;
	} else {
		y += hist_draw(g, 1, y, half, 40, "poll time", &t->hist[0]);
		y++;
		y += hist_draw(g, 1, y, half, 40, "scheduled time",
			       &t->hist[1]);
		y++;
	}
	if (y < top + rows - 1)
		events_draw(s, g, y, top + rows - y);
}

const con_view_t con_view_detail = {
	.name = "detail",
	.letter = 'd',
	.title = "Detail",
	.draw = detail_draw,
};
