/* SPDX-License-Identifier: MIT */
/*
 * weft-trace stats: the blocking pool and the timer wheel, from the
 * events (trace_tool.h).
 *
 * A blocking job that waits for a busy thread is told by RES_WAIT (task =
 * the submitting task, a1 = the pool's resource id, op JOB) when queued
 * and RES_WAIT_END when a thread takes it; then, on the pool's thread,
 * RES_ACQUIRE (+ RES_SITE, RES_LABEL: the job's name) at the same stamp,
 * BLOCKING_START (a1: the job's name again), BLOCKING_END (a1: its run
 * time) and RES_RELEASE.  A job an idle or a new thread takes has no wait.
 *
 * Waits are matched to their ends per task and pool in FIFO order (a
 * task's jobs are queued and taken in order).  Every pool thread emits
 * as the same "other" thread (no worker index), so a job's acquire, name,
 * start and end are tied together through its task: a served wait's end
 * makes the job, the task's oldest such job takes the next acquire, the
 * name comes with the acquire's stamp, the oldest acquired job takes the
 * next start, and an end takes the started job whose start is its stamp
 * less its run time.  When one task has jobs starting on two threads at
 * once their names can swap; their submitter row stays the task's.  A
 * trace with no BLOCKING_START at all (only the resource's events) times
 * a job from its acquire to its release instead.
 *
 * A job counts when it begins (BLOCKING_START), under its submitter: the
 * submitting task's name and spawn location as the trace knows them then,
 * with the job's name.  The first TT_POOL_SUBMITTERS rows are kept; jobs
 * of any other submitter are summed as "others".  A job's name is a
 * string's address in the traced process: the events do not carry its
 * text.  A blocking-queue warning does, with the job's submit line
 * (RES_SITE) and its task: a row whose submitter and line one names
 * prints that text, any other the address (the same name, the same
 * address).
 *
 * Timers: each TIMER_FIRE is one turn of a driver's wheel that fired a2
 * timers (a turn firing more than the driver's batch, 64, tells it in
 * several events).
 */
#include <stdlib.h>
#include <string.h>

#include "trace_tool.h"

enum { J_WAITED, J_ACQUIRED, J_STARTED };

struct pool_job {
	uint64_t res, wait_ns, acq_ts, start_ts, label;
	uint32_t line; /* where it was submitted (RES_SITE), 0: not known */
	uint32_t sub;  /* UINT32_MAX: others */
	uint8_t state;
	bool waited;
};

struct pool_wait {
	uint64_t res, ts;
};

typedef struct tt_pool_task_s {
	uint64_t task;
	struct pool_wait *w; /* a ring: w[(wh + i) % wcap], i < wn */
	size_t wh, wn, wcap;
	struct pool_job *j; /* in the order they came */
	size_t jn, jcap;
	struct tt_pool_task_s *next;
} pool_task_t;

#define SUB_OTHERS UINT32_MAX
#define SUB_SLOTS (2 * TT_POOL_SUBMITTERS)

void tt_pool_init(tt_pool_t *p)
{
	memset(p, 0, sizeof(*p));
	/*
	 * A quarter of the polls' exact values each (8 MiB): with the
	 * polls' 32 MiB and the stream's reorder window, three full sets
	 * took stats to 230 MB of its 256 MiB on a 2 GB trace.  Timers per
	 * tick are small counts, exact in the histogram anyway (values
	 * under 64 have a bucket each).
	 */
	p->wait.exact_max = TT_DURS_EXACT / 4;
	p->fired.exact_max = TT_DURS_EXACT / 4;
	p->ntb = 64;
	p->tasks = tt_xmalloc(p->ntb * sizeof(*p->tasks));
	memset(p->tasks, 0, p->ntb * sizeof(*p->tasks));
	p->sub_hash = tt_xmalloc(SUB_SLOTS * sizeof(*p->sub_hash));
	memset(p->sub_hash, 0, SUB_SLOTS * sizeof(*p->sub_hash));
}

/* ------------------------------------------------------------ the tasks */

static size_t task_hash(size_t nb, uint64_t id)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 17) & (nb - 1);
}

static void tasks_grow(tt_pool_t *p)
{
	size_t old = p->ntb;
	pool_task_t **b = p->tasks;

	p->ntb = 2 * old;
	p->tasks = tt_xmalloc(p->ntb * sizeof(*p->tasks));
	memset(p->tasks, 0, p->ntb * sizeof(*p->tasks));
	for (size_t i = 0; i < old; i++)
		for (pool_task_t *k = b[i], *next; k; k = next) {
			size_t h = task_hash(p->ntb, k->task);

			next = k->next;
			k->next = p->tasks[h];
			p->tasks[h] = k;
		}
	free(b);
}

static pool_task_t *task_get(tt_pool_t *p, uint64_t id, bool make)
{
	pool_task_t **pp = &p->tasks[task_hash(p->ntb, id)], *k;

	for (k = *pp; k; k = k->next)
		if (k->task == id)
			return k;
	if (!make)
		return NULL;
	if (p->ntasks + 1 > 2 * p->ntb) {
		tasks_grow(p);
		pp = &p->tasks[task_hash(p->ntb, id)];
	}
	k = tt_xmalloc(sizeof(*k));
	memset(k, 0, sizeof(*k));
	k->task = id;
	k->next = *pp;
	*pp = k;
	p->ntasks++;
	return k;
}

/* A task with nothing queued or running is forgotten. */
static void task_tidy(tt_pool_t *p, pool_task_t *k)
{
	pool_task_t **pp = &p->tasks[task_hash(p->ntb, k->task)];

	if (k->wn || k->jn)
		return;
	while (*pp != k)
		pp = &(*pp)->next;
	*pp = k->next;
	free(k->w);
	free(k->j);
	free(k);
	p->ntasks--;
}

/* Room for one more followed wait or job; false past the bound. */
static bool follow_one(tt_pool_t *p)
{
	if (p->followed >= TT_POOL_FOLLOWED) {
		p->not_followed++;
		return false;
	}
	p->followed++;
	return true;
}

static void wait_push(tt_pool_t *p, uint64_t task, uint64_t res, uint64_t ts)
{
	pool_task_t *k;

	if (!follow_one(p))
		return;
	k = task_get(p, task, true);
	if (k->wn == k->wcap) {
		size_t cap = k->wcap ? 2 * k->wcap : 4;
		struct pool_wait *w = tt_xmalloc(cap * sizeof(*w));

		for (size_t i = 0; i < k->wn; i++)
			w[i] = k->w[(k->wh + i) % k->wcap];
		free(k->w);
		k->w = w;
		k->wh = 0;
		k->wcap = cap;
	}
	k->w[(k->wh + k->wn++) % k->wcap] = (struct pool_wait){ res, ts };
}

/* The task's oldest wait on @res, taken out; false when none. */
static bool wait_pop(tt_pool_t *p, pool_task_t *k, uint64_t res,
		     uint64_t *ts)
{
	size_t i;

	for (i = 0; i < k->wn; i++)
		if (k->w[(k->wh + i) % k->wcap].res == res)
			break;
	if (i == k->wn)
		return false;
	*ts = k->w[(k->wh + i) % k->wcap].ts;
	/* The ones before it move up one (usually none: i is 0). */
	for (; i > 0; i--)
		k->w[(k->wh + i) % k->wcap] = k->w[(k->wh + i - 1) % k->wcap];
	k->wh = (k->wh + 1) % k->wcap;
	k->wn--;
	p->followed--;
	return true;
}

static struct pool_job *job_add(tt_pool_t *p, pool_task_t *k)
{
	struct pool_job *j;

	if (!follow_one(p))
		return NULL;
	if (k->jn == k->jcap) {
		k->jcap = k->jcap ? 2 * k->jcap : 4;
		k->j = tt_xrealloc(k->j, k->jcap * sizeof(*k->j));
	}
	j = &k->j[k->jn++];
	memset(j, 0, sizeof(*j));
	j->sub = SUB_OTHERS;
	return j;
}

static void job_remove(tt_pool_t *p, pool_task_t *k, struct pool_job *j)
{
	size_t i = (size_t)(j - k->j);

	memmove(&k->j[i], &k->j[i + 1], (k->jn - i - 1) * sizeof(*k->j));
	k->jn--;
	p->followed--;
}

/* The task's oldest job in @state (on @res unless 0). */
static struct pool_job *job_oldest(pool_task_t *k, uint8_t state,
				   uint64_t res)
{
	for (size_t i = 0; i < k->jn; i++)
		if (k->j[i].state == state && (!res || k->j[i].res == res))
			return &k->j[i];
	return NULL;
}

/* ------------------------------------------------------- the submitters */

static uint64_t fnv(uint64_t h, const void *s, size_t n)
{
	const unsigned char *c = s;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ull;
	return h;
}

static tt_pool_sub_t *sub_at(tt_pool_t *p, uint32_t i)
{
	return i == SUB_OTHERS ? &p->others : &p->subs[i];
}

/* The row of (@name, @file, @line, @label), made if there is room. */
static uint32_t sub_find(tt_pool_t *p, uint64_t task, const char *name,
			 const char *file, uint32_t line, uint64_t label)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t slot;

	h = fnv(h, name, strlen(name) + 1);
	h = fnv(h, file, strlen(file) + 1);
	h = fnv(h, &line, sizeof(line));
	h = fnv(h, &label, sizeof(label));
	for (slot = h & (SUB_SLOTS - 1); p->sub_hash[slot];
	     slot = (slot + 1) & (SUB_SLOTS - 1)) {
		tt_pool_sub_t *s = &p->subs[p->sub_hash[slot] - 1];

		if (s->line == line && s->label == label &&
		    !strcmp(s->name, name) && !strcmp(s->file, file))
			return p->sub_hash[slot] - 1;
	}
	if (p->nsubs == TT_POOL_SUBMITTERS)
		return SUB_OTHERS;
	if (!p->subs)
		p->subs = tt_xmalloc(TT_POOL_SUBMITTERS * sizeof(*p->subs));
	memset(&p->subs[p->nsubs], 0, sizeof(p->subs[0]));
	p->subs[p->nsubs].name = tt_xstrdup(name);
	p->subs[p->nsubs].file = tt_xstrdup(file);
	p->subs[p->nsubs].line = line;
	p->subs[p->nsubs].task = task;
	p->subs[p->nsubs].label = label;
	p->sub_hash[slot] = (uint32_t)++p->nsubs;
	return (uint32_t)(p->nsubs - 1);
}

/* A job begins: counted under its submitter, with its queue wait. */
static void job_begin(tt_pool_t *p, const tt_trace_t *t, uint64_t task,
		      struct pool_job *j)
{
	const tt_task_t *k = tt_task(t, task);
	char buf[32];
	tt_pool_sub_t *s;

	if (!task)
		j->sub = sub_find(p, 0, "(no task)", "", 0, j->label);
	else if (k)
		j->sub = sub_find(p, task, k->name, k->file, k->line,
				  j->label);
	else {
		snprintf(buf, sizeof(buf), "task %llu",
			 (unsigned long long)task);
		j->sub = sub_find(p, task, buf, "", 0, j->label);
	}
	s = sub_at(p, j->sub);
	if (!s->job_line)
		s->job_line = j->line;
	s->jobs++;
	if (j->waited) {
		s->waits++;
		s->wait_ns += j->wait_ns;
	}
	p->jobs++;
	j->state = J_STARTED;
}

/* ------------------------------------------------------------ the events */

static bool pool_known(tt_pool_t *p, uint64_t id)
{
	for (unsigned i = 0; i < p->nids; i++)
		if (p->ids[i] == id)
			return true;
	return false;
}

static void pool_add(tt_pool_t *p, uint64_t id)
{
	if (id && !pool_known(p, id) && p->nids < TT_POOL_IDS)
		p->ids[p->nids++] = id;
}

static bool is_pool(tt_pool_t *p, const tt_trace_t *t, uint64_t id)
{
	const tt_resource_t *x;

	if (pool_known(p, id))
		return true;
	x = tt_res_find(&t->res, id);
	if (x && x->kind == WEFT_RES_BLOCKING_POOL) {
		pool_add(p, id);
		return true;
	}
	return false;
}

static void on_wait_end(tt_pool_t *p, const weft_event_t *e)
{
	pool_task_t *k = task_get(p, e->task, false);
	struct pool_job *j;
	uint64_t at;
	bool found = k && wait_pop(p, k, e->a1, &at);

	if (e->a2 & (WEFT_RES_CANCELLED | WEFT_RES_CLOSED)) {
		if (found)
			p->cancelled++;
	} else if (!found) {
		p->unmatched_ends++; /* queued before the trace began */
	} else {
		tt_durs_add(&p->wait, e->ts > at ? e->ts - at : 0);
		if ((j = job_add(p, k))) {
			j->res = e->a1;
			j->waited = true;
			j->wait_ns = e->ts > at ? e->ts - at : 0;
			j->state = J_WAITED;
		}
	}
	if (k)
		task_tidy(p, k);
}

static void on_acquire(tt_pool_t *p, const weft_event_t *e)
{
	pool_task_t *k = task_get(p, e->task, true);
	struct pool_job *j = job_oldest(k, J_WAITED, e->a1);

	if (!j && (j = job_add(p, k)))
		j->res = e->a1;
	if (j) {
		j->state = J_ACQUIRED;
		j->acq_ts = e->ts;
	}
	task_tidy(p, k);
}

static void on_label(tt_pool_t *p, const weft_event_t *e)
{
	pool_task_t *k = task_get(p, e->task, false);

	if (!k)
		return;
	/* The acquire it follows: the same stamp. */
	for (size_t i = 0; i < k->jn; i++)
		if (k->j[i].state == J_ACQUIRED && !k->j[i].label &&
		    k->j[i].acq_ts == e->ts) {
			k->j[i].label = e->a1;
			return;
		}
}

static void on_site(tt_pool_t *p, const weft_event_t *e)
{
	pool_task_t *k = task_get(p, e->task, false);

	if (!k)
		return;
	/* The acquire it follows: the same stamp. */
	for (size_t i = 0; i < k->jn; i++)
		if (k->j[i].state == J_ACQUIRED && !k->j[i].line &&
		    k->j[i].acq_ts == e->ts) {
			k->j[i].line = (uint32_t)e->a2;
			return;
		}
}

static void on_start(tt_pool_t *p, const tt_trace_t *t,
		     const weft_event_t *e)
{
	pool_task_t *k = task_get(p, e->task, true);
	struct pool_job *j = job_oldest(k, J_ACQUIRED, 0);

	p->any = true;
	if (!j)
		j = job_add(p, k); /* no resource events: an older file */
	if (!j) {
		task_tidy(p, k);
		return;
	}
	if (!j->label)
		j->label = e->a1;
	j->start_ts = e->ts;
	job_begin(p, t, e->task, j);
}

static void on_end(tt_pool_t *p, const weft_event_t *e)
{
	pool_task_t *k = task_get(p, e->task, false);
	uint64_t start = e->ts > e->a1 ? e->ts - e->a1 : 0, best = UINT64_MAX;
	struct pool_job *j = NULL;

	for (size_t i = 0; k && i < k->jn; i++) {
		uint64_t s = k->j[i].start_ts,
			 d = s > start ? s - start : start - s;

		if (k->j[i].state == J_STARTED && d < best) {
			best = d;
			j = &k->j[i];
		}
	}
	if (!j) {
		p->unmatched_ends++; /* begun before the trace did */
		return;
	}
	sub_at(p, j->sub)->run_ns += e->a1;
	job_remove(p, k, j);
	task_tidy(p, k);
}

/* Only for a trace without BLOCKING_START: acquire to release. */
static void on_release(tt_pool_t *p, const tt_trace_t *t,
		       const weft_event_t *e)
{
	pool_task_t *k = task_get(p, e->task, false);
	struct pool_job *j = k ? job_oldest(k, J_ACQUIRED, e->a1) : NULL;

	if (!j)
		return;
	job_begin(p, t, e->task, j);
	sub_at(p, j->sub)->run_ns += e->ts > j->acq_ts ? e->ts - j->acq_ts : 0;
	job_remove(p, k, j);
	task_tidy(p, k);
}

void tt_pool_note(tt_pool_t *p, const tt_trace_t *t, const weft_event_t *e)
{
	switch (e->kind) {
	case WEFT_EV_RES_NEW:
		if (e->a2 == WEFT_RES_BLOCKING_POOL)
			pool_add(p, e->a1);
		break;
	case WEFT_EV_RES_WAIT:
		if ((e->a2 & WEFT_RES_OP_MASK) != WEFT_RES_OP_JOB)
			break;
		pool_add(p, e->a1);
		p->any = true;
		wait_push(p, e->task, e->a1, e->ts);
		break;
	case WEFT_EV_RES_WAIT_END:
		if ((e->a2 & WEFT_RES_OP_MASK) == WEFT_RES_OP_JOB)
			on_wait_end(p, e);
		break;
	case WEFT_EV_RES_ACQUIRE:
		if (is_pool(p, t, e->a1)) {
			p->any = true;
			on_acquire(p, e);
		}
		break;
	case WEFT_EV_RES_LABEL:
		on_label(p, e);
		break;
	case WEFT_EV_RES_SITE:
		on_site(p, e);
		break;
	case WEFT_EV_RES_RELEASE:
		if (!p->seen_start && is_pool(p, t, e->a1))
			on_release(p, t, e);
		break;
	case WEFT_EV_BLOCKING_START:
		p->seen_start = true;
		on_start(p, t, e);
		break;
	case WEFT_EV_BLOCKING_END:
		on_end(p, e);
		break;
	case WEFT_EV_TIMER_FIRE:
		tt_durs_add(&p->fired, e->a2);
		break;
	default:
		break;
	}
}

/* ------------------------------------------------------------ the output */

/* By run time (what held the pool's threads), jobs, wait, then name. */
static int sub_cmp(const void *a, const void *b)
{
	const tt_pool_sub_t *x = *(const tt_pool_sub_t *const *)a,
			    *y = *(const tt_pool_sub_t *const *)b;
	int c;

	if (x->run_ns != y->run_ns)
		return x->run_ns > y->run_ns ? -1 : 1;
	if (x->jobs != y->jobs)
		return x->jobs > y->jobs ? -1 : 1;
	if (x->wait_ns != y->wait_ns)
		return x->wait_ns > y->wait_ns ? -1 : 1;
	if ((c = strcmp(x->name, y->name)))
		return c;
	if ((c = strcmp(x->file, y->file)))
		return c;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->label < y->label ? -1 : x->label > y->label;
}

/*
 * Whether the blocking-queue warning's detail @d names the job of a row
 * (collector_res_warn.c: `"NAME" (FILE:LINE) of task T (...)`, `... of
 * TNAME tasks`, `... of a plain thread`): submitted at line @line (0:
 * not known, any), by task @task (0: a plain thread) named @tname.  Its
 * NAME into @out.
 */
static bool label_in(const char *d, uint32_t line, uint64_t task,
		     const char *tname, char *out, size_t len)
{
	for (const char *q = strchr(d, '"'); q; q = strchr(q + 1, '"')) {
		const char *e = strchr(q + 1, '"'), *close, *who, *colon;
		char want[48];
		bool ok;

		if (!e)
			break;
		if (strncmp(e, "\" (", 3) || !(close = strstr(e, ") of "))) {
			q = e;
			continue;
		}
		who = close + 5;
		colon = close;
		while (colon > e && *colon != ':')
			colon--;
		ok = !line ||
		     (*colon == ':' && strtoul(colon + 1, NULL, 10) == line);
		if (ok && task) {
			snprintf(want, sizeof(want), "task %llu (",
				 (unsigned long long)task);
			ok = !strncmp(who, want, strlen(want)) ||
			     (tname[0] && !strncmp(who, tname, strlen(tname)) &&
			      !strncmp(who + strlen(tname), " tasks", 6));
		} else if (ok) {
			ok = !strncmp(who, "a plain thread", 14);
		}
		if (ok && e > q + 1 && strncmp(q + 1, "unnamed", 7)) {
			snprintf(out, len, "%.*s", (int)(e - q - 1), q + 1);
			return true;
		}
		q = e;
	}
	return false;
}

/*
 * The job name of @s: the events carry its address only, so the text is
 * taken where the trace has it, a blocking-queue warning that names a
 * job of the same submitter and site (the same address is the same
 * string: every row with it reads the same); else the address.
 */
static const char *job_name(const tt_trace_t *t, const tt_pool_sub_t *s,
			    char *buf, size_t len)
{
	if (!s->label) {
		snprintf(buf, len, "-");
		return buf;
	}
	for (size_t i = 0; t && i < t->nkept; i++) {
		const tt_warning_t *w = &t->warnings[i];

		if (w->kind == WEFT_WARN_BLOCKING_QUEUE && w->detail &&
		    label_in(w->detail, s->job_line, s->task, s->name, buf,
			     len))
			return buf;
	}
	snprintf(buf, len, "0x%llx", (unsigned long long)s->label);
	return buf;
}

static void sub_row(const tt_trace_t *t, const tt_pool_sub_t *s,
		    const char *name, const char *site)
{
	char label[64], a[16], b[16];

	job_name(t, s, label, sizeof(label));
	printf("  %-20s %-24s %-14s %6llu %6llu %9s %9s\n", name, site, label,
	       (unsigned long long)s->jobs, (unsigned long long)s->waits,
	       tt_dur(a, sizeof(a), s->wait_ns), tt_dur(b, sizeof(b), s->run_ns));
}

static void pool_print(tt_pool_t *p, const tt_trace_t *t, unsigned long top)
{
	const tt_pool_sub_t **all;
	size_t running = 0, queued = 0, n;
	char a[16], b[16], c[16], d[16];

	for (size_t i = 0; i < p->ntb; i++)
		for (const pool_task_t *k = p->tasks[i]; k; k = k->next) {
			queued += k->wn;
			for (size_t j = 0; j < k->jn; j++)
				running += k->j[j].state == J_STARTED;
		}
	printf("\nblocking pool: %llu jobs run, %zu waited for a thread",
	       (unsigned long long)p->jobs, p->wait.n);
	if (running || queued)
		printf("; at the end %zu running, %zu queued", running, queued);
	putchar('\n');
	if (p->wait.n)
		printf("  queue wait: p50 %s, p99 %s, max %s, total %s%s\n",
		       tt_dur(a, sizeof(a), tt_durs_pct(&p->wait, 50)),
		       tt_dur(b, sizeof(b), tt_durs_pct(&p->wait, 99)),
		       tt_dur(c, sizeof(c), p->wait.max),
		       tt_dur(d, sizeof(d), p->wait.sum),
		       p->wait.inexact ? " (percentiles within 1.6 %)" : "");
	if (p->cancelled)
		printf("  %llu waits ended unserved (cancelled or closed)\n",
		       (unsigned long long)p->cancelled);
	if (p->unmatched_ends || p->not_followed)
		printf("  %llu ends without their start in the trace, %llu "
		       "jobs not followed (over %zu at once)\n",
		       (unsigned long long)p->unmatched_ends,
		       (unsigned long long)p->not_followed, TT_POOL_FOLLOWED);
	if (!p->nsubs && !p->others.jobs)
		return;
	n = p->nsubs;
	all = tt_xmalloc((n ? n : 1) * sizeof(*all));
	for (size_t i = 0; i < n; i++)
		all[i] = &p->subs[i];
	qsort(all, n, sizeof(*all), sub_cmp);
	printf("  top submitters (by run time; a job's name as a warning "
	       "named it, else its address in the process):\n");
	printf("  %-20s %-24s %-14s %6s %6s %9s %9s\n", "SUBMITTER",
	       "SPAWNED AT", "JOB", "JOBS", "WAITS", "WAITED", "RUN");
	for (size_t i = 0; i < n && i < top; i++) {
		char site[300];

		char *at = site;
		size_t len;

		if (all[i]->file[0])
			snprintf(site, sizeof(site), "%s:%u", all[i]->file,
				 all[i]->line);
		else
			snprintf(site, sizeof(site), "?");
		/* A long path keeps its end (the file and line), as the
		 * console's columns do. */
		if ((len = strlen(site)) > 24) {
			at = site + len - 24;
			*at = '~';
		}
		sub_row(t, all[i], all[i]->name[0] ? all[i]->name : "-", at);
	}
	if (n > top) {
		tt_pool_sub_t rest = { .label = 0 };

		for (size_t i = top; i < n; i++) {
			rest.jobs += all[i]->jobs;
			rest.waits += all[i]->waits;
			rest.wait_ns += all[i]->wait_ns;
			rest.run_ns += all[i]->run_ns;
		}
		printf("  ... %zu more submitters:\n", n - (size_t)top);
		sub_row(t, &rest, "(the rest)", "");
	}
	if (p->others.jobs)
		sub_row(t, &p->others, "others", "(past 1024 rows)");
	free(all);
}

void tt_pool_print(tt_pool_t *p, const tt_trace_t *t, unsigned long top)
{
	if (p->any)
		pool_print(p, t, top);
	if (p->fired.n)
		printf("\ntimer wheel: %zu ticks fired %llu timers; per tick "
		       "p50 %llu, p99 %llu, max %llu%s\n",
		       p->fired.n, (unsigned long long)p->fired.sum,
		       (unsigned long long)tt_durs_pct(&p->fired, 50),
		       (unsigned long long)tt_durs_pct(&p->fired, 99),
		       (unsigned long long)p->fired.max,
		       p->fired.inexact ? " (percentiles within 1.6 %)" : "");
}

void tt_pool_free(tt_pool_t *p)
{
	for (size_t i = 0; i < p->ntb; i++)
		for (pool_task_t *k = p->tasks[i], *next; k; k = next) {
			next = k->next;
			free(k->w);
			free(k->j);
			free(k);
		}
	for (size_t i = 0; i < p->nsubs; i++) {
		free(p->subs[i].name);
		free(p->subs[i].file);
	}
	free(p->subs);
	free(p->tasks);
	free(p->sub_hash);
	tt_durs_free(&p->wait);
	tt_durs_free(&p->fired);
	memset(p, 0, sizeof(*p));
}
