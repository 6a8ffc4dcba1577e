/*
 * engine.c — admission, a round-robin line of jobs, the workers that score them, waiting with
 * cancellation, and draining (engine.h).
 *
 * One mutex guards the line and the counters. A job waits in the line (a FIFO of jobs, not of
 * prompts). A worker takes a group: one prompt of the job at the head, which then goes to the
 * back of the line if it has more, repeated up to max_seqs prompts — so a request of a thousand
 * prompts delays a small one by one prompt per request ahead of it, not by a thousand, and the
 * prompts of one lm-eval batch spread over the workers. With the prefix cache, a job whose
 * next prompt would compute a block another worker is computing right now (its claim in the
 * cache: the other choices of a question that arrived together) is passed over for the first
 * job behind it that would not, so that it runs once the blocks are cached instead of
 * computing them a second time; when every job in line is in that state the head is taken
 * anyway (a worker never idles for it). The group is scored outside the lock
 * on the worker's own session: one prompt with ps_score_tokens, several with ps_score_batch
 * (their positions packed into shared forward passes, bitwise the same scores). The
 * scorer polls the job's cancel flag between chunks; the flag is set when the waiter's client
 * is gone, when a prompt of the job failed (the rest is moot), or for every job when the drain
 * deadline passed (abort). The waiter sleeps on the job's condition variable, waking every 50
 * ms to ask whether its client is gone. A job owns its results; the engine never frees a job.
 */
#include "front/engine.h"
#include "score/score.h"
#include "run/session.h"
#include "base/util.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

/* One prompt of a job: its tokens (borrowed), and where a continuation starts in them (0:
 * none; ps_score_params.continuation_start, the one parameter that differs per prompt). */
typedef struct {
    const int32_t *ids;
    int32_t n;
    int32_t continuation_start;
} job_prompt;

struct ps_engine_job {
    ps_score_params params;     /* the caller's: k, generation, seed, stop strings */
    job_prompt *prompts;        /* n_prompts */
    int32_t n_prompts;
    ps_score_result **results;  /* n_prompts */
    atomic_bool cancel;         /* client gone, or a prompt failed */
    atomic_bool *abort;         /* the engine's: the drain deadline passed */
    /* under the engine's mu */
    int32_t next_prompt;        /* next prompt a worker takes */
    int32_t remaining;          /* prompts not yet finished */
    ps_status status;           /* first failure */
    ps_error error;
    pthread_cond_t done;
    struct ps_engine_job *next; /* FIFO link */
};

typedef struct {
    ps_engine *engine;
    pthread_t thread;
    ps_pool *pool;
    ps_session *session;
    ps_session *compare;  /* a session of ps_engine_params.compare, or NULL */
    ps_session **compares; /* one session per ps_engine_params.compares model, or NULL */
    bool started;
} worker;

/* One prompt of a group: the job and the prompt's index in it. */
typedef struct {
    ps_engine_job *job;
    int32_t prompt;
} group_item;

struct ps_engine {
    ps_engine_params p;
    worker *workers;
    int32_t n_workers;
    pthread_mutex_t mu;
    pthread_cond_t work;      /* the line is not empty, or stopping */
    pthread_cond_t left;      /* a slot was given back */
    ps_engine_job *head, *tail;
    int32_t admitted;         /* slots held */
    bool draining, stop;
    atomic_bool abort;
    uint64_t tokens_scored, tokens_generated, cancelled, deferred;
};

ps_engine_params ps_engine_default_params(void) {
    ps_engine_params p;
    memset(&p, 0, sizeof p);
    p.n_workers = 1;
    p.n_threads = 1;
    p.queue = 64;
    p.max_seqs = 1;
    p.chunk = PS_CHUNK;
    p.act = PS_ACT_NATIVE;
#ifdef PS_TESTING
    p.hold.r = p.hold.w = -1;
#endif
    return p;
}

static bool job_cancelled(void *ctx) {
    ps_engine_job *j = ctx;
    return atomic_load(&j->cancel) || atomic_load(j->abort);
}

/* Whether job j's next prompt, on worker w's session, would compute a block that another
 * worker is computing now (score.h, ps_score_block_in_flight): better run later, when that
 * block is cached. */
static bool defer_job(const ps_engine *e, const worker *w, const ps_engine_job *j) {
    if (!w->session) return false;
    const job_prompt *pr = &j->prompts[j->next_prompt];
    return ps_score_block_in_flight(e->p.cache, w->session, pr->ids, pr->n, j->params.k);
}

/* Takes up to max prompts off the line for worker w, round robin by job, passing over jobs to
 * defer while a later one need not be (under mu). */
static int32_t take_group(ps_engine *e, const worker *w, group_item *g, int32_t max) {
    int32_t n = 0;
    while (n < max && e->head) {
        ps_engine_job *j = e->head, *prev = NULL;
        if (e->p.cache && e->head->next) { /* a choice: the first job not to defer */
            ps_engine_job *q = e->head, *qp = NULL;
            while (q && defer_job(e, w, q)) {
                qp = q;
                q = q->next;
            }
            if (q && q != e->head) {
                j = q;
                prev = qp;
                e->deferred++;
            }
        }
        g[n].job = j;
        g[n].prompt = j->next_prompt++;
        n++;
        if (prev) prev->next = j->next;
        else e->head = j->next;
        if (e->tail == j) e->tail = prev;
        j->next = NULL;
        if (j->next_prompt < j->n_prompts) {
            if (e->tail) e->tail->next = j;
            else e->head = j;
            e->tail = j;
        }
    }
    return n;
}

/* The scorer's parameters for a prompt of job j on worker w: the job's, with the engine's
 * chunk, cancel flag and cache, and the worker's session of the compared model. */
static ps_score_params job_params(const worker *w, ps_engine_job *j) {
    const ps_engine *e = w->engine;
    ps_score_params p = j->params;
    p.chunk = e->p.chunk;
    p.cancel = job_cancelled;
    p.cancel_ctx = j;
    p.cache = e->p.cache;
    p.compare = w->compare;
    p.compares = w->compares;
    p.n_compares = w->compares ? e->p.n_compares : 0;
    return p;
}

/* Scores prompt i of job j alone on the worker's session; the result or the failure into
 * *res, *err. */
static ps_status score_one(worker *w, ps_engine_job *j, int32_t i, bool hold,
                           ps_score_result **res, ps_error *err) {
    *res = NULL;
    ps_error_clear(err);
    if (job_cancelled(j)) return PS_ERR_CANCELLED;
#ifdef PS_TESTING
    if (hold) ps_test_hold_wait(&w->engine->p.hold);
#endif
    ps_score_params p = job_params(w, j);
    p.continuation_start = j->prompts[i].continuation_start;
    return ps_score_tokens(w->session, j->prompts[i].ids, j->prompts[i].n, &p, res, err);
}

/* Records the outcome of prompt i of j (under mu); wakes the waiter on its last prompt. */
static void finish_one(ps_engine *e, ps_engine_job *j, int32_t i, ps_status st,
                       ps_score_result *res, const ps_error *err) {
    j->results[i] = st == PS_OK ? res : NULL;
    if (st == PS_OK) {
        e->tokens_scored += (uint64_t)res->n_prompt;
        e->tokens_generated += (uint64_t)res->n_gen;
    } else if (j->status == PS_OK || j->status == PS_ERR_CANCELLED) {
        /* the first real failure wins over a cancellation it caused */
        if (j->status == PS_OK || st != PS_ERR_CANCELLED) {
            j->status = st;
            j->error = *err;
        }
        atomic_store(&j->cancel, true); /* the rest of the job is moot */
    }
    if (--j->remaining == 0) pthread_cond_signal(&j->done);
}

/* Records one prompt's outcome (takes mu) and frees a result that is not kept. */
static void record(ps_engine *e, const group_item *it, ps_status st, ps_score_result *res,
                   const ps_error *err) {
    pthread_mutex_lock(&e->mu);
    finish_one(e, it->job, it->prompt, st, res, err);
    pthread_mutex_unlock(&e->mu);
    if (st != PS_OK) ps_score_result_free(res);
}

/* Scores a group taken off the line. One prompt: ps_score_tokens. Several: ps_score_batch
 * packs their positions into shared forward passes, each prompt with its own job's
 * parameters and cancel flag; its results are bitwise ps_score_tokens' (score.c's promise,
 * tests/test_batch.c), so the grouping never changes a score. The batch fails as a whole when
 * any prompt does (a cancelled job, say): then each prompt is scored alone, so that one job's
 * failure is its own and no other job loses its answer. Prompts of jobs cancelled before the
 * group starts are not run. The test hold (test builds only) is passed once per prompt. */
static void score_group(worker *w, const group_item *g, int32_t n) {
    ps_engine *e = w->engine;
    group_item run[PS_CHUNK];
    ps_score_params params[PS_CHUNK];
    ps_score_prompt prompts[PS_CHUNK];
    ps_score_result *res[PS_CHUNK];
    int32_t m = 0;
    ps_error err;
    ps_error_clear(&err);
    for (int32_t k = 0; k < n; k++) {
        if (n == 1 || m == PS_CHUNK || job_cancelled(g[k].job) || w->compare ||
            w->compares) {
            ps_score_result *one;
            ps_status st = score_one(w, g[k].job, g[k].prompt, true, &one, &err);
            record(e, &g[k], st, one, &err);
            continue;
        }
#ifdef PS_TESTING
        ps_test_hold_wait(&e->p.hold);
#endif
        run[m] = g[k];
        params[m] = job_params(w, g[k].job);
        const job_prompt *pr = &g[k].job->prompts[g[k].prompt];
        params[m].continuation_start = pr->continuation_start;
        prompts[m] = (ps_score_prompt){pr->ids, pr->n, NULL};
        m++;
    }
    if (m == 0) return;
    for (int32_t k = 0; k < m; k++) prompts[k].params = &params[k];
    memset(res, 0, sizeof res);
    ps_status st = ps_score_batch(w->session, prompts, m, m, res, &err);
    if (st == PS_OK) {
        for (int32_t k = 0; k < m; k++) record(e, &run[k], PS_OK, res[k], &err);
        return;
    }
    for (int32_t k = 0; k < m; k++) {
        ps_score_result_free(res[k]);
        ps_score_result *one;
        ps_status s1 = score_one(w, run[k].job, run[k].prompt, false, &one, &err);
        record(e, &run[k], s1, one, &err);
    }
}

static void *worker_main(void *arg) {
    worker *w = arg;
    ps_engine *e = w->engine;
    group_item *g = ps_malloc((size_t)e->p.max_seqs * sizeof *g);
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stop && !e->head) pthread_cond_wait(&e->work, &e->mu);
        if (!e->head) { /* stopping, nothing left */
            pthread_mutex_unlock(&e->mu);
            break;
        }
        group_item one;
        group_item *grp = g ? g : &one; /* without its buffer a worker takes one at a time */
        int32_t n = take_group(e, w, grp, g ? e->p.max_seqs : 1);
        pthread_mutex_unlock(&e->mu);
        score_group(w, grp, n);
    }
    ps_free(g);
    return NULL;
}

static void stop_workers(ps_engine *e) {
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->mu);
    for (int32_t i = 0; i < e->n_workers; i++) {
        worker *w = &e->workers[i];
        if (w->started) pthread_join(w->thread, NULL);
        ps_session_free(w->compare); /* first: it may run in the session's workspace */
        for (int32_t c = 0; w->compares && c < e->p.n_compares; c++)
            ps_session_free(w->compares[c]);
        ps_free(w->compares);
        ps_session_free(w->session);
        ps_pool_free(w->pool);
    }
    ps_free(e->workers);
    e->workers = NULL;
}

void ps_engine_free(ps_engine *e) {
    if (!e) return;
    if (e->workers) stop_workers(e);
    pthread_cond_destroy(&e->work);
    pthread_cond_destroy(&e->left);
    pthread_mutex_destroy(&e->mu);
    ps_free(e);
}

static ps_status start_workers(ps_engine *e, const ps_model *model, const ps_engine_params *pp,
                               ps_error *err);

ps_status ps_engine_create(const ps_model *model, const ps_engine_params *params,
                           ps_engine **out, ps_error *err) {
    if (!model || !params || !out) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "NULL argument");
    *out = NULL;
    ps_engine_params p = *params;
    if (p.n_workers < 1 || p.n_workers > 256)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "workers %d must be in 1..256",
                       (int)p.n_workers);
    if (p.queue < 1) return ps_fail(err, PS_ERR_INVALID_ARG, -1, "queue must be >= 1");
    if (p.max_seqs < 1 || p.max_seqs > PS_CHUNK)
        return ps_fail(err, PS_ERR_INVALID_ARG, -1, "max_seqs %d must be in 1..%d",
                       (int)p.max_seqs, PS_CHUNK);
    if (p.n_threads < 0) p.n_threads = 1;
    if (p.chunk < 1) p.chunk = PS_CHUNK;
    ps_engine *e = ps_calloc(1, sizeof *e);
    if (!e) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->work, NULL);
    pthread_cond_init(&e->left, NULL);
    atomic_init(&e->abort, false);
    e->p = p;
    e->workers = ps_calloc((size_t)p.n_workers, sizeof *e->workers);
    if (!e->workers) {
        ps_engine_free(e);
        return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
    }
    e->n_workers = p.n_workers;
    /* the workers and their pools' threads are created with every signal blocked (a new
     * thread inherits the mask), so a signal meant for the caller's process — SIGINT for
     * `score`, read by a handler on the main thread whose blocked read it must interrupt —
     * never lands on one of them */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    ps_status st = start_workers(e, model, &p, err);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (st != PS_OK) {
        ps_engine_free(e);
        return st;
    }
    *out = e;
    return PS_OK;
}

/* Each worker's pool, session and thread. */
static ps_status start_workers(ps_engine *e, const ps_model *model, const ps_engine_params *pp,
                               ps_error *err) {
    const ps_engine_params p = *pp;
    /* threads split evenly over the workers (0 with one worker: the pool's own, all CPUs) */
    int32_t per = p.n_threads == 0 && p.n_workers == 1 ? 0 : PS_MAX(1, p.n_threads / p.n_workers);
    for (int32_t i = 0; i < e->n_workers; i++) {
        worker *w = &e->workers[i];
        w->engine = e;
        ps_status st = ps_pool_create(per, &w->pool);
        if (st != PS_OK) {
            return ps_fail(err, st, -1, "cannot create a pool of %d threads: %s", (int)per,
                           ps_status_str(st));
        }
        ps_session_params sp = ps_session_default_params();
        sp.pool = w->pool;
        sp.act = p.act;
        sp.kv_type = p.kv_type;
        sp.n_batch = p.chunk;
        st = ps_session_create(model, &sp, &w->session, err);
        if (st != PS_OK) return st;
        if (p.warm_pos > 0 && p.max_seqs > 1) {
            st = ps_score_warm(w->session, p.max_seqs, p.warm_pos, err);
            if (st != PS_OK) return st;
        }
        if (p.compare) {
            st = ps_session_create(p.compare, &sp, &w->compare, err);
            if (st != PS_OK) return st;
            /* the worker runs the two one after the other: one workspace for both */
            (void)ps_session_share_workspace(w->compare, w->session);
        }
        if (p.n_compares > 0) { /* the same for each of several compared models */
            w->compares = ps_calloc((size_t)p.n_compares, sizeof *w->compares);
            if (!w->compares) return ps_fail(err, PS_ERR_NOMEM, -1, "out of memory");
            for (int32_t c = 0; c < p.n_compares; c++) {
                st = ps_session_create(p.compares[c], &sp, &w->compares[c], err);
                if (st != PS_OK) return st;
                (void)ps_session_share_workspace(w->compares[c], w->session);
            }
        }
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            return ps_fail(err, PS_ERR_NOMEM, -1, "cannot start engine worker %d", (int)i);
        }
        w->started = true;
    }
    return PS_OK;
}

ps_engine_admission ps_engine_admit(ps_engine *e) {
    pthread_mutex_lock(&e->mu);
    ps_engine_admission a = e->draining || e->stop ? PS_ENGINE_DRAINING
                            : e->admitted >= e->p.queue ? PS_ENGINE_BUSY
                                                        : PS_ENGINE_OK;
    if (a == PS_ENGINE_OK) e->admitted++;
    pthread_mutex_unlock(&e->mu);
    return a;
}

void ps_engine_leave(ps_engine *e) {
    pthread_mutex_lock(&e->mu);
    if (e->admitted > 0) e->admitted--;
    pthread_cond_broadcast(&e->left);
    pthread_mutex_unlock(&e->mu);
}

ps_engine_job *ps_engine_job_new(int32_t n_prompts, const ps_score_params *params) {
    if (n_prompts < 1 || !params) return NULL;
    ps_engine_job *j = ps_calloc(1, sizeof *j);
    if (!j) return NULL;
    j->results = ps_calloc((size_t)n_prompts, sizeof *j->results);
    j->prompts = ps_calloc((size_t)n_prompts, sizeof *j->prompts);
    if (!j->results || !j->prompts) {
        ps_free(j->results);
        ps_free(j->prompts);
        ps_free(j);
        return NULL;
    }
    j->params = *params;
    j->n_prompts = n_prompts;
    j->remaining = n_prompts;
    atomic_init(&j->cancel, false);
    j->abort = NULL;
    ps_error_clear(&j->error);
    pthread_cond_init(&j->done, NULL);
    return j;
}

void ps_engine_job_set_prompt(ps_engine_job *j, int32_t i, const int32_t *ids, int32_t n) {
    if (i < 0 || i >= j->n_prompts) return;
    j->prompts[i] = (job_prompt){ids, n, 0};
}

void ps_engine_job_set_continuation(ps_engine_job *j, int32_t i, int32_t start) {
    if (i < 0 || i >= j->n_prompts) return;
    j->prompts[i].continuation_start = start;
}

void ps_engine_job_free(ps_engine_job *j) {
    if (!j) return;
    for (int32_t i = 0; i < j->n_prompts; i++) ps_score_result_free(j->results[i]);
    ps_free(j->results);
    ps_free(j->prompts);
    pthread_cond_destroy(&j->done);
    ps_free(j);
}

const ps_score_result *ps_engine_job_result(const ps_engine_job *j, int32_t i) {
    return i >= 0 && i < j->n_prompts ? j->results[i] : NULL;
}

ps_status ps_engine_job_status(const ps_engine_job *j, ps_error *err, bool *aborted) {
    if (err) *err = j->error;
    if (aborted) *aborted = j->status == PS_ERR_CANCELLED && j->abort && atomic_load(j->abort);
    return j->status;
}

bool ps_engine_job_done(ps_engine *e, const ps_engine_job *j) {
    pthread_mutex_lock(&e->mu);
    bool done = j->remaining == 0;
    pthread_mutex_unlock(&e->mu);
    return done;
}

ps_engine_admission ps_engine_submit_all(ps_engine *e, ps_engine_job *const *jobs, int32_t n) {
    pthread_mutex_lock(&e->mu);
    if (e->draining || e->stop) {
        pthread_mutex_unlock(&e->mu);
        return PS_ENGINE_DRAINING;
    }
    for (int32_t i = 0; i < n; i++) {
        ps_engine_job *j = jobs[i];
        j->abort = &e->abort;
        if (e->tail) e->tail->next = j;
        else e->head = j;
        e->tail = j;
    }
    if (n > 0) pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->mu);
    return PS_ENGINE_OK;
}

ps_engine_admission ps_engine_submit(ps_engine *e, ps_engine_job *j) {
    return ps_engine_submit_all(e, &j, 1);
}

ps_status ps_engine_wait(ps_engine *e, ps_engine_job *j, bool (*gone)(void *ctx), void *ctx) {
    pthread_mutex_lock(&e->mu);
    while (j->remaining > 0) {
        const struct timespec until = ps_deadline_in_ms(50);
        pthread_cond_timedwait(&j->done, &e->mu, &until);
        if (j->remaining > 0 && gone && !job_cancelled(j)) {
            pthread_mutex_unlock(&e->mu);
            bool g = gone(ctx);
            pthread_mutex_lock(&e->mu);
            if (g) {
                atomic_store(&j->cancel, true);
                e->cancelled++;
            }
        }
    }
    pthread_mutex_unlock(&e->mu);
    return ps_engine_job_status(j, NULL, NULL);
}

void ps_engine_drain_begin(ps_engine *e) {
    pthread_mutex_lock(&e->mu);
    e->draining = true;
    pthread_mutex_unlock(&e->mu);
}

bool ps_engine_drain(ps_engine *e, double deadline) {
    pthread_mutex_lock(&e->mu);
    while (e->admitted > 0) {
        double now = ps_now_s();
        if (now >= deadline) break;
        double wait = PS_MIN(deadline - now, 0.05);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + (long)(wait * 1e9);
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&e->left, &e->mu, &until);
    }
    bool empty = e->admitted == 0;
    pthread_mutex_unlock(&e->mu);
    return empty;
}

void ps_engine_abort(ps_engine *e) { atomic_store(&e->abort, true); }

void ps_engine_get_stats(ps_engine *e, ps_engine_stats *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&e->mu);
    for (ps_engine_job *j = e->head; j; j = j->next)
        out->prompts_waiting += j->n_prompts - j->next_prompt;
    out->tokens_scored = e->tokens_scored;
    out->tokens_generated = e->tokens_generated;
    out->cancelled = e->cancelled;
    out->deferred = e->deferred;
    out->admitted = e->admitted;
    out->queue = e->p.queue;
    pthread_mutex_unlock(&e->mu);
}
