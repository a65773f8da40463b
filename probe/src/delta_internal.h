/* SPDX-License-Identifier: MIT */
/*
 * A delta stream (delta.c): the Update records one consumer (a group of
 * the server's clients, the recorder) gets, at its own interval, with
 * its own filter, carrying only what changed.
 *
 * The collector publishes every pass (20 ms, sooner while busy).  A
 * stream folds passes in: the ids of changed tasks and the new warnings
 * accumulate until the interval has passed, then one Update goes out with
 * the tasks' state as the collector knows it then (looked up by id with
 * probe.lock held), the latest stats and workers, and the warnings
 * gathered.  A full pass goes out at once, whatever the interval.
 *
 * Thin records: a task's name, file and line go out once per stream (in
 * a full update, or the first time the stream sends that task with a
 * name or file: the collector may learn them late); its
 * histograms go out in full updates and at most once a second otherwise
 * (a reader keeps what it was sent last; CONTROL_OP_TASK_DETAIL asks for
 * one task's histograms any time), and in a task's last record (once it
 * has finished).  Every other field always goes out.
 *
 * Spawn sites: a task whose name, file, line and state_size are its
 * spawn site's (weft_probe_task_t.site; the site as the collector met
 * it, d->site) leaves all four out of every record, and names its site
 * by id: the site's own record (weft.proto's Site) goes out once per
 * stream, in the first record naming it.  A full update sends them
 * again (a reader may start there: a resync, a new file), as
 * weft__delta_forget() makes the next records do.  A site whose record
 * could not go out (no memory, too big) is sent by the next record that
 * names it.  A task with no site, or named otherwise than its site (or
 * whose site's record cannot be listed), goes by the rule above, its
 * record with no site.  The encoder leaves a named-by-site task's
 * strings out (weft_wire_update_append_sites()): its record is the
 * collector's own, not a copy.
 *
 * Resources: each pass's changed resources are copied into the stream
 * (histograms too: the collector's may change or go before the record
 * is due), by id, the latest copy kept, and all go out in the next
 * record, then are let go; a full pass carries every resource the
 * collector knows, and replaces the copies but for dropped ones, whose
 * last record (dropped_ns set) still goes out once.  So a stream holds
 * at most one copy of each resource changed within an interval.  Names
 * and files always go out (resources are few and change less than
 * tasks); histograms follow the tasks' rule (full, final, once a
 * second, and a dropped resource's last record).  A filter on tasks
 * passes the resources that list one of them (holder, waiter, owner).
 *
 * Updates larger than max_record are split into several records
 * (weft_wire_update_append_split()).
 *
 * Shared records: a stream given the collector's publish (pass_seq)
 * takes its tasks' Task records from a memo of that publish shared by
 * every such stream (weft_wire_update_append_memo()): a task changed in
 * a pass is encoded once however many streams send it then, the others
 * copy the bytes (a record differs by what it leaves out: name, file
 * and line, histograms: each variant encoded once).  The bytes are
 * those the stream would have encoded alone.  So that streams of one
 * interval send in the same passes, a stream due may wait (less than
 * another interval) for the next send of another stream of its
 * interval, and then keeps in step with it; histograms alike (delta.c:
 * due()).  Never sooner than the interval.  The memo is the collector
 * thread's (probe.lock held in the callbacks), allocated while a stream
 * that uses it lives.
 *
 * Threads: a stream belongs to the thread that calls weft__delta_pass()
 * (the collector's, in the subscribers' callbacks, probe.lock held);
 * set-up and teardown happen before and after.
 */
#ifndef WEFT_DELTA_INTERNAL_H
#define WEFT_DELTA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft/probe.h"

#include "weft/wire.h"

/* Publish intervals a stream accepts (a Subscribe's interval_ms is
 * clamped to them); the upper bound stays under the collector's
 * retention of finished tasks (6 s), so a finished task's last state is
 * sent before the collector forgets it. */
#define WEFT_DELTA_INTERVAL_MIN_MS 10u
#define WEFT_DELTA_INTERVAL_MAX_MS 5000u
#define WEFT_DELTA_INTERVAL_DEFAULT_MS 100u
/* Histograms in non-full updates at most this often. */
#define WEFT_DELTA_HIST_EVERY_NS 1000000000ull
/* Limits of a filter (a Subscribe asking for more is refused). */
#define WEFT_DELTA_FILTER_MAX_TASKS 4096u
/* Workers a filter may name: the runtime's bound (indices < this). */
#define WEFT_DELTA_FILTER_MAX_WORKERS 4096u

/* A set of task ids (open addressing, linear probing). */
typedef struct weft_idset_s {
	uint64_t *slot; /* 0: empty (task ids are never 0) */
	size_t cap;     /* power of two, or 0 */
	size_t n;
} weft_idset_t;

/* A resource's copy, waiting for the stream's next record. */
typedef struct weft_delta_res_s {
	weft_probe_resource_t r; /* wait_hist, hold_hist point into hist */
	weft_hist_t hist[2];
	bool has_hist[2]; /* the collector's had them */
} weft_delta_res_t;

/* What a consumer wants.  Empty lists mean everything. */
typedef struct weft_delta_filter_s {
	uint64_t *tasks; /* sorted, owned */
	size_t ntasks;
	/* Bit i % 64 of word i / 64: worker i, for the nwords words up to
	 * the highest worker named (owned); none: every worker. */
	uint64_t *workers;
	size_t nwords;
	bool other_threads; /* events of threads that are not workers */
	uint64_t kinds;     /* bit k: event kind k; 0: every kind */
} weft_delta_filter_t;

typedef struct weft_delta_s {
	/* public, set before the first pass */
	uint64_t interval_ns; /* 0: every pass */
	size_t max_record;    /* 0: WEFT_WIRE_MAX_RECORD */
	weft_delta_filter_t filter;
	/* The last pass (a recording stops): due whatever the interval,
	 * every task with its histograms. */
	bool final;
	/* The collector's record of task @id now, or NULL (called in
	 * weft__delta_pass(), probe.lock held). */
	const weft_probe_task_t *(*lookup)(uint64_t id);
	/* Optional: fetches what lookup(@id) will read (a few ids ahead). */
	void (*lookup_ahead)(uint64_t id);
	/* Spawn site @id as the collector met it, into *@out; false when
	 * not met (called in weft__delta_pass(), probe.lock held).  NULL:
	 * records carry their tasks' names (no sites). */
	bool (*site)(uint32_t id, weft_wire_site_t *out);
	/* Await site @id as the collector met it (its Site: id
	 * WEFT_WIRE_AWAIT_SITE_BASE + @id, file and line), into *@out;
	 * false when not met.  await_known: how many the collector knows,
	 * and (*@slots) the ids to look at, 1 .. *@slots - 1.  Both NULL:
	 * no await sites in the records (called as site is). */
	bool (*await_site)(uint32_t id, weft_wire_site_t *out);
	uint32_t (*await_known)(uint32_t *slots);
	/* Set before each pass: the collector's publish
	 * (weft__sub_publish_seq()), 0: none (records encoded alone). */
	uint64_t pass_seq;
	/* Out: what the warnings of the last full record took in it, which
	 * are its own and no task's (a recorder that sizes its next full
	 * update by this one's per task leaves them out: recorder.c). */
	size_t full_warn_bytes;
	/* private */
	bool memo_user;     /* holds a reference to the shared memo */
	weft_idset_t dirty; /* changed since the last record */
	weft_idset_t known; /* name and file already sent */
	weft_idset_t sites_sent;    /* spawn and await sites sent (ids) */
	uint32_t awaits_sent;       /* await_known() when they were all sent */
	uint32_t site_last_id;      /* site_names()'s last look, this pass */
	weft_wire_site_t site_last; /* what it found */
	bool site_last_ok;          /* found: site_last is the site's */
	bool site_last_sent;        /* and in sites_sent */
	weft_wire_site_t *site_out; /* the record's sites, nsite_out */
	size_t nsite_out, site_out_cap;
	weft_probe_warning_t *warn;
	size_t nwarn, warn_cap;
	uint64_t last_emit_ns, last_hist_ns, prev_now_ns;
	bool emitted;
	/* dirty's ids, as first added (dirty.n of them) */
	uint64_t *dirty_ids;
	size_t dirty_ids_cap;
	const weft_probe_task_t **tasks; /* scratch */
	weft_probe_task_t *copies;       /* scratch: the thinned tasks */
	size_t tasks_cap;
	weft_delta_res_t *res; /* resources changed since the last record */
	size_t nres, res_cap;
	uint32_t *res_index; /* by id: index + 1 into res; 0 empty */
	size_t res_index_cap;
	const weft_probe_resource_t **res_out; /* scratch, res_cap long */
	weft_probe_worker_t *workers;          /* scratch, workers_cap long */
	size_t workers_cap;
	weft_event_t *events; /* scratch: filtered events */
	size_t events_cap;
} weft_delta_t;

/* A task id's home slot in a set of @cap slots (a power of two). */
static inline size_t weft__idset_hash(uint64_t id, size_t cap)
{
	return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

/* delta_idset.c: sets of ids */
bool weft__idset_has(const weft_idset_t *s, uint64_t id);
int weft__idset_add(weft_idset_t *s, uint64_t id);
void weft__idset_remove(weft_idset_t *s, uint64_t id);
void weft__idset_clear(weft_idset_t *s);
void weft__idset_fini(weft_idset_t *s);

/* delta.c: filters */
int weft__delta_filter_set(weft_delta_filter_t *f, const Weft__V1__Filter *m);
void weft__delta_filter_fini(weft_delta_filter_t *f);
bool weft__delta_filter_equal(const weft_delta_filter_t *a,
			      const weft_delta_filter_t *b);
int weft__delta_filter_copy(weft_delta_filter_t *dst,
			    const weft_delta_filter_t *src);
bool weft__delta_filter_event(const weft_delta_filter_t *f,
			      const weft_event_t *ev);

/* delta.c: streams */
void weft__delta_init(weft_delta_t *d);
void weft__delta_fini(weft_delta_t *d);
int weft__delta_pass(weft_delta_t *d, const weft_probe_update_t *u,
		     weft_wire_buf_t *out, bool *full);
void weft__delta_forget(weft_delta_t *d);
const weft_event_t *weft__delta_events(weft_delta_t *d, const weft_event_t *ev,
				       size_t *n);

/* delta_warn.c: what @r's warnings take in its record (a record of them
 * alone less an empty one); 0 if that cannot be encoded. */
size_t weft__delta_warn_bytes(const weft_delta_t *d,
			      const weft_probe_update_t *r);

#endif /* WEFT_DELTA_INTERNAL_H */
