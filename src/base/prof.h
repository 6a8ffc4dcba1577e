/*
 * prof.h — cheap cumulative timers for `promptscore bench`: nanoseconds spent in the matmuls,
 * the attention, the whole forward pass and the top-K kernel, summed over every call in the
 * process. Off by default; while off, each timed region costs one relaxed atomic load. While
 * on, one clock_gettime per region boundary and one relaxed atomic add (safe with several
 * sessions in parallel; the figures are then process totals).
 */
#ifndef PS_PROF_H
#define PS_PROF_H

#include "base/impl.h"

typedef enum {
    PS_PROF_MATMUL = 0, /* ps_matmul calls (pool dispatch included) */
    PS_PROF_ATTENTION,  /* attention over the KV cache */
    PS_PROF_FORWARD,    /* ps_forward_run as a whole */
    PS_PROF_TOPK,       /* the top-K kernel on a chunk's logits */
    PS_PROF_DELTANET,   /* Gated DeltaNet conv, norms and delta rule (not its matmuls) */
    PS_PROF_MOE_ROUTE,  /* experts: router matmul, softmax, top-k, grouping, gather, weighted sum */
    PS_PROF_MOE_EXPERTS,/* experts: the expert matmuls and their SwiGLU */
    PS_PROF_N
} ps_prof_slot;

void ps_prof_enable(bool on);
/* Time regions with the process's CPU time instead of the wall clock: meaningful with one
 * thread on a shared machine (time spent descheduled does not count); wrong with several. */
void ps_prof_use_cpu_clock(bool on);
/* The clock the timers use, in ns. */
uint64_t ps_prof_clock_ns(void);
bool ps_prof_enabled(void);
/* Monotonic nanoseconds when profiling is on, else 0 (then ps_prof_add ignores the call). */
uint64_t ps_prof_start(void);
void ps_prof_add(ps_prof_slot slot, uint64_t start);
/* Copies the totals (ns) into out[PS_PROF_N]; ps_prof_reset zeroes them. */
void ps_prof_read(uint64_t out[PS_PROF_N]);
void ps_prof_reset(void);

#endif
