/*
 * test_matmul_quant.c — the integer kernels of matmul_quant.c and the activation quantisers of
 * qact.c, for every block type (Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL,
 * IQ4_XS, MXFP4) x every ISA the CPU has (scalar, AVX2, AVX-512 VNNI).
 *
 *   - Q8_K / Q8_1 quantisers: every ISA writes the reference's bytes (random rows, rows of exact
 *     ties k + 0.5, rows whose largest magnitude appears with both signs, zeros, NaN / inf,
 *     tiny values); the reference itself against the definition (|q| <= 127, bsums are the sums,
 *     |x - d q| <= |d| / 2, the max element maps to -127 x sign).
 *   - decoding: every weight decoded by the kernels' decoder, put through ggml's dequantisation
 *     formula for its type (written here independently, from the block layout), equals this
 *     file's own dequantisation of the raw block, bit for bit.
 *   - kernels: ps_matmul (every ISA, and the AMX tiles where the CPU has them; 1 and 2 and 7
 *     threads, m = 1, 3, 17, 256, 300 — 300 is
 *     two slots / passes) is bitwise equal to ps_mmq_scalar, on random blocks (random bytes,
 *     sane scales) mixed with extreme blocks (all bits set / clear: the largest sub-block sums
 *     and the vpmaddubsw saturation edge) and tile tails (n = 37, 16, 5); strided x / y never
 *     write outside a row. The scalar kernel is within 1e-5 x sum |x w| of a double reference
 *     built from this file's dequantisation and the reference-quantised activations (a missing
 *     or doubled sub-block is ~1e-2 there). A NaN activation makes exactly its row NaN.
 *     AMX (tdpbssd / tdpbusd, matmul_amx.c) must equal the scalar kernel and the AVX-512 VNNI
 *     result bitwise, with 1, 2 and 7 threads; without AMX the test says "AMX not available
 *     on this CPU" and runs the rest.
 *   - grouped calls: ps_matmul_group equals ps_matmul per item bitwise (test_group).
 *   - the in-register Q4_K / Q6_K packers equal the plain row-by-row packer bitwise, plain and
 *     grouped, tile tails, 1 and 2 threads (test_pack_plain).
 */
#include "check.h"
#include "base/impl.h"
#include "kernels/matmul.h"
#include "kernels/matmul_quant.h"
#include "kernels/qact.h"
#include "kernels/quant.h"
#include "base/testhooks.h"

#include <float.h>
#include <math.h>

/* the ISAs, then AVX-512 with the AMX tiles (mode 3) */
static const ps_isa ISAS[] = {PS_ISA_SCALAR, PS_ISA_AVX2, PS_ISA_AVX512, PS_ISA_AVX512};
static bool mode_ok(size_t i) { return ps_isa_supported(ISAS[i]) && (i < 3 || ps_cpu_has_amx()); }
static const char *mode_name(size_t i) { return i == 3 ? "amx" : ps_isa_name(ISAS[i]); }

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t urand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float frand(void) { return (float)((double)urand() / 4294967296.0 * 2.0 - 1.0); }

typedef struct {
    uint32_t type;
    const char *name;
    int qk, bytes;
    int f16[2]; /* byte offsets of the f16 scales (-1: none); MXFP4: e at 0 */
} tinfo;

static const tinfo TYPES[] = {
    {PS_GGML_Q4_0, "q4_0", 32, 18, {0, -1}},   {PS_GGML_Q4_1, "q4_1", 32, 20, {0, 2}},
    {PS_GGML_Q5_0, "q5_0", 32, 22, {0, -1}},   {PS_GGML_Q5_1, "q5_1", 32, 24, {0, 2}},
    {PS_GGML_Q2_K, "q2_k", 256, 84, {80, 82}}, {PS_GGML_Q3_K, "q3_k", 256, 110, {108, -1}},
    {PS_GGML_Q4_K, "q4_k", 256, 144, {0, 2}},  {PS_GGML_Q5_K, "q5_k", 256, 176, {0, 2}},
    {PS_GGML_Q6_K, "q6_k", 256, 210, {208, -1}}, {20, "iq4_nl", 32, 18, {0, -1}},
    {23, "iq4_xs", 256, 136, {0, -1}},         {39, "mxfp4", 32, 17, {-1, -1}},
};

/* ---- this file's dequantisation, ggml's formulas on the raw block ---- */

static const int8_t KV_NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};
static const int8_t KV_FP4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static float h2f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return ps_f16_to_f32(h);
}

static void k4_scale(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

static void dequant(const tinfo *t, const uint8_t *b, float *y) {
    switch (t->type) {
    case PS_GGML_Q4_0:
    case PS_GGML_Q4_1: {
        const bool one = t->type == PS_GGML_Q4_1;
        const float d = h2f(b), m = one ? h2f(b + 2) : 0.0f;
        const uint8_t *q = b + (one ? 4 : 2);
        for (int j = 0; j < 16; j++) {
            if (one) {
                y[j] = (q[j] & 15) * d + m;
                y[j + 16] = (q[j] >> 4) * d + m;
            } else {
                y[j] = ((q[j] & 15) - 8) * d;
                y[j + 16] = ((q[j] >> 4) - 8) * d;
            }
        }
        break;
    }
    case PS_GGML_Q5_0:
    case PS_GGML_Q5_1: {
        const bool one = t->type == PS_GGML_Q5_1;
        const float d = h2f(b), m = one ? h2f(b + 2) : 0.0f;
        uint32_t qh;
        memcpy(&qh, b + (one ? 4 : 2), 4);
        const uint8_t *q = b + (one ? 8 : 6);
        for (int j = 0; j < 16; j++) {
            const int x0 = (q[j] & 15) | (((qh >> j) << 4) & 0x10);
            const int x1 = (q[j] >> 4) | ((qh >> (j + 12)) & 0x10);
            if (one) {
                y[j] = x0 * d + m;
                y[j + 16] = x1 * d + m;
            } else {
                y[j] = (x0 - 16) * d;
                y[j + 16] = (x1 - 16) * d;
            }
        }
        break;
    }
    case 20: {
        const float d = h2f(b);
        for (int j = 0; j < 16; j++) {
            y[j] = d * KV_NL[b[2 + j] & 15];
            y[j + 16] = d * KV_NL[b[2 + j] >> 4];
        }
        break;
    }
    case 39: {
        const float d = ldexpf(1.0f, (int)b[0] - 128);
        for (int j = 0; j < 16; j++) {
            y[j] = KV_FP4[b[1 + j] & 15] * d;
            y[j + 16] = KV_FP4[b[1 + j] >> 4] * d;
        }
        break;
    }
    case PS_GGML_Q2_K: {
        const float d = h2f(b + 80), dmin = h2f(b + 82);
        const uint8_t *q = b + 16;
        int is = 0;
        for (int n = 0; n < 256; n += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    const uint8_t sc = b[is++];
                    const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * ((q[16 * half + l] >> shift) & 3) - ml;
                }
            }
            q += 32;
        }
        break;
    }
    case PS_GGML_Q3_K: {
        const float d = h2f(b + 108);
        const uint8_t *hm = b, *q = b + 32, *s = b + 96;
        int8_t sc[16];
        for (int j = 0; j < 16; j++) { /* 4 low bits, then 2 high bits from bytes 8..11 */
            const int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
            const int hi = (s[8 + (j % 4)] >> (2 * (j / 4))) & 3;
            sc[j] = (int8_t)((lo | (hi << 4)) - 32);
        }
        int is = 0;
        uint8_t m = 1;
        for (int n = 0; n < 256; n += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    const float dl = d * sc[is++];
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *y++ = dl * ((int8_t)((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
                m <<= 1;
            }
            q += 32;
        }
        break;
    }
    case PS_GGML_Q4_K:
    case PS_GGML_Q5_K: {
        const bool five = t->type == PS_GGML_Q5_K;
        const float d = h2f(b), dmin = h2f(b + 2);
        const uint8_t *s = b + 4, *qh = b + 16, *q = b + (five ? 48 : 16);
        for (int c = 0; c < 4; c++) {
            int sc, mn;
            k4_scale(2 * c, s, &sc, &mn);
            const float d1 = d * sc, m1 = dmin * mn;
            k4_scale(2 * c + 1, s, &sc, &mn);
            const float d2 = d * sc, m2 = dmin * mn;
            for (int l = 0; l < 32; l++) {
                const int h1 = five && (qh[l] & (1 << (2 * c))) ? 16 : 0;
                const int h2 = five && (qh[l] & (2 << (2 * c))) ? 16 : 0;
                y[64 * c + l] = d1 * ((q[32 * c + l] & 15) + h1) - m1;
                y[64 * c + 32 + l] = d2 * ((q[32 * c + l] >> 4) + h2) - m2;
            }
        }
        break;
    }
    case PS_GGML_Q6_K: {
        const float d = h2f(b + 208);
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int n = 0; n < 2; n++) {
            const uint8_t *ql = b + 64 * n, *qh = b + 128 + 32 * n;
            for (int l = 0; l < 32; l++) {
                const int is = 8 * n + l / 16;
                const int8_t q1 = (int8_t)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[128 * n + l] = d * sc[is + 0] * q1;
                y[128 * n + l + 32] = d * sc[is + 2] * q2;
                y[128 * n + l + 64] = d * sc[is + 4] * q3;
                y[128 * n + l + 96] = d * sc[is + 6] * q4;
            }
        }
        break;
    }
    case 23: {
        const float d = h2f(b);
        uint16_t sh;
        memcpy(&sh, b + 2, 2);
        for (int ib = 0; ib < 8; ib++) {
            const int ls = ((b[4 + ib / 2] >> 4 * (ib % 2)) & 0xf) | (((sh >> 2 * ib) & 3) << 4);
            const float dl = d * (ls - 32);
            const uint8_t *q = b + 8 + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[32 * ib + j] = dl * KV_NL[q[j] & 0xf];
                y[32 * ib + 16 + j] = dl * KV_NL[q[j] >> 4];
            }
        }
        break;
    }
    default: assert(0);
    }
}

/* The same value from the kernels' decoded integers, by ggml's formula per type. */
static void from_decoded(const tinfo *t, const uint8_t *u, const int32_t *sc, const int16_t *mn,
                         float dw, float dm, int off, int sb, float *y) {
    for (int k = 0; k < t->qk; k++) {
        const int w = (int)u[k] - off, s = k / sb;
        switch (t->type) {
        case PS_GGML_Q4_1:
        case PS_GGML_Q5_1: y[k] = w * dw + dm; break;
        case PS_GGML_Q2_K:
        case PS_GGML_Q4_K:
        case PS_GGML_Q5_K: y[k] = (dw * sc[s]) * w - dm * mn[s]; break;
        case PS_GGML_Q3_K:
        case 23: y[k] = (dw * sc[s]) * w; break;
        case PS_GGML_Q6_K: y[k] = dw * sc[s] * w; break;
        case 20: y[k] = dw * w; break;
        default: y[k] = w * dw; break; /* Q4_0, Q5_0, MXFP4 */
        }
    }
}

/* n rows of k weights: random bytes, scales in a sane range; every 7th block all bits set or
 * clear (the largest sums and the saturation edge). */
static uint8_t *make_rows(const tinfo *t, int64_t n, int64_t k, size_t *row_bytes) {
    const int64_t nb = k / t->qk;
    const size_t rb = (size_t)(nb * t->bytes);
    uint8_t *w = malloc(rb * (size_t)n);
    for (int64_t j = 0; j < n; j++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *blk = w + (size_t)j * rb + (size_t)(b * t->bytes);
            const int64_t id = j * nb + b;
            for (int i = 0; i < t->bytes; i++)
                blk[i] = id % 7 == 3 ? 0xFF : id % 7 == 5 ? 0x00 : (uint8_t)urand();
            for (int f = 0; f < 2; f++)
                if (t->f16[f] >= 0) {
                    const float v = (0.5f + 0.5f * fabsf(frand())) * (f ? 0.004f : 0.01f);
                    const uint16_t h = ps_f32_to_f16(urand() % 4 == 0 ? -v : v);
                    memcpy(blk + t->f16[f], &h, 2);
                }
            if (t->type == 39) blk[0] = (uint8_t)(118 + urand() % 8);
        }
    *row_bytes = rb;
    return w;
}

/* The matrix of make_rows(t, n, k): *wdata owns its bytes. */
static ps_mat test_mat(const tinfo *t, int64_t n, int64_t k, void **wdata) {
    ps_mat w = {0};
    *wdata = make_rows(t, n, k, &w.row_bytes);
    w.data = *wdata;
    w.type = t->type;
    w.n_in = k;
    w.n_out = n;
    return w;
}

/* Up to 40 grouped items of w, of 1, 2, .. 12, 1, .. rows, over the first rows of x (k
 * inputs, at most M rows), item i's output at y + (its first row) x n when y is given. Returns
 * the item count; *rows: the rows they cover. */
static int32_t few_row_items(ps_mm_item *items, ps_mat w, const float *x, int64_t k, int64_t M,
                             float *y, int64_t n, int64_t *rows) {
    int64_t r = 0;
    int32_t ni = 0;
    for (; ni < 40 && r < M; ni++) {
        const int64_t nr = PS_MIN(1 + ni % 12, M - r);
        items[ni] = (ps_mm_item){x + r * k, k, nr, 1, {w}, {y ? y + r * n : NULL}, n};
        r += nr;
    }
    *rows = r;
    return ni;
}

static void test_decode(void) {
    for (size_t ti = 0; ti < PS_ARRAY_LEN(TYPES); ti++) {
        const tinfo *t = &TYPES[ti];
        size_t rb;
        uint8_t *w = make_rows(t, 4, 256 * 4, &rb);
        const int64_t nb = 4 * (256 * 4 / t->qk);
        int64_t bad = 0;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = w + (size_t)(b * t->bytes);
            uint8_t u[256];
            int32_t sc[16];
            int16_t mn[16];
            float dw, dm, y1[256], y2[256];
            int off, sb;
            CHECK(ps_mmq_decode(t->type, blk, u, sc, mn, &dw, &dm, &off, &sb) == t->qk);
            dequant(t, blk, y1);
            from_decoded(t, u, sc, mn, dw, dm, off, sb, y2);
            bad += memcmp(y1, y2, sizeof(float) * (size_t)t->qk) != 0;
        }
        CHECKF(bad == 0, "%s: %lld blocks decode differently from the dequantisation", t->name,
               (long long)bad);
        free(w);
    }
}

/* ---- activation quantisers ---- */

static void fill_row(float *x, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) {
        switch (kind) {
        case 0: x[i] = frand() * (i % 97 == 0 ? 40.0f : 1.0f); break;
        case 1: x[i] = (float)((int)(urand() % 255) - 127) + 0.5f; break; /* ties after scaling */
        case 2: x[i] = frand() * 1e-30f; break;
        default: x[i] = 0.0f; break;
        }
    }
}

static void test_q8k(void) {
    const int64_t n = 256 * 5;
    float *x = malloc(sizeof(float) * (size_t)n);
    int8_t q0[256 * 5], q1[256 * 5];
    int16_t s0[80], s1[80];
    float d0[5], d1[5];
    for (int kind = 0; kind < 5; kind++) {
        fill_row(x, n, kind < 4 ? kind : 0);
        if (kind == 1) { /* ties: max exactly 127.5 -> iscale -127 / 127.5; and some x = +-max */
            x[3] = 127.5f;
            x[700] = -127.5f;
            x[256 + 9] = -127.5f;
            x[256 + 10] = 127.5f;
        }
        if (kind == 4) {
            x[5] = NAN;         /* block 0 */
            x[256 + 7] = INFINITY; /* block 1 */
            for (int i = 512; i < 768; i++) x[i] = 0.0f; /* block 2 */
            for (int i = 768; i < 1024; i++) x[i] = frand() * 1e-38f; /* block 3: iscale inf */
        }
        ps_qact_q8_K_ref(x, n, q0, s0, d0);
        /* the reference against the definition */
        bool ok = true;
        for (int b = 0; b < 5; b++) {
            const float *xb = x + 256 * b;
            bool fin = true;
            float amax = 0;
            int first = 0;
            for (int j = 0; j < 256; j++) {
                if (!isfinite(xb[j])) fin = false;
                else if (fabsf(xb[j]) > amax) {
                    amax = fabsf(xb[j]);
                    first = j;
                }
            }
            if (!fin) {
                ok &= isnan(d0[b]);
                continue;
            }
            if (amax == 0) {
                ok &= d0[b] == 0;
                continue;
            }
            if (!isfinite(-127.0f / xb[first])) continue; /* llama.cpp's overflowed case */
            ok &= q0[256 * b + first] == -127;
            for (int j = 0; j < 256; j++) {
                ok &= q0[256 * b + j] >= -127;
                ok &= fabs((double)xb[j] - (double)d0[b] * q0[256 * b + j]) <=
                      fabs((double)d0[b]) * 0.5000001 + 1e-45;
            }
            for (int g = 0; g < 16; g++) {
                int sum = 0;
                for (int i = 0; i < 16; i++) sum += q0[256 * b + 16 * g + i];
                ok &= s0[16 * b + g] == sum;
            }
        }
        CHECKF(ok, "q8_K reference: row kind %d breaks the definition", kind);
        for (size_t i = 1; i < PS_ARRAY_LEN(ISAS); i++) {
            if (!ps_isa_supported(ISAS[i])) continue;
            memset(q1, 0x55, sizeof q1);
            memset(s1, 0x55, sizeof s1);
            ps_qact_q8_K(ISAS[i], x, n, q1, s1, d1);
            CHECKF(!memcmp(q0, q1, sizeof q0) && !memcmp(s0, s1, sizeof s0) &&
                       !memcmp(d0, d1, sizeof d0),
                   "q8_K %s: row kind %d differs from the reference", ps_isa_name(ISAS[i]), kind);
        }
        /* Q8_1 */
        float e0[40], e1[40], f0[40], f1[40];
        ps_qact_q8_1_ref(x, n, q0, e0, f0);
        bool ok1 = true;
        for (int b = 0; b < 40; b++) {
            float amax = 0;
            int sum = 0;
            bool fin = true;
            for (int j = 0; j < 32; j++) {
                fin &= isfinite(x[32 * b + j]) != 0;
                amax = fmaxf(amax, fabsf(x[32 * b + j]));
                sum += q0[32 * b + j];
            }
            if (!fin) ok1 &= isnan(f0[b]);
            else ok1 &= f0[b] == ps_f16_to_f32(ps_f32_to_f16(sum * (amax / 127.0f)));
        }
        CHECKF(ok1, "q8_1 reference: row kind %d: s is not f16(sum q x amax / 127)", kind);
        for (size_t i = 1; i < PS_ARRAY_LEN(ISAS); i++) {
            if (!ps_isa_supported(ISAS[i])) continue;
            ps_qact_q8_1(ISAS[i], x, n, q1, e1, f1);
            CHECKF(!memcmp(q0, q1, (size_t)n) && !memcmp(e0, e1, sizeof e0) &&
                       !memcmp(f0, f1, sizeof f0),
                   "q8_1 %s: row kind %d differs from the reference", ps_isa_name(ISAS[i]), kind);
        }
    }
    free(x);
}

/* ---- kernels ---- */

/* The scalar kernel within 1e-5 x sum |x w| of the double reference. */
static void check_ref(const tinfo *t, const ps_mat *w, const float *x, int64_t ldx, int64_t m,
                      const float *y, int64_t ldy) {
    const int64_t k = w->n_in, nb = k / t->qk;
    float *row = malloc(sizeof(float) * (size_t)k);
    double *xd = malloc(sizeof(double) * (size_t)k);
    int8_t *q = malloc((size_t)k);
    int16_t *bs = malloc(sizeof(int16_t) * (size_t)(k / 16));
    float *d = malloc(sizeof(float) * (size_t)(k / 32)), *s = malloc(sizeof(float) * (size_t)(k / 32));
    double worst = 0;
    for (int64_t r = 0; r < m; r++) {
        const float *xr = x + r * ldx;
        if (t->qk == 256) ps_qact_q8_K_ref(xr, k, q, bs, d);
        else if (t->type == PS_GGML_Q4_1 || t->type == PS_GGML_Q5_1) ps_qact_q8_1_ref(xr, k, q, d, s);
        else ps_quant_act_q8_ref(xr, k, (uint8_t *)q, d, false);
        for (int64_t i = 0; i < k; i++) xd[i] = (double)q[i] * d[i / t->qk];
        for (int64_t j = 0; j < w->n_out; j++) {
            const uint8_t *wr = (const uint8_t *)w->data + (size_t)j * w->row_bytes;
            for (int64_t b = 0; b < nb; b++) dequant(t, wr + (size_t)(b * t->bytes), row + b * t->qk);
            double acc = 0, mag = 0, wmax = 0;
            for (int64_t b = 0; b < nb; b++) {
                const bool one = t->type == PS_GGML_Q4_1 || t->type == PS_GGML_Q5_1;
                const double mm = one ? h2f(wr + (size_t)(b * t->bytes) + 2) : 0.0;
                for (int64_t i = b * t->qk; i < (b + 1) * t->qk; i++) {
                    acc += ((double)row[i] - mm) * xd[i];
                    wmax = fmax(wmax, fabs(row[i]));
                }
                if (one) acc += mm * s[b];
            }
            for (int64_t i = 0; i < k; i++) mag += fabs(xd[i]) * wmax;
            const double e = fabs((double)y[r * ldy + j] - acc) / (mag + 1e-30);
            worst = fmax(worst, e);
        }
    }
    CHECKF(worst < 1e-5, "%s k %lld: scalar kernel vs double reference: worst %g", t->name,
           (long long)k, worst);
    free(row);
    free(xd);
    free(q);
    free(bs);
    free(d);
    free(s);
}

static void test_kernels(ps_pool *pool2, ps_pool *pool7) {
    const int64_t shapes[][2] = {{37, 512}, {16, 256}, {5, 768}, {21, 64}, {19, 96}};
    const int64_t ms[] = {1, 2, 3, 5, 6, 7, 13, 17, 256}; /* every row form: 8 and 1..7 */
    const int64_t M = 300, KMAX = 768, NMAX = 37, ldx = KMAX + 5, ldy = NMAX + 3;
    float *x = malloc(sizeof(float) * (size_t)(M * ldx));
    for (int64_t i = 0; i < M * ldx; i++) x[i] = frand() * (i % 61 == 0 ? 8.0f : 1.0f);
    for (int64_t i = 0; i < ldx; i++) x[5 * ldx + i] = (i & 1) ? 1.0f : -1.0f; /* q = +-127 */
    for (int64_t i = 0; i < ldx; i++) x[6 * ldx + i] = -1.0f;
    float *ys = malloc(sizeof(float) * (size_t)(M * ldy)), *y = malloc(sizeof(float) * (size_t)(M * ldy));
    float *y2 = malloc(sizeof(float) * (size_t)(M * ldy)), *ym = malloc(sizeof(float) * (size_t)(M * ldy));
    float *yv = malloc(sizeof(float) * (size_t)(M * ldy)); /* the AVX-512 VNNI result */
    const size_t stride = ps_matmul_scratch_floats(KMAX);
    float *scratch = ps_aligned_alloc(64, sizeof(float) * stride * 7);
    for (size_t ti = 0; ti < PS_ARRAY_LEN(TYPES); ti++) {
        const tinfo *t = &TYPES[ti];
        for (size_t si = 0; si < PS_ARRAY_LEN(shapes); si++) {
            const int64_t n = shapes[si][0], k = shapes[si][1];
            if (k % t->qk) continue;
            void *wdata; /* w's weights, owned */
            ps_mat w = test_mat(t, n, k, &wdata);
            for (int64_t e = 0; e < M * ldy; e++) ys[e] = -7.0f;
            CHECK(ps_mmq_scalar(&w, x, ldx, M, ys, ldy) == PS_OK);
            check_ref(t, &w, x, ldx, 20, ys, ldy);
            bool have_vnni = false;
            for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
            if (!mode_ok(i)) continue;
            const bool amx = i == 3;
            char tag[96];
            snprintf(tag, sizeof tag, "%s %s n %lld k %lld", t->name, mode_name(i),
                     (long long)n, (long long)k);
            ps_matmul_env env = {NULL, ISAS[i], scratch, stride, false, amx};
            for (int64_t e = 0; e < M * ldy; e++) y[e] = -7.0f;
            ps_matmul(&env, &w, x, ldx, M, y, ldy);
            CHECKF(!memcmp(y, ys, sizeof(float) * (size_t)(M * ldy)),
                   "%s: differs from the scalar kernel", tag);
            if (i == 2) {
                memcpy(yv, y, sizeof(float) * (size_t)(M * ldy));
                have_vnni = true;
            }
            if (amx && have_vnni)
                CHECKF(!memcmp(y, yv, sizeof(float) * (size_t)(M * ldy)),
                       "%s: differs from the AVX-512 VNNI kernel", tag);
            ps_matmul_env env2 = {i % 2 ? pool2 : pool7, ISAS[i], scratch, stride, false, amx};
            for (int pass = 0; pass < (amx ? 2 : 1); pass++) {
                if (pass) env2.pool = pool7; /* AMX: 2 and 7 threads */
                for (int64_t e = 0; e < M * ldy; e++) y2[e] = -7.0f;
                ps_matmul(&env2, &w, x, ldx, M, y2, ldy);
                CHECKF(!memcmp(y, y2, sizeof(float) * (size_t)(M * ldy)),
                       "%s: %d threads differ from 1", tag, env2.pool == pool2 ? 2 : 7);
            }
            for (size_t mi = 0; mi < PS_ARRAY_LEN(ms); mi++) {
                const int64_t m = ms[mi];
                ps_matmul(mi % 2 ? &env2 : &env, &w, x + 3 * ldx, ldx, m, ym, n);
                bool same = true;
                for (int64_t r = 0; r < m; r++)
                    same &= !memcmp(ym + r * n, y + (r + 3) * ldy, sizeof(float) * (size_t)n);
                CHECKF(same, "%s: m = %lld differs from the rows of m = 300", tag,
                       (long long)m);
            }
        }
        free(wdata);
        }
    }
    /* a NaN activation poisons exactly its row */
    x[9 * ldx + 100] = NAN;
    for (size_t ti = 0; ti < PS_ARRAY_LEN(TYPES); ti++) {
        const tinfo *t = &TYPES[ti];
        void *wdata; /* w's weights, owned */
        ps_mat w = test_mat(t, 21, 256, &wdata);
        for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
        if (!mode_ok(i)) continue;
        ps_matmul_env env = {pool2, ISAS[i], scratch, stride, false, i == 3};
        ps_matmul(&env, &w, x, ldx, 12, y, ldy);
        bool ok = true;
        for (int64_t r = 0; r < 12; r++)
            for (int64_t j = 0; j < 21; j++) ok &= (r == 9) == (isnan(y[r * ldy + j]) != 0);
        CHECKF(ok, "%s %s: a NaN activation must poison its row only", t->name,
               mode_name(i));
        }
        free(wdata);
    }
    ps_free(scratch);
    free(x);
    free(ys);
    free(y);
    free(y2);
    free(ym);
    free(yv);
}

/* ps_matmul_group (matmul.h) against one ps_matmul per item and matrix, bitwise, on one
 * thread: Q8_0 (matmul.c's grouped form, AMX included where the CPU has it) and four integer
 * types, every ISA, 1 / 2 / 7 threads, 200 items of 2 matrices (and of 1) with 0..12 rows
 * each and every 17th of 300 (longer than a slot: split across slots and passes), so that
 * passes end at the threads' slots and at PS_MM_SEGS runs; strided x and y (the gaps must stay
 * untouched). Mixed shapes take the plain loop and must give the same. */
static void test_group(ps_pool *pool2, ps_pool *pool7) {
    static const tinfo Q8 = {PS_GGML_Q8_0, "q8_0", 32, 34, {0, -1}};
    const tinfo *types[] = {&Q8, &TYPES[0], &TYPES[6], &TYPES[8], &TYPES[11]};
    enum { NI = 200, K = 256, NO = 37, LDX = K + 3, LDY = NO + 3 };
    int64_t rows[NI], x0[NI], y0[NI], total = 0;
    for (int i = 0; i < NI; i++) {
        rows[i] = i % 17 == 0 ? 300 : urand() % 13;
        x0[i] = total;
        total += rows[i];
    }
    float *x = malloc(sizeof(float) * (size_t)(total * LDX));
    for (int64_t i = 0; i < total * LDX; i++) x[i] = frand() * (i % 53 == 0 ? 6.0f : 1.0f);
    for (int i = 0; i < NI; i++) y0[i] = 2 * x0[i] * LDY;
    const size_t ny = (size_t)(2 * total * LDY);
    float *yr = malloc(sizeof(float) * ny), *yg = malloc(sizeof(float) * ny);
    const size_t stride = ps_matmul_scratch_floats(K);
    float *scratch = ps_aligned_alloc(64, sizeof(float) * stride * 7);
    ps_mm_item *items = malloc(sizeof *items * NI);
    ps_pool *pools[] = {NULL, pool2, pool7};
    for (size_t ti = 0; ti < PS_ARRAY_LEN(types); ti++) {
        const tinfo *t = types[ti];
        size_t rb = 0;
        uint8_t *wd = make_rows(t, 2 * NI * NO, K, &rb);
        for (size_t i = 0; i < PS_ARRAY_LEN(ISAS); i++) {
            if (!mode_ok(i)) continue;
            const bool amx = i == 3;
            for (int n_w = 1; n_w <= 2; n_w++)
                for (int mixed = 0; mixed < 2; mixed++) {
                    for (int it = 0; it < NI; it++) {
                        ps_mm_item *m = &items[it];
                        *m = (ps_mm_item){x + x0[it] * LDX, LDX, rows[it], n_w, {{0}},
                                          {yg + y0[it], yg + y0[it] + NO}, 2 * LDY};
                        for (int j = 0; j < n_w; j++) {
                            ps_mat *w = &m->w[j];
                            w->data = wd + (size_t)((2 * it + j) * NO) * rb;
                            w->type = t->type;
                            w->n_in = K;
                            w->n_out = mixed && it == NI / 2 ? NO - 5 : NO;
                            w->row_bytes = rb;
                        }
                    }
                    ps_matmul_env env1 = {NULL, ISAS[i], scratch, stride, false, amx};
                    for (size_t e = 0; e < ny; e++) yr[e] = yg[e] = -7.0f;
                    for (int it = 0; it < NI; it++) /* the reference: items[] with y in yr */
                        for (int j = 0; j < n_w; j++)
                            ps_matmul(&env1, &items[it].w[j], items[it].x, LDX, rows[it],
                                      items[it].y[j] - yg + yr, 2 * LDY);
                    for (size_t pi = 0; pi < PS_ARRAY_LEN(pools); pi++) {
                        ps_matmul_env env = env1;
                        env.pool = pools[pi];
                        for (size_t e = 0; e < ny; e++) yg[e] = -7.0f;
                        ps_matmul_group(&env, items, NI);
                        CHECKF(!memcmp(yr, yg, sizeof(float) * ny),
                               "group %s %s: %d matrices%s, %d threads: differs from "
                               "ps_matmul per item", t->name, mode_name(i), n_w,
                               mixed ? " (mixed shapes)" : "", ps_pool_size(pools[pi]));
                    }
                }
        }
        free(wd);
    }
    printf("ps_matmul_group: q8_0, q4_0, q4_k, q6_k, mxfp4 x every ISA (amx too) x 1/2/7 "
           "threads, %d items of %lld rows, bitwise ps_matmul per item\n", NI,
           (long long)total);
    free(items);
    ps_free(scratch);
    free(x);
    free(yr);
    free(yg);
}

/* The in-register packers of Q4_K and Q6_K (pack_q4_k_vnni, pack_q6_k_vnni) against the plain
 * row-by-row packer (pack_tile_vnni, ps_test_mmq_pack_plain): the same product bits for every
 * tile tail (n = 37, 16, 5, 21), m = 1, 8, 300, one and two threads, and a grouped call of
 * many items of few rows (the experts of a mixture-of-experts layer). Without AVX-512 VNNI
 * the plain packer is the only one: skipped. */
static void test_pack_plain(ps_pool *pool2) {
    if (!ps_isa_supported(PS_ISA_AVX512) || !ps_cpu_has_avx512vnni()) {
        PS_TEST_CPU_LACKS("AVX-512 VNNI: the in-register k-quant packers");
        return;
    }
    static const uint32_t types[] = {PS_GGML_Q4_K, PS_GGML_Q6_K};
    const int64_t shapes[][2] = {{37, 512}, {16, 256}, {5, 768}, {21, 256}};
    const int64_t ms[] = {1, 8, 300};
    const int64_t M = 300, KMAX = 768, NMAX = 37;
    float *x = malloc(sizeof(float) * (size_t)(M * KMAX));
    for (int64_t i = 0; i < M * KMAX; i++) x[i] = frand() * (i % 61 == 0 ? 8.0f : 1.0f);
    float *ya = malloc(sizeof(float) * (size_t)(M * NMAX)), *yb = malloc(sizeof(float) * (size_t)(M * NMAX));
    const size_t stride = ps_matmul_scratch_floats(KMAX);
    float *scratch = ps_aligned_alloc(64, sizeof(float) * stride * 2);
    for (size_t ti = 0; ti < PS_ARRAY_LEN(types); ti++) {
        const tinfo *t = NULL;
        for (size_t j = 0; j < PS_ARRAY_LEN(TYPES); j++)
            if (TYPES[j].type == types[ti]) t = &TYPES[j];
        for (size_t si = 0; si < PS_ARRAY_LEN(shapes); si++) {
            const int64_t n = shapes[si][0], k = shapes[si][1];
            void *wdata; /* w's weights, owned */
            ps_mat w = test_mat(t, n, k, &wdata);
            for (size_t mi = 0; mi < PS_ARRAY_LEN(ms); mi++)
                for (int th = 1; th <= 2; th++) {
                    const int64_t m = ms[mi];
                    ps_matmul_env env = {th == 2 ? pool2 : NULL, PS_ISA_AVX512, scratch, stride,
                                         false, false};
                    for (int64_t e = 0; e < M * NMAX; e++) ya[e] = yb[e] = -7.0f;
                    ps_test_mmq_pack_plain(true);
                    ps_matmul(&env, &w, x, k, m, ya, n);
                    ps_test_mmq_pack_plain(false);
                    ps_matmul(&env, &w, x, k, m, yb, n);
                    CHECKF(!memcmp(ya, yb, sizeof(float) * (size_t)(M * NMAX)),
                           "%s n %lld k %lld m %lld, %d thread(s): the in-register packer "
                           "differs from the plain one", t->name, (long long)n, (long long)k,
                           (long long)m, th);
                }
            /* grouped: 40 items (1..12 rows each) of this matrix */
            ps_mm_item items[40];
            int64_t r;
            const int32_t ni = few_row_items(items, w, x, k, M, NULL, n, &r);
            for (int th = 1; th <= 2; th++) {
                ps_matmul_env env = {th == 2 ? pool2 : NULL, PS_ISA_AVX512, scratch, stride,
                                     false, false};
                for (int pass = 0; pass < 2; pass++) {
                    float *y = pass ? yb : ya;
                    for (int64_t e = 0; e < M * NMAX; e++) y[e] = -7.0f;
                    int64_t rr = 0;
                    for (int32_t i = 0; i < ni; i++) {
                        items[i].y[0] = y + rr * n;
                        rr += items[i].n_rows;
                    }
                    ps_test_mmq_pack_plain(pass == 0);
                    ps_matmul_group(&env, items, ni);
                }
                ps_test_mmq_pack_plain(false);
                CHECKF(!memcmp(ya, yb, sizeof(float) * (size_t)(M * NMAX)),
                       "%s n %lld k %lld grouped (%d items), %d thread(s): the in-register "
                       "packer differs from the plain one", t->name, (long long)n, (long long)k,
                       ni, th);
            }
            free(wdata);
        }
    }
    free(x);
    free(ya);
    free(yb);
    ps_free(scratch);
}

/* The experts' tile copies (ps_mmq_copy_pack, made at load) of Q4_K and Q6_K read by their
 * kernels (ps_mmq_vnni_q4x / ps_mmq_vnni_q6x): bitwise the scalar kernel for every tile tail
 * (n = 37, 16, 5, 48), every row count 1..17 and 300 (each row form), one and two threads, and
 * a grouped call of items of 1..12 rows. Tiles of rows past n_out are zero in the copy. Without
 * AVX-512 VNNI the copy is never made: skipped. */
static void test_copy(ps_pool *pool2, uint32_t type) {
    if (!ps_isa_supported(PS_ISA_AVX512) || !ps_cpu_has_avx512vnni()) {
        PS_TEST_CPU_LACKS("AVX-512 VNNI: the experts' tile copy kernels");
        return;
    }
    const char *tn = type == PS_GGML_Q6_K ? "q6x" : "q4x";
    const size_t rec = type == PS_GGML_Q6_K ? PS_Q6X_REC : PS_Q4X_REC;
    const tinfo *t = NULL;
    for (size_t j = 0; j < PS_ARRAY_LEN(TYPES); j++)
        if (TYPES[j].type == type) t = &TYPES[j];
    const int64_t shapes[][2] = {{37, 512}, {16, 256}, {5, 768}, {48, 256}};
    const int64_t M = 300, KMAX = 768, NMAX = 48;
    float *x = malloc(sizeof(float) * (size_t)(M * KMAX));
    for (int64_t i = 0; i < M * KMAX; i++) x[i] = frand() * (i % 61 == 0 ? 8.0f : 1.0f);
    float *ys = malloc(sizeof(float) * (size_t)(M * NMAX)), *y = malloc(sizeof(float) * (size_t)(M * NMAX));
    const size_t stride = ps_matmul_scratch_floats(KMAX);
    float *scratch = ps_aligned_alloc(64, sizeof(float) * stride * 2);
    for (size_t si = 0; si < PS_ARRAY_LEN(shapes); si++) {
        const int64_t n = shapes[si][0], k = shapes[si][1];
        void *wdata; /* w's weights, owned */
        ps_mat w = test_mat(t, n, k, &wdata);
        const size_t qb = ps_mmq_copy_bytes(&w);
        CHECKF(qb == (size_t)((n + 15) / 16) * (size_t)(k / 256) * rec,
               "%s n %lld k %lld: %zu bytes", tn, (long long)n, (long long)k, qb);
        uint8_t *qt = ps_aligned_alloc(64, qb);
        memset(qt, 0xA5, qb);
        ps_mmq_copy_pack(&w, 0, (n + 15) / 16, qt);
        for (int64_t e = 0; e < M * NMAX; e++) ys[e] = -7.0f;
        CHECK(ps_mmq_scalar(&w, x, k, M, ys, n) == PS_OK);
        ps_mat wq = w;
        wq.qtiles = qt;
        for (int64_t m = 1; m <= 18; m++) {
            const int64_t rows = m == 18 ? M : m;
            for (int th = 1; th <= 2; th++) {
                ps_matmul_env env = {th == 2 ? pool2 : NULL, PS_ISA_AVX512, scratch, stride,
                                     false, false};
                for (int64_t e = 0; e < M * NMAX; e++) y[e] = -7.0f;
                ps_matmul(&env, &wq, x, k, rows, y, n);
                CHECKF(!memcmp(y, ys, sizeof(float) * (size_t)(rows * n)) &&
                           (rows == M || y[rows * n] == -7.0f),
                       "%s n %lld k %lld m %lld, %d thread(s): differs from the scalar kernel",
                       tn, (long long)n, (long long)k, (long long)rows, th);
            }
        }
        ps_mm_item items[40];
        int64_t r;
        const int32_t ni = few_row_items(items, wq, x, k, M, y, n, &r);
        for (int th = 1; th <= 2; th++) {
            ps_matmul_env env = {th == 2 ? pool2 : NULL, PS_ISA_AVX512, scratch, stride, false,
                                 false};
            for (int64_t e = 0; e < M * NMAX; e++) y[e] = -7.0f;
            ps_matmul_group(&env, items, ni);
            CHECKF(!memcmp(y, ys, sizeof(float) * (size_t)(r * n)),
                   "%s n %lld k %lld grouped (%d items), %d thread(s): differs from the scalar "
                   "kernel", tn, (long long)n, (long long)k, ni, th);
        }
        ps_free(qt);
        free(wdata);
    }
    free(x);
    free(ys);
    free(y);
    ps_free(scratch);
}

int main(void) {
    ps_pool *pool2 = NULL, *pool7 = NULL;
    CHECK(ps_pool_create(2, &pool2) == PS_OK);
    CHECK(ps_pool_create(7, &pool7) == PS_OK);
    if (!ps_cpu_has_amx())
        printf("AMX not available on this CPU (%s): the AMX tiles are not checked here\n",
               ps_amx_status());
    test_q8k();
    test_decode();
    test_kernels(pool2, pool7);
    test_group(pool2, pool7);
    test_pack_plain(pool2);
    test_copy(pool2, PS_GGML_Q4_K);
    test_copy(pool2, PS_GGML_Q6_K);
    ps_pool_free(pool2);
    ps_pool_free(pool7);
    return ps_test_done("matmul_quant");
}
