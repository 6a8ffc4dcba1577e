#!/usr/bin/env python3
"""Benchmark: Model.score_many over N short prompts against `promptscore score --max-seqs` on
the same JSON Lines (a measurement to report, not a test).

    python3 examples/bench_score_many.py -m ../shared/models/stories260K.gguf \
        --bin build/promptscore [-n 1000] [--max-seqs 16] [-k 5] [-t 2] [--rounds 5]

Writes N prompts to a temporary JSONL ("prompt" text, BOS as the model says), then alternates
rounds: the CLI over the file (`score -m M -i FILE -o /dev/null --max-seqs S -k K -t T`) and
this process over the same texts (score_many(texts, top_k=K, max_seqs=S), results kept as numpy
arrays and their token texts built, as a caller would). Two figures per side, each the median
over the rounds: the whole run as a wall clock sees it (CLI: process start to exit, model load
included; Python: Model() to close()), and the scoring alone (CLI: the seconds on its summary
line, which start after loading; Python: the score_many loop). Prints each and the ratio
python / cli (below 1: Python faster). Both sides use a fresh prefix cache per round.
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

import promptscore

WORDS = ("once upon a time there was little girl named Lily she loved to play outside in the "
         "sun one day saw big red ball park ran get it Tom dog cat happy sad friend mom said "
         "went home tree bird sky flower water").split()


def prompts(n, seed=1):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = rng.randint(6, 24)
        s = " ".join(rng.choice(WORDS) for _ in range(k))
        out.append(s[0].upper() + s[1:] + ".")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--bin", default="build/promptscore")
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--max-seqs", type=int, default=16)
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)

    texts = prompts(a.n)
    fd, path = tempfile.mkstemp(suffix=".jsonl")
    with os.fdopen(fd, "w") as f:
        for t in texts:
            f.write(json.dumps({"prompt": t}) + "\n")
    cmd = [a.bin, "score", "-m", a.model, "-i", path, "-o", os.devnull, "--max-seqs",
           str(a.max_seqs), "-k", str(a.k), "-t", str(a.threads)]
    cli_wall, cli_score, py_wall, py_score = [], [], [], []
    tokens = 0
    try:
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True)
            cli_wall.append(time.perf_counter() - t0)
            if p.returncode != 0:
                sys.exit("cli failed: " + p.stderr)
            m = re.search(r"([0-9.]+)s\s*$", p.stderr.strip().splitlines()[-1])
            cli_score.append(float(m.group(1)))

            t0 = time.perf_counter()
            model = promptscore.Model(a.model, threads=a.threads)
            t1 = time.perf_counter()
            tokens = 0
            for r in model.score_many(texts, top_k=a.k, max_seqs=a.max_seqs):
                tokens += r.n_tokens
                r.tokens  # the token texts, as the CLI writes them
            t2 = time.perf_counter()
            model.close()
            py_score.append(t2 - t1)
            py_wall.append(time.perf_counter() - t0)
    finally:
        os.unlink(path)
    med = statistics.median
    print("prompts %d, tokens %d, --max-seqs %d, k %d, threads %d, rounds %d" %
          (a.n, tokens, a.max_seqs, a.k, a.threads, a.rounds))
    print("cli:    %s" % " ".join(cmd[:3] + ["..."] + cmd[5:]))
    print("wall    cli %.4fs  python %.4fs  python/cli %.3f" %
          (med(cli_wall), med(py_wall), med(py_wall) / med(cli_wall)))
    print("scoring cli %.4fs  python %.4fs  python/cli %.3f" %
          (med(cli_score), med(py_score), med(py_score) / med(cli_score)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
