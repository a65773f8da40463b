/* SPDX-License-Identifier: MIT */
/*
 * The console's state store (console.h): what the frames said, kept for
 * the views to read.
 *
 * Updates carry only what changed (the first one, or a "full" one, every
 * known task), so the store merges: a task is created the first time an
 * update names it and overwritten by later ones; a finished task stays
 * for retain_ns after it finished (by the traced process's clock), then
 * goes.  Workers keep a ring of samples (queue depth, polls/s, busy
 * ratio) taken once per update, for sparklines; POLL events fill a
 * per-worker timeline of busy time in CON_TL_BUCKET_NS buckets.  Warnings
 * are kept in arrival order (the views show them newest first), at most
 * CON_MAX_WARNINGS, the oldest going first and counted.
 *
 * Tasks live in a vector of pointers (the order is arbitrary) with an
 * open-addressing index by id; the Tasks view reads "list", the sorted
 * and filtered vector that con_model_resort() rebuilds when stale.
 *
 * Nothing from a frame is trusted: indices are range-checked, strings
 * may be NULL, histograms may have any number of buckets.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"

#include "wire_internal.h"

void con_model_init(con_model_t *m, const char *target)
{
	memset(m, 0, sizeof(*m));
	m->target = con_xstrdup(target);
	m->process = con_xstrdup("");
	m->clock = con_xstrdup("");
	m->workers = con_xcalloc(CON_MAX_WORKERS, sizeof(*m->workers));
	m->hash_cap = 1024;
	m->hash = con_xcalloc(m->hash_cap, sizeof(*m->hash));
	m->retain_ns = CON_RETAIN_NS;
	m->sort_col = CON_COL_ID;
	m->list_stale = true;
}

static void task_free(con_task_t *t)
{
	free(t->name);
	free(t->file);
	free(t);
}

static void warning_free(con_warning_t *w)
{
	free(w->task_name);
	free(w->file);
	free(w->detail);
}

void con_model_fini(con_model_t *m)
{
	for (size_t i = 0; i < m->ntasks; i++)
		task_free(m->tasks[i]);
	for (size_t i = 0; i < m->nwarnings; i++)
		warning_free(&m->warnings[i]);
	free(m->tasks);
	free(m->warnings);
	free(m->workers);
	free(m->hash);
	free(m->list);
	free(m->target);
	free(m->process);
	free(m->clock);
	memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------- index */

static size_t slot_of(uint64_t id, size_t cap)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

static void hash_put(con_task_t **hash, size_t cap, con_task_t *t)
{
	size_t i = slot_of(t->id, cap);

	while (hash[i])
		i = (i + 1) & (cap - 1);
	hash[i] = t;
}

/* Rebuild the index for ntasks at a load of at most a half. */
static void hash_rebuild(con_model_t *m)
{
	size_t cap = 1024;

	while (cap < 2 * m->ntasks + 2)
		cap *= 2;
	if (cap != m->hash_cap) {
		free(m->hash);
		m->hash = con_xcalloc(cap, sizeof(*m->hash));
		m->hash_cap = cap;
	} else {
		memset(m->hash, 0, cap * sizeof(*m->hash));
	}
	for (size_t i = 0; i < m->ntasks; i++)
		hash_put(m->hash, m->hash_cap, m->tasks[i]);
}

const con_task_t *con_model_task(const con_model_t *m, uint64_t id)
{
	size_t i = slot_of(id, m->hash_cap);

	while (m->hash[i]) {
		if (m->hash[i]->id == id)
			return m->hash[i];
		i = (i + 1) & (m->hash_cap - 1);
	}
	return NULL;
}

const con_worker_t *con_model_worker(const con_model_t *m, uint32_t i)
{
	if (i >= CON_MAX_WORKERS || !m->workers[i].seen)
		return NULL;
	return &m->workers[i];
}

static con_task_t *task_get(con_model_t *m, uint64_t id)
{
	con_task_t *t = (con_task_t *)con_model_task(m, id);

	if (t)
		return t;
	if (m->ntasks == m->tasks_cap) {
		m->tasks_cap = m->tasks_cap ? 2 * m->tasks_cap : 256;
		m->tasks = con_xreallocarray(m->tasks, m->tasks_cap,
					     sizeof(*m->tasks));
	}
	t = con_xcalloc(1, sizeof(*t));
	t->id = id;
	t->name = con_xstrdup("");
	t->file = con_xstrdup("");
	m->tasks[m->ntasks++] = t;
	if (2 * m->ntasks + 2 > m->hash_cap)
		hash_rebuild(m);
	else
		hash_put(m->hash, m->hash_cap, t);
	return t;
}

/* ------------------------------------------------------------ frames */

static void set_str(char **dst, const char *src)
{
	if (!src)
		src = "";
	if (!strcmp(*dst, src))
		return;
	free(*dst);
	*dst = con_xstrdup(src);
}

void con_model_hello(con_model_t *m, const Weft__V1__Hello *h)
{
	if (!h)
		return;
	set_str(&m->process, h->process_name);
	set_str(&m->clock, h->clock);
	m->pid = h->pid;
	m->start_ns = h->start_ns;
	if (h->workers <= CON_MAX_WORKERS && h->workers > m->nworkers)
		m->nworkers = h->workers;
}

static void hist_set(weft_hist_t *h, const Weft__V1__Histogram *m)
{
	size_t n = m->n_buckets < WEFT_HIST_BUCKETS ? m->n_buckets :
						      WEFT_HIST_BUCKETS;

	memset(h, 0, sizeof(*h));
	if (m->buckets)
		memcpy(h->buckets, m->buckets, n * sizeof(h->buckets[0]));
	h->count = m->count;
	h->sum_ns = m->sum_ns;
	h->max_ns = m->max_ns;
	h->outliers = m->outliers;
}

static void task_set(con_model_t *m, const Weft__V1__Task *x)
{
	con_task_t *t;

	if (!x || !x->id)
		return;
	t = task_get(m, x->id);
	t->parent = x->parent;
	/* The first name seen stays (an update may omit it). */
	if (x->name && x->name[0])
		set_str(&t->name, x->name);
	if (x->file && x->file[0])
		set_str(&t->file, x->file);
	if (x->line)
		t->line = x->line;
	t->state_size = x->state_size;
	t->kind = (uint8_t)x->kind;
	t->state = x->state <= WEFT_TASK_DONE ? (uint8_t)x->state : 0;
	t->last_worker = (uint16_t)x->last_worker;
	t->status = x->status;
	t->spawned_ns = x->spawned_ns;
	t->finished_ns = x->finished_ns;
	t->polls = x->polls;
	t->busy_ns = x->busy_ns;
	t->scheduled_ns = x->scheduled_ns;
	t->idle_ns = x->idle_ns;
	t->wakes = x->wakes;
	t->self_wakes = x->self_wakes;
	t->waker_clones = x->waker_clones;
	t->waker_drops = x->waker_drops;
	t->max_poll_ns = x->max_poll_ns;
	t->warnings = x->warnings;
	t->locks_held = x->locks_held;
	if (x->poll_hist) {
		hist_set(&t->poll_hist, x->poll_hist);
		t->has_hist = true;
	}
	if (x->sched_hist) {
		hist_set(&t->sched_hist, x->sched_hist);
		t->has_hist = true;
	}
}

static void worker_set(con_model_t *m, const Weft__V1__Worker *x)
{
	con_worker_t *w;

	if (!x || x->index >= CON_MAX_WORKERS) {
		m->bad_frames++;
		return;
	}
	w = &m->workers[x->index];
	w->seen = true;
	w->index = x->index;
	w->state = x->state <= 2 ? x->state : 0;
	w->current_task = x->current_task;
	if (x->counters) {
		w->counters = *x->counters;
		w->counters.base = (ProtobufCMessage){ 0 };
	}
	w->polls_per_s = x->polls_per_s;
	w->steals_per_s = x->steals_per_s;
	w->steal_rate = x->steal_rate;
	w->busy_ratio = x->busy_ratio;
	w->mean_poll_ns = x->mean_poll_ns;
	w->max_poll_ns = x->max_poll_ns;
	w->queue_depth = x->queue_depth;
	for (size_t v = 0; v < x->n_stolen_from && v < CON_MAX_WORKERS; v++)
		if (v != x->index)
			m->workers[v].stolen_by_others += x->stolen_from[v];
	if (x->index + 1 > m->nworkers)
		m->nworkers = x->index + 1;
}

static void warning_add(con_model_t *m, const Weft__V1__Warning *x)
{
	con_warning_t *w;

	if (!x)
		return;
	if (m->nwarnings == CON_MAX_WARNINGS) {
		warning_free(&m->warnings[0]);
		memmove(m->warnings, m->warnings + 1,
			(m->nwarnings - 1) * sizeof(*m->warnings));
		m->nwarnings--;
		m->warnings_discarded++;
	}
	if (m->nwarnings == m->warnings_cap) {
		m->warnings_cap = m->warnings_cap ? 2 * m->warnings_cap : 64;
		m->warnings = con_xreallocarray(m->warnings, m->warnings_cap,
						sizeof(*m->warnings));
	}
	w = &m->warnings[m->nwarnings++];
	w->seq = x->seq;
	w->kind = x->kind;
	w->worker = x->worker;
	w->task = x->task;
	w->task_name = con_xstrdup(x->task_name);
	w->file = con_xstrdup(x->file);
	w->line = x->line;
	w->at_ns = x->at_ns;
	w->value_ns = x->value_ns;
	w->detail = con_xstrdup(x->detail);
}

void con_model_update(con_model_t *m, const Weft__V1__Update *u)
{
	size_t k;

	if (!u)
		return;
	m->updates++;
	if (u->stats) {
		m->stats = *u->stats;
		m->stats.base = (ProtobufCMessage){ 0 };
		m->stats.clock = NULL;
		m->have_stats = true;
		if (u->stats->now_ns > m->now_ns)
			m->now_ns = u->stats->now_ns;
		if (!m->start_ns)
			m->start_ns = u->stats->start_ns;
		if (u->stats->workers <= CON_MAX_WORKERS &&
		    u->stats->workers > m->nworkers)
			m->nworkers = u->stats->workers;
	}
	for (size_t i = 0; i < u->n_tasks; i++)
		task_set(m, u->tasks[i]);
	if (u->n_workers) {
		for (uint32_t i = 0; i < CON_MAX_WORKERS; i++)
			m->workers[i].stolen_by_others = 0;
		m->worker_steals = 0;
	}
	for (size_t i = 0; i < u->n_workers; i++)
		worker_set(m, u->workers[i]);
	/* One history sample per update for every worker. */
	k = m->hist_next % CON_HISTORY;
	for (uint32_t i = 0; i < m->nworkers; i++) {
		con_worker_t *w = &m->workers[i];

		w->depth_hist[k] = w->queue_depth;
		w->polls_hist[k] = (float)w->polls_per_s;
		w->busy_hist[k] = (float)w->busy_ratio;
		m->worker_steals += w->counters.steals;
	}
	m->hist_next++;
	for (size_t i = 0; i < u->n_warnings; i++)
		warning_add(m, u->warnings[i]);
	con_model_retain(m);
	m->list_stale = true;
}

/* Make bucket number @b the newest, clearing the ones that reappear. */
static void tl_advance(con_model_t *m, uint64_t b)
{
	uint64_t from = m->tl_last ? m->tl_last + 1 : b;

	if (b - from >= CON_TL_BUCKETS)
		from = b - (CON_TL_BUCKETS - 1);
	for (uint64_t x = from; x <= b; x++)
		for (uint32_t i = 0; i < m->nworkers; i++) {
			m->workers[i].tl_busy[x % CON_TL_BUCKETS] = 0;
			m->workers[i].tl_max_poll[x % CON_TL_BUCKETS] = 0;
		}
	m->tl_last = b;
	if (b + 1 >= CON_TL_BUCKETS && b + 1 - CON_TL_BUCKETS > m->tl_first)
		m->tl_first = b + 1 - CON_TL_BUCKETS;
	if (!m->tl_first)
		m->tl_first = b;
}

static void tl_poll(con_model_t *m, const weft_event_t *e)
{
	uint64_t end = e->ts, dur = e->a1, start;
	con_worker_t *w;

	if (e->worker >= CON_MAX_WORKERS || dur > end)
		return;
	start = end - dur;
	if (end / CON_TL_BUCKET_NS > m->tl_last)
		tl_advance(m, end / CON_TL_BUCKET_NS);
	if (e->worker + 1u > m->nworkers)
		m->nworkers = e->worker + 1u;
	w = &m->workers[e->worker];
	for (uint64_t b = start / CON_TL_BUCKET_NS; b <= end / CON_TL_BUCKET_NS;
	     b++) {
		uint64_t lo = b * CON_TL_BUCKET_NS, hi = lo + CON_TL_BUCKET_NS;
		uint64_t s = start > lo ? start : lo, x = end < hi ? end : hi;

		if (b < m->tl_first || b + CON_TL_BUCKETS <= m->tl_last)
			continue; /* older than the strip */
		w->tl_busy[b % CON_TL_BUCKETS] += x - s;
		if (dur > w->tl_max_poll[b % CON_TL_BUCKETS])
			w->tl_max_poll[b % CON_TL_BUCKETS] = dur;
	}
}

void con_model_events(con_model_t *m, const weft_event_t *ev, size_t n)
{
	m->events += n;
	for (size_t i = 0; i < n; i++)
		if (ev[i].kind == WEFT_EV_POLL)
			tl_poll(m, &ev[i]);
		else if (ev[i].kind == WEFT_EV_BLOCKING_START)
			m->blocking_started++;
		else if (ev[i].kind == WEFT_EV_BLOCKING_END)
			m->blocking_ended++;
}

void con_model_frame(con_model_t *m, const Weft__V1__Frame *f)
{
	if (!f)
		return;
	switch (f->body_case) {
	case WEFT__V1__FRAME__BODY_HEADER:
		if (f->header)
			con_model_hello(m, f->header->hello);
		break;
	case WEFT__V1__FRAME__BODY_HELLO:
		con_model_hello(m, f->hello);
		break;
	case WEFT__V1__FRAME__BODY_UPDATE:
		con_model_update(m, f->update);
		break;
	case WEFT__V1__FRAME__BODY_EVENTS: {
		static weft_event_t ev[WEFT_WIRE_BATCH_MAX];
		uint32_t n = f->events->count;
		int got;

		m->batches++;
		if (n > WEFT_WIRE_BATCH_MAX) {
			m->bad_frames++;
			break;
		}
		got = n ? weft__wire_batch_decode(f->events, ev, n) : 0;
		if (got < 0) {
			m->bad_frames++;
			break;
		}
		con_model_events(m, ev, (size_t)got);
		break;
	}
	default:
		break;
	}
}

/* --------------------------------------------------------- retention */

void con_model_retain(con_model_t *m)
{
	size_t kept = 0;

	for (size_t i = 0; i < m->ntasks; i++) {
		con_task_t *t = m->tasks[i];

		if (t->finished_ns && m->now_ns > t->finished_ns &&
		    m->now_ns - t->finished_ns > m->retain_ns) {
			task_free(t);
			continue;
		}
		m->tasks[kept++] = t;
	}
	if (kept == m->ntasks)
		return;
	m->ntasks = kept;
	/* The list may point at freed tasks: empty it until rebuilt. */
	m->nlist = 0;
	m->list_stale = true;
	hash_rebuild(m);
}

/* ------------------------------------------------------ sort, filter */

void con_model_set_sort(con_model_t *m, con_task_col_t col, bool invert)
{
	if (col >= CON_COL_MAX)
		col = CON_COL_ID;
	m->sort_col = col;
	m->sort_invert = invert;
	m->list_stale = true;
}

void con_model_set_filter(con_model_t *m, const char *filter)
{
	snprintf(m->filter, sizeof(m->filter), "%s", filter ? filter : "");
	m->list_stale = true;
}

static bool contains_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);

	for (; *hay; hay++)
		if (!strncasecmp(hay, needle, n))
			return true;
	return !n;
}

/*
 * A task matches when the filter is a substring (any case) of its name,
 * its location, its state's name, or equals its id.
 */
bool con_model_task_matches(const con_model_t *m, const con_task_t *t)
{
	char id[24];

	if (!m->filter[0])
		return true;
	snprintf(id, sizeof(id), "%llu", (unsigned long long)t->id);
	return contains_ci(t->name, m->filter) ||
	       contains_ci(t->file, m->filter) ||
	       contains_ci(con_task_state_name(t->state), m->filter) ||
	       !strcmp(id, m->filter);
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static int task_cmp(const void *pa, const void *pb, void *arg)
{
	const con_task_t *a = *(const con_task_t *const *)pa;
	const con_task_t *b = *(const con_task_t *const *)pb;
	const con_model_t *m = arg;
	int c = 0;

	switch (m->sort_col) {
	case CON_COL_NAME:
		c = strcmp(a->name, b->name);
		break;
	case CON_COL_STATE:
		c = cmp_u64(a->state, b->state);
		break;
	case CON_COL_WORKER:
		c = cmp_u64(a->last_worker, b->last_worker);
		break;
	case CON_COL_POLLS:
		c = cmp_u64(a->polls, b->polls);
		break;
	case CON_COL_BUSY:
		c = cmp_u64(a->busy_ns, b->busy_ns);
		break;
	case CON_COL_SCHED:
		c = cmp_u64(a->scheduled_ns, b->scheduled_ns);
		break;
	case CON_COL_IDLE:
		c = cmp_u64(a->idle_ns, b->idle_ns);
		break;
	case CON_COL_WAKES:
		c = cmp_u64(a->wakes, b->wakes);
		break;
	case CON_COL_MAXPOLL:
		c = cmp_u64(a->max_poll_ns, b->max_poll_ns);
		break;
	case CON_COL_WARN:
		c = cmp_u64((uint64_t)__builtin_popcount(a->warnings),
			    (uint64_t)__builtin_popcount(b->warnings));
		break;
	case CON_COL_LOCATION:
		c = strcmp(a->file, b->file);
		if (!c)
			c = cmp_u64(a->line, b->line);
		break;
	case CON_COL_ID:
	default:
		break;
	}
	if (!c)
		c = cmp_u64(a->id, b->id);
	return m->sort_invert ? -c : c;
}

void con_model_resort(con_model_t *m)
{
	if (!m->list_stale)
		return;
	if (m->ntasks > m->list_cap) {
		m->list_cap = m->ntasks * 2;
		m->list = con_xreallocarray(m->list, m->list_cap,
					    sizeof(*m->list));
	}
	m->nlist = 0;
	for (size_t i = 0; i < m->ntasks; i++)
		if (con_model_task_matches(m, m->tasks[i]))
			m->list[m->nlist++] = m->tasks[i];
	if (m->nlist > 1)
		qsort_r(m->list, m->nlist, sizeof(*m->list), task_cmp, m);
	m->list_stale = false;
}

/* ------------------------------------------------------------ figures */

void con_model_header(const con_model_t *m, con_header_t *h)
{
	memset(h, 0, sizeof(*h));
	h->target = m->target;
	h->workers = m->nworkers;
	h->mode = m->mode;
	h->warnings = m->nwarnings + m->warnings_discarded;
	if (!m->have_stats)
		return;
	if (m->now_ns > m->start_ns && m->start_ns)
		h->uptime_ns = m->now_ns - m->start_ns;
	h->live_tasks = m->stats.live_tasks;
	h->polls_per_s = m->stats.polls_per_s;
	h->steals_per_s = m->stats.steals_per_s;
	h->steal_rate = m->stats.polls_per_s > 0 ?
				m->stats.steals_per_s / m->stats.polls_per_s :
				0;
	h->events_per_s = m->stats.events_per_s;
	h->dropped = m->stats.events_dropped;
	if (m->stats.warnings > h->warnings)
		h->warnings = m->stats.warnings;
}

uint32_t con_worker_depth_at(const con_model_t *m, const con_worker_t *w,
			     unsigned back)
{
	if (back >= CON_HISTORY || back >= m->hist_next)
		return 0;
	return w->depth_hist[(m->hist_next - 1 - back) % CON_HISTORY];
}

const char *con_task_state_name(unsigned state)
{
	static const char *const names[] = { "idle", "scheduled", "running",
					     "done" };

	return state < 4 ? names[state] : "?";
}

const char *con_worker_state_name(unsigned state)
{
	static const char *const names[] = { "polling", "searching",
					     "parked" };

	return state < 3 ? names[state] : "?";
}

const char *con_task_col_label(con_task_col_t col)
{
	static const char *const labels[] = {
#define CON_X(name, label) label,
		CON_TASK_COLUMNS(CON_X)
#undef CON_X
	};

	return col < CON_COL_MAX ? labels[col] : "?";
}

const char *con_mode_name(con_mode_t mode)
{
	switch (mode) {
	case CON_MODE_LIVE:
		return "LIVE";
	case CON_MODE_PAUSED:
		return "PAUSED";
	case CON_MODE_REPLAY:
		return "REPLAY";
	}
	return "?";
}

bool con_model_is_consistent(const con_model_t *m)
{
	size_t inhash = 0;

	for (size_t i = 0; i < m->hash_cap; i++)
		if (m->hash[i]) {
			inhash++;
			if (con_model_task(m, m->hash[i]->id) != m->hash[i])
				return false;
		}
	if (inhash != m->ntasks || 2 * m->ntasks + 2 > m->hash_cap * 2)
		return false;
	for (size_t i = 0; i < m->ntasks; i++)
		if (con_model_task(m, m->tasks[i]->id) != m->tasks[i])
			return false;
	if (!m->list_stale)
		for (size_t i = 0; i < m->nlist; i++)
			if (con_model_task(m, m->list[i]->id) != m->list[i])
				return false;
	return m->nwarnings <= CON_MAX_WARNINGS &&
	       m->nworkers <= CON_MAX_WORKERS;
}
