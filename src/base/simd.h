/*
 * simd.h — the target attributes of the ISA-specific functions, named once. A function marked
 * PS_TARGET_AVX2 may use AVX2, FMA and F16C intrinsics although the file is compiled for the
 * baseline x86-64; it runs only after the caller's ISA check (isa.c: ps_isa_supported,
 * ps_cpu_has_avx512vnni / bf16, ps_cpu_has_amx). Each name stands for one exact feature set, so
 * a function keeps the set it was written and measured with: code generated for a set does not
 * change when another function asks for more. On other architectures the names are empty (the
 * functions that use them are compiled only under __x86_64__).
 */
#ifndef PS_SIMD_H
#define PS_SIMD_H

#if defined(__x86_64__)
#define PS_TARGET(features) __attribute__((target(features)))
#else
#define PS_TARGET(features)
#endif

/* AVX2 with FMA and F16C: the AVX2 kernels */
#define PS_TARGET_AVX2 PS_TARGET("avx2,fma,f16c")
/* AVX2 with FMA, no F16C: DeltaNet, the Q8_K and Q8_1 activation quantisers */
#define PS_TARGET_AVX2_FMA PS_TARGET("avx2,fma")
/* AVX2 alone (integer work): the bf16 activation rounding */
#define PS_TARGET_AVX2_INT PS_TARGET("avx2")
/* AVX-512 F, BW, VL, DQ: the AVX-512 kernels */
#define PS_TARGET_AVX512 PS_TARGET("avx512f,avx512bw,avx512vl,avx512dq")
/* the same with F16C (the Q8_0 activation quantiser's f16 rounding of the scale) */
#define PS_TARGET_AVX512_F16C PS_TARGET("avx512f,avx512bw,avx512vl,avx512dq,f16c")
/* the same with AVX-512 BF16 (vdpbf16ps) */
#define PS_TARGET_AVX512_BF16 PS_TARGET("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")
/* the same with AVX-512 VNNI (vpdpbusd, vpdpwssd) and AVX2 / FMA / F16C for 256-bit helpers */
#define PS_TARGET_AVX512_VNNI                                                                  \
    PS_TARGET("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
/* AVX-512 F and BW only (vpsadbw sums of activation bytes) */
#define PS_TARGET_AVX512_BW PS_TARGET("avx512f,avx512bw")
/* AVX-512 F and DQ only: DeltaNet */
#define PS_TARGET_AVX512_DQ PS_TARGET("avx512f,avx512dq")
/* AVX-512 F alone: the int8 transpose helper (i8pack.h), inlined into its callers */
#define PS_TARGET_AVX512F PS_TARGET("avx512f")
/* AMX tiles (BF16 and INT8) with AVX-512 F, BW, VL, DQ and VNNI: matmul_amx.c */
#define PS_TARGET_AMX                                                                          \
    PS_TARGET("amx-tile,amx-bf16,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")

#endif /* PS_SIMD_H */
