/* SPDX-License-Identifier: MIT */
/*
 * Packed copies of the console's model, for the replay's checkpoints
 * (issue 21: seeks under a second need checkpoints a few tens of MB of
 * file apart, so many more of them in the same budget).  A deep copy
 * (con_model_clone()) costs about 290 bytes a task: the 200-byte record,
 * its slots in tasks[], the index, the list.  Here the tasks are packed
 * instead, the rest of the model (workers, warnings, timeline, recent
 * events, resources: a few MB at most, whatever the number of tasks) is
 * a deep copy with no tasks in it:
 *
 *   per task, a mask of the fields that are not zero (a varint), then
 *   those fields as varints: the id as the difference from the previous
 *   task's, the parent from the id, times from the spawn time (the spawn
 *   time from the previous task's), strings as numbers in a table of
 *   their own (names and files are few and shared); its histograms and
 *   waits after it when it has them;
 *   then the list (the Tasks view's order) and the dirty vector as
 *   indices into the tasks.
 *
 * A finished task of a task-per-request service packs in about 30
 * bytes.  Unpacking makes the same model a clone would (the same tasks
 * in the same order, the same list, its index rebuilt), so a restore is
 * exact; it reads the blob with bounds checks and says false on one that
 * does not parse (never past its end).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* ------------------------------------------------------------ varints */

typedef struct buf_s {
	uint8_t *p;
	size_t len, cap;
} buf_t;

static void buf_room(buf_t *b, size_t n)
{
	if (b->len + n <= b->cap)
		return;
	while (b->len + n > b->cap)
		b->cap = b->cap ? 2 * b->cap : 4096;
	b->p = con_xreallocarray(b->p, b->cap, 1);
}

static void put_var(buf_t *b, uint64_t v)
{
	buf_room(b, 10);
	while (v >= 0x80) {
		b->p[b->len++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->p[b->len++] = (uint8_t)v;
}

static void put_bytes(buf_t *b, const void *p, size_t n)
{
	buf_room(b, n);
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static uint64_t zz(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzz(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

typedef struct rd_s {
	const uint8_t *p, *end;
	bool bad;
} rd_t;

static uint64_t get_var(rd_t *r)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (r->p >= r->end) {
			r->bad = true;
			return 0;
		}
		uint8_t c = *r->p++;

		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}

/* ------------------------------------------------- the strings' table */

/* Pointers to numbers: the interned strings (one pointer each), the
 * tasks' records (their places in tasks[]). */
typedef struct ptrmap_s {
	const void **key;
	uint32_t *val; /* 1 + the number; 0: empty slot */
	size_t cap, n;
} ptrmap_t;

static size_t ptr_slot(const void *p, size_t cap)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (size_t)x & (cap - 1);
}

static void ptrmap_grow(ptrmap_t *t)
{
	ptrmap_t g = { 0 };

	g.cap = t->cap ? 2 * t->cap : 256;
	g.key = con_xcalloc(g.cap, sizeof(*g.key));
	g.val = con_xcalloc(g.cap, sizeof(*g.val));
	for (size_t j = 0; j < t->cap; j++) {
		size_t i;

		if (!t->val[j])
			continue;
		i = ptr_slot(t->key[j], g.cap);
		while (g.val[i])
			i = (i + 1) & (g.cap - 1);
		g.key[i] = t->key[j];
		g.val[i] = t->val[j];
	}
	g.n = t->n;
	free(t->key);
	free(t->val);
	*t = g;
}

/* @p's number, 1-based; a new one (the next) when @add, else 0. */
static uint32_t ptrmap_get(ptrmap_t *t, const void *p, bool add, bool *added)
{
	size_t i;

	*added = false;
	if (!t->cap)
		return 0;
	i = ptr_slot(p, t->cap);
	while (t->val[i]) {
		if (t->key[i] == p)
			return t->val[i];
		i = (i + 1) & (t->cap - 1);
	}
	if (!add)
		return 0;
	t->key[i] = p;
	t->val[i] = (uint32_t)++t->n;
	*added = true;
	return t->val[i];
}

static void ptrmap_free(ptrmap_t *t)
{
	free(t->key);
	free(t->val);
	memset(t, 0, sizeof(*t));
}

/* The string's number, 0 for the empty one; a new one goes into
 * @strs. */
static uint64_t str_num(ptrmap_t *t, buf_t *strs, const char *s)
{
	bool added;
	uint32_t n;

	if (!s || !*s)
		return 0;
	if (2 * (t->n + 1) > t->cap)
		ptrmap_grow(t);
	n = ptrmap_get(t, s, true, &added);
	if (added)
		put_bytes(strs, s, strlen(s) + 1);
	return n;
}

/* ----------------------------------------------------------- the tasks */

/*
 * The fields a task packs, in order, one bit each in its mask: the
 * counters and times first (most tasks have them: a mask of two bytes),
 * each present when not zero; then the "sticky" ones (from F_STICKY on),
 * present when not the same as the previous task's (a service's tasks
 * share their name, file, line, parent and state: most are not there).
 */
enum {
	F_ID,       /* the difference from the previous task's */
	F_SPAWNED,  /* likewise */
	F_FINISHED, /* after the spawn (+1; 0: live) */
	F_POLLS,
	F_BUSY,
	F_SCHEDULED,
	F_IDLE,
	F_WAKES,
	F_MAX_POLL,
	F_WAKER_CLONES,
	F_WAKER_DROPS,
	F_SELF_WAKES,
	F_IDLE_SINCE, /* after the spawn (+1; 0: not set) */
	F_WAITING_ON,
	F_WAITING_SINCE, /* after the spawn (+1; 0: not set) */
	F_STICKY,
	F_PARENT = F_STICKY,
	F_NAME, /* numbers in the strings' table, 0: "" */
	F_FILE,
	F_PARKED_FILE,
	F_LINE,
	F_PARKED_LINE,
	F_STATE_SIZE,
	F_WARNINGS,
	F_LOCKS_HELD,
	F_STATUS, /* zigzag */
	F_LAST_WORKER,
	F_KIND,
	F_STATE,
	F_WAITING_OP,
	F_NWAITED,
	F_FLAGS,
	F_MAX
};

/* F_FLAGS's bits. */
#define PK_DIRTY 1u
#define PK_LISTED 2u
#define PK_DOOMED 4u
#define PK_HIST 8u
#define PK_WAITED 16u

/* A time after the spawn: 0 stays 0 (not known). */
static uint64_t since(uint64_t t, uint64_t spawned)
{
	return t ? zz((int64_t)(t - spawned)) + 1 : 0;
}

static uint64_t since_back(uint64_t v, uint64_t spawned)
{
	return v ? spawned + (uint64_t)unzz(v - 1) : 0;
}

static void put_hist(buf_t *b, const weft_hist_t *h)
{
	uint64_t mask = 0;

	for (int i = 0; i < 64; i++)
		if (h->buckets[i])
			mask |= 1ull << i;
	put_var(b, mask);
	put_var(b, h->buckets[64]);
	for (int i = 0; i < 64; i++)
		if (h->buckets[i])
			put_var(b, h->buckets[i]);
	put_var(b, h->count);
	put_var(b, h->sum_ns);
	put_var(b, h->max_ns);
	put_var(b, h->outliers);
}

static void get_hist(rd_t *r, weft_hist_t *h)
{
	uint64_t mask = get_var(r);

	memset(h, 0, sizeof(*h));
	h->buckets[64] = (uint32_t)get_var(r);
	for (int i = 0; i < 64; i++)
		if (mask >> i & 1)
			h->buckets[i] = (uint32_t)get_var(r);
	h->count = get_var(r);
	h->sum_ns = get_var(r);
	h->max_ns = get_var(r);
	h->outliers = get_var(r);
}

/* The previous task's values (the deltas' and sticky fields' base). */
typedef struct prev_s {
	uint64_t id, spawned;
	uint64_t v[F_MAX];
} prev_t;

static void put_task(buf_t *b, const con_task_t *t, prev_t *pv, ptrmap_t *tab,
		     buf_t *strs)
{
	uint64_t v[F_MAX];
	uint64_t mask = 0;

	v[F_ID] = zz((int64_t)(t->id - pv->id));
	v[F_SPAWNED] = zz((int64_t)(t->spawned_ns - pv->spawned));
	v[F_FINISHED] = since(t->finished_ns, t->spawned_ns);
	v[F_POLLS] = t->polls;
	v[F_BUSY] = t->busy_ns;
	v[F_SCHEDULED] = t->scheduled_ns;
	v[F_IDLE] = t->idle_ns;
	v[F_WAKES] = t->wakes;
	v[F_MAX_POLL] = t->max_poll_ns;
	v[F_WAKER_CLONES] = t->waker_clones;
	v[F_WAKER_DROPS] = t->waker_drops;
	v[F_SELF_WAKES] = t->self_wakes;
	v[F_IDLE_SINCE] = since(t->idle_since_ns, t->spawned_ns);
	v[F_WAITING_ON] = t->waiting_on;
	v[F_WAITING_SINCE] = since(t->waiting_since_ns, t->spawned_ns);
	v[F_PARENT] = t->parent;
	v[F_NAME] = str_num(tab, strs, t->name);
	v[F_FILE] = str_num(tab, strs, t->file);
	v[F_PARKED_FILE] = str_num(tab, strs, t->parked_file);
	v[F_LINE] = t->line;
	v[F_PARKED_LINE] = t->parked_line;
	v[F_STATE_SIZE] = t->state_size;
	v[F_WARNINGS] = t->warnings;
	v[F_LOCKS_HELD] = t->locks_held;
	v[F_STATUS] = zz(t->status);
	v[F_LAST_WORKER] = t->last_worker;
	v[F_KIND] = t->kind;
	v[F_STATE] = t->state;
	v[F_WAITING_OP] = t->waiting_op;
	v[F_NWAITED] = t->nwaited;
	v[F_FLAGS] = (t->dirty ? PK_DIRTY : 0) | (t->listed ? PK_LISTED : 0) |
		     (t->doomed ? PK_DOOMED : 0) | (t->hist ? PK_HIST : 0) |
		     (t->waited ? PK_WAITED : 0);
	for (int i = 0; i < F_MAX; i++)
		if (i < F_STICKY ? v[i] != 0 : v[i] != pv->v[i])
			mask |= 1ull << i;
	put_var(b, mask);
	for (int i = 0; i < F_MAX; i++)
		if (mask >> i & 1)
			put_var(b, v[i]);
	if (t->hist) {
		put_hist(b, &t->hist[0]);
		put_hist(b, &t->hist[1]);
	}
	if (t->waited) {
		for (int i = 0; i < WEFT_TASK_WAITED; i++) {
			put_var(b, t->waited[i].res);
			put_var(b, t->waited[i].total_ns);
			put_var(b, t->waited[i].waits);
		}
	}
	memcpy(pv->v, v, sizeof(v));
	pv->id = t->id;
	pv->spawned = t->spawned_ns;
}

/* The string numbered @n (1-based) in @strs, or NULL. */
static const char *str_at(const char *const *strs, size_t nstrs, uint64_t n)
{
	if (!n)
		return "";
	return n <= nstrs ? strs[n - 1] : NULL;
}

/* @t (a zeroed record) from @r; false when it does not parse (@t's
 * strings then all ""). */
static bool get_task(rd_t *r, con_model_t *m, con_task_t *t, prev_t *pv,
		     const char *const *strs, size_t nstrs)
{
	uint64_t v[F_MAX];
	uint64_t mask = get_var(r);
	const char *name, *file, *parked;

	t->name = t->file = t->parked_file = con_model_empty;
	for (int i = 0; i < F_MAX; i++)
		v[i] = mask >> i & 1 ? get_var(r) : i < F_STICKY ? 0 : pv->v[i];
	name = str_at(strs, nstrs, v[F_NAME]);
	file = str_at(strs, nstrs, v[F_FILE]);
	parked = str_at(strs, nstrs, v[F_PARKED_FILE]);
	if (r->bad || mask >> F_MAX || !name || !file || !parked ||
	    v[F_NWAITED] > WEFT_TASK_WAITED)
		return false;
	t->id = pv->id + (uint64_t)unzz(v[F_ID]);
	t->spawned_ns = pv->spawned + (uint64_t)unzz(v[F_SPAWNED]);
	t->finished_ns = since_back(v[F_FINISHED], t->spawned_ns);
	t->polls = v[F_POLLS];
	t->busy_ns = v[F_BUSY];
	t->scheduled_ns = v[F_SCHEDULED];
	t->idle_ns = v[F_IDLE];
	t->wakes = v[F_WAKES];
	t->max_poll_ns = v[F_MAX_POLL];
	t->waker_clones = v[F_WAKER_CLONES];
	t->waker_drops = v[F_WAKER_DROPS];
	t->self_wakes = v[F_SELF_WAKES];
	t->idle_since_ns = since_back(v[F_IDLE_SINCE], t->spawned_ns);
	t->waiting_on = v[F_WAITING_ON];
	t->waiting_since_ns = since_back(v[F_WAITING_SINCE], t->spawned_ns);
	t->parent = v[F_PARENT];
	t->name = con_model_str_ref(m, name);
	t->file = con_model_str_ref(m, file);
	t->parked_file = con_model_str_ref(m, parked);
	t->line = (uint32_t)v[F_LINE];
	t->parked_line = (uint32_t)v[F_PARKED_LINE];
	t->state_size = (uint32_t)v[F_STATE_SIZE];
	t->warnings = (uint32_t)v[F_WARNINGS];
	t->locks_held = (uint32_t)v[F_LOCKS_HELD];
	t->status = (int32_t)unzz(v[F_STATUS]);
	t->last_worker = (uint16_t)v[F_LAST_WORKER];
	t->kind = (uint8_t)v[F_KIND];
	t->state = (uint8_t)v[F_STATE];
	t->waiting_op = (uint8_t)v[F_WAITING_OP];
	t->nwaited = (uint8_t)v[F_NWAITED];
	t->dirty = v[F_FLAGS] & PK_DIRTY;
	t->listed = v[F_FLAGS] & PK_LISTED;
	t->doomed = v[F_FLAGS] & PK_DOOMED;
	if (v[F_FLAGS] & PK_HIST) {
		t->hist = con_xmalloc(2 * sizeof(*t->hist));
		get_hist(r, &t->hist[0]);
		get_hist(r, &t->hist[1]);
	}
	if (v[F_FLAGS] & PK_WAITED) {
		t->waited = con_xcalloc(WEFT_TASK_WAITED, sizeof(*t->waited));
		for (int i = 0; i < WEFT_TASK_WAITED; i++) {
			t->waited[i].res = get_var(r);
			t->waited[i].total_ns = get_var(r);
			t->waited[i].waits = (uint32_t)get_var(r);
		}
	}
	memcpy(pv->v, v, sizeof(v));
	pv->id = t->id;
	pv->spawned = t->spawned_ns;
	return !r->bad;
}

/*
 * The recent events' ring (CON_RECENT_EVENTS of 32 bytes: 2 MiB, the
 * biggest part of a model without its tasks): its events as varints,
 * times and tasks as differences from the one before.
 */
static void put_events(buf_t *b, const weft_event_t *ev, size_t n)
{
	uint64_t ts = 0, task = 0;

	for (size_t i = 0; i < n; i++) {
		const weft_event_t *e = &ev[i];

		put_var(b, zz((int64_t)(e->ts - ts)));
		put_var(b, zz((int64_t)(e->task - task)));
		put_var(b, e->a1);
		put_var(b, e->a2);
		put_var(b, e->worker);
		put_var(b, (uint64_t)e->kind | (uint64_t)e->flags << 8);
		ts = e->ts;
		task = e->task;
	}
}

static void get_events(rd_t *r, weft_event_t *ev, size_t n)
{
	uint64_t ts = 0, task = 0, kf;

	for (size_t i = 0; i < n && !r->bad; i++) {
		weft_event_t *e = &ev[i];

		memset(e, 0, sizeof(*e));
		e->ts = ts + (uint64_t)unzz(get_var(r));
		e->task = task + (uint64_t)unzz(get_var(r));
		e->a1 = get_var(r);
		e->a2 = (uint32_t)get_var(r);
		e->worker = (uint16_t)get_var(r);
		kf = get_var(r);
		e->kind = (uint8_t)kf;
		e->flags = (uint8_t)(kf >> 8);
		ts = e->ts;
		task = e->task;
	}
}

/* --------------------------------------------------------- the whole */

void con_model_pack(con_packed_t *p, const con_model_t *src)
{
	con_model_t tmp = *src;
	buf_t b = { 0 }, strs = { 0 };
	ptrmap_t tab = { 0 }, places = { 0 };
	prev_t pv = { 0 };

	/* The rest: a deep copy of a model with no tasks (nor list, dirty
	 * vector or index: they point at tasks). */
	tmp.tasks = NULL;
	tmp.ntasks = tmp.tasks_cap = 0;
	tmp.hash = NULL;
	tmp.hash_cap = 0;
	tmp.list = NULL;
	tmp.nlist = tmp.list_cap = 0;
	tmp.dirty = NULL;
	tmp.ndirty = tmp.dirty_cap = 0;
	tmp.nslabs = tmp.slabs_cap = tmp.slab_used = 0;
	tmp.slabs = NULL;
	tmp.recent = NULL;
	tmp.recent_cap = 0;
	con_model_clone(&p->rest, &tmp);

	put_var(&b, src->ntasks);
	put_var(&b, src->tasks_cap);
	put_var(&b, src->nlist);
	put_var(&b, src->list_cap);
	put_var(&b, src->ndirty);
	put_var(&b, src->dirty_cap);
	/* Its slots up to nrecent only: the ring grows as events come, and
	 * those past it are not written yet. */
	put_var(&b, src->recent ? src->recent_cap : 0);
	if (src->recent)
		put_events(&b, src->recent,
			   src->nrecent < src->recent_cap ?
				   (size_t)src->nrecent :
				   src->recent_cap);
	for (size_t i = 0; i < src->ntasks; i++)
		put_task(&b, src->tasks[i], &pv, &tab, &strs);
	/* The list and the dirty vector: by the tasks' places in tasks[]. */
	if (src->nlist || src->ndirty) {
		bool added;

		while (places.cap < 2 * src->ntasks + 2)
			ptrmap_grow(&places);
		for (size_t i = 0; i < src->ntasks; i++)
			ptrmap_get(&places, src->tasks[i], true, &added);
		for (size_t i = 0; i < src->nlist; i++)
			put_var(&b, ptrmap_get(&places, src->list[i], false,
					       &added) -
					    1u);
		for (size_t i = 0; i < src->ndirty; i++)
			put_var(&b, ptrmap_get(&places, src->dirty[i], false,
					       &added) -
					    1u);
	}
	/* The strings first, then the rest. */
	p->len = strs.len + b.len;
	p->nstrs = tab.n;
	ptrmap_free(&tab);
	ptrmap_free(&places);
	p->strs_len = strs.len;
	p->blob = con_xmalloc(p->len ? p->len : 1);
	if (strs.len)
		memcpy(p->blob, strs.p, strs.len);
	if (b.len)
		memcpy(p->blob + strs.len, b.p, b.len);
	free(strs.p);
	free(b.p);
}

bool con_model_unpack(con_model_t *dst, const con_packed_t *p)
{
	rd_t r = { p->blob + p->strs_len, p->blob + p->len, false };
	const char **strs = NULL;
	prev_t pv = { 0 };
	size_t ntasks, nlist, ndirty, caps[3];
	bool ok = true;

	/* The strings' table: nstrs of them, each ended by its NUL. */
	memset(dst, 0, sizeof(*dst));
	if (p->strs_len > p->len ||
	    (p->strs_len && p->blob[p->strs_len - 1] != '\0'))
		return false;
	strs = con_xcalloc(p->nstrs ? p->nstrs : 1, sizeof(*strs));
	for (size_t i = 0, off = 0; i < p->nstrs; i++) {
		if (off >= p->strs_len) {
			free(strs);
			memset(dst, 0, sizeof(*dst));
			return false;
		}
		strs[i] = (const char *)p->blob + off;
		off += strlen(strs[i]) + 1;
	}

	con_model_clone(dst, &p->rest);
	ntasks = (size_t)get_var(&r);
	caps[0] = (size_t)get_var(&r);
	nlist = (size_t)get_var(&r);
	caps[1] = (size_t)get_var(&r);
	ndirty = (size_t)get_var(&r);
	caps[2] = (size_t)get_var(&r);
	/* Each task takes a byte at least: counts past the blob are lies. */
	if (r.bad || ntasks > p->len || ntasks > caps[0] || nlist > caps[1] ||
	    ndirty > caps[2] || caps[0] > 2 * p->len + 64 ||
	    caps[1] > 2 * p->len + 64 || caps[2] > 2 * p->len + 64 ||
	    nlist > ntasks || ndirty > ntasks) {
		free(strs);
		con_model_fini(dst);
		return false;
	}
	dst->recent_cap = (size_t)get_var(&r);
	if (dst->recent_cap) {
		size_t n = dst->nrecent < dst->recent_cap ?
				   (size_t)dst->nrecent :
				   dst->recent_cap;

		/* An event takes six bytes at least. */
		if (r.bad || dst->recent_cap > CON_RECENT_EVENTS ||
		    n > p->len / 6) {
			free(strs);
			con_model_fini(dst);
			return false;
		}
		dst->recent =
			con_xcalloc(dst->recent_cap, sizeof(*dst->recent));
		get_events(&r, dst->recent, n);
	}
	dst->tasks_cap = caps[0];
	dst->tasks = dst->tasks_cap ?
			     con_xcalloc(dst->tasks_cap, sizeof(*dst->tasks)) :
			     NULL;
	for (size_t i = 0; i < ntasks && ok; i++) {
		con_task_t *t = con_model_task_alloc(dst);

		ok = get_task(&r, dst, t, &pv, strs, p->nstrs);
		dst->tasks[dst->ntasks++] = t;
	}
	con_model_hash_rebuild(dst);
	dst->list_cap = caps[1];
	dst->list = caps[1] ? con_xcalloc(caps[1], sizeof(*dst->list)) : NULL;
	dst->dirty_cap = caps[2];
	dst->dirty = caps[2] ? con_xcalloc(caps[2], sizeof(*dst->dirty)) : NULL;
	for (size_t i = 0; i < nlist && ok; i++) {
		uint64_t k = get_var(&r);

		ok = !r.bad && k < dst->ntasks;
		if (ok)
			dst->list[dst->nlist++] = dst->tasks[k];
	}
	for (size_t i = 0; i < ndirty && ok; i++) {
		uint64_t k = get_var(&r);

		ok = !r.bad && k < dst->ntasks;
		if (ok)
			dst->dirty[dst->ndirty++] = dst->tasks[k];
	}
	free(strs);
	if (!ok || r.p != r.end) {
		con_model_fini(dst);
		return false;
	}
	return true;
}

size_t con_packed_bytes(const con_packed_t *p)
{
	return p->len + con_model_bytes(&p->rest);
}

void con_packed_free(con_packed_t *p)
{
	free(p->blob);
	con_model_fini(&p->rest);
	memset(p, 0, sizeof(*p));
}

/* ------------------------------------------------- a checkpoint saved */

/*
 * A model as bytes that outlive the process (the replay's side index,
 * replay_side.c): the rest of the model (all but its tasks) laid out as
 * the structures are in memory, each pointer replaced by what it points
 * to, then the packed tasks as above.  Read back only by a build with the
 * same layout (con_model_save_layout() is in the index's header), and
 * only after the index's checksum of these bytes matched; even so every
 * count is checked against the bytes left and the model's bounds, so
 * bytes that lie make false, never a read past the end.
 */

static void put_raw(buf_t *b, const void *p, size_t n)
{
	put_var(b, n);
	put_bytes(b, p, n);
}

/* A string, NULL as length 0 and "" as 1 (its NUL). */
static void put_str(buf_t *b, const char *s)
{
	put_var(b, s ? strlen(s) + 1 : 0);
	if (s)
		put_bytes(b, s, strlen(s) + 1);
}

static const uint8_t *get_raw(rd_t *r, size_t n)
{
	const uint8_t *p = r->p;

	if (r->bad || get_var(r) != n || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		return NULL;
	}
	p = r->p;
	r->p += n;
	return p;
}

static bool get_copy(rd_t *r, void *dst, size_t n)
{
	const uint8_t *p = get_raw(r, n);

	if (p)
		memcpy(dst, p, n);
	return p != NULL;
}

/* A string put_str() wrote, in the bytes (NULL: none, or bad). */
static const char *get_str(rd_t *r, bool *null)
{
	uint64_t n = get_var(r);
	const char *s = (const char *)r->p;

	*null = !n;
	if (r->bad || !n)
		return NULL;
	if ((uint64_t)(r->end - r->p) < n || r->p[n - 1] != '\0' ||
	    strlen(s) + 1 != n) {
		r->bad = true;
		return NULL;
	}
	r->p += n;
	return s;
}

static char *get_xstr(rd_t *r)
{
	bool null;
	const char *s = get_str(r, &null);

	return s ? con_xstrdup(s) : NULL;
}

/*
 * get_rest() replaces every pointer of con_model_t it knows of: a field
 * added to the model must be looked at there (a pointer replaced, or
 * NULL), then this size updated.  (LP64 only: the size differs
 * elsewhere.)
 */
#define CON_MODEL_SAVED_SIZE 1128
#if UINTPTR_MAX == UINT64_MAX
static_assert(sizeof(con_model_t) == CON_MODEL_SAVED_SIZE,
	      "con_model_t changed: check get_rest() in model_pack.c");
#endif

uint64_t con_model_save_layout(void)
{
	/* The sizes of what is written as it is in memory, and the bounds
	 * the counts are checked against. */
	const uint64_t v[] = {
		sizeof(con_model_t),
		sizeof(con_worker_t),
		sizeof(con_worker_series_t),
		sizeof(con_warning_t),
		sizeof(con_tl_top_t),
		sizeof(con_resource_t),
		sizeof(weft_hist_t),
		sizeof(weft_event_t),
		sizeof(con_task_t),
		sizeof(con_fin_t),
		sizeof(Weft__V1__Stats),
		CON_TL_BUCKETS,
		CON_WATCH_EVENTS,
		CON_RECENT_EVENTS,
		CON_MAX_WORKERS,
		F_MAX,
		WEFT_TASK_WAITED,
	};
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		h ^= v[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The rest of @m (not its tasks, list, dirty vector or recent events:
 * the packed blob holds those). */
static void put_rest(buf_t *b, const con_model_t *m)
{
	uint8_t flag, *blob;
	size_t n;

	put_raw(b, m, sizeof(*m));
	put_str(b, m->target);
	put_str(b, m->process);
	put_str(b, m->clock);
	for (uint32_t i = 0; i < m->workers_cap; i++) {
		put_raw(b, &m->workers[i], sizeof(m->workers[i]));
		if (m->workers[i].series)
			put_raw(b, m->workers[i].series,
				sizeof(*m->workers[i].series));
	}
	for (size_t i = 0; i < m->nwarnings; i++) {
		const con_warning_t *w = &m->warnings[i];

		put_raw(b, w, sizeof(*w));
		put_str(b, w->task_name);
		put_str(b, w->file);
		put_str(b, w->detail);
	}
	for (uint32_t i = 0; m->tl_top && i < CON_TL_BUCKETS; i++) {
		flag = m->tl_top[i] != NULL;
		put_bytes(b, &flag, 1);
		if (flag)
			put_raw(b, m->tl_top[i], sizeof(*m->tl_top[i]));
	}
	if (m->watch)
		put_raw(b, m->watch, CON_WATCH_EVENTS * sizeof(*m->watch));
	for (size_t i = 0; i < m->nres; i++) {
		const con_resource_t *r = m->res[i];

		put_raw(b, r, sizeof(*r));
		put_str(b, r->name);
		put_str(b, r->file);
		if (r->hist)
			put_raw(b, r->hist, 2 * sizeof(*r->hist));
	}
	for (size_t i = 0; i < m->nres_list; i++)
		put_var(b, m->res_list[i]->id);
	/* Retention's finish order (model_retain.c): its entries only,
	 * the sorted run and the pending ones, then the heap. */
	put_var(b, m->fin_pend - m->fin_lo);
	put_var(b, m->fin_hi - m->fin_lo);
	if (m->fin_pend > m->fin_lo)
		put_raw(b, m->fin + m->fin_lo,
			(m->fin_pend - m->fin_lo) * sizeof(*m->fin));
	put_var(b, m->nfin_heap);
	if (m->nfin_heap)
		put_raw(b, m->fin_heap, m->nfin_heap * sizeof(*m->fin_heap));
	blob = con_sites_save(&m->sites, &n); /* model_sites.c */
	put_var(b, n);
	put_raw(b, blob, n);
	free(blob);
}

/* Retention's entries (put_rest()'s last part) into @m; false on a count
 * past the bytes. */
static bool get_fin(rd_t *r, con_model_t *m)
{
	uint64_t n = get_var(r), hi = get_var(r), nh;

	if (r->bad || hi > n ||
	    n > (uint64_t)(r->end - r->p) / sizeof(con_fin_t))
		return false;
	if (n) {
		m->fin = con_xmalloc(n * sizeof(*m->fin));
		m->fin_cap = m->fin_pend = (size_t)n;
		m->fin_hi = (size_t)hi;
		if (!get_copy(r, m->fin, n * sizeof(*m->fin)))
			return false;
	}
	nh = get_var(r);
	if (r->bad || nh > (uint64_t)(r->end - r->p) / sizeof(con_fin_t))
		return false;
	if (nh) {
		m->fin_heap = con_xmalloc(nh * sizeof(*m->fin_heap));
		m->fin_heap_cap = m->nfin_heap = (size_t)nh;
		if (!get_copy(r, m->fin_heap, nh * sizeof(*m->fin_heap)))
			return false;
	}
	return true;
}

static bool get_flag(rd_t *r)
{
	if (r->bad || r->p >= r->end) {
		r->bad = true;
		return false;
	}
	return *r->p++ != 0;
}

/*
 * The resources of the rest (@m's raw counts say how many): read into a
 * model of their own, then cloned into @m as a checkpoint's copy is
 * (strings interned, index rebuilt).
 */
static bool get_res(rd_t *r, con_model_t *m, size_t nres, size_t nres_list)
{
	con_model_t tmp;
	con_resource_t *recs;
	bool ok = true;

	memset(&tmp, 0, sizeof(tmp));
	recs = con_xcalloc(nres ? nres : 1, sizeof(*recs));
	tmp.res = con_xcalloc(nres ? nres : 1, sizeof(*tmp.res));
	tmp.res_cap = nres;
	for (size_t i = 0; i < nres && ok; i++) {
		bool null;
		uint8_t had_hist;

		ok = get_copy(r, &recs[i], sizeof(recs[i]));
		had_hist = ok && recs[i].hist;
		recs[i].hist = NULL;
		recs[i].name = get_str(r, &null);
		ok = ok && !null && recs[i].name;
		recs[i].file = get_str(r, &null);
		ok = ok && !null && recs[i].file;
		if (ok && had_hist) {
			recs[i].hist = con_xmalloc(2 * sizeof(*recs[i].hist));
			ok = get_copy(r, recs[i].hist,
				      2 * sizeof(*recs[i].hist));
		}
		tmp.res[tmp.nres++] = &recs[i];
		if (!ok) {
			recs[i].name = recs[i].file = "";
		}
	}
	tmp.res_hash_cap = nres ? 1 : 0;
	tmp.res_list_cap = nres_list;
	if (ok) {
		/* No index in tmp: the list by a scan (a few thousand at
		 * most, once a restore). */
		con_model_t src = tmp;
		con_resource_t **list =
			con_xcalloc(nres_list ? nres_list : 1, sizeof(*list));

		for (size_t i = 0; i < nres_list && ok; i++) {
			uint64_t id = get_var(r);
			size_t j = 0;

			while (j < nres && recs[j].id != id)
				j++;
			ok = !r->bad && j < nres;
			if (ok)
				list[i] = &recs[j];
		}
		src.res_list = (const con_resource_t **)list;
		src.nres_list = nres_list;
		src.res_list_cap = nres_list;
		src.res_hash_cap = nres ? 1 : 0;
		if (ok) {
			/* Its counts first: the clone rebuilds the index of
			 * m's nres (when src had one) and finds the list's
			 * records in it. */
			m->nres = m->res_cap = nres;
			m->nres_list = m->res_list_cap = nres_list;
			con_model_res_clone(m, &src);
		}
		free(list);
	}
	for (size_t i = 0; i < tmp.nres; i++)
		free(recs[i].hist);
	free(tmp.res);
	free(recs);
	return ok;
}

/*
 * @m made from the rest's bytes: its fields as they were (what a clone
 * copies with *dst = *src), every pointer then replaced by one of ours
 * (or NULL): the groups, the strings' table and the tasks' parts are
 * rebuilt or come from the packed blob.
 */
static bool get_rest(rd_t *r, con_model_t *m)
{
	const Weft__V1__Stats stats0 = WEFT__V1__STATS__INIT;
	const Weft__V1__WorkerCounters wc0 = WEFT__V1__WORKER_COUNTERS__INIT;
	con_model_t raw;
	const uint8_t *sites;
	uint64_t n;
	bool tl, watch;

	memset(m, 0, sizeof(*m));
	if (!get_copy(r, &raw, sizeof(raw)))
		return false;
	*m = raw;
	m->target = m->process = m->clock = NULL;
	m->stats.base = stats0.base;
	m->stats.clock = NULL;
	m->tasks = NULL;
	m->ntasks = m->tasks_cap = 0;
	m->workers = NULL;
	m->workers_cap = 0;
	m->warnings = NULL;
	m->nwarnings = m->warnings_cap = 0;
	m->tl_top = NULL;
	m->watch = NULL;
	m->list = NULL;
	m->nlist = m->list_cap = 0;
	m->res = NULL;
	m->res_list = NULL;
	m->res_hash = NULL;
	m->nres = m->res_cap = m->res_hash_cap = 0;
	m->nres_list = m->res_list_cap = 0;
	m->groups = NULL;
	m->group_list = NULL;
	m->group_tmp = NULL;
	m->ngroups = m->ngroup_list = m->groups_cap = m->groups_room = 0;
	m->groups_stale = true;
	m->strs = NULL;
	m->strs_cap = m->nstrs = 0;
	m->slabs = NULL;
	m->nslabs = m->slabs_cap = m->slab_used = 0;
	m->free_tasks = NULL;
	m->hash = NULL;
	m->hash_cap = m->hash_tombs = 0;
	memset(m->str_hint, 0, sizeof(m->str_hint));
	m->fin = m->fin_heap = NULL;
	m->fin_lo = m->fin_hi = m->fin_pend = m->fin_cap = 0;
	m->nfin_heap = m->fin_heap_cap = 0;
	m->dirty = NULL;
	m->ndirty = m->dirty_cap = 0;
	m->recent = NULL;
	m->recent_cap = 0;
	memset(&m->sites, 0, sizeof(m->sites));
	/* What indexes a table: in range (the session's sort and filter
	 * replace the task list's on a restore). */
	if ((unsigned)m->sort_col >= CON_COL_MAX)
		m->sort_col = CON_COL_ID;
	if ((unsigned)m->res_sort_col >= CON_RCOL_MAX)
		m->res_sort_col = 0;
	if ((unsigned)m->group_sort_col >= CON_GCOL_MAX)
		m->group_sort_col = CON_GCOL_LIVE;
	if ((unsigned)m->mode > CON_MODE_REPLAY)
		m->mode = CON_MODE_REPLAY;
	m->filter[sizeof(m->filter) - 1] = '\0';
	m->res_filter[sizeof(m->res_filter) - 1] = '\0';
	m->group_filter[sizeof(m->group_filter) - 1] = '\0';

	m->target = get_xstr(r);
	m->process = get_xstr(r);
	m->clock = get_xstr(r);
	if (r->bad || raw.workers_cap > CON_MAX_WORKERS ||
	    raw.nworkers > raw.workers_cap || raw.stolen_hi > raw.workers_cap ||
	    raw.nwarnings > raw.warnings_cap ||
	    raw.warnings_cap > 2 * CON_MAX_WARNINGS ||
	    raw.nwarnings > CON_MAX_WARNINGS || raw.nres > CON_MAX_RESOURCES ||
	    raw.nres_list > raw.nres ||
	    (uint64_t)(r->end - r->p) <
		    raw.workers_cap + raw.nwarnings + raw.nres)
		return false;
	if (raw.workers_cap) {
		m->workers = con_xcalloc(raw.workers_cap, sizeof(*m->workers));
		m->workers_cap = raw.workers_cap;
	}
	for (uint32_t i = 0; i < raw.workers_cap; i++) {
		con_worker_t *w = &m->workers[i];
		bool series;

		if (!get_copy(r, w, sizeof(*w)))
			return false;
		series = w->series != NULL;
		w->series = NULL;
		w->counters.base = wc0.base;
		if (series) {
			w->series = con_xmalloc(sizeof(*w->series));
			if (!get_copy(r, w->series, sizeof(*w->series)))
				return false;
		}
	}
	if (raw.warnings_cap) {
		m->warnings =
			con_xcalloc(raw.warnings_cap, sizeof(*m->warnings));
		m->warnings_cap = raw.warnings_cap;
	}
	for (size_t i = 0; i < raw.nwarnings; i++) {
		con_warning_t *w = &m->warnings[i];

		if (!get_copy(r, w, sizeof(*w))) {
			memset(w, 0, sizeof(*w));
			return false;
		}
		w->task_name = w->file = w->detail = NULL;
		m->nwarnings++;
		w->task_name = get_xstr(r);
		w->file = get_xstr(r);
		w->detail = get_xstr(r);
		if (r->bad)
			return false;
	}
	tl = raw.tl_top != NULL;
	if (tl) {
		m->tl_top = con_xcalloc(CON_TL_BUCKETS, sizeof(*m->tl_top));
		for (uint32_t i = 0; i < CON_TL_BUCKETS; i++) {
			if (!get_flag(r))
				continue;
			m->tl_top[i] = con_xmalloc(sizeof(*m->tl_top[i]));
			if (!get_copy(r, m->tl_top[i], sizeof(*m->tl_top[i])))
				return false;
			if (m->tl_top[i]->ntop > CON_TL_TOP)
				return false;
		}
	}
	watch = raw.watch != NULL;
	if (watch) {
		m->watch = con_xcalloc(CON_WATCH_EVENTS, sizeof(*m->watch));
		if (!get_copy(r, m->watch,
			      CON_WATCH_EVENTS * sizeof(*m->watch)))
			return false;
	}
	if (r->bad || !get_res(r, m, raw.nres, raw.nres_list) || !get_fin(r, m))
		return false;
	n = get_var(r);
	sites = get_raw(r, n);
	return sites && con_sites_load(&m->sites, sites, n);
}

void con_model_save(con_saved_t *out, const con_model_t *m)
{
	con_packed_t pk;
	buf_t b = { 0 };

	con_model_pack(&pk, m);
	put_rest(&b, m);
	put_var(&b, pk.len);
	put_var(&b, pk.strs_len);
	put_var(&b, pk.nstrs);
	put_bytes(&b, pk.blob, pk.len);
	con_packed_free(&pk);
	out->p = b.p;
	out->len = b.len;
}

bool con_model_load(con_model_t *dst, const void *bytes, size_t len)
{
	rd_t r = { bytes, (const uint8_t *)bytes + len, false };
	con_packed_t pk;
	uint64_t n, strs_len, nstrs;
	bool ok;

	memset(dst, 0, sizeof(*dst));
	memset(&pk, 0, sizeof(pk));
	if (!get_rest(&r, &pk.rest)) {
		con_model_fini(&pk.rest);
		return false;
	}
	n = get_var(&r);
	strs_len = get_var(&r);
	nstrs = get_var(&r);
	if (r.bad || n != (uint64_t)(r.end - r.p) || strs_len > n ||
	    nstrs > n) {
		con_model_fini(&pk.rest);
		return false;
	}
	pk.blob = (uint8_t *)r.p; /* read only */
	pk.len = (size_t)n;
	pk.strs_len = (size_t)strs_len;
	pk.nstrs = (size_t)nstrs;
	ok = con_model_unpack(dst, &pk);
	con_model_fini(&pk.rest);
	return ok;
}

void con_saved_free(con_saved_t *s)
{
	free(s->p);
	s->p = NULL;
	s->len = 0;
}
