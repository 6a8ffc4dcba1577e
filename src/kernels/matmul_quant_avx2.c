/*
 * matmul_quant_avx2.c — the AVX2 path of the integer matmul (matmul_quant.c drives it;
 * matmul_quant_isa.h declares what it gives): the u bytes of each type's blocks in registers
 * (the same bytes as the decoders), the packing of a 16-row tile in plain C around them, and
 * the kernels, 8 lanes = 8 weight rows of the packed tile.
 *
 * vpmaddubsw + vpmaddwd stand in for VNNI's vpdpbusd: a sub-block's scale is folded into the
 * vpmaddwd that widens the vpmaddubsw pairs (as llama.cpp's AVX2 k-quant dots), and the offset
 * is taken as - off x sum_s sc_s x (sub-block activation sum), one vpmaddwd per two sub-blocks;
 * no vpmulld. With off = 128 (Q8_0, IQ4_NL, IQ4_XS), u - 128 fits int8 but u x 127 x 2 would
 * saturate vpmaddubsw, so that path takes |w| and sign(w) x x instead (the Q8_0 trick) and no
 * start value. No vpmaddubsw pair exceeds 2 x 63 x 127, and every integer sum is exact, so the
 * float part (one fma per block, one more for the mins) gives the scalar kernel's bits.
 */
#include "kernels/matmul_quant_isa.h"

#if defined(__x86_64__)

/* ---- packing a tile ---- */

/* The group layout in plain C: dst[(g * 16 + i) * 4 + c] = tmp[i][4g + c]. */
static void transpose_c(int qk, const uint8_t *tmp, uint8_t *dst) {
    for (int g = 0; g < qk / 4; g++)
        for (int i = 0; i < QT; i++) memcpy(dst + (g * QT + i) * 4, tmp + i * qk + 4 * g, 4);
}

void ps_mmq_pack_tile_avx2(const qdesc *qd, const qpack *pg, const uint8_t *w0, size_t row_bytes,
                           int nw, int64_t nb, uint8_t *wp, ufast_fn uf) {
    uint8_t tmp[QT * 256];
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *dst = wp + b * pg->pb;
        ps_mmq_pack_side(qd, pg, w0, row_bytes, nw, b, tmp, dst, uf, -2);
        transpose_c(qd->qk, tmp, dst);
    }
}

/* ---- the u bytes of one block (the same bytes as matmul_quant.c's decoders; the blocks of 32
 * share matmul_quant_isa.h's nib16 / bits32 / lut16 with the AVX-512 packers) ---- */

PS_TARGET_AVX2 static inline __m256i lo4(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(15)); }
PS_TARGET_AVX2 static inline __m256i hi4(__m256i v) {
    return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(15));
}
/* bit k of each byte, moved to bit p (per byte; 16-bit shifts never carry across the mask) */
PS_TARGET_AVX2 static inline __m256i bitk(__m256i v, int k, int p) {
    const __m256i b = _mm256_and_si256(_mm256_srli_epi16(v, k), _mm256_set1_epi8(1));
    return _mm256_slli_epi16(b, p);
}
PS_TARGET_AVX2 static inline void st32(uint8_t *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }

PS_TARGET_AVX2 static void uf_q4_0(const uint8_t *b, uint8_t *u) { st32(u, nib16(b + 2)); }
PS_TARGET_AVX2 static void uf_q4_1(const uint8_t *b, uint8_t *u) { st32(u, nib16(b + 4)); }
PS_TARGET_AVX2 static void uf_q5_0(const uint8_t *b, uint8_t *u) {
    st32(u, _mm256_or_si256(nib16(b + 6), bits32(rd32(b + 2))));
}
PS_TARGET_AVX2 static void uf_q5_1(const uint8_t *b, uint8_t *u) {
    st32(u, _mm256_or_si256(nib16(b + 8), bits32(rd32(b + 4))));
}
PS_TARGET_AVX2 static void uf_q8_0(const uint8_t *b, uint8_t *u) {
    st32(u, _mm256_xor_si256(ld32(b + 2), _mm256_set1_epi8((char)0x80)));
}
PS_TARGET_AVX2 static void uf_iq4_nl(const uint8_t *b, uint8_t *u) { st32(u, lut16(U_IQ4NL, nib16(b + 2))); }
PS_TARGET_AVX2 static void uf_mxfp4(const uint8_t *b, uint8_t *u) { st32(u, lut16(U_FP4, nib16(b + 1))); }
PS_TARGET_AVX2 static void uf_iq4_xs(const uint8_t *b, uint8_t *u) {
    for (int s = 0; s < 8; s++) st32(u + 32 * s, lut16(U_IQ4NL, nib16(b + 8 + 16 * s)));
}
PS_TARGET_AVX2 static void uf_q2_k(const uint8_t *b, uint8_t *u) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i v = ld32(b + 16 + 32 * h);
        for (int j = 0; j < 4; j++)
            st32(u + 128 * h + 32 * j, _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m3));
    }
}
PS_TARGET_AVX2 static void uf_q3_k(const uint8_t *b, uint8_t *u) {
    const __m256i m3 = _mm256_set1_epi8(3), hm = ld32(b);
    for (int h = 0; h < 2; h++) {
        const __m256i v = ld32(b + 32 + 32 * h);
        for (int j = 0; j < 4; j++)
            st32(u + 128 * h + 32 * j, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m3),
                                                       bitk(hm, 4 * h + j, 2)));
    }
}
PS_TARGET_AVX2 static void uf_q4_k(const uint8_t *b, uint8_t *u) {
    for (int c = 0; c < 4; c++) {
        const __m256i v = ld32(b + 16 + 32 * c);
        st32(u + 64 * c, lo4(v));
        st32(u + 64 * c + 32, hi4(v));
    }
}
PS_TARGET_AVX2 static void uf_q5_k(const uint8_t *b, uint8_t *u) {
    const __m256i qh = ld32(b + 16);
    for (int c = 0; c < 4; c++) {
        const __m256i v = ld32(b + 48 + 32 * c);
        st32(u + 64 * c, _mm256_or_si256(lo4(v), bitk(qh, 2 * c, 4)));
        st32(u + 64 * c + 32, _mm256_or_si256(hi4(v), bitk(qh, 2 * c + 1, 4)));
    }
}
PS_TARGET_AVX2 static void uf_q6_k(const uint8_t *b, uint8_t *u) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = ld32(b + 64 * h), l1 = ld32(b + 64 * h + 32), qh = ld32(b + 128 + 32 * h);
        uint8_t *o = u + 128 * h;
        st32(o, _mm256_or_si256(lo4(l0), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4)));
        st32(o + 32, _mm256_or_si256(lo4(l1), _mm256_slli_epi16(
                                                  _mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4)));
        st32(o + 64, _mm256_or_si256(hi4(l0), _mm256_slli_epi16(
                                                  _mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4)));
        st32(o + 96, _mm256_or_si256(hi4(l1), _mm256_slli_epi16(
                                                  _mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4)));
    }
}

ufast_fn ps_mmq_ufast(uint32_t type) {
    switch (type) {
    case PS_GGML_Q4_0: return uf_q4_0;
    case PS_GGML_Q4_1: return uf_q4_1;
    case PS_GGML_Q5_0: return uf_q5_0;
    case PS_GGML_Q5_1: return uf_q5_1;
    case PS_GGML_Q8_0: return uf_q8_0;
    case PS_GGML_Q2_K: return uf_q2_k;
    case PS_GGML_Q3_K: return uf_q3_k;
    case PS_GGML_Q4_K: return uf_q4_k;
    case PS_GGML_Q5_K: return uf_q5_k;
    case PS_GGML_Q6_K: return uf_q6_k;
    case PS_GGML_IQ4_NL: return uf_iq4_nl;
    case PS_GGML_IQ4_XS: return uf_iq4_xs;
    case PS_GGML_MXFP4: return uf_mxfp4;
    default: return NULL;
    }
}

/* ---- AVX2 kernels: 8 lanes = weight rows 8h .. 8h + 7 of the packed tile ----
 * As mk_vnni (matmul_quant_avx512.c); vpmaddubsw + vpmaddwd stand in for vpdpbusd, vpmaddwd
 * for vpdpwssd. SGN (off = 128): the weights taken back to int8 (u ^ 0x80), |w| x sign(x, w),
 * no start value. */
PS_TARGET_AVX2 static inline __attribute__((always_inline)) void mk_avx2(
    int R, int QK, int SB, bool SCALED, bool INIT, int MINK, bool SGN, const qpack *pg,
    const qslot *sl, int64_t r0, const uint8_t *wp, int h, int64_t nb, float *y, int64_t ldy,
    __m256i mask) {
    const int NS = QK / SB;
    const int64_t ldq = sl->ldq, ldi = sl->ldi, ldb = sl->ldb, ldd = sl->ldd;
    const int8_t *q = sl->q + r0 * ldq;
    const int32_t *init = sl->init + r0 * ldi;
    const int16_t *bs = sl->bs + r0 * ldb;
    const float *d = sl->d + r0 * ldd, *sx = sl->s + r0 * ldd;
    const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8((char)0x80);
    __m256 acc[4];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = wp + b * pg->pb + 32 * h;
        __m256i is[4], t[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) is[r] = _mm256_setzero_si256();
        for (int s = 0; s < NS && SCALED; s++) {
            /* the sub-block scale folded into the pair widening (as llama.cpp's AVX2 k-quant
             * dots): vpmaddwd against (sc, sc) instead of (1, 1), no vpmulld */
            const __m256i sc = _mm256_load_si256((const __m256i *)(wb + pg->sc + s * 64));
            _Pragma("GCC unroll 8") for (int g = 0; g < SB / 4; g++) {
                __m256i wv = _mm256_load_si256((const __m256i *)(wb + (s * (SB / 4) + g) * 64));
                __m256i ws = wv;
                if (SGN) {
                    ws = _mm256_xor_si256(wv, flip);
                    wv = _mm256_abs_epi8(ws);
                }
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                    int32_t xv;
                    memcpy(&xv, q + r * ldq + b * QK + s * SB + 4 * g, 4);
                    __m256i bx = _mm256_set1_epi32(xv);
                    if (SGN) bx = _mm256_sign_epi8(bx, ws);
                    is[r] = _mm256_add_epi32(is[r],
                                             _mm256_madd_epi16(_mm256_maddubs_epi16(wv, bx), sc));
                }
            }
        }
        if (SCALED && INIT && !SGN) { /* - off x sum_s sc_s x (activation sum of s), exact */
            _Pragma("GCC unroll 8") for (int p = 0; p < NS / 2; p++) {
                const __m256i mv = _mm256_load_si256((const __m256i *)(wb + pg->mn + p * 64));
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                    int32_t xv;
                    memcpy(&xv, bs + r * ldb + b * NS + 2 * p, 4);
                    is[r] = _mm256_sub_epi32(is[r], _mm256_madd_epi16(mv, _mm256_set1_epi32(xv)));
                }
            }
        }
        for (int s = 0; s < NS && !SCALED; s++) {
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
                t[r] = INIT && !SGN ? _mm256_set1_epi32(init[r * ldi + b * NS + s])
                                    : _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int g = 0; g < SB / 4; g++) {
                __m256i wv = _mm256_load_si256((const __m256i *)(wb + (s * (SB / 4) + g) * 64));
                __m256i ws = wv;
                if (SGN) {
                    ws = _mm256_xor_si256(wv, flip); /* u - 128 = w, as int8 */
                    wv = _mm256_abs_epi8(ws);
                }
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                    int32_t xv;
                    memcpy(&xv, q + r * ldq + b * QK + s * SB + 4 * g, 4);
                    __m256i bx = _mm256_set1_epi32(xv);
                    if (SGN) bx = _mm256_sign_epi8(bx, ws);
                    t[r] = _mm256_add_epi32(
                        t[r], _mm256_madd_epi16(_mm256_maddubs_epi16(wv, bx), ones));
                }
            }
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) is[r] = t[r];
        }
        const __m256 dw = _mm256_load_ps((const float *)(wb + pg->dw));
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[r]),
                                     _mm256_mul_ps(dw, _mm256_set1_ps(d[r * ldd + b])), acc[r]);
        if (MINK == 1) {
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) t[r] = _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int p = 0; p < NS / 2; p++) {
                const __m256i mv = _mm256_load_si256((const __m256i *)(wb + pg->mn + p * 64));
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                    int32_t xv;
                    memcpy(&xv, bs + r * ldb + b * NS + 2 * p, 4);
                    t[r] = _mm256_add_epi32(t[r], _mm256_madd_epi16(mv, _mm256_set1_epi32(xv)));
                }
            }
            const __m256 dm = _mm256_load_ps((const float *)(wb + pg->dm));
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
                acc[r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(t[r]),
                                          _mm256_mul_ps(dm, _mm256_set1_ps(d[r * ldd + b])),
                                          acc[r]);
        } else if (MINK == 2) {
            const __m256 dm = _mm256_load_ps((const float *)(wb + pg->dm));
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
                acc[r] = _mm256_fmadd_ps(dm, _mm256_set1_ps(sx[r * ldd + b]), acc[r]);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) _mm256_maskstore_ps(y + r * ldy, mask, acc[r]);
}

#define AVX2_MK(NAME, QK, SB, SC, IN, MK, SG)                                                  \
    PS_TARGET_AVX2 static void NAME(const qpack *pg, const qslot *sl, int64_t nr, const uint8_t *wp,   \
                            int h, int64_t nb, float *y, int64_t ldy, int nl) {                \
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nl),                         \
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));    \
        int64_t r = 0;                                                                         \
        for (; r + 4 <= nr; r += 4) mk_avx2(4, QK, SB, SC, IN, MK, SG, pg, sl, r, wp, h, nb, y + r * ldy, ldy, mask); \
        for (; r < nr; r++) mk_avx2(1, QK, SB, SC, IN, MK, SG, pg, sl, r, wp, h, nb, y + r * ldy, ldy, mask); \
    }
AVX2_MK(avx2_k32_min, 256, 32, true, false, 1, false)  /* Q4_K, Q5_K */
AVX2_MK(avx2_k32_sgn, 256, 32, true, false, 0, true)   /* IQ4_XS */
AVX2_MK(avx2_k16_min, 256, 16, true, false, 1, false)  /* Q2_K */
AVX2_MK(avx2_k16_off, 256, 16, true, true, 0, false)   /* Q3_K, Q6_K */
AVX2_MK(avx2_b32_off, 32, 32, false, true, 0, false)   /* Q4_0, Q5_0, MXFP4 */
AVX2_MK(avx2_b32_sgn, 32, 32, false, false, 0, true)   /* Q8_0, IQ4_NL */
AVX2_MK(avx2_b32_fmin, 32, 32, false, false, 2, false) /* Q4_1, Q5_1 */

avx2_tile_fn ps_mmq_avx2_fn(const qdesc *qd) {
    const bool sg = qd->off == 128;
    if (qd->qk == 32) return qd->min == MIN_FLOAT ? avx2_b32_fmin : sg ? avx2_b32_sgn : avx2_b32_off;
    if (qd->sb == 32) return qd->min == MIN_INT ? avx2_k32_min : avx2_k32_sgn;
    return qd->min == MIN_INT ? avx2_k16_min : avx2_k16_off;
}

#endif /* __x86_64__ */
