/* SPDX-License-Identifier: MIT */
/*
 * weft-trace's memory (trace_tool.h): allocations that end the program
 * on failure, big zeroed arrays in huge pages, and malloc's heap in huge
 * pages for a read.
 */
#include <limits.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trace_tool.h"

void tt_die(const char *fmt, ...)
{
	va_list ap;

	fputs("weft-trace: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(TT_EXIT_BAD_INPUT);
}

void *tt_xrealloc(void *p, size_t n)
{
	if (n == 0)
		tt_die("internal error: zero-sized allocation");
	p = realloc(p, n);
	if (!p) {
		fputs("weft-trace: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

void *tt_xmalloc(size_t n)
{
	return tt_xrealloc(NULL, n);
}

char *tt_xstrdup(const char *s)
{
	size_t n = strlen(s ? s : "") + 1;
	char *p = tt_xmalloc(n);

	memcpy(p, s ? s : "", n);
	return p;
}

#define BIG_PAGE ((size_t)2 << 20)

void *tt_big_calloc(size_t n)
{
	size_t len, head;
	uint8_t *p;
	void *q;

	if (n < BIG_PAGE) {
		q = calloc(1, n);
		if (!q)
			tt_die("out of memory");
		return q;
	}
	/* Aligned to a huge page: mapped a page larger, the ends given
	 * back. */
	len = (n + BIG_PAGE - 1) & ~(BIG_PAGE - 1);
	p = mmap(NULL, len + BIG_PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		tt_die("out of memory");
	head = (BIG_PAGE - ((uintptr_t)p & (BIG_PAGE - 1))) & (BIG_PAGE - 1);
	if (head)
		munmap(p, head);
	if (BIG_PAGE - head)
		munmap(p + head + len, BIG_PAGE - head);
	p += head;
	/* A hint: without it (THP off), 4 KiB pages as before. */
	(void)madvise(p, len, MADV_HUGEPAGE);
	return p;
}

/*
 * malloc's heap in transparent huge pages.  A read's first touches of
 * its memory (the stream's reorder window, stats' durations, the ended
 * tasks' ring: 100-200 MB) were 4 KiB page faults, on a VM a tenth or
 * more of the CPU time; glibc puts its heap in huge pages only when
 * told by GLIBC_TUNABLES.  So: every block large or small from the heap
 * (no mapping a block, each one's pages faulted afresh and given back
 * when freed), the heap never trimmed, grown 64 MiB ahead, and each
 * new stretch of it advised as huge pages (tt_heap_advise(), as the read
 * goes: it sees the heap grown before most of the stretch is touched).
 * A hint: with THP off, 4 KiB pages as before.
 */
void tt_heap_huge_init(tt_trace_t *t)
{
	mallopt(M_MMAP_THRESHOLD, 256 << 20);
	mallopt(M_TRIM_THRESHOLD, INT_MAX);
	mallopt(M_TOP_PAD, 64 << 20);
	t->heap_advised = (uintptr_t)sbrk(0);
}

void tt_heap_advise(tt_trace_t *t)
{
	uintptr_t end = (uintptr_t)sbrk(0), from;
	long pg = 4096;

	if (end <= t->heap_advised || t->heap_advised == (uintptr_t)-1)
		return;
	from = (t->heap_advised + pg - 1) & ~(uintptr_t)(pg - 1);
	end &= ~(uintptr_t)(pg - 1);
	if (end > from)
		(void)madvise((void *)from, end - from, MADV_HUGEPAGE);
	t->heap_advised = end;
}

void tt_big_free(void *p, size_t n)
{
	if (!p)
		return;
	if (n < BIG_PAGE)
		free(p);
	else
		munmap(p, (n + BIG_PAGE - 1) & ~(BIG_PAGE - 1));
}
