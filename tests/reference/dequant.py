#!/usr/bin/python3
"""dequant.py - ggml weight types -> float32 in numpy, written from the format description
(ggml-common.h block layouts; what each field means), sharing no code with the C library.

Every value is computed with float32 operations in ggml's order (an f16 scale widened exactly,
e.g. Q4_K: (d * sc) * q - (dmin * m), Q6_K: (d * sc) * q, Q4_1: q * d + m), so the result is
bitwise what ggml's dequantize_row_* gives, and what promptscore's to_f32 must give. Weights are
addressed per element e of a block (index formulas below) instead of ggml's loops.

usage (the test driver): dequant.py TYPE IN.bin OUT.f32   blocks in, float32 values out
"""
import sys

import numpy as np

F32 = np.float32

KV_IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                    dtype=F32)
KV_MXFP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=F32)

# type number -> (name, elements per block, numpy block dtype)
TYPES = {
    0: ("f32", 1, np.dtype([("v", "<f4")])),
    1: ("f16", 1, np.dtype([("v", "<f2")])),
    30: ("bf16", 1, np.dtype([("v", "<u2")])),
    2: ("q4_0", 32, np.dtype([("d", "<f2"), ("qs", "u1", 16)])),
    3: ("q4_1", 32, np.dtype([("d", "<f2"), ("m", "<f2"), ("qs", "u1", 16)])),
    6: ("q5_0", 32, np.dtype([("d", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)])),
    7: ("q5_1", 32, np.dtype([("d", "<f2"), ("m", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)])),
    8: ("q8_0", 32, np.dtype([("d", "<f2"), ("qs", "i1", 32)])),
    10: ("q2_k", 256, np.dtype([("scales", "u1", 16), ("qs", "u1", 64), ("d", "<f2"),
                                ("dmin", "<f2")])),
    11: ("q3_k", 256, np.dtype([("hmask", "u1", 32), ("qs", "u1", 64), ("scales", "u1", 12),
                                ("d", "<f2")])),
    12: ("q4_k", 256, np.dtype([("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12),
                                ("qs", "u1", 128)])),
    13: ("q5_k", 256, np.dtype([("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12),
                                ("qh", "u1", 32), ("qs", "u1", 128)])),
    14: ("q6_k", 256, np.dtype([("ql", "u1", 128), ("qh", "u1", 64), ("scales", "i1", 16),
                                ("d", "<f2")])),
    20: ("iq4_nl", 32, np.dtype([("d", "<f2"), ("qs", "u1", 16)])),
    23: ("iq4_xs", 256, np.dtype([("d", "<f2"), ("scales_h", "<u2"), ("scales_l", "u1", 4),
                                  ("qs", "u1", 128)])),
    39: ("mxfp4", 32, np.dtype([("e", "u1"), ("qs", "u1", 16)])),
}
BY_NAME = {v[0]: k for k, v in TYPES.items()}


def f16(a):
    """f16 fields -> float32 (exact)."""
    return a.astype(F32)


def col(a):
    return a[:, None]


def nibbles32(qs):
    """Legacy 32-blocks: element j < 16 is the low nibble of qs[j], j + 16 its high nibble."""
    j = np.arange(32)
    return (qs[:, j % 16] >> (4 * (j // 16))) & 15


def k4_scale_min(s):
    """Q4_K / Q5_K: the 6-bit scale and min of sub-block j = 0..7 from the 12 packed bytes."""
    s = s.astype(np.int64)
    sc = np.empty((s.shape[0], 8), np.int64)
    mn = np.empty_like(sc)
    for j in range(8):
        if j < 4:
            sc[:, j] = s[:, j] & 63
            mn[:, j] = s[:, j + 4] & 63
        else:
            sc[:, j] = (s[:, j + 4] & 15) | ((s[:, j - 4] >> 6) << 4)
            mn[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    return sc, mn


def dequant_blocks(ttype, b):
    """b: structured array of blocks -> (n_blocks, block) float32."""
    e = np.arange(256)
    if ttype == 0:
        return b["v"].astype(F32)[:, None]
    if ttype == 1:
        return f16(b["v"])[:, None]
    if ttype == 30:
        return (b["v"].astype(np.uint32) << 16).view(F32)[:, None]
    if ttype in (2, 3, 6, 7):
        q = nibbles32(b["qs"]).astype(np.int64)
        if ttype in (6, 7):
            q = q | (((b["qh"][:, None] >> np.arange(32, dtype=np.uint32)) & 1) << 4).astype(np.int64)
        d = col(f16(b["d"]))
        if ttype == 2:
            return (q - 8).astype(F32) * d
        if ttype == 6:
            return (q - 16).astype(F32) * d
        return q.astype(F32) * d + col(f16(b["m"]))
    if ttype == 8:
        return b["qs"].astype(F32) * col(f16(b["d"]))
    if ttype == 20:
        return col(f16(b["d"])) * KV_IQ4NL[nibbles32(b["qs"])]
    if ttype == 39:
        x = b["e"].astype(np.uint32)
        bits = np.where(x < 2, np.uint32(0x00200000) << x, (x - 1) << 23).astype(np.uint32)
        return KV_MXFP4[nibbles32(b["qs"])] * col(bits.view(F32))
    if ttype == 10:  # Q2_K: 2-bit q at qs[(e//128)*32 + e%32] >> 2*((e%128)//32); sub-block e//16
        q = (b["qs"][:, (e // 128) * 32 + e % 32] >> (2 * ((e % 128) // 32))) & 3
        sc = b["scales"][:, e // 16]
        dl = col(f16(b["d"])) * (sc & 15).astype(F32)
        ml = col(f16(b["dmin"])) * (sc >> 4).astype(F32)
        return dl * q.astype(F32) - ml
    if ttype == 11:  # Q3_K: low 2 bits as Q2_K, high bit in hmask[e%32] bit e//32 (clear: -4)
        s = b["scales"].astype(np.int64)
        k = np.arange(16)
        lo = np.where(k < 8, s[:, k % 8] & 15, s[:, k % 8] >> 4)
        hi = (s[:, 8 + k % 4] >> (2 * (k // 4))) & 3
        sc = (lo | (hi << 4)) - 32
        low = (b["qs"][:, (e // 128) * 32 + e % 32] >> (2 * ((e % 128) // 32))) & 3
        h = (b["hmask"][:, e % 32] >> (e // 32)) & 1
        q = low.astype(np.int64) - np.where(h != 0, 0, 4)
        dl = col(f16(b["d"])) * sc[:, e // 16].astype(F32)
        return dl * q.astype(F32)
    if ttype in (12, 13):  # Q4_K / Q5_K: nibble of qs[(e//64)*32 + e%32], high when e%64 >= 32
        q = ((b["qs"][:, (e // 64) * 32 + e % 32] >> (4 * ((e % 64) // 32))) & 15).astype(np.int64)
        if ttype == 13:
            q = q + 16 * ((b["qh"][:, e % 32] >> (e // 32)) & 1).astype(np.int64)
        sc, mn = k4_scale_min(b["scales"])
        dl = col(f16(b["d"])) * sc[:, e // 32].astype(F32)
        ml = col(f16(b["dmin"])) * mn[:, e // 32].astype(F32)
        return dl * q.astype(F32) - ml
    if ttype == 14:  # Q6_K: h = e//128, g = (e%128)//32, l = e%32
        h, g, l = e // 128, (e % 128) // 32, e % 32
        low = (b["ql"][:, h * 64 + l + 32 * (g & 1)] >> (4 * (g >> 1))) & 15
        high = (b["qh"][:, h * 32 + l] >> (2 * g)) & 3
        q = (low.astype(np.int64) | (high.astype(np.int64) << 4)) - 32
        dl = col(f16(b["d"])) * b["scales"][:, e // 16].astype(F32)
        return dl * q.astype(F32)
    if ttype == 23:  # IQ4_XS: sub-block ib = e//32, 6-bit scale - 32; codes as IQ4_NL
        ib = np.arange(8)
        ls = ((b["scales_l"][:, ib // 2].astype(np.int64) >> (4 * (ib % 2))) & 15) | \
             (((b["scales_h"][:, None].astype(np.int64) >> (2 * ib)) & 3) << 4)
        dl = col(f16(b["d"])) * (ls - 32).astype(F32)  # (n, 8)
        j = e % 32
        code = (b["qs"][:, (e // 32) * 16 + j % 16] >> (4 * (j // 16))) & 15
        return dl[:, e // 32] * KV_IQ4NL[code]
    raise ValueError("tensor type %d not supported by the reference" % ttype)


def dequant(ttype, buf, offset, n):
    """n elements of type ttype at buf[offset:] -> float32 array of n."""
    if ttype not in TYPES:
        raise ValueError("tensor type %d not supported by the reference" % ttype)
    _, blck, dt = TYPES[ttype]
    if n % blck:
        raise ValueError("%d elements are not whole %s blocks" % (n, TYPES[ttype][0]))
    b = np.frombuffer(buf, dt, n // blck, offset)
    with np.errstate(invalid="ignore", over="ignore"):
        return dequant_blocks(ttype, b).astype(F32).reshape(-1)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in BY_NAME:
        print(__doc__)
        return 2
    t = BY_NAME[sys.argv[1]]
    buf = open(sys.argv[2], "rb").read()
    _, blck, dt = TYPES[t]
    n = len(buf) // dt.itemsize * blck
    dequant(t, buf, 0, n).astype("<f4").tofile(sys.argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main())
