"""Many models compared in one pass: Model.perplexity(compare=[...]) against `promptscore
perplexity --ppl-mode llama --compare A --compare B --json` (the same doubles and floats); the
base's own figures as without compare; each model's statistics as when compared alone; bad
compare lists raise."""
import json
import os
import subprocess
import tempfile

import numpy as np
import pytest

import promptscore
from conftest import BIN, STORIES, cli, need

TEXT = ("Once upon a time there was a little girl named Lily. She loved to play outside in "
        "the sun. One day she saw a big red ball in the park and ran to get it. ") * 12
CTX = 32


@pytest.fixture(scope="module")
def files():
    need(STORIES)
    d = tempfile.mkdtemp()
    paths = []
    for seed in (2, 3):
        p = os.path.join(d, "cmp%d.gguf" % seed)
        subprocess.run([BIN, "gen-model", "--preset", "tiny", "--vocab", STORIES, "--seed",
                        str(seed), "-o", p], check=True, capture_output=True)
        paths.append(p)
    t = os.path.join(d, "text.txt")
    with open(t, "w") as f:
        f.write(TEXT)
    yield paths, t
    for p in paths + [t]:
        os.remove(p)
    os.rmdir(d)


def test_perplexity_compare_matches_cli(files):
    paths, text = files
    out = cli("perplexity", "-m", STORIES, "--ppl-mode", "llama", "-c", str(CTX), "--chunks", "3",
              "--kv-type", "f32", "-t", "2", "--compare", paths[0], "--compare", paths[1],
              "-f", text, "--json")
    j = json.loads(out)
    assert isinstance(j, list) and len(j) == 2
    with promptscore.Model(STORIES, threads=2, ctx=CTX) as base, \
            promptscore.Model(paths[0], threads=2, ctx=CTX) as a, \
            promptscore.Model(paths[1], threads=2, ctx=CTX) as b:
        r = base.perplexity(TEXT, ctx=CTX, mode="llama", max_chunks=3, compare=[a, b])
        plain = base.perplexity(TEXT, ctx=CTX, mode="llama", max_chunks=3)
        assert r.perplexity == plain.perplexity and list(r.running) == list(plain.running)
        assert plain.compare == []
        assert [c["model"] for c in r.compare] == [os.path.basename(p) for p in paths]
        for c, o in zip(r.compare, j):
            assert o["model"] == c["model"]
            assert c["count"] == o["tokens_scored"]
            for k in ("ppl_q", "ppl_base", "kld_mean", "ln_ppl_ratio", "ppl_diff"):
                assert c[k] == o[k], k
            assert 100.0 * c["same_top"] == o["same_top_p_pct"]
            assert 100.0 * c["rms_dp"] == o["rms_dp_pct"]
            for k, ok in (("kld_max", "kld_max"), ("kld_median", "kld_median"),
                          ("kld_min", "kld_min")):  # floats, printed with %.9g
                assert np.float32(c[k]) == np.float32(o[ok]), k
            assert np.float32(c["kld_pct"][0]) == np.float32(o["kld_p99_9"])
        alone = base.perplexity(TEXT, ctx=CTX, mode="llama", max_chunks=3, compare=b)
        assert alone.compare == [r.compare[1]]
        with pytest.raises(promptscore.InvalidArgumentError):
            base.perplexity(TEXT, ctx=CTX, mode="llama", compare=[a, a])
        with pytest.raises(promptscore.InvalidArgumentError):
            base.perplexity(TEXT, ctx=CTX, compare=[a])  # sliding
        with pytest.raises(promptscore.ArgumentTypeError):
            base.perplexity(TEXT, ctx=CTX, mode="llama", compare=["x.gguf"])
