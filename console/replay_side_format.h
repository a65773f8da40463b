/* SPDX-License-Identifier: MIT */
/*
 * The side index's file format (replay_side.c writes and reads it;
 * replay_cache.c names it in the cache): the header, the chunks and
 * their payloads, the table of contents and its tail, and the hashes
 * that check them and the trace they index.
 */
#ifndef WEFT_CONSOLE_REPLAY_SIDE_FORMAT_H
#define WEFT_CONSOLE_REPLAY_SIDE_FORMAT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define SIDE_MAGIC "WEFTIDX"
#define SIDE_VERSION 2u /* 2: the PATH chunk */
#define SIDE_HEAD 4096  /* the trace's first bytes hashed; and 4 KiB tails */
/* Checkpoints this many times their size apart in the trace (the file
 * about 1/16 of the trace's size), but never more than
 * CON_SIDE_EVERY_MAX apart (a seek reads that much at most: about half
 * a second at the model's speed, whatever the model's size). */
#define CON_SIDE_RATIO 16
#define CON_SIDE_EVERY_MAX (32ull << 20)

enum { CH_RECS = 1, CH_CKPT, CH_MARK, CH_END, CH_PATH, CH_TOC };

#define TOC_MAGIC "WEFTTOC"

typedef struct side_hdr_s {
	char magic[8];
	uint32_t version, pad;
	uint64_t layout, dev, ino, head_hash, head_len;
	uint64_t hash; /* of the bytes before it */
} side_hdr_t;

typedef struct chunk_hdr_s {
	uint32_t type, pad;
	uint64_t len, hash; /* the payload's */
	uint64_t self;      /* of the 24 bytes before */
} chunk_hdr_t;

typedef struct mark_s {
	uint64_t next, covered, skipped, tail_hash, ck_off, ck_len, ck_hash;
} mark_t;

typedef struct end_s {
	uint64_t covered, size, mtime_s, mtime_ns, truncated, skipped;
	/* then the error, NUL-ended ("" for none) */
} end_t;

/* The TOC's payload: this, its records (17 bytes each, as in RECS),
 * its checkpoints (next, off, len, hash: 32 bytes each), the END's
 * error (NUL-ended). */
typedef struct toc_s {
	uint64_t nrec, nck, good_end;
	mark_t mark;
	end_t end;
} toc_t;

/* The file's last bytes: where the TOC chunk's header is. */
typedef struct toc_tail_s {
	char magic[8];
	uint64_t off;
	uint64_t self; /* of the 16 bytes before */
} toc_tail_t;

/* A 64-bit hash of @n bytes (FNV-1a over 8-byte words, then the tail). */
static inline uint64_t hash64(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t w;

	for (; n >= 8; n -= 8, b += 8) {
		memcpy(&w, b, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; n; n--, b++)
		h = (h ^ *b) * 0x100000001b3ull;
	return h ^ (h >> 32);
}

#define HASH0 0xcbf29ce484222325ull

/* The hash of the trace's @len bytes at @off (0 and false when they do
 * not all read). */
static inline bool trace_hash(int fd, uint64_t off, size_t len, uint64_t *h)
{
	uint8_t buf[SIDE_HEAD];

	if (len > sizeof(buf) ||
	    pread(fd, buf, len, (off_t)off) != (ssize_t)len)
		return false;
	*h = hash64(HASH0, buf, len);
	return true;
}

/* The hash of the 4 KiB before @covered (fewer at the start). */
static inline bool tail_hash(int fd, uint64_t covered, uint64_t *h)
{
	uint64_t len = covered < SIDE_HEAD ? covered : SIDE_HEAD;

	return trace_hash(fd, covered - len, (size_t)len, h);
}

#endif
