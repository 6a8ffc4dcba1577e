/*
 * test_engine.c — the engine (engine.c) driven directly, deterministically: the test hold
 * (testhooks.h, two pipes) makes the one worker announce each prompt and wait for the test's
 * byte, so the test knows what runs and when, with no sleep standing in for synchronisation.
 * Checked: admission OK / BUSY (queue full) / DRAINING (and a submit after the drain began);
 * the drain waits for held slots and reports them until the deadline; the round robin by
 * request (a one-prompt job queued behind a three-prompt one runs second, not fourth);
 * cancellation by the waiter's `gone` (counted) and by the drain deadline (abort, told apart);
 * and that results are bitwise those of ps_score_tokens on a session of its own, also with
 * groups of max_seqs = 3 and two workers; and a cancel landing inside a group of two jobs'
 * prompts (one job cancelled, the other answered exactly); jobs queued at once forming one
 * group; a job whose next block another worker is computing (its claim in the prefix cache)
 * passed over for the job behind it. On ../shared/models/stories260K.gguf.
 */
#include "check.h"
#include "front/engine.h"
#include "front/request.h"
#include "score/prefix_cache.h"
#include "base/util.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

static ps_model *g_model;
static int g_to_worker[2], g_from_worker[2]; /* test -> worker (go), worker -> test (holding) */

static void hold_pipes(ps_engine_params *p) {
    CHECK(pipe(g_to_worker) == 0 && pipe(g_from_worker) == 0);
    p->hold.r = g_to_worker[0];
    p->hold.w = g_from_worker[1];
}
static void close_pipes(void) {
    close(g_to_worker[0]);
    close(g_to_worker[1]);
    close(g_from_worker[0]);
    close(g_from_worker[1]);
}
/* Blocks until the worker holds a prompt. */
static bool wait_held(void) {
    char c;
    return read(g_from_worker[0], &c, 1) == 1;
}
/* Lets the held prompt run. */
static void release(void) {
    char c = 'g';
    CHECK(write(g_to_worker[1], &c, 1) == 1);
}

/* A request of n id prompts, prompt i = BOS + len tokens. */
static void make_req(ps_completion_req *r, int32_t n, int32_t len, int32_t k) {
    memset(r, 0, sizeof *r);
    r->prompts = ps_calloc((size_t)n, sizeof *r->prompts);
    r->n_prompts = n;
    r->logprobs = k;
    r->temperature = 1;
    r->top_p = 1;
    for (int32_t i = 0; i < n; i++) {
        r->prompts[i].ids = ps_malloc((size_t)len * sizeof(int32_t));
        r->prompts[i].n = len;
        r->prompts[i].ids[0] = 1;
        for (int32_t t = 1; t < len; t++) r->prompts[i].ids[t] = 3 + (t * 37 + i * 11) % 500;
        r->prompt_tokens += len;
    }
}

/* The engine's job for request r (as the server makes it). */
static ps_engine_job *job_new(const ps_completion_req *r, uint64_t seed) {
    const ps_score_params sp = ps_completion_score_params(r, seed);
    ps_engine_job *j = ps_engine_job_new(r->n_prompts, &sp);
    for (int32_t i = 0; j && i < r->n_prompts; i++)
        ps_engine_job_set_prompt(j, i, r->prompts[i].ids, r->prompts[i].n);
    return j;
}

static bool gone_yes(void *ctx) {
    (void)ctx;
    return true;
}

/* Lets the held prompt run once the engine has counted the cancellation (so the job's flag is
 * set before the scorer looks at it): a thread, since the test's own waits in ps_engine_wait. */
static void *release_after_cancel(void *arg) {
    ps_engine *e = arg;
    ps_engine_stats st;
    do {
        sched_yield();
        ps_engine_get_stats(e, &st);
    } while (st.cancelled == 0);
    release();
    return NULL;
}

/* Every prompt's result bitwise what ps_score_tokens gives on a fresh session of its own. */
static bool same_as_direct(const ps_completion_req *r, const ps_engine_job *j) {
    ps_session *s = NULL;
    ps_session_params sp = ps_session_default_params();
    if (ps_session_create(g_model, &sp, &s, NULL) != PS_OK) return false;
    bool same = true;
    for (int32_t i = 0; i < r->n_prompts && same; i++) {
        ps_score_params p = ps_score_default_params();
        p.k = r->logprobs;
        ps_score_result *d = NULL;
        const ps_score_result *x = ps_engine_job_result(j, i);
        same = x && ps_score_tokens(s, r->prompts[i].ids, r->prompts[i].n, &p, &d, NULL) == PS_OK &&
               d->n_total == x->n_total &&
               !memcmp(d->logprobs + 1, x->logprobs + 1, (size_t)(d->n_total - 1) * sizeof(float)) &&
               !memcmp(d->top_ids, x->top_ids, (size_t)d->n_total * (size_t)d->k * sizeof(int32_t));
        ps_score_result_free(d);
    }
    ps_session_free(s);
    return same;
}

/* Waits for jobs j[0..n): each must end PS_OK, bitwise the direct results; then frees them
 * and their requests and gives their slots back. */
static void finish_all(ps_engine *e, ps_completion_req *r, ps_engine_job **j, int n) {
    for (int i = 0; i < n; i++) {
        CHECK(ps_engine_wait(e, j[i], NULL, NULL) == PS_OK);
        CHECK(same_as_direct(&r[i], j[i]));
        ps_engine_job_free(j[i]);
        ps_completion_req_free(&r[i]);
        ps_engine_leave(e);
    }
}

static void test_admission_and_drain(void) {
    ps_engine_params p = ps_engine_default_params();
    p.queue = 2;
    hold_pipes(&p);
    ps_engine *e = NULL;
    ps_error err;
    CHECKF(ps_engine_create(g_model, &p, &e, &err) == PS_OK, "%s", err.message);
    if (!e) return;
    ps_completion_req ra, rb;
    make_req(&ra, 1, 20, 3);
    make_req(&rb, 1, 10, 3);
    ps_engine_job *a = job_new(&ra, 1), *b = job_new(&rb, 1);
    CHECK(ps_engine_admit(e) == PS_ENGINE_OK);
    CHECK(ps_engine_submit(e, a) == PS_ENGINE_OK);
    CHECK(wait_held()); /* a is running, held */
    CHECK(ps_engine_admit(e) == PS_ENGINE_OK);   /* slot 2 of 2 */
    CHECK(ps_engine_admit(e) == PS_ENGINE_BUSY); /* the queue is full */
    ps_engine_stats st;
    ps_engine_get_stats(e, &st);
    CHECK(st.admitted == 2 && st.queue == 2 && st.prompts_waiting == 0);
    ps_engine_drain_begin(e);
    CHECK(ps_engine_admit(e) == PS_ENGINE_DRAINING);
    CHECK(ps_engine_submit(e, b) == PS_ENGINE_DRAINING); /* slot 2 held, but draining */
    ps_engine_leave(e);                                  /* b's slot back */
    CHECK(!ps_engine_drain(e, ps_now_s())); /* a still holds its slot: the deadline, not done */
    release();
    CHECK(ps_engine_wait(e, a, NULL, NULL) == PS_OK);
    CHECK(same_as_direct(&ra, a));
    CHECK(!ps_engine_drain(e, ps_now_s())); /* finished but not left */
    ps_engine_leave(e);
    CHECK(ps_engine_drain(e, ps_now_s() + 60)); /* returns at once: no slot held */
    ps_engine_get_stats(e, &st);
    CHECK(st.admitted == 0 && st.tokens_scored == 20);
    ps_engine_job_free(a);
    ps_engine_job_free(b);
    ps_completion_req_free(&ra);
    ps_completion_req_free(&rb);
    ps_engine_free(e);
    close_pipes();
}

static void test_round_robin_and_cancel(void) {
    ps_engine_params p = ps_engine_default_params();
    hold_pipes(&p);
    ps_engine *e = NULL;
    CHECK(ps_engine_create(g_model, &p, &e, NULL) == PS_OK);
    if (!e) return;
    ps_completion_req rx, ry, rz;
    make_req(&rx, 3, 12, 2);
    make_req(&ry, 1, 12, 2);
    make_req(&rz, 2, 300, 2); /* two chunks each */
    ps_completion_req rb;
    make_req(&rb, 1, 5, 2);
    ps_engine_job *x = job_new(&rx, 1), *y = job_new(&ry, 1);
    ps_engine_job *blocker = job_new(&rb, 1);
    CHECK(ps_engine_admit(e) == PS_ENGINE_OK && ps_engine_submit(e, blocker) == PS_ENGINE_OK);
    CHECK(wait_held()); /* the blocker runs: x and y queue behind it, in this order */
    CHECK(ps_engine_admit(e) == PS_ENGINE_OK && ps_engine_submit(e, x) == PS_ENGINE_OK);
    CHECK(ps_engine_admit(e) == PS_ENGINE_OK && ps_engine_submit(e, y) == PS_ENGINE_OK);
    ps_engine_stats st;
    ps_engine_get_stats(e, &st);
    CHECK(st.prompts_waiting == 4 && st.admitted == 3);
    release();
    CHECK(ps_engine_wait(e, blocker, NULL, NULL) == PS_OK);
    CHECK(wait_held()); /* x[0]; x goes to the back of the line, behind y */
    ps_engine_get_stats(e, &st);
    CHECK(st.prompts_waiting == 3);
    release();
    CHECK(wait_held()); /* y[0], not x[1] */
    ps_engine_get_stats(e, &st);
    CHECK(st.prompts_waiting == 2);
    CHECK(!ps_engine_job_done(e, y) && !ps_engine_job_done(e, x));
    release();
    CHECK(wait_held()); /* x[1]: y is finished by now (its one prompt ran second), x is not */
    CHECK(ps_engine_job_done(e, y) && !ps_engine_job_done(e, x));
    ps_engine_get_stats(e, &st);
    CHECK(st.prompts_waiting == 1);
    release();
    CHECK(wait_held()); /* x[2] */
    release();
    CHECK(ps_engine_wait(e, y, NULL, NULL) == PS_OK);
    CHECK(ps_engine_wait(e, x, NULL, NULL) == PS_OK);
    ps_engine_job_free(blocker);
    ps_completion_req_free(&rb);
    CHECK(same_as_direct(&rx, x) && same_as_direct(&ry, y));

    /* cancelled by the waiter: its client is gone */
    ps_engine_job *z = job_new(&rz, 1);
    CHECK(ps_engine_admit(e) == PS_ENGINE_OK && ps_engine_submit(e, z) == PS_ENGINE_OK);
    CHECK(wait_held()); /* z[0] held: the waiter's poll marks it gone before it runs; z[1] is
                         * never held (the worker sees the flag first) */
    pthread_t helper;
    CHECK(pthread_create(&helper, NULL, release_after_cancel, e) == 0);
    bool aborted = true;
    ps_error err;
    CHECK(ps_engine_wait(e, z, gone_yes, NULL) == PS_ERR_CANCELLED);
    pthread_join(helper, NULL);
    CHECK(ps_engine_job_status(z, &err, &aborted) == PS_ERR_CANCELLED && !aborted);
    ps_engine_get_stats(e, &st);
    CHECK(st.cancelled == 1);
    ps_engine_job_free(z);
    for (int i = 0; i < 4; i++) ps_engine_leave(e);
    CHECK(ps_engine_drain(e, ps_now_s() + 60));

    /* past the drain deadline: abort stops a running job, told apart from a gone client */
    z = job_new(&rz, 1);
    CHECK(ps_engine_admit(e) == PS_ENGINE_OK && ps_engine_submit(e, z) == PS_ENGINE_OK);
    CHECK(wait_held());
    ps_engine_drain_begin(e);
    CHECK(!ps_engine_drain(e, ps_now_s()));
    ps_engine_abort(e);
    release(); /* z[0] runs into the abort at its first chunk; z[1] never starts */
    CHECK(ps_engine_wait(e, z, NULL, NULL) == PS_ERR_CANCELLED);
    CHECK(ps_engine_job_status(z, &err, &aborted) == PS_ERR_CANCELLED && aborted);
    ps_engine_leave(e);
    CHECK(ps_engine_drain(e, ps_now_s() + 60));
    ps_engine_job_free(x);
    ps_engine_job_free(y);
    ps_engine_job_free(z);
    ps_completion_req_free(&rx);
    ps_completion_req_free(&ry);
    ps_completion_req_free(&rz);
    ps_engine_free(e);
    close_pipes();
}

/* A cancel landing inside a group of two jobs' prompts (max_seqs 2, with the prefix cache): the
 * worker takes x[0] and y[0] as one group; while it holds y[0] (x[0] already taken into the
 * group), x's waiter is told its client is gone, so ps_score_batch meets x's cancel flag at
 * its first pass and fails as a whole. y's prompt shares x's first 40 ids (two and a half
 * cache blocks), so in that batch it was a follower waiting for x to fill the cache. x ends
 * cancelled; y is scored again alone and is bitwise the direct answer, and the cache holds
 * only what y put there (nothing of x's half-run batch). */
static void test_cancel_in_group(void) {
    ps_prefix_cache *c = NULL;
    ps_error err;
    CHECKF(ps_prefix_cache_create(g_model, NULL, &c, &err) == PS_OK, "%s", err.message);
    ps_engine_params p = ps_engine_default_params();
    p.max_seqs = 2;
    p.cache = c;
    hold_pipes(&p);
    ps_engine *e = NULL;
    CHECK(ps_engine_create(g_model, &p, &e, NULL) == PS_OK);
    if (!e || !c) {
        ps_engine_free(e);
        ps_prefix_cache_free(c);
        close_pipes();
        return;
    }
    ps_completion_req rb, rx, ry;
    make_req(&rb, 1, 5, 2);
    make_req(&rx, 1, 100, 2);
    make_req(&ry, 1, 60, 2);
    for (int32_t t = 0; t < 40; t++) ry.prompts[0].ids[t] = rx.prompts[0].ids[t];
    ps_engine_job *blocker = job_new(&rb, 1);
    ps_engine_job *x = job_new(&rx, 1), *y = job_new(&ry, 1);
    CHECK(ps_engine_admit(e) == PS_ENGINE_OK && ps_engine_submit(e, blocker) == PS_ENGINE_OK);
    CHECK(wait_held()); /* the blocker runs alone; x and y queue behind it */
    CHECK(ps_engine_admit(e) == PS_ENGINE_OK && ps_engine_submit(e, x) == PS_ENGINE_OK);
    CHECK(ps_engine_admit(e) == PS_ENGINE_OK && ps_engine_submit(e, y) == PS_ENGINE_OK);
    release();
    CHECK(ps_engine_wait(e, blocker, NULL, NULL) == PS_OK);
    CHECK(wait_held()); /* the group {x[0], y[0]}: x[0] is taken in */
    ps_engine_stats st;
    ps_engine_get_stats(e, &st);
    CHECK(st.prompts_waiting == 0); /* both prompts are in the worker's group */
    release();
    CHECK(wait_held()); /* y[0]: x is in the group, the batch has not started */
    pthread_t helper;
    CHECK(pthread_create(&helper, NULL, release_after_cancel, e) == 0);
    bool aborted = true;
    CHECK(ps_engine_wait(e, x, gone_yes, NULL) == PS_ERR_CANCELLED);
    pthread_join(helper, NULL);
    CHECK(ps_engine_job_status(x, &err, &aborted) == PS_ERR_CANCELLED && !aborted);
    CHECK(ps_engine_job_result(x, 0) == NULL);
    CHECK(ps_engine_wait(e, y, NULL, NULL) == PS_OK);
    CHECK(same_as_direct(&ry, y));
    ps_prefix_cache_stats cs;
    ps_prefix_cache_get_stats(c, &cs);
    /* blocks come only from y alone (60 ids: 3 whole blocks of 16), none from x */
    CHECKF(cs.inserts == 60 / cs.block && cs.hits == 0, "cache: %lld inserts, %lld hits",
           (long long)cs.inserts, (long long)cs.hits);
    ps_engine_get_stats(e, &st);
    CHECK(st.cancelled == 1 && st.tokens_scored == 5 + 60);
    for (int i = 0; i < 3; i++) ps_engine_leave(e);
    CHECK(ps_engine_drain(e, ps_now_s() + 60));
    ps_engine_job_free(blocker);
    ps_engine_job_free(x);
    ps_engine_job_free(y);
    ps_completion_req_free(&rb);
    ps_completion_req_free(&rx);
    ps_completion_req_free(&ry);
    ps_engine_free(e);
    ps_prefix_cache_free(c);
    close_pipes();
}

/* ps_engine_submit_all queues its jobs under one lock: the idle worker (max_seqs 3) wakes to
 * all three and takes them as one group (none left waiting at its first hold), as `score
 * --max-seqs` relies on; the results are the direct ones. */
static void test_submit_all(void) {
    ps_engine_params p = ps_engine_default_params();
    p.max_seqs = 3;
    hold_pipes(&p);
    ps_engine *e = NULL;
    CHECK(ps_engine_create(g_model, &p, &e, NULL) == PS_OK);
    if (!e) {
        close_pipes();
        return;
    }
    ps_completion_req r[3];
    ps_engine_job *j[3];
    for (int i = 0; i < 3; i++) {
        make_req(&r[i], 1, 20 + 9 * i, 3);
        j[i] = job_new(&r[i], 1);
        CHECK(ps_engine_admit(e) == PS_ENGINE_OK);
    }
    CHECK(ps_engine_submit_all(e, j, 3) == PS_ENGINE_OK);
    CHECK(wait_held());
    ps_engine_stats st;
    ps_engine_get_stats(e, &st);
    CHECKF(st.prompts_waiting == 0, "%d prompts left in line: the three were not one group",
           (int)st.prompts_waiting);
    release();
    for (int i = 1; i < 3; i++) {
        CHECK(wait_held());
        release();
    }
    finish_all(e, r, j, 3);
    ps_engine_drain_begin(e);
    ps_completion_req rd;
    make_req(&rd, 1, 5, 1);
    ps_engine_job *d = job_new(&rd, 1);
    CHECK(ps_engine_submit_all(e, &d, 1) == PS_ENGINE_DRAINING);
    ps_engine_job_free(d);
    ps_completion_req_free(&rd);
    ps_engine_free(e);
    close_pipes();
}

/* Groups (max_seqs 3) over two workers: every result still bitwise the direct one. */
static void test_groups(void) {
    ps_engine_params p = ps_engine_default_params();
    p.max_seqs = 3;
    p.n_workers = 2;
    p.n_threads = 2;
    ps_engine *e = NULL;
    CHECK(ps_engine_create(g_model, &p, &e, NULL) == PS_OK);
    if (!e) return;
    ps_completion_req r[3];
    ps_engine_job *j[3];
    for (int i = 0; i < 3; i++) {
        make_req(&r[i], 4 + i, 30 + 7 * i, 4);
        j[i] = job_new(&r[i], 1);
        CHECK(ps_engine_admit(e) == PS_ENGINE_OK && ps_engine_submit(e, j[i]) == PS_ENGINE_OK);
    }
    finish_all(e, r, j, 3);
    ps_engine_params bad = ps_engine_default_params();
    bad.max_seqs = 0;
    ps_error err;
    ps_engine *e2 = NULL;
    CHECK(ps_engine_create(g_model, &bad, &e2, &err) == PS_ERR_INVALID_ARG && !e2 &&
          strstr(err.message, "max_seqs"));
    ps_engine_free(e);
}

/* The prefix cache's in-flight claims steer the line: with a claim standing on the first block
 * of job B's prompt (as when another worker is computing it), the one worker passes B over
 * for C, queued behind it (deferred counted once), then takes B although the claim still
 * stands (alone in line: a worker never idles for a claim); without the claim nothing is
 * deferred. Every result bitwise the direct one. */
static void test_defer(void) {
    ps_prefix_cache *c = NULL;
    ps_session *s = NULL;
    ps_session_params ssp = ps_session_default_params();
    CHECK(ps_prefix_cache_create(g_model, NULL, &c, NULL) == PS_OK);
    CHECK(ps_session_create(g_model, &ssp, &s, NULL) == PS_OK); /* the workers' configuration */
    for (int claimed = 0; claimed < 2 && c && s; claimed++) {
        ps_engine_params p = ps_engine_default_params();
        p.cache = c;
        hold_pipes(&p);
        ps_engine *e = NULL;
        CHECK(ps_engine_create(g_model, &p, &e, NULL) == PS_OK);
        if (!e) {
            close_pipes();
            break;
        }
        ps_completion_req r[2];
        ps_engine_job *j[2];
        for (int i = 0; i < 2; i++) {
            make_req(&r[i], 1, 40, 3);
            for (int32_t t = 1; t < 40; t++) /* B and C apart from the first block on */
                r[i].prompts[0].ids[t] = 3 + (t * (37 + 16 * i) + 5 * claimed) % 500;
            j[i] = job_new(&r[i], 1);
            CHECK(ps_engine_admit(e) == PS_ENGINE_OK);
        }
        ps_pc_claim *cl = claimed ? ps_pcache_claim(c, ps_pcache_session_cfg(s), NULL,
                                                    r[0].prompts[0].ids, 3)
                                  : NULL;
        CHECK(!claimed || cl);
        CHECK(ps_engine_submit_all(e, j, 2) == PS_ENGINE_OK);
        ps_engine_stats st;
        for (int n = 0; n < 2; n++) {
            CHECK(wait_held());
            ps_engine_get_stats(e, &st);
            CHECKF(st.deferred == (uint64_t)claimed, "defer (claim %d), prompt %d taken: "
                   "deferred %llu", claimed, n, (unsigned long long)st.deferred);
            release();
        }
        finish_all(e, r, j, 2);
        ps_pcache_unclaim(c, cl);
        ps_engine_free(e);
        close_pipes();
    }
    ps_session_free(s);
    ps_prefix_cache_free(c);
}

int main(void) {
    const char *shared = ps_test_shared();
    if (!shared) {
        SKIP("no ../shared/models/stories260K.gguf");
        return ps_test_done("engine");
    }
    char path[4300];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    ps_model_params mp = ps_model_default_params();
    ps_error err;
    if (ps_model_load(path, &mp, &g_model, &err) != PS_OK) {
        CHECKF(0, "load: %s", err.message);
        return ps_test_done("engine");
    }
    test_admission_and_drain();
    test_round_robin_and_cancel();
    test_groups();
    test_cancel_in_group();
    test_submit_all();
    test_defer();
    ps_model_free(g_model);
    return ps_test_done("engine");
}
