"""Per-position statistics (stats=True: entropy, rank, varentropy), the contamination scores
(detect=True, min_k=) and two-model comparison (compare=: kld,
same_top1, dp, kld_mean, same_top1_pct) against `promptscore score --stats --compare`: the same
float32 bits; a model against itself gives kld 0 and same_top1 1; bad compare models raise."""
import os
import subprocess
import tempfile

import numpy as np
import pytest

import promptscore
from conftest import BIN, STORIES, TINY, cli_score, need
from test_bitwise import assert_same_f32

PROMPTS = ["Once upon a time there was a little girl named Lily.",
           "The cat sat on the mat. It was happy", "x",
           "Tom and Sam went to the park to play with the ball."]


@pytest.fixture(scope="module")
def other_path():
    need(STORIES)
    d = tempfile.mkdtemp()
    p = os.path.join(d, "other.gguf")
    subprocess.run([BIN, "gen-model", "--preset", "tiny", "--vocab", STORIES, "-o", p],
                   check=True, capture_output=True)
    return p


def check_stats(r, lp):
    assert r.entropy.dtype == np.float32 and r.rank.dtype == np.int32
    assert_same_f32(r.entropy, lp["entropy"], "entropy")
    assert np.isnan(r.entropy[0]) and r.rank[0] == 0
    assert r.rank[1:].tolist() == lp["rank"][1:]


def check_compare(r, o):
    lp = o["logprobs"]
    assert_same_f32(r.kld, lp["kld"], "kld")
    assert_same_f32(r.dp, lp["dp"], "dp")
    assert r.same_top1.dtype == np.int8 and r.same_top1[0] == -1
    assert r.same_top1[1:].tolist() == lp["same_top1"][1:]
    if o.get("kld_mean") is not None:
        assert r.kld_mean == o["kld_mean"] and r.same_top1_pct == o["same_top1_pct"]
    else:
        assert np.isnan(r.kld_mean) and np.isnan(r.same_top1_pct)


def test_stats_bitwise(stories):
    outs = cli_score(STORIES, [{"prompt": p} for p in PROMPTS], "--stats")
    for p, o in zip(PROMPTS, outs):
        r = stories.score(p, top_k=5, stats=True)
        check_stats(r, o["logprobs"])
        assert r.kld is None and r.kld_mean is None
    for r, o in zip(stories.score_many(PROMPTS, top_k=5, stats=True), outs):
        check_stats(r, o["logprobs"])


@pytest.mark.parametrize("which", ["self", "other"])
def test_compare_bitwise(stories, other_path, which):
    path = STORIES if which == "self" else other_path
    outs = cli_score(STORIES, [{"prompt": p} for p in PROMPTS], "--stats", "--compare", path)
    with promptscore.Model(path, threads=2) as other:
        for cmp in ([stories, other] if which == "self" else [other]):
            for p, o in zip(PROMPTS, outs):
                r = stories.score(p, top_k=5, stats=True, compare=cmp)
                check_stats(r, o["logprobs"])
                check_compare(r, o)
                if which == "self":
                    assert np.all(r.kld[1:] == 0) and np.all(r.same_top1[1:] == 1)
                    assert r.kld_mean == 0 and r.same_top1_pct == 100.0
            rs = list(stories.score_many(PROMPTS, top_k=5, stats=True, compare=cmp))
            for r, o in zip(rs, outs):
                check_compare(r, o)
    # the base's own values are those without compare
    a = stories.score(PROMPTS[0], top_k=5)
    with promptscore.Model(path, threads=2) as other:
        b = stories.score(PROMPTS[0], top_k=5, compare=other)
    assert a.logprobs.tobytes() == b.logprobs.tobytes()
    assert a.top_logprobs.tobytes() == b.top_logprobs.tobytes()


def test_compare_bad(stories):
    t = promptscore.Model(need(TINY), threads=2)
    try:
        with pytest.raises(promptscore.Error):
            stories.score("Once upon", compare=t)
        with pytest.raises(promptscore.Error):
            list(stories.score_many(["a", "b"], compare=t))
    finally:
        t.close()
    with pytest.raises(promptscore.Error):
        stories.score("Once upon", compare=t)  # closed
    with pytest.raises(promptscore.Error):
        stories.score("Once upon", compare="not a model")


def detect_equal(d, o):
    """Result.detect against the CLI's object: the same doubles (null = NaN)."""
    j = o["detect"]
    for key in ("min_k", "min_k_pp"):
        assert sorted(d[key]) == sorted(int(k) for k in j[key])
        for k, v in d[key].items():
            w = j[key][str(k)]
            assert (np.isnan(v) and w is None) or v == w, (key, k, v, w)
    assert d["zlib_ratio"] == j["zlib_ratio"]
    assert ("ref_ratio" in d) == ("ref_ratio" in j)
    if "ref_ratio" in d:
        assert d["ref_ratio"] == j["ref_ratio"]


def test_varentropy_bitwise(stories):
    outs = cli_score(STORIES, [{"prompt": p} for p in PROMPTS], "--stats")
    for p, o in zip(PROMPTS, outs):
        r = stories.score(p, top_k=5, stats=True)
        assert r.varentropy.dtype == np.float32 and np.isnan(r.varentropy[0])
        assert_same_f32(r.varentropy, o["logprobs"]["varentropy"], "varentropy")
    assert stories.score(PROMPTS[0]).varentropy is None


@pytest.mark.parametrize("cmp", [False, True])
def test_detect_bitwise(stories, other_path, cmp):
    lines = [{"prompt": p} for p in PROMPTS if p != "x"] + [{"prompt": [1, 400, 300, 200, 17]}]
    extra = ["--detect", "--min-k", "10,20,100"] + (["--compare", other_path] if cmp else [])
    outs = cli_score(STORIES, lines, *extra)
    prompts = [l["prompt"] for l in lines]
    with promptscore.Model(other_path, threads=2) as other:
        c = other if cmp else None
        for p, o in zip(prompts, outs):
            r = stories.score(p, detect=True, min_k=[10, 20, 100], compare=c)
            detect_equal(r.detect, o)
            assert r.entropy is None and r.varentropy is None  # detect alone shows no arrays
        for r, o in zip(stories.score_many(prompts, detect=True, min_k=(10, 20, 100),
                                           compare=c), outs):
            detect_equal(r.detect, o)
    assert stories.score(PROMPTS[0]).detect is None
    assert list(stories.score(PROMPTS[0], detect=True).detect["min_k"]) == [20]


def test_detect_bad(stories):
    with pytest.raises(promptscore.InvalidArgumentError):
        stories.score([1], detect=True)  # one token: nothing scored
    for bad in (0, 101, [20, 0], []):
        with pytest.raises(promptscore.InvalidArgumentError):
            stories.score(PROMPTS[0], detect=True, min_k=bad)
    with pytest.raises(promptscore.InvalidArgumentError):
        stories.score(PROMPTS[0], min_k=20)  # without detect
    with pytest.raises(promptscore.Error):
        list(stories.score_many([PROMPTS[0], [1], PROMPTS[1]], detect=True))
