"""Per-position statistics (stats=True: entropy, rank) and two-model comparison (compare=: kld,
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
