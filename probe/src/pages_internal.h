/* SPDX-License-Identifier: MIT */
/* Memory the probe writes in bulk, with its pages in place (pages.c). */
#ifndef WEFT_PAGES_INTERNAL_H
#define WEFT_PAGES_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

/*
 * weft__pages_map() - @bytes of zeroed, page-aligned memory, or NULL.
 * @prefault: with its pages in place (see pages.c), for memory written
 * at once and on a fast path; else faulted in as it is first touched.
 * Freed with weft__pages_unmap(p, @bytes).
 */
void *weft__pages_map(size_t bytes, bool prefault);
void weft__pages_unmap(void *p, size_t bytes);
/* Faults in @bytes at @p mapped by weft__pages_map() without prefault,
 * keeping what they hold (MADV_POPULATE_WRITE; nothing before 5.14). */
void weft__pages_populate(void *p, size_t bytes);
/* The huge page size weft__pages_map() uses (2 MiB), or 0 if the kernel
 * offers none. */
size_t weft__pages_huge(void);

#endif /* WEFT_PAGES_INTERNAL_H */
