/*
 * topk_avx512.c — the AVX-512 variants of the two chunk kernels of the top-K row pass
 * (see topk.h for the canonical procedure they must reproduce bit for bit).
 *
 * One 64-logit block is four zmm vectors; vector q holds lanes 16q..16q+15, so the 64 lane
 * sums live in four accumulators. The exp is topk.h's canonical sequence of FMAs, with
 * vscalefps for p * 2^n (exact for n in [-126, 0], like the scalar multiply by 2^n) and a
 * zero-mask for d < -87 (NaN lanes stay NaN).
 */
#include "topk.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define PS_T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define PS_T512_INLINE static inline __attribute__((always_inline)) PS_T512
#ifndef PS_PF_HINT
#define PS_PF_HINT _MM_HINT_T0
#endif

/* 16 logits at element i of row, as float32 (exact conversion). */
PS_T512_INLINE __m512 load16(const void *row, ps_dtype dt, int64_t i) {
    if (dt == PS_DTYPE_F32) return _mm512_loadu_ps((const float *)row + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i));
    if (dt == PS_DTYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The canonical exp of 16 values d <= 0 (or NaN). */
PS_T512_INLINE __m512 exp16(__m512 d) {
    __mmask16 keep = _mm512_cmp_ps_mask(d, _mm512_set1_ps(PS_EXP_LO), _CMP_NLT_UQ);
    const __m512 magic = _mm512_set1_ps(PS_EXP_MAGIC);
    __m512 t = _mm512_fmadd_ps(d, _mm512_set1_ps(PS_EXP_LOG2E), magic);
    __m512 n = _mm512_sub_ps(t, magic);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(PS_EXP_NLN2), d);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(PS_EXP_C5), r, _mm512_set1_ps(PS_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PS_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PS_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(PS_EXP_C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(keep, p, n);
}

/* Horizontal max of 16 lanes (exact: max is order independent for non-NaN values). */
PS_T512_INLINE float hmax16(__m512 v) {
    __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_max_ps(b, _mm_movehl_ps(b, b));
    b = _mm_max_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

/* bm[i] = max(block b0 + i), i < nb; returns their max.  row: (n_blocks, 64) of dt. */
PS_T512_INLINE float blockmax_dt(const void *row, ps_dtype dt, int64_t b0, int64_t nb,
                                 float *bm) {
    __m512 cm = _mm512_set1_ps(-INFINITY);
    for (int64_t b = 0; b < nb; b++) {
        int64_t i = (b0 + b) * PS_TOPK_BLOCK;
        __m512 v = _mm512_max_ps(_mm512_max_ps(load16(row, dt, i), load16(row, dt, i + 16)),
                                 _mm512_max_ps(load16(row, dt, i + 32), load16(row, dt, i + 48)));
        cm = _mm512_max_ps(cm, v);
        if (bm) bm[b] = hmax16(v);
    }
    return hmax16(cm);
}

/* S[16q + j] += exp(x[64b + 16q + j] - shift) for blocks b0..b0+nb-1 in order. */
PS_T512_INLINE void expsum_dt(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                              float *S) {
    __m512 s0 = _mm512_loadu_ps(S), s1 = _mm512_loadu_ps(S + 16);
    __m512 s2 = _mm512_loadu_ps(S + 32), s3 = _mm512_loadu_ps(S + 48);
    const __m512 sh = _mm512_set1_ps(shift);
    const size_t es = dt == PS_DTYPE_F32 ? 4 : 2;
    for (int64_t b = 0; b < nb; b++) {
        int64_t i = (b0 + b) * PS_TOPK_BLOCK;
        /* this pass is compute-bound and reads L1: meanwhile pull the same block of the next
         * chunk in, so the block-max pass over it does not wait for DRAM (prefetches never
         * fault, so running past the row end is harmless) */
        const char *next = (const char *)row + (size_t)(i + PS_TOPK_BLOCK * PS_TOPK_CHUNK_BLOCKS) * es;
        for (size_t off = 0; off < PS_TOPK_BLOCK * es; off += 64) _mm_prefetch(next + off, PS_PF_HINT);
        s0 = _mm512_add_ps(s0, exp16(_mm512_sub_ps(load16(row, dt, i), sh)));
        s1 = _mm512_add_ps(s1, exp16(_mm512_sub_ps(load16(row, dt, i + 16), sh)));
        s2 = _mm512_add_ps(s2, exp16(_mm512_sub_ps(load16(row, dt, i + 32), sh)));
        s3 = _mm512_add_ps(s3, exp16(_mm512_sub_ps(load16(row, dt, i + 48), sh)));
    }
    _mm512_storeu_ps(S, s0);
    _mm512_storeu_ps(S + 16, s1);
    _mm512_storeu_ps(S + 32, s2);
    _mm512_storeu_ps(S + 48, s3);
}

/* bf16: 32 logits per 512-bit load, widened by interleaving with zero words (x << 16): one
 * unpack per 16 logits instead of a zero-extend and a shift. unpacklo yields logits 8L + m
 * (L = 128-bit lane 0..3, m = 0..3) of the 32, unpackhi 8L + 4 + m, so the accumulators hold
 * the 64 lanes in that permuted order; they are permuted in from S and back out per call, and
 * each canonical lane still sums its own logits, in order. */
PS_T512_INLINE void expsum_bf16(const void *row, int64_t b0, int64_t nb, float shift, float *S) {
    const __m512i in_lo = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const __m512i in_hi = _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    const __m512i out_0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i out_1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    __m512 s0 = _mm512_loadu_ps(S), s1 = _mm512_loadu_ps(S + 16);
    __m512 s2 = _mm512_loadu_ps(S + 32), s3 = _mm512_loadu_ps(S + 48);
    __m512 a0 = _mm512_permutex2var_ps(s0, in_lo, s1), a1 = _mm512_permutex2var_ps(s0, in_hi, s1);
    __m512 a2 = _mm512_permutex2var_ps(s2, in_lo, s3), a3 = _mm512_permutex2var_ps(s2, in_hi, s3);
    const __m512 sh = _mm512_set1_ps(shift);
    const __m512i z = _mm512_setzero_si512();
    for (int64_t b = 0; b < nb; b++) {
        const uint16_t *p = (const uint16_t *)row + (b0 + b) * PS_TOPK_BLOCK;
        const char *next = (const char *)(p + PS_TOPK_BLOCK * PS_TOPK_CHUNK_BLOCKS);
        _mm_prefetch(next, PS_PF_HINT); /* see expsum_dt */
        _mm_prefetch(next + 64, PS_PF_HINT);
        __m512i h0 = _mm512_loadu_si512(p), h1 = _mm512_loadu_si512(p + 32);
        __m512 x0 = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, h0));
        __m512 x1 = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, h0));
        __m512 x2 = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, h1));
        __m512 x3 = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, h1));
        a0 = _mm512_add_ps(a0, exp16(_mm512_sub_ps(x0, sh)));
        a1 = _mm512_add_ps(a1, exp16(_mm512_sub_ps(x1, sh)));
        a2 = _mm512_add_ps(a2, exp16(_mm512_sub_ps(x2, sh)));
        a3 = _mm512_add_ps(a3, exp16(_mm512_sub_ps(x3, sh)));
    }
    _mm512_storeu_ps(S, _mm512_permutex2var_ps(a0, out_0, a1));
    _mm512_storeu_ps(S + 16, _mm512_permutex2var_ps(a0, out_1, a1));
    _mm512_storeu_ps(S + 32, _mm512_permutex2var_ps(a2, out_0, a3));
    _mm512_storeu_ps(S + 48, _mm512_permutex2var_ps(a2, out_1, a3));
}

PS_T512 float ps_topk_blockmax_avx512(const void *row, ps_dtype dt, int64_t b0, int64_t nb,
                                      float *bm) {
    switch (dt) {
    case PS_DTYPE_F32: return blockmax_dt(row, PS_DTYPE_F32, b0, nb, bm);
    case PS_DTYPE_F16: return blockmax_dt(row, PS_DTYPE_F16, b0, nb, bm);
    default: return blockmax_dt(row, PS_DTYPE_BF16, b0, nb, bm);
    }
}

PS_T512 void ps_topk_expsum_avx512(const void *row, ps_dtype dt, int64_t b0, int64_t nb,
                                   float shift, float *S) {
    switch (dt) {
    case PS_DTYPE_F32: expsum_dt(row, PS_DTYPE_F32, b0, nb, shift, S); break;
    case PS_DTYPE_F16: expsum_dt(row, PS_DTYPE_F16, b0, nb, shift, S); break;
    default: expsum_bf16(row, b0, nb, shift, S); break;
    }
}

#else /* not x86-64: never dispatched (ps_isa_supported says no) */
float ps_topk_blockmax_avx512(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float *bm) {
    (void)row; (void)dt; (void)b0; (void)nb; (void)bm;
    return NAN;
}
void ps_topk_expsum_avx512(const void *row, ps_dtype dt, int64_t b0, int64_t nb, float shift,
                           float *S) {
    (void)row; (void)dt; (void)b0; (void)nb; (void)shift; (void)S;
}
#endif
