/*
 * topk_avx512.c — the AVX-512 variants of the chunk kernels of the top-K row pass (see topk.h
 * for the canonical procedure they must reproduce bit for bit).
 *
 * One 64-logit block is four zmm vectors; vector q holds lanes 16q..16q+15, so the 64 lane
 * sums live in four accumulators. The exp is topk.h's canonical sequence of FMAs, with
 * vscalefps for p * 2^n (exact for n in [-126, 127], like the scalar multiply by 2^n) and a
 * zero-mask for d < -87 (NaN lanes stay NaN).
 */
#include "kernels/topk.h"
#include "base/simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define PS_T512_INLINE static inline __attribute__((always_inline)) PS_TARGET_AVX512

/* 16 logits at element i of row, as float32 (exact conversion). */
PS_T512_INLINE __m512 load16(const void *row, ps_dtype dt, int64_t i) {
    if (dt == PS_DTYPE_F32) return _mm512_loadu_ps((const float *)row + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i));
    if (dt == PS_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Horizontal max of 16 lanes (exact: max is order independent for non-NaN values). */
PS_T512_INLINE float hmax16(__m512 v) {
    __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_max_ps(b, _mm_movehl_ps(b, b));
    b = _mm_max_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

/* One step of reduce16: the max of two shuffles of (a, b) (128-bit quarters or 32-bit lanes). */
#define FOLD_Q(a, b, s0, s1) \
    _mm512_max_ps(_mm512_shuffle_f32x4(a, b, s0), _mm512_shuffle_f32x4(a, b, s1))
#define FOLD_L(a, b, s0, s1) \
    _mm512_max_ps(_mm512_shuffle_ps(a, b, s0), _mm512_shuffle_ps(a, b, s1))

/* The maxima of 16 block vectors as one vector, block order: a transposing reduction, 31
 * shuffles and maxes instead of 16 horizontal reductions of 7 steps. */
PS_T512_INLINE __m512 reduce16(const __m512 *v) {
    __m512 w[8], x[4];
    for (int i = 0; i < 8; i++) w[i] = FOLD_Q(v[2 * i], v[2 * i + 1], 0x44, 0xEE);
    /* w[i]: quarters 0,1 hold block 2i, quarters 2,3 block 2i+1 */
    for (int j = 0; j < 4; j++) x[j] = FOLD_Q(w[2 * j], w[2 * j + 1], 0x88, 0xDD);
    /* x[j]: quarter q holds block 4j + q */
    __m512 u = FOLD_L(x[0], x[1], 0x44, 0xEE), t = FOLD_L(x[2], x[3], 0x44, 0xEE);
    /* u quarter q: lanes 0,1 block q, lanes 2,3 block 4 + q; t: blocks 8 + q, 12 + q */
    __m512 m = FOLD_L(u, t, 0x88, 0xDD);
    /* lane 4q + r holds block 4r + q */
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(idx, m);
}

/* Block maxima: the 16-lane max vector of each block is parked in vb[b % 16] and every 16
 * blocks reduced at once into bm (the rest one by one at the end). */
PS_T512_INLINE void note_block(__m512 *vb, float *bm, int64_t b, __m512 v) {
    vb[b & 15] = v;
    if ((b & 15) == 15) _mm512_storeu_ps(bm + b - 15, reduce16(vb));
}
PS_T512_INLINE void finish_blocks(const __m512 *vb, float *bm, int64_t nb) {
    for (int64_t b = nb & ~(int64_t)15; b < nb; b++) bm[b] = hmax16(vb[b & 15]);
}

/* Prefetch the block PF_AHEAD blocks ahead (8 KB of f32; best of 0/8/16/32/64/128 measured):
 * the loop is compute-bound, so the next data is pulled in while the exps run (prefetches
 * never fault: running past the row is harmless). */
#define PF_AHEAD 32
PS_T512_INLINE void prefetch_block(const void *row, size_t es, int64_t i) {
    /* an address, not a pointer into the row: it may lie past the end */
    const char *p =
        (const char *)((uintptr_t)row + (size_t)(i + PF_AHEAD * PS_TOPK_BLOCK) * es);
    for (size_t off = 0; off < PS_TOPK_BLOCK * es; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

/* f32 / f16, one pass: bm[b] = max of block b0 + b (if bm), C[16q + j] += exp(x[64b + 16q + j]
 * - shift), blocks in order; returns the maximum.  row: (n_blocks, 64) of dt. */
PS_T512_INLINE float fused_dt(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                              float *bm, float *C, bool with_max) {
    __m512 s0 = _mm512_loadu_ps(C), s1 = _mm512_loadu_ps(C + 16);
    __m512 s2 = _mm512_loadu_ps(C + 32), s3 = _mm512_loadu_ps(C + 48);
    __m512 cm = _mm512_set1_ps(-INFINITY), vb[16];
    const __m512 sh = _mm512_set1_ps(shift);
    const size_t es = dt == PS_DTYPE_F32 ? 4 : 2;
    for (int64_t b = 0; b < nb; b++) {
        int64_t i = (b0 + b) * PS_TOPK_BLOCK;
        prefetch_block(row, es, i);
        __m512 x0 = load16(row, dt, i), x1 = load16(row, dt, i + 16);
        __m512 x2 = load16(row, dt, i + 32), x3 = load16(row, dt, i + 48);
        if (with_max) {
            __m512 v = _mm512_max_ps(_mm512_max_ps(x0, x1), _mm512_max_ps(x2, x3));
            cm = _mm512_max_ps(cm, v);
            if (bm) note_block(vb, bm, b, v);
        }
        s0 = _mm512_add_ps(s0, ps_exp_canon16(_mm512_sub_ps(x0, sh)));
        s1 = _mm512_add_ps(s1, ps_exp_canon16(_mm512_sub_ps(x1, sh)));
        s2 = _mm512_add_ps(s2, ps_exp_canon16(_mm512_sub_ps(x2, sh)));
        s3 = _mm512_add_ps(s3, ps_exp_canon16(_mm512_sub_ps(x3, sh)));
    }
    _mm512_storeu_ps(C, s0);
    _mm512_storeu_ps(C + 16, s1);
    _mm512_storeu_ps(C + 32, s2);
    _mm512_storeu_ps(C + 48, s3);
    if (with_max && bm) finish_blocks(vb, bm, nb);
    return hmax16(cm);
}

/* bf16, one pass: 32 logits per 512-bit load, widened by interleaving with zero words
 * (x << 16): one unpack per 16 logits. unpacklo yields logits 8L + m (L = 128-bit lane 0..3,
 * m = 0..3) of the 32, unpackhi 8L + 4 + m, so the accumulators hold the 64 lanes in that
 * permuted order; they are permuted in from C and back out per call, and each canonical lane
 * still sums its own logits, in order. */
PS_T512_INLINE float fused_bf16(const void *row, int64_t b0, int64_t nb, float shift, float *bm,
                                float *C, bool with_max) {
    const __m512i in_lo =
        _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const __m512i in_hi =
        _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    const __m512i out_0 =
        _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i out_1 =
        _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    __m512 s0 = _mm512_loadu_ps(C), s1 = _mm512_loadu_ps(C + 16);
    __m512 s2 = _mm512_loadu_ps(C + 32), s3 = _mm512_loadu_ps(C + 48);
    __m512 a0 = _mm512_permutex2var_ps(s0, in_lo, s1), a1 = _mm512_permutex2var_ps(s0, in_hi, s1);
    __m512 a2 = _mm512_permutex2var_ps(s2, in_lo, s3), a3 = _mm512_permutex2var_ps(s2, in_hi, s3);
    __m512 cm = _mm512_set1_ps(-INFINITY), vb[16];
    const __m512 sh = _mm512_set1_ps(shift);
    const __m512i z = _mm512_setzero_si512();
    for (int64_t b = 0; b < nb; b++) {
        int64_t i = (b0 + b) * PS_TOPK_BLOCK;
        const uint16_t *p = (const uint16_t *)row + i;
        prefetch_block(row, 2, i);
        __m512i h0 = _mm512_loadu_si512(p), h1 = _mm512_loadu_si512(p + 32);
        __m512 x0 = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, h0));
        __m512 x1 = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, h0));
        __m512 x2 = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, h1));
        __m512 x3 = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, h1));
        if (with_max) {
            __m512 v = _mm512_max_ps(_mm512_max_ps(x0, x1), _mm512_max_ps(x2, x3));
            cm = _mm512_max_ps(cm, v);
            if (bm) note_block(vb, bm, b, v);
        }
        a0 = _mm512_add_ps(a0, ps_exp_canon16(_mm512_sub_ps(x0, sh)));
        a1 = _mm512_add_ps(a1, ps_exp_canon16(_mm512_sub_ps(x1, sh)));
        a2 = _mm512_add_ps(a2, ps_exp_canon16(_mm512_sub_ps(x2, sh)));
        a3 = _mm512_add_ps(a3, ps_exp_canon16(_mm512_sub_ps(x3, sh)));
    }
    _mm512_storeu_ps(C, _mm512_permutex2var_ps(a0, out_0, a1));
    _mm512_storeu_ps(C + 16, _mm512_permutex2var_ps(a0, out_1, a1));
    _mm512_storeu_ps(C + 32, _mm512_permutex2var_ps(a2, out_0, a3));
    _mm512_storeu_ps(C + 48, _mm512_permutex2var_ps(a2, out_1, a3));
    if (with_max && bm) finish_blocks(vb, bm, nb);
    return hmax16(cm);
}

PS_TARGET_AVX512 float ps_topk_fused_avx512(const void *row, ps_dtype dt, int64_t b0, int64_t nb,
                                   float shift, float *bm, float *C) {
    switch (dt) {
    case PS_DTYPE_F32: return fused_dt(row, PS_DTYPE_F32, b0, nb, shift, bm, C, true);
    case PS_DTYPE_F16: return fused_dt(row, PS_DTYPE_F16, b0, nb, shift, bm, C, true);
    default: return fused_bf16(row, b0, nb, shift, bm, C, true);
    }
}

PS_TARGET_AVX512 void ps_topk_expsum_avx512(const void *row, ps_dtype dt, int64_t b0, int64_t nb,
                                   float shift, float *C) {
    switch (dt) {
    case PS_DTYPE_F32: fused_dt(row, PS_DTYPE_F32, b0, nb, shift, NULL, C, false); break;
    case PS_DTYPE_F16: fused_dt(row, PS_DTYPE_F16, b0, nb, shift, NULL, C, false); break;
    default: fused_bf16(row, b0, nb, shift, NULL, C, false); break;
    }
}

PS_T512_INLINE uint64_t gemask_dt(const void *row, ps_dtype dt, int64_t blk, float T) {
    const __m512 t = _mm512_set1_ps(T);
    int64_t i = blk * PS_TOPK_BLOCK;
    uint64_t m = 0;
    for (int q = 0; q < 4; q++)
        m |= (uint64_t)_mm512_cmp_ps_mask(load16(row, dt, i + 16 * q), t, _CMP_GE_OQ) << (16 * q);
    return m;
}

PS_TARGET_AVX512 uint64_t ps_topk_gemask_avx512(const void *row, ps_dtype dt, int64_t blk, float T) {
    switch (dt) {
    case PS_DTYPE_F32: return gemask_dt(row, PS_DTYPE_F32, blk, T);
    case PS_DTYPE_F16: return gemask_dt(row, PS_DTYPE_F16, blk, T);
    default: return gemask_dt(row, PS_DTYPE_BF16, blk, T);
    }
}

/* The statistics pass (topk.h ps_plogp_fn): lane 16q + j of E in accumulator q. */
PS_T512_INLINE void plogp_dt(const void *a, const void *b, ps_dtype dt, int64_t b0, int64_t nb,
                             float lse_a, float lse_b, float *E) {
    const __m512 la = _mm512_set1_ps(lse_a), lb = _mm512_set1_ps(lse_b);
    const __m512 lo = _mm512_set1_ps(PS_EXP_LO);
    __m512 s[4];
    for (int q = 0; q < 4; q++) s[q] = _mm512_loadu_ps(E + 16 * q);
    for (int64_t blk = 0; blk < nb; blk++) {
        int64_t i = (b0 + blk) * PS_TOPK_BLOCK;
        for (int q = 0; q < 4; q++) {
            __m512 l = _mm512_sub_ps(load16(a, dt, i + 16 * q), la);
            __m512 d = b ? _mm512_sub_ps(l, _mm512_sub_ps(load16(b, dt, i + 16 * q), lb)) : l;
            __mmask16 keep = _mm512_cmp_ps_mask(l, lo, _CMP_NLT_UQ);
            s[q] = _mm512_add_ps(s[q], _mm512_maskz_mul_ps(keep, ps_exp_canon16(l), d));
        }
    }
    for (int q = 0; q < 4; q++) _mm512_storeu_ps(E + 16 * q, s[q]);
}

PS_TARGET_AVX512 void ps_topk_plogp_avx512(const void *a, const void *b, ps_dtype dt, int64_t b0,
                                  int64_t nb, float lse_a, float lse_b, float *E) {
    switch (dt) {
    case PS_DTYPE_F32: plogp_dt(a, b, PS_DTYPE_F32, b0, nb, lse_a, lse_b, E); break;
    case PS_DTYPE_F16: plogp_dt(a, b, PS_DTYPE_F16, b0, nb, lse_a, lse_b, E); break;
    default: plogp_dt(a, b, PS_DTYPE_BF16, b0, nb, lse_a, lse_b, E); break;
    }
}

/* The statistics pass with varentropy (topk.h ps_plogpv_fn): E as plogp_dt's with b == NULL;
 * the float vector of lanes 16q..16q+15 is widened in two halves, lanes 16q..16q+7 and
 * 16q+8..16q+15 in the double accumulators at V + 16q and + 16q + 8 of each of the three sums
 * (8 vectors each, in registers). Dropped elements give +0 (zero-masked), like the scalar
 * term. */
PS_T512_INLINE void plogpv_dt(const void *a, ps_dtype dt, int64_t b0, int64_t nb, float lse_a,
                              float *E, double *V) {
    const __m512 la = _mm512_set1_ps(lse_a);
    const __m512 lo = _mm512_set1_ps(PS_EXP_LO);
    __m512 s[4];
    __m512d v0[8], v1[8], v2[8];
    for (int q = 0; q < 4; q++) s[q] = _mm512_loadu_ps(E + 16 * q);
    for (int q = 0; q < 8; q++) {
        v0[q] = _mm512_loadu_pd(V + 8 * q);
        v1[q] = _mm512_loadu_pd(V + PS_TOPK_BLOCK + 8 * q);
        v2[q] = _mm512_loadu_pd(V + 2 * PS_TOPK_BLOCK + 8 * q);
    }
    for (int64_t blk = 0; blk < nb; blk++) {
        int64_t i = (b0 + blk) * PS_TOPK_BLOCK;
        for (int q = 0; q < 4; q++) {
            __m512 l = _mm512_sub_ps(load16(a, dt, i + 16 * q), la);
            __mmask16 keep = _mm512_cmp_ps_mask(l, lo, _CMP_NLT_UQ);
            __m512 p = ps_exp_canon16(l);
            s[q] = _mm512_add_ps(s[q], _mm512_maskz_mul_ps(keep, p, l));
            for (int h = 0; h < 2; h++) {
                __m256 ph = h ? _mm512_extractf32x8_ps(p, 1) : _mm512_castps512_ps256(p);
                __m256 lh = h ? _mm512_extractf32x8_ps(l, 1) : _mm512_castps512_ps256(l);
                __mmask8 kh = (__mmask8)(h ? keep >> 8 : keep);
                __m512d ld = _mm512_cvtps_pd(lh);
                __m512d pd = _mm512_maskz_mov_pd(kh, _mm512_cvtps_pd(ph));
                __m512d ad = _mm512_maskz_mul_pd(kh, pd, ld);
                v0[2 * q + h] = _mm512_add_pd(v0[2 * q + h], pd);
                v1[2 * q + h] = _mm512_add_pd(v1[2 * q + h], ad);
                v2[2 * q + h] = _mm512_add_pd(v2[2 * q + h], _mm512_maskz_mul_pd(kh, ad, ld));
            }
        }
    }
    for (int q = 0; q < 4; q++) _mm512_storeu_ps(E + 16 * q, s[q]);
    for (int q = 0; q < 8; q++) {
        _mm512_storeu_pd(V + 8 * q, v0[q]);
        _mm512_storeu_pd(V + PS_TOPK_BLOCK + 8 * q, v1[q]);
        _mm512_storeu_pd(V + 2 * PS_TOPK_BLOCK + 8 * q, v2[q]);
    }
}

PS_TARGET_AVX512 void ps_topk_plogpv_avx512(const void *a, ps_dtype dt, int64_t b0, int64_t nb,
                                            float lse_a, float *E, double *V) {
    switch (dt) {
    case PS_DTYPE_F32: plogpv_dt(a, PS_DTYPE_F32, b0, nb, lse_a, E, V); break;
    case PS_DTYPE_F16: plogpv_dt(a, PS_DTYPE_F16, b0, nb, lse_a, E, V); break;
    default: plogpv_dt(a, PS_DTYPE_BF16, b0, nb, lse_a, E, V); break;
    }
}

PS_T512_INLINE void count_dt(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float v,
                             int64_t *gt, int64_t *eq) {
    const __m512 vv = _mm512_set1_ps(v);
    int64_t g = 0, e = 0;
    for (int64_t blk = 0; blk < nb; blk++) {
        int64_t i = (b0 + blk) * PS_TOPK_BLOCK;
        for (int q = 0; q < 4; q++) {
            __m512 x = load16(row, dt, i + 16 * q);
            g += __builtin_popcount(_mm512_cmp_ps_mask(x, vv, _CMP_GT_OQ));
            e += __builtin_popcount(_mm512_cmp_ps_mask(x, vv, _CMP_EQ_OQ));
        }
    }
    *gt += g;
    *eq += e;
}

PS_TARGET_AVX512 void ps_topk_count_avx512(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float v,
                                  int64_t *gt, int64_t *eq) {
    switch (dt) {
    case PS_DTYPE_F32: count_dt(row, PS_DTYPE_F32, b0, nb, v, gt, eq); break;
    case PS_DTYPE_F16: count_dt(row, PS_DTYPE_F16, b0, nb, v, gt, eq); break;
    default: count_dt(row, PS_DTYPE_BF16, b0, nb, v, gt, eq); break;
    }
}

#else /* not x86-64: never dispatched (ps_isa_supported says no) */
void ps_topk_plogp_avx512(const void *a, const void *b, ps_dtype dt, int64_t b0, int64_t nb,
                          float lse_a, float lse_b, float *E) {
    (void)a; (void)b; (void)dt; (void)b0; (void)nb; (void)lse_a; (void)lse_b; (void)E;
}
void ps_topk_plogpv_avx512(const void *a, ps_dtype dt, int64_t b0, int64_t nb, float lse_a,
                           float *E, double *V) {
    (void)a; (void)dt; (void)b0; (void)nb; (void)lse_a; (void)E; (void)V;
}
void ps_topk_count_avx512(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float v,
                          int64_t *gt, int64_t *eq) {
    (void)row; (void)dt; (void)b0; (void)nb; (void)v; (void)gt; (void)eq;
}
float ps_topk_fused_avx512(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                           float *bm, float *C) {
    (void)row; (void)dt; (void)b0; (void)nb; (void)shift; (void)bm; (void)C;
    return NAN;
}
void ps_topk_expsum_avx512(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                           float *C) {
    (void)row; (void)dt; (void)b0; (void)nb; (void)shift; (void)C;
}
uint64_t ps_topk_gemask_avx512(const void *row, ps_dtype dt, int64_t blk, float T) {
    (void)row; (void)dt; (void)blk; (void)T;
    return 0;
}
#endif
