/*
 * pool.c — a fixed set of pthreads that runs parallel-for loops.
 *
 * ps_pool_for(pool, n, fn, ctx) publishes one job (fn, ctx, n) under a mutex, wakes the
 * workers, and every thread (the caller too) takes task indices from one atomic counter until
 * they run out; the caller then waits until all workers have finished the job. Which thread runs
 * which task varies from run to run, so kernels must make every task's result independent of
 * that (they do: each task writes its own rows). One job runs at a time per pool.
 */
#include "base/impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

struct ps_pool {
    int32_t n_threads;
    pthread_t *threads;
    pthread_mutex_t run_lock;  /* one ps_pool_for at a time */
    pthread_mutex_t mu;
    pthread_cond_t cv_work;
    pthread_cond_t cv_done;
    uint64_t generation;       /* bumped for every job */
    int32_t n_active;          /* workers still inside the current job */
    bool stop;
    /* the current job */
    ps_pool_fn fn;
    void *ctx;
    int64_t n_tasks;
    _Atomic int64_t next;
};

typedef struct {
    ps_pool *pool;
    int32_t index;
} worker_arg;

static void run_tasks(ps_pool *p, int32_t thread_index) {
    for (;;) {
        int64_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n_tasks) break;
        p->fn(p->ctx, i, thread_index);
    }
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    ps_pool *p = wa->pool;
    int32_t index = wa->index;
    ps_free(wa);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_tasks(p, index);
        pthread_mutex_lock(&p->mu);
        if (--p->n_active == 0) pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

ps_status ps_pool_create(int32_t n_threads, ps_pool **out) {
    if (!out || n_threads < 0 || n_threads > 1024) return PS_ERR_INVALID_ARG;
    *out = NULL;
    if (n_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int32_t)PS_MIN(n, 1024) : 1;
    }
    ps_pool *p = ps_calloc(1, sizeof *p);
    if (!p) return PS_ERR_NOMEM;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->run_lock, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (n_threads > 1) {
        p->threads = ps_calloc((size_t)n_threads - 1, sizeof(pthread_t));
        if (!p->threads) {
            p->n_threads = 1;
            ps_pool_free(p);
            return PS_ERR_NOMEM;
        }
        for (int32_t i = 0; i < n_threads - 1; i++) {
            worker_arg *wa = ps_malloc(sizeof *wa);
            if (wa) {
                wa->pool = p;
                wa->index = i + 1;
            }
            if (!wa || pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
                ps_free(wa);
                p->n_threads = i + 1; /* join the ones started */
                ps_pool_free(p);
                return PS_ERR_NOMEM;
            }
        }
    }
    *out = p;
    return PS_OK;
}

void ps_pool_free(ps_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int32_t i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
    ps_free(p->threads);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run_lock);
    ps_free(p);
}

int32_t ps_pool_size(const ps_pool *p) { return p ? p->n_threads : 1; }

void ps_pool_for(ps_pool *p, int64_t n_tasks, ps_pool_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (int64_t i = 0; i < n_tasks; i++) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->run_lock);
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next, 0);
    p->n_active = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->n_active > 0) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->run_lock);
}
