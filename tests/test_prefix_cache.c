/*
 * test_prefix_cache.c — the exact prefix cache: cached answers are bitwise the uncached ones.
 *
 * On a generated model of every architecture family and several weight types (llama F32 / F16,
 * qwen3 BF16 / Q8_0, qwen2, qwen3moe, mixtral, qwen35 and qwen35moe hybrids, gemma2 / gemma3
 * and gpt-oss sliding layers, phi3, olmo2), a sequence of prompts sharing prefixes is scored
 * with a cache and every result compared bit for bit with the same prompt scored on a fresh
 * session without one: a first prompt (miss, insert), one sharing a prefix that ends mid-block,
 * the first again with a smaller K (answered from the cache) and a larger K (recomputed, then
 * stored), a prompt of exactly whole blocks, generation after a cached prompt, and a smaller
 * chunk. Four fixtures run again with a half-precision K/V cache (f16 on llama and gemma2's
 * rings, bf16 on the qwen35 hybrid and gpt-oss): the same equalities against a fresh session
 * of that kv_type, blocks of half the bytes, and a cache filled by an f16 session not found by
 * an f32 one. Then: eviction under a tiny budget (bytes within it, evictions counted, answers
 * exact), block memory recycled (a dropped or evicted block's payload serves the next new
 * block, idle memory within the budget), in-flight claims (a prompt whose next block another
 * score is computing is seen as claimed until that score inserts, or is cancelled), two threads hitting one block at once (run under TSan by `make tsan`), one cache
 * shared by sessions that differ in activation mode, K/V type, ISA or AMX (never a hit across
 * them, each answer its own configuration's), every chain hash forced to collide (the
 * PS_TESTING hook of base/testhooks.h: hits decided by the ids alone), the cache of
 * another model refused, and the allocation-fault walk over create + miss + hit (each failure a
 * clean PS_ERR_NOMEM; ASan: no leak).
 */
#include "check.h"
#include "gen/genmodel.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "base/impl.h"
#include "score/prefix_cache.h"
#include "promptscore.h"
#include "run/session.h"

#include <math.h>
#include <pthread.h>

static char out_dir[512];

static const char *outp(const char *name) {
    static char buf[4][640];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", out_dir, name);
    return buf[k];
}

/* n pseudo-random ids below V from seed s, BOS (1) first (as tests/fixture.h) */
static int32_t *make_ids(int32_t n, int32_t n_vocab, uint64_t seed) {
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    uint64_t s = seed;
    for (int32_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = i == 0 ? 1 : (int32_t)((s >> 33) % (uint64_t)n_vocab);
    }
    return ids;
}

static bool same_result(const ps_score_result *a, const ps_score_result *b, const char *what) {
    bool ok = a->n_total == b->n_total && a->n_prompt == b->n_prompt && a->k == b->k &&
              a->finish == b->finish;
    const int32_t k = a->k;
    for (int32_t i = 0; ok && i < a->n_total; i++) {
        ok = a->tokens[i] == b->tokens[i] &&
             !memcmp(&a->logprobs[i], &b->logprobs[i], sizeof(float)) &&
             !memcmp(a->top_ids + (size_t)i * k, b->top_ids + (size_t)i * k, (size_t)k * 4) &&
             !memcmp(a->top_logprobs + (size_t)i * k, b->top_logprobs + (size_t)i * k,
                     (size_t)k * 4);
        if (!ok) fprintf(stderr, "  %s: entry %d differs\n", what, i);
    }
    ok = ok && !memcmp(&a->sum_logprob, &b->sum_logprob, sizeof(double));
    CHECKF(ok, "%s: cached and uncached results differ", what);
    return ok;
}

/* The K/V cache type of the fixture being run (test_exact sets it). */
static ps_kv_type g_kv = PS_KV_F32;

/* A session of 512 positions of the current fixture's K/V type; NULL when creation fails. */
static ps_session *new_session(const ps_model *m) {
    ps_session_params ssp = ps_session_default_params();
    ssp.n_ctx = 512;
    ssp.kv_type = g_kv;
    ps_session *s = NULL;
    return ps_session_create(m, &ssp, &s, NULL) == PS_OK ? s : NULL;
}

/* Scores on a fresh session (no cache). */
static ps_score_result *score_plain(const ps_model *m, const int32_t *ids, int32_t n,
                                    const ps_score_params *sp) {
    ps_session_params ssp = ps_session_default_params();
    ssp.n_ctx = 512;
    ssp.kv_type = g_kv;
    ps_session *s = NULL;
    ps_error e;
    ps_score_result *r = NULL;
    if (ps_session_create(m, &ssp, &s, &e) != PS_OK) {
        CHECKF(0, "session: %s", e.message);
        return NULL;
    }
    ps_score_params p = *sp;
    p.cache = NULL;
    if (ps_score_tokens(s, ids, n, &p, &r, &e) != PS_OK) CHECKF(0, "score: %s", e.message);
    ps_session_free(s);
    return r;
}

static void expect_equal(const ps_model *m, ps_session *s, const int32_t *ids, int32_t n,
                         const ps_score_params *sp, const char *what) {
    ps_score_result *ref = score_plain(m, ids, n, sp), *got = NULL;
    ps_error e;
    ps_status st = ps_score_tokens(s, ids, n, sp, &got, &e);
    CHECKF(st == PS_OK, "%s: %s", what, e.message);
    if (ref && got) same_result(ref, got, what);
    ps_score_result_free(ref);
    ps_score_result_free(got);
}

static ps_model *gen_load(const ps_genmodel_params *gp, const char *file) {
    ps_error e;
    ps_model *m = NULL;
    ps_model_params mp = ps_model_default_params();
    if (ps_genmodel_write(gp, outp(file), &e) != PS_OK ||
        ps_model_load(outp(file), &mp, &m, &e) != PS_OK) {
        CHECKF(0, "%s: %s", file, e.message);
        return NULL;
    }
    return m;
}

typedef struct {
    const char *preset; /* NULL: default shape with arch */
    const char *arch;
    uint32_t type;
    ps_kv_type kv; /* the sessions' K/V cache type */
} fixture;

static const fixture FIXTURES[] = {
    {"tiny", NULL, PS_GGML_F32, PS_KV_F32},        {NULL, "llama", PS_GGML_F16, PS_KV_F32},
    {NULL, "qwen3", PS_GGML_BF16, PS_KV_F32},      {NULL, "qwen3", PS_GGML_Q8_0, PS_KV_F32},
    {NULL, "qwen2", PS_GGML_Q4_0, PS_KV_F32},      {"qwen3moe-tiny", NULL, PS_GGML_F32, PS_KV_F32},
    {"mixtral-tiny", NULL, PS_GGML_Q8_0, PS_KV_F32}, {"qwen35-tiny", NULL, PS_GGML_F32, PS_KV_F32},
    {"qwen35moe-tiny", NULL, PS_GGML_BF16, PS_KV_F32}, {"gemma2-tiny", NULL, PS_GGML_F32, PS_KV_F32},
    {"gemma3-tiny", NULL, PS_GGML_F16, PS_KV_F32}, {"gpt-oss-tiny", NULL, PS_GGML_F32, PS_KV_F32},
    {"phi3-tiny", NULL, PS_GGML_F32, PS_KV_F32},   {"olmo2-tiny", NULL, PS_GGML_F32, PS_KV_F32},
    {"tiny", NULL, PS_GGML_F32, PS_KV_F16},           {"gemma2-tiny", NULL, PS_GGML_F32, PS_KV_F16},
    {"qwen35-tiny", NULL, PS_GGML_F32, PS_KV_BF16},   {"gpt-oss-tiny", NULL, PS_GGML_BF16, PS_KV_BF16},
    {"tiny", NULL, PS_GGML_F32, PS_KV_BF16_DOT},      {"gemma2-tiny", NULL, PS_GGML_F32, PS_KV_BF16_DOT},
    {"qwen35-tiny", NULL, PS_GGML_F32, PS_KV_BF16_DOT},
};

static void fixture_params(const fixture *f, ps_genmodel_params *gp) {
    *gp = ps_genmodel_default_params();
    if (f->preset) ps_genmodel_preset(f->preset, gp, NULL);
    if (f->arch) snprintf(gp->arch, sizeof gp->arch, "%s", f->arch);
    gp->type = f->type;
    gp->n_ctx = 1024;
    gp->seed = 7;
}

/* The prompt sequence of the file comment on one model. */
static void test_exact(const fixture *f) {
    ps_genmodel_params gp;
    fixture_params(f, &gp);
    char name[96];
    snprintf(name, sizeof name, "%s-%s%s%s.gguf", f->preset ? f->preset : f->arch,
             ps_ggml_type_name(f->type), f->kv ? "-kv-" : "", f->kv ? ps_kv_type_name(f->kv) : "");
    g_kv = f->kv;
    ps_model *m = gen_load(&gp, name);
    if (!m) return;
    ps_prefix_cache *c = NULL;
    ps_error e;
    CHECKF(ps_prefix_cache_create(m, NULL, &c, &e) == PS_OK, "%s", e.message);
    ps_session_params ssp = ps_session_default_params();
    ssp.n_ctx = 512;
    ssp.kv_type = f->kv;
    ps_session *s = NULL;
    CHECKF(ps_session_create(m, &ssp, &s, &e) == PS_OK, "%s", e.message);
    if (!c || !s) {
        ps_session_free(s);
        ps_prefix_cache_free(c);
        ps_model_free(m);
        return;
    }
    ps_prefix_cache_stats st0;
    ps_prefix_cache_get_stats(c, &st0);
    const int32_t B = st0.block, V = gp.n_vocab;
    enum { N = 300 };
    int32_t *a = make_ids(N, V, 21), *b = make_ids(N, V, 22);
    const int32_t mid = 4 * B + B / 2 + 3; /* b shares a's first `mid` ids: a mid-block hit */
    memcpy(b, a, (size_t)mid * sizeof *b);
    ps_score_params sp = ps_score_default_params();
    sp.cache = c;
    sp.k = 5;
    char what[160];
#define WHAT(x) (snprintf(what, sizeof what, "%s: %s", name, x), what)
    expect_equal(m, s, a, N, &sp, WHAT("first prompt (miss)"));
    ps_prefix_cache_stats st1;
    ps_prefix_cache_get_stats(c, &st1);
    CHECKF(st1.hits == 0 && st1.misses == N / B && st1.blocks == N / B && st1.inserts == N / B,
           "%s: hits %lld misses %lld blocks %lld (B %d)", name, (long long)st1.hits,
           (long long)st1.misses, (long long)st1.blocks, B);
    if (f->kv != PS_KV_F32) {
        /* a block holds its K/V in 2-byte elements: the same prompt through an f32 session
         * is a miss (another configuration) and its blocks take the K/V bytes twice */
        const int64_t kv_half = (int64_t)m->hp.n_layer_kv * m->hp.n_head_kv * m->hp.head_dim *
                                B * 2 * 2;
        ps_prefix_cache *c32 = NULL;
        CHECKF(ps_prefix_cache_create(m, NULL, &c32, &e) == PS_OK, "%s", e.message);
        ps_session_params sp32 = ssp;
        sp32.kv_type = PS_KV_F32;
        ps_session *s32 = NULL;
        CHECKF(ps_session_create(m, &sp32, &s32, &e) == PS_OK, "%s", e.message);
        ps_score_params p32 = sp;
        ps_score_result *r32 = NULL;
        if (s32 && c32) {
            p32.cache = c32;
            CHECK(ps_score_tokens(s32, a, N, &p32, &r32, &e) == PS_OK);
            ps_score_result_free(r32);
            ps_prefix_cache_stats s32st;
            ps_prefix_cache_get_stats(c32, &s32st);
            CHECKF(s32st.bytes - st1.bytes == (N / B) * kv_half,
                   "%s: f32 blocks %lld bytes, %s blocks %lld (K/V half %lld per block)", name,
                   (long long)s32st.bytes, ps_kv_type_name(f->kv), (long long)st1.bytes,
                   (long long)kv_half);
            p32.cache = c; /* the f16 / bf16 session's cache: not a hit for f32 */
            CHECK(ps_score_tokens(s32, a, N, &p32, &r32, &e) == PS_OK);
            ps_score_result_free(r32);
            ps_prefix_cache_stats st1b;
            ps_prefix_cache_get_stats(c, &st1b);
            CHECKF(st1b.hits == st1.hits, "%s: an f32 session hit %s blocks", name,
                   ps_kv_type_name(f->kv));
            /* its f32 blocks now sit beside the others; score_plain compares against the
             * fixture's own kv type, so the rest of the sequence is unaffected */
            st1 = st1b;
        }
        ps_session_free(s32);
        ps_prefix_cache_free(c32);
    }
    expect_equal(m, s, b, N, &sp, WHAT("shared prefix ending mid-block"));
    ps_prefix_cache_stats st2;
    ps_prefix_cache_get_stats(c, &st2);
    CHECKF(st2.hits - st1.hits == mid / B, "%s: %lld block hits for a %d-id shared prefix", name,
           (long long)(st2.hits - st1.hits), mid);
    expect_equal(m, s, a, N, &sp, WHAT("the first prompt again (hit)"));
    sp.k = 2;
    expect_equal(m, s, a, N - 11, &sp, WHAT("smaller K, shorter prompt"));
    ps_prefix_cache_stats st3;
    ps_prefix_cache_get_stats(c, &st3);
    CHECKF(st3.hits - st2.hits == N / B + (N - 11) / B, "%s: smaller K was not a hit", name);
    sp.k = 8;
    expect_equal(m, s, a, N, &sp, WHAT("larger K (recomputed)"));
    ps_prefix_cache_stats st4;
    ps_prefix_cache_get_stats(c, &st4);
    CHECKF(st4.hits == st3.hits, "%s: a larger K than stored was a hit", name);
    expect_equal(m, s, a, N, &sp, WHAT("larger K again (now stored)"));
    ps_prefix_cache_stats st5;
    ps_prefix_cache_get_stats(c, &st5);
    CHECKF(st5.hits - st4.hits == N / B, "%s: the larger K was not stored", name);
    sp.k = 3;
    expect_equal(m, s, a, 4 * B, &sp, WHAT("whole blocks only"));
    expect_equal(m, s, a, B + 1, &sp, WHAT("one block and one id"));
    sp.max_tokens = 4;
    expect_equal(m, s, b, N - 40, &sp, WHAT("generation after a cached prompt"));
    sp.max_tokens = 0;
    sp.chunk = 7;
    expect_equal(m, s, b, N, &sp, WHAT("chunk 7"));
    sp.chunk = 256;
    sp.k = 0;
    expect_equal(m, s, a, N, &sp, WHAT("k 0"));
    /* a session of n_batch 16: a sliding layer's ring is then window + 15 positions, so a
     * restore writes only the ring's last positions and captures happen block by block */
    ps_session_params ssp16 = ssp;
    ssp16.n_batch = 16;
    ps_session *s16 = NULL;
    CHECKF(ps_session_create(m, &ssp16, &s16, &e) == PS_OK, "%s", e.message);
    sp.chunk = 16;
    sp.k = 5;
    if (s16) {
        expect_equal(m, s16, a, N, &sp, WHAT("n_batch 16: hit"));
        int32_t *c3 = make_ids(N, V, 23);
        memcpy(c3, a, 200 * sizeof *c3);
        expect_equal(m, s16, c3, N, &sp, WHAT("n_batch 16: partial hit, inserts"));
        expect_equal(m, s, c3, N, &sp, WHAT("n_batch 256 after n_batch 16 inserts"));
        free(c3);
    }
    ps_session_free(s16);
    /* several prompts per pass (ps_score_batch): some hit, some insert, all exact */
    {
        int32_t *d = make_ids(N, V, 24);
        memcpy(d, b, 150 * sizeof *d);
        ps_score_params bp = ps_score_default_params();
        bp.cache = c;
        bp.k = 4;
        bp.chunk = 64;
        ps_score_prompt pr[4] = {{a, N, &bp}, {d, N, &bp}, {b, N - 7, &bp}, {d, 2 * B + 5, &bp}};
        ps_score_result *res[4] = {0};
        ps_status bst = ps_score_batch(s, pr, 4, 3, res, &e);
        CHECKF(bst == PS_OK, "%s: batch: %s", name, e.message);
        for (int i = 0; bst == PS_OK && i < 4; i++) {
            ps_score_result *ref = score_plain(m, pr[i].tokens, pr[i].n_tokens, &bp);
            if (ref && res[i]) same_result(ref, res[i], WHAT("ps_score_batch with the cache"));
            ps_score_result_free(ref);
            ps_score_result_free(res[i]);
        }
        free(d);
    }
#undef WHAT
    free(a);
    free(b);
    ps_session_free(s);
    ps_prefix_cache_free(c);
    ps_model_free(m);
}

/* Prompt i's cancel callback (batch_shared): true from the given poll on. */
typedef struct {
    int polls, at;
} cancel_at;
static bool cancel_on_poll(void *ctx) {
    cancel_at *c = ctx;
    return ++c->polls >= c->at;
}

/* Prompts of one ps_score_batch call sharing prefixes that no cache holds yet: the later ones
 * wait for the first (the leader) to put its blocks in the cache, then restore them — hits
 * counted within the one call (none before the batch found them) — and every answer is bitwise
 * the uncached one: a follower sharing a prefix that ends mid-block, one at a block boundary,
 * one that is a prefix of the leader, one unrelated, and one behind a prompt that a hybrid or
 * ring model cuts short at a block end. Then the leader cancelled while its followers wait:
 * the call fails as a whole, the cache keeps no half-filled block, and the followers alone are
 * exact. */
static void test_batch_shared(const fixture *f) {
    ps_genmodel_params gp;
    fixture_params(f, &gp);
    char name[96];
    snprintf(name, sizeof name, "shared-%s-%s.gguf", f->preset ? f->preset : f->arch,
             ps_ggml_type_name(f->type));
    ps_model *m = gen_load(&gp, name);
    if (!m) return;
    ps_prefix_cache *c = NULL;
    ps_error e;
    CHECKF(ps_prefix_cache_create(m, NULL, &c, &e) == PS_OK, "%s", e.message);
    ps_session_params ssp = ps_session_default_params();
    ssp.n_ctx = 512;
    ps_session *s = NULL;
    CHECKF(ps_session_create(m, &ssp, &s, &e) == PS_OK, "%s", e.message);
    if (!c || !s) {
        ps_session_free(s);
        ps_prefix_cache_free(c);
        ps_model_free(m);
        return;
    }
    ps_prefix_cache_stats st0, st1;
    ps_prefix_cache_get_stats(c, &st0);
    const int32_t B = st0.block, V = gp.n_vocab;
    enum { N = 300 };
    const int32_t share1 = 2 * B + B / 2 + 3, share2 = 3 * B;
    int32_t *a = make_ids(N, V, 31), *f1 = make_ids(N, V, 32), *f2 = make_ids(N - 20, V, 33);
    int32_t *x = make_ids(N, V, 34), *y = make_ids(10, V, 35);
    memcpy(f1, a, (size_t)share1 * sizeof *a);
    memcpy(f2, a, (size_t)share2 * sizeof *a);
    ps_score_params bp = ps_score_default_params();
    bp.cache = c;
    bp.k = 3;
    ps_score_params small = bp;
    small.k = 2; /* a follower may take a larger K's blocks */
    char what[160];
    {
        ps_score_prompt pr[6] = {{a, N, &bp},     {f1, N, &bp},         {x, N, &bp},
                                 {y, 10, &bp},    {f2, N - 20, &small}, {a, 3 * B + 2, &bp}};
        ps_score_result *res[6] = {0};
        ps_status bst = ps_score_batch(s, pr, 6, 4, res, &e);
        CHECKF(bst == PS_OK, "%s: batch: %s", name, e.message);
        ps_prefix_cache_get_stats(c, &st1);
        /* f1 finds 2 of a's blocks, f2 3, the prefix of a 3; x and y are their own */
        CHECKF(st1.hits - st0.hits == 8, "%s: %lld block hits within one batch, want 8", name,
               (long long)(st1.hits - st0.hits));
        for (int i = 0; bst == PS_OK && i < 6; i++) {
            ps_score_result *ref = score_plain(m, pr[i].tokens, pr[i].n_tokens, pr[i].params);
            snprintf(what, sizeof what, "%s: one batch sharing prefixes, prompt %d", name, i);
            if (ref && res[i]) same_result(ref, res[i], what);
            ps_score_result_free(ref);
            ps_score_result_free(res[i]);
        }
    }
    /* the leader cancelled at its second pass (chunk 64: it needs five), its followers
     * waiting on it */
    {
        int32_t *l2 = make_ids(N, V, 36), *g1 = make_ids(N - 30, V, 37);
        memcpy(g1, l2, (size_t)share1 * sizeof *l2);
        ps_score_params lp = bp, fp = bp;
        lp.chunk = fp.chunk = 64;
        cancel_at ca = {0, 2};
        lp.cancel = cancel_on_poll;
        lp.cancel_ctx = &ca;
        ps_score_prompt pr[3] = {{l2, N, &lp}, {g1, N - 30, &fp}, {l2, 2 * B + 1, &fp}};
        ps_score_result *res[3] = {0};
        ps_prefix_cache_stats sa, sb;
        ps_prefix_cache_get_stats(c, &sa);
        ps_status bst = ps_score_batch(s, pr, 3, 3, res, &e);
        ps_prefix_cache_get_stats(c, &sb);
        CHECKF(bst == PS_ERR_CANCELLED && !res[0] && !res[1] && !res[2],
               "%s: a cancelled leader: %s (%s)", name, ps_status_str(bst), e.message);
        CHECKF(sb.blocks == sa.blocks && sb.bytes == sa.bytes && sb.inserts == sa.inserts,
               "%s: a cancelled leader changed the cache (%lld -> %lld blocks)", name,
               (long long)sa.blocks, (long long)sb.blocks);
        for (int i = 1; i < 3; i++) {
            snprintf(what, sizeof what, "%s: follower %d of a cancelled leader, alone", name, i);
            expect_equal(m, s, pr[i].tokens, pr[i].n_tokens, &fp, what);
        }
        free(l2);
        free(g1);
    }
    free(a);
    free(f1);
    free(f2);
    free(x);
    free(y);
    ps_session_free(s);
    ps_prefix_cache_free(c);
    ps_model_free(m);
}

/* A budget of 3 blocks: inserting 18 blocks evicts (unreferenced leaves first), stays within
 * the budget, and every answer stays exact. */
static void test_eviction(void) {
    ps_genmodel_params gp;
    fixture_params(&FIXTURES[0], &gp);
    ps_model *m = gen_load(&gp, "evict.gguf");
    if (!m) return;
    ps_error e;
    ps_prefix_cache *probe = NULL, *c = NULL;
    CHECK(ps_prefix_cache_create(m, NULL, &probe, &e) == PS_OK);
    /* a block's bytes: fill one block and read the counter */
    ps_session_params ssp = ps_session_default_params();
    ssp.n_ctx = 512;
    ps_session *s = NULL;
    CHECK(ps_session_create(m, &ssp, &s, &e) == PS_OK);
    int32_t *a = make_ids(300, gp.n_vocab, 5), *b = make_ids(300, gp.n_vocab, 6);
    ps_score_params sp = ps_score_default_params();
    sp.cache = probe;
    ps_score_result *r = NULL;
    CHECK(ps_score_tokens(s, a, 16, &sp, &r, &e) == PS_OK);
    ps_score_result_free(r);
    ps_prefix_cache_stats ps;
    ps_prefix_cache_get_stats(probe, &ps);
    CHECKF(ps.blocks == 1 && ps.bytes > 0, "probe: %lld blocks", (long long)ps.blocks);
    ps_prefix_cache_params cp = ps_prefix_cache_default_params();
    cp.budget_bytes = 3 * ps.bytes + ps.bytes / 2;
    CHECK(ps_prefix_cache_create(m, &cp, &c, &e) == PS_OK);
    sp.cache = c;
    expect_equal(m, s, a, 150, &sp, "evict: a");
    expect_equal(m, s, b, 150, &sp, "evict: b");
    ps_prefix_cache_stats st;
    ps_prefix_cache_get_stats(c, &st);
    CHECKF(st.evictions > 0 && st.bytes <= cp.budget_bytes && st.blocks <= 3,
           "evictions %lld, bytes %lld of %lld, blocks %lld", (long long)st.evictions,
           (long long)st.bytes, (long long)cp.budget_bytes, (long long)st.blocks);
    expect_equal(m, s, b, 150, &sp, "evict: b again");
    expect_equal(m, s, a, 150, &sp, "evict: a again");
    /* budget 0: nothing is ever cached, answers still exact */
    ps_prefix_cache *zero = NULL;
    cp.budget_bytes = 0;
    CHECK(ps_prefix_cache_create(m, &cp, &zero, &e) == PS_OK);
    sp.cache = zero;
    expect_equal(m, s, a, 150, &sp, "budget 0");
    ps_prefix_cache_get_stats(zero, &st);
    CHECK(st.blocks == 0 && st.bytes == 0);
    /* bad parameters, and a cache of another model */
    cp.budget_bytes = -1;
    ps_prefix_cache *bad = NULL;
    CHECK(ps_prefix_cache_create(m, &cp, &bad, &e) == PS_ERR_INVALID_ARG && !bad);
    cp = ps_prefix_cache_default_params();
    cp.block = 24;
    CHECK(ps_prefix_cache_create(m, &cp, &bad, &e) == PS_ERR_INVALID_ARG && !bad);
    ps_genmodel_params g2 = gp;
    g2.seed = 99;
    ps_model *m2 = gen_load(&g2, "other.gguf");
    ps_prefix_cache *c2 = NULL;
    if (m2 && ps_prefix_cache_create(m2, NULL, &c2, &e) == PS_OK) {
        sp.cache = c2;
        r = NULL;
        CHECK(ps_score_tokens(s, a, 40, &sp, &r, &e) == PS_ERR_INVALID_ARG && !r);
    }
    ps_prefix_cache_free(c2);
    ps_model_free(m2);
    free(a);
    free(b);
    ps_prefix_cache_free(zero);
    ps_prefix_cache_free(c);
    ps_prefix_cache_free(probe);
    ps_session_free(s);
    ps_model_free(m);
}

/* Block memory is recycled: a dropped block's payload waits idle (counted in the budget) and
 * the next new block of its size takes it; a new block in a full cache takes the payload of
 * the block it evicts; a payload of another size is given back when room is needed; idle
 * memory never pushes the cache over its budget; and scoring new prompts against a warm, full
 * cache reuses evicted memory with every answer exact. */
static void test_recycle(void) {
    ps_genmodel_params gp;
    fixture_params(&FIXTURES[0], &gp);
    ps_model *m = gen_load(&gp, "recycle.gguf");
    if (!m) return;
    ps_error e;
    ps_prefix_cache *c = NULL;
    ps_prefix_cache_params cp = ps_prefix_cache_default_params();
    CHECK(ps_prefix_cache_create(m, &cp, &c, &e) == PS_OK);
    if (!c) {
        ps_model_free(m);
        return;
    }
    ps_prefix_cache_stats st;
    /* a dropped block's payload serves the next block */
    ps_pc_block *b1 = NULL, *b2 = NULL, *b3 = NULL;
    /* allocations of a new block: the block, its answers (3), and the payload unless reused
     * (glibc may hand a freed payload's address back, so counting is the proof of reuse) */
    ps_alloc_fail_after(-1);
    CHECK(ps_pcache_block_new(c, 4, 4, &b1, &e) == PS_OK && b1);
    CHECKF(ps_alloc_count() == 5, "recycle: a fresh block made %lld allocations",
           (long long)ps_alloc_count());
    const size_t payload = b1 ? b1->payload : 0, bytes = b1 ? b1->bytes : 0;
    const void *mem1 = b1 ? (const void *)b1->ids : NULL;
    ps_pcache_block_drop(c, b1);
    ps_prefix_cache_get_stats(c, &st);
    CHECKF(st.idle_bytes == (int64_t)payload && st.bytes == 0,
           "recycle: idle %lld after a drop, want %zu", (long long)st.idle_bytes, payload);
    ps_alloc_fail_after(-1);
    CHECK(ps_pcache_block_new(c, 8, 4, &b2, &e) == PS_OK && b2);
    CHECKF(ps_alloc_count() == 4, "recycle: a block on an idle payload made %lld allocations",
           (long long)ps_alloc_count());
    CHECKF(b2 && (const void *)b2->ids == mem1, "recycle: the idle payload was not reused");
    ps_prefix_cache_get_stats(c, &st);
    CHECK(st.idle_bytes == 0);
    /* a block of half-precision K/V has another size: not handed the f32 payload */
    ps_pcache_block_drop(c, b2);
    CHECK(ps_pcache_block_new(c, 4, 2, &b3, &e) == PS_OK && b3);
    CHECK(b3 && (const void *)b3->ids != mem1 && b3->payload < payload);
    ps_prefix_cache_get_stats(c, &st);
    CHECK(st.idle_bytes == (int64_t)payload);
    ps_pcache_block_drop(c, b3);
    ps_prefix_cache_free(c);

    /* a full cache: room for two blocks; a third evicts the least recently used and takes its
     * payload; the idle payload of the other size is given back first (2.75 blocks: a block
     * of half-precision K/V, about half the bytes, fits beside two) */
    cp.budget_bytes = (int64_t)(2 * bytes + 3 * bytes / 4);
    CHECK(ps_prefix_cache_create(m, &cp, &c, &e) == PS_OK);
    ps_session_params ssp = ps_session_default_params();
    ssp.n_ctx = 512;
    ps_session *s = NULL;
    CHECK(ps_session_create(m, &ssp, &s, &e) == PS_OK);
    int32_t *ids[4];
    for (int i = 0; i < 4; i++) ids[i] = make_ids(40, gp.n_vocab, 50 + (uint64_t)i);
    ps_score_params sp = ps_score_default_params();
    sp.k = 4;
    sp.cache = c;
    if (c && s) {
        expect_equal(m, s, ids[0], 40, &sp, "recycle: first prompt"); /* 2 blocks: full */
        ps_prefix_cache_get_stats(c, &st);
        CHECKF(st.blocks == 2 && st.idle_bytes == 0, "recycle: %lld blocks, idle %lld",
               (long long)st.blocks, (long long)st.idle_bytes);
        ps_pc_block *held[2];
        CHECK(ps_pcache_acquire(c, ps_pcache_session_cfg(s), ids[0], 40, 4, held, 2) == 2);
        const void *leaf = held[1]->ids;
        ps_pcache_release(c, held, 2); /* the leaf (block 1) is now the least recently used */
        /* a half-precision block fits in the rest of the budget; dropped, it waits idle */
        ps_pc_block *h = NULL, *n = NULL;
        CHECK(ps_pcache_block_new(c, 4, 2, &h, &e) == PS_OK && h);
        ps_pcache_block_drop(c, h);
        ps_prefix_cache_get_stats(c, &st);
        CHECK(st.evictions == 0 && st.idle_bytes > 0 && st.idle_bytes < (int64_t)payload);
        /* an f32 block: the idle payload of the other size is freed, then the LRU leaf is
         * evicted and its payload handed over */
        ps_alloc_fail_after(-1);
        CHECK(ps_pcache_block_new(c, 4, 4, &n, &e) == PS_OK && n);
        CHECKF(ps_alloc_count() == 4, "recycle: a block evicting another made %lld allocations",
               (long long)ps_alloc_count());
        CHECKF(n && (const void *)n->ids == leaf, "recycle: the evicted block's payload was not "
               "handed over");
        ps_prefix_cache_get_stats(c, &st);
        CHECKF(st.evictions == 1 && st.blocks == 1 && st.idle_bytes == 0,
               "recycle: %lld evictions, %lld blocks, idle %lld", (long long)st.evictions,
               (long long)st.blocks, (long long)st.idle_bytes);
        ps_pcache_block_drop(c, n);
        /* new prompts against the full cache: every answer exact, the budget kept */
        for (int i = 1; i < 4; i++) {
            char what[64];
            snprintf(what, sizeof what, "recycle: prompt %d on a full cache", i);
            expect_equal(m, s, ids[i], 40, &sp, what);
            ps_prefix_cache_get_stats(c, &st);
            CHECKF(st.bytes + st.idle_bytes <= cp.budget_bytes && st.blocks == 2,
                   "recycle: bytes %lld + idle %lld over the budget %lld (%lld blocks)",
                   (long long)st.bytes, (long long)st.idle_bytes, (long long)cp.budget_bytes,
                   (long long)st.blocks);
        }
        expect_equal(m, s, ids[3], 40, &sp, "recycle: the last prompt again (a hit)");
        ps_prefix_cache_get_stats(c, &st);
        CHECK(st.hits >= 2);
    }
    for (int i = 0; i < 4; i++) free(ids[i]);
    ps_session_free(s);
    ps_prefix_cache_free(c);
    ps_model_free(m);
}

/* In-flight claims: a score holds a claim on the first block it computes until it has
 * inserted it. The leader is held at its first chunk boundary (its cancel callback): then a
 * prompt sharing its first block is claimed (ps_pcache_claimed, what the engine asks before
 * choosing a job), one sharing nothing is not, nor is one asking a larger top-K. Let go, the
 * leader inserts and its claim ends; a prompt sharing 10 of its blocks then finds them (10
 * hits, answers exact). A leader cancelled while held ends its claim with nothing inserted. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state;   /* 0 not yet polled, 1 held, 2 let go */
    bool cancel; /* the callback answers this once let go */
} gate;

static bool gate_cb(void *ctx) {
    gate *g = ctx;
    pthread_mutex_lock(&g->mu);
    if (g->state == 0) {
        g->state = 1;
        pthread_cond_broadcast(&g->cv);
        while (g->state != 2) pthread_cond_wait(&g->cv, &g->mu);
    }
    const bool c = g->cancel;
    pthread_mutex_unlock(&g->mu);
    return c;
}

static void gate_set(gate *g, int state) {
    pthread_mutex_lock(&g->mu);
    g->state = state;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

typedef struct {
    const ps_model *m;
    ps_prefix_cache *c;
    const int32_t *ids;
    int32_t n, k;
    gate *g;
    ps_score_result *r;
    ps_status st;
} flight_job;

static void *flight_thread(void *arg) {
    flight_job *j = arg;
    ps_session *s = new_session(j->m);
    ps_error e;
    if (!s) {
        j->st = PS_ERR_NOMEM;
        gate_set(j->g, 1);
        return NULL;
    }
    ps_score_params sp = ps_score_default_params();
    sp.cache = j->c;
    sp.chunk = 32;
    sp.k = j->k;
    sp.cancel = gate_cb;
    sp.cancel_ctx = j->g;
    j->st = ps_score_tokens(s, j->ids, j->n, &sp, &j->r, &e);
    ps_session_free(s);
    return NULL;
}

static void test_inflight(void) {
    ps_genmodel_params gp;
    fixture_params(&FIXTURES[0], &gp);
    ps_model *m = gen_load(&gp, "inflight.gguf");
    if (!m) return;
    int32_t *a = make_ids(200, gp.n_vocab, 61), *b = make_ids(200, gp.n_vocab, 62),
            *other = make_ids(200, gp.n_vocab, 63);
    memcpy(b, a, 160 * sizeof *b); /* 10 whole blocks shared, then apart */
    ps_score_params sp = ps_score_default_params();
    ps_score_result *rb = score_plain(m, b, 200, &sp);
    ps_session *s = new_session(m);
    ps_error e;
    CHECK(s != NULL);
    for (int cancel = 0; cancel < 2 && rb && s; cancel++) {
        const char *how = cancel ? " (cancelled leader)" : "";
        ps_prefix_cache *c = NULL;
        CHECK(ps_prefix_cache_create(m, NULL, &c, &e) == PS_OK);
        if (!c) break;
        const uint64_t cfg = ps_pcache_session_cfg(s);
        gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, cancel == 1};
        flight_job lead = {m, c, a, 200, sp.k, &g, NULL, PS_OK};
        pthread_t tl;
        pthread_create(&tl, NULL, flight_thread, &lead);
        pthread_mutex_lock(&g.mu);
        while (g.state == 0) pthread_cond_wait(&g.cv, &g.mu);
        pthread_mutex_unlock(&g.mu);
        /* the leader is held with its claim on block 0 */
        CHECKF(ps_pcache_claimed(c, cfg, b, 200, sp.k), "inflight%s: a prompt sharing the "
               "leader's first block is not claimed", how);
        CHECK(ps_pcache_claimed(c, cfg, a, 16, sp.k));
        CHECK(!ps_pcache_claimed(c, cfg, other, 200, sp.k));
        CHECK(!ps_pcache_claimed(c, cfg, b, 200, sp.k + 1)); /* its answers would not serve */
        CHECK(!ps_pcache_claimed(c, cfg ^ 1, b, 200, sp.k)); /* another configuration */
        CHECK(!ps_pcache_claimed(c, cfg, b, 15, sp.k));      /* no whole block */
        gate_set(&g, 2);
        pthread_join(tl, NULL);
        CHECKF(lead.st == (cancel ? PS_ERR_CANCELLED : PS_OK), "inflight%s: leader status %d",
               how, (int)lead.st);
        CHECKF(!ps_pcache_claimed(c, cfg, b, 200, sp.k), "inflight%s: the claim outlived its "
               "score", how);
        ps_score_params with = sp;
        with.cache = c;
        expect_equal(m, s, b, 200, &with, "inflight: after the leader");
        ps_prefix_cache_stats st;
        ps_prefix_cache_get_stats(c, &st);
        CHECKF(cancel ? st.hits == 0 : st.hits == 10, "inflight%s: %lld hits", how,
               (long long)st.hits);
        ps_score_result_free(lead.r);
        ps_prefix_cache_free(c);
    }
    ps_session_free(s);
    ps_score_result_free(rb);
    free(a);
    free(b);
    free(other);
    ps_model_free(m);
}

/* Two threads, each with its own session, score prompts sharing one cached block chain at the
 * same time (and insert their own tails); every answer is the uncached one. */
typedef struct {
    const ps_model *m;
    ps_prefix_cache *c;
    const int32_t *ids;
    int32_t n;
    const ps_score_result *ref;
    int bad;
} hit_job;

static void *hit_thread(void *arg) {
    hit_job *j = arg;
    ps_session *s = new_session(j->m);
    ps_error e;
    if (!s) {
        j->bad++;
        return NULL;
    }
    ps_score_params sp = ps_score_default_params();
    sp.cache = j->c;
    for (int it = 0; it < 8; it++) {
        ps_score_result *r = NULL;
        if (ps_score_tokens(s, j->ids, j->n, &sp, &r, &e) != PS_OK) {
            j->bad++;
            continue;
        }
        bool ok = r->n_total == j->ref->n_total &&
                  !memcmp(r->logprobs + 1, j->ref->logprobs + 1, (size_t)(r->n_total - 1) * 4) &&
                  !memcmp(r->top_ids, j->ref->top_ids, (size_t)r->n_total * (size_t)r->k * 4) &&
                  !memcmp(r->top_logprobs, j->ref->top_logprobs,
                          (size_t)r->n_total * (size_t)r->k * 4);
        if (!ok) j->bad++;
        ps_score_result_free(r);
    }
    ps_session_free(s);
    return NULL;
}

static void test_threads(void) {
    ps_genmodel_params gp;
    fixture_params(&FIXTURES[2], &gp); /* qwen3 BF16 */
    ps_model *m = gen_load(&gp, "threads.gguf");
    if (!m) return;
    ps_error e;
    ps_prefix_cache *c = NULL;
    CHECK(ps_prefix_cache_create(m, NULL, &c, &e) == PS_OK);
    int32_t *a = make_ids(120, gp.n_vocab, 31), *b = make_ids(120, gp.n_vocab, 32);
    memcpy(b, a, 70 * sizeof *b);
    ps_score_params sp = ps_score_default_params();
    ps_score_result *ra = score_plain(m, a, 120, &sp), *rb = score_plain(m, b, 120, &sp);
    /* warm the shared blocks once, then race */
    sp.cache = c;
    ps_session_params ssp = ps_session_default_params();
    ps_session *s = NULL;
    ps_score_result *r = NULL;
    if (c && ra && rb && ps_session_create(m, &ssp, &s, &e) == PS_OK &&
        ps_score_tokens(s, a, 64, &sp, &r, &e) == PS_OK) {
        hit_job j[2] = {{m, c, a, 120, ra, 0}, {m, c, b, 120, rb, 0}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, hit_thread, &j[i]);
        for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
        CHECKF(j[0].bad == 0 && j[1].bad == 0, "threads: %d and %d wrong answers", j[0].bad,
               j[1].bad);
        ps_prefix_cache_stats st;
        ps_prefix_cache_get_stats(c, &st);
        CHECKF(st.hits >= 2 * 8 * 4, "threads: %lld block hits", (long long)st.hits);
    } else {
        CHECK(0);
    }
    ps_score_result_free(r);
    ps_session_free(s);
    ps_score_result_free(ra);
    ps_score_result_free(rb);
    free(a);
    free(b);
    ps_prefix_cache_free(c);
    ps_model_free(m);
}

/* Every allocation over cache create + a missing score (inserts) + a hitting score, on a
 * hybrid model (state snapshots) and a sliding-window one, failed in turn: each a clean
 * PS_ERR_NOMEM, and a run that succeeds gives the exact answers. */
static void test_faults(const fixture *f) {
    ps_genmodel_params gp;
    fixture_params(f, &gp);
    ps_model *m = gen_load(&gp, "faults.gguf");
    if (!m) return;
    int32_t *a = make_ids(100, gp.n_vocab, 41);
    ps_score_params sp = ps_score_default_params();
    ps_score_result *ref = score_plain(m, a, 100, &sp);
    ps_session_params ssp = ps_session_default_params();
    ssp.n_ctx = 256;
    ps_session *s = NULL;
    ps_error e;
    CHECK(ps_session_create(m, &ssp, &s, &e) == PS_OK);
    int bad = 0, wrong = 0;
    int64_t n = 0;
    for (; s && ref; n++) {
        ps_alloc_fail_after(n);
        ps_prefix_cache *c = NULL;
        ps_score_result *r1 = NULL, *r2 = NULL;
        ps_status st = ps_prefix_cache_create(m, NULL, &c, &e);
        sp.cache = c;
        if (st == PS_OK) st = ps_score_tokens(s, a, 100, &sp, &r1, &e);
        if (st == PS_OK) st = ps_score_tokens(s, a, 90, &sp, &r2, &e);
        const int64_t used = ps_alloc_count();
        ps_alloc_fail_after(-1);
        if (st != PS_OK && st != PS_ERR_NOMEM) bad++;
        if (st == PS_OK && (memcmp(r1->logprobs + 1, ref->logprobs + 1, 99 * 4) ||
                            memcmp(r2->logprobs + 1, ref->logprobs + 1, 89 * 4)))
            wrong++;
        ps_score_result_free(r1);
        ps_score_result_free(r2);
        ps_prefix_cache_free(c);
        if (st == PS_OK && used <= n) break;
        if (n > 100000) break;
    }
    CHECKF(bad == 0 && wrong == 0 && n > 5, "%s: %d unclean failures, %d wrong answers over %lld",
           gp.arch, bad, wrong, (long long)n);
    printf("faults: %lld allocation points over cache create + miss + hit (%s)\n", (long long)n,
           gp.arch);
    ps_score_result_free(ref);
    ps_session_free(s);
    free(a);
    ps_model_free(m);
}

/* Scores ids on a session of these parameters: through `cache` (NULL: none). */
static ps_score_result *score_with(const ps_model *m, const ps_session_params *ssp,
                                   ps_prefix_cache *cache, const int32_t *ids, int32_t n,
                                   const char *what) {
    ps_session *s = NULL;
    ps_error e;
    ps_score_result *r = NULL;
    if (ps_session_create(m, ssp, &s, &e) != PS_OK) {
        CHECKF(0, "%s: session: %s", what, e.message);
        return NULL;
    }
    ps_score_params p = ps_score_default_params();
    p.k = 5;
    p.cache = cache;
    if (ps_score_tokens(s, ids, n, &p, &r, &e) != PS_OK) CHECKF(0, "%s: score: %s", what, e.message);
    ps_session_free(s);
    return r;
}

static int64_t cache_hits(ps_prefix_cache *c) {
    ps_prefix_cache_stats st;
    ps_prefix_cache_get_stats(c, &st);
    return st.hits;
}

/* One cache shared by sessions whose configurations differ (activation mode, K/V type, ISA,
 * AMX) on a Q8_0 model, where the activation mode changes the bits: a prompt scored by one
 * configuration is never a hit for another (hits counted), and each answer equals its own
 * configuration's uncached one bit for bit. */
static void test_cfg_keys(void) {
    const fixture *f = &FIXTURES[3]; /* qwen3 Q8_0 */
    ps_genmodel_params gp;
    fixture_params(f, &gp);
    ps_model *m = gen_load(&gp, "cfgkeys-qwen3-q8_0.gguf");
    if (!m) return;
    enum { N = 200 };
    int32_t *a = make_ids(N, gp.n_vocab, 31);
    ps_session_params base = ps_session_default_params();
    base.n_ctx = 512;
    base.isa = ps_isa_best();
    struct {
        const char *what;
        ps_session_params p;
    } v[8];
    int nv = 0;
    v[nv].what = "--act f32", v[nv].p = base, v[nv].p.act = PS_ACT_F32, nv++;
    v[nv].what = "K/V f16", v[nv].p = base, v[nv].p.kv_type = PS_KV_F16, nv++;
    v[nv].what = "K/V bf16", v[nv].p = base, v[nv].p.kv_type = PS_KV_BF16, nv++;
    const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
    for (size_t i = 0; i < PS_ARRAY_LEN(isas); i++)
        if (isas[i] != base.isa && ps_isa_supported(isas[i]))
            v[nv].what = ps_isa_name(isas[i]), v[nv].p = base, v[nv].p.isa = isas[i], nv++;
    if (ps_isa_supported(PS_ISA_AMX)) {
        /* AMX tiles against the same ISA without them */
        v[nv].what = "amx", v[nv].p = base, v[nv].p.isa = PS_ISA_AMX, nv++;
        base.isa = PS_ISA_AVX512;
    } else {
        PS_TEST_CPU_LACKS("AMX: a cache shared by sessions with and without AMX tiles");
    }
    ps_score_result *plain_base = score_with(m, &base, NULL, a, N, "base, uncached");
    for (int i = 0; i < nv; i++) {
        char what[128];
        ps_prefix_cache *c = NULL;
        ps_error e;
        CHECKF(ps_prefix_cache_create(m, NULL, &c, &e) == PS_OK, "%s", e.message);
        if (!c) continue;
        /* the base configuration fills the cache; the other one scores the same prompt */
        ps_score_result *r0 = score_with(m, &base, c, a, N, "base, filling");
        int64_t h0 = cache_hits(c);
        snprintf(what, sizeof what, "a cache filled by the base configuration, read by %s",
                 v[i].what);
        ps_score_result *got = score_with(m, &v[i].p, c, a, N, what);
        ps_score_result *want = score_with(m, &v[i].p, NULL, a, N, v[i].what);
        CHECKF(cache_hits(c) == h0, "%s: %lld hits on the other configuration's blocks", what,
               (long long)(cache_hits(c) - h0));
        if (got && want) same_result(want, got, what);
        /* and the other way round: the base configuration finds its own blocks, not these */
        int64_t h1 = cache_hits(c);
        ps_score_result *again = score_with(m, &base, c, a, N, "base again");
        CHECKF(cache_hits(c) - h1 == N / ps_pcache_block_len(c),
               "%s: the base configuration hit %lld of its %d blocks", what,
               (long long)(cache_hits(c) - h1), N / ps_pcache_block_len(c));
        if (again && plain_base) same_result(plain_base, again, "base after the other");
        ps_score_result_free(r0);
        ps_score_result_free(got);
        ps_score_result_free(want);
        ps_score_result_free(again);
        ps_prefix_cache_free(c);
    }
    ps_score_result_free(plain_base);
    free(a);
    ps_model_free(m);
}

#ifdef PS_TESTING
/* Every chain hash forced to 0 (ps_test_pcache_hash_bits, test builds): all blocks of the
 * cache collide, so only the comparison of parent and ids can tell a hit. A prompt sharing two
 * blocks with a cached one hits exactly those two and its answers are its own; a prompt
 * sharing none hits none; both bit for bit their uncached answers. */
static void test_collisions(void) {
    const fixture *f = &FIXTURES[0]; /* tiny F32 */
    ps_genmodel_params gp;
    fixture_params(f, &gp);
    g_kv = PS_KV_F32;
    ps_model *m = gen_load(&gp, "collide-tiny.gguf");
    if (!m) return;
    ps_prefix_cache *c = NULL;
    ps_error e;
    CHECKF(ps_prefix_cache_create(m, NULL, &c, &e) == PS_OK, "%s", e.message);
    ps_session *s = new_session(m);
    CHECK(s != NULL);
    if (c && s) {
        const int32_t B = ps_pcache_block_len(c), N = 5 * B;
        int32_t *a = make_ids(N, gp.n_vocab, 41), *b = make_ids(N, gp.n_vocab, 42),
                *d = make_ids(N, gp.n_vocab, 43);
        memcpy(b, a, (size_t)(2 * B) * sizeof *b); /* b shares a's first two blocks */
        ps_score_params sp = ps_score_default_params();
        sp.cache = c;
        sp.k = 5;
        ps_test_pcache_hash_bits(0);
        expect_equal(m, s, a, N, &sp, "colliding hashes: the first prompt (miss)");
        int64_t h0 = cache_hits(c);
        expect_equal(m, s, b, N, &sp, "colliding hashes: two shared blocks, then others");
        int64_t h1 = cache_hits(c);
        CHECKF(h1 - h0 == 2, "colliding hashes: %lld hits for a prompt sharing 2 blocks",
               (long long)(h1 - h0));
        expect_equal(m, s, d, N, &sp, "colliding hashes: no shared block");
        CHECKF(cache_hits(c) == h1, "colliding hashes: %lld hits for a prompt sharing none",
               (long long)(cache_hits(c) - h1));
        expect_equal(m, s, a, N, &sp, "colliding hashes: the first prompt again (hit)");
        CHECKF(cache_hits(c) - h1 == N / B, "colliding hashes: the first prompt again hit %lld "
               "of its %d blocks", (long long)(cache_hits(c) - h1), N / B);
        ps_test_pcache_hash_bits(-1);
        free(a);
        free(b);
        free(d);
    }
    ps_session_free(s);
    ps_prefix_cache_free(c);
    ps_model_free(m);
}
#endif

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(out_dir, sizeof out_dir, "%s/ps_pcache_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(out_dir)) snprintf(out_dir, sizeof out_dir, ".");
    for (size_t i = 0; i < PS_ARRAY_LEN(FIXTURES); i++) test_exact(&FIXTURES[i]);
    g_kv = PS_KV_F32; /* the tests below run f32 sessions */
    /* prompts of one batch sharing prefixes: plain, quantized, MoE, hybrid, sliding rings */
    const int shared_fx[] = {0, 3, 5, 7, 9, 11};
    for (size_t i = 0; i < PS_ARRAY_LEN(shared_fx); i++) test_batch_shared(&FIXTURES[shared_fx[i]]);
    test_cfg_keys();
#ifdef PS_TESTING
    test_collisions();
#else
    SKIP("colliding chain hashes: the hook needs a test build (PS_TESTING)");
#endif
    test_eviction();
    test_recycle();
    test_inflight();
    test_threads();
    test_faults(&FIXTURES[7]);  /* qwen35-tiny */
    test_faults(&FIXTURES[10]); /* gemma3-tiny */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out_dir);
    if (strcmp(out_dir, ".")) (void)!system(cmd);
    return ps_test_done("prefix_cache");
}
