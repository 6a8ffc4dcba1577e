#!/usr/bin/env python3
"""kld_llama16.py -- Mean KLD and Same top p of two models from promptscore's exact
per-position log-probabilities, computed twice: exactly (as `perplexity --compare` does) and
through llama-perplexity's 16-bit base (llama.cpp d32676d77, tools/perplexity/perplexity.cpp),
to show how much of a difference between the two engines that storage explains
(docs/correctness.md, "Against llama-perplexity --kl-divergence").

usage: python3 bench/kld_llama16.py BASE.jsonl OTHER.jsonl N_CTX [LLAMA_BASE LLAMA_OTHER]
       python3 bench/kld_llama16.py --diff A.jsonl B.jsonl N_CTX
       python3 bench/kld_llama16.py --rows A B N_CTX

BASE.jsonl / OTHER.jsonl: `promptscore score -k V` output (V = the vocabulary size, so that
top_ids holds every token's log-probability) of the same lines, each line one llama-perplexity
chunk of N_CTX ids (BOS first). Rows N_CTX/2 .. N_CTX-2 of each line are scored, as
llama-perplexity does: the row of position p is entry p + 1.

llama.cpp's base, per row (log_softmax writing uint16): max and min logit, min raised to
max - 16; scale = (max - min) / 65535 in float32; q_i = nearest_int((l_i - min) / scale) for
l_i > min, else 0; the base log-prob is then scale * q_i + min_log_prob. Its top-1 is the
first largest of those (so values within one step tie, and the lowest id wins); its KLD sums
exp(lb) * (lb - lo) over the ids whose lb > -16 only, in double; the other model's log-probs
are exact. LLAMA_BASE / LLAMA_OTHER (optional): the files that `llama-perplexity --kl-divergence-base
FILE` writes for BASE and for OTHER (llama.cpp's own forward passes, 16-bit): the script then
also says in how many rows each model's top-1 differs between the two engines (both taken
from 16-bit values rounded the same way), the mean absolute difference of their 16-bit
log-probs (ids with log p > -3, per row, averaged over the rows), and Mean KLD / Same top p of llama.cpp's base against promptscore's other model.

--diff: how far two runs of one model are apart (say --kv-type f32 against f16, or --act
native against f32): the mean |log p_A - log p_B| over the ids with log p_A > -3, and the rows
whose top-1 differs.

--rows: in how many scored rows two runs of one model disagree on the top-1, where A and B are
each a llama-perplexity --kl-divergence-base file (its top-1: the first largest 16-bit value)
or a `promptscore score -k K` output (K >= 1; its top-1: the first of top_ids) of the chunks
above. So llama.cpp can be compared with itself (two builds, two batch sizes) and with
promptscore on any vocabulary, without -k V.

Here the log-probs stand in for the logits (a constant shift: the steps are the same
up to float32 rounding of the shift, far below a step of (max - min) / 65535).
Needs numpy.
"""
import json
import sys

import numpy as np


def scored(path, n_ctx, key):
    """logprobs[key] of each scored row of a score output, in order: positions N_CTX/2 ..
    N_CTX-2 of each line, the row of position p being entry p + 1."""
    with open(path) as f:
        for line in f:
            arr = json.loads(line)["logprobs"][key]
            for p in range(n_ctx // 2, n_ctx - 1):
                yield arr[p + 1]


def rows(path, n_ctx):
    for e in scored(path, n_ctx, "top_ids"):
        ids = np.fromiter((t[0] for t in e), dtype=np.int64)
        vals = np.fromiter((t[1] for t in e), dtype=np.float64).astype(np.float32)
        v = np.full(int(ids.max()) + 1, -np.inf, dtype=np.float32)
        v[ids] = vals
        yield v


def targets(path, n_ctx):
    """The scored token of each row (the id after the row's position)."""
    return scored(path, n_ctx, "token_ids")


def llama16(lb):
    """llama.cpp's stored base log-probs of one row (float32), from exact ones."""
    f32 = np.float32
    mx = lb.max()
    mn = max(lb[np.isfinite(lb)].min(), f32(mx - f32(16)))
    scale = f32(f32(mx - mn) / f32(65535))
    if scale == 0:
        q = np.zeros(lb.shape, dtype=np.float32)
    else:
        inv = f32(f32(1) / scale)
        q = np.where(lb > mn, np.rint(inv * (lb - mn).astype(np.float32)), 0).astype(np.float32)
    return (scale * q + f32(mn)).astype(np.float32)


def llama_rows(path):
    """The rows of a llama-perplexity --kl-divergence-base file, dequantized to float32."""
    import struct
    with open(path, "rb") as f:
        assert f.read(8) == b"_logits_", f"{path}: not a llama-perplexity base file"
        n_ctx, n_vocab, n_chunk = struct.unpack("<3i", f.read(12))
        f.read(4 * n_chunk * n_ctx)  # the tokens
        nv = 2 * ((n_vocab + 1) // 2) + 4
        n_rows = n_chunk * (n_ctx - 1 - n_ctx // 2)
        for i in range(n_rows):
            b = f.read(2 * nv)
            if len(b) != 2 * nv:
                sys.exit(f"{path}: ends at row {i} of {n_rows}")
            r = np.frombuffer(b, dtype=np.uint16)
            scale, mn = np.frombuffer(r[:4].tobytes(), dtype=np.float32)[:2]
            yield (scale * r[4:4 + n_vocab].astype(np.float32) + mn).astype(np.float32)


def versus_llama(argv, n_ctx):
    """Each model's top-1 and 16-bit log-probs, promptscore's against llama.cpp's."""
    n = 0
    diff_b = diff_o = 0
    mad_b = mad_o = 0.0
    kld = 0.0
    same = 0
    for b, o, lb, lo in zip(rows(argv[1], n_ctx), rows(argv[2], n_ctx), llama_rows(argv[4]),
                            llama_rows(argv[5])):
        n += 1
        qb, qo = llama16(b), llama16(o)
        diff_b += int(np.argmax(qb)) != int(np.argmax(lb))
        diff_o += int(np.argmax(qo)) != int(np.argmax(lo))
        kb = lb > np.float32(-16)
        tb, to = lb > np.float32(-3), lo > np.float32(-3)
        mad_b += float(np.mean(np.abs(qb[tb] - lb[tb])))
        mad_o += float(np.mean(np.abs(qo[to] - lo[to])))
        pq = np.exp(lb[kb]).astype(np.float32).astype(np.float64)
        kld += float(np.sum(pq * (lb[kb].astype(np.float64) - o[kb].astype(np.float64))))
        same += int(np.argmax(lb)) == int(np.argmax(o))
    print(f"top-1 differs between the engines: base model {diff_b} rows, other model {diff_o} "
          f"rows (of {n}, both sides 16-bit)")
    print(f"mean |log p promptscore - log p llama.cpp| (16-bit, log p > -3): base {mad_b / n:.2e}, "
          f"other {mad_o / n:.2e}")
    print(f"llama.cpp's base vs promptscore's other: Mean KLD {kld / n:.7f}  Same top p "
          f"{100.0 * same / n:.3f} % ({same})")


def diff(argv):
    n_ctx = int(argv[4])
    tot, cnt, rows_n, top = 0.0, 0, 0, 0
    for a, b in zip(rows(argv[2], n_ctx), rows(argv[3], n_ctx)):
        keep = a > np.float32(-3)
        tot += float(np.sum(np.abs(a[keep].astype(np.float64) - b[keep].astype(np.float64))))
        cnt += int(keep.sum())
        rows_n += 1
        top += int(np.argmax(a)) != int(np.argmax(b))
    print(f"rows {rows_n}: mean |log p_A - log p_B| (log p_A > -3) {tot / cnt:.2e}, top-1 "
          f"differs in {top} rows")


def top1s(path, n_ctx):
    """The top-1 of each scored row: of a llama-perplexity base file or a score output."""
    with open(path, "rb") as f:
        magic = f.read(8)
    if magic == b"_logits_":
        for r in llama_rows(path):
            yield int(np.argmax(r))  # the first largest, as llama.cpp's scan
        return
    for e in scored(path, n_ctx, "top_ids"):
        yield e[0][0]


def rows_differ(argv):
    n_ctx = int(argv[4])
    a, b = list(top1s(argv[2], n_ctx)), list(top1s(argv[3], n_ctx))
    if len(a) != len(b):
        sys.exit(f"{argv[2]}: {len(a)} rows, {argv[3]}: {len(b)}")
    d = sum(x != y for x, y in zip(a, b))
    print(f"rows {len(a)}: top-1 differs in {d} rows ({100.0 * d / len(a):.2f} %)")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--diff":
        return diff(sys.argv)
    if len(sys.argv) == 5 and sys.argv[1] == "--rows":
        return rows_differ(sys.argv)
    if len(sys.argv) not in (4, 6):
        sys.exit(__doc__)
    n_ctx = int(sys.argv[3])
    n = 0
    kld_x = kld_l = 0.0
    same_x = same_l = 0
    nll_x = nll_l = 0.0
    for b, o, t in zip(rows(sys.argv[1], n_ctx), rows(sys.argv[2], n_ctx),
                       targets(sys.argv[1], n_ctx)):
        assert b.shape == o.shape, "the two files' rows differ in size"
        n += 1
        nll_x -= float(b[t])
        pb = np.exp(b.astype(np.float64))
        fin = pb > 0
        kx = float(np.sum(pb[fin] * (b[fin].astype(np.float64) - o[fin].astype(np.float64))))
        top_o = int(np.argmax(o))
        top_b = int(np.argmax(b))
        q = llama16(b)
        nll_l -= float(q[t])
        keep = q > np.float32(-16)
        pq = np.exp(q[keep]).astype(np.float32).astype(np.float64)
        kl = float(np.sum(pq * (q[keep].astype(np.float64) - o[keep].astype(np.float64))))
        kld_x += kx
        kld_l += kl
        same_x += top_b == top_o
        same_l += int(np.argmax(q)) == top_o
    print(f"rows {n}")
    print(f"exact (promptscore)        Mean KLD {kld_x / n:.7f}  Same top p "
          f"{100.0 * same_x / n:.3f} % ({same_x})  PPL(base) {np.exp(nll_x / n):.6f}")
    print(f"llama.cpp's 16-bit base    Mean KLD {kld_l / n:.7f}  Same top p "
          f"{100.0 * same_l / n:.3f} % ({same_l})  PPL(base) {np.exp(nll_l / n):.6f}")
    if len(sys.argv) == 6:
        versus_llama(sys.argv, n_ctx)


if __name__ == "__main__":
    main()
