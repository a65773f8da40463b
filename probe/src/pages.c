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
#include <string.h>
#include <sys/mman.h>

#include "pages_internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define HUGE_BYTES ((size_t)2 << 20)

/* 1: huge pages on offer, -1: not, 0: not looked yet. */
static _Atomic int thp_state;

static bool thp_offered(void)
{
	/* Relaxed: any thread may look; all find the same. */
	int s = atomic_load_explicit(&thp_state, memory_order_relaxed);

	if (!s) {
		char buf[128] = "";
		FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled",
				"r");

		if (f) {
			if (!fgets(buf, sizeof(buf), f))
				buf[0] = '\0';
			fclose(f);
		}
		s = strstr(buf, "[always]") || strstr(buf, "[madvise]") ? 1 :
									  -1;
		atomic_store_explicit(&thp_state, s, memory_order_relaxed);
	}
	return s > 0;
}

void *weft__pages_map(size_t bytes, bool prefault)
{
	char *raw, *buf;
	size_t head, tail;

	if (!prefault || bytes < HUGE_BYTES || bytes % HUGE_BYTES ||
	    !thp_offered()) {
		buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS |
				   (prefault ? MAP_POPULATE : 0),
			   -1, 0);
		return buf == MAP_FAILED ? NULL : buf;
	}
	/* Aligned to a huge page: map one more and trim both ends. */
	raw = mmap(NULL, bytes + HUGE_BYTES, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	buf = (char *)(((uintptr_t)raw + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1));
	head = (size_t)(buf - raw);
	tail = HUGE_BYTES - head;
	if (head)
		munmap(raw, head);
	if (tail)
		munmap(buf + bytes, tail);
	(void)madvise(buf, bytes, MADV_HUGEPAGE);
	/* A write a huge page: each is faulted in whole, written for real. */
	for (size_t o = 0; o < bytes; o += HUGE_BYTES)
		((volatile char *)buf)[o] = 0;
	/* Whatever the kernel gave as small pages instead (no huge page
	 * free), at least mapped, as MAP_POPULATE would; older kernels say
	 * EINVAL, and those pages fault on first use. */
	(void)madvise(buf, bytes, MADV_POPULATE_WRITE);
	return buf;
}

void weft__pages_unmap(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes);
}
