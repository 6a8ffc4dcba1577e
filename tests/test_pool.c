/*
 * test_pool.c — the thread pool (src/pool.c): every task of a parallel-for runs exactly once,
 * on a thread index inside [0, size), for 1, 2 and 7 threads, a NULL pool, zero and one task,
 * and many jobs in a row on the same pool; thread indices are never shared by two tasks that
 * run at the same time; every allocation failure inside ps_pool_create gives PS_ERR_NOMEM
 * and no pool (walked until it succeeds; at least one point).
 */
#include "base/impl.h"
#include "promptscore.h"
#include "check.h"
#include "base/testhooks.h"

#include <stdatomic.h>
#include <stdint.h>

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
    atomic_fetch_add(&c->runs[i], 1);
    if (i % 97 == 0) { /* some uneven work */
        volatile double x = 0;
        for (int k = 0; k < 2000; k++) x += k * 0.5;
    }
    atomic_fetch_sub(&c->busy[ti], 1);
}

static ctx_t C;

/* Runs one job of n tasks; true when every task ran exactly once on a valid, unshared thread
 * index (prints what went wrong otherwise). */
static bool job_ok(ps_pool *pool, int64_t n, const char *what) {
    for (int64_t i = 0; i < MAX_TASKS; i++) atomic_store(&C.runs[i], 0);
    atomic_store(&C.bad_index, 0);
    atomic_store(&C.overlap, 0);
    C.size = ps_pool_size(pool);
    ps_pool_for(pool, n, task, &C);
    int64_t wrong = 0;
    for (int64_t i = 0; i < MAX_TASKS; i++) wrong += atomic_load(&C.runs[i]) != (i < n ? 1 : 0);
    bool ok = wrong == 0 && atomic_load(&C.bad_index) == 0 && atomic_load(&C.overlap) == 0;
    if (!ok)
        fprintf(stderr, "%s, %d threads, %lld tasks: %lld tasks not run exactly once, %d bad "
                "indices, %d overlaps\n", what, C.size, (long long)n, (long long)wrong,
                (int)atomic_load(&C.bad_index), (int)atomic_load(&C.overlap));
    return ok;
}

int main(void) {
    CHECK(job_ok(NULL, 0, "NULL pool"));
    CHECK(job_ok(NULL, 1000, "NULL pool"));
    CHECK(ps_pool_size(NULL) == 1);
    int32_t sizes[3] = {1, 2, 7};
    for (int s = 0; s < 3; s++) {
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
        ps_pool_free(pool);
    }
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
