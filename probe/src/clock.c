/* SPDX-License-Identifier: MIT */
/*
 * The probe's clock.  Where the CPU's TSC is invariant (CPUID
 * 0x80000007 EDX bit 8: constant rate, runs through C-states) events are
 * stamped with rdtsc, a few cycles; elsewhere with clock_gettime().
 *
 * Raw TSC values become CLOCK_MONOTONIC nanoseconds as
 * base_ns + (raw - base_tsc) / ticks_per_ns.  The base pair is sampled at
 * start-up and the rate is measured first over ~2 ms, then refined by the
 * collector over an ever longer baseline (so it converges).  Only the
 * collector thread converts or calibrates after start-up; init runs once
 * under the probe's start lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "knob.h"
#include "probe_internal.h"

bool weft__probe_use_tsc;

static uint64_t base_tsc;
static uint64_t base_ns;
static double ticks_per_ns = 1.0;
/*
 * 1 / ticks_per_ns in 32.32 fixed point, for the conversion: a multiply
 * and a shift instead of a division through double (a fifth of the
 * collector's instructions per event went there).  The error is 2^-32 of
 * a tick's nanoseconds: under a nanosecond an hour from the base.
 */
static uint64_t ns_per_tick_q32 = (uint64_t)1 << 32;
static char describe[96] = "clock_gettime(CLOCK_MONOTONIC)";

uint64_t weft__probe_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
#include <cpuid.h>

static bool tsc_invariant(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000007)
		return false;
	__get_cpuid(0x80000007, &a, &b, &c, &d);
	return (d >> 8) & 1;
}

static uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

/*
 * A (tsc, ns) pair read as close together as we can: the tightest of a
 * few tries, so a preemption between the two reads cannot skew it.
 */
struct pair {
	uint64_t tsc;
	uint64_t ns;
};

static struct pair sample_pair(void)
{
	struct pair p = { 0, 0 };
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 8; i++) {
		uint64_t t1 = rdtsc(), n = weft__probe_clock_ns(), t2 = rdtsc();

		if (t2 - t1 < best) {
			best = t2 - t1;
			p.tsc = t1 + (t2 - t1) / 2;
			p.ns = n;
		}
	}
	return p;
}
#endif

/* WEFT_PROBE_CLOCK=monotonic forces clock_gettime() (for comparison). */
static bool getenv_tsc_disabled(void)
{
	static const char *const clocks[] = { "tsc", "monotonic", NULL };

	return weft__knob_choice("WEFT_PROBE_CLOCK", clocks, 0) == 1;
}

void weft__probe_clock_calibrate(void)
{
#if defined(__x86_64__)
	struct pair now;

	if (!weft__probe_use_tsc)
		return;
	now = sample_pair();
	if (now.ns > base_ns + 1000000)
		ticks_per_ns = (double)(now.tsc - base_tsc) /
			       (double)(now.ns - base_ns);
	ns_per_tick_q32 = (uint64_t)(4294967296.0 / ticks_per_ns + 0.5);
	snprintf(describe, sizeof(describe), "tsc %.3f GHz (invariant)",
		 ticks_per_ns);
#endif
}

void weft__probe_clock_init(void)
{
#if defined(__x86_64__)
	if (getenv_tsc_disabled())
		return;
	if (!tsc_invariant())
		return;
	{
		struct pair b = sample_pair();

		base_tsc = b.tsc;
		base_ns = b.ns;
	}
	/* A first rate over ~2 ms; the collector refines it. */
	while (weft__probe_clock_ns() < base_ns + 2000000)
		;
	weft__probe_use_tsc = true;
	weft__probe_clock_calibrate();
#endif
}

static inline uint64_t scale(uint64_t ticks)
{
	__extension__ typedef unsigned __int128 u128;

	return (uint64_t)(((u128)ticks * ns_per_tick_q32) >> 32);
}

uint64_t weft__probe_clock_to_ns(uint64_t raw)
{
	if (!weft__probe_use_tsc)
		return raw;
	if (raw >= base_tsc)
		return base_ns + scale(raw - base_tsc);
	return base_ns - scale(base_tsc - raw);
}

void weft__probe_clock_conv_get(struct weft__probe_clock_conv *c)
{
	c->tsc = weft__probe_use_tsc;
	c->base_tsc = base_tsc;
	c->base_ns = base_ns;
	c->ns_per_tick_q32 = ns_per_tick_q32;
}

const char *weft__probe_clock_describe(void)
{
	return describe;
}
