/*
 * isa.c — which SIMD instruction sets the CPU has (cpuid + xgetbv), and the PS_ISA override.
 *
 * Kernels come in scalar, AVX2 and AVX-512 variants compiled with per-function target
 * attributes, so one binary runs everywhere and picks at run time. PS_ISA=scalar|avx2|avx512
 * lowers the choice (tests force each path this way); it never raises it past the CPU.
 */
#include "impl.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static int detect(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return PS_ISA_SCALAR;
    bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29),
         avx = c & (1u << 28);
    if (!osxsave || !avx) return PS_ISA_SCALAR;
    uint64_t xcr0 = xgetbv0();
    if ((xcr0 & 6) != 6) return PS_ISA_SCALAR;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return PS_ISA_SCALAR;
    bool avx2 = b & (1u << 5), avx512f = b & (1u << 16), avx512dq = b & (1u << 17),
         avx512bw = b & (1u << 30), avx512vl = b & (1u << 31);
    if (!(avx2 && fma && f16c)) return PS_ISA_SCALAR;
    if (avx512f && avx512dq && avx512bw && avx512vl && (xcr0 & 0xe0) == 0xe0) return PS_ISA_AVX512;
    return PS_ISA_AVX2;
}
#else
static int detect(void) { return PS_ISA_SCALAR; }
#endif

/* cpuid is slow under a hypervisor (it traps), and the kernels ask on every matmul call: the
 * answers are cached (atomics, since sessions on several threads may ask first at once). */
static int cpu_best(void) {
    static _Atomic int cached = 0;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (!v) {
        v = detect();
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

/* CPUID.(EAX=7,ECX=1):EAX bit 5 = AVX512_BF16; CPUID.(EAX=7,ECX=0):ECX bit 11 = AVX512_VNNI;
 * both also need the AVX-512 state enabled (the AVX512 ISA level). */
static bool detect_bf16(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (cpu_best() < PS_ISA_AVX512 || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return a & (1u << 5);
#else
    return false;
#endif
}

static bool detect_vnni(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (cpu_best() < PS_ISA_AVX512 || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return c & (1u << 11);
#else
    return false;
#endif
}

/* *cache: 0 = not asked yet, 1 = no, 2 = yes */
static bool cached_flag(_Atomic int *cache, bool (*detect_flag)(void)) {
    int v = atomic_load_explicit(cache, memory_order_relaxed);
    if (!v) {
        v = detect_flag() ? 2 : 1;
        atomic_store_explicit(cache, v, memory_order_relaxed);
    }
    return v == 2;
}

bool ps_cpu_has_avx512bf16(void) {
    static _Atomic int cache = 0;
    return cached_flag(&cache, detect_bf16);
}

bool ps_cpu_has_avx512vnni(void) {
    static _Atomic int cache = 0;
    return cached_flag(&cache, detect_vnni);
}

bool ps_isa_supported(ps_isa isa) {
    if (isa == PS_ISA_AUTO || isa == PS_ISA_SCALAR) return true;
    if (isa != PS_ISA_AVX2 && isa != PS_ISA_AVX512) return false;
    return (int)isa <= cpu_best();
}

ps_isa ps_isa_best(void) {
    int best = cpu_best();
    const char *env = getenv("PS_ISA");
    if (env && *env) {
        int want = best;
        if (!strcasecmp(env, "scalar")) want = PS_ISA_SCALAR;
        else if (!strcasecmp(env, "avx2")) want = PS_ISA_AVX2;
        else if (!strcasecmp(env, "avx512")) want = PS_ISA_AVX512;
        if (want < best) best = want;
    }
    return (ps_isa)best;
}

const char *ps_isa_name(ps_isa isa) {
    switch (isa) {
    case PS_ISA_AUTO: return "auto";
    case PS_ISA_SCALAR: return "scalar";
    case PS_ISA_AVX2: return "avx2";
    case PS_ISA_AVX512: return "avx512";
    default: return "unknown";
    }
}
