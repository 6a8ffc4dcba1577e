/*
 * test_scorers.c — what scorers compute beside the logprobs, in the library (stories260K from
 * ../shared):
 *   - named tokens (ps_score_params.token_ids): every value bitwise float32(logit[id]) - the
 *     canonical lse of the session's own logits (ps_session_forward, ps_lse_f32), for ids of
 *     every rank; equal to top_logprobs where the id is in the top-K; entry 0 NaN; bitwise
 *     the same across chunk 1/7/256, 1 or 3 threads, ps_score_batch (3 prompts per pass) and
 *     the prefix cache (a prompt whose blocks are cached: the score reads none of them and
 *     still equals the uncached one; the rest of the result too); generated tokens have them;
 *   - continuations (ps_score_params.continuation_start): continuation_logprob is the double
 *     sum of the float32 logprobs from the start, is_greedy whether each is the top-1 (k >= 1:
 *     top_ids[0]); the same with k 0, with stats, through the cache and in a batch;
 *   - ps_vocab_tokenize_pair: lm-eval's rule on a few pairs (whitespace moved, an empty
 *     context is BOS, the capacity protocol), and its errors;
 *   - bad input: an id out of range (PS_ERR_TOKEN_RANGE naming its index), more ids than the
 *     vocabulary, a continuation_start outside 1..n-1.
 */
#include "promptscore.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

enum { N = 300, K = 8 };

static ps_score_result *score(ps_session *s, const int32_t *toks, int32_t n,
                              const ps_score_params *p) {
    ps_score_result *r = NULL;
    ps_error e;
    ps_status st = ps_score_tokens(s, toks, n, p, &r, &e);
    CHECKF(st == PS_OK, "score: %s", e.message);
    return r;
}

/* Whether two results' named values (and logprobs, top-K) are bitwise equal. */
static bool same(const ps_score_result *a, const ps_score_result *b) {
    if (!a || !b || a->n_total != b->n_total || a->n_token_ids != b->n_token_ids) return false;
    const size_t n = (size_t)a->n_total;
    return !memcmp(a->token_id_logprobs, b->token_id_logprobs, n * (size_t)a->n_token_ids * 4) &&
           !memcmp(a->logprobs + 1, b->logprobs + 1, (n - 1) * 4) &&
           !memcmp(a->top_ids, b->top_ids, n * (size_t)a->k * 4) &&
           a->continuation_start == b->continuation_start &&
           !memcmp(&a->continuation_logprob, &b->continuation_logprob, sizeof(double)) &&
           a->is_greedy == b->is_greedy;
}

static void test_pair(const ps_vocab *v) {
    int32_t ids[64], n = 0, start = 0, want[64], nw = 0;
    ps_error e;
    /* trailing spaces move: the same tokens as the context without them */
    CHECK(ps_vocab_tokenize_pair(v, "Once upon a time  ", 18, "there", 5, true, true, ids, 64,
                                 &n, &start, &e) == PS_OK);
    CHECK(ps_vocab_tokenize(v, "Once upon a time  there", 23, true, true, want, 64, &nw, NULL) ==
          PS_OK);
    CHECK(n == nw && !memcmp(ids, want, (size_t)n * 4));
    CHECK(ps_vocab_tokenize(v, "Once upon a time", 16, true, true, want, 64, &nw, NULL) == PS_OK);
    CHECKF(start == nw && !memcmp(ids, want, (size_t)nw * 4), "start %d, context %d", start, nw);
    /* an empty context: BOS, then the continuation without BOS */
    CHECK(ps_vocab_tokenize_pair(v, "", 0, "Once upon", 9, true, true, ids, 64, &n, &start, &e) ==
          PS_OK);
    CHECK(ps_vocab_tokenize(v, "Once upon", 9, false, true, want, 64, &nw, NULL) == PS_OK);
    CHECK(start == 1 && ids[0] == ps_vocab_bos(v) && n == nw + 1 &&
          !memcmp(ids + 1, want, (size_t)nw * 4));
    /* the capacity protocol: the count is given when the buffer is short */
    int32_t one[1] = {-5};
    CHECK(ps_vocab_tokenize_pair(v, "a b", 3, " c d", 4, true, true, one, 1, &n, &start, &e) ==
          PS_OK);
    CHECK(n > 1 && one[0] == ps_vocab_bos(v));
    CHECK(ps_vocab_tokenize_pair(v, "a b", 3, " c d", 4, true, true, NULL, 0, &nw, &start, &e) ==
          PS_OK && nw == n);
    /* errors */
    CHECK(ps_vocab_tokenize_pair(v, "abc", 3, "", 0, true, true, ids, 64, &n, &start, &e) ==
          PS_ERR_INVALID_ARG);
    CHECK(strstr(e.message, "no tokens of its own") != NULL);
    CHECK(ps_vocab_tokenize_pair(v, "  ", 2, "x", 1, false, true, ids, 64, &n, &start, &e) ==
          PS_ERR_INVALID_ARG);
    CHECK(strstr(e.message, "only whitespace") != NULL);
    CHECK(ps_vocab_tokenize_pair(NULL, "a", 1, "b", 1, true, true, ids, 64, &n, &start, &e) ==
          PS_ERR_INVALID_ARG);
}

int main(void) {
    const char *sh = ps_test_shared();
    if (!sh) {
        SKIP("../shared missing: the cases need stories260K");
        return ps_test_done("test_scorers");
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", sh);
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    if (ps_model_load(path, &mp, &m, NULL) != PS_OK) {
        SKIP("cannot load %s", path);
        return ps_test_done("test_scorers");
    }
    const ps_vocab *v = ps_model_vocab(m);
    const int32_t nv = ps_vocab_n_tokens(v);
    test_pair(v);

    ps_pool *pool3 = NULL;
    CHECK(ps_pool_create(3, &pool3) == PS_OK);
    ps_session_params sp = ps_session_default_params();
    ps_session *s1 = NULL, *s3 = NULL;
    CHECK(ps_session_create(m, &sp, &s1, NULL) == PS_OK);
    sp.pool = pool3;
    CHECK(ps_session_create(m, &sp, &s3, NULL) == PS_OK);
    int32_t toks[N];
    toks[0] = 1;
    for (int i = 1; i < N; i++) toks[i] = 3 + (int32_t)((i * 7919u) % 500u);
    /* every id of the vocabulary, in a scrambled order, and one repeated */
    int32_t *named = malloc((size_t)(nv + 1) * sizeof *named);
    for (int32_t i = 0; i < nv; i++) named[i] = (int32_t)(((int64_t)i * 389) % nv);
    named[nv] = named[3];
    const int32_t n_named = nv; /* the vocabulary size: the most allowed */

    ps_score_params p = ps_score_default_params();
    p.k = K;
    p.token_ids = named;
    p.n_token_ids = n_named;
    ps_score_result *base = score(s1, toks, N, &p);

    /* the definition: float32 logit - the canonical lse of the session's own logits */
    float *logits = malloc((size_t)N * (size_t)nv * sizeof *logits);
    ps_session_reset(s1);
    for (int32_t p0 = 0; p0 < N; p0 += 100)
        CHECK(ps_session_forward(s1, toks + p0, 100, logits + (size_t)p0 * (size_t)nv, NULL) ==
              PS_OK);
    if (base) {
        int bad = 0, bad_top = 0, in_top = 0;
        for (int32_t t = 0; t < n_named; t++) bad += !isnan(base->token_id_logprobs[t]);
        for (int32_t i = 1; i < N; i++) {
            const float *row = logits + (size_t)(i - 1) * (size_t)nv;
            const float lse = ps_lse_f32(row, nv);
            const float *got = base->token_id_logprobs + (size_t)i * (size_t)n_named;
            for (int32_t t = 0; t < n_named; t++) {
                const float want = row[named[t]] - lse;
                bad += memcmp(&got[t], &want, 4) != 0;
                for (int j = 0; j < K; j++)
                    if (base->top_ids[(size_t)i * K + (size_t)j] == named[t]) {
                        in_top++;
                        bad_top += memcmp(&got[t], &base->top_logprobs[(size_t)i * K + (size_t)j], 4) != 0;
                    }
            }
        }
        CHECKF(bad == 0, "%d named values differ from float32 logit - lse (entry 0 NaN)", bad);
        CHECKF(bad_top == 0 && in_top == (N - 1) * K,
               "%d of %d top-K entries differ from the named value", bad_top, in_top);
    }

    /* invariance: chunk, threads, batching, the prefix cache */
    int32_t chunks[] = {1, 7, 256};
    for (int c = 0; c < 3; c++)
        for (int th = 0; th < 2; th++) {
            ps_score_params q = p;
            q.chunk = chunks[c];
            ps_score_result *r = score(th ? s3 : s1, toks, N, &q);
            CHECKF(same(base, r), "chunk %d threads %d: named values differ", chunks[c], th ? 3 : 1);
            ps_score_result_free(r);
        }
    ps_prefix_cache *cache = NULL;
    ps_prefix_cache_params cp = ps_prefix_cache_default_params();
    CHECK(ps_prefix_cache_create(m, &cp, &cache, NULL) == PS_OK);
    {
        ps_score_params q = p;
        q.token_ids = NULL;
        q.n_token_ids = 0;
        q.cache = cache;
        ps_score_result *warm = score(s1, toks, N, &q); /* fills the cache */
        ps_prefix_cache_stats a, b;
        ps_prefix_cache_get_stats(cache, &a);
        q.token_ids = named;
        q.n_token_ids = n_named;
        ps_score_result *r = score(s1, toks, N, &q);
        ps_prefix_cache_get_stats(cache, &b);
        CHECKF(a.blocks > 0 && b.hits == a.hits, "blocks %lld, hits %lld -> %lld: a named score "
               "must read no block", (long long)a.blocks, (long long)a.hits, (long long)b.hits);
        CHECK(same(base, r));
        /* and the blocks it adds serve a later score without named tokens bitwise */
        q.token_ids = NULL;
        q.n_token_ids = 0;
        ps_score_result *again = score(s1, toks, N, &q);
        CHECK(warm && again && !memcmp(warm->logprobs + 1, again->logprobs + 1, (N - 1) * 4));
        ps_score_result_free(warm);
        ps_score_result_free(again);
        ps_score_result_free(r);
    }
    /* ps_score_batch: three prompts (two sharing a prefix, with and without the cache) */
    {
        int32_t toks2[N];
        memcpy(toks2, toks, sizeof toks2);
        toks2[200] = 9;
        ps_score_params q[3] = {p, p, p};
        q[1].cache = cache;
        q[2].continuation_start = 250;
        ps_score_prompt pr[3] = {{toks, N, &q[0]}, {toks2, N, &q[1]}, {toks, N, &q[2]}};
        ps_score_result *rs[3] = {NULL, NULL, NULL};
        ps_error e;
        CHECKF(ps_score_batch(s3, pr, 3, 3, rs, &e) == PS_OK, "batch: %s", e.message);
        CHECK(same(base, rs[0]));
        ps_score_params q1 = p;
        ps_score_result *r2 = score(s1, toks2, N, &q1);
        CHECK(same(r2, rs[1]));
        ps_score_params q2 = p;
        q2.continuation_start = 250;
        ps_score_result *r3 = score(s1, toks, N, &q2);
        CHECK(same(r3, rs[2]));
        ps_score_result_free(r2);
        ps_score_result_free(r3);
        for (int i = 0; i < 3; i++) ps_score_result_free(rs[i]);
    }
    /* generated tokens get them too */
    {
        ps_score_params q = p;
        q.max_tokens = 4;
        q.stop_at_eos = false;
        ps_score_result *r = score(s1, toks, 50, &q);
        if (r) {
            int bad = 0;
            for (int32_t i = 50; i < r->n_total; i++)
                for (int32_t t = 0; t < n_named; t++)
                    if (named[t] == r->tokens[i])
                        bad += memcmp(&r->token_id_logprobs[(size_t)i * (size_t)n_named + (size_t)t],
                                      &r->logprobs[i], 4) != 0;
            CHECKF(r->n_gen == 4 && bad == 0, "n_gen %d, %d generated values off", r->n_gen, bad);
        }
        ps_score_result_free(r);
    }

    /* continuations: the sum and is_greedy, with k 8, k 0 (rank only), stats and the cache */
    {
        int32_t gre[40];
        gre[0] = 1;
        /* a greedy continuation: each token the top-1 of the row before it */
        ps_session_reset(s1);
        float *row = malloc((size_t)nv * sizeof *row);
        for (int i = 1; i < 40; i++) {
            CHECK(ps_session_forward(s1, gre + i - 1, 1, row, NULL) == PS_OK);
            int32_t best = 0;
            for (int32_t j = 1; j < nv; j++)
                if (row[j] > row[best]) best = j;
            gre[i] = best;
        }
        free(row);
        for (int variant = 0; variant < 4; variant++) {
            ps_score_params q = ps_score_default_params();
            q.k = variant == 1 ? 0 : 3;
            q.stats = variant == 2;
            q.cache = variant == 3 ? cache : NULL;
            q.continuation_start = 20;
            for (int pass = 0; pass < (variant == 3 ? 2 : 1); pass++) {
                ps_score_result *g = score(s1, gre, 40, &q);
                ps_score_result *x = score(s1, toks, 40, &q);
                if (!g || !x) break;
                double sum = 0;
                for (int i = 20; i < 40; i++) sum += (double)x->logprobs[i];
                CHECKF(g->is_greedy && !x->is_greedy && g->continuation_start == 20 &&
                           x->continuation_logprob == sum,
                       "variant %d pass %d: greedy %d/%d, sum %.17g vs %.17g", variant, pass,
                       g->is_greedy, x->is_greedy, x->continuation_logprob, sum);
                CHECK(variant == 2 ? g->rank != NULL : g->rank == NULL); /* dropped unless asked */
                ps_score_result_free(g);
                ps_score_result_free(x);
            }
        }
        /* is_greedy fails on the one continuation token that is not the top-1 */
        gre[30] = gre[30] == 5 ? 6 : 5;
        ps_score_params q = ps_score_default_params();
        q.continuation_start = 30;
        ps_score_result *r = score(s1, gre, 40, &q);
        CHECK(r && !r->is_greedy);
        ps_score_result_free(r);
    }

    /* bad input */
    {
        ps_score_result *r = NULL;
        ps_error e;
        ps_score_params q = ps_score_default_params();
        int32_t bad_ids[3] = {1, nv, 2};
        q.token_ids = bad_ids;
        q.n_token_ids = 3;
        CHECK(ps_score_tokens(s1, toks, 10, &q, &r, &e) == PS_ERR_TOKEN_RANGE && !r);
        CHECKF(strstr(e.message, "token_ids[1]") != NULL, "%s", e.message);
        q.token_ids = named;
        q.n_token_ids = nv + 1;
        CHECK(ps_score_tokens(s1, toks, 10, &q, &r, &e) == PS_ERR_INVALID_ARG && !r);
        q.n_token_ids = -1;
        CHECK(ps_score_tokens(s1, toks, 10, &q, &r, &e) == PS_ERR_INVALID_ARG);
        q.token_ids = NULL;
        q.n_token_ids = 0;
        q.continuation_start = 10;
        CHECK(ps_score_tokens(s1, toks, 10, &q, &r, &e) == PS_ERR_INVALID_ARG);
        CHECK(strstr(e.message, "continuation_start") != NULL);
        q.continuation_start = -1;
        CHECK(ps_score_tokens(s1, toks, 10, &q, &r, &e) == PS_ERR_INVALID_ARG);
        /* and by default the new fields are off */
        q.continuation_start = 0;
        CHECK(ps_score_tokens(s1, toks, 10, &q, &r, &e) == PS_OK);
        CHECK(r && !r->token_id_logprobs && r->n_token_ids == 0 && r->continuation_start == 0 &&
              !r->is_greedy && !r->rank);
        ps_score_result_free(r);
    }

    free(logits);
    free(named);
    ps_score_result_free(base);
    ps_prefix_cache_free(cache);
    ps_session_free(s1);
    ps_session_free(s3);
    ps_pool_free(pool3);
    ps_model_free(m);
    return ps_test_done("test_scorers");
}
