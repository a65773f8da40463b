/* SPDX-License-Identifier: MIT */
/*
 * Memory the probe writes in bulk, mapped with its pages already in place:
 * a worker's event ring (written on every poll) and the collector's pools.
 *
 * MAP_POPULATE is not enough everywhere.  On this project's CI guests the
 * kernel maps populated pages without writing them, and the hypervisor
 * backs each 4 KiB page only at its first write from the guest, about 5 us
 * a page: the first trip of a worker round a fresh 8 MiB ring cost 40-115
 * ns an event on top of the 1-4 an event costs afterwards, and nearly the
 * whole of a short run's events are on that first trip (chained_spawn: 4x
 * slower with events, most of it this).  Writing each page up front costs
 * the same faults, 30 ms for 8 MiB, on the thread that maps it.  With
 * transparent huge pages, one fault a 2 MiB page: the same 8 MiB, huge
 * pages written once each, in 0.6 ms.  So: huge pages where the kernel
 * offers them (madvise or always), each written once; elsewhere,
 * MAP_POPULATE as before, which does its job on most machines.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pages_internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define HUGE_BYTES ((size_t)2 << 20)

/* 1: 2 MiB huge pages on offer, -1: not, 0: not looked yet. */
static _Atomic int thp_state;

/* The first line of sysfs file @path into @buf ("" if none). */
static void read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");

	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, (int)size, f))
			buf[0] = '\0';
		fclose(f);
	}
}

size_t weft__pages_huge(void)
{
	/* Relaxed: any thread may look; all find the same. */
	int s = atomic_load_explicit(&thp_state, memory_order_relaxed);

	if (!s) {
		char on[128], size[32];

		read_line("/sys/kernel/mm/transparent_hugepage/enabled", on,
			  sizeof(on));
		/*
		 * 2 MiB only: with 16 or 64 KiB base pages (some aarch64
		 * kernels) a PMD page is 32 or 512 MiB, more than a ring.
		 */
		read_line("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
			  size, sizeof(size));
		s = (strstr(on, "[always]") || strstr(on, "[madvise]")) &&
				    strtoull(size, NULL, 10) == HUGE_BYTES ?
			    1 :
			    -1;
		atomic_store_explicit(&thp_state, s, memory_order_relaxed);
	}
	return s > 0 ? HUGE_BYTES : 0;
}

void *weft__pages_map(size_t bytes, bool prefault)
{
	char *raw, *buf;
	size_t head;

	if (!prefault || bytes < HUGE_BYTES || bytes % HUGE_BYTES ||
	    !weft__pages_huge()) {
		buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS |
				   (prefault ? MAP_POPULATE : 0),
			   -1, 0);
		return buf == MAP_FAILED ? NULL : buf;
	}
	/*
	 * Aligned to a huge page: map one more and trim both ends (the
	 * tail is never empty: head is less than a huge page).
	 */
	raw = mmap(NULL, bytes + HUGE_BYTES, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	buf = (char *)(((uintptr_t)raw + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1));
	head = (size_t)(buf - raw);
	if (head)
		munmap(raw, head);
	munmap(buf + bytes, HUGE_BYTES - head);
	(void)madvise(buf, bytes, MADV_HUGEPAGE);
	/* A write a huge page: each is faulted in whole, written for real. */
	for (size_t o = 0; o < bytes; o += HUGE_BYTES)
		((volatile char *)buf)[o] = 0;
	/*
	 * Whatever the kernel gave as small pages instead (no huge page
	 * free, THP disabled for the process), mapped as MAP_POPULATE would
	 * have; a kernel before 5.14 says EINVAL, and then a write a page
	 * does it (no fault where the huge pages were had).
	 */
	if (madvise(buf, bytes, MADV_POPULATE_WRITE)) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE);

		for (size_t o = 0; o < bytes; o += page)
			((volatile char *)buf)[o] = 0;
	}
	return buf;
}

void weft__pages_populate(void *p, size_t bytes)
{
	/* Not written to: the ring may hold events the collector reads. */
	if (p)
		(void)madvise(p, bytes, MADV_POPULATE_WRITE);
}

void weft__pages_unmap(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes);
}
