/*
 * attention_dot.c — attention's two products in bfloat16 pairs, for the bf16-dot K/V cache
 * (PS_KV_BF16_DOT; attention.c calls them).
 *
 * The operands are bf16: the queries and the softmax probabilities, rounded by the caller, and
 * K and V as the cache stores them (attention.h's layouts, unchanged). Every score and every
 * output is one float32 accumulator, from +0, fed pairs of elements in a fixed order:
 *     acc = step(acc, a0, a1, b0, b1):  t = acc + a1 * b1;  acc = t + a0 * b0
 * each addition rounded to nearest even, a bf16 subnormal operand read as zero and a float32
 * subnormal result flushed to zero. This is what one lane of AVX-512 BF16's vdpbf16ps does
 * (Intel's definition; the same on the AMD cores here: test_kvtype runs these kernels against
 * the definition, subnormal sums included), so the AVX-512 BF16 kernels are one vdpbf16ps per pair and the
 * scalar form (every other CPU) is the same sum in C: both give the same bits.
 *   - Scores: pairs of dimensions (2i, 2i + 1), i in order; lanes are 16 keys of a K block,
 *     whose two dimension rows are interleaved per pair by one vpermw.
 *   - P V: pairs of keys (2t, 2t + 1), t in order, keys counted from the first key of the call
 *     (the caller passes runs that start at an even position); lanes are 16 dimensions of
 *     out, the two V rows interleaved by one vpermt2w. A query that sees fewer keys than the
 *     call has zero probabilities there, and zero pairs add only zeros, which can change
 *     nothing but the sign of a zero sum (a flushed negative subnormal is -0; -0 + +0 is +0);
 *     so each output ends with + 0, a zero as +0, and a query gets the bits it gets alone.
 * A bf16 x bf16 product is exact in float32 (8 x 8 significant bits), so only the order of the
 * sums matters, and it depends on nothing but the query, the key and the position: not on the
 * queries or keys grouped with them, the thread or the ISA.
 * There is no AMX form: Intel's SDM defines tdpbf16ps to sum the even and the odd products of
 * its pairs apart and add them to the accumulator once, a different sum (bench_attn_amx
 * --semantics counts the outputs where the two differ).
 */
#include "run/attention.h"
#include "base/simd.h"

#include <float.h>
#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ---- the scalar definition ---- */

/* A bf16 operand as vdpbf16ps reads it: subnormals (exponent 0) as zero of the same sign. */
static inline float dp_in(uint16_t h) {
    return (h & 0x7f80u) ? ps_bf16_to_f32(h) : ((h & 0x8000u) ? -0.0f : 0.0f);
}
/* A float32 sum as vdpbf16ps leaves it: subnormals flushed to zero of the same sign. */
static inline float dp_out(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

float ps_dot_bf16_step(float acc, uint16_t a0, uint16_t a1, uint16_t b0, uint16_t b1) {
    /* the products are exact; fmaf rounds the sum once, as the unit does */
    const float t = dp_out(fmaf(dp_in(a1), dp_in(b1), dp_out(acc)));
    return dp_out(fmaf(dp_in(a0), dp_in(b0), t));
}

#define KT_AT(hd, j, d) (((int64_t)(j) / 16) * (hd) * 16 + (int64_t)(d) * 16 + (j) % 16)

static void scores_dot_scalar(const uint16_t *qb, int64_t ldq, int32_t nq, const uint16_t *kt,
                              int32_t n_keys, int32_t hd, float *s, int64_t lds) {
    for (int32_t r = 0; r < nq; r++)
        for (int32_t j = 0; j < n_keys; j++) {
            const uint16_t *q = qb + r * ldq;
            float acc = 0.0f;
            for (int32_t d = 0; d < hd; d += 2) {
                const uint16_t k1 = d + 1 < hd ? kt[KT_AT(hd, j, d + 1)] : 0;
                acc = ps_dot_bf16_step(acc, q[d], q[d + 1], kt[KT_AT(hd, j, d)], k1);
            }
            s[r * lds + j] = acc;
        }
}

static void pv_dot_scalar(const uint16_t *pb, int64_t ldp, int32_t n_keys, int32_t nq,
                          const uint16_t *v, int64_t hd, float *out, int64_t ldo, bool acc_in) {
    for (int32_t q = 0; q < nq; q++) {
        const uint16_t *p = pb + q * ldp;
        for (int64_t d = 0; d < hd; d++) {
            float acc = acc_in ? out[q * ldo + d] : 0.0f;
            for (int32_t j = 0; j < n_keys; j += 2) {
                const uint16_t v1 = j + 1 < n_keys ? v[(j + 1) * hd + d] : 0;
                acc = ps_dot_bf16_step(acc, p[j], p[j + 1], v[j * hd + d], v1);
            }
            out[q * ldo + d] = acc + 0.0f; /* a zero sum as +0 */
        }
    }
}

/* ---- AVX-512 BF16 ---- */

#if defined(__x86_64__)
/* One 32-bit broadcast of the bf16 pair at p (p[0] the even element, p[1] the odd). */
PS_TARGET_AVX512_BF16 static inline __attribute__((always_inline)) __m512bh pair16(const uint16_t *p) {
    int32_t x;
    memcpy(&x, p, 4);
    return (__m512bh)_mm512_set1_epi32(x);
}

/* R queries x C blocks of 16 keys from key j0 (a multiple of 16). Per pair of dimensions: the
 * block's two 16-key rows (one 64-byte line) interleaved into (k_j[d], k_j[d+1]) lanes, R
 * broadcasts, R * C vdpbf16ps. Blocks wholly past n_keys are not read; lanes past n_keys in the
 * last block compute on padding and are not stored. */
PS_TARGET_AVX512_BF16 static inline __attribute__((always_inline)) void scores_dot_n(
    int R, int C, const uint16_t *qb, int64_t ldq, const uint16_t *kt, int32_t n_keys, int32_t j0,
    int32_t hd, float *s, int64_t lds) {
    static const uint16_t IDX[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                     8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i idx = _mm512_loadu_si512(IDX);
    __mmask16 m[4];
    for (int c = 0; c < C; c++) {
        const int32_t left = n_keys - (j0 + 16 * c);
        m[c] = ps_lanes16(left);
    }
    const uint16_t *blk = kt + (int64_t)(j0 / 16) * hd * 16;
    __m512 acc[6][4];
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    int32_t d = 0;
    for (; d + 2 <= hd; d += 2) {
        __m512bh kv[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
            kv[c] = (__m512bh)(m[c] ? _mm512_permutexvar_epi16(
                                          idx, _mm512_loadu_si512(blk + (int64_t)c * hd * 16 + d * 16))
                                    : _mm512_setzero_si512());
        _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) {
            const __m512bh qv = pair16(qb + r * ldq + d);
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
                acc[r][c] = _mm512_dpbf16_ps(acc[r][c], qv, kv[c]);
        }
    }
    if (d < hd) { /* an odd head size: the last dimension pairs with a zero */
        __m512bh kv[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
            kv[c] = (__m512bh)(m[c] ? _mm512_permutexvar_epi16(
                                          idx, _mm512_zextsi256_si512(_mm256_loadu_si256(
                                                   (const __m256i *)(blk + (int64_t)c * hd * 16 + d * 16))))
                                    : _mm512_setzero_si512());
        _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) {
            const __m512bh qv = pair16(qb + r * ldq + d);
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
                acc[r][c] = _mm512_dpbf16_ps(acc[r][c], qv, kv[c]);
        }
    }
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
            _mm512_mask_storeu_ps(s + r * lds + j0 + 16 * c, m[c], acc[r][c]);
}

PS_TARGET_AVX512_BF16 static void scores_dot_avx512(const uint16_t *qb, int64_t ldq, int32_t nq,
                                     const uint16_t *kt, int32_t n_keys, int32_t hd, float *s,
                                     int64_t lds) {
    for (int32_t j0 = 0; j0 < n_keys; j0 += 64) {
        int32_t r = 0;
        for (; r + 6 <= nq; r += 6)
            scores_dot_n(6, 4, qb + r * ldq, ldq, kt, n_keys, j0, hd, s + r * lds, lds);
        for (; r + 2 <= nq; r += 2)
            scores_dot_n(2, 4, qb + r * ldq, ldq, kt, n_keys, j0, hd, s + r * lds, lds);
        for (; r < nq; r++)
            scores_dot_n(1, 4, qb + r * ldq, ldq, kt, n_keys, j0, hd, s + r * lds, lds);
    }
}

/* NQ queries x 4 chunks of 16 dimensions (d0 .. d0 + 63) of out. Per pair of keys: rows 2t and
 * 2t + 1 of each chunk interleaved into (v_2t[d], v_2t+1[d]) lanes (the second row zero past
 * n_keys), NQ broadcasts of (p_2t, p_2t+1), 4 * NQ vdpbf16ps; then + 0 (a zero sum as +0). */
PS_TARGET_AVX512_BF16 static inline __attribute__((always_inline)) void pv_dot_n(
    int NQ, const uint16_t *pb, int64_t ldp, int32_t j0, int32_t n_keys, const uint16_t *v,
    int64_t hd, int64_t d0, float *out, int64_t ldo, bool acc_in) {
    static const uint16_t IDX[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                     8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const __m512i idx = _mm512_loadu_si512(IDX);
    __mmask16 m[4];
    for (int c = 0; c < 4; c++) {
        const int64_t left = hd - (d0 + 16 * c);
        m[c] = ps_lanes16(left);
    }
    __m512 acc[6][4];
    _Pragma("GCC unroll 6") for (int q = 0; q < NQ; q++)
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
            acc[q][c] = acc_in ? _mm512_maskz_loadu_ps(m[c], out + q * ldo + d0 + 16 * c)
                               : _mm512_setzero_ps();
    for (int32_t j = j0; j < n_keys; j += 2) {
        const uint16_t *v0 = v + (int64_t)j * hd + d0, *v1 = v0 + hd;
        const bool two = j + 1 < n_keys;
        __m512bh vj[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            const __m512i a = _mm512_castsi256_si512(_mm256_maskz_loadu_epi16(m[c], v0 + 16 * c));
            const __m512i b = two ? _mm512_castsi256_si512(
                                        _mm256_maskz_loadu_epi16(m[c], v1 + 16 * c))
                                  : _mm512_setzero_si512();
            vj[c] = (__m512bh)_mm512_permutex2var_epi16(a, idx, b);
        }
        _Pragma("GCC unroll 6") for (int q = 0; q < NQ; q++) {
            const __m512bh pj = pair16(pb + q * ldp + j);
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
                acc[q][c] = _mm512_dpbf16_ps(acc[q][c], pj, vj[c]);
        }
    }
    _Pragma("GCC unroll 6") for (int q = 0; q < NQ; q++)
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
            _mm512_mask_storeu_ps(out + q * ldo + d0 + 16 * c, m[c],
                                  _mm512_add_ps(acc[q][c], _mm512_setzero_ps()));
}

/* Keys in runs of PS_ATT_PV_KEYS, each run over every query group while its V rows are in
 * cache; a run after the first continues the sums stored by the one before (a float32 store
 * and load: the same sequence of operations per output, so the same bits). */
PS_TARGET_AVX512_BF16 static void pv_dot_avx512(const uint16_t *pb, int64_t ldp, int32_t n_keys, int32_t nq,
                                 const uint16_t *v, int64_t hd, float *out, int64_t ldo,
                                 bool acc_in) {
    for (int32_t j0 = 0; j0 == 0 || j0 < n_keys; j0 += PS_ATT_PV_KEYS) {
        const int32_t j1 = PS_MIN(n_keys, j0 + PS_ATT_PV_KEYS);
        const bool in = acc_in || j0 > 0;
        for (int64_t d0 = 0; d0 < hd; d0 += 64)
            for (int32_t q0 = 0; q0 < nq;) {
                const int32_t left = nq - q0;
                const int k = left >= 6 ? 6 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
                const uint16_t *pq = pb + q0 * ldp;
                float *oq = out + q0 * ldo;
                switch (k) {
                case 6: pv_dot_n(6, pq, ldp, j0, j1, v, hd, d0, oq, ldo, in); break;
                case 4: pv_dot_n(4, pq, ldp, j0, j1, v, hd, d0, oq, ldo, in); break;
                case 2: pv_dot_n(2, pq, ldp, j0, j1, v, hd, d0, oq, ldo, in); break;
                default: pv_dot_n(1, pq, ldp, j0, j1, v, hd, d0, oq, ldo, in); break;
                }
                q0 += k;
            }
    }
}
#endif

static bool use_avx512bf16(ps_isa isa) {
#if defined(__x86_64__)
    return isa == PS_ISA_AVX512 && ps_cpu_has_avx512bf16();
#else
    (void)isa;
    return false;
#endif
}

void ps_attn_scores_dot(ps_isa isa, const uint16_t *qb, int64_t ldq, int32_t nq,
                        const uint16_t *kt, int32_t n_keys, int32_t hd, float *s, int64_t lds) {
#if defined(__x86_64__)
    if (use_avx512bf16(isa)) {
        scores_dot_avx512(qb, ldq, nq, kt, n_keys, hd, s, lds);
        return;
    }
#endif
    scores_dot_scalar(qb, ldq, nq, kt, n_keys, hd, s, lds);
}

void ps_attn_pv_dot(ps_isa isa, const uint16_t *pb, int64_t ldp, int32_t n_keys, int32_t nq,
                    const uint16_t *v, int64_t hd, float *out, int64_t ldo, bool acc_in) {
#if defined(__x86_64__)
    if (use_avx512bf16(isa)) {
        pv_dot_avx512(pb, ldp, n_keys, nq, v, hd, out, ldo, acc_in);
        return;
    }
#endif
    pv_dot_scalar(pb, ldp, n_keys, nq, v, hd, out, ldo, acc_in);
}
