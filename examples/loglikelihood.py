#!/usr/bin/env python3
"""lm-evaluation-harness's loglikelihood requests, answered with promptscore.

An lm-eval `loglikelihood` request is a (context, continuation) pair; the answer is
(log P(continuation | context), is_greedy: whether every continuation token is the model's
top-1 choice at its position). promptscore tokenizes the pair by lm-eval's own rule and
answers it in one call:

    ll, is_greedy = model.loglikelihood(context, continuation)
    answers = model.loglikelihood_many([(context, continuation), ...])   # lm-eval's batch

loglikelihood_many scores 16 pairs per group in shared forward passes, and the choices of a
multiple-choice question (one context, several continuations) share the context's work
through the prefix cache. The numbers are bitwise those of `promptscore score` on lines
{"context": ..., "continuation": ...} (continuation_logprob, is_greedy).

    python3 examples/loglikelihood.py -m model.gguf [-i requests.jsonl] [--check]

Input: JSON Lines {"context": str, "continuation": str} (without -i, a built-in example).
Output: one line per request, in order: {"loglikelihood": float, "is_greedy": bool,
"n_context": int, "n_continuation": int}.
"""
import argparse
import json
import sys

import numpy as np

import promptscore

EXAMPLE = [
    {"context": "Once upon a time, there was a little girl named", "continuation": " Lily"},
    {"context": "Once upon a time, there was a little girl named", "continuation": " Tom"},
    {"context": "Once upon a time, there was a little girl named", "continuation": " tree"},
    {"context": "The cat sat on the ", "continuation": "mat."},
    {"context": "", "continuation": "Once upon a time"},
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-i", "--input", help="JSON Lines of {context, continuation}")
    ap.add_argument("-t", "--threads", type=int, default=None)
    ap.add_argument("--check", action="store_true",
                    help="also score each pair's tokens with Model.score and check the answer "
                         "equals the sum and top-1 test done by hand")
    a = ap.parse_args(argv)
    if a.input:
        with open(a.input, encoding="utf-8") as f:
            reqs = [json.loads(l) for l in f if l.strip()]
    else:
        reqs = EXAMPLE
    pairs = [(q["context"], q["continuation"]) for q in reqs]
    with promptscore.Model(a.model, threads=a.threads) as m:
        for (context, continuation), (ll, greedy) in zip(pairs, m.loglikelihood_many(pairs)):
            ids, start = m.tokenize_pair(context, continuation)
            if a.check:
                r = m.score(ids, top_k=1, logprobs_from=start)
                total = 0.0
                for x in r.logprobs[start:]:
                    total += float(x)  # float32 terms added in order in double
                assert total == ll
                assert bool((r.top_ids[start:, 0] == ids[start:]).all()) == greedy
            print(json.dumps({"loglikelihood": ll, "is_greedy": greedy, "n_context": start,
                              "n_continuation": len(ids) - start}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
