/* SPDX-License-Identifier: MIT */
/*
 * The console's state store (console.h): what the frames said, kept for
 * the views to read.
 *
 * Updates carry only what changed (the first one, or a "full" one, every
 * known task), so the store merges: a task is created the first time an
 * update names it and overwritten by later ones; a finished task stays
 * for retain_ns after it finished (by the traced process's clock), then
 * goes, in batches: at most an eighth of retain_ns late (model_retain.c:
 * in finish order, deleted in place).  Workers keep a ring of samples (queue depth, polls/s, busy
 * ratio) taken once per update, for sparklines; POLL events fill a
 * per-worker timeline of busy time in CON_TL_BUCKET_NS buckets.  Warnings
 * are kept in arrival order (the views show them newest first), at most
 * CON_MAX_WARNINGS, the oldest going first and counted.
 *
 * Tasks live in a vector of pointers (the order is arbitrary) with an
 * open-addressing index by id; the Tasks view reads "list", the sorted
 * and filtered vector that con_model_resort() brings up to date.  A big
 * process has 100,000 tasks and only a few hundred change per update,
 * so the work follows the changes, not the task count: a task an update
 * names goes into a dirty vector, and resorting takes the dirty ones
 * out of the list, sorts them and merges them back in (a full sort only
 * after the sort or the filter changed); retention takes the finished
 * tasks that go from the front of their finish order, and deletes them
 * from the index in place (tombstones, rebuilt once they crowd it).
 * Histograms are allocated only for the tasks that have them.  Names and
 * files are interned (a refcounted string table): a task costs no string
 * allocation when its name was seen, and retired tasks are kept for reuse.
 *
 * Nothing from a frame is trusted: indices are range-checked, strings
 * may be NULL, histograms may have any number of buckets.
 *
 * Live frames come read from their bytes (live.c: con_model_task_raw()
 * for an Update's tasks, con_model_events() for a batch's events), the
 * others unpacked by protobuf-c (con_model_frame()); both end in the
 * same task_set().
 *
 * This file: the store, its string table and index, the frames folded
 * in.  Beside it: model_figures.c (the figures the views read),
 * model_check.c (the consistency check the tests make),
 * model_timeline.c (the timeline and its longest polls), model_sort.c
 * (sort and filter: the list), model_retain.c (retention of finished
 * tasks), model_res.c (the resources tasks wait on: by id, bounded,
 * their own list).
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "model_internal.h"

#include "weft/wire.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

void con_model_init(con_model_t *m, const char *target)
{
	memset(m, 0, sizeof(*m));
	m->target = con_xstrdup(target);
	m->process = con_xstrdup("");
	m->clock = con_xstrdup("");
	m->hash_cap = 1024;
	m->hash = con_xcalloc(m->hash_cap, sizeof(*m->hash));
	static_assert(sizeof(con_task_t) <= 200, "a task record grew");
	m->retain_ns = CON_RETAIN_NS;
	m->retain_max = CON_RETAIN_MAX;
	m->sort_col = CON_COL_ID;
	m->list_stale = true;
	m->list_rebuild = true;
	/* The groups: the most live tasks first. */
	m->group_sort_col = CON_GCOL_LIVE;
	m->group_sort_invert = true;
	m->groups_stale = true;
}

/* ------------------------------------------------------- string table */

const char con_model_empty[] = "";
#define con_empty con_model_empty

static uint32_t str_hash(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	while (*s)
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

static void strs_grow(con_model_t *m)
{
	size_t cap = m->strs_cap ? 2 * m->strs_cap : 256;
	struct con_str_s **b = con_xcalloc(cap, sizeof(*b));

	for (size_t i = 0; i < m->strs_cap; i++) {
		struct con_str_s *e = m->strs[i], *next;

		for (; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (cap - 1)];
			b[e->hash & (cap - 1)] = e;
		}
	}
	free(m->strs);
	m->strs = b;
	m->strs_cap = cap;
}

/*
 * Site strings by their pointers (str_ref_in()): a pointer into a
 * model's sites names the same string until those sites change, and
 * every change (a frame's sites, a copy, a restore) is preceded by
 * con_sites_changed().  One counter for every model: the console feeds
 * its models from one thread.
 */
uint64_t con_model_sites_gen = 1;

void con_sites_changed(void)
{
	con_model_sites_gen++;
}

/* Hint @h's entry is @site's string (a pointer into a model's sites). */
static bool hint_is_site(const con_model_t *m, int h, const char *site)
{
	const struct con_str_s *e = m->str_hint[h];

	return site && e && e->site == site &&
	       e->site_gen == con_model_sites_gen;
}

static void hint_take(con_model_t *m, int h, struct con_str_s *e,
		      const char *site)
{
	m->str_hint[h] = e;
	if (site) {
		e->site = site;
		e->site_gen = con_model_sites_gen;
	}
}

/*
 * A reference to the table's copy of @s ("" is not counted); @h the
 * caller's hint (the entry it found last); @site @s itself when it is a
 * spawn site's string in m->sites, else NULL: a site's string met again
 * (every task of the site names it) is found by its pointer, with no
 * compare (issue 21: strcmp() was 3% of a live console's time at 60,000
 * tasks a second, two a task).
 */
static const char *str_ref_in(con_model_t *m, const char *s, int h,
			      const char *site)
{
	uint32_t hv;
	struct con_str_s *e;
	size_t len;

	if (!s || !s[0])
		return con_empty;
	if (hint_is_site(m, h, site)) {
		m->str_hint[h]->refs++;
		return m->str_hint[h]->s;
	}
	/* The one this caller found last first: tasks come in runs of
	 * the same name and file (40,000 a second named "http-conn"). */
	e = m->str_hint[h];
	if (e && !strcmp(e->s, s)) {
		e->refs++;
		hint_take(m, h, e, site);
		return e->s;
	}
	hv = str_hash(s);
	if (m->strs_cap)
		for (e = m->strs[hv & (m->strs_cap - 1)]; e; e = e->next)
			if (e->hash == hv && !strcmp(e->s, s)) {
				e->refs++;
				hint_take(m, h, e, site);
				return e->s;
			}
	if (m->nstrs + 1 > m->strs_cap / 2 * 3 / 2)
		strs_grow(m);
	len = strlen(s);
	e = con_xmalloc(sizeof(*e) + len + 1);
	memcpy(e->s, s, len + 1);
	e->site = NULL;
	e->site_gen = 0;
	e->hash = hv;
	e->refs = 1;
	e->next = m->strs[hv & (m->strs_cap - 1)];
	m->strs[hv & (m->strs_cap - 1)] = e;
	m->nstrs++;
	hint_take(m, h, e, site);
	return e->s;
}

static const char *str_ref(con_model_t *m, const char *s)
{
	return str_ref_in(m, s, CON_STR_HINTS - 1, NULL);
}

/* Drops a reference taken by str_ref(); the last one frees the copy. */
static void str_unref(con_model_t *m, const char *s)
{
	struct con_str_s *e, **pp;

	if (s == con_empty || !m->strs_cap)
		return;
	e = (struct con_str_s *)(void *)((char *)(uintptr_t)s -
					 offsetof(struct con_str_s, s));
	if (--e->refs)
		return;
	for (pp = &m->strs[e->hash & (m->strs_cap - 1)]; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	m->nstrs--;
	for (int i = 0; i < CON_STR_HINTS; i++)
		if (m->str_hint[i] == e)
			m->str_hint[i] = NULL;
	free(e);
}

const char *con_model_str_ref(con_model_t *m, const char *s)
{
	return str_ref(m, s);
}

void con_model_str_unref(con_model_t *m, const char *s)
{
	str_unref(m, s);
}

/* @hint: the caller's slot in str_hint (a task's name, file, place);
 * @site: as str_ref_in()'s. */
static void str_set(con_model_t *m, const char **dst, const char *src, int hint,
		    const char *site)
{
	const char *to = src ? src : "";

	/* Equal: the site's entry, or by compare (the first bytes first:
	 * a task's place is "" twice for most tasks, a call saved). */
	if (hint_is_site(m, hint, site) ?
		    *dst == m->str_hint[hint]->s :
		    (*dst)[0] == to[0] && (!to[0] || !strcmp(*dst, to)))
		return;
	str_unref(m, *dst);
	*dst = str_ref_in(m, src, hint, site);
}

/*
 * Task records come from slabs, not one malloc each: a record costs its
 * 200 bytes, not a 208-byte chunk, and churn costs no malloc and free (a
 * retired record goes on the free list, taken first).  The slabs stay
 * until the model goes: a process that had 1,000,000 tasks keeps their
 * room (the pointers into them must not move).
 *
 * A retired record's first word links the free list; its second points
 * FREE_AHEAD records further down (NULL: fewer there), so that taking a
 * record fetches the one FREE_AHEAD takes later: retired records are
 * cold (retention let them go a batch ago), and fetching only the next
 * one left each record's first read waiting (issue 21: 6% of a live
 * console's time at 60,000 tasks a second).  The free list's records are
 * pushed in bursts (a retention batch), the ones below the top just
 * written, so finding that record is three reads of warm lines.
 */
#define FREE_AHEAD 4

/* A retired record's links (memcpy: the record is a con_task_t). */
struct free_rec {
	con_task_t *next, *ahead;
};

static struct free_rec free_get(const con_task_t *t)
{
	struct free_rec f;

	memcpy(&f, (const void *)t, sizeof(f));
	return f;
}

con_task_t *con_model_task_alloc(con_model_t *m)
{
	con_task_t *t = m->free_tasks;

	if (t) {
		struct free_rec f = free_get(t);

		m->free_tasks = f.next;
		if (f.ahead)
			for (size_t b = 0; b < sizeof(con_task_t); b += 64)
				__builtin_prefetch((const char *)f.ahead + b,
						   1);
	} else {
		if (!m->nslabs || m->slab_used == CON_TASK_SLAB) {
			if (m->nslabs == m->slabs_cap) {
				m->slabs_cap = m->slabs_cap ? 2 * m->slabs_cap :
							      16;
				m->slabs = con_xreallocarray(m->slabs,
							     m->slabs_cap,
							     sizeof(*m->slabs));
			}
			m->slabs[m->nslabs++] =
				con_xmalloc(CON_TASK_SLAB * sizeof(**m->slabs));
			m->slab_used = 0;
		}
		t = &m->slabs[m->nslabs - 1][m->slab_used++];
	}
	memset(t, 0, sizeof(*t));
	return t;
}

void con_model_task_free(con_model_t *m, con_task_t *t)
{
	struct free_rec f = { .next = m->free_tasks, .ahead = m->free_tasks };

	static_assert(sizeof(con_task_t) >= sizeof(struct free_rec),
		      "a free record holds its links");
	str_unref(m, t->name);
	str_unref(m, t->file);
	str_unref(m, t->parked_file);
	free(t->hist);
	free(t->waited);
	/* FREE_AHEAD - 1 links below the old top: FREE_AHEAD below t. */
	for (int i = 1; i < FREE_AHEAD && f.ahead; i++)
		f.ahead = free_get(f.ahead).next;
	memcpy((void *)t, &f, sizeof(f));
	m->free_tasks = t;
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
		con_model_task_free(m, m->tasks[i]);
	for (size_t i = 0; i < m->nwarnings; i++)
		warning_free(&m->warnings[i]);
	con_model_res_free_all(m);
	con_model_groups_free(m);
	free(m->tasks);
	free(m->warnings);
	for (uint32_t i = 0; i < m->workers_cap; i++)
		free(m->workers[i].series);
	free(m->workers);
	for (uint32_t b = 0; m->tl_top && b < CON_TL_BUCKETS; b++)
		free(m->tl_top[b]);
	free(m->tl_top);
	for (size_t i = 0; i < m->nslabs; i++)
		free(m->slabs[i]);
	free(m->slabs);
	free(m->strs); /* empty: every task let go of its strings */
	free(m->hash);
	free(m->fin);
	free(m->fin_heap);
	free(m->list);
	free(m->dirty);
	free(m->recent);
	free(m->watch);
	free(m->target);
	free(m->process);
	free(m->clock);
	weft_wire_sites_fini(&m->sites);
	memset(m, 0, sizeof(*m));
}

/*
 * The workers, the recent events and the timeline's top polls grow as
 * they come rather than being allocated whole at init (256 workers are
 * 1 MB, the ring 2 MB): a console on a 4-worker process, and the fuzzer,
 * which builds a model per input, pay for what they use.
 */
void con_model_workers_reserve(con_model_t *m, uint32_t n)
{
	uint32_t cap = m->workers_cap ? m->workers_cap : 8;

	if (n > CON_MAX_WORKERS)
		n = CON_MAX_WORKERS;
	if (n <= m->workers_cap)
		return;
	while (cap < n)
		cap *= 2;
	if (cap > CON_MAX_WORKERS)
		cap = CON_MAX_WORKERS;
	m->workers = con_xreallocarray(m->workers, cap, sizeof(*m->workers));
	memset(m->workers + m->workers_cap, 0,
	       (cap - m->workers_cap) * sizeof(*m->workers));
	m->workers_cap = cap;
}

/*
 * Workers 0..@n-1 are known (a worker named by an update, a POLL, the
 * header): their slots exist and nworkers covers them.
 */
void con_model_workers_fit(con_model_t *m, uint32_t n)
{
	con_model_workers_reserve(m, n);
	if (n > m->workers_cap)
		n = m->workers_cap;
	if (n > m->nworkers)
		m->nworkers = n;
}

const con_worker_t *con_model_worker(const con_model_t *m, uint32_t i)
{
	if (i >= m->nworkers || !m->workers[i].seen)
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
	if (m->ntasks >= UINT32_MAX - 1)
		con_die("more than %u tasks", UINT32_MAX - 2);
	t = con_model_task_alloc(m);
	t->id = id;
	t->name = con_empty;
	t->file = con_empty;
	t->parked_file = con_empty;
	m->tasks[m->ntasks++] = t;
	if (2 * m->ntasks + 2 > m->hash_cap)
		con_model_hash_rebuild(m);
	else if (2 * (m->ntasks + m->hash_tombs) + 2 > m->hash_cap)
		con_model_hash_tidy(m);
	else
		con_model_hash_put(m, m->ntasks - 1);
	return t;
}

/*
 * The task changed: the list must take it again (con_model_resort).  The
 * vector stops at an eighth of the tasks (at least 4,096): a stream
 * naming every task (a first full update) would make it as long as the
 * tasks, 8 bytes each for good.  Past it the task is only flagged, and
 * the merge finds the flagged ones by a pass over the tasks.
 */
static void mark_dirty(con_model_t *m, con_task_t *t)
{
	m->list_stale = true;
	m->groups_stale = true;
	if (t->dirty || m->list_rebuild)
		return;
	if (m->dirty_overflow ||
	    (m->ndirty >= 4096 && m->ndirty >= m->ntasks / 8)) {
		m->dirty_overflow = true;
		t->dirty = true;
		return;
	}
	if (m->ndirty == m->dirty_cap) {
		m->dirty_cap = m->dirty_cap ? 2 * m->dirty_cap : 256;
		m->dirty = con_xreallocarray(m->dirty, m->dirty_cap,
					     sizeof(*m->dirty));
	}
	m->dirty[m->ndirty++] = t;
	t->dirty = true;
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
	/*
	 * Another process (the live console reconnected to a restarted
	 * one): site ids are each process's own, so the last one's are
	 * forgotten, not lent to the new one's tasks and parked places.
	 */
	if ((m->pid && m->pid != h->pid) ||
	    (m->start_ns && m->start_ns != h->start_ns)) {
		con_sites_changed();
		weft_wire_sites_fini(&m->sites);
	}
	set_str(&m->process, h->process_name);
	set_str(&m->clock, h->clock);
	m->pid = h->pid;
	m->start_ns = h->start_ns;
	if (h->workers <= CON_MAX_WORKERS)
		con_model_workers_fit(m, h->workers);
}

static void task_set(con_model_t *m, const Weft__V1__Task *x)
{
	con_task_names_t named;
	con_task_t *t;
	bool was_finished;
	uint64_t finished;

	if (!x || !x->id)
		return;
	con_sites_name(m, x, &named); /* its site's strings */
	t = task_get(m, x->id);
	was_finished = t->finished_ns != 0;
	finished = t->finished_ns;
	t->parent = x->parent;
	/* The first name seen stays (an update may omit it). */
	if (named.name && named.name[0])
		str_set(m, &t->name, named.name, 0,
			named.from_site ? named.name : NULL);
	if (named.file && named.file[0])
		str_set(m, &t->file, named.file, 1,
			named.from_site ? named.file : NULL);
	if (named.line)
		t->line = named.line;
	t->state_size = named.state_size;
	t->kind = (uint8_t)x->kind;
	t->state = x->state <= WEFT_TASK_DONE ? (uint8_t)x->state : 0;
	t->last_worker = (uint16_t)x->last_worker;
	t->status = x->status;
	t->spawned_ns = x->spawned_ns;
	t->spawn_unseen = x->spawn_unseen;
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
	/* Every record carries it (it changes): set, cleared too. */
	str_set(m, &t->parked_file, x->parked_file, 2, NULL);
	t->parked_line = x->parked_line;
	t->idle_since_ns = t->state == WEFT_TASK_IDLE ? x->idle_since_ns : 0;
	/* Every record carries these too; a task done waits on nothing. */
	t->waiting_on = t->state == WEFT_TASK_DONE ? 0 : x->waiting_on;
	t->waiting_since_ns = t->waiting_on ? x->waiting_since_ns : 0;
	t->waiting_op = t->waiting_on ? (uint8_t)x->waiting_op : 0;
	/* Every record carries them too (none: it has not waited). */
	if (x->n_waited && !t->waited)
		t->waited = con_xcalloc(WEFT_TASK_WAITED, sizeof(*t->waited));
	t->nwaited = 0;
	for (size_t i = 0; i < x->n_waited && i < WEFT_TASK_WAITED; i++)
		t->waited[t->nwaited++] = (weft_probe_task_wait_t){
			.res = x->waited[i]->resource,
			.total_ns = x->waited[i]->total_ns,
			.waits = x->waited[i]->waits,
		};
	if ((x->poll_hist || x->sched_hist) && !t->hist)
		t->hist = con_xcalloc(2, sizeof(*t->hist));
	if (x->poll_hist)
		weft_wire_hist_get(&t->hist[0], x->poll_hist);
	if (x->sched_hist)
		weft_wire_hist_get(&t->hist[1], x->sched_hist);
	if (t->finished_ns &&
	    (!m->oldest_finished_ns || t->finished_ns < m->oldest_finished_ns))
		m->oldest_finished_ns = t->finished_ns;
	m->nfinished += (t->finished_ns != 0) - was_finished;
	if (t->finished_ns && t->finished_ns != finished)
		con_model_fin_push(m, t->finished_ns, t->id);
	mark_dirty(m, t);
}

static void worker_set(con_model_t *m, const Weft__V1__Worker *x)
{
	con_worker_t *w;

	if (!x || x->index >= CON_MAX_WORKERS) {
		m->bad_frames++;
		return;
	}
	con_model_workers_fit(m, x->index + 1);
	w = &m->workers[x->index];
	/*
	 * The task it polls shows running (con_task_status_name()): the
	 * one it polled before and the one now are resorted and filtered
	 * again, their own records unchanged (a hung task's never is).
	 */
	if (w->current_task != (x->state == 0 ? x->current_task : 0)) {
		con_task_t *t;

		if (w->current_task &&
		    (t = (con_task_t *)con_model_task(m, w->current_task)))
			mark_dirty(m, t);
		if (x->state == 0 && x->current_task &&
		    (t = (con_task_t *)con_model_task(m, x->current_task)))
			mark_dirty(m, t);
	}
	w->seen = true;
	w->index = x->index;
	w->state = x->state <= 2 ? x->state : 0;
	w->current_task = w->state == 0 ? x->current_task : 0;
	w->poll_started_ns = x->current_task ? x->poll_started_ns : 0;
	if (x->counters) {
		w->counters = *x->counters;
		w->counters.base = (ProtobufCMessage){ 0 };
	}
	w->polls_per_s = x->polls_per_s;
	w->steals_per_s = x->steals_per_s;
	w->steal_rate = x->steal_rate;
	w->busy_ratio = x->busy_ratio;
	w->off_cpu_ns = x->off_cpu_ns;
	w->off_cpu_ratio = x->off_cpu_ratio;
	w->mean_poll_ns = x->mean_poll_ns;
	w->max_poll_ns = x->max_poll_ns;
	w->queue_depth = x->queue_depth;
	/*
	 * Its own count (stolen_out) from a peer that sends it; else an
	 * older peer's breakdown by victim (stolen_from, at most 64 of
	 * them), summed into each victim's.  A new peer's worker that
	 * nobody stole from and that stole nothing sends neither: 0 both
	 * ways.
	 */
	if (x->stolen_out || x->n_stolen) {
		w->stolen_by_others = x->stolen_out;
		if (x->index + 1 > m->stolen_hi)
			m->stolen_hi = x->index + 1;
	}
	for (size_t v = 0; v < x->n_stolen_from && v < CON_MAX_WORKERS; v++)
		if (v != x->index && x->stolen_from[v]) {
			con_model_workers_fit(m, (uint32_t)v + 1);
			m->workers[v].stolen_by_others += x->stolen_from[v];
			if (v + 1 > m->stolen_hi)
				m->stolen_hi = (uint32_t)v + 1;
		}
}

static void warning_add(con_model_t *m, const Weft__V1__Warning *x)
{
	con_warning_t *w;

	if (!x)
		return;
	/*
	 * A history (the warnings kept before this console attached) can
	 * come again, on a reconnect: a warning already listed stays once.
	 */
	if (x->history)
		for (size_t i = 0; i < m->nwarnings; i++)
			if (m->warnings[i].seq == x->seq &&
			    m->warnings[i].kind == x->kind &&
			    m->warnings[i].at_ns == x->at_ns)
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
	w->history = x->history;
	w->count = x->count;
	m->warnings_said += x->count ? x->count : 1;
}

/* An update's stats: before its tasks (they read now_ns). */
static void update_head(con_model_t *m, const Weft__V1__Update *u)
{
	m->updates++;
	m->groups_stale = true; /* the oldest's age, the tasks */
	if (u->stats) {
		m->stats = *u->stats;
		m->stats.base = (ProtobufCMessage){ 0 };
		m->stats.clock = NULL;
		m->have_stats = true;
		if (u->stats->now_ns > m->now_ns)
			m->now_ns = u->stats->now_ns;
		if (!m->start_ns)
			m->start_ns = u->stats->start_ns;
		if (u->stats->workers <= CON_MAX_WORKERS)
			con_model_workers_fit(m, u->stats->workers);
	}
}

/* An update's other fields, after its tasks, and the retention. */
static void update_tail(con_model_t *m, const Weft__V1__Update *u)
{
	size_t k;

	if (u->n_workers) {
		/* Only those ever written. */
		for (uint32_t i = 0; i < m->stolen_hi; i++)
			m->workers[i].stolen_by_others = 0;
		m->worker_steals = 0;
	}
	for (size_t i = 0; i < u->n_workers; i++)
		worker_set(m, u->workers[i]);
	/* One history sample per update for every worker; not for an
	 * update without stats (a task-detail reply holds one task). */
	if (u->stats || u->n_workers) {
		k = m->hist_next % CON_HISTORY;
		for (uint32_t i = 0; i < m->nworkers; i++) {
			con_worker_t *w = &m->workers[i];
			con_worker_series_t *x;

			m->worker_steals += w->counters.steals;
			if (!w->seen)
				continue; /* a slot below a seen one */
			x = con_worker_series(w);
			x->depth_hist[k] = w->queue_depth;
			x->polls_hist[k] = (float)w->polls_per_s;
			x->busy_hist[k] = (float)w->busy_ratio;
		}
		m->hist_next++;
	}
	for (size_t i = 0; i < u->n_warnings; i++)
		warning_add(m, u->warnings[i]);
	for (size_t i = 0; i < u->n_resources; i++)
		con_model_res_set(m, u->resources[i]);
	con_model_retain(m);
	con_model_res_retain(m);
}

void con_model_update(con_model_t *m, const Weft__V1__Update *u)
{
	if (!u)
		return;
	con_sites_changed();
	(void)weft_wire_sites_add_update(&m->sites, u); /* before its tasks */
	update_head(m, u);
	for (size_t i = 0; i < u->n_tasks; i++)
		task_set(m, u->tasks[i]);
	update_tail(m, u);
}

int con_model_task_raw(con_model_t *m, weft_wire_task_raw_t *scratch,
		       const uint8_t *p, size_t len)
{
	int rc = weft_wire_task_decode_raw(scratch, p, len);

	if (!rc)
		task_set(m, &scratch->msg);
	return rc;
}

void con_model_task_raw_ahead(const con_model_t *m, const uint8_t *p,
			      size_t len, int stage)
{
	uint64_t id = 0;

	/* Field 1 (the id), a varint, first: as the server writes it. */
	if (len < 2 || p[0] != 0x08)
		return;
	for (size_t i = 1; i < len && i < 10; i++) {
		id |= (uint64_t)(p[i] & 0x7f) << (7 * (i - 1));
		if (!(p[i] & 0x80)) {
			con_model_task_prefetch(m, id, stage);
			return;
		}
	}
}

static void watch_put(con_model_t *m, const weft_event_t *e)
{
	if (!m->watch)
		m->watch = con_xcalloc(CON_WATCH_EVENTS, sizeof(*m->watch));
	m->watch[m->nwatch++ % CON_WATCH_EVENTS] = *e;
}

void con_model_watch(con_model_t *m, uint64_t id)
{
	uint64_t from;

	if (id == m->watch_task)
		return;
	m->watch_task = id;
	m->nwatch = 0;
	if (!id || !m->recent)
		return;
	from = m->nrecent > m->recent_cap ? m->nrecent - m->recent_cap : 0;
	for (uint64_t i = from; i < m->nrecent; i++) {
		const weft_event_t *e = &m->recent[i % m->recent_cap];

		if (weft_event_task(e) == id)
			watch_put(m, e);
	}
}

void con_model_watch_fill(con_model_t *m, const weft_event_t *ev, size_t n)
{
	m->nwatch = 0;
	for (size_t i = 0; i < n; i++)
		watch_put(m, &ev[i]);
}

const weft_event_t *con_model_watch_event(const con_model_t *m, size_t back)
{
	if (!m->watch_task || back >= m->nwatch || back >= CON_WATCH_EVENTS)
		return NULL;
	return &m->watch[(m->nwatch - 1 - back) % CON_WATCH_EVENTS];
}

/*
 * @n events into the ring at @to.  On x86-64 with streaming stores,
 * which write whole lines without reading them first and leave the
 * cache alone: the ring (2 MiB) has left the cache by the time its
 * slots come round, only a task's watch (con_model_watch()) reads it
 * back, and memcpy() waited on every line it wrote (issue 21: 7% of a
 * live console's time at 60,000 tasks a second), then kept the lines in
 * the cache in place of the tasks'.  The slots are 16-byte aligned
 * (malloc()'s, events of 32 bytes).
 */
static void events_put(weft_event_t *to, const weft_event_t *ev, size_t n)
{
#if defined(__x86_64__)
	__m128i *d = (__m128i *)(void *)to;
	const __m128i *s = (const __m128i *)(const void *)ev;

	for (size_t i = 0; i < 2 * n; i++)
		_mm_stream_si128(d + i, _mm_loadu_si128(s + i));
	/* Orders them before what follows, as plain stores would be. */
	_mm_sfence();
#else
	memcpy(to, ev, n * sizeof(*ev));
#endif
}

void con_model_events(con_model_t *m, const weft_event_t *ev, size_t n)
{
	m->events += n;
	/* Into the ring in runs (a memcpy each, up to its end). */
	for (size_t i = 0; i < n;) {
		size_t at, run;

		/* Doubled while not yet wrapped (nrecent == recent_cap):
		 * the events stay where they are.  Not zeroed: only the
		 * nrecent written are read. */
		if (m->nrecent == m->recent_cap &&
		    m->recent_cap < CON_RECENT_EVENTS) {
			m->recent_cap = m->recent_cap ? 2 * m->recent_cap :
							1024;
			if (m->recent_cap > CON_RECENT_EVENTS)
				m->recent_cap = CON_RECENT_EVENTS;
			m->recent = con_xreallocarray(m->recent, m->recent_cap,
						      sizeof(*m->recent));
		}
		at = m->nrecent % m->recent_cap;
		run = m->recent_cap - at;
		/* Not past the slot where the ring would grow first. */
		if (m->recent_cap < CON_RECENT_EVENTS &&
		    m->recent_cap - m->nrecent < run)
			run = m->recent_cap - m->nrecent;
		if (run > n - i)
			run = n - i;
		events_put(&m->recent[at], &ev[i], run);
		m->nrecent += run;
		i += run;
	}
	for (size_t i = 0; i < n; i++) {
		if (m->watch_task && weft_event_task(&ev[i]) == m->watch_task)
			watch_put(m, &ev[i]);
		if (ev[i].kind == WEFT_EV_POLL)
			con_model_tl_poll(m, &ev[i]);
		else if (ev[i].kind == WEFT_EV_AWAIT_SITE)
			con_awaits_note(m, &ev[i]);
		else if (ev[i].kind == WEFT_EV_BLOCKING_START)
			m->blocking_started++;
		else if (ev[i].kind == WEFT_EV_BLOCKING_END)
			m->blocking_ended++;
	}
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
		got = n ? weft_wire_batch_decode(f->events, ev, n) : 0;
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
