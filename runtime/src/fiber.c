/* SPDX-License-Identifier: MIT */
/*
 * Fiber tasks.  A fiber task is an ordinary task whose future is a pointer
 * to a fiber: each poll switches from the worker's stack to the fiber's
 * (weft__fiber_switch, in fiber_switch_<arch>.S) and runs it until it
 * awaits a pending future (it switches back: PENDING) or its function
 * returns (READY, with the function's result as the task's output).
 *
 * Who touches a fiber: only the thread polling its task, which the task
 * state machine makes exclusive; between polls the fiber may move to
 * another worker.  TLS is read through out-of-line functions after every
 * switch so the compiler cannot reuse a thread-local address computed on
 * the previous thread.
 *
 * Stacks are mmap()ed with a PROT_NONE guard page at the low end, and the
 * default size is pooled (process-wide, bounded).  A SIGSEGV handler, run
 * on a per-thread alternate signal stack, recognises a fault in the
 * running fiber's guard page, names the fiber on stderr and aborts; any
 * other fault goes to the previous disposition.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "abi_internal.h"
#include "runtime_internal.h"
#include "weft/fiber.h"
#include "weft/time.h"

/*
 * Sanitizers must be told about stack switches: ASan keeps shadow for each
 * stack (and would report the fiber's frames as stack-buffer errors), TSan
 * keeps a shadow call stack and happens-before state per fiber.
 */
#if defined(WEFT_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(WEFT_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

typedef struct fiber_ctx_s {
	void *sp;
} fiber_ctx_t;

typedef struct fiber_s {
	fiber_ctx_t ctx;  /* the fiber's stack while it is switched out */
	fiber_ctx_t host; /* the poller's stack while the fiber runs */
	weft_cx_t *cx;    /* the current poll's context */
	weft_fiber_fn fn;
	void *arg;
	void *result;
	bool done;
	bool cancelled;
	const char *name;
	unsigned char *map;  /* mapping: guard page, then the stack */
	size_t map_size;
	size_t stack_size;   /* usable bytes */
#if defined(WEFT_ASAN)
	void *asan_fake;         /* the fiber's fake stack while switched out */
	const void *host_bottom; /* the poller's stack, for switching back */
	size_t host_size;
#endif
#if defined(WEFT_TSAN)
	void *tsan_fiber;
	void *tsan_host;
#endif
} fiber_t;

void weft__fiber_switch(fiber_ctx_t *from, fiber_ctx_t *to);
void weft__fiber_start(void);
_Noreturn void weft__fiber_main(fiber_t *f);

static WEFT_TLS fiber_t *cur_fiber;

/* Out of line: see the top comment. */
__attribute__((noinline)) static fiber_t *current_fiber(void)
{
	return cur_fiber;
}

__attribute__((noinline)) static void set_current_fiber(fiber_t *f)
{
	cur_fiber = f;
}

/*
 * Out of line: called after a switch, on whatever thread the fiber runs
 * on now; inlined, the compiler may keep the thread pointer it read on
 * the thread before (fiber.h: no thread-local's address across an
 * await).
 */
__attribute__((noinline)) static void set_await_site(const weft_site_t *site)
{
	weft__await_site = site;
}

static size_t page_size(void)
{
	/*
	 * Relaxed: every thread computes the same value; racing first calls
	 * store it twice (a data race TSan rightly reported as a plain
	 * static).
	 */
	static _Atomic size_t ps;
	size_t v = load_relaxed(&ps);

	if (!v) {
		v = (size_t)sysconf(_SC_PAGESIZE);
		store_relaxed(&ps, v);
	}
	return v;
}

/* ------------------------------------------------ sanitizer annotations */

/* Host side: about to run @f. */
static void san_enter_fiber(fiber_t *f, void **host_fake)
{
#if defined(WEFT_TSAN)
	f->tsan_host = __tsan_get_current_fiber();
	__tsan_switch_to_fiber(f->tsan_fiber, 0);
#endif
#if defined(WEFT_ASAN)
	__sanitizer_start_switch_fiber(host_fake, f->map + page_size(),
				       f->stack_size);
#else
	(void)f;
	(void)host_fake;
#endif
}

/* Host side: back from @f. */
static void san_back_in_host(void *host_fake)
{
#if defined(WEFT_ASAN)
	__sanitizer_finish_switch_fiber(host_fake, NULL, NULL);
#else
	(void)host_fake;
#endif
}

/* Fiber side: about to switch to the host; @dying for the last time. */
static void san_leave_fiber(fiber_t *f, bool dying)
{
#if defined(WEFT_TSAN)
	__tsan_switch_to_fiber(f->tsan_host, 0);
#endif
#if defined(WEFT_ASAN)
	__sanitizer_start_switch_fiber(dying ? NULL : &f->asan_fake,
				       f->host_bottom, f->host_size);
#else
	(void)f;
	(void)dying;
#endif
}

/* Fiber side: just switched in (first time, or resumed). */
static void san_in_fiber(fiber_t *f)
{
#if defined(WEFT_ASAN)
	__sanitizer_finish_switch_fiber(f->asan_fake, &f->host_bottom,
					&f->host_size);
#else
	(void)f;
#endif
}

/* ------------------------------------------------------------- stacks */

#define POOL_MAX 2048

static struct {
	pthread_mutex_t lock;
	unsigned char *maps[POOL_MAX];
	unsigned n;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int stack_alloc(fiber_t *f, size_t want)
{
	size_t ps = page_size();
	size_t size = want ? want : WEFT_FIBER_STACK_DEFAULT;
	unsigned char *map = NULL;

	size = (size + ps - 1) & ~(ps - 1);
	f->stack_size = size;
	f->map_size = size + ps;
	if (size == WEFT_FIBER_STACK_DEFAULT) {
		pthread_mutex_lock(&pool.lock);
		if (pool.n)
			map = pool.maps[--pool.n];
		pthread_mutex_unlock(&pool.lock);
	}
	if (!map) {
		map = mmap(NULL, f->map_size, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		if (map == MAP_FAILED)
			return -ENOMEM;
		if (mprotect(map, ps, PROT_NONE)) {
			munmap(map, f->map_size);
			return -ENOMEM;
		}
	}
	f->map = map;
	return 0;
}

static void stack_free(fiber_t *f)
{
	if (f->stack_size == WEFT_FIBER_STACK_DEFAULT) {
		pthread_mutex_lock(&pool.lock);
		if (pool.n < POOL_MAX) {
			pool.maps[pool.n++] = f->map;
			f->map = NULL;
		}
		pthread_mutex_unlock(&pool.lock);
	}
	if (f->map)
		munmap(f->map, f->map_size);
	f->map = NULL;
}

/* Lays out a fresh stack so that switching to it enters weft__fiber_start. */
static void stack_prepare(fiber_t *f)
{
	uintptr_t top = (uintptr_t)(f->map + f->map_size) & ~(uintptr_t)15;
	void **sp = (void **)top;

#if defined(__x86_64__)
	uint32_t mxcsr;
	uint16_t fpucw;

	__asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
	__asm__ volatile("fnstcw %0" : "=m"(fpucw));
	*--sp = (void *)weft__fiber_start; /* popped by ret */
	*--sp = NULL;                      /* rbp */
	*--sp = NULL;                      /* rbx */
	*--sp = f;                         /* r12: the fiber */
	*--sp = NULL;                      /* r13 */
	*--sp = NULL;                      /* r14 */
	*--sp = NULL;                      /* r15 */
	--sp;
	memcpy(sp, &mxcsr, 4);
	memcpy((char *)sp + 4, &fpucw, 2);
#elif defined(__aarch64__)
	sp -= 20; /* 160 bytes: x19..x30, d8..d15 */
	memset(sp, 0, 160);
	sp[0] = f;                         /* x19: the fiber */
	sp[11] = (void *)weft__fiber_start; /* x30 */
#else
#error "fibers: no context switch for this architecture"
#endif
	f->ctx.sp = sp;
}

/* ------------------------------------------------------ overflow guard */

static struct sigaction prev_segv;
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t altstack_key;
static WEFT_TLS bool altstack_ready;

static void write_str(const char *s)
{
	ssize_t r = write(STDERR_FILENO, s, strlen(s));

	(void)r;
}

static void segv_handler(int sig, siginfo_t *si, void *uc)
{
	fiber_t *f = cur_fiber;
	uintptr_t addr = (uintptr_t)si->si_addr;

	if (f && f->map && addr >= (uintptr_t)f->map &&
	    addr < (uintptr_t)f->map + page_size()) {
		write_str("weft: fiber stack overflow in task \"");
		write_str(f->name ? f->name : "(unnamed)");
		write_str("\": it hit the guard page below its stack; "
			  "give it a larger stack_size\n");
		signal(SIGABRT, SIG_DFL);
		abort();
	}
	/* Not ours: the previous disposition. */
	if (prev_segv.sa_flags & SA_SIGINFO) {
		prev_segv.sa_sigaction(sig, si, uc);
	} else if (prev_segv.sa_handler != SIG_IGN &&
		   prev_segv.sa_handler != SIG_DFL) {
		prev_segv.sa_handler(sig);
	} else {
		/* Re-fault with the default action. */
		signal(SIGSEGV, SIG_DFL);
	}
}

static void altstack_free(void *p)
{
	stack_t none = { .ss_flags = SS_DISABLE };

	sigaltstack(&none, NULL);
	munmap(p, 64 * 1024);
}

static void key_create(void)
{
	pthread_key_create(&altstack_key, altstack_free);
}

/*
 * Puts our handler first, chaining to whatever was there.  Checked once
 * per thread that runs fibers, so a handler installed later by the
 * application (or a test framework) is chained rather than lost.
 */
static void guard_install(void)
{
	struct sigaction sa, cur;

	pthread_mutex_lock(&guard_lock);
	if (sigaction(SIGSEGV, NULL, &cur) == 0 &&
	    !((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == segv_handler)) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = segv_handler;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGSEGV, &sa, &prev_segv))
			memset(&prev_segv, 0, sizeof(prev_segv));
	}
	pthread_mutex_unlock(&guard_lock);
}

/* The handler needs a stack that is not the overflowed one. */
static void altstack_ensure(void)
{
	stack_t ss, old;
	void *p;

	if (altstack_ready)
		return;
	altstack_ready = true;
	pthread_once(&key_once, key_create);
	guard_install();
	if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE))
		return; /* the application has one */
	p = mmap(NULL, 64 * 1024, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	ss.ss_sp = p;
	ss.ss_size = 64 * 1024;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL)) {
		munmap(p, 64 * 1024);
		return;
	}
	pthread_setspecific(altstack_key, p);
}

/* --------------------------------------------------------------- run */

void weft__fiber_main(fiber_t *f)
{
	san_in_fiber(f);
	f->result = f->fn(f->arg);
	f->done = true;
	san_leave_fiber(f, true);
	weft__fiber_switch(&f->ctx, &f->host);
	weft_panic("finished fiber resumed");
}

/* Switches from the fiber back to whoever resumed it. */
static void fiber_suspend(fiber_t *f)
{
	san_leave_fiber(f, false);
	weft__fiber_switch(&f->ctx, &f->host);
	san_in_fiber(f);
}

/* Runs @f on this thread until it suspends or finishes. */
static void fiber_resume(fiber_t *f, weft_cx_t *cx)
{
	fiber_t *prev = current_fiber();
	void *host_fake = NULL;

	altstack_ensure();
	f->cx = cx;
	set_current_fiber(f);
	san_enter_fiber(f, &host_fake);
	weft__fiber_switch(&f->host, &f->ctx);
	san_back_in_host(host_fake);
	set_current_fiber(prev);
}

struct fiber_task {
	fiber_t *f;
};

static weft_poll_t fiber_task_poll(void *arg, weft_cx_t *cx)
{
	fiber_t *f = ((struct fiber_task *)arg)->f;

	fiber_resume(f, cx);
	if (!f->done)
		return WEFT_PENDING;
	weft_cx_return(cx, f->result);
	return WEFT_READY;
}

static void fiber_task_drop(void *arg)
{
	fiber_t *f = ((struct fiber_task *)arg)->f;

	if (!f->done) {
		/*
		 * Cancelled: let the function unwind.  Each await returns
		 * -ECANCELED at once from here on, so it runs to its end
		 * without a waker ever being needed.
		 */
		struct weft_cx_s cx = { .waker = WEFT_WAKER_EMPTY };

		f->cancelled = true;
		while (!f->done)
			fiber_resume(f, &cx);
	}
	stack_free(f);
#if defined(WEFT_TSAN)
	__tsan_destroy_fiber(f->tsan_fiber);
#endif
	free(f);
}

int weft_spawn_fiber_with(weft_runtime_t *rt, const weft_fiber_opts_t *opts,
			  weft_fiber_fn fn, void *arg, weft_join_t **join)
{
	weft_fiber_opts_t o = opts ? *opts : (weft_fiber_opts_t){ 0 };
	struct fiber_task st;
	fiber_t *f;
	int err;

	if (!fn || !weft__reserved_zero(o.reserved_, sizeof(o.reserved_)))
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->fn = fn;
	f->arg = arg;
	f->name = o.name;
	err = stack_alloc(f, o.stack_size);
	if (err)
		goto out_free_fiber;
	stack_prepare(f);
#if defined(WEFT_TSAN)
	f->tsan_fiber = __tsan_create_fiber(0);
#endif
	st.f = f;
	err = weft_spawn_with(rt,
			      &(weft_spawn_t){ .poll = fiber_task_poll,
					       .drop = fiber_task_drop,
					       .state = &st,
					       .size = sizeof(st),
					       .name = o.name,
					       .file = o.file,
					       .line = o.line,
					       .kind = 1 },
			      join);
	if (err)
		goto out_free_stack;
	return 0;

out_free_stack:
#if defined(WEFT_TSAN)
	__tsan_destroy_fiber(f->tsan_fiber);
#endif
	stack_free(f);
out_free_fiber:
	free(f);
	return err;
}

bool weft_in_fiber(void)
{
	return current_fiber() != NULL;
}

/*
 * Polls until READY, suspending the fiber in between.  @site is stored
 * again before each poll, on the thread the fiber now runs on: the worker
 * takes it when the fiber's task returns PENDING (task.c), unless the
 * future's own WEFT_AWAIT stored an inner one meanwhile.
 */
static int await_at(const weft_site_t *site, weft_poll_cb poll, void *state)
{
	fiber_t *f = current_fiber();

	if (!f) {
		if (weft__cur_worker)
			return -EPERM;
		return weft_block_on(weft_runtime_current(), poll, state, NULL);
	}
	for (;;) {
		if (f->cancelled)
			return -ECANCELED;
		set_await_site(site);
		if (poll(state, f->cx) == WEFT_READY) {
			/* Not left for a later await called without a site. */
			set_await_site(NULL);
			return 0;
		}
		fiber_suspend(f);
		/* Possibly on another thread now: f itself is unchanged. */
	}
}

/*
 * The awaiting calls.  weft/fiber.h's macros of the same names call the
 * _at forms with their caller's static site as an argument: the site is
 * never left in a thread-local by the caller's inlined code, which a
 * compiler may address through the thread pointer of the worker the
 * fiber ran on before its last suspension (clang on aarch64 keeps
 * TPIDR_EL0 in a register across the call).  In parentheses: the macros.
 */
int weft__fiber_await_at(const weft_site_t *site, weft_poll_cb poll,
			 void *state)
{
	return await_at(site, poll, state);
}

int(weft_await)(weft_poll_cb poll, void *state)
{
	return await_at(NULL, poll, state);
}

static weft_poll_t yield_poll(void *arg, weft_cx_t *cx)
{
	return weft_yield_poll(arg, cx);
}

int weft__fiber_yield_at(const weft_site_t *site)
{
	weft_yield_t y = { 0 };

	return await_at(site, yield_poll, &y);
}

int(weft_fiber_yield)(void)
{
	return weft__fiber_yield_at(NULL);
}

static weft_poll_t sleep_poll(void *arg, weft_cx_t *cx)
{
	return weft_sleep_poll(arg, cx);
}

int weft__fiber_sleep_at(const weft_site_t *site, uint64_t ns)
{
	weft_sleep_t s;
	int err;

	weft_sleep_init(&s, ns);
	err = await_at(site, sleep_poll, &s);
	weft_sleep_fini(&s);
	return err;
}

int(weft_fiber_sleep)(uint64_t ns)
{
	return weft__fiber_sleep_at(NULL, ns);
}

struct fiber_join {
	weft_join_t *join;
	int *status;
	void **out;
};

static weft_poll_t join_poll(void *arg, weft_cx_t *cx)
{
	struct fiber_join *j = arg;

	return weft_join_poll(j->join, cx, j->status, j->out);
}

int weft__fiber_join_at(const weft_site_t *site, weft_join_t *join,
			int *status, void **out)
{
	struct fiber_join j = { join, status, out };

	return await_at(site, join_poll, &j);
}

int(weft_fiber_join)(weft_join_t *join, int *status, void **out)
{
	return weft__fiber_join_at(NULL, join, status, out);
}
