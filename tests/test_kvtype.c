/*
 * test_kvtype.c — the half-precision K/V cache (ps_session_params.kv_type = PS_KV_F16 /
 * PS_KV_BF16).
 *
 * Kernels, on every ISA the CPU has:
 *   - ps_kv_round's SIMD forms give the scalar form's bits (ps_f32_to_f16 / ps_f32_to_bf16:
 *     round to nearest even, NaN -> sign | quiet NaN), on edge values (ties, subnormals,
 *     overflow, infinities, NaN) and 300,000 random bit patterns, at lengths with every tail;
 *     ps_kv_widen's SIMD forms are the scalar widening on every half / bfloat16 a round makes;
 *   - ps_attn_scores over a half / bfloat16 K, ps_attn_pv and ps_attn_pv_acc over a half /
 *     bfloat16 V give, bit for bit, what the same ISA's kernel gives on a float32 cache holding
 *     the widened values (head sizes 40 / 64 / 128, 1 .. 100 keys, ragged key counts, the tile
 *     padding filled with NaN so a read past n_keys would show), and ps_attn_k_store puts each
 *     rounded key where the float32 layout puts it.
 * Sessions (gen-model llama, the qwen35 hybrid, gemma2 with sliding rings):
 *   - f16 / bf16 logits are bitwise the same for chunk 256 / 1 thread, chunk 7 / 3 threads and
 *     chunk 1; they differ from f32 (the option does something) by a bounded amount;
 *   - the cache holds the same elements in 2 bytes each (kv_elt), the hybrid's recurrent state
 *     is unchanged;
 *   - against tests/reference/forward.py --kv-type f16 / bf16 (the same rounding of K and V in
 *     float64 arithmetic): within 2e-4 on the llama and hybrid fixtures, closer than to the
 *     unrounded reference;
 *   - an unknown kv_type is PS_ERR_INVALID_ARG naming the accepted values; every allocation
 *     failure over a session of kv f16 scoring with a prefix cache is a clean PS_ERR_NOMEM.
 */
#include "check.h"
#include "fixture.h"
#include "run/attention.h"
#include "gen/genmodel.h"
#include "base/impl.h"
#include "promptscore.h"
#include "run/session.h"

#include <math.h>

static const ps_isa ISAS[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512};
static const ps_kv_type HALF[] = {PS_KV_F16, PS_KV_BF16};
/* the cache types the session tests run: the element types, bf16-dot and f16-dot */
static const ps_kv_type MODEL_KV[] = {PS_KV_F16, PS_KV_BF16, PS_KV_BF16_DOT, PS_KV_F16_DOT};

static uint64_t g_rng = 0x243f6a8885a308d3ull;
static uint32_t rnd32(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 32);
}
static float frand(void) { return ((float)(rnd32() >> 8) / 16777216.0f) * 2.0f - 1.0f; }
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---------------------------------------------------------------- rounding */

static void test_round(void) {
    /* the scalar reference on known values */
    CHECK(ps_f32_to_f16(1.0f) == 0x3c00 && ps_f32_to_f16(-2.0f) == 0xc000);
    CHECK(ps_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);        /* tie -> even */
    CHECK(ps_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);    /* tie -> even (up) */
    CHECK(ps_f32_to_f16(65520.0f) == 0x7c00 && ps_f32_to_f16(65519.0f) == 0x7bff);
    CHECK(ps_f32_to_f16(0x1p-24f) == 0x0001 && ps_f32_to_f16(0x1p-25f) == 0x0000);
    CHECK(ps_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);         /* tie -> even */
    CHECK(ps_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
    CHECK(ps_f32_to_bf16(from_bits(0x00000001u)) == 0x0000); /* subnormals are rounded, kept */
    CHECK(ps_f32_to_bf16(from_bits(0x00018000u)) == 0x0002);

    enum { N = 100000 };
    float *x = malloc(N * sizeof *x);
    uint16_t *ref = malloc(N * sizeof *ref), *got = malloc((N + 8) * sizeof *got);
    const uint32_t edge[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                             0xffc00001u, 0x7f800001u, 0x7fbfffffu, 0x00000001u, 0x807fffffu,
                             0x33000000u, 0x33000001u, 0x387fe000u, 0x387ff000u, 0x38800000u,
                             0x477fe000u, 0x477ff000u, 0x477fefffu, 0x3f808000u, 0x3f818000u,
                             0x3f807fffu, 0x7f7fffffu, 0xff7f8000u, 0x3c001000u, 0x3c003000u};
    for (int rep = 0; rep < 3; rep++) {
        for (int i = 0; i < N; i++) {
            if (i < (int)PS_ARRAY_LEN(edge)) x[i] = from_bits(edge[i]);
            else if (rep == 0) x[i] = from_bits(rnd32());                /* any bits */
            else if (rep == 1) x[i] = frand() * ldexpf(1.0f, (int)(rnd32() % 40) - 28);
            else x[i] = from_bits((rnd32() & 0xffff0000u) | 0x8000u | (rnd32() & 0x1000u)); /* ties */
        }
        for (size_t t = 0; t < PS_ARRAY_LEN(HALF); t++) {
            ps_kv_round(PS_ISA_SCALAR, HALF[t], x, ref, N);
            for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
                if (!ps_isa_supported(ISAS[i])) continue;
                int bad = 0;
                ps_kv_round(ISAS[i], HALF[t], x, got, N);
                bad += memcmp(got, ref, N * sizeof *ref) != 0;
                for (int n = 0; n <= 40; n++) { /* every tail, and nothing written past n */
                    got[n] = 0xabcd;
                    ps_kv_round(ISAS[i], HALF[t], x + 3, got, n);
                    bad += memcmp(got, ref + 3, (size_t)n * sizeof *ref) != 0 || got[n] != 0xabcd;
                }
                CHECKF(bad == 0, "ps_kv_round %s on %s differs from the scalar form (set %d)",
                       ps_kv_type_name(HALF[t]), ps_isa_name(ISAS[i]), rep);
            }
        }
    }
    /* widening: every half / bfloat16 the rounding can produce (no signalling NaN: a NaN is
     * rounded to the quiet sign | 0x7e00 / (x >> 16) | 0x40) */
    uint16_t *h = malloc(65536 * sizeof *h);
    float *wr = malloc(65536 * sizeof *wr), *wg = malloc(65536 * sizeof *wg);
    for (size_t t = 0; t < PS_ARRAY_LEN(HALF); t++) {
        int n = 0;
        for (uint32_t u = 0; u < 65536; u++) {
            const bool snan = HALF[t] == PS_KV_F16 ? (u & 0x7e00u) == 0x7c00u && (u & 0x3ffu)
                                                   : (u & 0x7fc0u) == 0x7f80u && (u & 0x7fu);
            if (!snan) h[n++] = (uint16_t)u;
        }
        ps_kv_widen(PS_ISA_SCALAR, HALF[t], h, wr, n);
        for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
            if (!ps_isa_supported(ISAS[i])) continue;
            ps_kv_widen(ISAS[i], HALF[t], h, wg, n);
            CHECKF(!memcmp(wr, wg, (size_t)n * sizeof *wr), "ps_kv_widen %s on %s",
                   ps_kv_type_name(HALF[t]), ps_isa_name(ISAS[i]));
        }
        /* round(widen(h)) == h: the widening is exact */
        ps_kv_round(PS_ISA_SCALAR, HALF[t], wr, got, n);
        int bad = 0;
        for (int i = 0; i < n; i++) bad += got[i] != h[i] && wr[i] == wr[i];
        CHECKF(bad == 0, "%s: %d values do not survive widen + round", ps_kv_type_name(HALF[t]), bad);
    }
    free(h);
    free(wr);
    free(wg);
    free(x);
    free(ref);
    free(got);
}

/* ---------------------------------------------------------------- kernels */

static void test_kernels(void) {
    static const int32_t HDS[] = {40, 64, 128}, NKS[] = {1, 15, 16, 17, 64, 65, 100},
                         NQS[] = {1, 5, 13};
    enum { MAXK = 112, MAXD = 128, MAXQ = 13 };
    float *q = malloc(MAXQ * MAXD * sizeof *q), *k = malloc(MAXK * MAXD * sizeof *k),
          *v = malloc(MAXK * MAXD * sizeof *v), *p = malloc(MAXQ * MAXK * sizeof *p);
    float *kt_f = malloc(MAXK * MAXD * sizeof *kt_f), *v_f = malloc(MAXK * MAXD * sizeof *v_f);
    uint16_t *kt_h = malloc(MAXK * MAXD * 2), *kt_s = malloc(MAXK * MAXD * 2),
             *v_h = malloc(MAXK * MAXD * 2);
    float *s1 = malloc(MAXQ * MAXK * sizeof *s1), *s2 = malloc(MAXQ * MAXK * sizeof *s2);
    float *o1 = malloc(MAXQ * MAXD * sizeof *o1), *o2 = malloc(MAXQ * MAXD * sizeof *o2);
    for (int i = 0; i < MAXQ * MAXD; i++) q[i] = frand();
    for (int i = 0; i < MAXK * MAXD; i++) k[i] = frand() * 3.0f, v[i] = frand();
    for (int i = 0; i < MAXQ * MAXK; i++) p[i] = fabsf(frand());
    int cases = 0;
    for (size_t t = 0; t < PS_ARRAY_LEN(HALF); t++)
        for (size_t a = 0; a < PS_ARRAY_LEN(HDS); a++)
            for (size_t b = 0; b < PS_ARRAY_LEN(NKS); b++) {
                const int32_t hd = HDS[a], nk = NKS[b], cap = (int32_t)PS_KCACHE_POS(nk);
                const ps_kv_type T = HALF[t];
                /* the padding past nk: NaN in both caches, so reading it would show */
                for (int i = 0; i < cap * hd; i++) kt_f[i] = NAN, kt_h[i] = kt_s[i] = 0x7e00;
                float w[MAXD];
                uint16_t r[MAXD];
                for (int32_t j = 0; j < nk; j++) {
                    ps_kv_round(PS_ISA_SCALAR, T, k + j * hd, r, hd);
                    ps_kv_widen(PS_ISA_SCALAR, T, r, w, hd);
                    ps_attn_k_store(PS_ISA_SCALAR, kt_f, PS_KV_F32, hd, j, w);
                    ps_attn_k_store(PS_ISA_SCALAR, kt_s, T, hd, j, k + j * hd);
                    ps_kv_round(PS_ISA_SCALAR, T, v + j * hd, v_h + j * hd, hd);
                    ps_kv_widen(PS_ISA_SCALAR, T, v_h + j * hd, v_f + j * hd, hd);
                }
                /* the stored key j, dimension d is round(k_j[d]) where the f32 layout has it */
                int misplaced = 0;
                for (int32_t j = 0; j < nk; j++)
                    for (int32_t d = 0; d < hd; d++) {
                        const int64_t at = (j / 16) * hd * 16 + d * 16 + j % 16;
                        float back;
                        ps_kv_widen(PS_ISA_SCALAR, T, kt_s + at, &back, 1);
                        misplaced += memcmp(&back, kt_f + at, 4) != 0;
                    }
                CHECKF(misplaced == 0, "ps_attn_k_store %s hd %d: %d misplaced", ps_kv_type_name(T),
                       hd, misplaced);
                for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
                    const ps_isa isa = ISAS[i];
                    if (!ps_isa_supported(isa)) continue;
                    for (int x = 0; x < cap * hd; x++) kt_h[x] = 0x7e00;
                    for (int32_t j = 0; j < nk; j++) ps_attn_k_store(isa, kt_h, T, hd, j, k + j * hd);
                    CHECKF(!memcmp(kt_h, kt_s, (size_t)cap * hd * 2), "k store %s on %s",
                           ps_kv_type_name(T), ps_isa_name(isa));
                    for (size_t c = 0; c < PS_ARRAY_LEN(NQS); c++) {
                        const int32_t nq = NQS[c];
                        const int64_t lds = MAXK;
                        ps_attn_scores(isa, q, hd, nq, kt_h, T, nk, hd, s1, lds);
                        ps_attn_scores(isa, q, hd, nq, kt_f, PS_KV_F32, nk, hd, s2, lds);
                        int bad = 0;
                        for (int32_t rr = 0; rr < nq; rr++)
                            bad += memcmp(s1 + rr * lds, s2 + rr * lds, (size_t)nk * 4) != 0;
                        CHECKF(bad == 0, "scores %s %s hd %d keys %d queries %d: %d rows differ",
                               ps_kv_type_name(T), ps_isa_name(isa), hd, nk, nq, bad);
                        int32_t nkq[MAXQ];
                        for (int32_t rr = 0; rr < nq; rr++) nkq[rr] = PS_MAX(1, nk - 7 * rr);
                        ps_attn_pv(isa, p, MAXK, nkq, nq, v_h, T, hd, o1, hd);
                        ps_attn_pv(isa, p, MAXK, nkq, nq, v_f, PS_KV_F32, hd, o2, hd);
                        CHECKF(!memcmp(o1, o2, (size_t)nq * hd * 4), "pv %s %s hd %d keys %d q %d",
                               ps_kv_type_name(T), ps_isa_name(isa), hd, nk, nq);
                        ps_attn_pv_acc(isa, p, MAXK, nkq, nq, v_h, T, hd, o1, hd);
                        ps_attn_pv_acc(isa, p, MAXK, nkq, nq, v_f, PS_KV_F32, hd, o2, hd);
                        CHECKF(!memcmp(o1, o2, (size_t)nq * hd * 4), "pv_acc %s %s hd %d keys %d",
                               ps_kv_type_name(T), ps_isa_name(isa), hd, nk);
                        cases++;
                    }
                }
            }
    printf("NOTE: %d kernel cases (half / bfloat16 K and V against float32 caches of the "
           "widened values)\n", cases);
    free(q), free(k), free(v), free(p), free(kt_f), free(v_f), free(kt_h), free(kt_s), free(v_h);
    free(s1), free(s2), free(o1), free(o2);
}

/* ---------------------------------------------------------------- bf16-dot kernels */

static uint16_t bf(float x) { return ps_f32_to_bf16(x); }
static const uint16_t BF_NAN = 0x7fc0;

/* The definition, written out here on its own: score = the step over dimension pairs in order;
 * an odd head size's last pair is (q, 0) x (k, 0). */
static float def_score(const uint16_t *q, const uint16_t *kt, int32_t hd, int32_t j) {
    float acc = 0.0f;
    for (int32_t d = 0; d < hd; d += 2) {
        const int64_t at = (j / 16) * hd * 16 + d * 16 + j % 16;
        acc = ps_dot_bf16_step(acc, q[d], d + 1 < hd ? q[d + 1] : 0, kt[at],
                               d + 1 < hd ? kt[at + 16] : 0);
    }
    return acc;
}

/* One step against float64: a bf16 x bf16 product is exact, so step = round(round(acc + a1 b1)
 * + a0 b0) with round() to float32, nearest even, outside the subnormal range. */
static void test_dot_step(void) {
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        const float acc = frand() * 8.0f;
        const uint16_t a0 = bf(frand() * 4), a1 = bf(frand() * 4), b0 = bf(frand()), b1 = bf(frand());
        const float t = (float)((double)acc + (double)ps_bf16_to_f32(a1) * ps_bf16_to_f32(b1));
        const float want = (float)((double)t + (double)ps_bf16_to_f32(a0) * ps_bf16_to_f32(b0));
        const float got = ps_dot_bf16_step(acc, a0, a1, b0, b1);
        bad += memcmp(&got, &want, 4) != 0 && !(fabsf(t) < 1e-30f || fabsf(want) < 1e-30f);
    }
    CHECKF(bad == 0, "ps_dot_bf16_step: %d of 200000 not two float32 roundings", bad);
    /* odd product first: (1 + 2^-24 * 3) then + (-1): 2^-23 * 2 ... the order shows when the
     * first sum rounds */
    const float one = 1.0f;
    CHECK(ps_dot_bf16_step(one, bf(0x1p-24f), bf(1.0f), bf(1.0f), bf(0x1p-24f)) ==
          (float)((double)(float)(1.0 + 0x1p-48) + 0x1p-24));
    CHECK(ps_dot_bf16_step(0.0f, bf(1.0f), bf(0x1p-24f), bf(0x1p-24f), bf(1.0f)) == 0x1p-24f * 2);
    /* a bf16 subnormal operand reads as zero; a subnormal sum is flushed (sign kept) */
    CHECK(ps_dot_bf16_step(1.0f, 0x0001, 0, 0x3f80, 0) == 1.0f);
    CHECK(ps_dot_bf16_step(0.0f, bf(0x1p-70f), 0, bf(0x1p-70f), 0) == 0.0f);
    const float negz = ps_dot_bf16_step(0.0f, bf(-0x1p-70f), 0, bf(0x1p-70f), 0);
    CHECK(negz == 0.0f && signbit(negz));
    CHECK(ps_dot_bf16_step(0x1p-130f, 0, 0, 0, 0) == 0.0f);       /* a subnormal acc: zero */
    CHECK(ps_dot_bf16_step(0.0f, bf(0x1p-60f), 0, bf(0x1p-60f), 0) == 0x1p-120f); /* normal */
}

/* ps_attn_scores_dot / ps_attn_pv_dot on every ISA against the definition above, bit for bit:
 * head sizes even and odd, 1 .. 531 keys (P V runs keys in blocks of 256), 1 .. 13 queries,
 * ragged key counts, K padding and the
 * V row past n_keys filled with NaN (a read would show), and rows of tiny values whose sums are
 * subnormal (flushed). A query's output in a block equals its output alone (its zero pairs
 * change nothing), and against float64 the scores are within the float32 order bound. */
static void test_dot_kernels(void) {
    static const int32_t HDS[] = {7, 40, 64, 128},
                         NKS[] = {1, 2, 15, 16, 17, 64, 65, 100, 257, 531},
                         NQS[] = {1, 5, 13};
    enum { MAXK = 544, MAXD = 130, MAXQ = 13 };
    uint16_t *qb = malloc(MAXQ * MAXD * 2), *kt = malloc(MAXK * MAXD * 2),
             *vb = malloc((MAXK + 1) * MAXD * 2), *pb = malloc(MAXQ * (MAXK + 2) * 2);
    float *s1 = malloc(MAXQ * MAXK * 4), *o1 = malloc(MAXQ * MAXD * 4), *o2 = malloc(MAXD * 4);
    float *kf = malloc(MAXD * 4);
    int cases = 0, bad_s = 0, bad_pv = 0, bad_alone = 0, bad_f64 = 0, tiny_cases = 0;
    bool has_simd = false;
    for (size_t a = 0; a < PS_ARRAY_LEN(HDS); a++)
        for (size_t b = 0; b < PS_ARRAY_LEN(NKS); b++)
            for (int tiny = 0; tiny < 2; tiny++) {
                const int32_t hd = HDS[a], nk = NKS[b], cap = (int32_t)PS_KCACHE_POS(nk);
                const int64_t ldq = hd + 2, ldp = MAXK + 2;
                /* tiny: products near 2^-126, so sums go subnormal and are flushed */
                const float sq = tiny ? 0x1p-63f : 1.0f, sk = tiny ? 0x1p-63f : 3.0f;
                for (int i = 0; i < cap * hd; i++) kt[i] = BF_NAN;
                for (int i = 0; i < (nk + 1) * hd; i++) vb[i] = BF_NAN;
                for (int32_t j = 0; j < nk; j++) {
                    for (int32_t d = 0; d < hd; d++) kf[d] = frand() * sk;
                    ps_attn_k_store(PS_ISA_SCALAR, kt, PS_KV_BF16_DOT, hd, j, kf);
                    for (int32_t d = 0; d < hd; d++) vb[j * hd + d] = bf(frand() * sk);
                }
                for (int32_t r = 0; r < MAXQ; r++) {
                    for (int32_t d = 0; d < hd; d++) qb[r * ldq + d] = bf(frand() * sq);
                    qb[r * ldq + hd] = 0;
                }
                int32_t nkq[MAXQ];
                for (int32_t r = 0; r < MAXQ; r++) {
                    nkq[r] = PS_MAX(1, nk - 7 * r);
                    for (int32_t j = 0; j < MAXK + 2; j++)
                        pb[r * ldp + j] = j < nkq[r] ? bf(fabsf(frand()) * sq) : 0;
                }
                for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
                    const ps_isa isa = ISAS[i];
                    if (!ps_isa_supported(isa)) continue;
                    has_simd |= isa == PS_ISA_AVX512 && ps_cpu_has_avx512bf16();
                    for (size_t c = 0; c < PS_ARRAY_LEN(NQS); c++) {
                        const int32_t nq = NQS[c];
                        ps_attn_scores_dot(isa, qb, ldq, nq, kt, nk, hd, s1, MAXK);
                        for (int32_t r = 0; r < nq; r++)
                            for (int32_t j = 0; j < nk; j++) {
                                const float want = def_score(qb + r * ldq, kt, hd, j);
                                bad_s += memcmp(&want, s1 + r * MAXK + j, 4) != 0;
                                if (tiny) continue;
                                double exact = 0, mag = 0;
                                for (int32_t d = 0; d < hd; d++) {
                                    const int64_t at = (j / 16) * hd * 16 + d * 16 + j % 16;
                                    const double t = (double)ps_bf16_to_f32(qb[r * ldq + d]) *
                                                     ps_bf16_to_f32(kt[at]);
                                    exact += t, mag += fabs(t);
                                }
                                bad_f64 += fabs(s1[r * MAXK + j] - exact) > hd * 0x1p-24 * mag;
                            }
                        /* P V over the block's largest count (zeros past each query's own) */
                        const int32_t nmax = nkq[0];
                        for (int acc_in = 0; acc_in < 2; acc_in++) {
                            for (int32_t x = 0; x < nq * hd; x++) o1[x] = acc_in ? frand() : 0.0f;
                            float *o0 = malloc((size_t)nq * hd * 4);
                            memcpy(o0, o1, (size_t)nq * hd * 4);
                            ps_attn_pv_dot(isa, pb, ldp, nmax, nq, vb, hd, o1, hd, acc_in);
                            for (int32_t r = 0; r < nq; r++)
                                for (int32_t d = 0; d < hd; d++) {
                                    float acc = o0[r * hd + d];
                                    for (int32_t j = 0; j < nmax; j += 2)
                                        acc = ps_dot_bf16_step(
                                            acc, pb[r * ldp + j], pb[r * ldp + j + 1],
                                            vb[j * hd + d], j + 1 < nmax ? vb[(j + 1) * hd + d] : 0);
                                    acc += 0.0f; /* a zero sum is +0 */
                                    bad_pv += memcmp(&acc, o1 + r * hd + d, 4) != 0;
                                }
                            /* each query alone, over its own keys only */
                            for (int32_t r = 0; r < nq; r++) {
                                memcpy(o2, o0 + r * hd, (size_t)hd * 4);
                                ps_attn_pv_dot(isa, pb + r * ldp, ldp, nkq[r], 1, vb, hd, o2, hd,
                                               acc_in);
                                bad_alone += memcmp(o2, o1 + r * hd, (size_t)hd * 4) != 0;
                            }
                            free(o0);
                        }
                        cases++;
                        tiny_cases += tiny;
                    }
                }
            }
    CHECKF(bad_s == 0, "bf16-dot scores: %d differ from the definition", bad_s);
    CHECKF(bad_pv == 0, "bf16-dot P V: %d outputs differ from the definition", bad_pv);
    CHECKF(bad_alone == 0, "bf16-dot P V: %d queries differ from themselves alone", bad_alone);
    CHECKF(bad_f64 == 0, "bf16-dot scores: %d beyond the float32 bound from float64", bad_f64);
    printf("NOTE: %d bf16-dot kernel cases (%d of them with subnormal sums), on %s\n", cases,
           tiny_cases, has_simd ? "scalar, avx2 and avx512-bf16 (vdpbf16ps)" : "the scalar form");
    if (!has_simd) PS_TEST_CPU_LACKS("AVX-512 BF16 (vdpbf16ps): the bf16-dot attention kernels");
    free(qb), free(kt), free(vb), free(pb), free(s1), free(o1), free(o2), free(kf);
}

/* ---------------------------------------------------------------- sessions */

static double max_lp_diff(const float *a, const double *b, int32_t n, int64_t V) {
    /* the largest |log-softmax difference| over all positions and vocabulary entries */
    double worst = 0;
    for (int32_t i = 0; i < n; i++) {
        const float *x = a + (size_t)i * (size_t)V;
        const double *y = b + (size_t)i * (size_t)V;
        double mx = -INFINITY, my = -INFINITY, sx = 0, sy = 0;
        for (int64_t j = 0; j < V; j++) mx = fmax(mx, x[j]), my = fmax(my, y[j]);
        for (int64_t j = 0; j < V; j++) sx += exp(x[j] - mx), sy += exp(y[j] - my);
        const double lx = mx + log(sx), ly = my + log(sy);
        for (int64_t j = 0; j < V; j++) worst = fmax(worst, fabs((x[j] - lx) - (y[j] - ly)));
    }
    return worst;
}

static double *to_f64(const float *a, size_t n) {
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = a[i];
    return d;
}

static void test_model(const char *preset, uint32_t type, bool reference) {
    ps_genmodel_params gp = ps_genmodel_default_params();
    ps_genmodel_preset(preset, &gp, NULL);
    gp.type = type;
    gp.n_ctx = 512;
    gp.seed = 77;
    char file[96];
    snprintf(file, sizeof file, "%s.gguf", preset);
    char path[512]; /* outp's buffers rotate: keep a copy */
    snprintf(path, sizeof path, "%s", outp(file));
    ps_error e;
    ps_model *m = NULL;
    if (ps_genmodel_write(&gp, path, &e) != PS_OK || ps_model_load(path, NULL, &m, &e) != PS_OK) {
        CHECKF(0, "%s: %s", preset, e.message);
        return;
    }
    const int32_t n = 150;
    const int64_t V = m->hp.n_vocab;
    int32_t *ids = make_ids(n, (int32_t)V, 5);
    fx_run r32 = fx_run_of(PS_CHUNK, PS_ISA_AUTO, PS_ACT_NATIVE, 1);
    float *l32 = fx_logits(m, ids, n, &r32);
    double *ref32 = reference ? ref_logits_args(path, ids, n, V, preset, "", true) : NULL;
    CHECKF(!reference || ref32, "%s: forward.py failed", preset);
    for (size_t t = 0; t < PS_ARRAY_LEN(MODEL_KV) && l32; t++) {
        const ps_kv_type T = MODEL_KV[t];
        /* chunk 2: a sliding ring of swa + 1 slots, odd for gemma2-tiny's window, which
         * bf16-dot rounds up to even */
        fx_run ra = fx_run_of(PS_CHUNK, PS_ISA_AUTO, PS_ACT_NATIVE, 1),
               rb = fx_run_of(7, PS_ISA_AUTO, PS_ACT_NATIVE, 3),
               rc = fx_run_of(1, PS_ISA_AUTO, PS_ACT_NATIVE, 2),
               rd = fx_run_of(2, PS_ISA_AUTO, PS_ACT_NATIVE, 2);
        ra.kv_type = rb.kv_type = rc.kv_type = rd.kv_type = T;
        ra.on_done = NULL;
        float *la = fx_logits(m, ids, n, &ra), *lb = fx_logits(m, ids, n, &rb),
              *lc = fx_logits(m, ids, n, &rc), *ld = fx_logits(m, ids, n, &rd);
        const size_t nf = (size_t)n * (size_t)V;
        if (la && lb && lc && ld) {
            CHECKF(!memcmp(la, lb, nf * 4) && !memcmp(la, lc, nf * 4) && !memcmp(la, ld, nf * 4),
                   "%s kv %s: chunk 256 / 7 / 1 / 2 and 1 / 3 / 2 / 2 threads differ", preset,
                   ps_kv_type_name(T));
            CHECKF(memcmp(la, l32, nf * 4) != 0, "%s kv %s: the same logits as f32", preset,
                   ps_kv_type_name(T));
            double *d32 = to_f64(l32, nf);
            const double dv = max_lp_diff(la, d32, n, V);
            printf("NOTE: %s kv %s: max |logprob - f32's| %.3g over %d positions x %lld\n", preset,
                   ps_kv_type_name(T), dv, (int)n, (long long)V);
            CHECKF(dv > 0 && dv < (T == PS_KV_BF16_DOT ? 0.1 : 0.05), "%s kv %s: %g from f32",
                   preset, ps_kv_type_name(T), dv);
            free(d32);
            CHECKF(ra.kv_floats == r32.kv_floats, "%s: %lld K/V elements vs %lld", preset,
                   (long long)ra.kv_floats, (long long)r32.kv_floats);
        }
        if (reference && ref32 && la) {
            char args[32];
            snprintf(args, sizeof args, "--kv-type %s", ps_kv_type_name(T));
            double *ref = ref_logits_args(path, ids, n, V, preset, args, true);
            CHECKF(ref, "%s: forward.py %s failed", preset, args);
            if (ref) {
                const double dr = max_lp_diff(la, ref, n, V), d0 = max_lp_diff(la, ref32, n, V);
                double *d32 = to_f64(l32, nf);
                const double base = max_lp_diff(l32, ref32, n, V);
                free(d32);
                printf("NOTE: %s kv %s vs forward.py %s: %.3g (vs the unrounded reference %.3g; "
                       "f32 cache vs unrounded %.3g)\n", preset, ps_kv_type_name(T), args, dr, d0,
                       base);
                /* the C keys are float32 computations, so now and then one lands on the
                 * other side of a rounding boundary from the float64 reference's: a few units
                 * in the last place of one element, far below the rounding's own effect */
                if (T == PS_KV_F16_DOT) {
                    /* rounding the queries and probabilities to half adds two places per
                     * position where such a flip (2^-11 of one element) starts a cascade, so
                     * the whole run agrees only to a few flips (measured: the first 6
                     * positions within 1.5e-6, a median of 1.9e-4, 9 x closer than to the
                     * unrounded reference); the first positions show the roundings are the
                     * reference's, within 1e-5 beyond the f32 cache's own distance from the
                     * float64 reference, where the unrounded reference is 10 x further */
                    const double f0 = max_lp_diff(la, ref, 4, V), f0u = max_lp_diff(la, ref32, 4, V);
                    printf("NOTE: %s kv f16-dot: the first 4 positions %.3g from forward.py %s, "
                           "%.3g from the unrounded reference\n", preset, f0, args, f0u);
                    CHECKF(f0 < 1e-5 + base && f0u > 10 * f0 && dr < 2e-3,
                           "%s kv f16-dot: first 4 positions %g from forward.py %s (%g "
                           "unrounded); all %g", preset, f0, args, f0u, dr);
                } else {
                    const double tol = T == PS_KV_F16 ? 3e-4 : 1.5e-3;
                    CHECKF(dr < tol && dr < d0 / 10,
                           "%s kv %s: %g from forward.py %s (tolerance %g), %g unrounded", preset,
                           ps_kv_type_name(T), dr, args, tol, d0);
                }
                free(ref);
            }
        }
        free(la);
        free(lb);
        free(lc);
        free(ld);
    }
    /* the sequence holds the same elements in 2 bytes; the recurrent state is float32 */
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = 64;
    ps_session *s = NULL, *s32 = NULL;
    CHECK(ps_session_create(m, &sp, &s32, &e) == PS_OK);
    sp.kv_type = PS_KV_BF16;
    CHECK(ps_session_create(m, &sp, &s, &e) == PS_OK);
    if (s && s32) {
        CHECK(s->seq->kv_elt == 2 && s->seq->kv_type == PS_KV_BF16 && s32->seq->kv_elt == 4);
        CHECK(s->seq->kv_elems == s32->seq->kv_elems && s->seq->kv_elems > 0);
        CHECK((s->seq->ssm_state != NULL) == (m->hp.n_layer_rs > 0));
    }
    ps_session_free(s);
    ps_session_free(s32);
    free(ids);
    free(l32);
    free(ref32);
    ps_model_free(m);
    remove(path);
}

static void test_refusals_and_faults(void) {
    ps_genmodel_params gp = ps_genmodel_default_params();
    ps_genmodel_preset("gemma3-tiny", &gp, NULL);
    gp.type = PS_GGML_F16;
    const char *path = outp("faults.gguf");
    ps_error e;
    ps_model *m = NULL;
    if (ps_genmodel_write(&gp, path, &e) != PS_OK || ps_model_load(path, NULL, &m, &e) != PS_OK) {
        CHECKF(0, "gemma3-tiny: %s", e.message);
        return;
    }
    ps_session_params sp = ps_session_default_params();
    sp.n_ctx = 256;
    sp.kv_type = (ps_kv_type)5;
    ps_session *s = NULL;
    ps_status st = ps_session_create(m, &sp, &s, &e);
    CHECKF(st == PS_ERR_INVALID_ARG && !s && strstr(e.message, "PS_KV_F16") &&
               strstr(e.message, "PS_KV_BF16") && strstr(e.message, "PS_KV_BF16_DOT") &&
               strstr(e.message, "PS_KV_F16_DOT"),
           "kv_type 5: status %d, '%s'", (int)st, e.message);
    CHECK(!strcmp(ps_kv_type_name(PS_KV_F16), "f16") && !strcmp(ps_kv_type_name(PS_KV_BF16), "bf16") &&
          !strcmp(ps_kv_type_name(PS_KV_F32), "f32") &&
          !strcmp(ps_kv_type_name(PS_KV_BF16_DOT), "bf16-dot") &&
          !strcmp(ps_kv_type_name(PS_KV_F16_DOT), "f16-dot") &&
          !strcmp(ps_kv_type_name((ps_kv_type)9), "?"));
    CHECK(ps_session_default_params().kv_type == PS_KV_F32);
    /* every allocation over session create (kv f16) + a miss + a hit of the prefix cache */
    sp.kv_type = PS_KV_F16;
    int32_t *a = make_ids(100, gp.n_vocab, 41);
    ps_score_params scp = ps_score_default_params();
    ps_score_result *ref = NULL;
    CHECK(ps_session_create(m, &sp, &s, &e) == PS_OK);
    if (s) CHECK(ps_score_tokens(s, a, 100, &scp, &ref, &e) == PS_OK);
    ps_session_free(s);
    int bad = 0, wrong = 0;
    int64_t n = 0;
    for (; ref; n++) {
        ps_alloc_fail_after(n);
        ps_prefix_cache *c = NULL;
        ps_score_result *r1 = NULL, *r2 = NULL;
        s = NULL;
        st = ps_session_create(m, &sp, &s, &e);
        if (st == PS_OK) st = ps_prefix_cache_create(m, NULL, &c, &e);
        scp.cache = c;
        if (st == PS_OK) st = ps_score_tokens(s, a, 100, &scp, &r1, &e);
        if (st == PS_OK) st = ps_score_tokens(s, a, 90, &scp, &r2, &e);
        const int64_t used = ps_alloc_count();
        ps_alloc_fail_after(-1);
        if (st != PS_OK && st != PS_ERR_NOMEM) bad++;
        if (st == PS_OK && (memcmp(r1->logprobs + 1, ref->logprobs + 1, 99 * 4) ||
                            memcmp(r2->logprobs + 1, ref->logprobs + 1, 89 * 4)))
            wrong++;
        ps_score_result_free(r1);
        ps_score_result_free(r2);
        ps_prefix_cache_free(c);
        ps_session_free(s);
        if (st == PS_OK && used <= n) break;
        if (n > 100000) break;
    }
    CHECKF(bad == 0 && wrong == 0 && n > 5, "faults: %d unclean, %d wrong over %lld", bad, wrong,
           (long long)n);
    printf("NOTE: kv f16: %lld allocation points over session create + cache miss + hit, each a "
           "clean PS_ERR_NOMEM\n", (long long)n);
    ps_score_result_free(ref);
    free(a);
    ps_model_free(m);
    remove(path);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(out_dir, sizeof out_dir, "%s/ps-test-kvtype-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(out_dir)) {
        CHECKF(0, "no temp dir");
        return ps_test_done("kvtype");
    }
    test_round();
    test_kernels();
    test_dot_step();
    test_dot_kernels();
    test_model("tiny", PS_GGML_F32, true);
    test_model("qwen35-tiny", PS_GGML_F32, true);
    test_model("gemma2-tiny", PS_GGML_F32, false);
    test_refusals_and_faults();
    rmdir(out_dir);
    return ps_test_done("kvtype");
}
