/* SPDX-License-Identifier: MIT */
/*
 * Named wrappers over <stdatomic.h>, so that every access says its order.
 * Each use of an acquire, release or fence carries a comment at the call
 * site saying what it orders and what it pairs with.
 */
#ifndef WEFT_ATOMIC_INTERNAL_H
#define WEFT_ATOMIC_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

/*
 * Thread-locals on hot paths: initial-exec, so that libweft.so reaches them
 * with one %fs-relative load instead of a call to __tls_get_addr.  (A
 * library using initial-exec TLS must be loaded at start-up or fit in the
 * static TLS surplus when dlopen()ed; ours are a few bytes.)
 */
#define WEFT_TLS _Thread_local __attribute__((tls_model("initial-exec")))

#define WEFT_CACHELINE 64
#define weft__cacheline_aligned _Alignas(WEFT_CACHELINE)

#define load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define load_seqcst(p) atomic_load_explicit((p), memory_order_seq_cst)
#define store_relaxed(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define store_release(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define store_seqcst(p, v) atomic_store_explicit((p), (v), memory_order_seq_cst)

#define fetch_add_relaxed(p, v)                                                \
	atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define fetch_add_acq_rel(p, v)                                                \
	atomic_fetch_add_explicit((p), (v), memory_order_acq_rel)
#define fetch_add_seqcst(p, v)                                                 \
	atomic_fetch_add_explicit((p), (v), memory_order_seq_cst)
#define fetch_sub_relaxed(p, v)                                                \
	atomic_fetch_sub_explicit((p), (v), memory_order_relaxed)
#define fetch_sub_acq_rel(p, v)                                                \
	atomic_fetch_sub_explicit((p), (v), memory_order_acq_rel)
#define fetch_sub_seqcst(p, v)                                                 \
	atomic_fetch_sub_explicit((p), (v), memory_order_seq_cst)
#define fetch_or_acq_rel(p, v)                                                 \
	atomic_fetch_or_explicit((p), (v), memory_order_acq_rel)
#define fetch_and_acq_rel(p, v)                                                \
	atomic_fetch_and_explicit((p), (v), memory_order_acq_rel)
#define exchange_acq_rel(p, v)                                                 \
	atomic_exchange_explicit((p), (v), memory_order_acq_rel)
#define exchange_seqcst(p, v)                                                  \
	atomic_exchange_explicit((p), (v), memory_order_seq_cst)

/* CAS; on failure *expected is updated with the current value. */
#define cas_acq_rel(p, expected, desired)                                      \
	atomic_compare_exchange_weak_explicit((p), (expected), (desired),      \
					      memory_order_acq_rel,            \
					      memory_order_acquire)
#define cas_release(p, expected, desired)                                      \
	atomic_compare_exchange_weak_explicit((p), (expected), (desired),      \
					      memory_order_release,            \
					      memory_order_relaxed)
#define cas_strong_acq_rel(p, expected, desired)                               \
	atomic_compare_exchange_strong_explicit((p), (expected), (desired),    \
						memory_order_acq_rel,          \
						memory_order_acquire)
#define cas_seqcst(p, expected, desired)                                       \
	atomic_compare_exchange_weak_explicit((p), (expected), (desired),      \
					      memory_order_seq_cst,            \
					      memory_order_seq_cst)

#define fence_seqcst() atomic_thread_fence(memory_order_seq_cst)
#define fence_acquire() atomic_thread_fence(memory_order_acquire)
#define fence_release() atomic_thread_fence(memory_order_release)
/*
 * A full barrier right after a locked RMW: none is needed on x86, where
 * the RMW (lock cmpxchg, xchg, lock xadd) already is one; a seq_cst
 * fence elsewhere.  Only for store-buffer patterns where the RMW is on a
 * third location: state the RMW it follows at each use.
 */
#if defined(__x86_64__) || defined(__i386__)
#define fence_after_rmw() atomic_signal_fence(memory_order_seq_cst)
#else
#define fence_after_rmw() fence_seqcst()
#endif

/*
 * A counter with a single writer: a relaxed load and a relaxed store, no
 * read-modify-write (a plain add on x86-64).  Readers on other threads see
 * whole values.  Only the owning thread may call counter_add().
 */
typedef _Atomic uint64_t weft_counter_t;

static inline void counter_add(weft_counter_t *c, uint64_t n)
{
	store_relaxed(c, load_relaxed(c) + n);
}

static inline void counter_inc(weft_counter_t *c)
{
	counter_add(c, 1);
}

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

#endif /* WEFT_ATOMIC_INTERNAL_H */
