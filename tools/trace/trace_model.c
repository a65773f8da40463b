/* SPDX-License-Identifier: MIT */
/*
 * Reading a trace file for the verbs (trace_tool.h): libweft-wire's
 * stream hands out frames as read and events in time order; the header
 * and updates are noted as they pass (task names and locations, drops,
 * warnings, resources: trace_res.c), and a task's name is forgotten a while after its end, so
 * the table holds the live tasks.  A file cut short is read up to its
 * last whole record and marked truncated.  A long read shows its
 * progress on stderr when that is a terminal.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weft/trace_stream.h"
#include "weft/wire.h"
#include "trace_tool.h"

/*
 * How long a task's name outlives its end, in trace time: its last
 * events (a waker dropped after the end) still find it, and it is more
 * than the stream's reorder window, within which they come out.
 */
#define FORGET_NS (1000ull * 1000 * 1000)

/* Task nodes allocated at a time (tt_trace_t.task_chunks): 64 KiB. */
#define TASK_CHUNK 1024

struct tt_ended_s {
	uint64_t at;
	uint64_t id;
};

/*
 * The live tasks' table: open addressing, Robin Hood (a slot's task is
 * never further from its home than one inserted after it that passed
 * it), a slot the id's hash and the node's index: a lookup reads a run
 * of adjacent slots (a cache line, mostly) and touches a node only when
 * the hash matches.  With chains, every lookup walked nodes in cold
 * memory, most of them tasks ended and waiting to be forgotten (the
 * table holds a second of them).  Removal shifts the run back (no
 * tombstones).  Slots stay at most three quarters full (Robin Hood keeps
 * the runs short there; half full took 16 MiB more at a million tasks).
 */
/*
 * Ids in runs of 8 keep their order, in a run of 8 slots (a cache line,
 * the table being aligned): the runtime hands ids out in blocks, and an
 * update's tasks, the events' and the forgotten come mostly in id
 * order, so 8 of them share a line.  The runs are scattered.
 */
static inline uint32_t task_hash(uint64_t id)
{
	return (uint32_t)(((id >> 3) * 0x9e3779b97f4a7c15ull) >> 35) << 3 |
	       (uint32_t)(id & 7);
}

static inline tt_task_t *task_node(const tt_trace_t *t, uint32_t node)
{
	uint32_t i = node - 1;

	return &((tt_task_t *)t->task_chunks[i / TASK_CHUNK])[i % TASK_CHUNK];
}

/*
 * How many tasks in the table have an id with these low bits (at most
 * 254; 255 stays: "maybe").  Ids come in runs, so the counts of the
 * tasks about are a few cache lines, where their slots are spread over
 * the table: a lookup of a task not there (most of them, for a task's
 * events before the update that names it) mostly stops here.
 */
#define TASK_COUNTS ((size_t)1 << 20)

static inline uint8_t *task_count(const tt_trace_t *t, uint64_t id)
{
	return &t->task_counts[id & (TASK_COUNTS - 1)];
}

/* The slot holding @id, or SIZE_MAX. */
static inline size_t task_slot(const tt_trace_t *t, uint64_t id)
{
	size_t mask = t->ntask_slots - 1;
	uint32_t h = task_hash(id);
	size_t i = h & mask;

	if (!*task_count(t, id))
		return SIZE_MAX;

	for (size_t d = 0;; d++, i = (i + 1) & mask) {
		const tt_task_slot_t *s = &t->tasks[i];

		if (!s->node)
			return SIZE_MAX;
		if (s->hash == h && task_node(t, s->node)->id == id)
			return i;
		/* Past where @id would have been put. */
		if (((i - s->hash) & mask) < d)
			return SIZE_MAX;
	}
}

/*
 * tt_task(): a task's events come one after another, most of them
 * before an update names it (then it is not there), and the table's
 * slots of the ~7,000 live tasks are spread over megabytes among those
 * ended.  So its last answers, found or not, are kept by the id's low
 * bits (ids come in runs: a few cache lines), and kept true: a task
 * put in the table or forgotten updates its id's answer.
 */
#define TASK_MEMO 8192

struct tt_task_memo_s {
	uint64_t id;
	tt_task_t *k; /* NULL: not in the table */
};

const tt_task_t *tt_task(const tt_trace_t *t, uint64_t id)
{
	struct tt_task_memo_s *m = &t->task_memo[id & (TASK_MEMO - 1)];
	size_t i;

	if (m->id == id)
		return m->k;
	i = task_slot(t, id);
	m->id = id;
	m->k = i == SIZE_MAX ? NULL : task_node(t, t->tasks[i].node);
	return m->k;
}

/* @id is now @k (NULL: forgotten): its answer in the memo, if kept. */
static inline void task_memo_set(tt_trace_t *t, uint64_t id, tt_task_t *k)
{
	struct tt_task_memo_s *m = &t->task_memo[id & (TASK_MEMO - 1)];

	if (m->id == id)
		m->k = k;
}

/* Puts node @node (its id not in the table) in a slot. */
static void task_place(tt_trace_t *t, tt_task_slot_t cur)
{
	size_t mask = t->ntask_slots - 1, i = cur.hash & mask;

	for (size_t d = 0;; d++, i = (i + 1) & mask) {
		tt_task_slot_t *s = &t->tasks[i];
		size_t sd;

		if (!s->node) {
			*s = cur;
			return;
		}
		sd = (i - s->hash) & mask;
		if (sd < d) {
			tt_task_slot_t x = *s;

			*s = cur;
			cur = x;
			d = sd;
		}
	}
}

/* Empties slot @i, the run after it shifted back. */
static void task_unslot(tt_trace_t *t, size_t i)
{
	size_t mask = t->ntask_slots - 1;

	for (;;) {
		size_t j = (i + 1) & mask;

		if (!t->tasks[j].node || !((j - t->tasks[j].hash) & mask)) {
			t->tasks[i].node = 0;
			return;
		}
		t->tasks[i] = t->tasks[j];
		i = j;
	}
}

/*
 * Hints the cache to the slot where a lookup of @id starts.  The
 * prefetching helpers are always inlined: GCC 12 at -O2 and -O3 finds
 * a function that only prefetches free of side effects (pure) and drops
 * its calls, so that tt_next()'s hints and forget_ended()'s hints to
 * the nodes were not in the binary at all.
 */
static inline __attribute__((always_inline)) void
task_prefetch(const tt_trace_t *t, uint64_t id)
{
	__builtin_prefetch(&t->tasks[task_hash(id) & (t->ntask_slots - 1)]);
}

/*
 * Hints the cache to the node of the first slot whose hash is @id's,
 * where a lookup of @id would look (its slots hinted before: no miss
 * here).  Only a hint: the node is not checked to be @id's.
 */
static inline __attribute__((always_inline)) void
task_prefetch_node(const tt_trace_t *t, uint64_t id)
{
	size_t mask = t->ntask_slots - 1;
	uint32_t h = task_hash(id);
	size_t i = h & mask;

	for (size_t d = 0; d < 8; d++, i = (i + 1) & mask) {
		const tt_task_slot_t *s = &t->tasks[i];

		if (!s->node || ((i - s->hash) & mask) < d)
			return;
		if (s->hash == h) {
			__builtin_prefetch(task_node(t, s->node));
			return;
		}
	}
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

/* Twice the slots once the live tasks fill three quarters of them. */
static void tasks_grow(tt_trace_t *t)
{
	size_t old = t->ntask_slots;
	tt_task_slot_t *s = t->tasks;

	t->ntask_slots = old * 2;
	t->tasks = tt_big_calloc(t->ntask_slots * sizeof(*t->tasks));
	for (size_t i = 0; i < old; i++)
		if (s[i].node)
			task_place(t, s[i]);
	tt_big_free(s, old * sizeof(*s));
}

/*
 * How far ahead task_alloc() hints the cache to the spare node it will
 * hand out: forgotten a while ago, it is cold, and about to be written.
 */
#define SPARE_AHEAD 4

/*
 * A node for a new task, its index plus 1 into *@node: a forgotten one
 * (the first forgotten first: tasks are forgotten and named mostly in
 * id order, so the nodes of tasks with ids close together stay close
 * together, as in the table's slots), else the next of a chunk.  Nodes
 * in chunks: a malloc a task, and their frees at the end, were much of
 * a read's time.
 */
static tt_task_t *task_alloc(tt_trace_t *t, uint32_t *node)
{
	if (t->nspare) {
		size_t mask = t->spare_cap - 1;

		*node = t->spare[t->spare_head];
		t->spare_head = (t->spare_head + 1) & mask;
		t->nspare--;
		if (t->nspare > SPARE_AHEAD)
			__builtin_prefetch(
				task_node(
					t,
					t->spare[(t->spare_head + SPARE_AHEAD) &
						 mask]),
				1);
		return task_node(t, *node);
	}
	if (!t->ntask_chunks || t->task_chunk_used == TASK_CHUNK) {
		if ((uint64_t)(t->ntask_chunks + 1) * TASK_CHUNK >= UINT32_MAX)
			tt_die("out of memory (over 4 G live tasks)");
		t->task_chunks = tt_xrealloc(t->task_chunks,
					     (t->ntask_chunks + 1) *
						     sizeof(*t->task_chunks));
		t->task_chunks[t->ntask_chunks++] =
			tt_xmalloc(TASK_CHUNK * sizeof(tt_task_t));
		t->task_chunk_used = 0;
	}
	*node = (uint32_t)((t->ntask_chunks - 1) * TASK_CHUNK +
			   t->task_chunk_used + 1);
	return &((tt_task_t *)t->task_chunks[t->ntask_chunks -
					     1])[t->task_chunk_used++];
}

/* Node @node (its index plus 1) queued for reuse, after the others. */
static void spare_put(tt_trace_t *t, uint32_t node)
{
	if (t->nspare == t->spare_cap) {
		size_t cap = t->spare_cap ? 2 * t->spare_cap : 1024;
		uint32_t *q = tt_xmalloc(cap * sizeof(*q));

		for (size_t i = 0; i < t->nspare; i++)
			q[i] = t->spare[(t->spare_head + i) &
					(t->spare_cap - 1)];
		free(t->spare);
		t->spare = q;
		t->spare_cap = cap;
		t->spare_head = 0;
	}
	t->spare[(t->spare_head + t->nspare++) & (t->spare_cap - 1)] = node;
}

static void task_forget(tt_trace_t *t, uint64_t id)
{
	size_t i = task_slot(t, id);
	uint32_t node;
	tt_task_t *k;

	if (i == SIZE_MAX)
		return;
	node = t->tasks[i].node;
	k = task_node(t, node);
	if (k->name[0]) {
		/* Its name, for a label at the end (tt_task_label_warned()). */
		struct tt_gone_name_s *g =
			&t->gone_names[t->gone_next++ % TT_GONE_NAMES];

		g->id = id;
		snprintf(g->name, sizeof(g->name), "%s", k->name);
	}
	task_unslot(t, i);
	tt__task_strings_free(k, OWN_NAME | OWN_FILE | OWN_PARKED);
	task_memo_set(t, id, NULL);
	if (*task_count(t, id) != UINT8_MAX)
		(*task_count(t, id))--;
	spare_put(t, node);
	t->live_tasks--;
}

/* @id ended at @at: forgotten once the events reach @at + FORGET_NS. */
static void task_ended(tt_trace_t *t, uint64_t id, uint64_t at)
{
	if (t->ended_len == t->ended_cap) {
		/* A power of two: the ring's index is a mask, not a
		 * division (this runs for every task). */
		size_t cap = t->ended_cap ? 2 * t->ended_cap : 1024;
		struct tt_ended_s *e = tt_xmalloc(cap * sizeof(*e));

		for (size_t i = 0; i < t->ended_len; i++)
			e[i] = t->ended[(t->ended_head + i) &
					(t->ended_cap - 1)];
		free(t->ended);
		t->ended = e;
		t->ended_cap = cap;
		t->ended_head = 0;
	}
	t->ended[(t->ended_head + t->ended_len++) & (t->ended_cap - 1)] =
		(struct tt_ended_s){ .at = at, .id = id };
	t->forget_at = t->ended[t->ended_head].at + FORGET_NS;
}

/*
 * How far ahead forget_ended() hints the cache to the slots it will
 * look up (FORGET_SLOTS), then to their nodes (FORGET_NODES, their
 * slots in the cache by then): the ended tasks' slots and nodes were
 * last touched a second of trace before, and are out of the cache; the
 * node's id is read to confirm the slot, and its strings freed.
 */
#define FORGET_SLOTS 16
#define FORGET_NODES 8

static void forget_ended(tt_trace_t *t, uint64_t now)
{
	size_t mask = t->ended_cap - 1;

	while (t->ended_len) {
		struct tt_ended_s *e = &t->ended[t->ended_head];

		if (e->at + FORGET_NS > now) {
			t->forget_at = e->at + FORGET_NS;
			return;
		}
		if (t->ended_len > FORGET_SLOTS)
			task_prefetch(
				t,
				t->ended[(t->ended_head + FORGET_SLOTS) & mask]
					.id);
		if (t->ended_len > FORGET_NODES)
			task_prefetch_node(
				t,
				t->ended[(t->ended_head + FORGET_NODES) & mask]
					.id);
		task_forget(t, e->id);
		t->ended_head = (t->ended_head + 1) & mask;
		t->ended_len--;
	}
}

/* Every record says where the task is parked (empty in older files). */
static void parked_note(tt_trace_t *t, tt_task_t *k,
			const weft_wire_task_brief_t *m)
{
	if (k->parked_line == m->parked_line && k->parked_file &&
	    !strncmp(k->parked_file, m->parked_file ? m->parked_file : "",
		     m->parked_len) &&
	    !k->parked_file[m->parked_len])
		return;
	tt__task_strings_free(k, OWN_PARKED);
	k->parked_file = m->parked_line ?
				 tt__intern(t, m->parked_file, m->parked_len,
					    &k->owned, OWN_PARKED) :
				 NULL;
	k->parked_line = m->parked_line;
}

static void task_note(tt_trace_t *t, const weft_wire_task_brief_t *m)
{
	size_t i = task_slot(t, m->id);
	tt_task_t *k = i == SIZE_MAX ? NULL : task_node(t, t->tasks[i].node);

	if (!k) {
		uint32_t node;

		if (4 * (t->live_tasks + 1) > 3 * t->ntask_slots)
			tasks_grow(t);
		k = task_alloc(t, &node);
		memset(k, 0, sizeof(*k));
		k->id = m->id;
		k->node = node;
		task_place(t, (tt_task_slot_t){ .hash = task_hash(m->id),
						.node = node });
		task_memo_set(t, m->id, k);
		if (*task_count(t, m->id) != UINT8_MAX)
			(*task_count(t, m->id))++;
		t->ntasks++;
		t->live_tasks++;
		if (m->finished_ns)
			task_ended(t, m->id, m->finished_ns);
	} else {
		parked_note(t, k, m);
		if (k->name[0] || !m->name_len)
			return; /* the first name seen stays */
		tt__task_strings_free(k, OWN_NAME | OWN_FILE);
	}
	k->name = tt__intern(t, m->name, m->name_len, &k->owned, OWN_NAME);
	k->file = tt__intern(t, m->file, m->file_len, &k->owned, OWN_FILE);
	k->line = m->line;
	if (!k->parked_file)
		parked_note(t, k, m);
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

/* worker_drops and off_cpu for workers below @n, the new ones zeroed. */
static void workers_fit(tt_trace_t *t, unsigned n)
{
	unsigned cap = t->nworker_cap ? 2 * t->nworker_cap : 64;

	if (n <= t->nworker_cap)
		return;
	if (cap < n)
		cap = n;
	t->worker_drops =
		tt_xrealloc(t->worker_drops, cap * sizeof(*t->worker_drops));
	t->off_cpu = tt_xrealloc(t->off_cpu, cap * sizeof(*t->off_cpu));
	memset(&t->worker_drops[t->nworker_cap], 0,
	       (cap - t->nworker_cap) * sizeof(*t->worker_drops));
	memset(&t->off_cpu[t->nworker_cap], 0,
	       (cap - t->nworker_cap) * sizeof(*t->off_cpu));
	t->nworker_cap = cap;
}

static void off_cpu_note(tt_trace_t *t, unsigned i, uint64_t ns, uint64_t at)
{
	struct tt_off_cpu_s *o = &t->off_cpu[i];

	if (i + 1 > t->noff_cpu)
		t->noff_cpu = i + 1;
	if (!o->seen || ns < o->last) {
		/* The first reading, or another thread's: from here. */
		o->before += o->last - o->first;
		o->first = ns;
		if (!o->seen)
			o->first_at = at;
		o->seen = true;
	}
	o->last = ns;
	o->last_at = at;
}

/* Tasks of an update read ahead of the one noted (a power of two). */
#define NOTE_AHEAD 16

static void update_note(tt_trace_t *t, const Weft__V1__Frame *f)
{
	const Weft__V1__Update *u = f->update;
	weft_wire_task_brief_t q[NOTE_AHEAD];
	weft_trace_tasks_t ti;
	size_t head = 0, n = 0;
	bool more = true;

	/* Lean or not (tt_open_opts()): the same tasks, in order; of each,
	 * only what the model keeps read (not its figures).  Read
	 * NOTE_AHEAD ahead of the one noted: each one's slots hinted to
	 * the cache as it is read, its node half way (task_prefetch_node():
	 * the slots there by then), where each lookup was a miss or two in
	 * a table of megabytes.  Only hints: the tasks noted in the same
	 * order, each against the table as it is then. */
	weft_trace_stream_tasks(t->stream, f, &ti);
	for (;;) {
		while (more && n < NOTE_AHEAD) {
			weft_wire_task_brief_t *b =
				&q[(head + n) & (NOTE_AHEAD - 1)];

			if (!(more = weft_trace_tasks_next_brief(&ti, b)))
				break;
			task_prefetch(t, b->id);
			if (++n > NOTE_AHEAD / 2)
				task_prefetch_node(
					t, q[(head + n - 1 - NOTE_AHEAD / 2) &
					     (NOTE_AHEAD - 1)]
						   .id);
		}
		if (!n)
			break;
		task_note(t, &q[head]);
		head = (head + 1) & (NOTE_AHEAD - 1);
		n--;
	}
	for (size_t i = 0; i < u->n_resources; i++)
		tt_res_note(&t->res, u->resources[i]);
	if (u->stats) {
		t->events_dropped = u->stats->events_dropped;
		t->tasks_end_unseen = u->stats->tasks_end_unseen;
		if (u->stats->workers > t->workers)
			t->workers = u->stats->workers;
	}
	for (size_t i = 0; i < u->n_workers; i++) {
		const Weft__V1__Worker *w = u->workers[i];

		/* The runtime's bound: a larger index is no worker. */
		if (w->index >= 4096)
			continue;
		workers_fit(t, w->index + 1);
		t->worker_drops[w->index] = w->events_dropped;
		if (w->index + 1 > t->nworker_drops)
			t->nworker_drops = w->index + 1;
		/* 0: not read; without stats, no time to put it at. */
		if (w->off_cpu_ns && u->stats)
			off_cpu_note(t, w->index, w->off_cpu_ns,
				     u->stats->now_ns);
	}
	tt_warnings_note(t, u);
}

void tt_open(tt_trace_t *t, const char *path, bool file_order)
{
	tt_open_opts(t, path, file_order, true);
}

void tt_open_opts(tt_trace_t *t, const char *path, bool file_order,
		  bool lean_updates)
{
	/* Lean: the verbs read batches' events, never their columns; and,
	 * unless a verb writes Updates out again (slice), Updates' tasks
	 * one at a time from their bytes (tt_tasks()). */
	weft_trace_stream_opts_t o = { .file_order = file_order,
				       .lean = true,
				       .lean_updates = lean_updates };
	int rc;

	memset(t, 0, sizeof(*t));
	t->path = path;
	t->ntask_slots = 8192;
	t->tasks = tt_big_calloc(t->ntask_slots * sizeof(*t->tasks));
	t->task_memo = tt_big_calloc(TASK_MEMO * sizeof(*t->task_memo));
	t->task_counts = tt_big_calloc(TASK_COUNTS);
	t->gone_names = tt_xmalloc(TT_GONE_NAMES * sizeof(*t->gone_names));
	memset(t->gone_names, 0, TT_GONE_NAMES * sizeof(*t->gone_names));
	rc = weft_trace_stream_open(&t->stream, path, &o);
	if (rc)
		tt_die("%s: %s", path, strerror(-rc));
	t->progress_start = weft_wire_now_ns();
	tt_heap_huge_init(t);
}

/*
 * Progress on stderr, when that is a terminal and the read has run for
 * a second: how far through the file, the events' rate, the time left.
 * Looked at every 64 Ki items (@items more now: frames, events); drawn
 * at most 5 times a second.
 */
static void progress(tt_trace_t *t, bool done, size_t items)
{
	uint64_t now, read, total, was = t->progress_items;
	double secs, rate, left;

	if (done) {
		if (t->progress_shown)
			fputs("\r\033[K", stderr);
		t->progress_shown = false;
		return;
	}
	t->progress_items += items;
	if ((was ^ t->progress_items) < 0x10000)
		return;
	now = weft_wire_now_ns();
	if (now - t->progress_start < 1000000000ull ||
	    now - t->progress_at < 200000000ull || !isatty(STDERR_FILENO))
		return;
	t->progress_at = now;
	weft_trace_stream_progress(t->stream, &read, &total);
	secs = (double)(now - t->progress_start) / 1e9;
	rate = (double)t->nev / secs;
	left = read && total > read ? secs * (double)(total - read) /
					      (double)read :
				      0;
	fprintf(stderr,
		"\rweft-trace: %s: %3.0f%%  %.0f of %.0f MB  %.1f M events/s  "
		"%.0f s left\033[K",
		t->path, total ? 100.0 * (double)read / (double)total : 0.0,
		(double)read / 1e6, (double)total / 1e6, rate / 1e6, left);
	t->progress_shown = true;
}

/* A frame as it passes: the header, an update, a batch's bytes. */
static void frame_note(tt_trace_t *t, const weft_trace_item_t *it)
{
	const Weft__V1__Frame *f = it->frame;

	t->frames++;
	t->bytes = it->offset + it->size;
	if (t->on_frame)
		t->on_frame(t->frame_ctx, f);
	switch (f->body_case) {
	case WEFT__V1__FRAME__BODY_HEADER:
		if (t->frames == 1)
			header_note(t, f->header);
		break;
	case WEFT__V1__FRAME__BODY_UPDATE:
		t->updates++;
		update_note(t, f);
		break;
	case WEFT__V1__FRAME__BODY_EVENTS:
		t->batches++;
		t->event_bytes += it->size;
		break;
	default:
		t->others++;
		break;
	}
}

void tt_tasks(tt_trace_t *t, const Weft__V1__Frame *f, weft_trace_tasks_t *it)
{
	weft_trace_stream_tasks(t->stream, f, it);
}

/*
 * A SPAWN naming its site: the task named by it, if the site is met
 * and the task not yet named.  A task born and finished between two
 * updates has a record without its site (the probe leaves it out: its
 * SPAWN says it), so that an audit's flood of 400,000 timer tasks had
 * 143,000 tasks unnamed ("task 303623 ?:0" among the longest polls).
 * Out of line: one a task.
 */
static __attribute__((noinline)) void spawn_note(tt_trace_t *t,
						 const weft_event_t *ev)
{
	const weft_trace_reader_t *r = weft_trace_stream_reader(t->stream);
	const weft_wire_site_t *site =
		r ? weft_wire_sites_get(&r->sites,
					(uint32_t)(ev->a2 >>
						   WEFT_SPAWN_SITE_SHIFT)) :
		    NULL;
	const tt_task_t *k = tt_task(t, ev->task);
	weft_wire_task_brief_t m = { .id = ev->task };

	if (!site || !site->name || (k && k->name[0]))
		return;
	m.name = site->name;
	m.name_len = strlen(site->name);
	m.file = site->file ? site->file : "";
	m.file_len = strlen(m.file);
	m.line = site->line;
	if (!k) {
		task_note(t, &m);
		return;
	}
	/* Named here alone: where it is parked stays as its records say. */
	tt_task_t *w = (tt_task_t *)k;

	tt__task_strings_free(w, OWN_NAME | OWN_FILE);
	w->name = tt__intern(t, m.name, m.name_len, &w->owned, OWN_NAME);
	w->file = tt__intern(t, m.file, m.file_len, &w->owned, OWN_FILE);
	w->line = m.line;
}

/* An event handed out: what the model notes of each. */
static inline void event_note(tt_trace_t *t, const weft_event_t *ev)
{
	if (!t->nev++)
		t->first_ts = t->min_ts = ev->ts;
	if (ev->ts > t->last_ts)
		t->last_ts = ev->ts;
	if (ev->ts < t->min_ts)
		t->min_ts = ev->ts;
	if (ev->kind == WEFT_EV_COMPLETE && ev->task)
		task_ended(t, ev->task, ev->ts);
	else if (ev->kind == WEFT_EV_SPAWN && ev->a2 >> WEFT_SPAWN_SITE_SHIFT &&
		 ev->task)
		spawn_note(t, ev);
	/* forget_at: the first ended task's time to go, kept beside the
	 * ring, so that an event with nothing to forget makes no call. */
	if (t->ended_len && t->forget_at <= ev->ts)
		forget_ended(t, ev->ts);
}

/*
 * The stream's next block of events into t->blk, the frames before it
 * noted; false at the end (an error dies).  The stream hands out events
 * in blocks (weft_trace_stream_next_events()): the same events in the
 * same order, between the same frames, as one at a time.
 */
static bool next_block(tt_trace_t *t)
{
	weft_trace_item_t it;
	const weft_event_t *ev;
	size_t n;
	int rc;

	t->blk_i = t->blk_n = 0;
	while ((rc = weft_trace_stream_next_events(t->stream, &it, &ev,
						   &n)) == 1) {
		progress(t, false, n ? n : 1);
		tt_heap_advise(t);
		if (it.kind == WEFT_TRACE_ITEM_FRAME) {
			frame_note(t, &it);
			continue;
		}
		t->blk = ev;
		t->blk_n = n;
		return true;
	}
	progress(t, true, 0);
	if (rc < 0) {
		uint64_t at = weft_trace_stream_error_offset(t->stream);

		tt_die("%s: %s (record at byte %llu)", t->path,
		       weft_trace_reader_strerror(rc), (unsigned long long)at);
	}
	if (!t->frames) {
		struct stat st;

		if (stat(t->path, &st) || !st.st_size)
			tt_die("%s: empty file, not a weft trace", t->path);
		tt_die("%s: no whole record in its %lld bytes, not a weft "
		       "trace (or cut inside its first record)",
		       t->path, (long long)st.st_size);
	}
	t->truncated = weft_trace_stream_reader(t->stream)->truncated;
	t->skipped = weft_trace_stream_reader(t->stream)->skipped;
	t->skips = weft_trace_stream_reader(t->stream)->skips;
	t->first_skip = weft_trace_stream_reader(t->stream)->first_skip;
	t->late = weft_trace_stream_late(t->stream);
	return false;
}

/*
 * For a verb that looks up each event's task (tt_trace_t.prefetch_tasks):
 * the tasks of the events to come in the block hinted to the cache,
 * their slots PREFETCH_SLOT ahead and their nodes PREFETCH_NODE ahead
 * (task_prefetch_node(): the slots there by then), where each lookup
 * was a miss or two.  The node is not read ahead (a lookup there, to
 * fill the memo, waited for the node's line where the hint does not).
 */
#define PREFETCH_NODE 8
#define PREFETCH_SLOT 16

static inline __attribute__((always_inline)) void prefetch_tasks(tt_trace_t *t)
{
	size_t i = t->blk_i;

	if (i + PREFETCH_SLOT < t->blk_n && t->blk[i + PREFETCH_SLOT].task) {
		uint64_t id = t->blk[i + PREFETCH_SLOT].task;

		task_prefetch(t, id);
		__builtin_prefetch(task_count(t, id));
		__builtin_prefetch(&t->task_memo[id & (TASK_MEMO - 1)]);
	}
	if (i + PREFETCH_NODE < t->blk_n && t->blk[i + PREFETCH_NODE].task)
		task_prefetch_node(t, t->blk[i + PREFETCH_NODE].task);
}

bool tt_next(tt_trace_t *t, weft_event_t *ev)
{
	if (t->blk_i == t->blk_n && !next_block(t))
		return false;
	if (t->prefetch_tasks)
		prefetch_tasks(t);
	*ev = t->blk[t->blk_i++];
	event_note(t, ev);
	return true;
}

void tt_drain(tt_trace_t *t)
{
	do {
		for (; t->blk_i < t->blk_n; t->blk_i++)
			event_note(t, &t->blk[t->blk_i]);
	} while (next_block(t));
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
	for (size_t i = 0; i < t->ntask_slots; i++)
		if (t->tasks[i].node)
			tt__task_strings_free(task_node(t, t->tasks[i].node),
					      OWN_NAME | OWN_FILE | OWN_PARKED);
	for (size_t i = 0; i < t->ntask_chunks; i++)
		free(t->task_chunks[i]);
	free(t->task_chunks);
	for (size_t i = 0; i < t->strs_cap; i++)
		free(t->strs[i]);
	free(t->strs);
	tt_big_free(t->tasks, t->ntask_slots * sizeof(*t->tasks));
	tt_big_free(t->task_memo, TASK_MEMO * sizeof(*t->task_memo));
	tt_big_free(t->task_counts, TASK_COUNTS);
	free(t->ended);
	free(t->gone_names);
	free(t->spare);
	free(t->worker_drops);
	free(t->off_cpu);
	tt_res_free(&t->res);
	for (size_t i = 0; i < t->nkept; i++)
		free(t->warnings[i].detail), free(t->warnings[i].label);
	free(t->warnings);
	free(t->process);
	free(t->cmdline);
	free(t->host);
	free(t->clock);
	/*
	 * Said whatever the verb prints (its figures lack those records),
	 * and wherever it stopped reading: at the end, or at a time it was
	 * after (tasks --at).
	 */
	if (t->stream && !t->skips_said) {
		const weft_trace_reader_t *r =
			weft_trace_stream_reader(t->stream);

		if (r->skips)
			fprintf(stderr,
				"weft-trace: %s: %llu bytes of bad records "
				"skipped in %llu place%s, the first at byte "
				"%llu\n",
				t->path, (unsigned long long)r->skipped,
				(unsigned long long)r->skips,
				r->skips == 1 ? "" : "s",
				(unsigned long long)r->first_skip);
	}
	weft_trace_stream_close(t->stream);
}
