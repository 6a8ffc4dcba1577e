/*
 * test_types.c — the weight-type table (src/kernels/types.c): every row's geometry against the
 * GGUF reader's own table; every type's dequantisation, scalar and SIMD, bitwise against the numpy
 * reference tests/reference/dequant.py on random blocks with edge scales (zero, -0, subnormal,
 * the largest f16, +-inf, NaN; every E8M0 exponent for MXFP4); the fixture quantisers' round
 * trip; the llama.cpp mixes' tensor types (qmix.c) on the Qwen3-0.6B shape and the fallbacks;
 * and bad input: a row that is not whole blocks, a truncated tensor, types without a row.
 * The numpy part needs /usr/bin/python3 with numpy (skipped otherwise).
 */
#include "check.h"
#include "gen/genmodel.h"
#include "run/session.h"
#include "gen/qmix.h"
#include "kernels/types.h"

#include <math.h>
#include <stdint.h>

#define PYTHON "/usr/bin/python3"
#define DEQUANT_PY "tests/reference/dequant.py"

static char dir[256];

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static unsigned char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (size) *size = (size_t)n;
    return b;
}

/* ---- the table ---- */

static void test_table(void) {
    CHECK(ps_wtype_count() == 16);
    for (int32_t i = 0; i < ps_wtype_count(); i++) {
        const ps_wtype *t = ps_wtype_at(i);
        CHECKF(t->blck == ps_ggml_block_elems(t->id) && t->bytes == ps_ggml_block_bytes(t->id),
               "%s: block %d/%d, the reader says %lld/%lld", t->name, t->blck, t->bytes,
               (long long)ps_ggml_block_elems(t->id), (long long)ps_ggml_block_bytes(t->id));
        CHECKF(!strcmp(t->name, ps_ggml_type_name(t->id)), "%s vs %s", t->name,
               ps_ggml_type_name(t->id));
        CHECK(ps_wtype_get(t->id) == t && t->to_f32 && t->from_f32 && t->kernel);
        CHECKF(!t->matmul == !t->matmul_ref, "%s: matmul and matmul_ref come together", t->name);
        CHECK(strstr(ps_wtype_names(), t->name) != NULL);
        CHECK(ps_wtype_row_bytes(t, 256 * 3) == (size_t)(256 * 3 / t->blck) * (size_t)t->bytes);
        CHECK(t->blck == 1 || ps_wtype_row_bytes(t, t->blck + 1) == 0);
    }
    /* ggml types that are not weight types promptscore computes with */
    static const uint32_t no[] = {PS_GGML_Q8_1, PS_GGML_Q8_K, 16, 17, 18, 19, 21, 22,
                                  PS_GGML_I8,   PS_GGML_I32,  PS_GGML_F64, 29, 34, 35, 4, 99};
    for (size_t i = 0; i < PS_ARRAY_LEN(no); i++)
        CHECKF(ps_wtype_get(no[i]) == NULL, "type %u has a row", no[i]);
    CHECK(ps_e8m0_half_to_f32(0) == ldexpf(1.0f, -128) && ps_e8m0_half_to_f32(1) == ldexpf(1.0f, -127));
    CHECK(ps_e8m0_half_to_f32(128) == 1.0f && ps_e8m0_half_to_f32(255) == ldexpf(1.0f, 127));
}

/* ---- dequantisation vs numpy ---- */

/* byte offsets of the f16 scales in a block (-1 ends) */
static void scale_fields(uint32_t id, int off[3]) {
    off[0] = off[1] = off[2] = -1;
    switch (id) {
    case PS_GGML_Q4_1:
    case PS_GGML_Q5_1:
    case PS_GGML_Q4_K:
    case PS_GGML_Q5_K: off[0] = 0, off[1] = 2; break;
    case PS_GGML_Q2_K: off[0] = 80, off[1] = 82; break;
    case PS_GGML_Q3_K: off[0] = 108; break;
    case PS_GGML_Q6_K: off[0] = 208; break;
    case PS_GGML_MXFP4: break;
    default: off[0] = 0; break; /* Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS */
    }
}

static const uint16_t EDGE_F16[] = {0x0000, 0x8000, 0x0001, 0x83ff, 0x03ff, 0x0400, 0x7bff,
                                    0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x3c00, 0xbc00, 0x1000};

/* nb random blocks of type t: random bytes; scales mostly ordinary (|d| ~ 1e-3 .. 1), some
 * edge values; MXFP4 exponents cover 0..255. */
static unsigned char *random_blocks(const ps_wtype *t, int nb) {
    unsigned char *b = malloc((size_t)nb * (size_t)t->bytes);
    for (size_t i = 0; i < (size_t)nb * (size_t)t->bytes; i++) b[i] = (unsigned char)next64();
    if (t->blck == 1) return b; /* f32/f16/bf16: random bit patterns cover every class */
    int off[3];
    scale_fields(t->id, off);
    for (int k = 0; k < nb; k++) {
        unsigned char *blk = b + (size_t)k * (size_t)t->bytes;
        if (t->id == PS_GGML_MXFP4) {
            blk[0] = (unsigned char)(k < 256 ? (uint64_t)k : next64());
            continue;
        }
        for (int f = 0; f < 3 && off[f] >= 0; f++) {
            uint16_t h;
            if (k % 4 == 3) h = EDGE_F16[(size_t)(k / 4 + f) % PS_ARRAY_LEN(EDGE_F16)];
            else {
                const float v = ldexpf((float)(next64() % 1000) / 1000.0f + 0.5f,
                                       -(int)(next64() % 10)) * (next64() & 1 ? -1.0f : 1.0f);
                h = ps_f32_to_f16(v);
            }
            memcpy(blk + off[f], &h, 2);
        }
    }
    return b;
}

static bool same_bits(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y;
}

static void test_dequant_vs_numpy(void) {
    for (int32_t i = 0; i < ps_wtype_count(); i++) {
        const ps_wtype *t = ps_wtype_at(i);
        const int nb = t->blck == 1 ? 4096 : t->id == PS_GGML_MXFP4 ? 300 : 96;
        const int64_t n = (int64_t)nb * t->blck;
        unsigned char *b = random_blocks(t, nb);
        char in[400], out[400], cmd[1200];
        snprintf(in, sizeof in, "%s/%s.bin", dir, t->name);
        snprintf(out, sizeof out, "%s/%s.f32", dir, t->name);
        FILE *f = fopen(in, "wb");
        fwrite(b, 1, (size_t)nb * (size_t)t->bytes, f);
        fclose(f);
        snprintf(cmd, sizeof cmd, PYTHON " " DEQUANT_PY " %s '%s' '%s'", t->name, in, out);
        CHECKF(system(cmd) == 0, "%s", cmd);
        size_t size = 0;
        float *ref = (float *)read_file(out, &size);
        CHECKF(ref && size == (size_t)n * 4, "%s: reference gave %zu bytes", t->name, size);
        float *c = malloc((size_t)n * 4);
        static const ps_isa isas[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
        for (size_t k = 0; ref && size == (size_t)n * 4 && k < PS_ARRAY_LEN(isas); k++) {
            if (!ps_isa_supported(isas[k])) {
                PS_TEST_CPU_LACKS("%s: %s dequantisation", ps_isa_name(isas[k]), t->name);
                continue;
            }
            memset(c, 0xa5, (size_t)n * 4);
            ps_wtype_to_f32(t, isas[k])(b, c, n);
            int64_t bad = 0, first = -1, nan = 0;
            for (int64_t j = 0; j < n; j++) {
                nan += isnan(ref[j]);
                if (!same_bits(c[j], ref[j]) && bad++ == 0) first = j;
            }
            CHECKF(bad == 0, "%s %s: %lld of %lld values differ from numpy, first at %lld: C %a "
                   "numpy %a", t->name, ps_isa_name(isas[k]), (long long)bad, (long long)n,
                   (long long)first, (double)c[first < 0 ? 0 : first],
                   (double)ref[first < 0 ? 0 : first]);
            if (k == 0)
                printf("  %-7s %6lld values (%d blocks, edge scales incl. %lld NaN values) "
                       "bitwise = numpy\n", t->name, (long long)n, nb, (long long)nan);
        }
        /* the check sees a sign-of-zero difference: Q6_K's (d * sc) * q with sc * q taken in
         * integers first gives +0 where ggml gives -0 (d * sc < 0, q = 0). (The products of
         * these types are exact in float32 — a 16-bit scale times small integers — so the
         * values differ from ggml's only by such operand details, a wrong bit position or a
         * wrong final add: those the comparison shows too.) */
        if (t->id == PS_GGML_Q6_K && ref) {
            int64_t differ = 0;
            for (int k = 0; k < nb; k++) {
                const ps_block_q6_k *blk = (const ps_block_q6_k *)(b + (size_t)k * 210);
                const float d = ps_f16_to_f32(blk->d);
                for (int e = 0; e < 256; e++) {
                    const int h = e / 128, g = (e % 128) / 32, l = e % 32;
                    const int lo = (blk->ql[h * 64 + l + 32 * (g & 1)] >> (4 * (g >> 1))) & 15;
                    const int hi = (blk->qh[h * 32 + l] >> (2 * g)) & 3;
                    const float alt = d * (float)(blk->scales[e / 16] * ((lo | hi << 4) - 32));
                    differ += !same_bits(alt, ref[k * 256 + e]);
                }
            }
            CHECKF(differ > 0, "q6_k: an integer sc * q was not told apart");
            printf("  q6_k    d * (float)(sc * q) instead of (d * sc) * q: %lld of %lld values "
                   "differ\n",
                   (long long)differ, (long long)n);
        }
        free(c);
        free(ref);
        free(b);
        remove(in);
        remove(out);
    }
}

/* ---- fixture quantisers ---- */

static void test_quantize_round_trip(void) {
    /* relative RMS error bound per type for N(0, 1) weights (round to nearest: about
     * 2^-bits of the range); measured values are printed */
    static const struct { uint32_t id; double bound; } B[] = {
        {PS_GGML_F32, 0},       {PS_GGML_F16, 1e-3},    {PS_GGML_BF16, 5e-3},
        {PS_GGML_Q8_0, 0.012},  {PS_GGML_Q4_0, 0.15},   {PS_GGML_Q4_1, 0.12},
        {PS_GGML_Q5_0, 0.075},  {PS_GGML_Q5_1, 0.06},   {PS_GGML_Q2_K, 0.55},
        {PS_GGML_Q3_K, 0.3},    {PS_GGML_Q4_K, 0.13},   {PS_GGML_Q5_K, 0.065},
        {PS_GGML_Q6_K, 0.035},  {PS_GGML_IQ4_NL, 0.15}, {PS_GGML_IQ4_XS, 0.15},
        {PS_GGML_MXFP4, 0.25},
    };
    const int64_t n = 4096;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    unsigned char *q = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i += 2) {
        const double u1 = ((double)(next64() >> 11) + 1) * 0x1.0p-53,
                     u2 = (double)(next64() >> 11) * 0x1.0p-53;
        x[i] = (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
        x[i + 1] = (float)(sqrt(-2 * log(u1)) * sin(6.283185307179586 * u2));
    }
    for (size_t k = 0; k < PS_ARRAY_LEN(B); k++) {
        const ps_wtype *t = ps_wtype_get(B[k].id);
        t->from_f32(x, q, n);
        t->to_f32(q, y, n);
        double se = 0, sx = 0;
        for (int64_t i = 0; i < n; i++) se += (double)(y[i] - x[i]) * (y[i] - x[i]), sx += (double)x[i] * x[i];
        const double rel = sqrt(se / sx);
        printf("  %-7s round trip: relative rms error %.4f (bound %.4f)\n", t->name, rel, B[k].bound);
        CHECKF(rel <= B[k].bound, "%s: round trip rms %g > %g", t->name, rel, B[k].bound);
        /* zeros stay zeros */
        float z[256] = {0}, zz[256];
        t->from_f32(z, q, 256);
        t->to_f32(q, zz, 256);
        bool zero = true;
        for (int i = 0; i < 256; i++) zero &= zz[i] == 0.0f;
        CHECKF(zero, "%s: zeros do not come back as zeros", t->name);
    }
    free(x);
    free(y);
    free(q);
}

/* ---- mixes ---- */

static uint32_t mix_type(const char *mix, const ps_qmix_model *m, const char *name, int64_t ne0,
                         int32_t dims) {
    uint32_t t = 9999;
    ps_error e;
    ps_status st = ps_qmix_tensor_type(ps_qmix_find(mix), m, name, ne0, dims, &t, &e);
    CHECKF(st == PS_OK, "%s %s: %s", mix, name, e.message);
    return t;
}

static void test_mixes(void) {
    /* Qwen3-0.6B: 28 layers, 16 / 8 heads (GQA 2), tied. Q4_K_M gives attn_v and ffn_down
     * Q6_K on layers 0-2, 5, 8, ..., 23 and 24-27 (llama.cpp's use_more_bits), Q4_K elsewhere */
    const ps_qmix_model q06 = {28, 16, 8, 0, true};
    static const int more[] = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27};
    char name[64];
    CHECK(mix_type("q4_k_m", &q06, "token_embd.weight", 1024, 2) == PS_GGML_Q6_K);
    CHECK(mix_type("q4_k_m", &q06, "output_norm.weight", 1024, 1) == PS_GGML_F32);
    for (int l = 0; l < 28; l++) {
        bool mb = false;
        for (size_t k = 0; k < PS_ARRAY_LEN(more); k++) mb |= more[k] == l;
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        CHECKF(mix_type("q4_k_m", &q06, name, 1024, 2) == (mb ? PS_GGML_Q6_K : PS_GGML_Q4_K), "%s", name);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        CHECKF(mix_type("q4_k_m", &q06, name, 3072, 2) == (mb ? PS_GGML_Q6_K : PS_GGML_Q4_K), "%s", name);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", l);
        CHECK(mix_type("q4_k_m", &q06, name, 1024, 2) == PS_GGML_Q4_K);
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        CHECK(mix_type("q4_k_s", &q06, name, 1024, 2) == (l < 4 ? PS_GGML_Q5_K : PS_GGML_Q4_K));
        CHECK(mix_type("q3_k_m", &q06, name, 1024, 2) == (l < 2 ? PS_GGML_Q5_K : PS_GGML_Q4_K));
        CHECK(mix_type("q3_k_l", &q06, name, 1024, 2) == PS_GGML_Q5_K);
        CHECK(mix_type("q2_k", &q06, name, 1024, 2) == PS_GGML_Q3_K); /* GQA 2 < 4 */
        CHECK(mix_type("q5_k_m", &q06, name, 1024, 2) == (mb ? PS_GGML_Q6_K : PS_GGML_Q5_K));
        CHECK(mix_type("q5_k_s", &q06, name, 1024, 2) == PS_GGML_Q5_K);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        CHECK(mix_type("q3_k_m", &q06, name, 3072, 2) == (l < 1 ? PS_GGML_Q5_K : PS_GGML_Q4_K));
        CHECK(mix_type("q4_k_s", &q06, name, 3072, 2) == (l < 3 ? PS_GGML_Q5_K : PS_GGML_Q4_K));
        CHECK(mix_type("iq4_xs", &q06, name, 3072, 2) == (l < 3 ? PS_GGML_Q5_K : PS_GGML_IQ4_XS));
        CHECK(mix_type("q2_k", &q06, name, 3072, 2) == PS_GGML_Q3_K);
        snprintf(name, sizeof name, "blk.%d.attn_output.weight", l);
        CHECK(mix_type("q2_k", &q06, name, 2048, 2) == PS_GGML_Q3_K);
        CHECK(mix_type("q3_k_m", &q06, name, 2048, 2) == PS_GGML_Q4_K);
        CHECK(mix_type("q3_k_s", &q06, name, 2048, 2) == PS_GGML_Q3_K);
        CHECK(mix_type("q6_k", &q06, name, 2048, 2) == PS_GGML_Q6_K);
    }
    /* GQA >= 4 moves attn_v up; untied embeddings keep the base type, the output gets Q6_K */
    const ps_qmix_model g4 = {8, 16, 4, 0, false};
    CHECK(mix_type("q2_k", &g4, "blk.3.attn_v.weight", 1024, 2) == PS_GGML_Q4_K);
    CHECK(mix_type("iq4_xs", &g4, "blk.3.attn_v.weight", 1024, 2) == PS_GGML_Q5_K);
    CHECK(mix_type("iq4_nl", &g4, "blk.3.attn_v.weight", 1024, 2) == PS_GGML_Q5_K);
    CHECK(mix_type("q4_k_m", &g4, "token_embd.weight", 1024, 2) == PS_GGML_Q4_K);
    CHECK(mix_type("q4_k_m", &g4, "output.weight", 1024, 2) == PS_GGML_Q6_K);
    CHECK(mix_type("iq4_nl", &g4, "output.weight", 1024, 2) == PS_GGML_Q6_K);
    /* rows that are not whole 256-blocks fall back */
    CHECK(mix_type("q4_k_m", &g4, "output.weight", 320, 2) == PS_GGML_Q8_0);
    CHECK(mix_type("q4_k_m", &g4, "blk.3.ffn_up.weight", 320, 2) == PS_GGML_Q5_0);
    CHECK(mix_type("q5_k_s", &g4, "blk.3.ffn_up.weight", 320, 2) == PS_GGML_Q5_1);
    CHECK(mix_type("q6_k", &g4, "blk.3.ffn_up.weight", 320, 2) == PS_GGML_Q8_0);
    CHECK(mix_type("q2_k", &g4, "blk.3.ffn_up.weight", 320, 2) == PS_GGML_Q4_0);
    CHECK(mix_type("q3_k_s", &g4, "blk.3.ffn_up.weight", 320, 2) == PS_GGML_Q4_0);
    CHECK(mix_type("iq4_xs", &g4, "blk.3.ffn_up.weight", 320, 2) == PS_GGML_IQ4_NL);
    CHECK(mix_type("q4_k_m", &g4, "blk.3.ffn_up.weight", 48, 2) == PS_GGML_F16);
    CHECK(mix_type("q4_k_m", &g4, "blk.7.ffn_down.weight", 320, 2) == PS_GGML_Q8_0); /* Q6_K */
    /* MXFP4_MOE: experts MXFP4, every other matrix and the output Q8_0 */
    CHECK(mix_type("mxfp4_moe", &g4, "blk.1.ffn_down_exps.weight", 1024, 3) == PS_GGML_MXFP4);
    CHECK(mix_type("mxfp4_moe", &g4, "blk.1.attn_q.weight", 1024, 2) == PS_GGML_Q8_0);
    CHECK(mix_type("mxfp4_moe", &g4, "output.weight", 1024, 2) == PS_GGML_Q8_0);
    const ps_qmix_model e8 = {8, 16, 4, 8, false};
    CHECK(mix_type("q4_k_m", &e8, "blk.1.attn_v.weight", 1024, 2) == PS_GGML_Q8_0);
    CHECK(mix_type("q4_k_m", &e8, "blk.1.attn_k.weight", 1024, 2) == PS_GGML_Q8_0);
    CHECK(mix_type("q4_k_m", &e8, "blk.1.attn_output.weight", 1024, 2) == PS_GGML_Q5_K);
    /* no fallback: an error naming the tensor */
    uint32_t t;
    ps_error e;
    CHECK(ps_qmix_tensor_type(ps_qmix_find("mxfp4_moe"), &g4, "blk.0.attn_q.weight", 48, 2, &t,
                              &e) == PS_ERR_INVALID_ARG &&
          strstr(e.message, "blk.0.attn_q.weight"));
    CHECK(ps_qmix_find("q4_k_m") && !ps_qmix_find("q4_k_x") && !ps_qmix_find(NULL));
}

/* ---- bad input ---- */

static const char *gen(const char *tag, uint32_t type, int32_t n_embd, int32_t n_ff) {
    static char path[600];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, tag);
    ps_genmodel_params p = ps_genmodel_default_params();
    p.type = type;
    p.n_embd = n_embd;
    p.n_ff = n_ff;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = n_embd / 4;
    p.n_vocab = 300;
    p.n_layer = 1;
    ps_error e;
    ps_status st = ps_genmodel_write(&p, path, &e);
    CHECKF(st == PS_OK, "%s: %s", tag, e.message);
    return st == PS_OK ? path : NULL;
}

/* The file with tensor `name`'s type field set to `type` (byte patch of its info). */
static bool patch_type(const char *path, const char *name, uint32_t type) {
    size_t n = 0;
    unsigned char *b = read_file(path, &n);
    if (!b) return false;
    const size_t len = strlen(name);
    bool done = false;
    for (size_t i = 8; !done && i + len + 12 < n; i++) {
        uint64_t l;
        memcpy(&l, b + i - 8, 8);
        if (l != len || memcmp(b + i, name, len)) continue;
        uint32_t dims;
        memcpy(&dims, b + i + len, 4);
        memcpy(b + i + len + 4 + 8 * dims, &type, 4);
        done = true;
    }
    FILE *f = done ? fopen(path, "wb") : NULL;
    if (f) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
    free(b);
    return done && f;
}

static void expect_load_error(const char *what, const char *path, ps_status code,
                              const char *n1, const char *n2, const char *n3) {
    ps_model *m = NULL;
    ps_error e;
    ps_model_params mp = ps_model_default_params();
    ps_status st = path ? ps_model_load(path, &mp, &m, &e) : PS_ERR_IO;
    CHECKF(st == code && !m && strstr(e.message, n1) && strstr(e.message, n2) &&
               (!n3 || strstr(e.message, n3)),
           "%s: status %s, message '%s'", what, ps_status_str(st), path ? e.message : "");
    if (st == code) printf("  %-34s -> %s: %s\n", what, ps_status_str(st), e.message);
    ps_model_free(m);
}

static void test_bad_input(void) {
    /* ggml types without a row, as a matrix (rows 256 wide so that the layout is valid):
     * unsupported, naming the tensor, its type and the supported list */
    const char *p;
    {
        ps_gguf *g = NULL;
        const char *src = gen("bad-src2", PS_GGML_Q4_K, 256, 256);
        static const struct { uint32_t type; const char *name; } U[] = {
            {PS_GGML_Q8_1, "q8_1"}, {PS_GGML_Q8_K, "q8_k"}, {16, "iq2_xxs"}, {17, "iq2_xs"},
            {18, "iq3_xxs"}, {19, "iq1_s"}, {21, "iq3_s"}, {22, "iq2_s"}, {29, "iq1_m"},
            {34, "tq1_0"}, {35, "tq2_0"}};
        for (size_t u = 0; src && u < PS_ARRAY_LEN(U); u++) {
            if (ps_gguf_open(src, &g, NULL) != PS_OK) break;
            ps_gguf_writer *w = ps_gguf_writer_new();
            ps_gguf_copy_kv(w, g, NULL);
            void *zeros = calloc(1, 1 << 20);
            for (int64_t i = 0; i < ps_gguf_n_tensors(g); i++) {
                const ps_gguf_tensor *t = ps_gguf_tensor_at(g, i);
                char name[128];
                snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
                if (!strcmp(name, "blk.0.ffn_gate.weight"))
                    ps_gguf_add_tensor(w, name, U[u].type, t->n_dims, t->ne, zeros,
                                       (uint64_t)(t->ne[0] / ps_ggml_block_elems(U[u].type)) *
                                           (uint64_t)ps_ggml_block_bytes(U[u].type) *
                                           (uint64_t)t->ne[1]);
                else ps_gguf_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
            }
            char out[600], what[64];
            snprintf(out, sizeof out, "%s/bad-%s.gguf", dir, U[u].name);
            CHECK(ps_gguf_write_file(w, out, NULL) == PS_OK);
            ps_gguf_writer_free(w);
            ps_gguf_close(g);
            free(zeros);
            snprintf(what, sizeof what, "%s matrix", U[u].name);
            expect_load_error(what, out, PS_ERR_UNSUPPORTED, "blk.0.ffn_gate.weight", U[u].name,
                              "supported: f32, f16, bf16, q4_0");
            remove(out);
        }
    }
    /* rows that are not whole blocks: a 64-wide f32 row retyped Q4_K (256), a 48-wide one Q4_0 */
    p = gen("bad-rowk", PS_GGML_F32, 64, 128);
    if (p && patch_type(p, "blk.0.attn_q.weight", PS_GGML_Q4_K))
        expect_load_error("64-wide row as q4_k", p, PS_ERR_FORMAT, "blk.0.attn_q.weight", "q4_k",
                          "not a multiple");
    p = gen("bad-row0", PS_GGML_F32, 48, 96);
    if (p && patch_type(p, "blk.0.attn_q.weight", PS_GGML_Q4_0))
        expect_load_error("48-wide row as q4_0", p, PS_ERR_FORMAT, "blk.0.attn_q.weight", "q4_0",
                          "not a multiple");
    /* a truncated tensor: the file cut inside the last tensor's data */
    static const uint32_t T[] = {PS_GGML_Q4_K, PS_GGML_Q6_K, PS_GGML_IQ4_XS, PS_GGML_MXFP4,
                                 PS_GGML_Q5_1};
    for (size_t k = 0; k < PS_ARRAY_LEN(T); k++) {
        char tag[32];
        snprintf(tag, sizeof tag, "trunc-%s", ps_ggml_type_name(T[k]));
        p = gen(tag, T[k], 256, 256);
        size_t n = 0;
        unsigned char *b = p ? read_file(p, &n) : NULL;
        if (!b) continue;
        FILE *f = fopen(p, "wb");
        fwrite(b, 1, n - 1000, f);
        fclose(f);
        free(b);
        char what[64];
        snprintf(what, sizeof what, "truncated %s model", ps_ggml_type_name(T[k]));
        expect_load_error(what, p, PS_ERR_FORMAT, "truncated", ps_ggml_type_name(T[k]), "tensor '");
        remove(p);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ps-test-types-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("test_types: mkdtemp");
        return 1;
    }
    char cmd[400];
    test_table();
    test_quantize_round_trip();
    test_mixes();
    test_bad_input();
    if (access(DEQUANT_PY, R_OK) != 0) SKIP("dequant vs numpy: %s not found", DEQUANT_PY);
    else if (system(PYTHON " -c 'import numpy' 2>/dev/null") != 0)
        SKIP("dequant vs numpy: " PYTHON " with numpy is not available");
    else test_dequant_vs_numpy();
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return ps_test_done("types");
}
