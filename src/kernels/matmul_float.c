/*
 * matmul_float.c — the float kernels of ps_matmul: y (n_rows, n_out) = x (n_rows, n_in) @ W^T
 * with W in F32 / F16 (or any type widened exactly, as --act f32 does) and BF16.
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
 *
 * BF16 weights take another road (see "vdpbf16ps" below): the activation rows are rounded to
 * bf16 once per call (as llama.cpp does) and AVX-512 BF16 vdpbf16ps multiplies them with the
 * weights in place, 32 products per instruction: ~430-480 GFLOP/s (3.5-3.8x sgemm). With
 * env->f32_act, BF16 goes through the float32 tiles above instead (matmul.c decides).
 *
 * With env->amx (an Intel CPU with AMX, see isa.c) the BF16 tasks run on the tile unit
 * (matmul_amx.c) over the same rounded activations, in tile order (k in order per output).
 * The block types (Q8_0, Q4_K, ...) are matmul_quant.c's; the type table (types.c) points at
 * ps_matmul_bf16 here, so nothing in this file looks a type up: the caller hands the float32
 * road its row widener.
 */
#include "kernels/matmul_float.h"
#include "base/simd.h"
#include "kernels/dequant.h"
#include "kernels/matmul_amx.h"
#include "kernels/qact.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define MM_TILE 16  /* weight rows per task */
#define MM_ROWS 96  /* activation rows per pass over a k block */
#define MM_KB 1024  /* inputs per k block (a multiple of 16) */
#define MM_QROWS PS_CHUNK /* BF16: rounded activation rows per pass */
#define MM_ACC (MM_ROWS * MM_TILE * 16) /* accumulator vectors parked between k blocks */
#define BF16_TW 64  /* BF16 (vdpbf16ps): weight rows per task */
#define BF16_ROWS 48 /* BF16: activation rows per pass over a k block (96 parked 393 KB of
                      * accumulators, crowding L2: k = 2048/3072 shapes ~5-8% slower) */
#define BF16_ACC (BF16_ROWS * BF16_TW * 16) /* its parked accumulators */

static int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; }
static int64_t round64(int64_t n) { return (n + 63) & ~(int64_t)63; }

/* Per-thread scratch, in floats: [tile | rounded activations | accumulators]. The tile holds
 * 16 rows converted to float32 or a BF16 task's AMX scratch; the activation slot holds
 * MM_QROWS bf16-rounded rows (bf16 bits for vdpbf16ps, or widened back to float32 where the
 * CPU lacks it). */
static size_t tile_floats(int64_t n) {
    const size_t f32 = (size_t)MM_TILE * (size_t)(round16(n) + 16);
    const size_t amx = (size_t)round16((int64_t)(ps_amx_bf16_scratch_bytes(n) + 3) / 4);
    return PS_MAX(f32, amx);
}
static size_t qx_floats(int64_t n) {
    const size_t bf16 = (size_t)MM_QROWS * (size_t)(round64(n) + 32) / 2;
    const size_t f32 = (size_t)MM_QROWS * (size_t)round16(n); /* bf16-rounded, widened */
    return PS_MAX(bf16, f32);
}

size_t ps_mmf_scratch_floats(int64_t max_n_in) {
    return tile_floats(max_n_in) + qx_floats(max_n_in) + PS_MAX(MM_ACC, BF16_ACC);
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


PS_TARGET_AVX2 static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* hsum256 of four accumulators at once, each result bitwise equal to hsum256 of its vector:
 * 128-bit halves, then lanes (0+2, 1+3), then those two, with shared shuffles. */
PS_TARGET_AVX2 static inline __m128 hsum256x4(__m256 a, __m256 b, __m256 c, __m256 d) {
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
PS_TARGET_AVX2 static inline __attribute__((always_inline)) void mk_avx2(
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

/* The blocking shared by the tile functions (tile_avx2, tile_avx512, tile_bf16): activation
 * rows in blocks of ROWS, inputs in blocks of MM_KB, and inside each the micro-kernel forms
 * FORM(MK, R) from the most rows down, each over 4-weight groups then single weights. The
 * function provides w, nw, x (rows of XT), ldx, n_rows, n, y, ldy and acc. */
#define TILE_FORM(MK, R)                                                                       \
    for (; r + (R) <= nr; r += (R)) {                                                          \
        for (j = 0; j + 4 <= nw; j += 4) MK(R, 4);                                             \
        for (; j < nw; j++) MK(R, 1);                                                          \
    }
#define TILE_BLOCKS(XT, ROWS, FORMS)                                                           \
    for (int64_t rb = 0; rb < n_rows; rb += (ROWS)) {                                          \
        const int64_t nr = PS_MIN((int64_t)(ROWS), n_rows - rb);                               \
        const XT *xb = x + rb * ldx;                                                           \
        float *yb = y + rb * ldy;                                                              \
        for (int64_t k0 = 0; k0 < n; k0 += MM_KB) {                                            \
            const int64_t k1 = PS_MIN(k0 + MM_KB, n);                                          \
            const bool first = k0 == 0, last = k1 == n;                                        \
            int64_t r = 0;                                                                     \
            int j;                                                                             \
            FORMS                                                                              \
        }                                                                                      \
    }

#define AVX2_MK(R, J)                                                                        \
    mk_avx2(R, J, xb + r * ldx, ldx, w + j, k0, k1, acc + (r * MM_TILE + j) * 16, first, last,  \
            yb + r * ldy + j, ldy)

PS_TARGET_AVX2 static void tile_avx2(const float *const *w, int nw, const float *x, int64_t ldx,
                             int64_t n_rows, int64_t n, float *y, int64_t ldy, float *acc) {
    TILE_BLOCKS(float, MM_ROWS,
                TILE_FORM(AVX2_MK, 3)
                TILE_FORM(AVX2_MK, 2)
                TILE_FORM(AVX2_MK, 1))
}

#undef AVX2_MK

PS_TARGET_AVX2 static float dot_avx2(const float *a, const float *b, int64_t n) {
    float y;
    mk_avx2(1, 1, a, 0, &b, 0, n, NULL, true, true, &y, 0);
    return y;
}

/* ---- AVX-512: 16 lanes ---- */


/* The horizontal sum of one accumulator, spelled out so that the order does not depend on the
 * compiler's _mm512_reduce_add_ps: 256-bit halves, 128-bit halves, then lanes (0+2, 1+3), then
 * those two. */
PS_TARGET_AVX512 static inline float hsum512(__m512 v) {
    const __m256 t3 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
    const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    const __m128 t8 = _mm_add_ps(t6, _mm_permute_ps(t6, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m128 t10 = _mm_add_ps(t8, _mm_permute_ps(t8, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtss_f32(t10);
}

/* hsum512 of four accumulators at once (each result bitwise equal to hsum512 of its vector):
 * the same tree, with the halving steps of two or four vectors sharing shuffles. */
PS_TARGET_AVX512 static inline __m128 hsum512x4(__m512 a, __m512 b, __m512 c, __m512 d) {
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

/* The accumulators of an R x J register tile (AVX-512 kernels): start at zero (first) or from
 * the parked vectors acc + (r * stride + j) * 16; end as sums in y (R, J) rows ldy apart (last:
 * hsum512, four at a time for J = 4) or parked again. */
PS_TARGET_AVX512 static inline __attribute__((always_inline)) void acc512_start(
    int R, int J, __m512 a[6][4], const float *acc, int stride, bool first) {
    _Pragma("GCC unroll 6")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int j = 0; j < J; j++)
            a[r][j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + (r * stride + j) * 16);
}

PS_TARGET_AVX512 static inline __attribute__((always_inline)) void acc512_end(
    int R, int J, __m512 a[6][4], float *acc, int stride, bool last, float *y, int64_t ldy) {
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
            else _mm512_storeu_ps(acc + (r * stride + j) * 16, a[r][j]);
        }
}

/* The AVX-512 form of mk_avx2 (same contract, 16 lanes). */
PS_TARGET_AVX512 static inline __attribute__((always_inline)) void mk_avx512(
    int R, int J, const float *x, int64_t ldx, const float *const *w, int64_t k0, int64_t k1,
    float *acc, bool first, bool last, float *y, int64_t ldy) {
    __m512 a[6][4];
    acc512_start(R, J, a, acc, MM_TILE, first);
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
    acc512_end(R, J, a, acc, MM_TILE, last, y, ldy);
}

#define AVX512_MK(R, J)                                                                      \
    mk_avx512(R, J, xb + r * ldx, ldx, w + j, k0, k1, acc + (r * MM_TILE + j) * 16, first,    \
              last, yb + r * ldy + j, ldy)

PS_TARGET_AVX512 static void tile_avx512(const float *const *w, int nw, const float *x, int64_t ldx,
                                 int64_t n_rows, int64_t n, float *y, int64_t ldy, float *acc) {
    TILE_BLOCKS(float, MM_ROWS,
                TILE_FORM(AVX512_MK, 6)
                TILE_FORM(AVX512_MK, 4)
                TILE_FORM(AVX512_MK, 2)
                TILE_FORM(AVX512_MK, 1))
}

#undef AVX512_MK

PS_TARGET_AVX512 static float dot_avx512(const float *a, const float *b, int64_t n) {
    float y;
    mk_avx512(1, 1, a, 0, &b, 0, n, NULL, true, true, &y, 0);
    return y;
}
#endif

#if defined(__x86_64__)
PS_TARGET_AVX2 static void axpy_avx2(float a, const float *x, float *y, int64_t n) {
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

PS_TARGET_AVX512 static void axpy_avx512(float a, const float *x, float *y, int64_t n) {
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

/* ---- BF16 weights x bf16-rounded activations: vdpbf16ps ----
 *
 * As llama.cpp does for BF16 weights, each activation row is rounded to bf16 once per call
 * (ps_quant_act_bf16: round to nearest even). A bf16 x bf16 product is exact in float32, so
 * what remains is the order of the float32 sums:
 *   - AVX-512 BF16: the weights are used in place (no conversion) and every output is one
 *     accumulator vector fed by vdpbf16ps over k = 0, 32, 64, ... in order (the tail masked to
 *     zeros): lane i takes (acc + x[2i+1] w[2i+1]) + x[2i] w[2i], each step rounded to nearest
 *     even (Intel's definition; measured the same on this AMD core, 32M random cases), input
 *     subnormals read as zero. Then hsum512, as every other AVX-512 path.
 *   - other ISAs: the rounded activations are widened back to float32 and go through the
 *     float32 kernels above (weights widened exactly, one fma per product).
 * So every ISA computes sum_k bf16(x[k]) * w[k] in float32, each in its own fixed order:
 * results do not depend on threads or batch split; across ISAs they differ by float32 rounding
 * only. vdpbf16ps retires two 16-lane dot pairs per cycle on this core: twice the products of
 * a float32 FMA. Register tile: R activation rows x 4 weight rows (R = 6: 24 accumulators; per
 * 32 inputs 10 loads feed 24 vdpbf16ps). Blocking as mk_avx512: MM_KB inputs, BF16_ROWS rows.
 */

#if defined(__x86_64__)



/* The vdpbf16ps form of mk_avx512: x (R, n) bf16 rows ldx elements apart, w[J] bf16 rows. */
PS_TARGET_AVX512_BF16 static inline __attribute__((always_inline)) void mk_bf16(
    int R, int J, const uint16_t *x, int64_t ldx, const uint16_t *const *w, int64_t k0,
    int64_t k1, float *acc, bool first, bool last, float *y, int64_t ldy) {
    __m512 a[6][4];
    acc512_start(R, J, a, acc, BF16_TW, first);
    int64_t k = k0;
    for (; k + 32 <= k1; k += 32) {
        __m512i xv[6];
        _Pragma("GCC unroll 6")
        for (int r = 0; r < R; r++) xv[r] = _mm512_loadu_si512((const void *)(x + r * ldx + k));
        _Pragma("GCC unroll 4")
        for (int j = 0; j < J; j++) {
            const __m512i wv = _mm512_loadu_si512((const void *)(w[j] + k));
            _Pragma("GCC unroll 6")
            for (int r = 0; r < R; r++)
                a[r][j] = _mm512_dpbf16_ps(a[r][j], (__m512bh)xv[r], (__m512bh)wv);
        }
    }
    if (k < k1) {
        const __mmask32 m = (__mmask32)((1ull << (k1 - k)) - 1u);
        __m512i xv[6];
        _Pragma("GCC unroll 6")
        for (int r = 0; r < R; r++) xv[r] = _mm512_maskz_loadu_epi16(m, x + r * ldx + k);
        _Pragma("GCC unroll 4")
        for (int j = 0; j < J; j++) {
            const __m512i wv = _mm512_maskz_loadu_epi16(m, w[j] + k);
            _Pragma("GCC unroll 6")
            for (int r = 0; r < R; r++)
                a[r][j] = _mm512_dpbf16_ps(a[r][j], (__m512bh)xv[r], (__m512bh)wv);
        }
    }
    acc512_end(R, J, a, acc, BF16_TW, last, y, ldy);
}

#define BF16_MK(R, J)                                                                        \
    mk_bf16(R, J, xb + r * ldx, ldx, w + j, k0, k1, acc + (r * BF16_TW + j) * 16, first, last, \
            yb + r * ldy + j, ldy)

/* tile_avx512 with mk_bf16: nw (<= BF16_TW) weight rows x n_rows bf16 activation rows. Tasks
 * are 64 weight rows wide (not 16): each 6-row slice of activations loaded into L1 then feeds
 * 64 weight rows, a quarter of the activation traffic (the whole x of a 3072-input matrix,
 * 1.5 MB, does not fit L2): 256-row k = 2048 / 3072 shapes ~340 -> ~365 GFLOP/s. The bf16
 * rows are 64 bytes longer than a multiple of 128 so that rows do not alias in L1 (k = 1024:
 * ~440 -> ~460). */
PS_TARGET_AVX512_BF16 static void tile_bf16(const uint16_t *const *w, int nw, const uint16_t *x, int64_t ldx,
                             int64_t n_rows, int64_t n, float *y, int64_t ldy, float *acc) {
    TILE_BLOCKS(uint16_t, BF16_ROWS,
                TILE_FORM(BF16_MK, 6)
                TILE_FORM(BF16_MK, 4)
                TILE_FORM(BF16_MK, 2)
                TILE_FORM(BF16_MK, 1))
}
#undef BF16_MK
#endif

/* ---- the pool task ---- */

typedef struct {
    const ps_matmul_env *env;
    const ps_mat *w;
    const float *x;
    int64_t ldx, n_rows;
    float *y;
    int64_t ldy;
    int32_t n_threads;
    ps_row_to_f32_fn to_f32; /* widens a weight row into the tile (unused for F32) */
} mm_job;

/* Weights stream from memory once per call: ask for a tile this thread is likely to take
 * soon (task + threads) now, into L2, so its conversion or packing
 * does not wait on DRAM. */
static void prefetch_tile(const ps_mat *w, int64_t next) {
    const int64_t row0 = next * MM_TILE;
    if (row0 < w->n_out) {
        const uint8_t *p = (const uint8_t *)w->data + (size_t)row0 * w->row_bytes;
        const size_t bytes = (size_t)PS_MIN((int64_t)MM_TILE, w->n_out - row0) * w->row_bytes;
        for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 2);
    }
}

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
            job->to_f32((const uint8_t *)w->data + (size_t)(j0 + j) * w->row_bytes, dst, w->n_in);
            rows[j] = dst;
        }
    }
    prefetch_tile(w, task + job->n_threads);
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

/* ---- the BF16 call: round a pass of rows to bf16, then one task per weight tile ---- */

typedef struct {
    const ps_matmul_env *env;
    const ps_mat *w;
    const float *x;
    int64_t ldx, row0;
    float *y;
    int64_t ldy;
    int32_t n_threads;
    bool dp;         /* vdpbf16ps on bf16 rows; else float32 rows through mm_task */
    bool amx;        /* AMX tdpbf16ps on the same bf16 rows (dp is true too) */
    void *slot;      /* the pass's rounded rows (uint16_t or float), ldb elements apart */
    int64_t ldb, n_pass;
} bf16_job;

static void bf16_round_task(void *ctx, int64_t i, int32_t thread) {
    const bf16_job *job = ctx;
    const int64_t n = job->w->n_in;
    const float *x = job->x + (job->row0 + i) * job->ldx;
    (void)thread;
    if (job->dp) {
        uint16_t *dst = (uint16_t *)job->slot + i * job->ldb;
        ps_quant_act_bf16(job->env->isa, x, n, dst, NULL);
        /* AMX reads whole 32-input chunks: zeros (not stale NaNs) meet the zero weights */
        if (job->amx) memset(dst + n, 0, sizeof(uint16_t) * (size_t)((32 - n % 32) % 32));
    } else {
        ps_quant_act_bf16(job->env->isa, x, n, NULL, (float *)job->slot + i * job->ldb);
    }
}

#if defined(__x86_64__)
static void bf16_tile_task(void *ctx, int64_t task, int32_t thread) {
    const bf16_job *job = ctx;
    const ps_mat *w = job->w;
    const int64_t j0 = task * BF16_TW;
    const int nw = (int)PS_MIN((int64_t)BF16_TW, w->n_out - j0);
    const uint16_t *rows[BF16_TW];
    for (int j = 0; j < nw; j++)
        rows[j] = (const uint16_t *)((const uint8_t *)w->data + (size_t)(j0 + j) * w->row_bytes);
    float *acc = job->env->scratch + (size_t)thread * job->env->scratch_stride +
                 (job->env->scratch_stride - BF16_ACC);
    /* no software prefetch: the rows stream in order and the hardware prefetcher keeps up
     * (prefetching the next task's 64 rows cost ~5%) */
    tile_bf16(rows, nw, (const uint16_t *)job->slot, job->ldb, job->n_pass, w->n_in,
              job->y + job->row0 * job->ldy + j0, job->ldy, acc);
}

static void bf16_amx_task(void *ctx, int64_t task, int32_t thread) {
    const bf16_job *job = ctx;
    const ps_mat *w = job->w;
    const int64_t j0 = task * PS_AMX_BF16_TW;
    const int nw = (int)PS_MIN((int64_t)PS_AMX_BF16_TW, w->n_out - j0);
    ps_amx_bf16_task(w, j0, nw, (const uint16_t *)job->slot, job->ldb, job->n_pass,
                     job->y + job->row0 * job->ldy + j0, job->ldy,
                     job->env->scratch + (size_t)thread * job->env->scratch_stride,
                     ps_amx_stream_y(job->n_pass, w->n_out));
}
#endif

/* The BF16 weights widened for isa: the forms the type table gives BF16 (types.c). */
static ps_row_to_f32_fn bf16_widen(ps_isa isa) {
    if (isa == PS_ISA_AUTO) isa = ps_isa_best();
    if (isa == PS_ISA_AVX512) return ps_dequant_bf16_avx512;
    if (isa == PS_ISA_AVX2) return ps_dequant_bf16_avx2;
    return ps_dequant_bf16;
}

void ps_matmul_bf16(const ps_matmul_env *env, const ps_mat *w, const float *x, int64_t ldx,
                    int64_t n_rows, float *y, int64_t ldy) {
    const int64_t n = w->n_in;
    bf16_job job = {env, w, x, ldx, 0, y, ldy, ps_pool_size(env->pool), false, false, NULL, 0,
                    0};
#if defined(__x86_64__)
    job.amx = env->isa == PS_ISA_AVX512 && env->amx;
    job.dp = job.amx || (env->isa == PS_ISA_AVX512 && ps_cpu_has_avx512bf16());
#endif
    /* thread 0's activation slot holds the pass (MM_QROWS rows); tasks only read it */
    job.slot = env->scratch + tile_floats(n);
    job.ldb = job.dp ? round64(n) + 32 : round16(n);
    for (int64_t r0 = 0; r0 < n_rows; r0 += MM_QROWS) {
        const int64_t nr = PS_MIN((int64_t)MM_QROWS, n_rows - r0);
        job.row0 = r0;
        job.n_pass = nr;
        ps_pool_for(env->pool, nr, bf16_round_task, &job);
#if defined(__x86_64__)
        if (job.amx) {
            /* AMX reads whole groups of 16 rows: the last group's tail rows are zeros */
            for (int64_t i = nr; i % 16; i++)
                memset((uint16_t *)job.slot + i * job.ldb, 0, sizeof(uint16_t) * (size_t)job.ldb);
            ps_pool_for(env->pool, (w->n_out + PS_AMX_BF16_TW - 1) / PS_AMX_BF16_TW,
                        bf16_amx_task, &job);
            continue;
        }
        if (job.dp) {
            ps_pool_for(env->pool, (w->n_out + BF16_TW - 1) / BF16_TW, bf16_tile_task, &job);
            continue;
        }
#endif
        mm_job mj = {env, w, (const float *)job.slot, job.ldb, nr, y + r0 * ldy, ldy,
                     job.n_threads, bf16_widen(env->isa)};
        ps_pool_for(env->pool, (w->n_out + MM_TILE - 1) / MM_TILE, mm_task, &mj);
    }
}

void ps_mmf(const ps_matmul_env *env, const ps_mat *w, ps_row_to_f32_fn to_f32, const float *x,
            int64_t ldx, int64_t n_rows, float *y, int64_t ldy) {
    assert(env->scratch_stride >= ps_mmf_scratch_floats(w->n_in) ||
           (w->type == PS_GGML_F32 && env->scratch_stride >= MM_ACC));
    if (n_rows <= 0 || w->n_out <= 0) return;
    mm_job job = {env, w, x, ldx, n_rows, y, ldy, ps_pool_size(env->pool), to_f32};
    ps_pool_for(env->pool, (w->n_out + MM_TILE - 1) / MM_TILE, mm_task, &job);
}

/* Float32 activations: each weight row widened by the type's to_f32 (once), dot products in
 * double, rounded once. */
ps_status ps_mmf_ref(const ps_mat *w, ps_row_to_f32_fn to_f32, const float *x, int64_t ldx,
                     int64_t n_rows, float *y, int64_t ldy) {
    float *row = ps_malloc((size_t)PS_MAX(w->n_in, 1) * sizeof(float));
    if (!row) return PS_ERR_NOMEM;
    for (int64_t j = 0; j < w->n_out; j++) {
        to_f32((const uint8_t *)w->data + (size_t)j * w->row_bytes, row, w->n_in);
        for (int64_t r = 0; r < n_rows; r++) {
            double s = 0.0;
            for (int64_t k = 0; k < w->n_in; k++) s += (double)x[r * ldx + k] * (double)row[k];
            y[r * ldy + j] = (float)s;
        }
    }
    ps_free(row);
    return PS_OK;
}

/* BF16: every activation row rounded to bf16 once, up front, then as float32. */
ps_status ps_matmul_bf16_ref(const ps_mat *w, const float *x, int64_t ldx, int64_t n_rows,
                             float *y, int64_t ldy) {
    if (n_rows <= 0) return PS_OK;
    const size_t n = (size_t)PS_MAX(w->n_in, 1);
    float *xr = ps_malloc((size_t)n_rows * n * sizeof(float));
    if (!xr) return PS_ERR_NOMEM;
    for (int64_t r = 0; r < n_rows; r++)
        ps_quant_act_bf16_ref(x + r * ldx, w->n_in, NULL, xr + (size_t)r * n);
    const ps_status st = ps_mmf_ref(w, ps_dequant_bf16, xr, (int64_t)n, n_rows, y, ldy);
    ps_free(xr);
    return st;
}
