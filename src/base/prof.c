/*
 * prof.c — the bench timers of prof.h: one atomic flag and PS_PROF_N atomic nanosecond
 * totals. ps_prof_start reads the clock (CLOCK_MONOTONIC, or the process's CPU time) only when
 * the flag is set, so the timed regions cost almost nothing in normal use.
 */
#include "base/prof.h"

#include <stdatomic.h>
#include <time.h>

static atomic_bool g_on, g_cpu;
static _Atomic uint64_t g_total[PS_PROF_N];

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(atomic_load_explicit(&g_cpu, memory_order_relaxed) ? CLOCK_PROCESS_CPUTIME_ID
                                                                       : CLOCK_MONOTONIC,
                  &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ps_prof_enable(bool on) { atomic_store(&g_on, on); }

void ps_prof_use_cpu_clock(bool on) { atomic_store(&g_cpu, on); }

uint64_t ps_prof_clock_ns(void) { return now_ns(); }

bool ps_prof_enabled(void) { return atomic_load_explicit(&g_on, memory_order_relaxed); }

uint64_t ps_prof_start(void) { return ps_prof_enabled() ? now_ns() : 0; }

void ps_prof_add(ps_prof_slot slot, uint64_t start) {
    if (!start || (unsigned)slot >= PS_PROF_N) return;
    atomic_fetch_add_explicit(&g_total[slot], now_ns() - start, memory_order_relaxed);
}

void ps_prof_read(uint64_t out[PS_PROF_N]) {
    for (int i = 0; i < PS_PROF_N; i++) out[i] = atomic_load(&g_total[i]);
}

void ps_prof_reset(void) {
    for (int i = 0; i < PS_PROF_N; i++) atomic_store(&g_total[i], 0);
}
