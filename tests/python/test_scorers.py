"""(context, continuation) pairs and named tokens in Python, against `promptscore score`:
  - tokenize_pair equals a re-implementation of lm-evaluation-harness's TemplateLM
    loglikelihood / _encode_pair over Model.tokenize, on 50 pairs (trailing spaces and other
    whitespace, empty contexts, special-token text, a context of only spaces refused);
  - loglikelihood / loglikelihood_many equal the CLI's continuation_logprob and is_greedy bit
    for bit (and its token_ids / continuation_start), with and without shared contexts;
  - score(token_ids=) equals the CLI's token_id_logprobs (--token-ids and a line's own
    logprob_token_ids) bit for bit, and top_logprobs where an id is in the top-K;
  - bad input raises: an id out of range, a missing continuation, a pair that is not one."""
import os
import subprocess
import tempfile

import numpy as np
import pytest

import promptscore
from conftest import BIN, SHARED, STORIES, cli_score, need
from test_bitwise import assert_same_f32

CONTEXTS = ["Once upon a time", "Once upon a time ", "Once upon a time  ", "Once upon a time\n",
            "Once upon a time \t", "", "The cat sat on the", "Lily and Tom",
            "She said: <s>", "</s> He went", "Hello\u00a0", "x", "a b c ",
            "Once upon a time, there was a little girl named"]
CONTINUATIONS = [" there was", "there was", " Lily", "Lily", " <s>", "</s>", " tree.",
                 "\nThe end", "  two spaces", "!"]


def pairs50():
    out = []
    i = 0
    while len(out) < 50:
        c = CONTEXTS[i % len(CONTEXTS)]
        t = CONTINUATIONS[(i * 7 + i // len(CONTEXTS)) % len(CONTINUATIONS)]
        out.append((c, t))
        i += 1
    return out


def lm_eval_encode(model, context, continuation):
    """lm-eval's TemplateLM.loglikelihood + _encode_pair, over this package's tokenize
    (encode = tokenize with the model's BOS, as lm-eval's add_bos_token)."""
    if context == "":
        prefix = model.bos if model.bos >= 0 else model.eos
        return [prefix], model.tokenize(continuation, add_special=False)
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = model.tokenize(context + continuation)
    ctx = model.tokenize(context)
    return ctx, whole[len(ctx):]


@pytest.fixture(scope="module")
def bpe_path():
    """A generated model with gpt-2's byte-level BPE vocabulary (no BOS added; BOS = EOS)."""
    vocab = need(os.path.join(SHARED, "vocab", "ggml-vocab-gpt-2.gguf"))
    d = tempfile.mkdtemp()
    p = os.path.join(d, "bpe.gguf")
    subprocess.run([BIN, "gen-model", "--preset", "tiny", "--vocab", vocab, "-o", p],
                   check=True, capture_output=True)
    return p


@pytest.mark.parametrize("which", ["spm", "bpe"])
def test_rule_50_pairs(stories, bpe_path, which):
    pairs = pairs50()
    assert len(pairs) == 50 and any(c == "" for c, _ in pairs)
    path = STORIES if which == "spm" else bpe_path
    model = stories if which == "spm" else promptscore.Model(path, threads=2)
    try:
        outs = cli_score(path, [{"context": c, "continuation": t} for c, t in pairs], "-k", "1")
        for (c, t), o in zip(pairs, outs):
            ctx, cont = lm_eval_encode(model, c, t)
            ids, start = model.tokenize_pair(c, t)
            assert ids.tolist() == ctx + cont and start == len(ctx), (c, t)
            assert o["logprobs"]["token_ids"] == ctx + cont and o["continuation_start"] == len(ctx)
            assert model.loglikelihood(c, t) == (o["continuation_logprob"], o["is_greedy"])
    finally:
        if model is not stories:
            model.close()
    # a context of only whitespace without BOS leaves nothing to condition on
    with pytest.raises(promptscore.InvalidArgumentError):
        stories.tokenize_pair("  ", "x", add_special=False)
    ids, start = stories.tokenize_pair("  ", "x")
    assert start == 1 and ids[0] == stories.bos


def test_loglikelihood_bitwise(stories):
    pairs = pairs50()
    outs = cli_score(STORIES, [{"context": c, "continuation": t} for c, t in pairs], "-k", "1")
    got = stories.loglikelihood_many(pairs, max_seqs=7)
    assert len(got) == 50
    for (c, t), o, (ll, greedy) in zip(pairs, outs, got):
        assert ll == o["continuation_logprob"] and greedy == o["is_greedy"], (c, t)
        assert stories.loglikelihood(c, t) == (ll, greedy)
        lp = o["logprobs"]["token_logprobs"][o["continuation_start"]:]
        total = 0.0  # float32 terms added in order in double
        for x in np.array(lp, np.float32):
            total += float(x)
        assert ll == total
    assert not all(g for _, g in got)
    ll, greedy = stories.loglikelihood("Once upon a", " time")
    assert greedy and -0.01 < ll < 0


def test_token_ids_bitwise(stories):
    prompts = ["Once upon a time there was a little girl named Lily.", "x",
               "The cat sat on the mat."]
    ids = [1, 2, 13, 400, 511, 13]
    outs = cli_score(STORIES, [{"prompt": p} for p in prompts], "-k", "5", "--token-ids",
                     ",".join(map(str, ids)))
    own = cli_score(STORIES, [{"prompt": p, "token_ids_logprob": ids[:2]} for p in prompts],
                    "--token-ids", "7")
    for p, o, w in zip(prompts, outs, own):
        r = stories.score(p, top_k=5, token_ids=ids)
        tl = r.token_id_logprobs
        assert tl.dtype == np.float32 and tl.shape == (r.n_tokens, len(ids))
        want = o["logprobs"]["token_id_logprobs"]
        assert want[0] is None and np.all(np.isnan(tl[0]))
        for i in range(1, r.n_tokens):
            assert_same_f32(tl[i], want[i], "token_id_logprobs[%d]" % i)
            for j, t in enumerate(ids):
                k = np.nonzero(r.top_ids[i] == t)[0]
                if len(k):
                    assert tl[i, j].tobytes() == r.top_logprobs[i, k[0]].tobytes()
        assert w["logprobs"]["token_id_logprobs"][1] == want[1][:2]  # the line's own list wins
        rs = list(stories.score_many([p], top_k=5, token_ids=ids))
        assert rs[0].token_id_logprobs.tobytes() == tl.tobytes()
        masked = stories.score(p, top_k=5, token_ids=ids, logprobs_from=2)
        assert np.all(np.isnan(masked.token_id_logprobs[:2]))
        assert masked.token_id_logprobs[2:].tobytes() == tl[2:].tobytes()
    assert stories.score(prompts[0]).token_id_logprobs is None


def test_bad_input(stories):
    with pytest.raises(promptscore.TokenRangeError):
        stories.score("Once", token_ids=[1, stories.n_vocab])
    with pytest.raises(promptscore.InvalidArgumentError):
        stories.loglikelihood("Once upon", "")
    with pytest.raises(promptscore.ArgumentTypeError):
        stories.loglikelihood_many(["not a pair"])
    with pytest.raises(promptscore.ArgumentTypeError):
        stories.loglikelihood(3, "x")
