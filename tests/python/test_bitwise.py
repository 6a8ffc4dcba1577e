"""The same prompt through `promptscore score` and through the package: the same float32 bits,
token ids, top ids and top logprobs, token texts, text offsets and sums."""
import numpy as np
import pytest

from conftest import STORIES, TINY, cli_score, need

PROMPTS = [
    "Once upon a time there was a little girl named Lily.",
    "The cat sat on the mat. It was happy",
    "x",
    "Tom and Sam went to the park to play with the ball. They had fun! Then it rained and "
    "they ran home to mom, who gave them warm milk and cookies.",
    "unicode: caf\u00e9 \u65e5\u672c \U0001f600 end",
    "special <s> text </s> here",
]
ID_PROMPTS = [[1, 400, 401, 402, 5, 6, 7], [0, 0, 0], [3]]


def assert_same_f32(py, cli_vals, what):
    py = np.asarray(py, dtype=np.float32)
    ref = np.array([np.nan if v is None else v for v in cli_vals], dtype=np.float64)
    ref = ref.astype(np.float32)
    assert py.shape == ref.shape, what
    assert np.array_equal(np.isnan(py), np.isnan(ref)), what
    ok = ~np.isnan(py)
    assert np.array_equal(py[ok].view(np.uint32), ref[ok].view(np.uint32)), what


def check_same(r, o, k):
    lp = o["logprobs"]
    assert r.token_ids.dtype == np.int32 and r.logprobs.dtype == np.float32
    assert r.token_ids.tolist() == lp["token_ids"]
    assert_same_f32(r.logprobs, lp["token_logprobs"], "logprobs")
    assert r.tokens == lp["tokens"]
    assert r.text_offsets.tolist() == lp["text_offset"]
    assert r.sum_logprob == o["sum_logprob"]
    if o.get("mean_logprob") is not None:
        assert r.mean_logprob == o["mean_logprob"]
        assert r.perplexity == o["perplexity"]
    assert r.top_ids.shape == (len(r.token_ids), k)
    from_ = r.logprobs_from
    for i, row in enumerate(lp["top_ids"]):
        if row is None:
            assert i == 0 or i < from_
            assert (r.top_ids[i] == -1).all()
            continue
        # the CLI's row: the top K, then the scored token when it is not among them
        ids = [e[0] for e in row[:k]]
        assert r.top_ids[i].tolist() == ids, "row %d" % i
        assert_same_f32(r.top_logprobs[i], [e[1] for e in row[:k]], "top row %d" % i)


@pytest.mark.parametrize("path", [STORIES, TINY], ids=["stories260K", "tiny-random-f16"])
@pytest.mark.parametrize("k", [0, 5])
def test_score_equals_cli(path, k):
    import promptscore
    need(path)
    with promptscore.Model(path, threads=2) as m:
        prompts = PROMPTS + [[i % m.n_vocab for i in p] for p in ID_PROMPTS]
        outs = cli_score(path, [{"prompt": p, "logprobs": k} for p in prompts])
        assert len(outs) == len(prompts)
        for p, o in zip(prompts, outs):
            check_same(m.score(p, top_k=k), o, k)


def test_logprobs_from_equals_cli(stories):
    p = PROMPTS[3]
    n_ctx = len(stories.tokenize(p)) // 2
    o, = cli_score(STORIES, [{"prompt": p, "logprobs": 3, "logprobs_from": n_ctx}])
    r = stories.score(p, top_k=3, logprobs_from=n_ctx)
    check_same(r, o, 3)
    assert np.isnan(r.logprobs[:n_ctx]).all() and not np.isnan(r.logprobs[n_ctx:]).any()


@pytest.mark.parametrize("max_seqs", [1, 4, 16])
def test_score_many_equals_cli_max_seqs(stories, max_seqs):
    # prompts that share prefixes (the prefix cache) and some that do not
    base = PROMPTS[3]
    prompts = [base[:20 + 7 * i] for i in range(12)] + PROMPTS
    outs = cli_score(STORIES, [{"prompt": p, "logprobs": 4} for p in prompts],
                     "--max-seqs", str(max_seqs))
    got = list(stories.score_many(prompts, top_k=4, max_seqs=max_seqs))
    assert len(got) == len(prompts)
    for r, o in zip(got, outs):
        check_same(r, o, 4)


def test_no_bos_and_no_parse_special_equal_cli(stories):
    p = PROMPTS[5]
    o, = cli_score(STORIES, [{"prompt": p, "logprobs": 2}], "--no-bos", "--no-parse-special")
    check_same(stories.score(p, top_k=2, add_special=False, parse_special=False), o, 2)
