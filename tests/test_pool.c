/*
 * test_pool.c — the thread pool (src/base/pool.c): every task of a parallel-for runs exactly
 * once, on a thread index inside [0, size), for 1, 2 and 7 threads, a NULL pool, zero and one task,
 * and many jobs in a row on the same pool; thread indices are never shared by two tasks that
 * run at the same time; every allocation failure inside ps_pool_create gives PS_ERR_NOMEM
 * and no pool (walked until it succeeds; at least one point). Each size runs with both of the
 * pool's waits (polling before sleeping, and sleeping at once: ps_test_pool_poll), back to back
 * and with gaps longer than the poll window between jobs, so that the workers and the caller
 * go to sleep and must be woken (a lost wake-up hangs the test). All of it again through
 * ps_pool_for_runs (contiguous runs per thread, stolen by halves), whose runs are checked the
 * same way: every task exactly once, no thread index shared.
 */
#include "base/impl.h"
#include "promptscore.h"
#include "check.h"
#include "base/testhooks.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define MAX_TASKS 10007

typedef struct {
    _Atomic int32_t runs[MAX_TASKS];
    _Atomic int32_t busy[64];      /* per thread index: tasks running on it now */
    _Atomic int32_t bad_index;     /* a thread index out of range */
    _Atomic int32_t overlap;       /* a thread index used by two running tasks */
    int32_t size;
} ctx_t;

static void task(void *vctx, int64_t i, int32_t ti) {
    ctx_t *c = vctx;
    if (ti < 0 || ti >= c->size || ti >= 64) {
        atomic_fetch_add(&c->bad_index, 1);
        return;
    }
    if (atomic_fetch_add(&c->busy[ti], 1) != 0) atomic_fetch_add(&c->overlap, 1);
    if (i % 97 == 0 || i == 1) { /* uneven work, before the count: a pool that returned
                                  * before its workers finished would miss the count */
        volatile double x = 0;
        for (int k = 0; k < (i == 1 ? 50000 : 2000); k++) x += k * 0.5;
    }
    atomic_fetch_add(&c->runs[i], 1);
    atomic_fetch_sub(&c->busy[ti], 1);
}

static ctx_t C;

static bool runs_mode; /* job_ok runs ps_pool_for_runs instead of ps_pool_for */

/* Runs one job of n tasks; true when every task ran exactly once on a valid, unshared thread
 * index (prints what went wrong otherwise). */
static bool job_ok(ps_pool *pool, int64_t n, const char *what) {
    for (int64_t i = 0; i < MAX_TASKS; i++) atomic_store(&C.runs[i], 0);
    atomic_store(&C.bad_index, 0);
    atomic_store(&C.overlap, 0);
    C.size = ps_pool_size(pool);
    if (runs_mode) ps_pool_for_runs(pool, n, task, &C);
    else ps_pool_for(pool, n, task, &C);
    int64_t wrong = 0;
    for (int64_t i = 0; i < MAX_TASKS; i++) wrong += atomic_load(&C.runs[i]) != (i < n ? 1 : 0);
    bool ok = wrong == 0 && atomic_load(&C.bad_index) == 0 && atomic_load(&C.overlap) == 0;
    if (!ok)
        fprintf(stderr, "%s%s, %d threads, %lld tasks: %lld tasks not run exactly once, %d bad "
                "indices, %d overlaps\n", what, runs_mode ? " (runs)" : "", C.size,
                (long long)n, (long long)wrong, (int)atomic_load(&C.bad_index),
                (int)atomic_load(&C.overlap));
    return ok;
}

int main(void) {
    CHECK(job_ok(NULL, 0, "NULL pool"));
    CHECK(job_ok(NULL, 1000, "NULL pool"));
    CHECK(ps_pool_size(NULL) == 1);
    int32_t sizes[3] = {1, 2, 7};
    for (int k = 0; k < 12; k++) {
        /* sleeping at once, then polling first; each with ps_pool_for, then ps_pool_for_runs */
        const int s = k % 3, poll = k / 3 % 2;
        runs_mode = k >= 6;
        ps_test_pool_poll(poll);
        ps_pool *pool = NULL;
        CHECK(ps_pool_create(sizes[s], &pool) == PS_OK && pool);
        if (!pool) continue;
        CHECK(ps_pool_size(pool) == sizes[s]);
        CHECK(job_ok(pool, 0, "empty job"));
        CHECK(job_ok(pool, 1, "one task"));
        CHECK(job_ok(pool, 3, "fewer tasks than threads"));
        CHECK(job_ok(pool, MAX_TASKS, "big job"));
        /* repeated jobs on the same pool */
        int64_t total_ok = 0;
        for (int rep = 0; rep < 200; rep++) total_ok += job_ok(pool, 1 + (rep * 37) % 300, "repeated");
        CHECKF(total_ok == 200, "repeated jobs: %lld of 200 ok", (long long)total_ok);
        /* gaps of 0.5 ms (past the 0.2 ms poll window): every thread sleeps between jobs */
        total_ok = 0;
        for (int rep = 0; rep < 20; rep++) {
            nanosleep(&(struct timespec){0, 500000}, NULL);
            total_ok += job_ok(pool, 1 + rep % 5, "after a gap");
        }
        CHECKF(total_ok == 20, "jobs after gaps, %s: %lld of 20 ok",
               poll ? "polling" : "sleeping", (long long)total_ok);
        ps_pool_free(pool);
    }
    ps_test_pool_poll(-1);
    runs_mode = false;
    ps_pool *p = NULL;
    CHECK(ps_pool_create(-1, &p) == PS_ERR_INVALID_ARG && p == NULL);
    CHECK(ps_pool_create(2, NULL) == PS_ERR_INVALID_ARG);
    /* allocation failure in create: every failing allocation point gives a clean NOMEM (and
     * no pool), walked until create succeeds; there is at least one such point */
    int64_t nomem = 0, at = 0;
    bool created = false;
    for (; at < 64 && !created; at++) {
        ps_alloc_fail_after(at);
        ps_status st = ps_pool_create(3, &p);
        int64_t attempted = ps_alloc_count();
        ps_alloc_fail_after(-1);
        if (st == PS_OK) {
            CHECKF(attempted <= at, "create succeeded although allocation %lld failed",
                   (long long)at);
            created = true;
            ps_pool_free(p);
            p = NULL;
        } else {
            CHECKF(st == PS_ERR_NOMEM && p == NULL, "create with allocation %lld failing: %d",
                   (long long)at, st);
            nomem += st == PS_ERR_NOMEM;
        }
    }
    CHECKF(created && nomem > 0 && nomem == at - 1,
           "pool create: %lld NOMEM over %lld allocation points (created: %d)", (long long)nomem,
           (long long)at - 1, created);
    printf("NOTE: ps_pool_create(3): %lld allocation points, each -> PS_ERR_NOMEM\n",
           (long long)nomem);
    ps_pool_free(NULL);
    return ps_test_done("pool");
}
