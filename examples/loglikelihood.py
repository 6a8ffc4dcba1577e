#!/usr/bin/env python3
"""lm-evaluation-harness's loglikelihood requests, answered with promptscore.

An lm-eval `loglikelihood` request is a (context, continuation) pair; the answer is
(sum of the continuation tokens' logprobs given the context, is_greedy: whether every
continuation token is the model's top-1 choice at its position). With promptscore:

    ctx_ids, cont_ids = encode_pair(model, context, continuation)   # lm-eval's split
    r = model.score(ctx_ids + cont_ids, top_k=1, logprobs_from=len(ctx_ids))
    loglikelihood = float(np.sum(r.logprobs[len(ctx_ids):], dtype=np.float64))
    is_greedy = bool((r.top_ids[len(ctx_ids):, 0] == cont_ids).all())

logprobs_from=len(ctx_ids) leaves the context positions empty (NaN / -1) and every value from
there on is bitwise what the full score gives; top_k=1 is all is_greedy needs. Requests are
sent through score_many (logprobs_from then takes each request's context length), so the choices of a multiple-choice question (one context, several
continuations) share the context's work through the prefix cache.

    python3 examples/loglikelihood.py -m model.gguf [-i requests.jsonl]

Input: JSON Lines {"context": str, "continuation": str} (without -i, a built-in example).
Output: one line per request, in order: {"loglikelihood": float, "is_greedy": bool,
"n_context": int, "n_continuation": int}.
"""
import argparse
import collections
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


def encode_pair(model, context, continuation):
    """lm-eval's HFLM._encode_pair: trailing spaces of the context move to the continuation;
    the continuation's ids are those of context + continuation past the context's ids (so a
    token spanning the boundary is tokenized as the model would see it). BOS leads the context
    when the model adds one (lm-eval adds it for such models), so an empty context is BOS."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = model.tokenize(context + continuation)
    ctx = model.tokenize(context)
    return ctx, whole[len(ctx):]


def loglikelihoods(model, requests, max_seqs=16):
    """Yields (loglikelihood, is_greedy, n_context, n_continuation) per (context,
    continuation), in order. score_many scores max_seqs requests per group, each with
    logprobs_from = its own context length (read in step with the prompts)."""
    pending = collections.deque()  # (n_context, continuation ids) handed over, not yet answered
    lengths = collections.deque()

    def prompts():
        for context, continuation in requests:
            ctx, cont = encode_pair(model, context, continuation)
            if not cont:
                raise ValueError("empty continuation for context %r" % context)
            pending.append((len(ctx), cont))
            lengths.append(len(ctx))
            yield ctx + cont

    def froms():
        while True:
            yield lengths.popleft()

    for r in model.score_many(prompts(), top_k=1, logprobs_from=froms(), max_seqs=max_seqs):
        n_ctx, cont = pending.popleft()
        assert r.logprobs_from == n_ctx
        ll = float(np.sum(r.logprobs[n_ctx:], dtype=np.float64))
        greedy = bool((r.top_ids[n_ctx:, 0] == np.asarray(cont, np.int32)).all())
        yield ll, greedy, n_ctx, len(cont)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-i", "--input", help="JSON Lines of {context, continuation}")
    ap.add_argument("-t", "--threads", type=int, default=None)
    ap.add_argument("--check", action="store_true",
                    help="also score each request alone with logprobs_from and check the "
                         "batched answer equals it")
    a = ap.parse_args(argv)
    if a.input:
        with open(a.input, encoding="utf-8") as f:
            reqs = [json.loads(l) for l in f if l.strip()]
    else:
        reqs = EXAMPLE
    pairs = [(q["context"], q["continuation"]) for q in reqs]
    with promptscore.Model(a.model, threads=a.threads) as m:
        for (context, continuation), (ll, greedy, n_ctx, n_cont) in zip(
                pairs, loglikelihoods(m, pairs)):
            if a.check:
                ctx, cont = encode_pair(m, context, continuation)
                r = m.score(ctx + cont, top_k=1, logprobs_from=len(ctx))
                assert np.isnan(r.logprobs[:len(ctx)]).all()
                assert float(np.sum(r.logprobs[len(ctx):], dtype=np.float64)) == ll
                assert bool((r.top_ids[len(ctx):, 0] == cont).all()) == greedy
            print(json.dumps({"loglikelihood": ll, "is_greedy": greedy, "n_context": n_ctx,
                              "n_continuation": n_cont}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
