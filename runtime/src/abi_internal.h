/* SPDX-License-Identifier: MIT */
/*
 * The reserved words of the public structs that may grow (weft/common.h,
 * "ABI that can grow").  A caller-filled struct's must be zero: each call
 * that reads one refuses it otherwise (-EINVAL), so that a field a later
 * version gives meaning to is never ignored by an older library.  Used by
 * the runtime and the probe (libweft's own files only).
 */
#ifndef WEFT_ABI_INTERNAL_H
#define WEFT_ABI_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True when the @size bytes of reserved words at @reserved are all zero. */
static inline bool weft__reserved_zero(const uint64_t *reserved, size_t size)
{
	uint64_t any = 0;

	for (size_t i = 0; i < size / sizeof(*reserved); i++)
		any |= reserved[i];
	return any == 0;
}

#endif /* WEFT_ABI_INTERNAL_H */
