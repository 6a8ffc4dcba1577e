/*
 * matmul_amx.c — the BF16 and block-quantised (Q8_0, Q4_K, ...) matmul tiles on Intel AMX
 * (tile registers + TMUL).
 *
 * AMX has 8 tile registers of up to 16 rows x 64 bytes, configured per thread (ldtilecfg), and
 * instructions C (16 x 16 float32 / int32) += A (16 rows x K) . B (K x 16, in "VNNI" pairs or
 * quads: row kk of B holds, for each of the 16 columns, the K-adjacent 2 bf16 or 4 int8 values
 * 2kk.. / 4kk..). For BF16, A is 16 activation rows (row-major, as matmul_float.c prepares them
 * per call) and B 16 weight rows in that pair/quad layout, so C is 16 activation rows x 16
 * outputs; the block types swap the roles (below).
 *
 *   BF16 (tdpbf16ps): y[r][j] = sum over k of bf16(x[r][k]) * w[j][k], float32. Per output, one
 *     C element accumulates the 32-input chunks kc = 0, 1, 2, ... in order (between k blocks the
 *     C tiles are parked in scratch and reloaded exactly; within a chunk the instruction, as
 *     Intel's SDM defines it, sums the 16 even and the 16 odd products apart and adds the two
 *     to C), so the result depends only on the activation row, the weight row and n_in: not
 *     on threads, tiles or batch split. The weights
 *     are read from their tile copy (ps_amx_bf16_pack, made once at load) or, without it, each
 *     task packs its 32 rows into scratch with the same code, so both give the same bits.
 *     Against the vdpbf16ps path (16 lane partial sums over k mod 32, then a tree) the order
 *     differs, so results differ by float32 rounding; both are bounded by the usual
 *     |y - exact| <= n_in * 2^-24 * sum_k |x_k w_k| (test_matmul checks it, and prints the
 *     largest measured share of that bound).
 *   The block types, Q8_0 among them (matmul_quant.c's integer road): see "the block-quantised
 *     types" below: int8 weights x int8 activations, the exact int32 sums of that file's kernels,
 *     its float part; bitwise equal to its VNNI, AVX2 and scalar kernels.
 *
 * Tiles are configured at the start of every task and released at its end (tilerelease), so
 * any thread of any pool can run a task and no thread keeps tile state between calls.
 * The functions here are only called when ps_cpu_has_amx() (isa.c) said yes.
 */
#include "kernels/matmul_amx.h"
#include "base/simd.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>


/* The tile intrinsics are asm statements that tell the compiler nothing about the memory they
 * read or write: a barrier before loads of data written by C code and after stores. */
#define AMX_FENCE() __asm__ volatile("" ::: "memory")
/* The same for the 4 KiB C buffer alone (tile stores write it, vector loads read it): the
 * accumulators and other values may stay in registers across it. */
#define C_FENCE(buf) __asm__ volatile("" : "+m"(*(int32_t(*)[1024])(buf)))

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

/* Every tile 16 rows x 64 bytes. BF16: 0-3 C (16 x 16 float), 4-5 A (16 rows x 32 bf16), 6-7 B
 * (16 pairs x 16); the 256-input block types use the same shapes (see their kernels). */
PS_TARGET_AMX static void cfg_bf16(void) {
    amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) {
        c.colsb[t] = 64;
        c.rows[t] = 16;
    }
    AMX_FENCE();
    _tile_loadconfig(&c);
}

/* The 32-input block types (Q8_0, Q4_0, ...): tiles 0-3 C (16 x 16 int32), 4-5 A (16 rows x
 * 32 int8), 6-7 B (8 quads x 16). */
PS_TARGET_AMX static void cfg_q8(void) {
    amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 4; t++) {
        c.colsb[t] = 64;
        c.rows[t] = 16;
    }
    c.colsb[4] = c.colsb[5] = 32;
    c.rows[4] = c.rows[5] = 16;
    c.colsb[6] = c.colsb[7] = 64;
    c.rows[6] = c.rows[7] = 8;
    AMX_FENCE();
    _tile_loadconfig(&c);
}

/* One output row piece of 16 lanes (mask m). stream: a whole aligned 64-byte line goes around
 * the cache (non-temporal): used for outputs too big to stay in cache (the logits, 155 MB for
 * 256 positions x 151,936), where each ordinary store first read its line from memory, a
 * read-for-ownership that cost as much as the product itself (docs/kernels.md, "Measured
 * choices of the integer kernels"). The values stored are the same. */
PS_TARGET_AMX static inline __attribute__((always_inline)) void store_row(float *p, __mmask16 m,
                                                                   __m512 v, bool stream) {
    if (stream && m == 0xffff && ((uintptr_t)p & 63) == 0) _mm512_stream_ps(p, v);
    else _mm512_mask_storeu_ps(p, m, v);
}

/* ---- BF16 ---- */

static int64_t n_chunks(int64_t n_in) { return (n_in + 31) / 32; }

size_t ps_amx_bf16_tiles_bytes(const ps_mat *w) {
    return (size_t)((w->n_out + 15) / 16) * (size_t)n_chunks(w->n_in) * 1024u;
}

/* 16 x 16 dword transpose: out[k] lane i = in[i] lane k. */
PS_TARGET_AMX static inline void transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* now, in each 128-bit lane L of r[4q + s], dwords = column 4L + s' of rows 4q..4q+3 */
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
        r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

/* Weight rows 16 g .. 16 g + 15 into n_chunks 1 KiB B tiles at dst: chunk kc, row kk, column i
 * = the bf16 pair w[16 g + i][32 kc + 2 kk], [.. + 1]; zeros past n_in and past n_out. */
PS_TARGET_AMX static void pack_group(const ps_mat *w, int64_t g, uint8_t *dst) {
    const int64_t nkc = n_chunks(w->n_in);
    for (int64_t kc = 0; kc < nkc; kc++) {
        const int64_t k0 = kc * 32, rem = PS_MIN((int64_t)32, w->n_in - k0);
        const __mmask32 m = rem == 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << rem) - 1u);
        __m512i r[16];
        for (int i = 0; i < 16; i++) {
            const int64_t row = 16 * g + i;
            r[i] = row < w->n_out
                       ? _mm512_maskz_loadu_epi16(
                             m, (const uint8_t *)w->data + (size_t)row * w->row_bytes + 2 * k0)
                       : _mm512_setzero_si512();
        }
        transpose16(r);
        for (int kk = 0; kk < 16; kk++)
            _mm512_storeu_si512((void *)(dst + kc * 1024 + kk * 64), r[kk]);
    }
}

void ps_amx_bf16_pack_to(const ps_mat *w, void *dst) {
    const size_t per_group = (size_t)n_chunks(w->n_in) * 1024u;
    for (int64_t g = 0; g < (w->n_out + 15) / 16; g++)
        pack_group(w, g, (uint8_t *)dst + (size_t)g * per_group);
}

void *ps_amx_bf16_pack(const ps_mat *w, size_t *bytes) {
    const size_t nb = ps_amx_bf16_tiles_bytes(w);
    if (bytes) *bytes = 0;
    if (w->type != PS_GGML_BF16 || nb == 0) return NULL;
    uint8_t *t = ps_aligned_alloc(64, nb);
    if (!t) return NULL;
    ps_amx_bf16_pack_to(w, t);
    if (bytes) *bytes = nb;
    return t;
}

size_t ps_amx_bf16_scratch_bytes(int64_t n_in) {
    return (size_t)(PS_AMX_BF16_TW / 16) * (size_t)n_chunks(n_in) * 1024u + /* packed B */
           (size_t)PS_CHUNK * PS_AMX_BF16_TW * sizeof(float) +              /* parked C */
           64;
}

#define AMX_KB 8 /* BF16: 32-input chunks per k block (256 inputs: the task's B slice, 16 KiB,
                  * stays in L1 while the activation rows pass) */

/* One 32- or 16-row by 32- or 16-output block over chunks [c0, c1): RA A tiles, RB B tiles.
 * first: C starts at zero, else from the park; the C tiles go back to the park. */
PS_TARGET_AMX static inline __attribute__((always_inline)) void bf16_block(
    int RA, int RB, const uint16_t *x, int64_t ldx, const uint8_t *b0, const uint8_t *b1,
    int64_t c0, int64_t c1, float *park, bool first) {
    /* park layout: C(a, b) at park + (a * 2 + b) * 256 floats, rows 64 bytes apart */
    if (first) {
        _tile_zero(0);
        if (RB == 2) _tile_zero(1);
        if (RA == 2) _tile_zero(2);
        if (RA == 2 && RB == 2) _tile_zero(3);
    } else {
        _tile_loadd(0, park, 64);
        if (RB == 2) _tile_loadd(1, park + 256, 64);
        if (RA == 2) _tile_loadd(2, park + 512, 64);
        if (RA == 2 && RB == 2) _tile_loadd(3, park + 768, 64);
    }
    const long sx = (long)(ldx * 2);
    for (int64_t kc = c0; kc < c1; kc++) {
        _tile_loadd(4, x + kc * 32, sx);
        if (RA == 2) _tile_loadd(5, x + 16 * ldx + kc * 32, sx);
        _tile_loadd(6, b0 + kc * 1024, 64);
        if (RB == 2) _tile_loadd(7, b1 + kc * 1024, 64);
        _tile_dpbf16ps(0, 4, 6);
        if (RB == 2) _tile_dpbf16ps(1, 4, 7);
        if (RA == 2) _tile_dpbf16ps(2, 5, 6);
        if (RA == 2 && RB == 2) _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, park, 64);
    if (RB == 2) _tile_stored(1, park + 256, 64);
    if (RA == 2) _tile_stored(2, park + 512, 64);
    if (RA == 2 && RB == 2) _tile_stored(3, park + 768, 64);
}

PS_TARGET_AMX void ps_amx_bf16_task(const ps_mat *w, int64_t j0, int nw, const uint16_t *x, int64_t ldx,
                            int64_t n_rows, float *y, int64_t ldy, void *scratch, bool stream) {
    const int64_t nkc = n_chunks(w->n_in);
    const size_t per_group = (size_t)nkc * 1024u;
    const int ng = (nw + 15) / 16;
    const uint8_t *bt;
    uint8_t *sb = scratch;
    if (w->tiles) {
        bt = (const uint8_t *)w->tiles + (size_t)(j0 / 16) * per_group;
    } else {
        for (int g = 0; g < ng; g++) pack_group(w, j0 / 16 + g, sb + (size_t)g * per_group);
        bt = sb;
    }
    float *park = (float *)(sb + (size_t)(PS_AMX_BF16_TW / 16) * per_group);
    const uint8_t *b0 = bt, *b1 = bt + per_group;
    const int64_t nrg = (n_rows + 15) / 16; /* row groups; x holds nrg * 16 readable rows */
    cfg_bf16();
    AMX_FENCE();
    for (int64_t c0 = 0; c0 < nkc; c0 += AMX_KB) {
        const int64_t c1 = PS_MIN(c0 + AMX_KB, nkc);
        const bool first = c0 == 0;
        int64_t rg = 0;
        for (; rg + 2 <= nrg; rg += 2) {
            const uint16_t *xr = x + rg * 16 * ldx;
            float *p = park + rg * 16 * PS_AMX_BF16_TW;
            if (ng == 2) bf16_block(2, 2, xr, ldx, b0, b1, c0, c1, p, first);
            else bf16_block(2, 1, xr, ldx, b0, b1, c0, c1, p, first);
        }
        if (rg < nrg) {
            const uint16_t *xr = x + rg * 16 * ldx;
            float *p = park + rg * 16 * PS_AMX_BF16_TW;
            if (ng == 2) bf16_block(1, 2, xr, ldx, b0, b1, c0, c1, p, first);
            else bf16_block(1, 1, xr, ldx, b0, b1, c0, c1, p, first);
        }
    }
    _tile_release();
    AMX_FENCE();
    /* park -> y: row group pair rp holds C(a, b) of rows 32 rp + 16 a, outputs 16 b */
    for (int64_t r = 0; r < n_rows; r++) {
        const int64_t rp = r / 32, a = (r / 16) % 2, rr = r % 16;
        for (int b = 0; b < ng; b++) {
            const float *src = park + rp * 32 * PS_AMX_BF16_TW + (a * 2 + b) * 256 + rr * 16;
            const int nl = PS_MIN(16, nw - 16 * b);
            store_row(y + r * ldy + 16 * b, (__mmask16)((1u << nl) - 1u), _mm512_loadu_ps(src),
                      stream);
        }
    }
    if (stream) _mm_sfence();
}

/* ---- the block-quantised types (matmul_quant.c's integer road) ----
 *
 * Roles swapped against BF16: A = 16 weight rows (row-major, as decoded: no transpose), B =
 * 16 activation rows in quads (each 16-row group of the call's quantised activations is
 * transposed once per call, ps_amx_q_act_group), so C row i = weight row i, lane r =
 * activation row r; the float part multiplies set1(dw[i]) by the rows' scales (the same
 * products as the VNNI path's dw x set1(d[r]): IEEE multiplication commutes) and the outputs are
 * transposed back (16 x 16) when stored.
 *
 * 256-input types: the sub-block scale goes into the weights, p = sc x (u - off) (|p| < 2^13),
 * split into bytes p = 256 hi + lo (hi signed, lo unsigned): isum = 256 (x . hi) + (x . lo),
 * two tdpbssd / tdpbusd chains of K = 64 over the whole block (4 + 4 products), and the mins
 * a third chain of mn (each sub-block's min repeated over its inputs): msum = x . mn. Those
 * are the exact int32 isum_b and msum_b of matmul_quant.h, so with the same float part
 * (acc = fma(isum, dw d, acc); acc = fma(-msum, dm d, acc), block by block) the results are
 * bitwise the VNNI ones. Blocks outer, 16-row groups inner (one block's packed weights, 12 KiB,
 * stay in L1 while the activation groups pass); the accumulators wait in a park between blocks.
 * 32-input types (no sub-block scales): A = u - off as int8, one tdpbssd of K = 32 per block,
 * blocks in groups of four (four C tiles, A and B alternating between two tiles each), groups outer with the accumulators in registers. */

/* Bytes of a packed 256-input block's weight planes: hi and lo (16 x 256 each), or one. */
static size_t qg_planes(const ps_amx_qgeom *g) { return g->bias >= 0 ? 4096u : 8192u; }

/* Byte offset of a packed block's float scales: 256 inputs: the planes, then (mink == 1) the
 * int16 min pairs; 32 inputs: the one 16 x 32 plane. */
static size_t qg_dw_off(const ps_amx_qgeom *g) {
    return g->qk == 256 ? qg_planes(g) + (g->mink == 1 ? 512u : 0u) : 512u;
}

size_t ps_amx_q_block_bytes(const ps_amx_qgeom *g) {
    return qg_dw_off(g) + 64u + (g->mink ? 64u : 0u);
}

size_t ps_amx_q_scratch_bytes(int64_t n_in) {
    /* worst case: 256-input blocks with mins, then the park */
    return (size_t)((n_in + 255) / 256) * (8192u + 512u + 128u) + 16u * 1024u + 64u;
}

/* 256 inputs: per row, 64 inputs at a time: w = u - off widened to int16, p = sc x w by one
 * vpmullw (the sub-block scales spread over the lanes from one register of them), and the
 * planes are p's two bytes: hi = the high byte (signed, p >> 8), lo = the low byte, gathered
 * from two p vectors by one vpshufb each (bytes to qword halves) and one two-source qword
 * permute per plane. (Was: vpsraw + two vpmovwb per 32 inputs, each 2 uops on port 5.)
 * bias >= 0: the one plane is the low byte of p + bias (which is all of it). */
PS_TARGET_AMX void ps_amx_q_pack_block(const ps_amx_qgeom *g, const ps_amx_qdec *dec, uint8_t *dst) {
    const int qk = g->qk, sb = g->sb, np = 128 / sb; /* np: min pairs per 256-input block */
    float *dw = (float *)(dst + qg_dw_off(g)), *dm = dw + 16;
    const __m512i off = _mm512_set1_epi16((short)g->off);
    const __m512i bias = _mm512_set1_epi16((short)(g->bias > 0 ? g->bias : 0));
    /* per 128-bit lane: the low bytes of its 8 words, then the high bytes */
    const __m512i split = _mm512_set4_epi32(0x0f0d0b09, 0x07050301, 0x0e0c0a08, 0x06040200);
    const __m512i qlo = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i qhi = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    /* lane l of 32-input chunk c: the sub-block of input 32 c + l */
    __m512i sidx[8];
    if (qk == 256) {
        const __m512i iota = _mm512_setr_epi32(0x00010000, 0x00030002, 0x00050004, 0x00070006,
                                               0x00090008, 0x000b000a, 0x000d000c, 0x000f000e,
                                               0x00110010, 0x00130012, 0x00150014, 0x00170016,
                                               0x00190018, 0x001b001a, 0x001d001c, 0x001f001e);
        for (int c = 0; c < 8; c++)
            sidx[c] = sb == 16 ? _mm512_srli_epi16(_mm512_add_epi16(iota, _mm512_set1_epi16((short)(32 * c))), 4)
                               : _mm512_set1_epi16((short)c);
    }
    for (int i = 0; i < 16; i++) {
        if (qk == 32) { /* u - off fits int8 for every 32-input type */
            const __m256i u = _mm256_loadu_si256((const __m256i *)dec->u[i]);
            _mm256_storeu_si256((__m256i *)(dst + 32 * i),
                                _mm256_sub_epi8(u, _mm256_set1_epi8((char)g->off)));
        } else {
            uint8_t *hi = dst + 256 * i, *lo = hi + 4096;
            /* the row's 8 or 16 scales as int16 words 0..15 (|sc| <= 128) */
            const __m512i scv = _mm512_castsi256_si512(
                _mm512_cvtepi32_epi16(_mm512_loadu_si512((const void *)dec->sc[i])));
            for (int k0 = 0; k0 < 256; k0 += 64) {
                const int c = k0 / 32;
                const __m512i w0 = _mm512_sub_epi16(
                    _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(dec->u[i] + k0))), off);
                const __m512i w1 = _mm512_sub_epi16(
                    _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(dec->u[i] + k0 + 32))),
                    off);
                const __m512i p0 = _mm512_shuffle_epi8(
                    _mm512_add_epi16(_mm512_mullo_epi16(w0, _mm512_permutexvar_epi16(sidx[c], scv)), bias),
                    split);
                const __m512i p1 = _mm512_shuffle_epi8(
                    _mm512_add_epi16(_mm512_mullo_epi16(w1, _mm512_permutexvar_epi16(sidx[c + 1], scv)), bias),
                    split);
                if (g->bias >= 0) {
                    _mm512_store_si512((void *)(hi + k0), _mm512_permutex2var_epi64(p0, qlo, p1));
                    continue;
                }
                _mm512_store_si512((void *)(hi + k0), _mm512_permutex2var_epi64(p0, qhi, p1));
                _mm512_store_si512((void *)(lo + k0), _mm512_permutex2var_epi64(p0, qlo, p1));
            }
            if (g->mink == 1) {
                int16_t *mp = (int16_t *)(dst + qg_planes(g)) + 2 * np * i;
                for (int k = 0; k < 2 * np; k++) mp[k] = dec->mn[i][k];
            }
        }
        dw[i] = dec->dw[i];
        if (g->mink) dm[i] = dec->dm[i];
    }
}

PS_TARGET_AMX void ps_amx_q_act_group(const ps_amx_qgeom *g, int8_t *q, int64_t ldq, float *d, float *s,
                              int64_t ldd, int16_t *bs, int64_t ldb, int64_t n, void *tmp) {
    uint8_t *t = tmp;
    memcpy(t, q, (size_t)(16 * ldq));
    for (int64_t c = 0; c * 64 < n; c++) {
        const int64_t rem = PS_MIN((int64_t)64, n - 64 * c);
        const __mmask64 m = rem == 64 ? ~(__mmask64)0 : (((__mmask64)1 << rem) - 1);
        __m512i r[16];
        for (int i = 0; i < 16; i++) r[i] = _mm512_maskz_loadu_epi8(m, t + i * ldq + 64 * c);
        transpose16(r);
        for (int kk = 0; kk < rem / 4; kk++)
            _mm512_storeu_si512((void *)(q + c * 1024 + kk * 64), r[kk]);
    }
    const int64_t nb = n / g->qk;
    for (int pass = 0; pass < (g->mink == 2 ? 2 : 1); pass++) {
        float *v = pass ? s : d, *tv = (float *)t;
        memcpy(tv, v, sizeof(float) * (size_t)(16 * ldd));
        for (int64_t b = 0; b < nb; b++)
            for (int r = 0; r < 16; r++) v[b * 16 + r] = tv[r * ldd + b];
    }
    if (g->bias > 0) { /* the block sums: [block][16 rows] */
        const int ns = 256 / g->sb;
        int16_t *tb = (int16_t *)t;
        int32_t *o = (int32_t *)bs;
        memcpy(tb, bs, sizeof(int16_t) * (size_t)(16 * ldb));
        for (int64_t b = 0; b < nb; b++)
            for (int r = 0; r < 16; r++) {
                int32_t sum = 0;
                for (int k = 0; k < ns; k++) sum += tb[r * ldb + b * ns + k];
                o[b * 16 + r] = sum;
            }
    }
    if (g->mink == 1) { /* the sub-block sums' int16 pairs: [block][pair][16 rows] */
        const int np = 128 / g->sb;
        int16_t *tb = (int16_t *)t;
        int32_t *o = (int32_t *)bs;
        memcpy(tb, bs, sizeof(int16_t) * (size_t)(16 * ldb));
        for (int64_t b = 0; b < nb; b++)
            for (int p = 0; p < np; p++)
                for (int r = 0; r < 16; r++)
                    memcpy(o + (b * np + p) * 16 + r, tb + r * ldb + (b * np + p) * 2, 4);
    }
}

/* acc[i] (weight row i, lane r = activation row r) -> y rows r < nr, outputs < nw. */
PS_TARGET_AMX static inline __attribute__((always_inline)) void store_t(__m512 acc[16], int64_t nr,
                                                                 float *y, int64_t ldy,
                                                                 __mmask16 m, bool stream) {
    __m512i r[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_castps_si512(acc[i]);
    transpose16(r);
    for (int64_t j = 0; j < nr; j++) store_row(y + j * ldy, m, _mm512_castsi512_ps(r[j]), stream);
}

/* Block b of G (1 or 2) 16-row groups, P (2 or 1) planes: the hi and lo chains (K = 64, four
 * steps each) of group 0 into C 0-1, of group 1 into C 2-3 (B tiles 4-5: the groups'
 * activations, A tiles 6-7: the hi and lo planes), so that four independent chains keep the
 * tile unit busy; P = 1: the one plane's chain (unsigned bytes: tdpbusd) into C 0 and C 2.
 * Stored to cb (group h at + 512 h; hi or the one plane at + 0, lo at + 256). */
PS_TARGET_AMX static inline __attribute__((always_inline)) void q256_tiles(int G, int P,
                                                                    const uint8_t *wb,
                                                                    const int8_t *x0,
                                                                    const int8_t *x1,
                                                                    int32_t *cb) {
    _tile_zero(0);
    if (P == 2) _tile_zero(1);
    if (G == 2) _tile_zero(2);
    if (G == 2 && P == 2) _tile_zero(3);
    for (int c = 0; c < 4; c++) {
        _tile_loadd(4, x0 + c * 1024, 64);
        _tile_loadd(6, wb + c * 64, 256);
        if (P == 2) _tile_dpbssd(0, 6, 4);
        else _tile_dpbusd(0, 6, 4);
        if (G == 2) {
            _tile_loadd(5, x1 + c * 1024, 64);
            if (P == 2) _tile_dpbssd(2, 6, 5);
            else _tile_dpbusd(2, 6, 5);
        }
        if (P == 2) {
            _tile_loadd(7, wb + 4096 + c * 64, 256);
            _tile_dpbusd(1, 7, 4);
            if (G == 2) _tile_dpbusd(3, 7, 5);
        }
    }
    _tile_stored(0, cb, 64);
    if (P == 2) _tile_stored(1, cb + 256, 64);
    if (G == 2) _tile_stored(2, cb + 512, 64);
    if (G == 2 && P == 2) _tile_stored(3, cb + 768, 64);
}

/* The float part of one group and block: isum = 256 hi + lo (P = 2), or the plane's sum less
 * bias x the block's activation sum (P = 1; BIAS: bias > 0, bst the block sums); NP min pairs
 * (msum: vpdpwssd of the activations' sub-block sum pairs, lanes = rows, by the weight row's
 * min pair, at wb + planes). */
PS_TARGET_AMX static inline __attribute__((always_inline)) void q256_float(
    int NP, int P, bool BIAS, int bias, const int32_t *cb, const uint8_t *wb, const float *dw,
    const float *dm, const float *dt, const int32_t *bst, float *park, bool first, bool last,
    int64_t nr, float *y, int64_t ldy, __mmask16 m, bool stream) {
    const __m512 dv = _mm512_loadu_ps(dt);
    __m512i bv[8];
    _Pragma("GCC unroll 8") for (int p = 0; p < NP; p++)
        bv[p] = _mm512_loadu_si512((const void *)(bst + 16 * p));
    const __m512i cs = BIAS ? _mm512_mullo_epi32(_mm512_loadu_si512((const void *)bst),
                                                 _mm512_set1_epi32(bias))
                            : _mm512_setzero_si512();
    const int32_t *mp = (const int32_t *)(wb + (P == 2 ? 8192 : 4096));
    __m512 acc[16];
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) {
        __m512i is = _mm512_load_si512((const void *)(cb + 16 * i));
        if (P == 2)
            is = _mm512_add_epi32(_mm512_slli_epi32(is, 8),
                                  _mm512_load_si512((const void *)(cb + 256 + 16 * i)));
        else if (BIAS)
            is = _mm512_sub_epi32(is, cs);
        __m512 a = first ? _mm512_setzero_ps() : _mm512_load_ps(park + 16 * i);
        a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(_mm512_set1_ps(dw[i]), dv), a);
        if (NP) {
            __m512i t = _mm512_setzero_si512();
            _Pragma("GCC unroll 8") for (int p = 0; p < NP; p++)
                t = _mm512_dpwssd_epi32(t, bv[p], _mm512_set1_epi32(mp[i * NP + p]));
            a = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(_mm512_set1_ps(dm[i]), dv),
                                 a);
        }
        if (last) acc[i] = a;
        else _mm512_store_ps(park + 16 * i, a);
    }
    if (last) store_t(acc, nr, y, ldy, m, stream);
}

PS_TARGET_AMX static inline __attribute__((always_inline)) void q256_run(
    int NP, int P, bool BIAS, const ps_amx_qgeom *g, const uint8_t *wp, int nw, int64_t nb,
    const int8_t *xt, int64_t ldq, const float *dt, const int32_t *bst, int64_t ldd,
    int64_t ldb, int64_t n_rows, float *y, int64_t ldy, float *park, bool stream) {
    const size_t bb = ps_amx_q_block_bytes(g);
    const int64_t ng = (n_rows + 15) / 16;
    const __mmask16 m = (__mmask16)((1u << nw) - 1u);
    /* per group and block: NP int32 pairs (mins) or one int32 (block sums), 16 rows each */
    const int64_t bstride = BIAS ? 16 : NP * 16;
    int32_t cb[2][1024] __attribute__((aligned(64)));
    cfg_bf16();
    AMX_FENCE();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = wp + (size_t)b * bb;
        const float *dw = (const float *)(wb + qg_dw_off(g)), *dm = dw + 16;
        for (int64_t g0 = 0; g0 < ng; g0 += 2) {
            const int G = g0 + 1 < ng ? 2 : 1;
            int32_t *c = cb[(g0 / 2) & 1];
            const int8_t *x0 = xt + g0 * 16 * ldq + b * 4096;
            if (G == 2) q256_tiles(2, P, wb, x0, x0 + 16 * ldq, c);
            else q256_tiles(1, P, wb, x0, x0, c);
            AMX_FENCE();
            for (int h = 0; h < G; h++) {
                const int64_t gi = g0 + h;
                q256_float(NP, P, BIAS, g->bias, c + 512 * h, wb, dw, dm,
                           dt + gi * 16 * ldd + b * 16,
                           NP || BIAS ? bst + gi * 8 * ldb + b * bstride : NULL, park + gi * 256,
                           b == 0, b == nb - 1, PS_MIN((int64_t)16, n_rows - 16 * gi),
                           y + gi * 16 * ldy, ldy, m, stream);
            }
            AMX_FENCE();
        }
    }
    _tile_release();
    if (stream) _mm_sfence();
    AMX_FENCE();
}

/* 32-input types: one group of 16 activation rows over all blocks. */
#define Q32_TDP(C, A, B, bb)                                                                   \
    do {                                                                                       \
        _tile_zero(C);                                                                         \
        _tile_loadd(A, wp + (size_t)(bb) * pb, 32);                                            \
        _tile_loadd(B, xg + (bb) * 512, 64);                                                   \
        _tile_dpbssd(C, A, B);                                                                 \
    } while (0)

PS_TARGET_AMX static inline __attribute__((always_inline)) void q32_float(
    bool FMIN, __m512 acc[16], const int32_t *cb, const uint8_t *wb, const float *dt,
    const float *st) {
    const float *dw = (const float *)(wb + 512), *dm = dw + 16;
    const __m512 dv = _mm512_loadu_ps(dt);
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) {
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)(cb + 16 * i))),
                                 _mm512_mul_ps(_mm512_set1_ps(dw[i]), dv), acc[i]);
        if (FMIN) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(dm[i]), _mm512_loadu_ps(st), acc[i]);
    }
}

PS_TARGET_AMX static inline __attribute__((always_inline)) void q32_run(
    bool FMIN, const ps_amx_qgeom *g, const uint8_t *wp, int nw, int64_t nb, const int8_t *xt,
    int64_t ldq, const float *dt, const float *st, int64_t ldd, int64_t n_rows, float *y,
    int64_t ldy, bool stream) {
    const size_t pb = ps_amx_q_block_bytes(g);
    const __mmask16 m = (__mmask16)((1u << nw) - 1u);
    int32_t buf[1024] __attribute__((aligned(64)));
    cfg_q8();
    AMX_FENCE();
    for (int64_t r0 = 0; r0 < n_rows; r0 += 16) {
        const int8_t *xg = xt + r0 * ldq;
        const float *dg = dt + r0 * ldd, *sg = st ? st + r0 * ldd : NULL;
        __m512 acc[16];
        _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
        int64_t b = 0;
        for (; b + 4 <= nb; b += 4) {
            C_FENCE(buf);
            Q32_TDP(0, 4, 6, b);
            Q32_TDP(1, 5, 7, b + 1);
            Q32_TDP(2, 4, 6, b + 2);
            Q32_TDP(3, 5, 7, b + 3);
            _tile_stored(0, buf, 64);
            _tile_stored(1, buf + 256, 64);
            _tile_stored(2, buf + 512, 64);
            _tile_stored(3, buf + 768, 64);
            C_FENCE(buf);
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
                q32_float(FMIN, acc, buf + 256 * i, wp + (size_t)(b + i) * pb, dg + (b + i) * 16,
                          FMIN ? sg + (b + i) * 16 : NULL);
        }
        for (; b < nb; b++) {
            C_FENCE(buf);
            Q32_TDP(0, 4, 6, b);
            _tile_stored(0, buf, 64);
            C_FENCE(buf);
            q32_float(FMIN, acc, buf, wp + (size_t)b * pb, dg + b * 16, FMIN ? sg + b * 16 : NULL);
        }
        C_FENCE(buf);
        store_t(acc, PS_MIN((int64_t)16, n_rows - r0), y + r0 * ldy, ldy, m, stream);
    }
    _tile_release();
    if (stream) _mm_sfence();
    AMX_FENCE();
}

PS_TARGET_AMX void ps_amx_q_rows(const ps_amx_qgeom *g, const uint8_t *wp, int nw, int64_t nb,
                         const int8_t *xt, int64_t ldq, const float *dt, const float *st,
                         int64_t ldd, const int16_t *bst, int64_t ldb, int64_t n_rows, float *y,
                         int64_t ldy, float *park, bool stream) {
    const int32_t *bp = (const int32_t *)bst;
#define Q256(NP, P, BIAS, B)                                                                   \
    q256_run(NP, P, BIAS, g, wp, nw, nb, xt, ldq, dt, B, ldd, ldb, n_rows, y, ldy, park, stream)
    /* NP: min pairs per block (mink == 1); P: planes; BIAS: the one plane's bias > 0 */
    if (g->qk == 256 && g->bias >= 0) {
        if (g->mink == 1 && g->sb == 16) Q256(8, 1, false, bp); /* Q2_K */
        else if (g->mink == 1) Q256(4, 1, false, bp);
        else if (g->bias > 0) Q256(0, 1, true, bp); /* Q3_K */
        else Q256(0, 1, false, NULL);
    } else if (g->qk == 256) {
        if (g->mink == 1 && g->sb == 16) Q256(8, 2, false, bp);
        else if (g->mink == 1) Q256(4, 2, false, bp); /* Q4_K, Q5_K */
        else Q256(0, 2, false, NULL);                 /* Q6_K, IQ4_XS */
    } else if (g->mink == 2) {
        q32_run(true, g, wp, nw, nb, xt, ldq, dt, st, ldd, n_rows, y, ldy, stream);
    } else {
        q32_run(false, g, wp, nw, nb, xt, ldq, dt, NULL, ldd, n_rows, y, ldy, stream);
    }
#undef Q256
}

#else /* not x86-64: never called (ps_cpu_has_amx() is false) */

size_t ps_amx_bf16_tiles_bytes(const ps_mat *w) { return 0; }
void ps_amx_bf16_pack_to(const ps_mat *w, void *dst) {}
void *ps_amx_bf16_pack(const ps_mat *w, size_t *bytes) {
    if (bytes) *bytes = 0;
    return NULL;
}
size_t ps_amx_bf16_scratch_bytes(int64_t n_in) { return 0; }
void ps_amx_bf16_task(const ps_mat *w, int64_t j0, int nw, const uint16_t *x, int64_t ldx,
                      int64_t n_rows, float *y, int64_t ldy, void *scratch, bool stream) {}
size_t ps_amx_q_block_bytes(const ps_amx_qgeom *g) { return 0; }
size_t ps_amx_q_scratch_bytes(int64_t n_in) { return 0; }
void ps_amx_q_pack_block(const ps_amx_qgeom *g, const ps_amx_qdec *dec, uint8_t *dst) {}
void ps_amx_q_act_group(const ps_amx_qgeom *g, int8_t *q, int64_t ldq, float *d, float *s,
                        int64_t ldd, int16_t *bs, int64_t ldb, int64_t n, void *tmp) {}
void ps_amx_q_rows(const ps_amx_qgeom *g, const uint8_t *wp, int nw, int64_t nb,
                   const int8_t *xt, int64_t ldq, const float *dt, const float *st, int64_t ldd,
                   const int16_t *bst, int64_t ldb, int64_t n_rows, float *y, int64_t ldy,
                   float *park, bool stream) {}
#endif
