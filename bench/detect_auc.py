#!/usr/bin/env python3
"""bench/detect_auc.py — how well `score --detect`'s scores separate a model's own kind of text
from other text: ROC AUC per score (docs/figures.md, "Contamination scores").

Scores every line of two plain-text files (one prompt per line; the first taken as the
positives, "seen-like", the second as the negatives) with
    promptscore score -m MODEL --detect --min-k 10,20,50 [--compare REF]
and prints a Markdown table: for each score its AUC with positives ranked high, where each
score is oriented as its reference code means it (min_k and min_k_pp: higher = member;
zlib_ratio and ref_ratio, which are losses: lower = member, so they are negated). The AUC is
the Mann-Whitney statistic (ties count one half); a null score (an empty Min-K selection)
ranks lowest.

Usage:
  bench/detect_auc.py [--bin build/promptscore] -m MODEL.gguf [--compare REF.gguf]
                      POSITIVES.txt NEGATIVES.txt
Example (the figure in docs/figures.md):
  bench/detect_auc.py -m ../shared/models/stories260K.gguf \\
      bench/detect/stories.txt bench/detect/other.txt
"""
import argparse
import json
import math
import subprocess
import sys


def scores(binary, model, compare, path, ks):
    lines = [l.rstrip("\n") for l in open(path, encoding="utf-8") if l.strip()]
    inp = "".join(json.dumps({"id": i, "prompt": t}) + "\n" for i, t in enumerate(lines))
    cmd = [binary, "score", "-m", model, "--detect", "--min-k", ",".join(map(str, ks)), "-k", "0"]
    if compare:
        cmd += ["--compare", compare]
    out = subprocess.run(cmd, input=inp, capture_output=True, text=True, check=True).stdout
    rows = []
    for l in out.splitlines():
        x = json.loads(l)
        if "detect" not in x:
            sys.exit("detect_auc: line %s: %s" % (x.get("id"), x.get("error", {}).get("message")))
        d = x["detect"]
        r = {}
        for k in ks:
            r["min_k %d%%" % k] = d["min_k"][str(k)]
            r["min_k_pp %d%%" % k] = d["min_k_pp"][str(k)]
        r["zlib_ratio"] = None if d["zlib_ratio"] is None else -d["zlib_ratio"]
        if "ref_ratio" in d:
            r["ref_ratio"] = None if d["ref_ratio"] is None else -d["ref_ratio"]
        r["mean_logprob (the loss attack)"] = x["mean_logprob"]  # for reference
        rows.append(r)
    return rows


def auc(pos, neg):
    def v(x):
        return -math.inf if x is None else x
    wins = 0.0
    for p in pos:
        for n in neg:
            wins += 1.0 if v(p) > v(n) else 0.5 if v(p) == v(n) else 0.0
    return wins / (len(pos) * len(neg))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/promptscore")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--compare")
    ap.add_argument("positives")
    ap.add_argument("negatives")
    a = ap.parse_args()
    ks = [10, 20, 50]
    P = scores(a.bin, a.model, a.compare, a.positives, ks)
    N = scores(a.bin, a.model, a.compare, a.negatives, ks)
    print("| score | AUC (%d vs %d lines) |" % (len(P), len(N)))
    print("|---|---|")
    for key in P[0]:
        print("| %s | %.3f |" % (key, auc([r[key] for r in P], [r[key] for r in N])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
