/*
 * attention.c — the KV cache's layout (attention.h) and attention over it.
 *
 * Kernels: ps_attn_scores (Q K^T against 16-key blocks of K), ps_attn_pv / ps_attn_pv_acc
 * (P V, each query over its own key count), single-threaded, each value a fixed sequence of
 * operations per ISA. ps_attention runs a layer for the rows of one forward call: one pool task
 * per (segment, head, block of up to PS_ATT_QBLOCK queries of that segment), each computing
 *   S (nq, keys) = Q (nq, hd) @ K^T          (every query against the keys up to the block's
 *                                             last; a row only reads its own prefix)
 *   P = softmax of each row's keys (scale, sink, soft-cap);  out (nq, hd) = P @ V
 * over the segment's own sequence, so a row's result depends only on its query and its own
 * sequence's keys — never on the thread, the block or the other segments of the call.
 *
 * K/V element types (ps_kv_type): float32, IEEE half, bfloat16 (bf16-dot stores bfloat16 too:
 * ps_kv_elem_type; its tasks round the block's queries and probabilities to bf16 and call
 * attention_dot.c's pair kernels instead, with key pairs from even positions: dot_queries,
 * dot_probs). ps_kv_round turns a row of
 * floats into the cache's type when it is written (round to nearest even: vcvtps2ph for half,
 * the integer rounding of ps_f32_to_bf16 for bfloat16; NaN made the scalar form's quiet NaN),
 * and the kernels widen each element exactly as they load it (vcvtph2ps; a bfloat16 is the
 * high half of a float32), then run the float32 kernel's operations unchanged. So every kernel
 * gives, on a half cache, the bits it gives on a float32 cache holding the widened values, and
 * the scalar forms (ps_f16_to_f32 / ps_bf16_to_f32 per element) are the reference.
 */
#include "run/attention.h"
#include "base/simd.h"
#include "base/prof.h"
#include "kernels/qact.h"
#include "kernels/vecmath.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ---- K/V elements: rounding on write, widening on read ---- */

/* Element i of x (type T) as float32, exact: the scalar reference of every widening load. */
static inline float kv_get(const void *x, int T, int64_t i) {
    if (T == PS_KV_F16) return ps_f16_to_f32(((const uint16_t *)x)[i]);
    if (T == PS_KV_BF16) return ps_bf16_to_f32(((const uint16_t *)x)[i]);
    return ((const float *)x)[i];
}

static void round_scalar(ps_kv_type t, const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = t == PS_KV_F16 ? ps_f32_to_f16(x[i]) : ps_f32_to_bf16(x[i]);
}

#if defined(__x86_64__)
/* 16 elements of type T at p as floats, lanes outside m zero (vcvtph2ps is exact; a bfloat16
 * is the high half of its float32). */
PS_TARGET_AVX512 static inline __attribute__((always_inline)) __m512 ld16_avx512(int T, __mmask16 m,
                                                                       const void *p) {
    if (T == PS_KV_F32) return _mm512_maskz_loadu_ps(m, p);
    const __m256i h = _mm256_maskz_loadu_epi16(m, p);
    if (T == PS_KV_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* 8 halves / bfloat16 (16 bytes) as floats. */
PS_TARGET_AVX2 static inline __attribute__((always_inline)) __m256 cvt8_avx2(int T, __m128i h) {
    if (T == PS_KV_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
/* 8 whole elements of type T at p as floats. */
PS_TARGET_AVX2 static inline __attribute__((always_inline)) __m256 ld8_avx2(int T, const void *p) {
    if (T == PS_KV_F32) return _mm256_loadu_ps(p);
    return cvt8_avx2(T, _mm_loadu_si128((const __m128i *)p));
}
/* The same for the first `left` of them (lanes >= left zero; m = the lane mask of left); reads
 * no element at or past left. */
PS_TARGET_AVX2 static inline __attribute__((always_inline)) __m256 ldm8_avx2(int T, __m256i m,
                                                                   int32_t left, const void *p) {
    if (T == PS_KV_F32) return _mm256_maskload_ps(p, m);
    if (left >= 8) return cvt8_avx2(T, _mm_loadu_si128((const __m128i *)p));
    uint16_t t[8] = {0};
    if (left > 0) memcpy(t, p, (size_t)left * sizeof *t);
    return cvt8_avx2(T, _mm_loadu_si128((const __m128i *)(void *)t));
}

/* 16 floats -> halves (vcvtps2ph, round to nearest even; a NaN becomes sign | 0x7e00, as
 * ps_f32_to_f16) or bfloat16 (ps_f32_to_bf16's integer rounding: x + 0x7fff + bit 16, NaN
 * (x >> 16) | 0x40), as 16 uint16. */
PS_TARGET_AVX512 static inline __attribute__((always_inline)) __m256i rnd16_avx512(ps_kv_type t, __m512 v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i ax = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(ax, _mm512_set1_epi32(0x7f800000));
    if (t == PS_KV_F16) {
        const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512i q = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x8000)),
            _mm512_set1_epi32(0x7e00));
        return _mm256_mask_blend_epi16(nan, h, _mm512_cvtepi32_epi16(q));
    }
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

PS_TARGET_AVX512 static void round_avx512(ps_kv_type t, const float *x, uint16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(void *)(y + i), rnd16_avx512(t, _mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        _mm256_mask_storeu_epi16(y + i, m, rnd16_avx512(t, _mm512_maskz_loadu_ps(m, x + i)));
    }
}

/* The AVX2 form of rnd16_avx512, 8 at a time (the tail: round_scalar). */
PS_TARGET_AVX2 static void round_avx2(ps_kv_type t, const float *x, uint16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256i xi = _mm256_castps_si256(v);
        const __m256i ax = _mm256_and_si256(xi, _mm256_set1_epi32(0x7fffffff));
        const __m256i nan = _mm256_cmpgt_epi32(ax, _mm256_set1_epi32(0x7f800000)); /* ax >= 0 */
        __m256i r;
        if (t == PS_KV_F16) {
            const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
            const __m256i q = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi32(xi, 16), _mm256_set1_epi32(0x8000)),
                _mm256_set1_epi32(0x7e00));
            r = _mm256_blendv_epi8(h, q, nan);
        } else {
            const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(xi, 16), _mm256_set1_epi32(1));
            r = _mm256_srli_epi32(
                _mm256_add_epi32(xi, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
            const __m256i q = _mm256_or_si256(_mm256_srli_epi32(xi, 16), _mm256_set1_epi32(0x40));
            r = _mm256_blendv_epi8(r, q, nan);
        }
        /* lanes hold 0 .. 0xffff: the unsigned saturating pack keeps them */
        const __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128((__m128i *)(void *)(y + i), p);
    }
    round_scalar(t, x + i, y + i, n - i);
}
#endif

void ps_kv_round(ps_isa isa, ps_kv_type t, const float *x, void *y, int64_t n) {
    t = ps_kv_elem_type(t);
    if (t == PS_KV_F32) {
        memcpy(y, x, (size_t)n * sizeof(float));
        return;
    }
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) { round_avx512(t, x, y, n); return; }
    if (isa == PS_ISA_AVX2) { round_avx2(t, x, y, n); return; }
#endif
    round_scalar(t, x, y, n);
}

#if defined(__x86_64__)
PS_TARGET_AVX512 static void widen_avx512(int T, const void *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(y + i, m, ld16_avx512(T, m, ps_kv_at(x, (ps_kv_type)T, i)));
    }
}
PS_TARGET_AVX2 static void widen_avx2(int T, const void *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, ld8_avx2(T, ps_kv_at(x, (ps_kv_type)T, i)));
    for (; i < n; i++) y[i] = kv_get(x, T, i);
}
#endif

void ps_kv_widen(ps_isa isa, ps_kv_type t, const void *x, float *y, int64_t n) {
    t = ps_kv_elem_type(t);
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) { widen_avx512((int)t, x, y, n); return; }
    if (isa == PS_ISA_AVX2) { widen_avx2((int)t, x, y, n); return; }
#endif
    for (int64_t i = 0; i < n; i++) y[i] = kv_get(x, (int)t, i);
}

/* ---- attention products (single-threaded; the caller's task) ---- */

/* out (nq, hd) = P (nq, keys) @ V (keys, hd) with query q summing keys [0, n_keys[q]) in order,
 * each term one ps_axpy_f32 step. NQ queries at a time so every V row is loaded once per group
 * of NQ, and keys in runs of PS_ATT_PV_KEYS, each run over every group while its V rows are in
 * cache: a run after the first continues the sums the one before stored (a float32 store and
 * load, so the same sequence of operations per output and the same bits). */
#if defined(__x86_64__)
/* NQ queries x 4 chunks of 16 dimensions (d0 .. d0 + 63) of out, keys [j0, j1): 4 * NQ
 * accumulators; per key 4 V loads and NQ broadcasts feed 4 * NQ FMAs. Keys below every query's
 * count run for all queries, the rest per query (j < n_keys[q]), so each query sees its own
 * keys in order. */
PS_TARGET_AVX512 static inline __attribute__((always_inline)) void pv_avx512_n(
    int NQ, int T, const float *p, int64_t ldp, const int32_t *n_keys, int32_t j0, int32_t j1,
    const void *v, int64_t hd, int64_t d0, float *out, int64_t ldo, bool acc_in) {
    int32_t nk_min = n_keys[0], nk_max = n_keys[0];
    for (int q = 1; q < NQ; q++) {
        nk_min = PS_MIN(nk_min, n_keys[q]);
        nk_max = PS_MAX(nk_max, n_keys[q]);
    }
    nk_min = PS_MIN(nk_min, j1);
    nk_max = PS_MIN(nk_max, j1);
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
    const void *vd = ps_kv_at(v, (ps_kv_type)T, d0);
    int32_t j = j0;
    for (; j < nk_min; j++) {
        __m512 vj[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
            vj[c] = ld16_avx512(T, m[c], ps_kv_at(vd, (ps_kv_type)T, j * hd + 16 * c));
        _Pragma("GCC unroll 6") for (int q = 0; q < NQ; q++) {
            const __m512 pj = _mm512_set1_ps(p[q * ldp + j]);
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
                acc[q][c] = _mm512_fmadd_ps(pj, vj[c], acc[q][c]);
        }
    }
    for (; j < nk_max; j++) {
        __m512 vj[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
            vj[c] = ld16_avx512(T, m[c], ps_kv_at(vd, (ps_kv_type)T, j * hd + 16 * c));
        _Pragma("GCC unroll 6") for (int q = 0; q < NQ; q++) if (j < n_keys[q]) {
            const __m512 pj = _mm512_set1_ps(p[q * ldp + j]);
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
                acc[q][c] = _mm512_fmadd_ps(pj, vj[c], acc[q][c]);
        }
    }
    _Pragma("GCC unroll 6") for (int q = 0; q < NQ; q++)
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
            _mm512_mask_storeu_ps(out + q * ldo + d0 + 16 * c, m[c], acc[q][c]);
}

/* One instance per element type T (a constant, so each loop has one load form). */
#define PV_AVX512_T(name, T)                                                                   \
    PS_TARGET_AVX512 static void name(const float *p, int64_t ldp, const int32_t *n_keys, int nq,      \
                              const void *v, int64_t hd, float *out, int64_t ldo, bool acc_in) { \
        int32_t nk = 0;                                                                        \
        for (int q = 0; q < nq; q++) nk = PS_MAX(nk, n_keys[q]);                               \
        for (int32_t j0 = 0; j0 == 0 || j0 < nk; j0 += PS_ATT_PV_KEYS) {                       \
            const int32_t j1 = j0 + PS_ATT_PV_KEYS;                                            \
            const bool in = acc_in || j0 > 0;                                                  \
            for (int64_t d0 = 0; d0 < hd; d0 += 64)                                            \
                for (int q0 = 0; q0 < nq;) {                                                   \
                    const int left = nq - q0;                                                  \
                    const int k = left >= 6 ? 6 : left >= 4 ? 4 : left >= 2 ? 2 : 1;           \
                    const float *pq = p + q0 * ldp;                                            \
                    const int32_t *nq0 = n_keys + q0;                                          \
                    float *oq = out + q0 * ldo;                                                \
                    switch (k) {                                                               \
                    case 6: pv_avx512_n(6, T, pq, ldp, nq0, j0, j1, v, hd, d0, oq, ldo, in); break; \
                    case 4: pv_avx512_n(4, T, pq, ldp, nq0, j0, j1, v, hd, d0, oq, ldo, in); break; \
                    case 2: pv_avx512_n(2, T, pq, ldp, nq0, j0, j1, v, hd, d0, oq, ldo, in); break; \
                    default: pv_avx512_n(1, T, pq, ldp, nq0, j0, j1, v, hd, d0, oq, ldo, in); break; \
                    }                                                                          \
                    q0 += k;                                                                   \
                }                                                                              \
        }                                                                                      \
    }
PV_AVX512_T(pv_avx512_f32, PS_KV_F32)
PV_AVX512_T(pv_avx512_f16, PS_KV_F16)
PV_AVX512_T(pv_avx512_bf16, PS_KV_BF16)
#undef PV_AVX512_T

/* out[0 .. n) += a * x[0 .. n) (x of type T, widened), each term as ps_axpy_f32's AVX2 form:
 * one fused multiply-add per element. */
PS_TARGET_AVX2 static void axpy_kv_avx2(int T, float a, const void *x, float *y, int64_t n) {
    const __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, ld8_avx2(T, ps_kv_at(x, (ps_kv_type)T, i)),
                                                _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = fmaf(a, kv_get(x, T, i), y[i]);
}
#endif

/* ---- attention scores over a K cache in key blocks ---- */

/* K layout (PS_ATT_KBLOCK = 16 keys per block): key j, dimension d at
 *     kt[(j / 16) * hd * 16 + d * 16 + j % 16]
 * so one block is hd x 16 contiguous floats and a vector of 16 keys of one dimension is one
 * aligned 64-byte line; the score kernel walks a block front to back.
 * s[r][j] = sum over d of q[r][d] * k_j[d], d = 0 .. hd-1 in order, one rounding per step
 * (scalar: multiply then add; SIMD: fused multiply-add), so a score depends only on its query
 * and key, never on how queries or keys are grouped. Keys j < n_keys are read, none beyond. */

#define KT_AT(hd, j, d) (((int64_t)(j) / 16) * (hd) * 16 + (int64_t)(d) * 16 + (j) % 16)

static void scores_scalar(const float *q, int64_t ldq, int32_t nq, const void *kt, int T,
                          int32_t n_keys, int32_t hd, float *s, int64_t lds) {
    for (int32_t r = 0; r < nq; r++)
        for (int32_t j = 0; j < n_keys; j++) {
            float acc = 0.0f;
            for (int32_t d = 0; d < hd; d++) acc += q[r * ldq + d] * kv_get(kt, T, KT_AT(hd, j, d));
            s[r * lds + j] = acc;
        }
}

#if defined(__x86_64__)
/* R queries x C vectors of 8 keys from key j0 (a multiple of 16): R * C accumulators; per
 * dimension C key loads and R broadcasts. Lanes past n_keys are masked off. */
PS_TARGET_AVX2 static inline __attribute__((always_inline)) void scores_avx2_n(
    int R, int C, int T, const float *q, int64_t ldq, const void *kt, int32_t n_keys, int32_t j0,
    int32_t hd, float *s, int64_t lds) {
    __m256i m[2];
    int32_t left[2];
    for (int c = 0; c < C; c++) {
        left[c] = n_keys - (j0 + 8 * c);
        m[c] = _mm256_cmpgt_epi32(_mm256_set1_epi32(left[c]),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }
    const void *blk = ps_kv_at(kt, (ps_kv_type)T, (int64_t)(j0 / 16) * hd * 16);
    __m256 acc[4][2];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 2") for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    for (int32_t d = 0; d < hd; d++) {
        __m256 kv[2];
        _Pragma("GCC unroll 2") for (int c = 0; c < C; c++)
            kv[c] = ldm8_avx2(T, m[c], left[c], ps_kv_at(blk, (ps_kv_type)T, d * 16 + 8 * c));
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
            const __m256 qv = _mm256_broadcast_ss(q + r * ldq + d);
            _Pragma("GCC unroll 2") for (int c = 0; c < C; c++)
                acc[r][c] = _mm256_fmadd_ps(qv, kv[c], acc[r][c]);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 2") for (int c = 0; c < C; c++)
            _mm256_maskstore_ps(s + r * lds + j0 + 8 * c, m[c], acc[r][c]);
}

#define SCORES_AVX2_T(name, T)                                                                 \
    PS_TARGET_AVX2 static void name(const float *q, int64_t ldq, int32_t nq, const void *kt,          \
                            int32_t n_keys, int32_t hd, float *s, int64_t lds) {              \
        for (int32_t j0 = 0; j0 < n_keys; j0 += 16) {                                          \
            int32_t r = 0;                                                                     \
            for (; r + 4 <= nq; r += 4)                                                        \
                scores_avx2_n(4, 2, T, q + r * ldq, ldq, kt, n_keys, j0, hd, s + r * lds, lds); \
            for (; r < nq; r++)                                                                \
                scores_avx2_n(1, 2, T, q + r * ldq, ldq, kt, n_keys, j0, hd, s + r * lds, lds); \
        }                                                                                      \
    }
SCORES_AVX2_T(scores_avx2_f32, PS_KV_F32)
SCORES_AVX2_T(scores_avx2_f16, PS_KV_F16)
SCORES_AVX2_T(scores_avx2_bf16, PS_KV_BF16)
#undef SCORES_AVX2_T

/* The AVX-512 form: R queries x C blocks of 16 keys from key j0 (a multiple of 16). */
PS_TARGET_AVX512 static inline __attribute__((always_inline)) void scores_avx512_n(
    int R, int C, int T, const float *q, int64_t ldq, const void *kt, int32_t n_keys, int32_t j0,
    int32_t hd, float *s, int64_t lds) {
    __mmask16 m[4];
    for (int c = 0; c < C; c++) {
        const int32_t left = n_keys - (j0 + 16 * c);
        m[c] = ps_lanes16(left);
    }
    const void *blk = ps_kv_at(kt, (ps_kv_type)T, (int64_t)(j0 / 16) * hd * 16);
    __m512 acc[6][4];
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    for (int32_t d = 0; d < hd; d++) {
        __m512 kv[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
            kv[c] = ld16_avx512(T, m[c], ps_kv_at(blk, (ps_kv_type)T, (int64_t)c * hd * 16 + d * 16));
        _Pragma("GCC unroll 6") for (int r = 0; r < R; r++) {
            const __m512 qv = _mm512_set1_ps(q[r * ldq + d]);
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
                acc[r][c] = _mm512_fmadd_ps(qv, kv[c], acc[r][c]);
        }
    }
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
            _mm512_mask_storeu_ps(s + r * lds + j0 + 16 * c, m[c], acc[r][c]);
}

/* Every query row against keys [j0, j0 + 16 C). */
PS_TARGET_AVX512 static inline __attribute__((always_inline)) void scores_avx512_rows(
    int C, int T, const float *q, int64_t ldq, int32_t nq, const void *kt, int32_t n_keys,
    int32_t j0, int32_t hd, float *s, int64_t lds) {
    int32_t r = 0;
    for (; r + 6 <= nq; r += 6)
        scores_avx512_n(6, C, T, q + r * ldq, ldq, kt, n_keys, j0, hd, s + r * lds, lds);
    for (; r + 2 <= nq; r += 2)
        scores_avx512_n(2, C, T, q + r * ldq, ldq, kt, n_keys, j0, hd, s + r * lds, lds);
    for (; r < nq; r++)
        scores_avx512_n(1, C, T, q + r * ldq, ldq, kt, n_keys, j0, hd, s + r * lds, lds);
}

/* Keys in steps of 64 (4 blocks of 16); the last step takes only the blocks that hold a key.
 * A block wholly past n_keys lies hd x 64 bytes further on, often on a page the cache never
 * touched (a sequence sized for the whole context, a short prompt), where even a load with
 * every lane masked off costs the CPU a fault-suppression assist per instruction, so no such
 * block is loaded (docs/kernels.md, "Measured choices of the float kernels"). Each score is the
 * same chain of products either way (the same bits; tests/test_matmul.c
 * test_attn_scores_tails). */
#define SCORES_AVX512_T(name, T)                                                               \
    PS_TARGET_AVX512 static void name(const float *q, int64_t ldq, int32_t nq, const void *kt,        \
                              int32_t n_keys, int32_t hd, float *s, int64_t lds) {            \
        for (int32_t j0 = 0; j0 < n_keys; j0 += 64) {                                          \
            const int32_t left = n_keys - j0;                                                  \
            if (left > 48) scores_avx512_rows(4, T, q, ldq, nq, kt, n_keys, j0, hd, s, lds);    \
            else if (left > 32) scores_avx512_rows(3, T, q, ldq, nq, kt, n_keys, j0, hd, s, lds); \
            else if (left > 16) scores_avx512_rows(2, T, q, ldq, nq, kt, n_keys, j0, hd, s, lds); \
            else scores_avx512_rows(1, T, q, ldq, nq, kt, n_keys, j0, hd, s, lds);              \
        }                                                                                      \
    }
SCORES_AVX512_T(scores_avx512_f32, PS_KV_F32)
SCORES_AVX512_T(scores_avx512_f16, PS_KV_F16)
SCORES_AVX512_T(scores_avx512_bf16, PS_KV_BF16)
#undef SCORES_AVX512_T
#endif

void ps_attn_scores(ps_isa isa, const float *q, int64_t ldq, int32_t nq, const void *kt,
                    ps_kv_type kt_t, int32_t n_keys, int32_t hd, float *s, int64_t lds) {
    kt_t = ps_kv_elem_type(kt_t);
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) {
        if (kt_t == PS_KV_F16) scores_avx512_f16(q, ldq, nq, kt, n_keys, hd, s, lds);
        else if (kt_t == PS_KV_BF16) scores_avx512_bf16(q, ldq, nq, kt, n_keys, hd, s, lds);
        else scores_avx512_f32(q, ldq, nq, kt, n_keys, hd, s, lds);
        return;
    }
    if (isa == PS_ISA_AVX2) {
        if (kt_t == PS_KV_F16) scores_avx2_f16(q, ldq, nq, kt, n_keys, hd, s, lds);
        else if (kt_t == PS_KV_BF16) scores_avx2_bf16(q, ldq, nq, kt, n_keys, hd, s, lds);
        else scores_avx2_f32(q, ldq, nq, kt, n_keys, hd, s, lds);
        return;
    }
#endif
    scores_scalar(q, ldq, nq, kt, (int)kt_t, n_keys, hd, s, lds);
}

void ps_attn_k_store(ps_isa isa, void *kt, ps_kv_type kt_t, int32_t hd, int32_t j,
                     const float *k) {
    kt_t = ps_kv_elem_type(kt_t);
    if (kt_t == PS_KV_F32) {
        float *f = kt;
        for (int32_t d = 0; d < hd; d++) f[KT_AT(hd, j, d)] = k[d];
        return;
    }
    uint16_t tmp[256], *h = kt;
    for (int32_t d0 = 0; d0 < hd; d0 += 256) {
        const int32_t n = PS_MIN(256, hd - d0);
        ps_kv_round(isa, kt_t, k + d0, tmp, n);
        for (int32_t d = 0; d < n; d++) h[KT_AT(hd, j, d0 + d)] = tmp[d];
    }
}

/* out[0 .. n) += a * x[0 .. n) of type t: ps_axpy_f32 on the widened row, bit for bit. */
static void axpy_kv(ps_isa isa, ps_kv_type t, float a, const void *x, float *y, int64_t n) {
    if (t == PS_KV_F32) {
        ps_axpy_f32(isa, a, x, y, n);
        return;
    }
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX2) {
        axpy_kv_avx2((int)t, a, x, y, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) y[i] += a * kv_get(x, (int)t, i);
}

static void attn_pv(ps_isa isa, const float *p, int64_t ldp, const int32_t *n_keys, int32_t nq,
                    const void *v, ps_kv_type v_t, int64_t hd, float *out, int64_t ldo,
                    bool acc_in) {
    v_t = ps_kv_elem_type(v_t);
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) {
        if (v_t == PS_KV_F16) pv_avx512_f16(p, ldp, n_keys, nq, v, hd, out, ldo, acc_in);
        else if (v_t == PS_KV_BF16) pv_avx512_bf16(p, ldp, n_keys, nq, v, hd, out, ldo, acc_in);
        else pv_avx512_f32(p, ldp, n_keys, nq, v, hd, out, ldo, acc_in);
        return;
    }
#endif
    for (int32_t q = 0; q < nq; q++) {
        float *o = out + q * ldo;
        for (int64_t d = 0; !acc_in && d < hd; d++) o[d] = 0.0f;
        for (int32_t j = 0; j < n_keys[q]; j++)
            axpy_kv(isa, v_t, p[q * ldp + j], ps_kv_at(v, v_t, j * hd), o, hd);
    }
}

void ps_attn_pv(ps_isa isa, const float *p, int64_t ldp, const int32_t *n_keys, int32_t nq,
                const void *v, ps_kv_type v_t, int64_t hd, float *out, int64_t ldo) {
    attn_pv(isa, p, ldp, n_keys, nq, v, v_t, hd, out, ldo, false);
}

void ps_attn_pv_acc(ps_isa isa, const float *p, int64_t ldp, const int32_t *n_keys, int32_t nq,
                    const void *v, ps_kv_type v_t, int64_t hd, float *out, int64_t ldo) {
    attn_pv(isa, p, ldp, n_keys, nq, v, v_t, hd, out, ldo, true);
}

/* ---- the cache ---- */

void ps_kv_store(ps_isa isa, ps_seq *q, int32_t slot, int32_t n_head_kv, int32_t hd, int64_t pos,
                 const float *k, const float *v) {
    const int64_t len = q->kv_len[slot];
    const int32_t j = (int32_t)(pos % len); /* a sliding layer's ring slot */
    for (int32_t g = 0; g < n_head_kv; g++) {
        ps_kv_round(isa, q->kv_type, v + (size_t)g * (size_t)hd,
                    ps_kv_at_mut(ps_kv_v(q, slot, g, hd), q->kv_type, (int64_t)j * hd), hd);
        ps_attn_k_store(isa, ps_kv_k(q, slot, g, hd), q->kv_type, hd, j,
                        k + (size_t)g * (size_t)hd);
    }
}

size_t ps_attention_scratch_floats(int32_t n_ctx, int32_t head_dim) {
    const size_t row = (size_t)n_ctx + 16;
    /* scores | bf16-dot: probabilities as bf16 (a row per query), queries as bf16; f16-dot:
     * the queries rounded to half, as floats */
    const size_t dot = (size_t)PS_ATT_QBLOCK * ((row + 3) / 2) +
                       (size_t)PS_ATT_QBLOCK * (((size_t)head_dim + 3) / 2),
                 f16q = (size_t)PS_ATT_QBLOCK * (size_t)head_dim;
    return 16 + (size_t)PS_ATT_QBLOCK * row + PS_MAX(dot, f16q);
}

/* ---- a layer's attention ---- */

typedef struct {
    const ps_session *s;
    int32_t kv_slot;    /* the layer's KV cache slot (ps_layer.kv_slot) */
    int32_t swa;        /* the layer's window (ps_layer.swa), 0 = global */
    float scale;        /* the query scale */
    const float *sinks; /* the layer's sink logit per head (gpt-oss) | NULL */
    float softcap;      /* attention-logit soft-cap c (gemma2), 0 = none */
    const ps_seg *segs;
    int32_t n_segs;
    int32_t row0[PS_CHUNK + 1];  /* segment i's first row */
    int64_t task0[PS_CHUNK + 1]; /* segment i's first task */
} att_job;

/* softmax(row * scale) over n scores (with the head's sink logit, -inf for none); with a
 * soft-cap c, softmax(tanh(row * scale / c) * c) (llama.cpp: kq * (1/c), tanh, * c, then the
 * softmax at scale 1) */
static void att_softmax(const att_job *job, float *row, int32_t n, float sink) {
    if (job->softcap > 0.0f) {
        for (int32_t j = 0; j < n; j++) row[j] *= job->scale;
        ps_softcap_f32(row, n, job->softcap);
        ps_softmax_sink_f32(job->s->isa, row, n, 1.0f, sink);
        return;
    }
    ps_softmax_sink_f32(job->s->isa, row, n, job->scale, sink);
}

/* bf16-dot's operands, in the thread's scratch after the scores: the block's queries rounded
 * to bf16 (rows of ldqb, a zero after an odd head size) and its probabilities (rows of ldpb). */
typedef struct {
    uint16_t *qb, *pb;
    int64_t ldqb, ldpb;
} att_dot;

static void dot_queries(const ps_session *s, const float *q, int64_t dq, int32_t nq, int32_t hd,
                        const att_dot *w) {
    for (int32_t r = 0; r < nq; r++) {
        uint16_t *row = w->qb + r * w->ldqb;
        ps_kv_round(s->isa, PS_KV_BF16, q + r * dq, row, hd);
        if (hd & 1) row[hd] = 0;
    }
}

/* Row r of pb: `at` zeros, then p[0 .. n) rounded to bf16, then zeros up to `end`. */
static void dot_probs(const ps_session *s, const float *p, int32_t n, uint16_t *row, int32_t at,
                      int32_t end) {
    for (int32_t t = 0; t < at; t++) row[t] = 0;
    ps_kv_round(s->isa, PS_KV_BF16, p, row + at, n);
    for (int32_t t = at + n; t < end; t++) row[t] = 0;
}

/* A sliding layer's head task (see att_task): the block's queries p_first .. p_last see,
 * together, the logical key range lo = max(0, p_first - swa + 1) .. p_last, of len <= swa + 31
 * keys, which the ring holds (kv_len >= swa + n_batch - 1, or all of n_ctx) in at most two
 * physical runs: [lo % R, R) and [0, rest). Row r's scores sc[r][t] are those of logical key
 * lo + t. Run A's scores start at the 16-key block holding lo % R, so up to 15 scores land
 * before sc[r][0] (the scratch keeps 16 floats in front of every row). Row r's own window
 * starts off_r = max(0, p_r - swa + 1) - lo keys in: its softmax covers [off_r, n_keys[r]) and
 * the probabilities before it are 0, so P @ V over [0, n_keys[r]) in logical order (run A, then
 * run B accumulating) adds exactly the window's terms in the window's order: fma(0, v, +0) is +0
 * and every later term lands as if the sum started at off_r. So a score's bits depend only on
 * its position and the keys it sees, never on the chunking or on where the ring wraps. */
static void att_window(const att_job *job, const float *q, int64_t dq, int64_t dqo, int32_t nq,
                       int32_t p_first,
                       const void *K, const void *V, ps_kv_type t, int64_t R, int32_t hd,
                       float *sc, int64_t lds, float sink, float *out, const att_dot *w) {
    const ps_session *s = job->s;
    const int32_t W = job->swa;
    const int64_t lo = PS_MAX(0, (int64_t)p_first - W + 1), hi = (int64_t)p_first + nq - 1;
    const int64_t len = hi - lo + 1, lo_p = lo % R, len_a = PS_MIN(len, R - lo_p);
    const int64_t a = lo_p & ~(int64_t)15;
    if (w) {
        ps_attn_scores_dot(s->isa, w->qb, w->ldqb, nq, (const uint16_t *)K + a * hd,
                           (int32_t)(lo_p - a + len_a), hd, sc - (lo_p - a), lds);
        if (len > len_a)
            ps_attn_scores_dot(s->isa, w->qb, w->ldqb, nq, K, (int32_t)(len - len_a), hd,
                               sc + len_a, lds);
    } else {
        ps_attn_scores(s->isa, q, dq, nq, ps_kv_at(K, t, a * hd), t, (int32_t)(lo_p - a + len_a),
                       hd, sc - (lo_p - a), lds);
        if (len > len_a)
            ps_attn_scores(s->isa, q, dq, nq, K, t, (int32_t)(len - len_a), hd, sc + len_a, lds);
    }
    int32_t n_keys[PS_ATT_QBLOCK] = {0}, n_a[PS_ATT_QBLOCK] = {0}, n_b[PS_ATT_QBLOCK] = {0};
    for (int32_t r = 0; r < nq; r++) {
        const int64_t p = (int64_t)p_first + r, off = PS_MAX(0, p - W + 1) - lo;
        float *row = sc + r * lds;
        att_softmax(job, row + off, (int32_t)(p - lo + 1 - off), sink);
        for (int64_t k = 0; k < off; k++) row[k] = 0.0f;
        if (t == PS_KV_F16_DOT) ps_quant_act_f16(s->isa, row + off, p - lo + 1 - off, row + off);
        n_keys[r] = (int32_t)(p - lo + 1);
        n_a[r] = (int32_t)PS_MIN(n_keys[r], len_a);
        n_b[r] = n_keys[r] - n_a[r];
    }
    if (w) {
        /* key pairs start at even slots (the ring's length is even): run A from lo_p's pair,
         * with a zero for the key before lo when lo_p is odd; run B from slot 0 */
        const int32_t sh = (int32_t)(lo_p & 1), end = (int32_t)((sh + len + 1) & ~(int64_t)1);
        for (int32_t r = 0; r < nq; r++)
            dot_probs(s, sc + r * lds, n_keys[r], w->pb + r * w->ldpb, sh, end);
        ps_attn_pv_dot(s->isa, w->pb, w->ldpb, sh + n_a[nq - 1], nq,
                       (const uint16_t *)V + (lo_p - sh) * hd, hd, out, dqo, false);
        if (len > len_a)
            ps_attn_pv_dot(s->isa, w->pb + sh + len_a, w->ldpb, n_b[nq - 1], nq, V, hd, out, dqo,
                           true);
        return;
    }
    ps_attn_pv(s->isa, sc, lds, n_a, nq, ps_kv_at(V, t, lo_p * hd), t, hd, out, dqo);
    if (len > len_a) ps_attn_pv_acc(s->isa, sc + len_a, lds, n_b, nq, V, t, hd, out, dqo);
}

/* One task = one segment x one head x up to PS_ATT_QBLOCK of the segment's queries i0..i1-1.
 * Query i (position p = n_past + i of the segment's sequence) attends to that sequence's cache
 * positions 0..p (a sliding layer: the last swa of them, att_window). */
static void att_task(void *ctx, int64_t task, int32_t thread) {
    const att_job *job = ctx;
    const ps_session *s = job->s;
    const ps_hparams *hp = &s->model->hp;
    int32_t si = 0;
    while (task >= job->task0[si + 1]) si++;
    const ps_seg *sg = &job->segs[si];
    const ps_seq *sq = sg->seq;
    const int64_t t = task - job->task0[si];
    const int32_t n_qb = (sg->n + PS_ATT_QBLOCK - 1) / PS_ATT_QBLOCK;
    /* a head's blocks from the last (the most keys) down: the tasks left at the end of the
     * pool's order are the cheap ones, so the threads finish together */
    const int32_t h = (int32_t)(t / n_qb), qb = n_qb - 1 - (int32_t)(t % n_qb);
    const int32_t hd = hp->head_dim, g = h / (hp->n_head / hp->n_head_kv);
    const int64_t dqo = (int64_t)hp->n_head * hd; /* the rows of out (and of q, but f16-dot's) */
    int64_t dq = dqo;
    const void *K = ps_kv_k(sq, job->kv_slot, g, hd), *V = ps_kv_v(sq, job->kv_slot, g, hd);
    const ps_kv_type kt = sq->kv_type;
    float *sc = s->att_scratch + (size_t)thread * s->att_stride + 16;
    const int32_t i0 = qb * PS_ATT_QBLOCK, i1 = PS_MIN(sg->n, i0 + PS_ATT_QBLOCK);
    const int32_t nq = i1 - i0, r0 = job->row0[si] + i0;
    const int64_t lds = s->n_ctx + 16;
    const float *q = s->q + (int64_t)r0 * dq + (int64_t)h * hd;
    float *out = s->att + (int64_t)r0 * dq + (int64_t)h * hd;
    const float sink = job->sinks ? job->sinks[h] : -INFINITY;
    att_dot dot, *w = NULL;
    if (kt == PS_KV_BF16_DOT) {
        dot.ldpb = lds + 2;
        dot.pb = (uint16_t *)(void *)(sc + PS_ATT_QBLOCK * lds);
        dot.ldqb = hd + 2;
        dot.qb = dot.pb + PS_ATT_QBLOCK * dot.ldpb;
        w = &dot;
        dot_queries(s, q, dq, nq, hd, w);
    } else if (kt == PS_KV_F16_DOT) {
        /* the block's queries rounded to half (as the F16 products' activations are), rows
         * of hd after the scores; the probabilities are rounded in place after the softmax */
        float *qr = sc + PS_ATT_QBLOCK * lds;
        for (int32_t r = 0; r < nq; r++) ps_quant_act_f16(s->isa, q + r * dq, hd, qr + (int64_t)r * hd);
        q = qr;
        dq = hd;
    }
    if (job->swa > 0) {
        att_window(job, q, dq, dqo, nq, sq->n_past + i0, K, V, kt, sq->kv_len[job->kv_slot], hd, sc,
                   lds, sink, out, w);
        return;
    }
    int32_t n_keys[PS_ATT_QBLOCK] = {0};
    for (int32_t r = 0; r < nq; r++) n_keys[r] = sq->n_past + i0 + r + 1;

    if (w) {
        const int32_t nk = n_keys[nq - 1];
        ps_attn_scores_dot(s->isa, w->qb, w->ldqb, nq, K, nk, hd, sc, lds);
        for (int32_t r = 0; r < nq; r++) {
            att_softmax(job, sc + r * lds, n_keys[r], sink);
            dot_probs(s, sc + r * lds, n_keys[r], w->pb + r * w->ldpb, 0, (nk + 1) & ~1);
        }
        ps_attn_pv_dot(s->isa, w->pb, w->ldpb, nk, nq, V, hd, out, dqo, false);
        return;
    }
    ps_attn_scores(s->isa, q, dq, nq, K, kt, n_keys[nq - 1], hd, sc, lds);
    for (int32_t r = 0; r < nq; r++) {
        att_softmax(job, sc + r * lds, n_keys[r], sink);
        if (kt == PS_KV_F16_DOT) ps_quant_act_f16(s->isa, sc + r * lds, n_keys[r], sc + r * lds);
    }
    ps_attn_pv(s->isa, sc, lds, n_keys, nq, V, kt, hd, out, dqo);
}

void ps_attention(ps_session *s, const ps_layer *L, const ps_seg *segs, int32_t n_segs) {
    const ps_hparams *hp = &s->model->hp;
    att_job job;
    job.s = s;
    job.kv_slot = L->kv_slot;
    job.swa = L->swa;
    job.scale = hp->info->flags & PS_A_Q_PRESCALE ? 1.0f : hp->attn_scale;
    job.sinks = L->sinks;
    job.softcap = hp->attn_softcap;
    job.segs = segs;
    job.n_segs = n_segs;
    job.row0[0] = 0;
    job.task0[0] = 0;
    for (int32_t i = 0; i < n_segs; i++) {
        job.row0[i + 1] = job.row0[i] + segs[i].n;
        job.task0[i + 1] =
            job.task0[i] + (int64_t)hp->n_head * ((segs[i].n + PS_ATT_QBLOCK - 1) / PS_ATT_QBLOCK);
    }
    const uint64_t t_att = ps_prof_start();
    ps_pool_for(s->pool, job.task0[n_segs], att_task, &job);
    ps_prof_add(PS_PROF_ATTENTION, t_att);
}
