/*
 * test_status.c — status names, error filling, the allocation hook, and the scalar f16/bf16
 * conversions of impl.h checked against the CPU's own F16C conversions (every half value, and
 * a sweep of floats including the rounding boundaries).
 */
#include "base/impl.h"
#include "check.h"
#include "base/testhooks.h"

#include <immintrin.h>
#include <math.h>

__attribute__((target("f16c"))) static float hw_h2f(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) static uint16_t hw_f2h(float f) {
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int main(void) {
    /* status names: every code has a distinct, non-generic name */
    for (ps_status s = PS_OK; s >= PS_ERR_LIMIT; s--) {
        CHECKF(strcmp(ps_status_str(s), "unknown status") != 0, "code %d", s);
        for (ps_status t = s - 1; t >= PS_ERR_LIMIT; t--)
            CHECKF(strcmp(ps_status_str(s), ps_status_str(t)) != 0, "%d vs %d", s, t);
    }
    CHECK(strcmp(ps_status_str(-999), "unknown status") == 0);
    CHECK(strcmp(ps_version(), PS_VERSION_STRING) == 0);

    ps_error err;
    ps_error_clear(&err);
    CHECK(err.code == PS_OK && err.offset == -1 && err.message[0] == 0);
    CHECK(ps_fail(&err, PS_ERR_FORMAT, 42, "bad key '%s'", "x") == PS_ERR_FORMAT);
    CHECK(err.code == PS_ERR_FORMAT && err.offset == 42 && !strcmp(err.message, "bad key 'x'"));
    CHECK(ps_fail(NULL, PS_ERR_IO, -1, "no error struct") == PS_ERR_IO);

    /* allocation hook: fail the 3rd allocation and every later one */
    ps_alloc_fail_after(2);
    void *a = ps_malloc(8), *b = ps_calloc(2, 8), *c = ps_malloc(8), *d = ps_realloc(NULL, 4);
    CHECK(a && b && !c && !d);
    CHECK(ps_alloc_count() == 4);
    ps_free(a);
    ps_free(b);
    ps_alloc_fail_after(-1);
    char *s = ps_strndup("abcdef", 3);
    CHECK(s && !strcmp(s, "abc"));
    ps_free(s);
    void *al = ps_aligned_alloc(64, 100);
    CHECK(al && ((uintptr_t)al & 63) == 0);
    ps_free(al);

    /* f16 -> f32: all 65536 halves against F16C */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float x = ps_f16_to_f32((uint16_t)h), y = hw_h2f((uint16_t)h);
        if (bits(x) != bits(y) && !(isnan(x) && isnan(y))) bad++;
    }
    CHECKF(bad == 0, "%d half values convert differently from F16C", bad);

    /* f32 -> f16: a sweep of bit patterns (every 4099th float) plus the neighbours of every
     * half's midpoint, against F16C round-to-nearest-even */
    bad = 0;
    for (uint64_t u = 0; u < 0x100000000ull; u += 4099) {
        float f = from_bits((uint32_t)u);
        if (isnan(f)) continue;
        if (ps_f32_to_f16(f) != hw_f2h(f)) bad++;
    }
    for (uint32_t h = 0; h < 0x7c00; h++) {
        float lo = ps_f16_to_f32((uint16_t)h), hi = ps_f16_to_f32((uint16_t)(h + 1));
        float mid = (float)(((double)lo + (double)hi) / 2);
        float probes[3] = {mid, nextafterf(mid, -INFINITY), nextafterf(mid, INFINITY)};
        for (int i = 0; i < 3; i++) {
            if (ps_f32_to_f16(probes[i]) != hw_f2h(probes[i])) bad++;
            if (ps_f32_to_f16(-probes[i]) != hw_f2h(-probes[i])) bad++;
        }
    }
    CHECKF(bad == 0, "%d floats round to half differently from F16C", bad);
    CHECK(isnan(ps_f16_to_f32(ps_f32_to_f16(NAN))));

    /* bf16: exact for representable values; ties to even; NaN stays NaN */
    CHECK(ps_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(ps_bf16_to_f32(0x3f80) == 1.0f);
    CHECK(ps_f32_to_bf16(from_bits(0x3f808000u)) == 0x3f80); /* tie -> even (down) */
    CHECK(ps_f32_to_bf16(from_bits(0x3f818000u)) == 0x3f82); /* tie -> even (up) */
    CHECK(ps_f32_to_bf16(from_bits(0x3f808001u)) == 0x3f81); /* above tie -> up */
    CHECK(ps_f32_to_bf16(-INFINITY) == 0xff80);
    CHECK(isnan(ps_bf16_to_f32(ps_f32_to_bf16(NAN))));
    bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ps_bf16_to_f32((uint16_t)h);
        if (!isnan(f) && ps_f32_to_bf16(f) != h) bad++;
    }
    CHECKF(bad == 0, "%d bf16 values do not round-trip", bad);

    /* overflow checks */
    uint64_t out;
    CHECK(ps_mul_ok(1u << 20, 1u << 20, &out) && out == (1ull << 40));
    CHECK(!ps_mul_ok(1ull << 40, 1ull << 40, &out));
    return ps_test_done("status");
}
