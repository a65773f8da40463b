/* SPDX-License-Identifier: MIT */
/*
 * The probe's bulk memory (probe/src/pages.c): mappings prefaulted or
 * not, aligned to a huge page where the kernel offers them, zeroed,
 * writable end to end and freed whole.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "test_helpers.h"

#include "pages_internal.h"

/* Whether the page at @p is mapped (msync says ENOMEM where not). */
static bool page_mapped(const void *p)
{
	return msync((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096,
		     MS_ASYNC) == 0 ||
	       errno != ENOMEM;
}

/*
 * Prefaulted memory (a worker's ring, the collector's pools): zeroed,
 * writable end to end, aligned to a huge page where the kernel offers
 * them with the trimmed ends unmapped (the mapping is exactly the size
 * asked for), and freed whole.  Sizes that are not whole huge pages take
 * the plain path.  Whether huge pages were had is printed, not asserted:
 * a fragmented machine may have none free.
 */
static void test_pages_prefaulted(void **state)
{
	const size_t sizes[] = { 8u << 20, 2u << 20, 256u << 10, 12288 };
	char thp[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	bool offered;

	(void)state;
	if (f) {
		if (!fgets(thp, sizeof(thp), f))
			thp[0] = '\0';
		fclose(f);
	}
	offered = weft__pages_huge() != 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		for (int prefault = 0; prefault < 2; prefault++) {
			unsigned char *p = weft__pages_map(n, prefault);

			assert_non_null(p);
			assert_int_equal((uintptr_t)p % 4096, 0);
			if (prefault && offered && n % (2u << 20) == 0) {
				assert_int_equal((uintptr_t)p % (2u << 20), 0);
				/* Nothing else maps here meanwhile: the
				 * test is alone on its thread. */
				assert_false(page_mapped(p + n));
			}
			for (size_t o = 0; o < n; o += 512)
				assert_int_equal(p[o], 0);
			memset(p, 0xa5, n);
			assert_int_equal(p[n - 1], 0xa5);
			weft__pages_unmap(p, n);
		}
	}
	print_message("transparent huge pages: %s", thp[0] ? thp : "absent\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pages_prefaulted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
