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
 * and reloaded exactly, so blocking does not change any result). Sizes picked by timing
 * bench_matmul on Qwen3-0.6B shapes (k = 1024..3072; docs/kernels.md, "Measured choices of the
 * float kernels").
 *
 * Determinism: every output element is one accumulator vector that receives
 * fma(x[k..k+V), w[k..k+V)) for k = 0, V, 2V, ... in order (the last chunk masked with zeros),
 * then one horizontal sum. Which micro-kernel form, tile or thread computes it does not change
 * that sequence, so results are independent of threads and of how positions are batched.
 * The scalar path is one float accumulator in index order. ps_dot_f32 is the same reduction.
 *
 * BF16 weights take another road (see "vdpbf16ps" below): the activation rows are rounded to
 * bf16 once per call (as llama.cpp does) and AVX-512 BF16 vdpbf16ps multiplies them with the
 * weights in packed tiles (no conversion), 32 products per instruction (bench_matmul prints
 * each shape's share of the vdpbf16ps peak, ps_bf16_peak_gflops; docs/figures.md). A model's
 * matrices are packed once at load (ps_bf16_dp_pack_to, model.c); others per task. With
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
#include "base/util.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define MM_TILE 16  /* weight rows per task */
#define MM_ROWS 96  /* activation rows per pass over a k block */
#define MM_KB 1024  /* inputs per k block (a multiple of 16) */
#define MM_QROWS PS_CHUNK /* BF16: rounded activation rows per pass */
#define MM_ACC (MM_ROWS * MM_TILE * 16) /* accumulator vectors parked between k blocks */
#define BF16_TW PS_BF16_DP_ROWS  /* BF16 (vdpbf16ps): weight rows per task (64) */
#define BF16_ROWS 48 /* BF16: activation rows per pass over a k block (96 parked 393 KB of
                      * accumulators, crowding L2: slower on the k = 2048/3072 shapes) */
#define BF16_ACC (BF16_ROWS * BF16_TW * 16) /* its parked accumulators */

static int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; }
static int64_t round32(int64_t n) { return (n + 31) & ~(int64_t)31; }
static int64_t round64(int64_t n) { return (n + 63) & ~(int64_t)63; }
/* Bytes of one BF16 task's packed tile (BF16_TW rows: 16 groups of 4 rows, 256 bytes per group
 * and 32-input chunk). */
static size_t dp_tile_bytes(int64_t n) {
    return (size_t)(BF16_TW / 4) * (size_t)((n + 31) / 32) * 256u;
}

/* Per-thread scratch, in floats: [tile | rounded activations | accumulators]. The tile holds
 * 16 rows converted to float32 or a BF16 task's AMX scratch; the activation slot holds
 * MM_QROWS bf16-rounded rows (bf16 bits for vdpbf16ps, or widened back to float32 where the
 * CPU lacks it). */
static size_t tile_floats(int64_t n) {
    const size_t f32 = (size_t)MM_TILE * (size_t)(round16(n) + 16);
    const size_t amx = (size_t)round16((int64_t)(ps_amx_bf16_scratch_bytes(n) + 3) / 4);
    const size_t bf16 = (size_t)BF16_TW * (size_t)round32(n) / 2; /* packed vdpbf16ps tile */
    return PS_MAX(PS_MAX(f32, amx), bf16);
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
 *   - AVX-512 BF16: the weights are copied, not converted, into an aligned packed tile
 *     (pack_bf16) and every output is one
 *     accumulator vector fed by vdpbf16ps over k = 0, 32, 64, ... in order (the tail masked to
 *     zeros): lane i takes (acc + x[2i+1] w[2i+1]) + x[2i] w[2i], each step rounded to nearest
 *     even (Intel's definition; an AMD core checked on random cases gives the same), input
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



/* The weight tile, packed once per task into the thread's scratch (pack_bf16), or found in
 * the matrix's copy made at load (ps_bf16_dp_pack_to: the tiles one after another): group g of
 * 4 weight rows (j0 + 4g .. j0 + 4g + 3), chunk c of 32 inputs: 4 x 32 bf16 at
 * tile + (g * nc + c) * 128, one 256-byte block; rows past nw and inputs past n are zeros. The
 * micro-kernel then reads its 4 weight rows as one aligned sequential stream, whatever the
 * alignment of the mapped tensor (a GGUF tensor is only 32-byte aligned: in place, every
 * 64-byte load of a row at 32 mod 64 split over two lines), and the task's first pass over the
 * rows is one streaming copy instead of 64 rows' demand misses. The copy at load saves that
 * copy per call too, whose reads of the file's mapping (4 KiB pages, demand misses) were a large
 * part of a matmul's time on a busy machine. */
PS_TARGET_AVX512_BF16 static void pack_bf16(const uint8_t *w, size_t row_bytes, int nw,
                                            int64_t n, uint16_t *tile) {
    const int64_t nc = (n + 31) / 32, full = n / 32;
    const __mmask32 tail = (__mmask32)((1ull << (n % 32)) - 1u);
    for (int g = 0; g < (nw + 3) / 4; g++)
        for (int jj = 0; jj < 4; jj++) {
            uint16_t *d = tile + (size_t)g * (size_t)nc * 128 + (size_t)jj * 32;
            const int j = 4 * g + jj;
            if (j >= nw) {
                for (int64_t c = 0; c < nc; c++)
                    _mm512_store_si512((void *)(d + c * 128), _mm512_setzero_si512());
                continue;
            }
            const uint16_t *src = (const uint16_t *)(w + (size_t)j * row_bytes);
            int64_t c = 0;
            for (; c < full; c++)
                _mm512_store_si512((void *)(d + c * 128),
                                   _mm512_loadu_si512((const void *)(src + c * 32)));
            if (c < nc)
                _mm512_store_si512((void *)(d + c * 128),
                                   _mm512_maskz_loadu_epi16(tail, src + c * 32));
        }
}

size_t ps_bf16_dp_tiles_bytes(const ps_mat *w) {
    if (!ps_cpu_has_avx512bf16()) return 0;
    return (size_t)((w->n_out + 3) / 4) * (size_t)((w->n_in + 31) / 32) * 256u;
}

void ps_bf16_dp_pack_to(const ps_mat *w, int64_t row0, int64_t row1, void *dst) {
    const size_t per_task = dp_tile_bytes(w->n_in);
    for (int64_t t = row0 / BF16_TW; t * BF16_TW < PS_MIN(row1, w->n_out); t++)
        pack_bf16((const uint8_t *)w->data + (size_t)(t * BF16_TW) * w->row_bytes, w->row_bytes,
                  (int)PS_MIN((int64_t)BF16_TW, w->n_out - t * BF16_TW), w->n_in,
                  (uint16_t *)((uint8_t *)dst + (size_t)t * per_task));
}

/* Software prefetch of the tile a thread takes next (the pool hands tiles out in runs,
 * ps_pool_for_runs: task + 1), a few lines at a time between micro-kernel calls, so that its
 * packing reads L2 and not DRAM while this task computes. */
typedef struct {
    const uint8_t *base; /* the next tile's first row, or NULL */
    size_t row_bytes, lines_per_row, line, lines;
} bf16_pf;

/* The next tile's `rows` rows of the file's layout, row_bytes apart. */
static bf16_pf bf16_pf_rows(const uint8_t *base, size_t row_bytes, int64_t rows) {
    const size_t per_row = (row_bytes + 63) / 64;
    return (bf16_pf){base, row_bytes, per_row, 0, per_row * (size_t)rows};
}

/* The next tile of the copy made at load: one contiguous stream of `bytes` (one "row"). */
static bf16_pf bf16_pf_stream(const uint8_t *base, size_t bytes) {
    return (bf16_pf){base, 0, bytes / 64, 0, bytes / 64};
}

static inline void bf16_pf_step(bf16_pf *pf, int count) {
    for (int i = 0; i < count && pf->line < pf->lines; i++, pf->line++) {
        const size_t row = pf->line / pf->lines_per_row, off = pf->line % pf->lines_per_row;
        __builtin_prefetch(pf->base + row * pf->row_bytes + off * 64, 0, 2);
    }
}

/* The vdpbf16ps form of mk_avx512 on a packed tile: x (R, n) bf16 rows ldx elements apart
 * (zero past n up to a multiple of 32), wp a group's packed blocks; chunks [c0, c1). nj (1..4)
 * of the group's 4 columns are real: only those reach y. */
PS_TARGET_AVX512_BF16 static inline __attribute__((always_inline)) void mk_bf16(
    int R, const uint16_t *x, int64_t ldx, const uint16_t *wp, int64_t c0, int64_t c1,
    float *acc, bool first, bool last, float *y, int64_t ldy, int nj) {
    __m512 a[6][4];
    acc512_start(R, 4, a, acc, BF16_TW, first);
    for (int64_t c = c0; c < c1; c++) {
        __m512i xv[6];
        _Pragma("GCC unroll 6")
        for (int r = 0; r < R; r++)
            xv[r] = _mm512_loadu_si512((const void *)(x + r * ldx + c * 32));
        _Pragma("GCC unroll 4")
        for (int j = 0; j < 4; j++) {
            const __m512i wv = _mm512_load_si512((const void *)(wp + c * 128 + j * 32));
            _Pragma("GCC unroll 6")
            for (int r = 0; r < R; r++)
                a[r][j] = _mm512_dpbf16_ps(a[r][j], (__m512bh)xv[r], (__m512bh)wv);
        }
    }
    if (last && nj < 4) {
        const __mmask8 m = (__mmask8)((1u << nj) - 1u);
        _Pragma("GCC unroll 6")
        for (int r = 0; r < R; r++)
            _mm_mask_storeu_ps(y + r * ldy, m, hsum512x4(a[r][0], a[r][1], a[r][2], a[r][3]));
        return;
    }
    acc512_end(R, 4, a, acc, BF16_TW, last, y, ldy);
}

#define BF16_MK(R)                                                                           \
    mk_bf16(R, xb + r * ldx, ldx, tile + (size_t)(j / 4) * (size_t)nc * 128, c0, c1,         \
            acc + (r * BF16_TW + j) * 16, first, last, yb + r * ldy + j, ldy, PS_MIN(4, nw - j))
#define BF16_FORM(R)                                                                         \
    for (; r + (R) <= nr; r += (R))                                                          \
        for (int j = 0; j < nw; j += 4) {                                                    \
            bf16_pf_step(pf, 3);                                                             \
            BF16_MK(R);                                                                      \
        }

/* nw (<= BF16_TW) weight rows, packed in tile, x n_rows bf16 activation rows: activation rows
 * in blocks of BF16_ROWS, inputs in blocks of MM_KB, then the 6 / 4 / 2 / 1-row forms over
 * the 4-row groups. Tasks are 64 weight rows wide (not 16): each 6-row slice of activations
 * loaded into L1 then feeds 64 weight rows, a quarter of the activation traffic (the whole x
 * of a 3072-input matrix, 1.5 MB, does not fit L2). The bf16 rows are 64 bytes longer than a
 * multiple of 128 so that rows do not alias in L1. */
PS_TARGET_AVX512_BF16 static void tile_bf16(const uint16_t *tile, int nw, const uint16_t *x,
                                            int64_t ldx, int64_t n_rows, int64_t n, float *y,
                                            int64_t ldy, float *acc, bf16_pf *pf) {
    const int64_t nc = (n + 31) / 32, kbc = MM_KB / 32;
    for (int64_t rb = 0; rb < n_rows; rb += BF16_ROWS) {
        const int64_t nr = PS_MIN((int64_t)BF16_ROWS, n_rows - rb);
        const uint16_t *xb = x + rb * ldx;
        float *yb = y + rb * ldy;
        for (int64_t c0 = 0; c0 < nc; c0 += kbc) {
            const int64_t c1 = PS_MIN(c0 + kbc, nc);
            const bool first = c0 == 0, last = c1 == nc;
            int64_t r = 0;
            BF16_FORM(6)
            BF16_FORM(4)
            BF16_FORM(2)
            BF16_FORM(1)
        }
    }
}
#undef BF16_FORM
#undef BF16_MK
#endif

#if !defined(__x86_64__)
size_t ps_bf16_dp_tiles_bytes(const ps_mat *w) {
    (void)w;
    return 0;
}
void ps_bf16_dp_pack_to(const ps_mat *w, void *dst) {
    (void)w;
    (void)dst;
}
#endif

void ps_bf16_dp_row_to_f32(const ps_mat *w, int64_t j, float *out) {
    const int64_t nc = (w->n_in + 31) / 32;
    const uint16_t *g = (const uint16_t *)w->dp_tiles + (size_t)(j / 4) * (size_t)nc * 128 +
                        (size_t)(j % 4) * 32;
    for (int64_t k = 0; k < w->n_in; k++) {
        const uint32_t b = (uint32_t)g[(size_t)(k / 32) * 128 + (size_t)(k % 32)] << 16;
        memcpy(&out[k], &b, sizeof b);
    }
}

/* ---- the vdpbf16ps peak (ps_bf16_peak_gflops) ---- */

#if defined(__x86_64__)

#define PEAK_ACC 24 /* independent chains: 2 per cycle x ~6 cycles latency, with room */

/* iters x PEAK_ACC vdpbf16ps on registers; returns a sum so that nothing is optimised away */
PS_TARGET_AVX512_BF16 static float peak_chain(int64_t iters) {
    __m512 a[PEAK_ACC];
    for (int i = 0; i < PEAK_ACC; i++) a[i] = _mm512_setzero_ps();
    __m512i x = _mm512_set1_epi16(0x3f80), w = _mm512_set1_epi16(0x3c00); /* 1, 2^-7 */
    for (int64_t i = 0; i < iters; i++) {
        _Pragma("GCC unroll 24")
        for (int j = 0; j < PEAK_ACC; j++)
            a[j] = _mm512_dpbf16_ps(a[j], (__m512bh)x, (__m512bh)w);
        __asm__ volatile("" : "+v"(x), "+v"(w)); /* the operands stay opaque to the compiler */
    }
    float s = 0;
    for (int i = 0; i < PEAK_ACC; i++) s += hsum512(a[i]);
    return s;
}

typedef struct {
    int64_t iters;
    float sink[64];
} peak_job;

static void peak_task(void *ctx, int64_t task, int32_t thread) {
    peak_job *job = ctx;
    job->sink[thread & 63] += peak_chain(job->iters);
    (void)task;
}

static double peak_clock(bool cpu) { return cpu ? ps_cpu_s() : ps_now_s(); }

double ps_bf16_peak_gflops(ps_pool *pool, double seconds, bool cpu_clock) {
    if (!ps_cpu_has_avx512bf16()) return 0;
    const int32_t threads = ps_pool_size(pool);
    /* many short tasks per thread, so that a thread late to start does not leave the others
     * idle while it runs a long one; the first pass sizes them to ~1 ms */
    peak_job job = {.iters = 4096};
    double t0 = peak_clock(cpu_clock);
    ps_pool_for(pool, threads, peak_task, &job);
    double dt = PS_MAX(peak_clock(cpu_clock) - t0, 1e-6);
    const double per_s = (double)job.iters * threads / dt; /* iterations per second */
    job.iters = PS_MAX((int64_t)(per_s / threads * 1e-3), (int64_t)256);
    const int64_t tasks = PS_MAX((int64_t)(seconds * per_s / (double)job.iters), (int64_t)threads);
    t0 = peak_clock(cpu_clock);
    ps_pool_for(pool, tasks, peak_task, &job);
    dt = PS_MAX(peak_clock(cpu_clock) - t0, 1e-9);
    return (double)tasks * (double)job.iters * PEAK_ACC * 64.0 / dt * 1e-9;
}
#else
double ps_bf16_peak_gflops(ps_pool *pool, double seconds, bool cpu_clock) {
    (void)pool, (void)seconds, (void)cpu_clock;
    return 0;
}
#endif

/* ---- the pool task ---- */

typedef struct {
    const ps_matmul_env *env;
    const ps_mat *w;
    const float *x;
    int64_t ldx, n_rows;
    float *y;
    int64_t ldy;
    ps_row_to_f32_fn to_f32; /* widens a weight row into the tile (unused for F32) */
} mm_job;

/* Weights stream from memory once per call: ask for the tile this thread takes next (task + 1:
 * the tiles run in contiguous stretches per thread, ps_pool_for_runs) now, into L2, so its
 * conversion or packing does not wait on DRAM. */
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
    prefetch_tile(w, task + 1); /* ps_pool_for_runs: this thread's next tile */
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
    bool dp;         /* vdpbf16ps on bf16 rows; else float32 rows through mm_task */
    bool amx;        /* AMX tdpbf16ps on the same bf16 rows (dp is true too) */
    bool f16;        /* F16 weights: the rows rounded to half instead (float32 rows) */
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
        /* AMX and the packed vdpbf16ps tiles read whole 32-input chunks: zeros (not stale
         * NaNs) meet the zero weights, as masked loads would give */
        memset(dst + n, 0, sizeof(uint16_t) * (size_t)((32 - n % 32) % 32));
    } else if (job->f16) {
        ps_quant_act_f16(job->env->isa, x, n, (float *)job->slot + i * job->ldb);
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
    float *buf = job->env->scratch + (size_t)thread * job->env->scratch_stride;
    float *acc = buf + (job->env->scratch_stride - BF16_ACC);
    const int64_t next = (task + 1) * BF16_TW; /* ps_pool_for_runs: this thread's next tile */
    const uint16_t *tile;
    bf16_pf pf = {NULL, 0, 1, 0, 0};
    if (w->dp_tiles) {
        /* packed at load: the task's tile in place, the next one prefetched as one stream of
         * its groups' lines */
        const size_t per_task = dp_tile_bytes(w->n_in), per_group = per_task / (BF16_TW / 4);
        tile = (const uint16_t *)((const uint8_t *)w->dp_tiles + (size_t)task * per_task);
        if (next < w->n_out) {
            const size_t groups = (size_t)((PS_MIN((int64_t)BF16_TW, w->n_out - next) + 3) / 4);
            pf = bf16_pf_stream((const uint8_t *)w->dp_tiles +
                                    (size_t)(task + 1) * per_task,
                                groups * per_group);
        }
    } else {
        uint16_t *own = (uint16_t *)buf;
        pack_bf16((const uint8_t *)w->data + (size_t)j0 * w->row_bytes, w->row_bytes, nw,
                  w->n_in, own);
        tile = own;
        /* the next tile this thread likely takes, prefetched over this task's work */
        if (next < w->n_out)
            pf = bf16_pf_rows((const uint8_t *)w->data + (size_t)next * w->row_bytes,
                              w->row_bytes, PS_MIN((int64_t)BF16_TW, w->n_out - next));
    }
    tile_bf16(tile, nw, (const uint16_t *)job->slot, job->ldb, job->n_pass, w->n_in,
              job->y + job->row0 * job->ldy + j0, job->ldy, acc, &pf);
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

/* A type's widening for isa, from its scalar, AVX2 and AVX-512 forms (types.c's row). */
static ps_row_to_f32_fn widen_for(ps_isa isa, ps_row_to_f32_fn scalar, ps_row_to_f32_fn avx2,
                                  ps_row_to_f32_fn avx512) {
    if (isa == PS_ISA_AUTO) isa = ps_isa_best();
    if (isa == PS_ISA_AVX512) return avx512;
    if (isa == PS_ISA_AVX2) return avx2;
    return scalar;
}

/* The passes of MM_QROWS activation rows: each pass rounded into thread 0's activation slot
 * (tasks only read it), then multiplied by AMX tiles, vdpbf16ps tiles or, on float32 rows, the
 * float32 tiles with the weights widened by `widen`. */
static void rounded_passes(bf16_job *job, int64_t n_rows, ps_row_to_f32_fn widen) {
    const ps_matmul_env *env = job->env;
    const ps_mat *w = job->w;
    job->slot = env->scratch + tile_floats(w->n_in);
    job->ldb = job->dp ? round64(w->n_in) + 32 : round16(w->n_in);
    for (int64_t r0 = 0; r0 < n_rows; r0 += MM_QROWS) {
        const int64_t nr = PS_MIN((int64_t)MM_QROWS, n_rows - r0);
        job->row0 = r0;
        job->n_pass = nr;
        ps_pool_for_runs(env->pool, nr, bf16_round_task, job);
#if defined(__x86_64__)
        if (job->amx) {
            /* AMX reads whole groups of 16 rows: the last group's tail rows are zeros */
            for (int64_t i = nr; i % 16; i++)
                memset((uint16_t *)job->slot + i * job->ldb, 0,
                       sizeof(uint16_t) * (size_t)job->ldb);
            ps_pool_for_runs(env->pool, (w->n_out + PS_AMX_BF16_TW - 1) / PS_AMX_BF16_TW,
                        bf16_amx_task, job);
            continue;
        }
        if (job->dp) {
            ps_pool_for_runs(env->pool, (w->n_out + BF16_TW - 1) / BF16_TW, bf16_tile_task, job);
            continue;
        }
#endif
        mm_job mj = {env, w, (const float *)job->slot, job->ldb, nr, job->y + r0 * job->ldy,
                     job->ldy, widen};
        ps_pool_for_runs(env->pool, (w->n_out + MM_TILE - 1) / MM_TILE, mm_task, &mj);
    }
}

void ps_matmul_bf16(const ps_matmul_env *env, const ps_mat *w, const float *x, int64_t ldx,
                    int64_t n_rows, float *y, int64_t ldy) {
    bf16_job job = {env, w, x, ldx, 0, y, ldy, false, false, false,
                    NULL, 0, 0};
#if defined(__x86_64__)
    job.amx = env->isa == PS_ISA_AVX512 && env->amx;
    job.dp = job.amx || (env->isa == PS_ISA_AVX512 && ps_cpu_has_avx512bf16());
#endif
    rounded_passes(&job, n_rows,
                   widen_for(env->isa, ps_dequant_bf16, ps_dequant_bf16_avx2, ps_dequant_bf16_avx512));
}

void ps_matmul_f16(const ps_matmul_env *env, const ps_mat *w, const float *x, int64_t ldx,
                   int64_t n_rows, float *y, int64_t ldy) {
    bf16_job job = {env, w, x, ldx, 0, y, ldy, false, false, true,
                    NULL, 0, 0};
    rounded_passes(&job, n_rows,
                   widen_for(env->isa, ps_dequant_f16, ps_dequant_f16_avx2, ps_dequant_f16_avx512));
}

void ps_mmf(const ps_matmul_env *env, const ps_mat *w, ps_row_to_f32_fn to_f32, const float *x,
            int64_t ldx, int64_t n_rows, float *y, int64_t ldy) {
    assert(env->scratch_stride >= ps_mmf_scratch_floats(w->n_in) ||
           (w->type == PS_GGML_F32 && env->scratch_stride >= MM_ACC));
    if (n_rows <= 0 || w->n_out <= 0) return;
    mm_job job = {env, w, x, ldx, n_rows, y, ldy, to_f32};
    ps_pool_for_runs(env->pool, (w->n_out + MM_TILE - 1) / MM_TILE, mm_task, &job);
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

/* The native references: every activation row rounded once, up front, by `round_row`, then
 * ps_mmf_ref with the weights widened by `widen`. */
static ps_status rounded_ref(const ps_mat *w, void (*round_row)(const float *, int64_t, float *),
                             ps_row_to_f32_fn widen, const float *x, int64_t ldx, int64_t n_rows,
                             float *y, int64_t ldy) {
    if (n_rows <= 0) return PS_OK;
    const size_t n = (size_t)PS_MAX(w->n_in, 1);
    float *xr = ps_malloc((size_t)n_rows * n * sizeof(float));
    if (!xr) return PS_ERR_NOMEM;
    for (int64_t r = 0; r < n_rows; r++) round_row(x + r * ldx, w->n_in, xr + (size_t)r * n);
    const ps_status st = ps_mmf_ref(w, widen, xr, (int64_t)n, n_rows, y, ldy);
    ps_free(xr);
    return st;
}

static void bf16_row_ref(const float *x, int64_t n, float *out) {
    ps_quant_act_bf16_ref(x, n, NULL, out);
}

ps_status ps_matmul_f16_ref(const ps_mat *w, const float *x, int64_t ldx, int64_t n_rows,
                            float *y, int64_t ldy) {
    return rounded_ref(w, ps_quant_act_f16_ref, ps_dequant_f16, x, ldx, n_rows, y, ldy);
}

ps_status ps_matmul_bf16_ref(const ps_mat *w, const float *x, int64_t ldx, int64_t n_rows,
                             float *y, int64_t ldy) {
    return rounded_ref(w, bf16_row_ref, ps_dequant_bf16, x, ldx, n_rows, y, ldy);
}
