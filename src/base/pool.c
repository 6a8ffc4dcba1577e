/*
 * pool.c — a fixed set of pthreads that runs parallel-for loops.
 *
 * ps_pool_for(pool, n, fn, ctx) publishes one job (fn, ctx, n) and bumps a generation counter;
 * every thread (the caller too) takes task indices from one atomic counter until they run out,
 * and the caller then waits until all workers have finished the job. Which thread runs which
 * task varies from run to run, so kernels must make every task's result independent of that
 * (they do: each task writes its own rows). One job runs at a time per pool.
 *
 * ps_pool_for_runs hands the tasks out in runs instead: thread t starts at t x n / T and takes
 * the next index of its own range [front, back), so each thread walks a contiguous stretch (of
 * a weight matrix, for the matmul tiles); a thread whose range is empty takes the back half of
 * the fullest other range as its own. Each range is one 64-bit atomic (front, back) changed by
 * compare-and-swap: the owner moves front up, a thief moves back down, and the pair is the whole
 * state of what the range still holds, so a swap that succeeds acts on exactly that. In one
 * shared order two threads split neighbouring tiles (and the next tile each prefetches) between
 * them; in runs each keeps to its own stretch, which shortens a two-thread score's wall time
 * (docs/figures.md).
 *
 * Waiting polls before it sleeps: a worker that has finished a job watches the generation for
 * up to SPIN_S, and the caller watches the workers' count the same way, before either blocks
 * on its condition variable. A forward pass runs hundreds of short jobs back to back (a
 * matrix product is two), and waking a sleeping thread through the kernel costs tens of
 * microseconds on a VM (docs/kernels.md, "Threads").
 * A pool with more threads than online CPUs never polls: the thread it waits for may need the
 * core it would hold. A sleeper is woken under `mu`, so no wake-up is lost: it checks the
 * counter under `mu` before it waits, and the publisher takes `mu` to broadcast after the bump.
 *
 * fork(): the child has only the thread that forked, so a pool's workers do not exist there
 * and a job would wait for them forever. pthread_atfork handlers (registered with the first
 * pool) take, before the fork, the lock of every live pool (its run lock, so no job is half
 * done, then `mu`) and every lock registered with ps_fork_lock_add (the prefix cache's), in
 * that order, and give them back after it in the parent. In the child they initialise those
 * locks and condition variables afresh and mark each pool as having no workers; the pool's
 * next job starts them again (a worker that cannot be started leaves its tasks to the others:
 * results do not depend on the thread count). So a child may go on using what the parent
 * made, and forking waits until no job is running.
 */
#include "base/impl.h"
#include "base/testhooks.h"
#include "base/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define SPIN_S 2e-4 /* how long a waiting thread polls before it sleeps (seconds) */

struct ps_pool {
    int32_t n_threads;
    int32_t n_workers;         /* workers running now (n_threads - 1; 0 in a child of fork()) */
    bool respawn;              /* a child of fork(): start the workers before the next job */
    bool spin;                 /* poll before sleeping (threads <= online CPUs) */
    ps_pool *fork_prev, *fork_next; /* the live pools (the fork handlers walk them) */
    pthread_t *threads;
    pthread_mutex_t run_lock;  /* one ps_pool_for at a time */
    pthread_mutex_t mu;        /* the sleeps on cv_work and cv_done */
    pthread_cond_t cv_work;
    pthread_cond_t cv_done;
    _Atomic uint64_t generation; /* bumped (release) for every job, after its fields are set */
    _Atomic int32_t n_active;    /* workers still inside the current job */
    _Atomic bool stop;
    /* the current job: written before the generation's bump, read after it */
    ps_pool_fn fn;
    void *ctx;
    int64_t n_tasks;
    bool runs;                 /* ps_pool_for_runs: the ranges below, not `next` */
    _Atomic int64_t next;
    _Atomic uint64_t *range;   /* per thread: back << 32 | front (ps_pool_for_runs) */
    void *range_mem;           /* the allocation of range, as ps_free takes it */
};

typedef struct {
    ps_pool *pool;
    int32_t index;
    uint64_t seen; /* the generation of the last job before this worker started */
} worker_arg;

/* ---- fork(): the live pools and registered locks, and the handlers ---------------------- */

static pthread_mutex_t fork_mu = PTHREAD_MUTEX_INITIALIZER; /* the two lists below */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static ps_pool *fork_pools;
static ps_fork_lock *fork_locks;

static void fork_prepare(void) {
    pthread_mutex_lock(&fork_mu);
    for (ps_pool *p = fork_pools; p; p = p->fork_next) {
        pthread_mutex_lock(&p->run_lock);
        pthread_mutex_lock(&p->mu);
    }
    for (ps_fork_lock *l = fork_locks; l; l = l->next) pthread_mutex_lock(l->mu);
}

static void fork_parent(void) {
    for (ps_fork_lock *l = fork_locks; l; l = l->next) pthread_mutex_unlock(l->mu);
    for (ps_pool *p = fork_pools; p; p = p->fork_next) {
        pthread_mutex_unlock(&p->mu);
        pthread_mutex_unlock(&p->run_lock);
    }
    pthread_mutex_unlock(&fork_mu);
}

/* Only the forking thread exists here, and it holds every lock: each is made anew (a condition
 * variable may still count waiters that are gone). */
static void fork_child(void) {
    for (ps_fork_lock *l = fork_locks; l; l = l->next) pthread_mutex_init(l->mu, NULL);
    for (ps_pool *p = fork_pools; p; p = p->fork_next) {
        pthread_mutex_init(&p->run_lock, NULL);
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->cv_work, NULL);
        pthread_cond_init(&p->cv_done, NULL);
        atomic_store(&p->n_active, 0);
        p->respawn = p->n_workers > 0 || p->respawn;
        p->n_workers = 0;
    }
    pthread_mutex_init(&fork_mu, NULL);
}

static void fork_register(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

void ps_fork_lock_add(ps_fork_lock *l, pthread_mutex_t *mu) {
    pthread_once(&fork_once, fork_register);
    l->mu = mu;
    l->prev = NULL;
    pthread_mutex_lock(&fork_mu);
    l->next = fork_locks;
    if (fork_locks) fork_locks->prev = l;
    fork_locks = l;
    pthread_mutex_unlock(&fork_mu);
}

void ps_fork_lock_remove(ps_fork_lock *l) {
    pthread_mutex_lock(&fork_mu);
    if (l->prev) l->prev->next = l->next;
    else if (fork_locks == l) fork_locks = l->next;
    if (l->next) l->next->prev = l->prev;
    l->prev = l->next = NULL;
    pthread_mutex_unlock(&fork_mu);
}

static void fork_pool_add(ps_pool *p) {
    pthread_once(&fork_once, fork_register);
    pthread_mutex_lock(&fork_mu);
    p->fork_next = fork_pools;
    if (fork_pools) fork_pools->fork_prev = p;
    fork_pools = p;
    pthread_mutex_unlock(&fork_mu);
}

static void fork_pool_remove(ps_pool *p) {
    pthread_mutex_lock(&fork_mu);
    if (p->fork_prev) p->fork_prev->fork_next = p->fork_next;
    else if (fork_pools == p) fork_pools = p->fork_next;
    if (p->fork_next) p->fork_next->fork_prev = p->fork_prev;
    pthread_mutex_unlock(&fork_mu);
}

#ifdef PS_TESTING
static _Atomic int test_poll = -1;
void ps_test_pool_poll(int mode) { atomic_store(&test_poll, mode < 0 ? -1 : mode > 0); }
#endif

static inline uint64_t range_of(uint32_t front, uint32_t back) {
    return (uint64_t)back << 32 | front;
}

/* How many tasks range r still holds. */
static inline uint32_t range_left(uint64_t r) {
    const uint32_t f = (uint32_t)r, b = (uint32_t)(r >> 32);
    return b > f ? b - f : 0;
}

/* The front index of range r taken into *task; false when r is empty. */
static bool take_front(_Atomic uint64_t *r, int64_t *task) {
    uint64_t v = atomic_load(r);
    for (;;) {
        const uint32_t f = (uint32_t)v, b = (uint32_t)(v >> 32);
        if (f >= b) return false;
        if (atomic_compare_exchange_weak(r, &v, range_of(f + 1, b))) {
            *task = f;
            return true;
        }
    }
}

/* The back half (rounded up) of the fullest range but `self`'s moved into `self`'s (empty) range;
 * false when every other range is empty. */
static bool steal_half(ps_pool *p, int32_t self) {
    for (;;) {
        int32_t victim = -1;
        uint64_t v = 0; /* the victim's range as the scan saw it */
        for (int32_t t = 0; t < p->n_threads; t++) {
            const uint64_t r = atomic_load(&p->range[t]);
            if (t != self && range_left(r) > range_left(v)) {
                v = r;
                victim = t;
            }
        }
        if (victim < 0) return false;
        const uint32_t f = (uint32_t)v, b = (uint32_t)(v >> 32);
        const uint32_t k = (b - f + 1) / 2;
        if (atomic_compare_exchange_strong(&p->range[victim], &v, range_of(f, b - k))) {
            atomic_store(&p->range[self], range_of(b - k, b));
            return true;
        }
    }
}

static void run_tasks(ps_pool *p, int32_t thread_index) {
    if (p->runs) {
        int64_t i;
        do {
            while (take_front(&p->range[thread_index], &i)) p->fn(p->ctx, i, thread_index);
        } while (steal_half(p, thread_index));
        return;
    }
    for (;;) {
        int64_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n_tasks) break;
        p->fn(p->ctx, i, thread_index);
    }
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Polls for up to SPIN_S (none unless p->spin) until the job's generation differs from seen
 * (want_idle false) or no worker is active (want_idle true); true when it saw that. */
static bool poll_for(ps_pool *p, uint64_t seen, bool want_idle) {
    if (!p->spin) return false;
    double t0 = 0;
    for (uint32_t i = 0;; i++) {
        if (want_idle ? atomic_load_explicit(&p->n_active, memory_order_acquire) == 0
                      : atomic_load_explicit(&p->generation, memory_order_acquire) != seen ||
                            atomic_load_explicit(&p->stop, memory_order_relaxed))
            return true;
        cpu_relax();
        if (i % 64 == 63) { /* the clock every 64 polls */
            const double t = ps_now_s();
            if (t0 == 0) t0 = t;
            else if (t - t0 > SPIN_S) return false;
        }
    }
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    ps_pool *p = wa->pool;
    int32_t index = wa->index;
    uint64_t seen = wa->seen;
    ps_free(wa);
    for (;;) {
        if (!poll_for(p, seen, false)) {
            pthread_mutex_lock(&p->mu);
            while (!atomic_load(&p->stop) && atomic_load(&p->generation) == seen)
                pthread_cond_wait(&p->cv_work, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = atomic_load_explicit(&p->generation, memory_order_acquire);
        run_tasks(p, index);
        if (atomic_fetch_sub_explicit(&p->n_active, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

/* Starts the workers 1 .. n_threads - 1 (p->n_workers counts those running, in order). False
 * when one could not be started (the ones before it run). */
static bool start_workers(ps_pool *p) {
    const uint64_t gen = atomic_load(&p->generation);
    for (int32_t i = p->n_workers; i < p->n_threads - 1; i++) {
        worker_arg *wa = ps_malloc(sizeof *wa);
        if (wa) {
            wa->pool = p;
            wa->index = i + 1;
            wa->seen = gen;
        }
        if (!wa || pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
            ps_free(wa);
            return false;
        }
        p->n_workers = i + 1;
    }
    return true;
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
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    p->spin = online > 0 && n_threads <= online;
#ifdef PS_TESTING
    if (atomic_load(&test_poll) >= 0) p->spin = atomic_load(&test_poll) == 1;
#endif
    pthread_mutex_init(&p->run_lock, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (n_threads > 1) {
        p->threads = ps_calloc((size_t)n_threads - 1, sizeof(pthread_t));
        p->range = p->range_mem = ps_calloc((size_t)n_threads, sizeof *p->range);
        if (!p->threads || !p->range) {
            p->n_threads = 1;
            ps_pool_free(p);
            return PS_ERR_NOMEM;
        }
        if (!start_workers(p)) {
            ps_pool_free(p); /* joins the ones started */
            return PS_ERR_NOMEM;
        }
    }
    fork_pool_add(p);
    *out = p;
    return PS_OK;
}

void ps_pool_free(ps_pool *p) {
    if (!p) return;
    fork_pool_remove(p);
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int32_t i = 0; i < p->n_workers; i++) pthread_join(p->threads[i], NULL);
    ps_free(p->threads);
    ps_free(p->range_mem);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run_lock);
    ps_free(p);
}

int32_t ps_pool_size(const ps_pool *p) { return p ? p->n_threads : 1; }

static void pool_run(ps_pool *p, int64_t n_tasks, ps_pool_fn fn, void *ctx, bool runs) {
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (int64_t i = 0; i < n_tasks; i++) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->run_lock);
    if (p->respawn) { /* the first job in a child of fork() */
        p->respawn = false;
        start_workers(p); /* a worker missing leaves its tasks (and ranges) to the others */
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    p->runs = runs && n_tasks <= UINT32_MAX;
    atomic_store(&p->next, 0);
    if (p->runs)
        for (int32_t t = 0; t < p->n_threads; t++)
            atomic_store(&p->range[t], range_of((uint32_t)(n_tasks * t / p->n_threads),
                                                (uint32_t)(n_tasks * (t + 1) / p->n_threads)));
    atomic_store(&p->n_active, p->n_workers);
    const uint64_t gen = atomic_load(&p->generation);
    atomic_store_explicit(&p->generation, gen + 1, memory_order_release);
    pthread_mutex_lock(&p->mu); /* a worker asleep, or about to sleep, on the old generation */
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, 0);
    if (!poll_for(p, gen, true)) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->n_active) > 0) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_unlock(&p->run_lock);
}

void ps_pool_for(ps_pool *p, int64_t n_tasks, ps_pool_fn fn, void *ctx) {
    pool_run(p, n_tasks, fn, ctx, false);
}

void ps_pool_for_runs(ps_pool *p, int64_t n_tasks, ps_pool_fn fn, void *ctx) {
    pool_run(p, n_tasks, fn, ctx, true);
}
