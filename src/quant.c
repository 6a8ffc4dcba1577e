/*
 * quant.c — row conversions between the weight formats and float32.
 *
 * A weight row is n elements stored in its tensor's type; the matmul and the embedding lookup
 * convert one row (or a small tile of rows) at a time into a float buffer. f16 -> f32 and
 * bf16 -> f32 are exact, and a Q8_0 weight is int8 * f16 scale (one rounding), so the scalar
 * reference and the F16C / AVX-512 variants agree bit for bit; the test checks that.
 */
#include "quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <math.h>

bool ps_quant_supported(uint32_t type) {
    return type == PS_GGML_F32 || type == PS_GGML_F16 || type == PS_GGML_BF16 ||
           type == PS_GGML_Q8_0;
}

size_t ps_quant_row_bytes(uint32_t type, int64_t n) {
    if (n < 0 || !ps_quant_supported(type)) return 0;
    switch (type) {
    case PS_GGML_F32: return (size_t)n * 4;
    case PS_GGML_F16:
    case PS_GGML_BF16: return (size_t)n * 2;
    case PS_GGML_Q8_0:
        if (n % PS_Q8_0_BLOCK) return 0;
        return (size_t)(n / PS_Q8_0_BLOCK) * sizeof(ps_block_q8_0);
    default: return 0;
    }
}

/* ---- scalar reference ---- */

void ps_quant_row_to_f32_ref(uint32_t type, const void *row, float *out, int64_t n) {
    switch (type) {
    case PS_GGML_F32:
        memcpy(out, row, (size_t)n * 4);
        break;
    case PS_GGML_F16: {
        const uint8_t *p = row;
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = ps_f16_to_f32(h);
        }
        break;
    }
    case PS_GGML_BF16: {
        const uint8_t *p = row;
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = ps_bf16_to_f32(h);
        }
        break;
    }
    case PS_GGML_Q8_0: {
        const uint8_t *p = row;
        for (int64_t b = 0; b < n / PS_Q8_0_BLOCK; b++) {
            ps_block_q8_0 blk;
            memcpy(&blk, p + (size_t)b * sizeof blk, sizeof blk);
            float d = ps_f16_to_f32(blk.d);
            for (int j = 0; j < PS_Q8_0_BLOCK; j++)
                out[b * PS_Q8_0_BLOCK + j] = (float)blk.qs[j] * d;
        }
        break;
    }
    default:
        assert(!"unsupported type reached ps_quant_row_to_f32");
    }
}

/* ---- SIMD variants (x86-64) ---- */
#if defined(__x86_64__)

__attribute__((target("avx2,fma,f16c")))
static void row_to_f32_avx2(uint32_t type, const void *row, float *out, int64_t n) {
    const uint8_t *p = row;
    int64_t i = 0;
    switch (type) {
    case PS_GGML_F16:
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(out + i,
                             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * i))));
        break;
    case PS_GGML_BF16:
        for (; i + 8 <= n; i += 8) {
            __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 * i)));
            _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
        }
        break;
    case PS_GGML_Q8_0:
        for (int64_t b = 0; b < n / PS_Q8_0_BLOCK; b++) {
            const uint8_t *blk = p + (size_t)b * sizeof(ps_block_q8_0);
            uint16_t dh;
            memcpy(&dh, blk, 2);
            __m256 d = _mm256_set1_ps(ps_f16_to_f32(dh));
            for (int j = 0; j < PS_Q8_0_BLOCK; j += 8) {
                __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2 + j)));
                _mm256_storeu_ps(out + b * PS_Q8_0_BLOCK + j,
                                 _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
            }
        }
        return;
    default:
        break;
    }
    if (i < n) ps_quant_row_to_f32_ref(type, p + ps_quant_row_bytes(type, i), out + i, n - i);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
static void row_to_f32_avx512(uint32_t type, const void *row, float *out, int64_t n) {
    const uint8_t *p = row;
    int64_t i = 0;
    switch (type) {
    case PS_GGML_F16:
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(out + i,
                             _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 2 * i))));
        break;
    case PS_GGML_BF16:
        for (; i + 16 <= n; i += 16) {
            __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p + 2 * i)));
            _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
        }
        break;
    case PS_GGML_Q8_0:
        for (int64_t b = 0; b < n / PS_Q8_0_BLOCK; b++) {
            const uint8_t *blk = p + (size_t)b * sizeof(ps_block_q8_0);
            uint16_t dh;
            memcpy(&dh, blk, 2);
            __m512 d = _mm512_set1_ps(ps_f16_to_f32(dh));
            for (int j = 0; j < PS_Q8_0_BLOCK; j += 16) {
                __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2 + j)));
                _mm512_storeu_ps(out + b * PS_Q8_0_BLOCK + j,
                                 _mm512_mul_ps(_mm512_cvtepi32_ps(q), d));
            }
        }
        return;
    default:
        break;
    }
    if (i < n) ps_quant_row_to_f32_ref(type, p + ps_quant_row_bytes(type, i), out + i, n - i);
}
#endif

void ps_quant_row_to_f32(ps_isa isa, uint32_t type, const void *row, float *out, int64_t n) {
    if (isa == PS_ISA_AUTO) isa = ps_isa_best();
    if (type == PS_GGML_F32) {
        memcpy(out, row, (size_t)n * 4);
        return;
    }
#if defined(__x86_64__)
    if (isa == PS_ISA_AVX512) {
        row_to_f32_avx512(type, row, out, n);
        return;
    }
    if (isa == PS_ISA_AVX2) {
        row_to_f32_avx2(type, row, out, n);
        return;
    }
#endif
    ps_quant_row_to_f32_ref(type, row, out, n);
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
