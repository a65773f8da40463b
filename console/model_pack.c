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
 * does not parse (never past its end).  A model saved to a file whole
 * (the side index's checkpoints) is model_save.c's.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "model_pack_internal.h"

/* ----------------------------------------------------------- zigzag */

static uint64_t zz(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzz(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
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

/* F_FLAGS's bits. */
#define PK_DIRTY 1u
#define PK_LISTED 2u
#define PK_DOOMED 4u
#define PK_HIST 8u
#define PK_WAITED 16u
#define PK_SPAWN_UNSEEN 32u

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
		     (t->waited ? PK_WAITED : 0) |
		     (t->spawn_unseen ? PK_SPAWN_UNSEEN : 0);
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
	t->spawn_unseen = v[F_FLAGS] & PK_SPAWN_UNSEEN;
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
	/*
	 * Each task takes a byte at least: counts past the blob are lies.
	 * Capacities past what it could fill are cut to that, not refused:
	 * a model whose tasks had mostly ended and been let go keeps its
	 * arrays' size, and its restore failed.
	 */
	for (int k = 0; k < 3; k++)
		if (caps[k] > 2 * p->len + 64)
			caps[k] = 2 * p->len + 64;
	if (r.bad || ntasks > p->len || ntasks > caps[0] || nlist > caps[1] ||
	    ndirty > caps[2] || nlist > ntasks || ndirty > ntasks) {
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
