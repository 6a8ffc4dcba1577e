/*
 * quantize.c — float32 rows -> rows of every weight type, for the models gen-model writes.
 *
 * These are plain round-to-nearest quantisers, not llama.cpp's (which search scales that
 * minimise a weighted error, and for IQ4 and MXFP4 the best code per weight with a refined
 * scale): per block or sub-block the scale (and min) comes from the range of its weights, the
 * sub-block scales are themselves rounded to their integer width against a super-block scale
 * stored as f16, and every weight is rounded to the nearest code under the scale as stored.
 * The bits they write are laid out exactly as ggml lays them out (qblocks.h, dequant.c), so any
 * reader of GGUF decodes them; only the choice of codes differs from llama.cpp's quantiser.
 * The legacy types Q4_0 .. Q5_1 and Q8_0 follow ggml's reference quantisers (which are
 * round-to-nearest already).
 */
#include "kernels/quantize.h"
#include "base/impl.h"
#include "kernels/dequant.h"

#include <math.h>

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }
/* round half away from zero, clamped; NaN -> lo */
static int rnd(float v, int lo, int hi) {
    if (!(v == v)) return lo;
    if (v < (float)lo) return lo;
    if (v > (float)hi) return hi;
    return clampi((int)roundf(v), lo, hi);
}
static float f16r(float v) { return ps_f16_to_f32(ps_f32_to_f16(v)); }

void ps_quantize_f32(const float *x, void *row, int64_t n) { memcpy(row, x, (size_t)n * 4); }

void ps_quantize_f16(const float *x, void *row, int64_t n) {
    uint8_t *p = row;
    for (int64_t i = 0; i < n; i++) {
        const uint16_t h = ps_f32_to_f16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

void ps_quantize_bf16(const float *x, void *row, int64_t n) {
    uint8_t *p = row;
    for (int64_t i = 0; i < n; i++) {
        const uint16_t h = ps_f32_to_bf16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

void ps_quant_f32_to_q8_0(const float *x, ps_block_q8_0 *out, int64_t n) {
    for (int64_t b = 0; b < n / PS_Q8_0_BLOCK; b++) {
        const float *xb = x + b * PS_Q8_0_BLOCK;
        float amax = 0.0f;
        for (int j = 0; j < PS_Q8_0_BLOCK; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = ps_f32_to_f16(d);
        for (int j = 0; j < PS_Q8_0_BLOCK; j++) out[b].qs[j] = (int8_t)roundf(xb[j] * id);
    }
}

void ps_quantize_q8_0(const float *x, void *row, int64_t n) {
    ps_quant_f32_to_q8_0(x, row, n);
}

/* the element of largest magnitude (first one on ties), with its sign */
static float signed_max(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

void ps_quantize_q4_0(const float *x, void *row, int64_t n) {
    ps_block_q4_0 *y = row;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        const float d = signed_max(x, 32) / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = ps_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            const int a = PS_MIN(15, (int8_t)(x[j] * id + 8.5f));
            const int b = PS_MIN(15, (int8_t)(x[j + 16] * id + 8.5f));
            y[i].qs[j] = (uint8_t)(a | b << 4);
        }
    }
}

static void min_max(const float *x, int n, float *lo, float *hi) {
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int j = 0; j < n; j++) {
        if (x[j] < *lo) *lo = x[j];
        if (x[j] > *hi) *hi = x[j];
    }
}

void ps_quantize_q4_1(const float *x, void *row, int64_t n) {
    ps_block_q4_1 *y = row;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float lo, hi;
        min_max(x, 32, &lo, &hi);
        const float d = (hi - lo) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = ps_f32_to_f16(d);
        y[i].m = ps_f32_to_f16(lo);
        for (int j = 0; j < 16; j++) {
            const int a = PS_MIN(15, (int8_t)((x[j] - lo) * id + 0.5f));
            const int b = PS_MIN(15, (int8_t)((x[j + 16] - lo) * id + 0.5f));
            y[i].qs[j] = (uint8_t)(a | b << 4);
        }
    }
}

static void put32(uint8_t *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> (8 * k));
}

void ps_quantize_q5_0(const float *x, void *row, int64_t n) {
    ps_block_q5_0 *y = row;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        const float d = signed_max(x, 32) / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = ps_f32_to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const int a = PS_MIN(31, (int8_t)(x[j] * id + 16.5f));
            const int b = PS_MIN(31, (int8_t)(x[j + 16] * id + 16.5f));
            y[i].qs[j] = (uint8_t)((a & 15) | (b & 15) << 4);
            qh |= (uint32_t)(a >> 4) << j | (uint32_t)(b >> 4) << (j + 16);
        }
        put32(y[i].qh, qh);
    }
}

void ps_quantize_q5_1(const float *x, void *row, int64_t n) {
    ps_block_q5_1 *y = row;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float lo, hi;
        min_max(x, 32, &lo, &hi);
        const float d = (hi - lo) / 31.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = ps_f32_to_f16(d);
        y[i].m = ps_f32_to_f16(lo);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const int a = PS_MIN(31, (int8_t)((x[j] - lo) * id + 0.5f));
            const int b = PS_MIN(31, (int8_t)((x[j + 16] - lo) * id + 0.5f));
            y[i].qs[j] = (uint8_t)((a & 15) | (b & 15) << 4);
            qh |= (uint32_t)(a >> 4) << j | (uint32_t)(b >> 4) << (j + 16);
        }
        put32(y[i].qh, qh);
    }
}

/* nearest of 16 levels (v - lev[k] smallest; first on ties) */
static int nearest_level(const int8_t lev[16], float v) {
    int best = 0;
    float err = fabsf(v - (float)lev[0]);
    for (int k = 1; k < 16; k++) {
        const float e = fabsf(v - (float)lev[k]);
        if (e < err) {
            err = e;
            best = k;
        }
    }
    return best;
}

void ps_quantize_iq4_nl(const float *x, void *row, int64_t n) {
    ps_block_iq4_nl *y = row;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        const float d = f16r(signed_max(x, 32) / -127.0f), id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = ps_f32_to_f16(d);
        for (int j = 0; j < 16; j++)
            y[i].qs[j] = (uint8_t)(nearest_level(ps_kvalues_iq4nl, x[j] * id) |
                                   nearest_level(ps_kvalues_iq4nl, x[j + 16] * id) << 4);
    }
}

void ps_quantize_mxfp4(const float *x, void *row, int64_t n) {
    ps_block_mxfp4 *y = row;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        const float amax = fabsf(signed_max(x, 32));
        /* the largest code (12, doubled 6) times 2^(e - 128) covers amax */
        const int e = amax > 0.0f ? clampi((int)floorf(log2f(amax)) - 2 + 127, 0, 254) : 0;
        y[i].e = (uint8_t)e;
        const float id = 1.0f / ps_e8m0_half_to_f32((uint8_t)e);
        for (int j = 0; j < 16; j++)
            y[i].qs[j] = (uint8_t)(nearest_level(ps_kvalues_mxfp4, x[j] * id) |
                                   nearest_level(ps_kvalues_mxfp4, x[j + 16] * id) << 4);
    }
}

/* ---- k-quants ---- */

/* Sub-block scales s[k] >= 0 and mins m[k] >= 0 (x ~ s * q - m): a super-scale d = max / qmax
 * stored as f16, codes round(s / d) in 0..qmax. */
static float super_scale(const float *s, int n, int qmax, uint8_t *codes) {
    float mx = 0.0f;
    for (int k = 0; k < n; k++) mx = fmaxf(mx, s[k]);
    const float d = f16r(mx / (float)qmax), id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int k = 0; k < n; k++) codes[k] = (uint8_t)rnd(s[k] * id, 0, qmax);
    return d;
}

/* Asymmetric sub-blocks of `sub` weights: scale = (max - min(0, lo)) / qmax, min = -min(0, lo),
 * both coded against super-scales with `sbits` bits; returns the weight codes in q. */
static void asym_k(const float *x, int nsub, int sub, int qmax, int sbits, uint16_t *dd,
                   uint16_t *dm, uint8_t *sc, uint8_t *mc, uint8_t *q) {
    float s[16], m[16];
    for (int k = 0; k < nsub; k++) {
        float lo, hi;
        min_max(x + k * sub, sub, &lo, &hi);
        lo = fminf(lo, 0.0f);
        hi = fmaxf(hi, lo);
        s[k] = (hi - lo) / (float)qmax;
        m[k] = -lo;
    }
    const int smax = (1 << sbits) - 1;
    const float d = super_scale(s, nsub, smax, sc), dmin = super_scale(m, nsub, smax, mc);
    *dd = ps_f32_to_f16(d);
    *dm = ps_f32_to_f16(dmin);
    for (int k = 0; k < nsub; k++) {
        const float dl = d * (float)sc[k], ml = dmin * (float)mc[k];
        const float id = dl != 0.0f ? 1.0f / dl : 0.0f;
        for (int j = 0; j < sub; j++) q[k * sub + j] = (uint8_t)rnd((x[k * sub + j] + ml) * id, 0, qmax);
    }
}

/* Symmetric sub-blocks: per sub-block the signed largest weight maps to code qlo (< 0), the
 * signed sub-scales are coded in slo..shi against an f16 super-scale; codes in qlo..qhi. */
static float sym_k(const float *x, int nsub, int sub, int qlo, int qhi, int slo, int shi,
                   int8_t *sc, int8_t *q) {
    float s[16], amax = 0.0f;
    for (int k = 0; k < nsub; k++) {
        s[k] = signed_max(x + k * sub, sub) / (float)qlo;
        amax = fmaxf(amax, fabsf(s[k]));
    }
    const float d = f16r(amax / (float)-slo), id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int k = 0; k < nsub; k++) {
        sc[k] = (int8_t)rnd(s[k] * id, slo, shi);
        const float dl = d * (float)sc[k], il = dl != 0.0f ? 1.0f / dl : 0.0f;
        for (int j = 0; j < sub; j++) q[k * sub + j] = (int8_t)rnd(x[k * sub + j] * il, qlo, qhi);
    }
    return d;
}

void ps_quantize_q2_k(const float *x, void *row, int64_t n) {
    ps_block_q2_k *y = row;
    for (int64_t i = 0; i < n / PS_QK_K; i++, x += PS_QK_K) {
        uint8_t sc[16], mc[16], q[PS_QK_K];
        asym_k(x, 16, 16, 3, 4, &y[i].d, &y[i].dmin, sc, mc, q);
        for (int k = 0; k < 16; k++) y[i].scales[k] = (uint8_t)(sc[k] | mc[k] << 4);
        memset(y[i].qs, 0, sizeof y[i].qs);
        for (int e = 0; e < PS_QK_K; e++)
            y[i].qs[(e / 128) * 32 + e % 32] |= (uint8_t)(q[e] << (2 * ((e % 128) / 32)));
    }
}

void ps_quantize_q3_k(const float *x, void *row, int64_t n) {
    ps_block_q3_k *y = row;
    for (int64_t i = 0; i < n / PS_QK_K; i++, x += PS_QK_K) {
        int8_t sc[16], q[PS_QK_K];
        y[i].d = ps_f32_to_f16(sym_k(x, 16, 16, -4, 3, -32, 31, sc, q));
        memset(y[i].scales, 0, sizeof y[i].scales);
        for (int k = 0; k < 16; k++) {
            const int v = sc[k] + 32;
            y[i].scales[k % 8] |= (uint8_t)((v & 15) << (k < 8 ? 0 : 4));
            y[i].scales[8 + k % 4] |= (uint8_t)((v >> 4) << (2 * (k / 4)));
        }
        memset(y[i].qs, 0, sizeof y[i].qs);
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        for (int e = 0; e < PS_QK_K; e++) {
            const int v = q[e] + 4;
            y[i].qs[(e / 128) * 32 + e % 32] |= (uint8_t)((v & 3) << (2 * ((e % 128) / 32)));
            if (v & 4) y[i].hmask[e % 32] |= (uint8_t)(1 << (e / 32));
        }
    }
}

/* the 12-byte packing of eight 6-bit scales and mins (Q4_K, Q5_K) */
static void pack_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t out[12]) {
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
        out[j + 4] = (uint8_t)((m[j] & 63) | (m[j + 4] >> 4) << 6);
        out[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

void ps_quantize_q4_k(const float *x, void *row, int64_t n) {
    ps_block_q4_k *y = row;
    for (int64_t i = 0; i < n / PS_QK_K; i++, x += PS_QK_K) {
        uint8_t sc[8], mc[8], q[PS_QK_K];
        asym_k(x, 8, 32, 15, 6, &y[i].d, &y[i].dmin, sc, mc, q);
        pack_k4(sc, mc, y[i].scales);
        memset(y[i].qs, 0, sizeof y[i].qs);
        for (int e = 0; e < PS_QK_K; e++)
            y[i].qs[(e / 64) * 32 + e % 32] |= (uint8_t)(q[e] << (e % 64 < 32 ? 0 : 4));
    }
}

void ps_quantize_q5_k(const float *x, void *row, int64_t n) {
    ps_block_q5_k *y = row;
    for (int64_t i = 0; i < n / PS_QK_K; i++, x += PS_QK_K) {
        uint8_t sc[8], mc[8], q[PS_QK_K];
        asym_k(x, 8, 32, 31, 6, &y[i].d, &y[i].dmin, sc, mc, q);
        pack_k4(sc, mc, y[i].scales);
        memset(y[i].qs, 0, sizeof y[i].qs);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int e = 0; e < PS_QK_K; e++) {
            y[i].qs[(e / 64) * 32 + e % 32] |= (uint8_t)((q[e] & 15) << (e % 64 < 32 ? 0 : 4));
            if (q[e] & 16) y[i].qh[e % 32] |= (uint8_t)(1 << (e / 32));
        }
    }
}

void ps_quantize_q6_k(const float *x, void *row, int64_t n) {
    ps_block_q6_k *y = row;
    for (int64_t i = 0; i < n / PS_QK_K; i++, x += PS_QK_K) {
        int8_t q[PS_QK_K];
        y[i].d = ps_f32_to_f16(sym_k(x, 16, 16, -32, 31, -128, 127, y[i].scales, q));
        memset(y[i].ql, 0, sizeof y[i].ql);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int e = 0; e < PS_QK_K; e++) {
            const int v = q[e] + 32, h = e / 128, g = (e % 128) / 32, l = e % 32;
            y[i].ql[h * 64 + l + 32 * (g & 1)] |= (uint8_t)((v & 15) << (g >= 2 ? 4 : 0));
            y[i].qh[h * 32 + l] |= (uint8_t)((v >> 4) << (2 * g));
        }
    }
}

void ps_quantize_iq4_xs(const float *x, void *row, int64_t n) {
    ps_block_iq4_xs *y = row;
    for (int64_t i = 0; i < n / PS_QK_K; i++, x += PS_QK_K) {
        float s[8], amax = 0.0f;
        for (int k = 0; k < 8; k++) {
            s[k] = signed_max(x + 32 * k, 32) / -127.0f;
            amax = fmaxf(amax, fabsf(s[k]));
        }
        const float d = f16r(amax / 32.0f), id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = ps_f32_to_f16(d);
        y[i].scales_h = 0;
        memset(y[i].scales_l, 0, sizeof y[i].scales_l);
        for (int k = 0; k < 8; k++) {
            const int ls = rnd(s[k] * id, -32, 31) + 32;
            y[i].scales_l[k / 2] |= (uint8_t)((ls & 15) << (4 * (k % 2)));
            y[i].scales_h |= (uint16_t)((ls >> 4) << (2 * k));
            const float dl = d * (float)(ls - 32), il = dl != 0.0f ? 1.0f / dl : 0.0f;
            for (int j = 0; j < 16; j++)
                y[i].qs[16 * k + j] =
                    (uint8_t)(nearest_level(ps_kvalues_iq4nl, x[32 * k + j] * il) |
                              nearest_level(ps_kvalues_iq4nl, x[32 * k + j + 16] * il) << 4);
        }
    }
}
