/*
 * test_batch.c — several prompts in one forward pass (ps_score_batch) give, bit for bit, what
 * each prompt alone through ps_score_tokens gives.
 *
 * For every family (llama, qwen2, qwen3, qwen3moe, mixtral-style llama experts, the qwen35 and
 * qwen35moe hybrids, gemma2 / gemma3 with sliding layers, phi3, olmo2, gpt-oss with its sliding
 * layers and sinks) and for the weight types on a 256-wide llama (F16, BF16, Q8_0, Q4_0, Q5_1,
 * Q4_K, Q6_K, IQ4_NL and the q4_k_m mix), a gen-model fixture scores a set of 12 prompts of
 * mixed lengths (1 .. 300 tokens: several > 256, so a prompt spans passes; some share a pass
 * with a dozen others; the sliding layers' 40-key windows are crossed and their rings wrap), with
 * mixed k (0 .. 5) and a few greedy or sampled generations, first one at a time, then with
 * ps_score_batch at max_seqs unlimited, 3 and 1, and with a smaller chunk (97) on one prompt.
 * Every result's tokens, logprob bits, top-K ids and logprob bits, sum, finish and n_gen must be
 * equal. Four families run again with a half-precision K/V cache (llama and the qwen35 hybrid
 * in f16, gemma2's rings and gpt-oss in bf16), every session of that kv_type, and three with
 * bf16-dot (llama, gemma2's rings, gpt-oss's rings and sinks: key pairs over ragged batches and
 * wrapped rings). Then: a bad token in one prompt fails the batch cleanly (naming the prompt, every
 * result NULL), the session's own sequence is untouched by a batch, and the checked forward
 * entry refuses one sequence twice in a call and a call over n_batch rows, and every
 * allocation failure inside a batch is a clean PS_ERR_NOMEM. A session warmed by ps_score_warm
 * (what serve does at start) gives the same bits, and has made its kept sequences and logits.
 */
#include "check.h"
#include "gen/genmodel.h"
#include "base/impl.h"
#include "run/session.h"
#include "score/score.h"
#include "promptscore.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static char dir[256];

static const char *path_in(const char *name) {
    static char buf[4][400];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

#define N_PROMPTS 12
static const int32_t LENS[N_PROMPTS] = {300, 1, 30, 31, 2, 257, 17, 64, 5, 270, 33, 9};

static int32_t *ids_for(int32_t n, int32_t n_vocab, uint64_t seed) {
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
    for (int32_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = i == 0 ? 1 : (int32_t)((s >> 33) % (uint64_t)n_vocab);
    }
    return ids;
}

static bool same_f32(const float *a, const float *b, size_t n) {
    return n == 0 || memcmp(a, b, n * sizeof(float)) == 0;
}

/* Results a and b are the same, bit for bit. */
static bool same_result(const ps_score_result *a, const ps_score_result *b) {
    if (!a || !b) return false;
    if (a->n_prompt != b->n_prompt || a->n_total != b->n_total || a->n_gen != b->n_gen ||
        a->k != b->k || a->finish != b->finish || a->stop_text_len != b->stop_text_len)
        return false;
    if (memcmp(&a->sum_logprob, &b->sum_logprob, sizeof a->sum_logprob)) return false;
    const size_t n = (size_t)a->n_total, nk = n * (size_t)a->k;
    return !memcmp(a->tokens, b->tokens, n * sizeof *a->tokens) &&
           same_f32(a->logprobs, b->logprobs, n) &&
           (nk == 0 || !memcmp(a->top_ids, b->top_ids, nk * sizeof *a->top_ids)) &&
           same_f32(a->top_logprobs, b->top_logprobs, nk);
}

/* One fixture: the prompts one at a time, then batched in several ways. */
static void check_fixture(const char *tag, const ps_genmodel_params *gp, ps_kv_type kv) {
    ps_error e;
    const char *path = path_in("fx.gguf");
    if (ps_genmodel_write(gp, path, &e) != PS_OK) {
        CHECKF(0, "%s: gen-model: %s", tag, e.message);
        return;
    }
    ps_model *m = NULL;
    if (ps_model_load(path, NULL, &m, &e) != PS_OK) {
        CHECKF(0, "%s: load: %s", tag, e.message);
        remove(path);
        return;
    }
    ps_model_info info;
    ps_model_get_info(m, &info);
    ps_pool *pool = NULL;
    ps_pool_create(2, &pool);
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = 320;
    sp.kv_type = kv;
    ps_session *one = NULL, *many = NULL;
    CHECKF(ps_session_create(m, &sp, &one, &e) == PS_OK, "%s: session: %s", tag, e.message);
    sp.pool = pool;
    CHECKF(ps_session_create(m, &sp, &many, &e) == PS_OK, "%s: session: %s", tag, e.message);
    if (!one || !many) goto done;

    int32_t *ids[N_PROMPTS];
    ps_score_params par[N_PROMPTS];
    ps_score_prompt pr[N_PROMPTS];
    ps_score_result *ref[N_PROMPTS] = {0}, *got[N_PROMPTS] = {0};
    for (int i = 0; i < N_PROMPTS; i++) {
        ids[i] = ids_for(LENS[i], info.n_vocab, 100 + (uint64_t)i);
        par[i] = ps_score_default_params();
        par[i].k = i % 6;
        if (i == 2 || i == 8) par[i].max_tokens = 3; /* greedy */
        if (i == 6) {                                 /* sampled */
            par[i].max_tokens = 4;
            par[i].temperature = 0.8f;
            par[i].top_p = 0.9f;
            par[i].seed = 42;
        }
        pr[i] = (ps_score_prompt){ids[i], LENS[i], &par[i]};
        CHECKF(ps_score_tokens(one, ids[i], LENS[i], &par[i], &ref[i], &e) == PS_OK,
               "%s: prompt %d alone: %s", tag, i, e.message);
    }
    /* max_seqs: unlimited, 3, 1; then one prompt with chunk 97 (so 97 rows per pass) */
    const int32_t modes[4] = {0, 3, 1, 0};
    for (int mo = 0; mo < 4; mo++) {
        if (mo == 3) par[5].chunk = 97;
        ps_status st = ps_score_batch(many, pr, N_PROMPTS, modes[mo], got, &e);
        CHECKF(st == PS_OK, "%s: batch (mode %d): %s", tag, mo, e.message);
        int bad = -1;
        for (int i = 0; st == PS_OK && i < N_PROMPTS; i++)
            if (!same_result(ref[i], got[i]) && bad < 0) bad = i;
        CHECKF(st == PS_OK && bad < 0,
               "%s: batch mode %d (max_seqs %d): prompt %d (%d tokens) differs from it alone",
               tag, mo, modes[mo], bad, bad >= 0 ? LENS[bad] : 0);
        for (int i = 0; i < N_PROMPTS; i++) {
            ps_score_result_free(got[i]);
            got[i] = NULL;
        }
    }
    par[5].chunk = PS_CHUNK;
    /* a warmed session (ps_score_warm: logits mapped, 3 kept sequences of >= 64 positions
     * created and zeroed) gives the same bits at max_seqs 3, prompts longer than 64 growing
     * their sequences as before */
    {
        ps_session *warm = NULL;
        sp.pool = pool;
        CHECKF(ps_session_create(m, &sp, &warm, &e) == PS_OK, "%s: session: %s", tag, e.message);
        if (warm) {
            CHECKF(ps_score_warm(warm, 3, 64, &e) == PS_OK, "%s: warm: %s", tag, e.message);
            bool made = warm->n_seq_pool == 3 && warm->logits_floats >=
                        (size_t)(warm->n_batch + 1) * (size_t)info.n_vocab;
            for (int i = 0; made && i < 3; i++)
                made = warm->seq_pool[i] && warm->seq_pool[i]->n_ctx >= 64;
            CHECKF(made, "%s: warm: %d kept sequences, logits %zu floats", tag,
                   (int)warm->n_seq_pool, warm->logits_floats);
            ps_status st = ps_score_batch(warm, pr, N_PROMPTS, 3, got, &e);
            CHECKF(st == PS_OK, "%s: warmed batch: %s", tag, e.message);
            int bad = -1;
            for (int i = 0; st == PS_OK && i < N_PROMPTS; i++)
                if (!same_result(ref[i], got[i]) && bad < 0) bad = i;
            CHECKF(st == PS_OK && bad < 0, "%s: warmed batch: prompt %d differs from it alone",
                   tag, bad);
            for (int i = 0; i < N_PROMPTS; i++) {
                ps_score_result_free(got[i]);
                got[i] = NULL;
            }
            CHECK(ps_score_warm(warm, 0, 64, &e) == PS_ERR_INVALID_ARG &&
                  ps_score_warm(warm, 3, 0, &e) == PS_ERR_INVALID_ARG &&
                  ps_score_warm(NULL, 3, 64, &e) == PS_ERR_INVALID_ARG);
        }
        ps_session_free(warm);
    }
    /* the session's own sequence is untouched by a batch: score, batch, score again */
    {
        CHECK(ps_session_forward(many, ids[0], 20, NULL, &e) == PS_OK);
        CHECK(ps_score_batch(many, pr + 1, 3, 0, got, &e) == PS_OK);
        for (int i = 0; i < 3; i++) ps_score_result_free(got[i]);
        CHECK(ps_session_n_past(many) == 20);
    }
    /* a bad token in prompt 4: a clean error naming it, every result NULL */
    {
        int32_t keep = ids[4][1];
        ids[4][1] = info.n_vocab;
        for (int i = 0; i < N_PROMPTS; i++) got[i] = (ps_score_result *)&e; /* overwritten */
        ps_status st = ps_score_batch(many, pr, N_PROMPTS, 0, got, &e);
        bool all_null = true;
        for (int i = 0; i < N_PROMPTS; i++) all_null = all_null && got[i] == NULL;
        CHECKF(st == PS_ERR_TOKEN_RANGE && all_null && strstr(e.message, "prompt 4"),
               "%s: bad token: status %d, message '%s'", tag, (int)st, e.message);
        ids[4][1] = keep;
    }
    for (int i = 0; i < N_PROMPTS; i++) {
        ps_score_result_free(ref[i]);
        free(ids[i]);
    }
done:
    ps_session_free(one);
    ps_session_free(many);
    ps_pool_free(pool);
    ps_model_free(m);
    remove(path);
}

static ps_genmodel_params fixture(const char *preset, const char *arch, uint32_t type,
                                  uint64_t seed) {
    ps_genmodel_params p = ps_genmodel_default_params();
    ps_genmodel_preset(preset, &p, NULL);
    if (arch) snprintf(p.arch, sizeof p.arch, "%s", arch);
    p.type = type;
    p.seed = seed;
    p.n_ctx = 1024;
    return p;
}

/* The checked forward entry's refusals for segment batches. */
static void check_segs_refused(void) {
    ps_error e;
    ps_genmodel_params gp = fixture("tiny", NULL, PS_GGML_F32, 5);
    const char *path = path_in("segs.gguf");
    ps_model *m = NULL;
    ps_session *s = NULL;
    ps_seq *a = NULL, *b = NULL;
    CHECK(ps_genmodel_write(&gp, path, &e) == PS_OK);
    CHECK(ps_model_load(path, NULL, &m, &e) == PS_OK);
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = 64;
    sp.n_batch = 32;
    if (m) CHECK(ps_session_create(m, &sp, &s, &e) == PS_OK);
    if (s) {
        CHECK(ps_seq_create(m, 64, 32, PS_KV_F32, &a, &e) == PS_OK);
        CHECK(ps_seq_create(m, 128, 32, PS_KV_F32, &b, &e) == PS_OK);
    }
    if (a && b) {
        int32_t toks[40] = {0};
        for (int i = 0; i < 40; i++) toks[i] = 1 + i;
        ps_seg twice[2] = {{a, toks, 3}, {a, toks, 3}};
        CHECK(ps_session_forward_segs(s, twice, 2, NULL, &e) == PS_ERR_INVALID_ARG &&
              strstr(e.message, "same sequence"));
        ps_seg over[2] = {{a, toks, 20}, {s->seq, toks, 13}};
        CHECK(ps_session_forward_segs(s, over, 2, NULL, &e) == PS_ERR_INVALID_ARG);
        ps_seg longer = {b, toks, 3}; /* a sequence longer than the session's scratch */
        CHECK(ps_session_forward_segs(s, &longer, 1, NULL, &e) == PS_ERR_INVALID_ARG);
        CHECK(a->n_past == 0 && s->seq->n_past == 0); /* nothing ran */
        ps_seg ok[2] = {{a, toks, 20}, {s->seq, toks, 12}};
        CHECK(ps_session_forward_segs(s, ok, 2, NULL, &e) == PS_OK && a->n_past == 20 &&
              s->seq->n_past == 12);
    }
    ps_seq_free(a);
    ps_seq_free(b);
    ps_session_free(s);
    ps_model_free(m);
    remove(path);
}

/* Allocation faults over a batch on the hybrid MoE fixture (sequences, results, generation
 * buffers): each injected failure is a clean PS_ERR_NOMEM with every result NULL (leaks: ASan). */
static void check_faults(void) {
    ps_error e;
    ps_genmodel_params gp = fixture("qwen35moe-tiny", NULL, PS_GGML_F32, 6);
    const char *path = path_in("faults.gguf");
    ps_model *m = NULL;
    CHECK(ps_genmodel_write(&gp, path, &e) == PS_OK);
    CHECK(ps_model_load(path, NULL, &m, &e) == PS_OK);
    if (!m) return;
    int32_t *ids = ids_for(300, 1000, 3);
    ps_score_params par[3];
    for (int i = 0; i < 3; i++) par[i] = ps_score_default_params();
    par[1].max_tokens = 2;
    par[2].max_tokens = 2;
    par[2].temperature = 0.5f;
    par[2].top_p = 0.5f;
    par[2].n_stop = 1;
    const char *stop[] = {"zz"};
    par[2].stop = stop;
    const ps_score_prompt pr[3] = {{ids, 300, &par[0]}, {ids + 5, 20, &par[1]}, {ids + 9, 7, &par[2]}};
    int bad = 0;
    int64_t n = 0;
    bool done = false;
    for (; n < 2000 && !done; n++) {
        ps_session_params sp = ps_session_default_params();
        sp.n_ctx = 320;
        ps_session *s = NULL;
        if (ps_session_create(m, &sp, &s, &e) != PS_OK) {
            bad++;
            break;
        }
        ps_score_result *res[3] = {0};
        ps_alloc_fail_after(n);
        ps_status st = ps_score_batch(s, pr, 3, 0, res, &e);
        const int64_t used = ps_alloc_count();
        ps_alloc_fail_after(-1);
        if (st != PS_OK && (st != PS_ERR_NOMEM || res[0] || res[1] || res[2])) bad++;
        for (int i = 0; i < 3; i++) ps_score_result_free(res[i]);
        ps_session_free(s);
        done = st == PS_OK && used <= n;
    }
    CHECKF(done && bad == 0 && n > 5, "%d of %lld injected failures were not clean (done %d)",
           bad, (long long)n, (int)done);
    printf("NOTE: ps_score_batch: %lld allocation points, each a clean PS_ERR_NOMEM\n",
           (long long)n - 1);
    free(ids);
    ps_model_free(m);
    remove(path);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ps-test-batch-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        CHECKF(0, "no temp dir");
        return ps_test_done("batch");
    }
    check_segs_refused();
    check_faults();
    static const struct {
        const char *preset, *arch;
        uint32_t type;
    } FAM[] = {
        {"tiny", NULL, PS_GGML_F32},          {"tiny", "qwen2", PS_GGML_F16},
        {"tiny", "qwen3", PS_GGML_BF16},      {"qwen3moe-tiny", NULL, PS_GGML_Q8_0},
        {"mixtral-tiny", NULL, PS_GGML_F32},  {"qwen35-tiny", NULL, PS_GGML_F32},
        {"qwen35moe-tiny", NULL, PS_GGML_BF16}, {"gemma2-tiny", NULL, PS_GGML_F32},
        {"gemma3-tiny", NULL, PS_GGML_F16},   {"phi3-tiny", NULL, PS_GGML_F32},
        {"olmo2-tiny", NULL, PS_GGML_F32},    {"gpt-oss-tiny", NULL, PS_GGML_F32},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(FAM); i++) {
        char tag[64];
        snprintf(tag, sizeof tag, "%s%s%s %s", FAM[i].preset, FAM[i].arch ? "/" : "",
                 FAM[i].arch ? FAM[i].arch : "", ps_ggml_type_name(FAM[i].type));
        ps_genmodel_params p = fixture(FAM[i].preset, FAM[i].arch, FAM[i].type, 10 + i);
        check_fixture(tag, &p, PS_KV_F32);
    }
    /* half-precision K/V caches */
    static const struct {
        const char *preset;
        ps_kv_type kv;
    } KV[] = {{"tiny", PS_KV_F16},          {"qwen35-tiny", PS_KV_F16},
              {"gemma2-tiny", PS_KV_BF16},   {"gpt-oss-tiny", PS_KV_BF16},
              {"tiny", PS_KV_BF16_DOT},      {"gemma2-tiny", PS_KV_BF16_DOT},
              {"gpt-oss-tiny", PS_KV_BF16_DOT}};
    for (size_t i = 0; i < PS_ARRAY_LEN(KV); i++) {
        char tag[64];
        snprintf(tag, sizeof tag, "%s F32, kv %s", KV[i].preset, ps_kv_type_name(KV[i].kv));
        ps_genmodel_params p = fixture(KV[i].preset, NULL, PS_GGML_F32, 30 + i);
        check_fixture(tag, &p, KV[i].kv);
    }
    /* the weight types, on a llama wide enough for the 256-element blocks */
    static const uint32_t TYPES[] = {PS_GGML_Q8_0, PS_GGML_Q4_0, PS_GGML_Q5_1, PS_GGML_Q4_K,
                                     PS_GGML_Q6_K, PS_GGML_IQ4_NL};
    for (size_t i = 0; i <= PS_ARRAY_LEN(TYPES); i++) {
        ps_genmodel_params p = fixture("tiny", "qwen3", i < PS_ARRAY_LEN(TYPES) ? TYPES[i] : PS_GGML_F32,
                                       50 + i);
        p.n_embd = 256;
        p.n_ff = 256;
        p.head_dim = 64;
        if (i == PS_ARRAY_LEN(TYPES)) snprintf(p.mix, sizeof p.mix, "q4_k_m");
        char tag[64];
        snprintf(tag, sizeof tag, "qwen3-256 %s",
                 i < PS_ARRAY_LEN(TYPES) ? ps_ggml_type_name(TYPES[i]) : "q4_k_m");
        check_fixture(tag, &p, PS_KV_F32);
    }
    rmdir(dir);
    return ps_test_done("batch");
}
