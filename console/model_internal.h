/* SPDX-License-Identifier: MIT */
/*
 * Between the model's files only (model.c: the store and the frames;
 * model_check.c: its consistency; model_figures.c; model_timeline.c;
 * model_sort.c: sort and filter; model_retain.c; model_res.c:
 * resources; model_clone.c: copies).
 */
#ifndef WEFT_CONSOLE_MODEL_INTERNAL_H
#define WEFT_CONSOLE_MODEL_INTERNAL_H

#include "console.h"

/* The string table (model.c): interned copies, reference-counted; an
 * entry of its buckets (m->strs). */
struct con_str_s {
	struct con_str_s *next;
	uint32_t hash;
	uint32_t refs;
	/* The spawn site's string (in a model's sites) last found to be
	 * this one, and con_model_sites_gen then: model.c's str_ref_in(). */
	const char *site;
	uint64_t site_gen;
	char s[];
};
/* One more at every con_sites_changed(). */
extern uint64_t con_model_sites_gen;
const char *con_model_str_ref(con_model_t *m, const char *s);
void con_model_str_unref(con_model_t *m, const char *s);
/* The empty string the table hands out uncounted. */
extern const char con_model_empty[];
/* Let go of a task (its strings, its histograms); kept for reuse. */
void con_model_task_free(con_model_t *m, con_task_t *t);
/* Room in workers[] for indices below @n (at most CON_MAX_WORKERS),
 * zeroed; workers[] may move. */
void con_model_workers_reserve(con_model_t *m, uint32_t n);
/* Rebuild the index for ntasks at a load of at most a half. */
void con_model_hash_rebuild(con_model_t *m);
/* tasks[@i] into the index (room left). */
void con_model_hash_put(con_model_t *m, size_t i);
/* The index rebuilt if deleted slots crowd it, or smaller if the tasks
 * fill little of it. */
void con_model_hash_tidy(con_model_t *m);
/* What looking task @id up reads, fetched ahead a stage at a time (0:
 * its slot in the index, 1: its place in tasks[], 2: its record), each
 * stage a few lookups after the one before it. */
/* noipa: having no effect GCC can see, it is pure to it; a caller that
 * could see its body (LTO) would drop the call, prefetches and all. */
#if defined(__clang__)
#define CON_NOIPA __attribute__((noinline))
#else
#define CON_NOIPA __attribute__((noipa))
#endif
CON_NOIPA void con_model_task_prefetch(const con_model_t *m, uint64_t id,
				       int stage);
/* The index's slot holding task @id (it must be there). */
size_t con_model_hash_slot(const con_model_t *m, uint64_t id);
/* A task finished at @at: into the retention heap (model_retain.c). */
void con_model_fin_push(con_model_t *m, uint64_t at, uint64_t id);
/* The retention's entries in order, every finished task among them. */
bool con_model_fin_is_consistent(const con_model_t *m);
/* A zeroed task record from the slabs (model.c). */
con_task_t *con_model_task_alloc(con_model_t *m);
/* Worker records for indices below @n (<= CON_MAX_WORKERS), zeroed; and
 * nworkers raised to @n. */
void con_model_workers_fit(con_model_t *m, uint32_t n);
/* A POLL event into the workers' timeline and its bucket's top polls. */
void con_model_tl_poll(con_model_t *m, const weft_event_t *e);
/* The strip's longest poll's bucket (0: none) and its length, by a
 * scan of every bucket (model_timeline.c; the model keeps tl_worst). */
uint64_t con_model_tl_worst_scan(const con_model_t *m, uint64_t *dur);
/* The list's order (qsort_r; @arg the model): the sort column, then id. */
int con_model_task_cmp(const void *pa, const void *pb, void *arg);

/* con_model_clone()'s resources (model_res.c). */
void con_model_res_clone(con_model_t *dst, const con_model_t *src);

#endif
