/*
 * test_score.c — ps_score_tokens end to end on ../shared/models/stories260K.gguf:
 *   - bitwise equal to ps_session_forward + ps_topk_reference computed here, chunk by chunk;
 *   - NLL of the three golden token lists vs the independent float64 python column, on every
 *     ISA (4e-7 rel; measured <= 3.07e-7);
 *   - chunk geometry: a 2*256+17-token prompt scored with chunks 1, 7, 100 and 256, each on 1
 *     and 2 threads, equals chunk 256 on 1 thread bit for bit (logprobs, top ids, top
 *     logprobs), on stories260K (every ISA) and on generated llama F16, qwen3 Q8_0, qwen3 BF16
 *     and qwen2 BF16 models (native and f32 activations; AVX2, AVX-512 and AMX);
 *   - 1 vs 2 threads bitwise; max_tokens 0 vs 1 give the same prompt entries;
 *   - greedy generation from BOS = the 60 golden ids, each = the kernel's top-1;
 *   - seeded sampling is reproducible; top_p; stop strings cut the text; cancel; errors
 *     (token range with its index, context with both numbers, bad params); fault injection;
 *   - peak RSS of a 4096-token prompt vs a 512-token one on a gen-model model, in children;
 *   - act: on generated F32/F16/BF16/Q8_0 models (qwen3, tiny), a PS_ACT_F32 session's logits
 *     equal the PS_ACT_NATIVE ones bit for bit for F32 and differ but stay within 0.25 for
 *     F16/BF16/Q8_0, on every ISA the CPU has.
 */
#include "check.h"
#include "base/testhooks.h"
#include "gen/genmodel.h"
#include "front/json.h"
#include "run/session.h"

#include <math.h>
#include <sys/resource.h>
#include <sys/wait.h>

static const char *g_shared;

typedef struct {
    int32_t ids[256];
    int32_t n;
    double nll; /* python float64 column */
} golden_text;

static golden_text g_texts[3];
static int32_t g_greedy[64];
static int32_t g_n_greedy;

static int32_t parse_ids(const char *s, int32_t *out, int32_t cap) {
    const char *p = strchr(s, '[');
    int32_t n = 0;
    if (!p) return 0;
    p++;
    while (*p && *p != ']' && n < cap) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        out[n++] = (int32_t)v;
        p = end;
        while (*p == ',' || *p == ' ') p++;
    }
    return n;
}

static bool load_golden(void) {
    char path[4300];
    snprintf(path, sizeof path, "%s/models/goldens/stories260K-python-reference.txt", g_shared);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char *line = NULL;
    size_t cap = 0;
    int n_nll = 0, n_tok = 0;
    while (getline(&line, &cap, f) > 0) {
        int nt;
        double nll;
        if (line[0] >= '0' && line[0] <= '9' && strstr(line, " rel ") && n_nll < 3 &&
            sscanf(line, "%d %lf", &nt, &nll) == 2) {
            g_texts[n_nll].nll = nll;
            g_texts[n_nll].n = nt;
            n_nll++;
        } else if (line[0] == '[' && g_n_greedy == 0) {
            g_n_greedy = parse_ids(line, g_greedy, 64);
        } else if (!strncmp(line, "tokens(", 7) && n_tok < 3) {
            int32_t n = parse_ids(strstr(line, ") = ["), g_texts[n_tok].ids, 256);
            CHECKF(n == g_texts[n_tok].n, "golden text %d: %d ids, header says %d", n_tok, n,
                   g_texts[n_tok].n);
            n_tok++;
        }
    }
    free(line);
    fclose(f);
    return n_nll == 3 && n_tok == 3 && g_n_greedy == 61;
}

static ps_model *g_model;
static int32_t g_n_vocab;

static ps_session *new_session(ps_pool *pool, int32_t n_batch) {
    ps_session_params sp = ps_session_default_params();
    sp.pool = pool;
    sp.n_batch = n_batch;
    ps_session *s = NULL;
    ps_error e;
    if (ps_session_create(g_model, &sp, &s, &e) != PS_OK) {
        CHECKF(0, "session: %s", e.message);
        return NULL;
    }
    return s;
}

/* The test's own pipeline: forward in chunks of 256, ps_topk_reference per chunk. */
static void reference_scores(ps_session *s, const int32_t *t, int32_t n, int32_t k, float *lp,
                             int32_t *ids, float *tlp) {
    float *logits = malloc((size_t)256 * (size_t)g_n_vocab * sizeof *logits);
    int32_t targets[256];
    ps_session_reset(s);
    lp[0] = NAN;
    for (int32_t p0 = 0; p0 < n; p0 += 256) {
        int32_t m = n - p0 < 256 ? n - p0 : 256;
        ps_error e;
        CHECK(ps_session_forward(s, t + p0, m, logits, &e) == PS_OK);
        int32_t rows = p0 + m < n ? m : m - 1;
        for (int32_t j = 0; j < rows; j++) targets[j] = t[p0 + j + 1];
        ps_topk_params tp = ps_topk_default_params();
        tp.k = k;
        ps_logits lg = {.data = logits, .dtype = PS_DTYPE_F32, .n_rows = rows,
                        .n_vocab = g_n_vocab, .row_stride = g_n_vocab, .targets = targets};
        ps_topk_out out = {.target_logprob = lp + p0 + 1, .top_ids = ids + (size_t)(p0 + 1) * k,
                           .top_logprobs = tlp + (size_t)(p0 + 1) * k};
        if (rows > 0) CHECK(ps_topk_reference(&tp, &lg, &out, &e) == PS_OK);
    }
    free(logits);
}

static ps_score_result *score(ps_session *s, const int32_t *t, int32_t n, int32_t k,
                              int32_t chunk) {
    ps_score_params p = ps_score_default_params();
    p.k = k;
    p.chunk = chunk;
    ps_score_result *r = NULL;
    ps_error e;
    ps_status st = ps_score_tokens(s, t, n, &p, &r, &e);
    CHECKF(st == PS_OK, "score %d tokens chunk %d: %s", n, chunk, e.message);
    return r;
}

/* A long deterministic prompt: BOS, then the three golden texts (without their BOS) over
 * and over. */
static void long_prompt(int32_t *t, int32_t n) {
    t[0] = 1;
    int32_t i = 1, which = 0, j = 1;
    while (i < n) {
        if (j >= g_texts[which].n) {
            which = (which + 1) % 3;
            j = 1;
            continue;
        }
        t[i++] = g_texts[which].ids[j++];
    }
}

static bool same_bits(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

static void test_bitwise_vs_reference(ps_session *s) {
    enum { N = 600, K = 8 };
    int32_t t[N];
    long_prompt(t, N);
    float *lp = malloc(N * sizeof *lp), *tlp = malloc(N * K * sizeof *tlp);
    int32_t *ids = malloc(N * K * sizeof *ids);
    reference_scores(s, t, N, K, lp, ids, tlp);
    ps_score_result *r = score(s, t, N, K, 256);
    if (r) {
        CHECK(r->n_prompt == N && r->n_gen == 0 && r->n_total == N && r->k == K);
        CHECK(isnan(r->logprobs[0]) && r->top_ids[0] == -1);
        CHECK(same_bits(r->tokens, t, sizeof t));
        CHECK(same_bits(r->logprobs + 1, lp + 1, (N - 1) * sizeof *lp));
        CHECK(same_bits(r->top_ids + K, ids + K, (size_t)(N - 1) * K * sizeof *ids));
        CHECK(same_bits(r->top_logprobs + K, tlp + K, (size_t)(N - 1) * K * sizeof *tlp));
        double sum = 0;
        for (int i = 1; i < N; i++) sum += lp[i];
        CHECK(r->sum_logprob == sum);
    }
    ps_score_result_free(r);
    free(lp);
    free(tlp);
    free(ids);
}

/* NLL (minus sum_logprob) of the golden texts on every ISA vs the python float64 column:
 * within 4e-7 relative (measured <= 3.07e-7, text 1 on scalar; 1.2e-7 on AVX-512). */
static void test_golden_nll(void) {
    static const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
    const double bound = 4e-7;
    double worst = 0;
    for (size_t ii = 0; ii < sizeof isas / sizeof isas[0]; ii++) {
        if (!ps_isa_supported(isas[ii])) {
            PS_TEST_CPU_LACKS("isa %s: golden NLL", ps_isa_name(isas[ii]));
            continue;
        }
        ps_session_params sp = ps_session_default_params();
        sp.isa = isas[ii];
        ps_session *s = NULL;
        ps_error e;
        if (ps_session_create(g_model, &sp, &s, &e) != PS_OK) {
            CHECKF(0, "session on %s: %s", ps_isa_name(isas[ii]), e.message);
            continue;
        }
        for (int i = 0; i < 3; i++) {
            ps_score_result *r = score(s, g_texts[i].ids, g_texts[i].n, 1, 256);
            if (!r) continue;
            double nll = -r->sum_logprob;
            double rel = fabs(nll - g_texts[i].nll) / g_texts[i].nll;
            worst = fmax(worst, rel);
            CHECKF(rel < bound, "text %d on %s: nll %.6f vs python %.6f (rel %.2e)", i,
                   ps_isa_name(isas[ii]), nll, g_texts[i].nll, rel);
            printf("golden text %d on %s: %d tokens, nll %.6f, python %.6f, rel %.2e\n", i,
                   ps_isa_name(isas[ii]), g_texts[i].n, nll, g_texts[i].nll, rel);
            ps_score_result_free(r);
        }
        ps_session_free(s);
    }
    printf("golden NLL worst rel vs python over every ISA: %.3g (bound %.1g)\n", worst, bound);
}

/* Chunk geometry and threads: on model m (ISA isa, activations act) the n-token prompt t is
 * scored with chunks 1, 7, 100 and 256, each on 1 thread and on a pool of 2; every result must
 * equal the 1-thread chunk-256 one bit for bit (logprobs, top ids, top logprobs), as the README
 * and src/score/score.c promise. The prompt is longer than two chunks of 256. */
static void geometry(const char *label, const ps_model *m, ps_isa isa, ps_act act,
                     const int32_t *t, int32_t n, ps_pool *pool2) {
    enum { K = 5 };
    ps_session *s[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        ps_session_params sp = ps_session_default_params();
        sp.pool = i ? pool2 : NULL;
        sp.n_batch = 256;
        sp.isa = isa;
        sp.act = act;
        ps_error e;
        if (ps_session_create(m, &sp, &s[i], &e) != PS_OK) {
            CHECKF(0, "%s: session: %s", label, e.message);
            ps_session_free(s[0]);
            return;
        }
    }
    ps_score_result *base = score(s[0], t, n, K, 256);
    const int32_t chunks[] = {1, 7, 100, 256};
    int n_runs = 0, n_bad = 0;
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0] && base; c++) {
        for (int th = 0; th < 2; th++) {
            if (chunks[c] == 256 && th == 0) continue; /* the base itself */
            ps_score_result *r = score(s[th], t, n, K, chunks[c]);
            if (!r) continue;
            int differ = 0, ids_differ = 0, tops_differ = 0, first = -1;
            for (int i = 1; i < n; i++) {
                if (memcmp(&r->logprobs[i], &base->logprobs[i], 4) != 0) {
                    differ++;
                    if (first < 0) first = i;
                }
                ids_differ += memcmp(r->top_ids + i * K, base->top_ids + i * K, K * 4) != 0;
                tops_differ += memcmp(r->top_logprobs + i * K, base->top_logprobs + i * K, K * 4) != 0;
            }
            n_runs++;
            n_bad += differ || ids_differ || tops_differ;
            CHECKF(differ == 0 && ids_differ == 0 && tops_differ == 0 &&
                       r->sum_logprob == base->sum_logprob,
                   "%s: chunk %d, %d thread(s) vs chunk 256, 1 thread: %d of %d logprobs differ "
                   "(first at %d), top ids differ at %d, top logprobs at %d positions", label,
                   chunks[c], th + 1, differ, n - 1, first, ids_differ, tops_differ);
            ps_score_result_free(r);
        }
    }
    printf("geometry %s: %d tokens, chunks 1/7/100/256 x 1/2 threads: %d of %d runs differ "
           "bitwise from chunk 256 on 1 thread\n", label, n, n_bad, n_runs);
    ps_score_result_free(base);
    ps_session_free(s[0]);
    ps_session_free(s[1]);
}

static const ps_isa GEOMETRY_ISAS[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512, PS_ISA_AMX};

static void test_chunk_geometry(void) {
    enum { N = 2 * 256 + 17 };
    int32_t t[N];
    long_prompt(t, N);
    ps_pool *p2 = NULL;
    CHECK(ps_pool_create(2, &p2) == PS_OK);
    for (size_t i = 0; i < sizeof GEOMETRY_ISAS / sizeof GEOMETRY_ISAS[0] && p2; i++) {
        if (!ps_isa_supported(GEOMETRY_ISAS[i])) {
            PS_TEST_CPU_LACKS("isa %s: chunk geometry", ps_isa_name(GEOMETRY_ISAS[i]));
            continue;
        }
        char label[64];
        snprintf(label, sizeof label, "stories260K %s", ps_isa_name(GEOMETRY_ISAS[i]));
        geometry(label, g_model, GEOMETRY_ISAS[i], PS_ACT_NATIVE, t, N, p2);
    }
    ps_pool_free(p2);
}

/* The same on generated models (synthetic vocabulary of 512, n_ctx 1024): llama F16, qwen3
 * Q8_0, qwen3 BF16 and qwen2 BF16, native and f32 activations, the SIMD ISAs the CPU has (AMX included). */
static void test_chunk_geometry_generated(void) {
    static const struct { const char *arch; uint32_t type; } models[] = {
        {"llama", PS_GGML_F16}, {"qwen3", PS_GGML_Q8_0}, {"qwen3", PS_GGML_BF16},
        {"qwen2", PS_GGML_BF16},
    };
    enum { N = 2 * 256 + 17 };
    int32_t t[N];
    t[0] = 1;
    for (int i = 1; i < N; i++) t[i] = (int32_t)(3 + (i * 37 + i / 7) % 509);
    ps_pool *p2 = NULL;
    CHECK(ps_pool_create(2, &p2) == PS_OK);
    for (size_t mi = 0; mi < sizeof models / sizeof models[0] && p2; mi++) {
        char path[] = "/tmp/ps-test-score-geom-XXXXXX";
        if (!ps_test_temp_file(path)) break;
        ps_genmodel_params gp = ps_genmodel_default_params();
        snprintf(gp.arch, sizeof gp.arch, "%s", models[mi].arch);
        gp.type = models[mi].type;
        gp.n_ctx = 1024;
        gp.seed = 11 + mi;
        ps_error e;
        ps_model *m = NULL;
        ps_model_params mp = ps_model_default_params();
        if (ps_genmodel_write(&gp, path, &e) != PS_OK || ps_model_load(path, &mp, &m, &e) != PS_OK) {
            CHECKF(0, "%s %s model: %s", models[mi].arch, ps_ggml_type_name(models[mi].type),
                   e.message);
            unlink(path);
            continue;
        }
        /* scalar: on stories260K only (the slowest ISA; its kernels have no tiles to vary) */
        for (size_t i = 1; i < sizeof GEOMETRY_ISAS / sizeof GEOMETRY_ISAS[0]; i++) {
            if (!ps_isa_supported(GEOMETRY_ISAS[i])) {
                PS_TEST_CPU_LACKS("isa %s: chunk geometry", ps_isa_name(GEOMETRY_ISAS[i]));
                continue;
            }
            for (int act = 0; act < 2; act++) {
                if (act && models[mi].type == PS_GGML_F32)
                    continue; /* float32 activations either way */
                char label[96];
                snprintf(label, sizeof label, "%s %s %s act %s", models[mi].arch,
                         ps_ggml_type_name(models[mi].type), ps_isa_name(GEOMETRY_ISAS[i]),
                         act ? "f32" : "native");
                geometry(label, m, GEOMETRY_ISAS[i], act ? PS_ACT_F32 : PS_ACT_NATIVE, t, N, p2);
            }
        }
        ps_model_free(m);
        unlink(path);
    }
    ps_pool_free(p2);
}

static void test_threads(void) {
    enum { N = 300, K = 5 };
    int32_t t[N];
    long_prompt(t, N);
    ps_pool *p2 = NULL;
    CHECK(ps_pool_create(2, &p2) == PS_OK);
    ps_session *s1 = new_session(NULL, 256), *s2 = new_session(p2, 256);
    if (s1 && s2) {
        ps_score_result *a = score(s1, t, N, K, 256), *b = score(s2, t, N, K, 256);
        if (a && b) {
            CHECK(same_bits(a->logprobs + 1, b->logprobs + 1, (N - 1) * 4));
            CHECK(same_bits(a->top_ids, b->top_ids, (size_t)N * K * 4));
            CHECK(same_bits(a->top_logprobs + K, b->top_logprobs + K, (size_t)(N - 1) * K * 4));
        }
        ps_score_result_free(a);
        ps_score_result_free(b);
    }
    ps_session_free(s1);
    ps_session_free(s2);
    ps_pool_free(p2);
}

static void test_generation(ps_session *s) {
    int32_t bos = 1;
    ps_score_params p = ps_score_default_params();
    p.k = 3;
    p.max_tokens = 60;
    ps_score_result *r = NULL;
    ps_error e;
    CHECKF(ps_score_tokens(s, &bos, 1, &p, &r, &e) == PS_OK, "%s", e.message);
    if (r) {
        CHECK(r->n_prompt == 1 && r->n_gen == 60 && r->n_total == 61);
        CHECK(r->finish == PS_FINISH_LENGTH && r->stop_text_len == -1);
        CHECK(same_bits(r->tokens, g_greedy, 61 * sizeof(int32_t)));
        int top1 = 0;
        for (int i = 1; i < 61; i++) top1 += r->top_ids[i * 3] == r->tokens[i] &&
                                             r->top_logprobs[i * 3] == r->logprobs[i];
        CHECKF(top1 == 60, "greedy = kernel top-1 at %d of 60", top1);
        CHECK(r->sum_logprob == 0.0); /* a 1-token prompt has no scored prompt token */
    }

    /* max_tokens 1 after a prompt: the prompt's entries are those of max_tokens 0, plus one */
    enum { N = 40 };
    int32_t t[N];
    long_prompt(t, N);
    ps_score_result *a = score(s, t, N, 4, 256), *b = NULL;
    p.max_tokens = 1;
    p.k = 4;
    CHECK(ps_score_tokens(s, t, N, &p, &b, &e) == PS_OK);
    if (a && b) {
        CHECK(b->n_total == N + 1 && b->n_gen == 1);
        CHECK(same_bits(a->logprobs + 1, b->logprobs + 1, (N - 1) * 4));
        CHECK(same_bits(a->top_ids, b->top_ids, (size_t)N * 4 * 4));
        CHECK(a->sum_logprob == b->sum_logprob);
        CHECK(b->tokens[N] == b->top_ids[N * 4]);
    }
    ps_score_result_free(a);
    ps_score_result_free(b);

    /* stop string: the greedy text is " Once upon a time, there was a little girl named Lily."
     * Stop at "a l": cut inside " a" + " little" -> the token " little" starts after "a",
     * so the stop begins inside " a" (byte 1 of it). */
    const char *stops[] = {"zzz", "a l"};
    p.max_tokens = 60;
    p.stop = stops;
    p.n_stop = 2;
    p.k = 1;
    ps_score_result *c = NULL;
    CHECKF(ps_score_tokens(s, &bos, 1, &p, &c, &e) == PS_OK, "%s", e.message);
    if (c && r) {
        ps_buf text;
        ps_buf_init(&text);
        const ps_vocab *v = ps_model_vocab(g_model);
        for (int32_t i = 1; i < c->n_total; i++) {
            const char *bytes;
            size_t len;
            ps_vocab_token_bytes(v, c->tokens[i], &bytes, &len);
            ps_buf_append(&text, bytes, i == c->n_total - 1 && c->stop_text_len >= 0 ? (size_t)c->stop_text_len : len);
        }
        CHECK(c->finish == PS_FINISH_STOP);
        CHECKF(text.data && !strcmp(text.data, " Once upon a time, there was "),
               "stop text '%s' (n_gen %d, stop_text_len %d)", text.data, c->n_gen, c->stop_text_len);
        CHECK(same_bits(c->tokens, r->tokens, (size_t)c->n_total * 4));
        ps_buf_free(&text);
        /* a stop string that starts at a token boundary drops that token: " time" */
        const char *stops2[] = {" time"};
        p.stop = stops2;
        p.n_stop = 1;
        ps_score_result *d = NULL;
        CHECK(ps_score_tokens(s, &bos, 1, &p, &d, &e) == PS_OK);
        CHECK(d && d->finish == PS_FINISH_STOP && d->n_gen == 3 && d->stop_text_len == -1 &&
              d->tokens[3] == 261);
        ps_score_result_free(d);
    }
    ps_score_result_free(c);
    ps_score_result_free(r);
}

static void test_sampling(ps_session *s) {
    int32_t bos = 1;
    ps_score_params p = ps_score_default_params();
    p.k = 2;
    p.max_tokens = 40;
    p.temperature = 1.0f;
    p.seed = 1234;
    p.stop_at_eos = false;
    ps_score_result *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    ps_error e;
    CHECK(ps_score_tokens(s, &bos, 1, &p, &a, &e) == PS_OK);
    CHECK(ps_score_tokens(s, &bos, 1, &p, &b, &e) == PS_OK);
    p.seed = 99;
    CHECK(ps_score_tokens(s, &bos, 1, &p, &c, &e) == PS_OK);
    p.top_p = 0.5f;
    CHECK(ps_score_tokens(s, &bos, 1, &p, &d, &e) == PS_OK);
    if (a && b && c && d) {
        CHECK(a->n_total == 41 && same_bits(a->tokens, b->tokens, 41 * 4));
        CHECK(same_bits(a->logprobs + 1, b->logprobs + 1, 40 * 4));
        CHECK(!same_bits(a->tokens, c->tokens, 41 * 4));
        /* logprobs of sampled tokens come from the unmodified distribution */
        int ok = 0;
        for (int i = 1; i < 41; i++) ok += a->logprobs[i] <= a->top_logprobs[i * 2] && a->logprobs[i] < 0;
        CHECK(ok == 40);
        int diff = 0;
        for (int i = 1; i < 41; i++) diff += a->tokens[i] != g_greedy[i];
        CHECK(diff > 0);
        printf("sampling T=1 seed 1234: %d of 40 tokens differ from greedy; top_p 0.5 gave %d "
               "tokens\n", diff, d->n_gen);
    }
    ps_score_result_free(a);
    ps_score_result_free(b);
    ps_score_result_free(c);
    ps_score_result_free(d);

    /* a tiny nucleus is the top-1 token: greedy */
    p.top_p = 1e-6f;
    p.seed = 5;
    ps_score_result *g = NULL;
    CHECK(ps_score_tokens(s, &bos, 1, &p, &g, &e) == PS_OK);
    CHECK(g && same_bits(g->tokens, g_greedy, 41 * 4));
    ps_score_result_free(g);
    /* top_p 0.5 at T = 1: the mass of the tokens ranked before each sampled one is < 0.5 */
    p.top_p = 0.5f;
    p.k = 512;
    p.seed = 77;
    CHECK(ps_score_tokens(s, &bos, 1, &p, &g, &e) == PS_OK);
    if (g) {
        int inside = 0;
        for (int i = 1; i < g->n_total; i++) {
            double mass = 0;
            for (int j = 0; j < 512 && g->top_ids[i * 512 + j] != g->tokens[i]; j++)
                mass += exp((double)g->top_logprobs[i * 512 + j]);
            inside += mass < 0.5;
        }
        CHECKF(inside == g->n_total - 1, "%d of %d sampled tokens inside the nucleus", inside,
               g->n_total - 1);
    }
    ps_score_result_free(g);
}

static bool cancel_now(void *ctx) {
    int *calls = ctx;
    return ++*calls > 2;
}

static void test_errors(ps_session *s) {
    ps_score_params p = ps_score_default_params();
    ps_score_result *r = NULL;
    ps_error e;
    int32_t t[5] = {1, 403, 512, 2, 3};
    CHECK(ps_score_tokens(s, t, 5, &p, &r, &e) == PS_ERR_TOKEN_RANGE && r == NULL);
    CHECKF(strstr(e.message, "512") && strstr(e.message, "index 2"), "%s", e.message);
    t[2] = -1;
    CHECK(ps_score_tokens(s, t, 5, &p, &r, &e) == PS_ERR_TOKEN_RANGE);
    t[2] = 5;
    CHECK(ps_score_tokens(s, t, 0, &p, &r, &e) == PS_ERR_INVALID_ARG);
    CHECK(ps_score_tokens(s, NULL, 3, &p, &r, &e) == PS_ERR_INVALID_ARG);
    p.k = -1;
    CHECK(ps_score_tokens(s, t, 5, &p, &r, &e) == PS_ERR_INVALID_ARG);
    p = ps_score_default_params();
    p.chunk = 300;
    CHECK(ps_score_tokens(s, t, 5, &p, &r, &e) == PS_ERR_INVALID_ARG);
    p = ps_score_default_params();
    p.top_p = 0;
    CHECK(ps_score_tokens(s, t, 5, &p, &r, &e) == PS_ERR_INVALID_ARG);
    p = ps_score_default_params();
    p.temperature = NAN;
    CHECK(ps_score_tokens(s, t, 5, &p, &r, &e) == PS_ERR_INVALID_ARG);

    /* context: stories260K holds 2048 */
    ps_model_info info;
    ps_model_get_info(g_model, &info);
    int32_t n = info.n_ctx;
    int32_t *big = calloc((size_t)n + 1, sizeof *big);
    p = ps_score_default_params();
    CHECK(ps_score_tokens(s, big, n + 1, &p, &r, &e) == PS_ERR_CONTEXT);
    char want[64];
    snprintf(want, sizeof want, "%d", n);
    CHECKF(strstr(e.message, want) && strstr(e.message, "2049"), "%s", e.message);
    p.max_tokens = 10;
    CHECK(ps_score_tokens(s, big, n - 5, &p, &r, &e) == PS_ERR_CONTEXT);
    CHECKF(strstr(e.message, "2043") && strstr(e.message, "10") && strstr(e.message, want), "%s",
           e.message);
    free(big);

    /* cancel between chunks */
    enum { N = 800 };
    int32_t lt[N];
    long_prompt(lt, N);
    int calls = 0;
    p = ps_score_default_params();
    p.cancel = cancel_now;
    p.cancel_ctx = &calls;
    CHECK(ps_score_tokens(s, lt, N, &p, &r, &e) == PS_ERR_CANCELLED && r == NULL);
    CHECK(calls == 3);

    /* allocation failures: every one is a clean PS_ERR_NOMEM (leaks show under make check) */
    p = ps_score_default_params();
    p.max_tokens = 3;
    const char *stop[] = {"xyz"};
    p.stop = stop;
    p.n_stop = 1;
    int bad = 0, oks = 0;
    for (int64_t i = 0; i < 64; i++) {
        ps_alloc_fail_after(i);
        ps_status st = ps_score_tokens(s, lt, 20, &p, &r, &e);
        ps_alloc_fail_after(-1);
        if (st == PS_OK) {
            oks++;
            ps_score_result_free(r);
        } else if (st != PS_ERR_NOMEM) {
            bad++;
        }
        r = NULL;
    }
    CHECKF(bad == 0 && oks > 0, "fault injection: %d odd statuses, %d successes", bad, oks);
}

/* Peak RSS (KiB) of a child process that loads the generated model and scores n tokens
 * (k = 5, chunk 256), or -1. A child, so that each figure is its own process's peak. */
static long run_child(const char *path, int32_t n) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fd[0]);
        ps_model *m = NULL;
        ps_model_params mp = ps_model_default_params();
        ps_error e;
        if (ps_model_load(path, &mp, &m, &e) != PS_OK) _exit(3);
        ps_session_params sp = ps_session_default_params();
        ps_session *s = NULL;
        if (ps_session_create(m, &sp, &s, &e) != PS_OK) _exit(4);
        int32_t *t = malloc((size_t)n * sizeof *t);
        for (int32_t i = 0; i < n; i++) t[i] = (int32_t)((i * 7919u + 13u) % 4096u);
        ps_score_params p = ps_score_default_params();
        ps_score_result *r = NULL;
        if (ps_score_tokens(s, t, n, &p, &r, &e) != PS_OK) _exit(5);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        char buf[32];
        int len = snprintf(buf, sizeof buf, "%ld", ru.ru_maxrss);
        _exit(write(fd[1], buf, (size_t)len) == len ? 0 : 6);
    }
    close(fd[1]);
    char buf[64] = {0};
    ssize_t got = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    if (got <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return -1;
    return atol(buf);
}

static void test_peak_memory(void) {
    char path[] = "/tmp/ps-test-score-XXXXXX";
    if (!ps_test_temp_file(path)) return;
    ps_genmodel_params gp = ps_genmodel_default_params();
    gp.n_vocab = 4096;
    gp.n_embd = 128;
    gp.n_head = 4;
    gp.n_head_kv = 4;
    gp.head_dim = 32;
    gp.n_ff = 256;
    gp.n_ctx = 4096;
    ps_error e;
    if (ps_genmodel_write(&gp, path, &e) != PS_OK) {
        CHECKF(0, "gen-model: %s", e.message);
        unlink(path);
        return;
    }
    long small = run_child(path, 512), big = run_child(path, 4096);
    /* touched KV cache: 2 (K, V) x n_layer x n_head_kv x head_dim floats per position */
    double kv_kib = 2.0 * gp.n_layer * gp.n_head_kv * gp.head_dim * 4 * (4096 - 512) / 1024.0;
    /* results: token, logprob, k ids + k logprobs per position (k = 5) */
    double res_kib = (4.0 + 4 + 5 * 8) * (4096 - 512) / 1024.0;
    double extra = (double)(big - small) - kv_kib - res_kib;
    printf("peak RSS: 512 tokens %ld KiB, 4096 tokens %ld KiB, difference %ld KiB = KV %.0f KiB "
           "+ results %.0f KiB + %.0f KiB other\n", small, big, big - small, kv_kib, res_kib,
           extra);
    CHECKF(small > 0 && big > 0, "children failed (%ld, %ld)", small, big);
    /* the logits of the whole prompt would be 4096 x 4096 x 4 = 64 MiB */
    CHECKF(extra < 4096, "peak RSS grows with the prompt beyond KV + results by %.0f KiB", extra);
    unlink(path);
}


/* A NaN logit is an error that names the position (not the row of the chunk it fell in) and
 * the token id. A generated model whose embedding row of token 300 is NaN: the first NaN
 * logits are those after position 270 (where token 300 sits), in the second chunk. */
static void test_nan_position(void) {
    char path[] = "/tmp/ps-test-score-nan-XXXXXX";
    if (!ps_test_temp_file(path)) return;
    ps_genmodel_params gp = ps_genmodel_default_params(); /* tiny: F32, vocab 512, ctx 512 */
    ps_error e;
    void *buf = NULL;
    long size = 0;
    FILE *f = NULL;
    if (ps_genmodel_write(&gp, path, &e) == PS_OK && (f = fopen(path, "rb")) &&
        fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)size)) && fread(buf, 1, (size_t)size, f) == (size_t)size) {
        ps_gguf *g = NULL;
        ps_model *m = NULL;
        ps_session *s = NULL;
        ps_score_result *r = NULL;
        CHECK(ps_gguf_open_memory(buf, (size_t)size, &g, &e) == PS_OK);
        const ps_gguf_tensor *t = g ? ps_gguf_find_tensor(g, "token_embd.weight") : NULL;
        CHECK(t && t->type == PS_GGML_F32);
        if (t && t->type == PS_GGML_F32) {
            float *row = (float *)((char *)buf + ((const char *)t->data - (const char *)buf)) +
                         300 * t->ne[0];
            for (int64_t i = 0; i < t->ne[0]; i++) row[i] = NAN;
            ps_model_params mp = ps_model_default_params();
            CHECK(ps_model_load_gguf(g, "nan", &mp, &m, &e) == PS_OK);
            g = NULL; /* owned by the model now */
            ps_session_params sp = ps_session_default_params();
            if (m && ps_session_create(m, &sp, &s, &e) == PS_OK) {
                int32_t ids[280];
                for (int i = 0; i < 280; i++) ids[i] = 3 + i % 200;
                ids[270] = 300;
                ps_score_params p = ps_score_default_params();
                ps_status st = ps_score_tokens(s, ids, 280, &p, &r, &e);
                CHECKF(st == PS_ERR_NAN && r == NULL, "status %d", (int)st);
                CHECKF(strstr(e.message, "after position 270") && strstr(e.message, "NaN"),
                       "message should name position 270: %s", e.message);
                /* generation: the row after the last prompt position */
                p.max_tokens = 3;
                st = ps_score_tokens(s, ids, 271, &p, &r, &e);
                CHECKF(st == PS_ERR_NAN && strstr(e.message, "after position 270"),
                       "generation: %s", e.message);
            }
        }
        ps_session_free(s);
        ps_model_free(m);
        ps_gguf_close(g);
    } else {
        CHECKF(0, "could not write and read back a generated model at %s", path);
    }
    if (f) fclose(f);
    free(buf);
    unlink(path);
}

/* --act end to end on generated models (the tiny preset as qwen3, 16 tokens, every ISA the CPU
 * has): the logits of a PS_ACT_F32 session against a PS_ACT_NATIVE one. BF16 and Q8_0 weights
 * meet other activations (half- or bf16-rounded / Q8_0 blocks vs float32), so the logits must
 * differ somewhere yet stay close; F32 weights take float32 activations either way, so the
 * logits must be bitwise equal. Measured (max |logit| ~3.7, every ISA alike): all 8192 logits
 * differ, max |diff| 0.021 for BF16 and 0.072 for Q8_0; the bound 0.25 (test_reference's bound
 * for every native BF16 logit) leaves 3.5x room and still catches a broken path (a wrong
 * activation type or layout gives differences of the logits' own size). How close each is to
 * float64 is test_reference's business. */
static void test_act_generated(void) {
    static const uint32_t types[] = {PS_GGML_F32, PS_GGML_F16, PS_GGML_BF16, PS_GGML_Q8_0};
    static const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
    enum { N = 16 };
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        char path[] = "/tmp/ps-test-score-act-XXXXXX";
        if (!ps_test_temp_file(path)) return;
        const char *tn = ps_ggml_type_name(types[t]);
        ps_genmodel_params gp = ps_genmodel_default_params();
        snprintf(gp.arch, sizeof gp.arch, "qwen3");
        gp.type = types[t];
        gp.seed = 7 + t;
        ps_error e;
        ps_model *m = NULL;
        ps_model_params mp = ps_model_default_params();
        if (ps_genmodel_write(&gp, path, &e) != PS_OK || ps_model_load(path, &mp, &m, &e) != PS_OK) {
            CHECKF(0, "%s model: %s", tn, e.message);
            unlink(path);
            continue;
        }
        int32_t ids[N];
        for (int i = 0; i < N; i++) ids[i] = (int32_t)(1 + (i * 37) % 500);
        const size_t n_logits = (size_t)N * (size_t)gp.n_vocab;
        float *a = malloc(n_logits * sizeof *a), *b = malloc(n_logits * sizeof *b);
        for (size_t ii = 0; ii < sizeof isas / sizeof isas[0] && a && b; ii++) {
            if (!ps_isa_supported(isas[ii])) continue;
            ps_session *sn = NULL, *sf = NULL;
            ps_session_params sp = ps_session_default_params();
            sp.isa = isas[ii];
            sp.n_ctx = N;
            bool ok = ps_session_create(m, &sp, &sn, &e) == PS_OK &&
                      ps_session_forward(sn, ids, N, a, &e) == PS_OK;
            sp.act = PS_ACT_F32;
            ok = ok && ps_session_create(m, &sp, &sf, &e) == PS_OK &&
                 ps_session_forward(sf, ids, N, b, &e) == PS_OK;
            CHECKF(ok, "%s on %s: %s", tn, ps_isa_name(isas[ii]), e.message);
            if (ok) {
                double worst = 0, scale = 0;
                size_t n_diff = 0;
                for (size_t i = 0; i < n_logits; i++) {
                    worst = fmax(worst, fabs((double)a[i] - b[i]));
                    scale = fmax(scale, fabs((double)a[i]));
                    n_diff += memcmp(&a[i], &b[i], sizeof a[i]) != 0;
                }
                printf("act %s on %s: f32 vs native: %zu of %zu logits differ, max |diff| %.3g "
                       "(max |logit| %.3g)\n", tn, ps_isa_name(isas[ii]), n_diff, n_logits,
                       worst, scale);
                if (types[t] == PS_GGML_F32) {
                    CHECKF(n_diff == 0, "%s on %s: --act f32 changed %zu logits (max %g)", tn,
                           ps_isa_name(isas[ii]), n_diff, worst);
                } else {
                    CHECKF(n_diff > 0, "%s on %s: --act f32 gave the native logits bit for bit",
                           tn, ps_isa_name(isas[ii]));
                    CHECKF(worst < 0.25, "%s on %s: f32 vs native max |diff| %g", tn,
                           ps_isa_name(isas[ii]), worst);
                }
            }
            ps_session_free(sn);
            ps_session_free(sf);
        }
        free(a);
        free(b);
        ps_model_free(m);
        unlink(path);
    }
}

int main(void) {
    g_shared = ps_test_shared();
    if (g_shared) {
        char path[4300];
        snprintf(path, sizeof path, "%s/models/stories260K.gguf", g_shared);
        ps_model_params mp = ps_model_default_params();
        ps_error e;
        CHECK(load_golden());
        if (ps_model_load(path, &mp, &g_model, &e) != PS_OK) {
            CHECKF(0, "load: %s", e.message);
            return ps_test_done("score");
        }
        ps_model_info info;
        ps_model_get_info(g_model, &info);
        g_n_vocab = info.n_vocab;
        ps_session *s = new_session(NULL, 256);
        if (s) {
            test_bitwise_vs_reference(s);
            test_golden_nll();
            test_generation(s);
            test_sampling(s);
            test_errors(s);
        }
        ps_session_free(s);
        test_threads();
        test_chunk_geometry();
        ps_model_free(g_model);
    } else {
        SKIP("stories260K tests: no ../shared");
    }
    test_nan_position();
    test_chunk_geometry_generated();
    test_act_generated();
    test_peak_memory();
    return ps_test_done("score");
}
