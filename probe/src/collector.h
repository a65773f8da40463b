/* SPDX-License-Identifier: MIT */
/*
 * What the collector offers the subscribers inside libweft (server*.c,
 * recorder.c) beside the public weft_probe_subscribe(): they are
 * subscribers like any other, and include this header, never
 * collector_internal.h.
 *
 * "In a callback": from a subscriber's on_events/on_update/lookup, on the
 * collector thread with probe.lock held; what these return is valid until
 * the callback returns.  "Any thread": takes probe.lock itself, so never
 * with probe.lock held (lock order: probe.lock before the subscriber's
 * own locks).
 */
#ifndef WEFT_PROBE_COLLECTOR_H
#define WEFT_PROBE_COLLECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "weft/probe.h"

/* In a callback: what the collector knows of task @id, or NULL. */
const weft_probe_task_t *weft__sub_task(uint64_t id);
/* In a callback: fetches what weft__sub_task(@id) will read. */
void weft__sub_task_ahead(uint64_t id);

struct weft_wire_site_s;
/* In a callback: spawn site @id as the collector met it (its SITE and
 * SITE_LOC both), into *@out; false when not met.  The strings are
 * static: they outlive the callback. */
bool weft__sub_site(uint32_t id, struct weft_wire_site_s *out);
/* In a callback: await site @id as the collector met it (AWAIT_SITE), as
 * a Site (id WEFT_WIRE_AWAIT_SITE_BASE + @id, file, line) into *@out;
 * false when not met. */
bool weft__sub_await_site(uint32_t id, struct weft_wire_site_s *out);
/* In a callback: how many await sites the collector met; *@slots: the
 * ids to look at are 1 .. *@slots - 1. */
uint32_t weft__sub_await_known(uint32_t *slots);
/* In a callback: every spawn and await site met, in a new array (free())
 * of *@n; NULL (*@n 0) for none or no memory. */
struct weft_wire_site_s *weft__sub_sites_all(size_t *n);

/*
 * In on_events: the batch @ev..@n as EventBatch records, encoded once for
 * every subscriber that asks (weft__collector_event_records()).  Returns
 * -EINVAL for a batch that is not the one being handed out (encode it
 * yourself), or another error with the whole records before it in *@rec.
 */
int weft__sub_event_records(const weft_event_t *ev, size_t n,
			    const uint8_t **rec, size_t *len);

/*
 * In on_update: which publish of the collector's this is (from 1): the
 * task records stay as they are until the next one (a delta stream's
 * pass_seq: its encoded records are shared with the other streams).
 */
uint64_t weft__sub_publish_seq(void);

/* In a callback: @sub's next update holds every known task.  _ask_:
 * the same from any thread, without probe.lock (the one after, when a
 * pass is under way). */
void weft__sub_want_full(weft_probe_sub_t *sub);
void weft__sub_ask_full(weft_probe_sub_t *sub);

/*
 * In on_update: every warning kept (the newest WARN_KEEP), marked history,
 * in an array the caller frees (NULL and *@n 0 if none or no memory): what
 * a new subscriber's first updates carry, for a reader that takes a full
 * update of its own later (server_stream.c).
 */
weft_probe_warning_t *weft__sub_warnings_kept(size_t *n);

/* In on_update: the subscription it was called for. */
weft_probe_sub_t *weft__sub_current(void);

/*
 * In on_update: the tasks and resources that changed in this pass (what a
 * delta update holds), also when the update handed out is full: for a
 * subscriber that gives the full one to some of its readers and the
 * pass's changes to the others (server_stream.c).
 */
void weft__sub_pass_changes(const weft_probe_task_t *const **tasks,
			    size_t *ntasks,
			    const weft_probe_resource_t *const **res,
			    size_t *nres);

/*
 * The next pass ends a seed under way whole, or makes the seed to come
 * whole (collector_reconcile.c), so that the full updates it publishes
 * name every live task: for a file (a recorder's start and its next
 * file, a flight snapshot), which no pacing helps and which would keep
 * the tasks a partial seed leaves out unnamed for good.  _locked: in a
 * callback (probe.lock held); the other takes probe.lock.
 */
void weft__sub_seed_whole_locked(void);
void weft__sub_seed_whole(void);

/*
 * In on_update: the subscriber takes at most @tasks more tasks of a seed
 * under way in the collector's next pass (collector_reconcile.c: a
 * process of many tasks is seeded over several passes, each pass's
 * seeded tasks a change in the updates).  The least of the subscribers'
 * holds; one that says nothing takes any number.
 */
void weft__sub_seed_room(size_t tasks);

/* In a callback: how many task records the collector holds. */
size_t weft__sub_tasks_held(void);

/* In a callback: the described runtime's workers (0 if none) and when the
 * collector started (the monotonic clock, ns). */
void weft__sub_hello(unsigned *workers, uint64_t *start_ns);

/* Any thread: the described runtime's workers, 0 if none. */
unsigned weft__probe_workers(void);

/* Any thread: the probe clock's description (it changes as it is
 * calibrated), into @buf. */
void weft__probe_clock_text(char *buf, size_t n);

/* Any thread: @fn(task or NULL, @arg) with task @id as the collector knows
 * it, under probe.lock. */
void weft__probe_with_task(uint64_t id,
			   void (*fn)(const weft_probe_task_t *t, void *arg),
			   void *arg);

#endif
