/* SPDX-License-Identifier: MIT */
/*
 * Futures and wakers: Rust's poll model, in C.
 *
 * A future is a poll function over caller-owned state.  Polling it returns
 * WEFT_READY when it has finished, or WEFT_PENDING after it has arranged for
 * the waker in the context (weft_cx_waker()) to be woken when polling again
 * can make progress.  A future that returns WEFT_PENDING without arranging a
 * wake-up is never polled again (the probe reports it as a lost waker).
 *
 * A waker is a two-word value: a vtable and a data pointer.  Wakers may be
 * cloned, woken and dropped from any thread.  Each clone must be dropped or
 * consumed by weft_waker_wake() exactly once.
 *
 * Writing a future by hand is a small state machine; the WEFT_ASYNC_BEGIN /
 * WEFT_AWAIT / WEFT_ASYNC_END macros turn a poll function into straight-line
 * code over a state struct (a protothread-style switch on a saved line).
 * Locals do not survive an await: keep everything that must live across one
 * in the state struct.  Each WEFT_AWAIT and WEFT_YIELD also notes where it
 * is (weft_site_t), so that a task parked there can say so.  Example:
 *
 *	struct pinger {
 *		int weft_pc;           // must be zero before the first poll
 *		weft_join_t *child;
 *	};
 *
 *	static weft_poll_t pinger_poll(void *arg, weft_cx_t *cx)
 *	{
 *		struct pinger *p = arg;
 *
 *		WEFT_ASYNC_BEGIN(p);
 *		weft_spawn(NULL, child_poll, &(struct child){ 0 }, &p->child);
 *		WEFT_AWAIT(p, weft_join_poll(p->child, cx, NULL, NULL));
 *		weft_join_drop(p->child);
 *		WEFT_YIELD(p, cx);
 *		WEFT_ASYNC_END(p);
 *	}
 */
#ifndef WEFT_FUTURE_H
#define WEFT_FUTURE_H

#include "weft/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum weft_poll_e {
	WEFT_PENDING = 0,
	WEFT_READY = 1,
} weft_poll_t;

typedef struct weft_cx_s weft_cx_t;
typedef struct weft_waker_s weft_waker_t;
typedef struct weft_waker_vtable_s weft_waker_vtable_t;

/* The poll function of a future; @state is the future's own state. */
typedef weft_poll_t (*weft_poll_cb)(void *state, weft_cx_t *cx);
/* Releases what a future's state owns; called once, when the state dies. */
typedef void (*weft_drop_cb)(void *state);

/*
 * The waker vtable.  @clone returns a new waker for the same target;
 * @wake wakes and consumes one reference; @wake_by_ref wakes without
 * consuming; @drop releases one reference.  All four may be called from
 * any thread, concurrently.  Fixed for good (weft/common.h).
 */
struct weft_waker_vtable_s {
	weft_waker_t (*clone)(const void *data);
	void (*wake)(const void *data);
	void (*wake_by_ref)(const void *data);
	void (*drop)(const void *data);
};

/*
 * A waker.  A zeroed waker (vtable NULL) is empty: waking it does nothing.
 * Fixed for good (weft/common.h).
 */
struct weft_waker_s {
	const weft_waker_vtable_t *vtable;
	const void *data;
};

#define WEFT_WAKER_EMPTY ((weft_waker_t){ NULL, NULL })

/**
 * weft_waker_is_empty() - true for an empty waker (no vtable).
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: true when waking @w would do nothing.
 */
static inline bool weft_waker_is_empty(const weft_waker_t *w)
{
	return w->vtable == NULL;
}

/**
 * weft_waker_clone() - a new reference to @w's target.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: the new waker, to be woken or dropped once; empty for an empty
 * @w.
 */
static inline weft_waker_t weft_waker_clone(const weft_waker_t *w)
{
	return w->vtable ? w->vtable->clone(w->data) : WEFT_WAKER_EMPTY;
}

/**
 * weft_waker_wake() - wake the target and consume @w, which is left empty.
 *
 * Context: any thread; a task may call it (never blocks: the target is only
 * scheduled).
 */
static inline void weft_waker_wake(weft_waker_t *w)
{
	const weft_waker_vtable_t *vt = w->vtable;

	if (vt) {
		const void *data = w->data;

		*w = WEFT_WAKER_EMPTY;
		vt->wake(data);
	}
}

/**
 * weft_waker_wake_by_ref() - wake the target; @w stays valid.
 *
 * Context: any thread; a task may call it (never blocks: the target is only
 * scheduled).
 */
static inline void weft_waker_wake_by_ref(const weft_waker_t *w)
{
	if (w->vtable)
		w->vtable->wake_by_ref(w->data);
}

/**
 * weft_waker_drop() - release @w, which is left empty.
 *
 * Context: any thread; a task may call it (never blocks).
 */
static inline void weft_waker_drop(weft_waker_t *w)
{
	const weft_waker_vtable_t *vt = w->vtable;

	if (vt) {
		const void *data = w->data;

		*w = WEFT_WAKER_EMPTY;
		vt->drop(data);
	}
}

/**
 * weft_waker_will_wake() - whether waking @a and @b has the same effect.
 *
 * Context: any thread; a task may call it (never blocks).
 * Return: true for the same vtable and data (the same target).
 */
static inline bool weft_waker_will_wake(const weft_waker_t *a,
					const weft_waker_t *b)
{
	return a->vtable == b->vtable && a->data == b->data;
}

/**
 * weft_waker_set() - store a clone of @src into @slot unless @slot already
 * wakes the same target; drops what @slot held before.
 *
 * Context: any thread, by the slot's owner (it is not atomic); a task may
 * call it (never blocks).
 */
static inline void weft_waker_set(weft_waker_t *slot, const weft_waker_t *src)
{
	if (!weft_waker_will_wake(slot, src)) {
		weft_waker_drop(slot);
		*slot = weft_waker_clone(src);
	}
}

/**
 * weft_cx_waker() - the waker of the task (or block_on call) being polled.
 * @cx: the context passed to the poll function.
 *
 * Context: the poll function @cx was passed to (a task's or a
 * weft_block_on() future's), during that poll; a task may call it (never
 * blocks).
 * Return: a borrowed waker, valid for the duration of this poll; clone it
 * to keep it.
 */
WEFT_EXTERN const weft_waker_t *weft_cx_waker(weft_cx_t *cx);

/**
 * weft_cx_return() - set the output of the task being polled.
 * @cx: the context passed to the poll function.
 * @value: the value a join handle hands over once the task is READY.
 *
 * Context: the poll function @cx was passed to, during that poll; under
 * weft_block_on() the value goes to its @out.
 */
WEFT_EXTERN void weft_cx_return(weft_cx_t *cx, void *value);

/**
 * weft_cx_yield() - ask to be polled again after the other queued tasks.
 * @cx: the context passed to the poll function.
 *
 * The caller must return WEFT_PENDING from this poll.  Inside a task the
 * task goes to the back of its worker's queue (never the LIFO slot); under
 * weft_block_on() the future is simply polled again.
 *
 * Context: the poll function @cx was passed to, during that poll; a task
 * may call it (never blocks).
 */
WEFT_EXTERN void weft_cx_yield(weft_cx_t *cx);

/*
 * yield_now as a future, for composition: the first poll yields, the
 * second is READY.
 */
typedef struct weft_yield_s {
	bool yielded; /* private */
} weft_yield_t;

/**
 * weft_yield_poll() - yield_now as a future: the first poll yields, the
 * second is READY.
 *
 * Context: a poll function, with its @cx, during that poll; a task may call
 * it (never blocks).
 * Return: WEFT_PENDING on the first poll (after weft_cx_yield()),
 * WEFT_READY on the next.
 */
static inline weft_poll_t weft_yield_poll(weft_yield_t *y, weft_cx_t *cx)
{
	if (y->yielded) {
		y->yielded = false;
		return WEFT_READY;
	}
	y->yielded = true;
	weft_cx_yield(cx);
	return WEFT_PENDING;
}

/*
 * A place in the source where a task can be parked: the file and line of
 * an await.  Each WEFT_AWAIT, WEFT_YIELD and fiber await (weft/fiber.h)
 * has one, static, so that a pointer to it names the place for the life
 * of the program.  Code in a plugin that is dlclose()d must not leave
 * tasks parked in it (as for a task's name and spawn file: static
 * strings that outlive the task).  Nor, while the probe may listen, be
 * unloaded at all: the probe numbers each site once, by its address, for
 * the life of the process, so a site of code loaded later at the same
 * address would be shown at the unloaded one's file and line (as spawn
 * names already require code that is never unloaded).  A libweft.so loaded with dlopen()
 * needs a little static TLS (its thread-locals are initial-exec, under
 * 200 bytes), which glibc reserves for that.  Fixed for good
 * (weft/common.h): the library reads the callers' static ones.
 */
typedef struct weft_site_s {
	const char *file;
	int line;
} weft_site_t;

/*
 * Private.  The await this thread evaluated last: each WEFT_AWAIT (before
 * it evaluates its expression) and WEFT_YIELD store their site here, so
 * that of nested awaits the innermost, evaluated last, is what is left
 * when the poll returns PENDING.  The worker that polled the task takes it
 * (and clears it) after every poll, and keeps it in the task as where the
 * task is parked.  A poll function written by hand stores nothing: its
 * task shows the site of the last macro await it evaluated in that poll,
 * if any, else none.
 *
 * One plain store into a thread-local a WEFT_AWAIT, no unwinding.  The
 * initial-exec model keeps it a %fs-relative store even from a shared
 * library (a general-dynamic access would be a __tls_get_addr() call);
 * libweft.so already uses that model for its own thread-locals.  In C++,
 * __thread rather than thread_local: a variable of another translation
 * unit that is thread_local is reached through an init wrapper call.
 */
#if defined(__cplusplus)
#define WEFT__THREAD_LOCAL __thread
#else
#define WEFT__THREAD_LOCAL _Thread_local
#endif
WEFT_EXTERN extern WEFT__THREAD_LOCAL const weft_site_t *weft__await_site
	__attribute__((tls_model("initial-exec")));

/*
 * Stackless state-machine helpers.  The state struct needs an `int weft_pc`
 * member that is zero before the first poll.  Only one WEFT_AWAIT or
 * WEFT_YIELD per source line (the line is both the resume point and the
 * site).
 */
#define WEFT_ASYNC_BEGIN(st)                                                   \
	switch ((st)->weft_pc) {                                               \
	case 0:

/*
 * Polls @expr (a weft_poll_t expression) until it is READY.  The site is
 * stored on every evaluation, the resumed ones included: the worker clears
 * it after each poll, and a future awaited inside @expr stores its own
 * after this one.
 */
#define WEFT_AWAIT(st, expr)                                                   \
	do {                                                                   \
		static const weft_site_t weft__site = { __FILE__, __LINE__ };  \
		(st)->weft_pc = __LINE__;                                      \
		__attribute__((fallthrough));                                  \
	case __LINE__:                                                         \
		weft__await_site = &weft__site;                                \
		if ((expr) == WEFT_PENDING)                                    \
			return WEFT_PENDING;                                   \
	} while (0)

/* Yields once to the scheduler (yield_now). */
#define WEFT_YIELD(st, cx)                                                     \
	do {                                                                   \
		static const weft_site_t weft__site = { __FILE__, __LINE__ };  \
		(st)->weft_pc = __LINE__;                                      \
		weft__await_site = &weft__site;                                \
		weft_cx_yield(cx);                                             \
		return WEFT_PENDING;                                           \
	case __LINE__:;                                                        \
	} while (0)

/* Ends the state machine: READY; polling again stays READY. */
#define WEFT_ASYNC_END(st)                                                     \
	__attribute__((fallthrough));                                          \
	default:                                                               \
		break;                                                         \
		}                                                              \
	(st)->weft_pc = -1;                                                    \
	return WEFT_READY

#ifdef __cplusplus
}
#endif

#endif /* WEFT_FUTURE_H */
