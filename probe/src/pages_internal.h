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

#endif /* WEFT_PAGES_INTERNAL_H */
