/*
 * engine.h — the scoring engine (engine.c): admission, a FIFO of jobs, workers that own a
 * ps_session and a ps_pool each over the one read-only ps_model, waiting with cancellation,
 * and draining with a deadline. The server and `score` hand it jobs and read back one
 * ps_score_result per prompt; it calls the scorer (the public API and score/score.h) and
 * nothing above it.
 *
 * A job is said in the scorer's terms — its prompts' token ids and one ps_score_params — not
 * in the request parser's (request.h): the engine does not depend on how a request was read
 * (an HTTP body, a JSON Lines line, a test), and the front ends translate their own requests.
 *
 * Lifecycle of a job: ps_engine_admit takes one of `queue` slots (OK, BUSY when all are held,
 * DRAINING once a drain began) — the server takes it on a request's headers, before its body
 * is read; ps_engine_submit queues the job on that slot; ps_engine_wait blocks until every
 * prompt is scored, the job fails, or `gone` (polled every 50 ms) says its client left, which
 * cancels it; ps_engine_leave gives the slot back.
 */
#ifndef PS_ENGINE_H
#define PS_ENGINE_H

#include "base/impl.h"
#include "base/testhooks.h"

typedef struct ps_engine ps_engine;
typedef struct ps_engine_job ps_engine_job;

typedef enum { PS_ENGINE_OK = 0, PS_ENGINE_BUSY = 1, PS_ENGINE_DRAINING = 2 } ps_engine_admission;

typedef struct {
    int32_t n_workers;  /* workers, one session + pool each; default 1 */
    int32_t n_threads;  /* threads for the forward passes, all workers together; default 1;
                         * 0 with one worker: all CPUs */
    int32_t queue;      /* slots: jobs admitted and not yet left; default 64 */
    int32_t max_seqs;   /* prompts a worker takes at once (a group, round robin over the jobs
                         * in line: several prompts of one job when it is alone), scored in
                         * shared forward passes by ps_score_batch; 1..PS_CHUNK, default 1.
                         * The bits of a score do not depend on it */
    int32_t chunk;      /* positions per forward pass (0: PS_CHUNK) */
    int32_t warm_pos;   /* > 0 with max_seqs > 1: each worker maps, before it takes work, the
                         * memory a batch of max_seqs prompts of up to warm_pos positions uses
                         * (ps_score_warm: the pass's logits, the kept sequences' K/V), so the
                         * first batched request does not pay its page faults; 0 (the
                         * default): none */
    ps_act act;         /* activations of the matrix products */
    ps_kv_type kv_type; /* the sessions' K/V cache type; default PS_KV_F32 */
    ps_prefix_cache *cache; /* the prefix cache the workers share (it outlives the engine);
                             * NULL = none (the default) */
    const ps_model *compare; /* a second model (same vocabulary; it outlives the engine): each
                              * worker also holds a session of it (its n_ctx the model's), and
                              * every prompt is compared with it (ps_score_params.compare),
                              * one prompt at a time; NULL = none (the default). Needs no
                              * cache and no generation */
    /* (added with many compared models) several models compared in one pass: each worker
     * holds a session of each, and every prompt is compared with all of them
     * (ps_score_params.compares), one prompt at a time. Excludes compare; NULL / 0 = none */
    const ps_model *const *compares;
    int32_t n_compares;
#ifdef PS_TESTING
    ps_test_hold hold;  /* test builds only (testhooks.h): each worker announces and waits
                         * before a prompt; {-1, -1} (the default) = off */
#endif
} ps_engine_params;

ps_engine_params ps_engine_default_params(void);

/* Starts the workers. The model must outlive the engine. err says why it could not. */
ps_status ps_engine_create(const ps_model *model, const ps_engine_params *params,
                           ps_engine **out, ps_error *err);
/* Stops the workers once the line is empty and frees everything. Every submitted job must
 * have been waited for. */
void ps_engine_free(ps_engine *e);

ps_engine_admission ps_engine_admit(ps_engine *e);
void ps_engine_leave(ps_engine *e);

/* A job of n_prompts (>= 1) prompts, each scored with a copy of *params (from
 * ps_score_default_params: k, max_tokens, temperature, top_p, seed, stop, n_stop, stop_at_eos;
 * the stop strings are borrowed and must outlive the job). The engine sets chunk, cancel,
 * cancel_ctx and cache itself. Every prompt must be set (ps_engine_job_set_prompt) before the
 * job is submitted. NULL when out of memory or n_prompts < 1. */
ps_engine_job *ps_engine_job_new(int32_t n_prompts, const ps_score_params *params);
/* Prompt i (0 <= i < n_prompts) of job j: n (>= 1) token ids, borrowed until the job is
 * freed. */
void ps_engine_job_set_prompt(ps_engine_job *j, int32_t i, const int32_t *ids, int32_t n);
/* Prompt i's continuation start (ps_score_params.continuation_start; 0, the default: none),
 * after ps_engine_job_set_prompt. */
void ps_engine_job_set_continuation(ps_engine_job *j, int32_t i, int32_t start);
/* Frees the job and its results. */
void ps_engine_job_free(ps_engine_job *j);
/* Prompt i's result, when the job succeeded (owned by the job). */
const ps_score_result *ps_engine_job_result(const ps_engine_job *j, int32_t i);
/* The job's status after ps_engine_wait: PS_OK, PS_ERR_CANCELLED (its client left, or the
 * drain deadline passed: *aborted says which), or the first prompt's failure (*err). */
ps_status ps_engine_job_status(const ps_engine_job *j, ps_error *err, bool *aborted);

/* Whether every prompt of a submitted job has finished (never blocks). */
bool ps_engine_job_done(ps_engine *e, const ps_engine_job *j);

/* Queues j on a slot the caller holds (PS_ENGINE_OK), or refuses it once a drain began
 * (PS_ENGINE_DRAINING; nothing to wait for). */
ps_engine_admission ps_engine_submit(ps_engine *e, ps_engine_job *j);
/* Queues jobs[0..n) in this order at once (one lock: a worker waking for the first sees them
 * all, so max_seqs of them can form one group), each on a slot the caller holds; or refuses
 * them all once a drain began (PS_ENGINE_DRAINING). */
ps_engine_admission ps_engine_submit_all(ps_engine *e, ps_engine_job *const *jobs, int32_t n);
/* Waits for a submitted job; gone(ctx) (may be NULL) is polled every 50 ms while it runs and
 * true cancels the job (counted in the engine's cancelled). Returns ps_engine_job_status. */
ps_status ps_engine_wait(ps_engine *e, ps_engine_job *j, bool (*gone)(void *ctx), void *ctx);

/* Draining: from ps_engine_drain_begin on, admit and submit answer DRAINING. ps_engine_drain
 * waits until no slot is held or the wall clock (ps_now_s) reaches deadline, and returns
 * whether none is; ps_engine_abort makes every running job stop at its next chunk (its status
 * PS_ERR_CANCELLED with *aborted). */
void ps_engine_drain_begin(ps_engine *e);
bool ps_engine_drain(ps_engine *e, double deadline);
void ps_engine_abort(ps_engine *e);

/* Counters and gauges for /metrics. */
typedef struct {
    uint64_t tokens_scored, tokens_generated, cancelled;
    uint64_t deferred;        /* times a worker passed over a job whose next prompt another
                                 worker was computing the blocks of (take_group) */
    int32_t admitted;         /* slots held */
    int32_t queue;            /* slots */
    int32_t prompts_waiting;  /* prompts queued, not yet started */
} ps_engine_stats;
void ps_engine_get_stats(ps_engine *e, ps_engine_stats *out);

#endif /* PS_ENGINE_H */
