#!/usr/bin/python3
"""ties.py — how close the float64 reference's activations come to the rounding boundaries of
llama.cpp's activation quantisation, position by position: where one float32 ulp can flip a
quantised value, two float32 engines may legitimately disagree.

    ties.py MODEL.gguf [--n 300] [--seed 7] [--max-id 500] [--positions 1,2,3]

Same prompt as compare.py (same --n/--seed/--max-id). For every matrix product whose weight
type gets quantised activations (Q8_K, Q8_0, Q8_1; tests/reference/forward.py --native-act),
and for each prompt row, it measures the margin, in float32 ulps of the value concerned, of
  - q = round(x * iscale): the distance of x * iscale to the nearest half-integer;
  - Q8_0 / Q8_1's f16 scale d = f16(amax / 127): amax / 127 to the nearest f16 rounding
    midpoint; Q8_1's s = f16(d * sum q) likewise;
  - a router (ffn_gate_inp): the gap between the k-th and the (k+1)-th largest logit, where
    a smaller gap than the engines' float32 error sends the token to another expert,
and prints, for each asked position p (compare.py's numbering: the logprob of token p, from
row p - 1), the smallest margin over all products and which tensor it was in. A margin of a
few ulps at a position where the engines part is a rounding boundary, not an error.
"""
import argparse, os, random, sys
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tests',
                                'reference'))
import forward as F

ap = argparse.ArgumentParser()
ap.add_argument('model')
ap.add_argument('--n', type=int, default=300)
ap.add_argument('--seed', type=int, default=7)
ap.add_argument('--max-id', type=int, default=500)
ap.add_argument('--positions', default='1,2,3,4,5,6,7,8')
a = ap.parse_args()
random.seed(a.seed)
ids = [1] + [random.randrange(3, a.max_id) for _ in range(a.n - 1)]
T = len(ids)
m = F.Model(a.model, native_act=True, n_ctx=a.n + 8)
best = np.full(T, np.inf)
where = [''] * T
ULP = 2.0 ** -24


def f16_margin(v):
    """|v| to the nearest f16 rounding midpoint, in float32 ulps of v (normal f16 range)."""
    av = np.maximum(np.abs(v), 2.0 ** -14)
    e = np.floor(np.log2(av))
    step = 2.0 ** (e - 10)  # f16 spacing at av
    frac = av / step - np.floor(av / step)
    return np.abs(frac - 0.5) * step / (av * ULP)


rows_of = [np.arange(T)]  # the prompt rows of the next expert product (experts take subsets)


def note(per, name):
    for j, t in enumerate(rows_of[0]):
        if per[j] < best[t]:
            best[t], where[t] = per[j], name


orig = m.matmul
orig_nonzero = np.nonzero


def nonzero(c):
    r = orig_nonzero(c)
    if getattr(c, 'ndim', 0) == 2 and c.shape[0] == T:  # experts(): rows, slot = nonzero(...)
        rows_of[0] = r[0]
    return r


np.nonzero = nonzero


def matmul(x, name, expert=None):
    act = F.NATIVE_ACT.get(m.t[name][1])
    if x.ndim == 2 and x.shape[0] == T:
        rows_of[0] = np.arange(T)
    if name.endswith('ffn_gate_inp.weight'):
        z = orig(x, name, expert)
        k = m.n_expert_used
        zs = -np.sort(-z, axis=1)
        gap = (zs[:, k - 1] - zs[:, k]) / (np.maximum(np.abs(zs[:, k - 1]), 1e-30) * ULP)
        note(gap, name + ' (expert choice)')
        return z
    if act in ('q8_k', 'q8_0', 'q8_1') and x.ndim == 2 and x.shape[0] == len(rows_of[0]):
        T_ = x.shape[0]
        blk = 256 if act == 'q8_k' else 32
        b = x.astype(np.float32).reshape(T_, -1, blk).astype(np.float64)
        if act == 'q8_k':
            i = np.argmax(np.abs(b), axis=2)
            mx = np.take_along_axis(b, i[..., None], 2)
            v = b * (-127.0 / np.where(mx == 0, 1, mx))
        else:
            amax = np.abs(b).max(axis=2, keepdims=True)
            d = amax / 127.0
            v = b / np.where(d == 0, 1, d)
            note(f16_margin(d).reshape(T_, -1).min(axis=1), name + ' (f16 d)')
            if act == 'q8_1':
                q = np.sign(v) * np.floor(np.abs(v) + 0.5)
                note(f16_margin(q.sum(axis=2) * d[..., 0]).reshape(T_, -1).min(axis=1),
                     name + ' (f16 s)')
        frac = np.abs(np.abs(v) - np.floor(np.abs(v)) - 0.5)
        note((frac / (np.maximum(np.abs(v), 1e-30) * ULP)).reshape(T_, -1).min(axis=1), name)
    return orig(x, name, expert)


m.matmul = matmul
m.forward(ids)
for p in (int(s) for s in a.positions.split(',')):
    if 1 <= p < T:
        print('position %d: closest rounding boundary %.1f float32 ulps, in %s'
              % (p, best[p - 1], where[p - 1]))
