/*
 * isa.c — which SIMD instruction sets the CPU has (cpuid + xgetbv), and the PS_ISA override.
 *
 * Kernels come in scalar, AVX2 and AVX-512 variants compiled with per-function target
 * attributes, so one binary runs everywhere and picks at run time. PS_ISA=scalar|avx2|avx512
 * lowers the choice (tests force each path this way); it never raises it past the CPU.
 *
 * AMX (Intel's tile registers, TMUL) is not a vector ISA of its own: it is a matrix engine
 * beside AVX-512, used by the BF16 and Q8_0 matmuls only (matmul_amx.c). It needs three things:
 * cpuid AMX-TILE, AMX-BF16 and AMX-INT8; the tile state enabled in XCR0 (bits 17, 18); and, on
 * Linux, the process's permission to use the 8 KiB tile-data state, asked once with
 * arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) (pthread_once: the answer is process-wide
 * and applies to every thread, the pool's workers included). Any of them missing or refused
 * leaves AMX off, and ps_amx_status() says why. PS_ISA=amx asks for it (sessions then fail if
 * it is unavailable), PS_ISA=avx512 (or lower) keeps it off; unset, it is used where available.
 */
#include "base/impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <strings.h>
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

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

/* ---- AMX ---- */

static const char *amx_why = "not asked yet";
static bool amx_ok = false;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

#define PS_ARCH_REQ_XCOMP_PERM 0x1023
#define PS_XFEATURE_XTILEDATA 18

static void amx_detect(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (cpu_best() < PS_ISA_AVX512 || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        amx_why = "AMX not available on this CPU (no AVX-512)";
        return;
    }
    /* CPUID.(EAX=7,ECX=0):EDX bit 22 AMX-BF16, bit 24 AMX-TILE, bit 25 AMX-INT8 */
    if (!(d & (1u << 24)) || !(d & (1u << 22)) || !(d & (1u << 25))) {
        amx_why = "AMX not available on this CPU (cpuid: no AMX-TILE/BF16/INT8)";
        return;
    }
    if ((xgetbv0() & (3ull << 17)) != (3ull << 17)) {
        amx_why = "AMX not available: the OS has not enabled the tile state (XCR0)";
        return;
    }
#if defined(__linux__)
    if (syscall(SYS_arch_prctl, PS_ARCH_REQ_XCOMP_PERM, PS_XFEATURE_XTILEDATA) != 0) {
        amx_why = "AMX not available: the kernel refused the tile-data permission "
                  "(arch_prctl ARCH_REQ_XCOMP_PERM)";
        return;
    }
    amx_ok = true;
    amx_why = "amx-bf16, amx-int8";
#else
    amx_why = "AMX not available: only enabled on Linux";
#endif
#else
    amx_why = "AMX not available on this CPU (not x86-64)";
#endif
}

bool ps_cpu_has_amx(void) {
    pthread_once(&amx_once, amx_detect);
    return amx_ok;
}

const char *ps_amx_status(void) {
    pthread_once(&amx_once, amx_detect);
    return amx_why;
}

int ps_isa_env_amx(void) {
    const char *env = getenv("PS_ISA");
    if (!env || !*env) return 1;
    if (!strcasecmp(env, "amx")) return 2;
    return !strcasecmp(env, "scalar") || !strcasecmp(env, "avx2") || !strcasecmp(env, "avx512")
               ? 0
               : 1;
}

bool ps_isa_supported(ps_isa isa) {
    if (isa == PS_ISA_AUTO || isa == PS_ISA_SCALAR) return true;
    if (isa == PS_ISA_AMX) return ps_cpu_has_amx();
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
        else if (!strcasecmp(env, "avx512") || !strcasecmp(env, "amx")) want = PS_ISA_AVX512;
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
    case PS_ISA_AMX: return "amx";
    default: return "unknown";
    }
}
