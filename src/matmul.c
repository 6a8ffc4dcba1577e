/*
 * matmul.c — y (n_rows, n_out) = x (n_rows, n_in) @ W^T with W in F32/F16/BF16/Q8_0.
 *
 * Work split: the n_out weight rows are cut into tiles of MM_TILE rows, one pool task per tile.
 * A task converts its tile to float32 in the thread's scratch (F32 weights are used in place),
 * then runs a register micro-kernel over the activation rows: R activation rows x 4 weight rows
 * of independent vector accumulators (AVX-512: R = 6, 24 accumulators, 10 loads per 24 FMAs;
 * AVX2: R = 3, 12 accumulators), so FMA latency is hidden and each loaded x vector is reused 4 times, each w
 * vector R times. Tails use the 4/2/1-row and 1-weight forms of the same kernel. The input dimension
 * is walked in blocks of MM_KB (1024) and the activation rows in blocks of MM_ROWS (96, a
 * multiple of the 6-row form), so a tile's slice (16 rows x 4 KiB) stays in L1/L2 while the
 * block's rows pass over it; between k blocks the accumulator vectors wait in scratch (stored
 * and reloaded exactly, so blocking does not change any result). Sizes picked by bench_matmul
 * on Qwen3-0.6B shapes (k = 1024..3072; KB 512 -> 1024 and ROWS 64 -> 96: +3-5%).
 *
 * Determinism: every output element is one accumulator vector that receives
 * fma(x[k..k+V), w[k..k+V)) for k = 0, V, 2V, ... in order (the last chunk masked with zeros),
 * then one horizontal sum. Which micro-kernel form, tile or thread computes it does not change
 * that sequence, so results are independent of threads and of how positions are batched.
 * The scalar path is one float accumulator in index order. ps_dot_f32 is the same reduction.
 */
#include "matmul.h"
#include "prof.h"
#include "quant.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define MM_TILE 16  /* weight rows per task */
#define MM_ROWS 96  /* activation rows per pass over a k block */
#define MM_KB 1024  /* inputs per k block (a multiple of 16) */
#define MM_ACC (MM_ROWS * MM_TILE * 16) /* accumulator vectors parked between k blocks */

static int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; }

size_t ps_matmul_scratch_floats(int64_t max_n_in) {
    return (size_t)MM_TILE * (size_t)(round16(max_n_in) + 16) + MM_ACC;
}

/* ---- scalar ---- */

static float dot_scalar(const float *a, const float *b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y[r * ldy + j] = dot(x row r, w[j]) for r < n_rows, j < nw. */
static void tile_scalar(const float *const *w, int nw, const float *x, int64_t ldx,
                        int64_t n_rows, int64_t n, float *y, int64_t ldy) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int j = 0; j < nw; j++) y[r * ldy + j] = dot_scalar(x + r * ldx, w[j], n);
}

#if defined(__x86_64__)

/* ---- AVX2: 8 lanes ---- */

#define T_AVX2 __attribute__((target("avx2,fma,f16c")))

T_AVX2 static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* hsum256 of four accumulators at once, each result bitwise equal to hsum256 of its vector:
 * 128-bit halves, then lanes (0+2, 1+3), then those two, with shared shuffles. */
T_AVX2 static inline __m128 hsum256x4(__m256 a, __m256 b, __m256 c, __m256 d) {
    const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20),
                                    _mm256_permute2f128_ps(a, b, 0x31)); /* [sa | sb] */
    const __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20),
                                    _mm256_permute2f128_ps(c, d, 0x31)); /* [sc | sd] */
    const __m256 u = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 t = _mm256_add_ps(u, _mm256_shuffle_ps(u, u, _MM_SHUFFLE(2, 3, 0, 1)));
    /* a at lane 0, c at 2, b at 4, d at 6 */
    return _mm256_castps256_ps128(
        _mm256_permutevar8x32_ps(t, _mm256_setr_epi32(0, 4, 2, 6, 0, 0, 0, 0)));
}

/* R activation rows (1 to 3) x J weight rows (1 or 4) over inputs [k0, k1); shapes: x (R, n)
 * rows ldx apart, w[J] rows of n. Accumulators start at zero (first) or come from acc (slot
 * (r * MM_TILE + j) * 16); they end in y (R, J) rows ldy apart (last) or go back to acc. */
T_AVX2 static inline __attribute__((always_inline)) void mk_avx2(
    int R, int J, const float *x, int64_t ldx, const float *const *w, int64_t k0, int64_t k1,
    float *acc, bool first, bool last, float *y, int64_t ldy) {
    __m256 a[4][4];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int j = 0; j < J; j++)
            a[r][j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + (r * MM_TILE + j) * 16);
    int64_t k = k0;
    for (; k + 8 <= k1; k += 8) {
        __m256 xv[4];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) xv[r] = _mm256_loadu_ps(x + r * ldx + k);
        _Pragma("GCC unroll 4")
        for (int j = 0; j < J; j++) {
            __m256 wv = _mm256_loadu_ps(w[j] + k);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < R; r++) a[r][j] = _mm256_fmadd_ps(xv[r], wv, a[r][j]);
        }
    }
    if (k < k1) {
        int rem = (int)(k1 - k);
        __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 xv[4];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) xv[r] = _mm256_maskload_ps(x + r * ldx + k, mask);
        _Pragma("GCC unroll 4")
        for (int j = 0; j < J; j++) {
            __m256 wv = _mm256_maskload_ps(w[j] + k, mask);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < R; r++) a[r][j] = _mm256_fmadd_ps(xv[r], wv, a[r][j]);
        }
    }
    if (last && J == 4) {
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++)
            _mm_storeu_ps(y + r * ldy, hsum256x4(a[r][0], a[r][1], a[r][2], a[r][3]));
        return;
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int j = 0; j < J; j++) {
            if (last) y[r * ldy + j] = hsum256(a[r][j]);
            else _mm256_storeu_ps(acc + (r * MM_TILE + j) * 16, a[r][j]);
        }
}

T_AVX2 static void tile_avx2(const float *const *w, int nw, const float *x, int64_t ldx,
                             int64_t n_rows, int64_t n, float *y, int64_t ldy, float *acc) {
    for (int64_t rb = 0; rb < n_rows; rb += MM_ROWS) {
        const int64_t nr = PS_MIN((int64_t)MM_ROWS, n_rows - rb);
        const float *xb = x + rb * ldx;
        float *yb = y + rb * ldy;
        for (int64_t k0 = 0; k0 < n; k0 += MM_KB) {
            const int64_t k1 = PS_MIN(k0 + MM_KB, n);
            const bool first = k0 == 0, last = k1 == n;
            int64_t r = 0;
            for (; r + 3 <= nr; r += 3) {
                int j = 0;
                for (; j + 4 <= nw; j += 4)
                    mk_avx2(3, 4, xb + r * ldx, ldx, w + j, k0, k1, acc + (r * MM_TILE + j) * 16,
                            first, last, yb + r * ldy + j, ldy);
                for (; j < nw; j++)
                    mk_avx2(3, 1, xb + r * ldx, ldx, w + j, k0, k1, acc + (r * MM_TILE + j) * 16,
                            first, last, yb + r * ldy + j, ldy);
            }
            for (; r + 2 <= nr; r += 2) {
                int j = 0;
                for (; j + 4 <= nw; j += 4)
                    mk_avx2(2, 4, xb + r * ldx, ldx, w + j, k0, k1, acc + (r * MM_TILE + j) * 16,
                            first, last, yb + r * ldy + j, ldy);
                for (; j < nw; j++)
                    mk_avx2(2, 1, xb + r * ldx, ldx, w + j, k0, k1, acc + (r * MM_TILE + j) * 16,
                            first, last, yb + r * ldy + j, ldy);
            }
            for (; r < nr; r++) {
                int j = 0;
                for (; j + 4 <= nw; j += 4)
                    mk_avx2(1, 4, xb + r * ldx, ldx, w + j, k0, k1, acc + (r * MM_TILE + j) * 16,
                            first, last, yb + r * ldy + j, ldy);
                for (; j < nw; j++)
                    mk_avx2(1, 1, xb + r * ldx, ldx, w + j, k0, k1, acc + (r * MM_TILE + j) * 16,
                            first, last, yb + r * ldy + j, ldy);
            }
        }
    }
}

T_AVX2 static float dot_avx2(const float *a, const float *b, int64_t n) {
    float y;
    mk_avx2(1, 1, a, 0, &b, 0, n, NULL, true, true, &y, 0);
    return y;
}

/* ---- AVX-512: 16 lanes ---- */

#define T_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

/* The horizontal sum of one accumulator, spelled out so that the order does not depend on the
 * compiler's _mm512_reduce_add_ps: 256-bit halves, 128-bit halves, then lanes (0+2, 1+3), then
 * those two. */
T_AVX512 static inline float hsum512(__m512 v) {
    const __m256 t3 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
    const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    const __m128 t8 = _mm_add_ps(t6, _mm_permute_ps(t6, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m128 t10 = _mm_add_ps(t8, _mm_permute_ps(t8, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtss_f32(t10);
}

/* hsum512 of four accumulators at once (each result bitwise equal to hsum512 of its vector):
 * the same tree, with the halving steps of two or four vectors sharing shuffles. */
T_AVX512 static inline __m128 hsum512x4(__m512 a, __m512 b, __m512 c, __m512 d) {
    /* 256-bit halves: [a0+a2, a1+a3, b0+b2, b1+b3] in 128-bit chunks */
    const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)),
                                    _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)));
    const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)),
                                    _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)));
    /* 128-bit halves: chunk i holds vector i's 4 partial sums */
    const __m512 u = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)),
                                   _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)));
    const __m512 v = _mm512_add_ps(u, _mm512_permute_ps(u, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m512 t = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m512 idx = _mm512_castsi512_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0,
                                                             0, 0, 0, 0, 0));
    return _mm512_castps512_ps128(
        _mm512_permutexvar_ps(_mm512_castps_si512(idx), t));
}

/* The AVX-512 form of mk_avx2 (same contract, 16 lanes). */
T_AVX512 static inline __attribute__((always_inline)) void mk_avx512(
    int R, int J, const float *x, int64_t ldx, const float *const *w, int64_t k0, int64_t k1,
    float *acc, bool first, bool last, float *y, int64_t ldy) {
    __m512 a[6][4];
    _Pragma("GCC unroll 6")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int j = 0; j < J; j++)
            a[r][j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + (r * MM_TILE + j) * 16);
    int64_t k = k0;
    for (; k + 16 <= k1; k += 16) {
        __m512 xv[6];
        _Pragma("GCC unroll 6")
        for (int r = 0; r < R; r++) xv[r] = _mm512_loadu_ps(x + r * ldx + k);
        _Pragma("GCC unroll 4")
        for (int j = 0; j < J; j++) {
            __m512 wv = _mm512_loadu_ps(w[j] + k);
            _Pragma("GCC unroll 6")
            for (int r = 0; r < R; r++) a[r][j] = _mm512_fmadd_ps(xv[r], wv, a[r][j]);
        }
    }
    if (k < k1) {
        __mmask16 m = (__mmask16)((1u << (k1 - k)) - 1u);
        __m512 xv[6];
        _Pragma("GCC unroll 6")
        for (int r = 0; r < R; r++) xv[r] = _mm512_maskz_loadu_ps(m, x + r * ldx + k);
        _Pragma("GCC unroll 4")
        for (int j = 0; j < J; j++) {
            __m512 wv = _mm512_maskz_loadu_ps(m, w[j] + k);
            _Pragma("GCC unroll 6")
            for (int r = 0; r < R; r++) a[r][j] = _mm512_fmadd_ps(xv[r], wv, a[r][j]);
        }
    }
    if (last && J == 4) {
        _Pragma("GCC unroll 6")
        for (int r = 0; r < R; r++)
            _mm_storeu_ps(y + r * ldy, hsum512x4(a[r][0], a[r][1], a[r][2], a[r][3]));
        return;
    }
    _Pragma("GCC unroll 6")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int j = 0; j < J; j++) {
            if (last) y[r * ldy + j] = hsum512(a[r][j]);
            else _mm512_storeu_ps(acc + (r * MM_TILE + j) * 16, a[r][j]);
        }
}

T_AVX512 static void tile_avx512(const float *const *w, int nw, const float *x, int64_t ldx,
                                 int64_t n_rows, int64_t n, float *y, int64_t ldy, float *acc) {
    for (int64_t rb = 0; rb < n_rows; rb += MM_ROWS) {
        const int64_t nr = PS_MIN((int64_t)MM_ROWS, n_rows - rb);
        const float *xb = x + rb * ldx;
        float *yb = y + rb * ldy;
        for (int64_t k0 = 0; k0 < n; k0 += MM_KB) {
            const int64_t k1 = PS_MIN(k0 + MM_KB, n);
            const bool first = k0 == 0, last = k1 == n;
            int64_t r = 0;
            for (; r + 6 <= nr; r += 6) {
                int j = 0;
                for (; j + 4 <= nw; j += 4)
                    mk_avx512(6, 4, xb + r * ldx, ldx, w + j, k0, k1,
                              acc + (r * MM_TILE + j) * 16, first, last, yb + r * ldy + j, ldy);
                for (; j < nw; j++)
                    mk_avx512(6, 1, xb + r * ldx, ldx, w + j, k0, k1,
                              acc + (r * MM_TILE + j) * 16, first, last, yb + r * ldy + j, ldy);
            }
            for (; r + 4 <= nr; r += 4) {
                int j = 0;
                for (; j + 4 <= nw; j += 4)
                    mk_avx512(4, 4, xb + r * ldx, ldx, w + j, k0, k1,
                              acc + (r * MM_TILE + j) * 16, first, last, yb + r * ldy + j, ldy);
                for (; j < nw; j++)
                    mk_avx512(4, 1, xb + r * ldx, ldx, w + j, k0, k1,
                              acc + (r * MM_TILE + j) * 16, first, last, yb + r * ldy + j, ldy);
            }
            for (; r + 2 <= nr; r += 2) {
                int j = 0;
                for (; j + 4 <= nw; j += 4)
                    mk_avx512(2, 4, xb + r * ldx, ldx, w + j, k0, k1,
                              acc + (r * MM_TILE + j) * 16, first, last, yb + r * ldy + j, ldy);
                for (; j < nw; j++)
                    mk_avx512(2, 1, xb + r * ldx, ldx, w + j, k0, k1,
                              acc + (r * MM_TILE + j) * 16, first, last, yb + r * ldy + j, ldy);
            }
            for (; r < nr; r++) {
                int j = 0;
                for (; j + 4 <= nw; j += 4)
                    mk_avx512(1, 4, xb + r * ldx, ldx, w + j, k0, k1,
                              acc + (r * MM_TILE + j) * 16, first, last, yb + r * ldy + j, ldy);
                for (; j < nw; j++)
                    mk_avx512(1, 1, xb + r * ldx, ldx, w + j, k0, k1,
                              acc + (r * MM_TILE + j) * 16, first, last, yb + r * ldy + j, ldy);
            }
        }
    }
}

T_AVX512 static float dot_avx512(const float *a, const float *b, int64_t n) {
    float y;
    mk_avx512(1, 1, a, 0, &b, 0, n, NULL, true, true, &y, 0);
    return y;
}
#endif

#if defined(__x86_64__)
T_AVX2 static void axpy_avx2(float a, const float *x, float *y, int64_t n) {
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

T_AVX512 static void axpy_avx512(float a, const float *x, float *y, int64_t n) {
    __m512 av = _mm512_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i),
                                                        _mm512_maskz_loadu_ps(m, y + i)));
    }
}
#endif

void ps_axpy_f32(ps_isa isa, float a, const float *x, float *y, int64_t n) {
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) { axpy_avx512(a, x, y, n); return; }
    if (isa == PS_ISA_AVX2) { axpy_avx2(a, x, y, n); return; }
#endif
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

float ps_dot_f32(ps_isa isa, const float *a, const float *b, int64_t n) {
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) return dot_avx512(a, b, n);
    if (isa == PS_ISA_AVX2) return dot_avx2(a, b, n);
#endif
    (void)isa;
    return dot_scalar(a, b, n);
}

/* ---- attention products (single-threaded; the caller's task) ---- */

void ps_matmul_f32_serial(ps_isa isa, const float *w, int64_t ldw, int64_t n_out,
                          const float *x, int64_t ldx, int64_t n_rows, int64_t n, float *y,
                          int64_t ldy, float *acc) {
    for (int64_t j0 = 0; j0 < n_out; j0 += MM_TILE) {
        const int nw = (int)PS_MIN((int64_t)MM_TILE, n_out - j0);
        const float *rows[MM_TILE];
        for (int j = 0; j < nw; j++) rows[j] = w + (j0 + j) * ldw;
        switch (isa) {
#if defined(__x86_64__)
        case PS_ISA_AVX512: tile_avx512(rows, nw, x, ldx, n_rows, n, y + j0, ldy, acc); break;
        case PS_ISA_AVX2: tile_avx2(rows, nw, x, ldx, n_rows, n, y + j0, ldy, acc); break;
#endif
        default: tile_scalar(rows, nw, x, ldx, n_rows, n, y + j0, ldy); break;
        }
    }
}

/* out (nq, hd) = P (nq, keys) @ V (keys, hd) with query q summing keys [0, n_keys[q]) in order,
 * each term one ps_axpy_f32 step. NQ queries at a time so every V row is loaded once. */
#if defined(__x86_64__)
/* NQ queries x 4 chunks of 16 dimensions (d0 .. d0 + 63) of out: 4 * NQ accumulators; per key
 * 4 V loads and NQ broadcasts feed 4 * NQ FMAs. Keys below every query's count run for all
 * queries, the rest per query (j < n_keys[q]), so each query sees its own keys in order. */
T_AVX512 static inline __attribute__((always_inline)) void pv_avx512_n(
    int NQ, const float *p, int64_t ldp, const int32_t *n_keys, const float *v, int64_t hd,
    int64_t d0, float *out, int64_t ldo) {
    int32_t nk_min = n_keys[0], nk_max = n_keys[0];
    for (int q = 1; q < NQ; q++) {
        nk_min = PS_MIN(nk_min, n_keys[q]);
        nk_max = PS_MAX(nk_max, n_keys[q]);
    }
    __mmask16 m[4];
    for (int c = 0; c < 4; c++) {
        const int64_t left = hd - (d0 + 16 * c);
        m[c] = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
    }
    __m512 acc[6][4];
    _Pragma("GCC unroll 6") for (int q = 0; q < NQ; q++)
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) acc[q][c] = _mm512_setzero_ps();
    const float *vd = v + d0;
    int32_t j = 0;
    for (; j < nk_min; j++) {
        __m512 vj[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
            vj[c] = _mm512_maskz_loadu_ps(m[c], vd + j * hd + 16 * c);
        _Pragma("GCC unroll 6") for (int q = 0; q < NQ; q++) {
            const __m512 pj = _mm512_set1_ps(p[q * ldp + j]);
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
                acc[q][c] = _mm512_fmadd_ps(pj, vj[c], acc[q][c]);
        }
    }
    for (; j < nk_max; j++) {
        __m512 vj[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
            vj[c] = _mm512_maskz_loadu_ps(m[c], vd + j * hd + 16 * c);
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

T_AVX512 static void pv_avx512(const float *p, int64_t ldp, const int32_t *n_keys, int nq,
                               const float *v, int64_t hd, float *out, int64_t ldo) {
    for (int64_t d0 = 0; d0 < hd; d0 += 64)
        for (int q0 = 0; q0 < nq;) {
            const int left = nq - q0;
            const int k = left >= 6 ? 6 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
            const float *pq = p + q0 * ldp;
            float *oq = out + q0 * ldo;
            switch (k) {
            case 6: pv_avx512_n(6, pq, ldp, n_keys + q0, v, hd, d0, oq, ldo); break;
            case 4: pv_avx512_n(4, pq, ldp, n_keys + q0, v, hd, d0, oq, ldo); break;
            case 2: pv_avx512_n(2, pq, ldp, n_keys + q0, v, hd, d0, oq, ldo); break;
            default: pv_avx512_n(1, pq, ldp, n_keys + q0, v, hd, d0, oq, ldo); break;
            }
            q0 += k;
        }
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
#define KT(kt, hd, j, d) ((kt)[((int64_t)(j) / 16) * (hd) * 16 + (int64_t)(d) * 16 + (j) % 16])

static void scores_scalar(const float *q, int64_t ldq, int32_t nq, const float *kt,
                          int32_t n_keys, int32_t hd, float *s, int64_t lds) {
    for (int32_t r = 0; r < nq; r++)
        for (int32_t j = 0; j < n_keys; j++) {
            float acc = 0.0f;
            for (int32_t d = 0; d < hd; d++) acc += q[r * ldq + d] * KT(kt, hd, j, d);
            s[r * lds + j] = acc;
        }
}

#if defined(__x86_64__)
/* R queries x C vectors of 8 keys from key j0 (a multiple of 16): R * C accumulators; per
 * dimension C key loads and R broadcasts. Lanes past n_keys are masked off. */
T_AVX2 static inline __attribute__((always_inline)) void scores_avx2_n(
    int R, int C, const float *q, int64_t ldq, const float *kt, int32_t n_keys, int32_t j0,
    int32_t hd, float *s, int64_t lds) {
    __m256i m[2];
    for (int c = 0; c < C; c++)
        m[c] = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_keys - (j0 + 8 * c)),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const float *blk = kt + (int64_t)(j0 / 16) * hd * 16;
    __m256 acc[4][2];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 2") for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    for (int32_t d = 0; d < hd; d++) {
        __m256 kv[2];
        _Pragma("GCC unroll 2") for (int c = 0; c < C; c++)
            kv[c] = _mm256_maskload_ps(blk + d * 16 + 8 * c, m[c]);
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

T_AVX2 static void scores_avx2(const float *q, int64_t ldq, int32_t nq, const float *kt,
                               int32_t n_keys, int32_t hd, float *s, int64_t lds) {
    for (int32_t j0 = 0; j0 < n_keys; j0 += 16) {
        int32_t r = 0;
        for (; r + 4 <= nq; r += 4)
            scores_avx2_n(4, 2, q + r * ldq, ldq, kt, n_keys, j0, hd, s + r * lds, lds);
        for (; r < nq; r++)
            scores_avx2_n(1, 2, q + r * ldq, ldq, kt, n_keys, j0, hd, s + r * lds, lds);
    }
}

/* The AVX-512 form: R queries x C blocks of 16 keys from key j0 (a multiple of 16). */
T_AVX512 static inline __attribute__((always_inline)) void scores_avx512_n(
    int R, int C, const float *q, int64_t ldq, const float *kt, int32_t n_keys, int32_t j0,
    int32_t hd, float *s, int64_t lds) {
    __mmask16 m[4];
    for (int c = 0; c < C; c++) {
        const int32_t left = n_keys - (j0 + 16 * c);
        m[c] = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
    }
    const float *blk = kt + (int64_t)(j0 / 16) * hd * 16;
    __m512 acc[6][4];
    _Pragma("GCC unroll 6") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    for (int32_t d = 0; d < hd; d++) {
        __m512 kv[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
            kv[c] = _mm512_maskz_loadu_ps(m[c], blk + (int64_t)c * hd * 16 + d * 16);
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

T_AVX512 static void scores_avx512(const float *q, int64_t ldq, int32_t nq, const float *kt,
                                   int32_t n_keys, int32_t hd, float *s, int64_t lds) {
    for (int32_t j0 = 0; j0 < n_keys; j0 += 64) {
        int32_t r = 0;
        for (; r + 6 <= nq; r += 6)
            scores_avx512_n(6, 4, q + r * ldq, ldq, kt, n_keys, j0, hd, s + r * lds, lds);
        for (; r + 2 <= nq; r += 2)
            scores_avx512_n(2, 4, q + r * ldq, ldq, kt, n_keys, j0, hd, s + r * lds, lds);
        for (; r < nq; r++)
            scores_avx512_n(1, 4, q + r * ldq, ldq, kt, n_keys, j0, hd, s + r * lds, lds);
    }
}
#endif

void ps_attn_scores(ps_isa isa, const float *q, int64_t ldq, int32_t nq, const float *kt,
                    int32_t n_keys, int32_t hd, float *s, int64_t lds) {
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) { scores_avx512(q, ldq, nq, kt, n_keys, hd, s, lds); return; }
    if (isa == PS_ISA_AVX2) { scores_avx2(q, ldq, nq, kt, n_keys, hd, s, lds); return; }
#endif
    scores_scalar(q, ldq, nq, kt, n_keys, hd, s, lds);
}

void ps_attn_k_store(float *kt, int32_t hd, int32_t j, const float *k) {
    for (int32_t d = 0; d < hd; d++) KT(kt, hd, j, d) = k[d];
}

void ps_attn_pv(ps_isa isa, const float *p, int64_t ldp, const int32_t *n_keys, int32_t nq,
                const float *v, int64_t hd, float *out, int64_t ldo) {
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) {
        pv_avx512(p, ldp, n_keys, nq, v, hd, out, ldo);
        return;
    }
#endif
    for (int32_t q = 0; q < nq; q++) {
        float *o = out + q * ldo;
        for (int64_t d = 0; d < hd; d++) o[d] = 0.0f;
        for (int32_t j = 0; j < n_keys[q]; j++) ps_axpy_f32(isa, p[q * ldp + j], v + j * hd, o, hd);
    }
}

size_t ps_matmul_acc_floats(void) { return MM_ACC; }

/* ---- the pool task ---- */

typedef struct {
    const ps_matmul_env *env;
    const ps_mat *w;
    const float *x;
    int64_t ldx, n_rows;
    float *y;
    int64_t ldy;
    int32_t n_threads;
} mm_job;

static void mm_task(void *ctx, int64_t task, int32_t thread) {
    const mm_job *job = ctx;
    const ps_mat *w = job->w;
    int64_t j0 = task * MM_TILE;
    int nw = (int)PS_MIN((int64_t)MM_TILE, w->n_out - j0);
    const float *rows[MM_TILE];
    float *buf = job->env->scratch + (size_t)thread * job->env->scratch_stride;
    float *acc = buf + (job->env->scratch_stride - MM_ACC);
    if (w->type == PS_GGML_F32) {
        for (int j = 0; j < nw; j++)
            rows[j] = (const float *)((const uint8_t *)w->data + (size_t)(j0 + j) * w->row_bytes);
    } else {
        int64_t stride = round16(w->n_in) + 16; /* +64 B: rows off the 4 KiB alias */
        for (int j = 0; j < nw; j++) {
            float *dst = buf + (size_t)j * (size_t)stride;
            ps_quant_row_to_f32(job->env->isa, w->type,
                                (const uint8_t *)w->data + (size_t)(j0 + j) * w->row_bytes, dst,
                                w->n_in);
            rows[j] = dst;
        }
    }
    /* Weights stream from memory once per call: ask for the tile this thread is likely to take
     * next (task + threads) now, into L2, so its conversion does not wait on DRAM. */
    const int64_t next = task + job->n_threads;
    if (next * MM_TILE < w->n_out) {
        const uint8_t *p = (const uint8_t *)w->data + (size_t)next * MM_TILE * w->row_bytes;
        const size_t bytes = (size_t)PS_MIN((int64_t)MM_TILE, w->n_out - next * MM_TILE) *
                             w->row_bytes;
        for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 2);
    }
    float *y = job->y + j0;
    switch (job->env->isa) {
#if defined(__x86_64__)
    case PS_ISA_AVX512:
        tile_avx512(rows, nw, job->x, job->ldx, job->n_rows, w->n_in, y, job->ldy, acc);
        break;
    case PS_ISA_AVX2:
        tile_avx2(rows, nw, job->x, job->ldx, job->n_rows, w->n_in, y, job->ldy, acc);
        break;
#endif
    default:
        tile_scalar(rows, nw, job->x, job->ldx, job->n_rows, w->n_in, y, job->ldy);
        break;
    }
}

void ps_matmul(const ps_matmul_env *env, const ps_mat *w, const float *x, int64_t ldx,
               int64_t n_rows, float *y, int64_t ldy) {
    assert(env->isa != PS_ISA_AUTO);
    assert(env->scratch_stride >= ps_matmul_scratch_floats(w->n_in) ||
           (w->type == PS_GGML_F32 && env->scratch_stride >= MM_ACC));
    if (n_rows <= 0 || w->n_out <= 0) return;
    const uint64_t t0 = ps_prof_start();
    mm_job job = {env, w, x, ldx, n_rows, y, ldy, ps_pool_size(env->pool)};
    ps_pool_for(env->pool, (w->n_out + MM_TILE - 1) / MM_TILE, mm_task, &job);
    ps_prof_add(PS_PROF_MATMUL, t0);
}

ps_status ps_matmul_ref(const ps_mat *w, const float *x, int64_t ldx, int64_t n_rows, float *y,
                        int64_t ldy) {
    float *row = ps_malloc((size_t)PS_MAX(w->n_in, 1) * sizeof(float));
    if (!row) return PS_ERR_NOMEM;
    for (int64_t j = 0; j < w->n_out; j++) {
        ps_quant_row_to_f32_ref(w->type, (const uint8_t *)w->data + (size_t)j * w->row_bytes, row,
                                w->n_in);
        for (int64_t r = 0; r < n_rows; r++) {
            double s = 0.0;
            for (int64_t k = 0; k < w->n_in; k++) s += (double)x[r * ldx + k] * (double)row[k];
            y[r * ldy + j] = (float)s;
        }
    }
    ps_free(row);
    return PS_OK;
}
