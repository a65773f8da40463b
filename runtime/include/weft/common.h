/* SPDX-License-Identifier: MIT */
/*
 * Definitions shared by every public weft header: the export macro, the
 * error convention and the version.
 *
 * Error convention: every function that can fail returns an int, 0 on
 * success or a negative errno value; each function documents the values it
 * can return.  Functions named *_try_* return bool.  A call that fails never
 * fires its callback or waker.
 */
#ifndef WEFT_COMMON_H
#define WEFT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#if defined(WEFT_STATIC)
#define WEFT_EXTERN
#elif defined(__GNUC__)
#define WEFT_EXTERN __attribute__((visibility("default")))
#else
#define WEFT_EXTERN
#endif

#include "weft/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * weft_version_string() - the library's version, e.g. "0.1.0".
 *
 * Return: a static string.
 */
WEFT_EXTERN const char *weft_version_string(void);

/**
 * weft_version() - the library's version, as WEFT_VERSION_HEX is the
 * headers': (major << 16) | (minor << 8) | patch.  A program can check
 * that the library it runs with is the one it was built for, or newer.
 */
WEFT_EXTERN unsigned weft_version(void);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COMMON_H */
