"""examples/filter_corpus.py and examples/loglikelihood.py on the shared models, checked against
`promptscore score`."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, STORIES, TINY, cli_score, need

EX = os.path.join(REPO, "examples")


def run_example(name, *args):
    p = subprocess.run([sys.executable, os.path.join(EX, name)] + list(args),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout, p.stderr


@pytest.mark.parametrize("path", [STORIES, TINY], ids=["stories260K", "tiny-random-f16"])
def test_filter_corpus(tmp_path, path):
    need(path)
    texts = []
    for i in range(40):
        texts.append("Once upon a time there was a little girl number %d. She liked to play." % i)
        texts.append("zq xv purple quantum taxes %d elephant kitchen sings" % i)
    lines = [json.dumps({"text": t, "n": i}) for i, t in enumerate(texts)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(lines[:30]) + "\nnot json\n" + json.dumps({"x": 1}) + "\n" +
                      "\n".join(lines[30:]) + "\n")
    ref = cli_score(path, [{"prompt": t, "logprobs": 0} for t in texts])
    ppl = sorted(o["perplexity"] for o in ref)
    threshold = (ppl[len(ppl) // 2 - 1] + ppl[len(ppl) // 2]) / 2
    out = tmp_path / "kept.jsonl"
    _, err = run_example("filter_corpus.py", "-m", path, "-i", str(corpus), "-o", str(out),
                         "--max-ppl", repr(threshold), "-t", "2", "--max-seqs", "8")
    want = [l for l, o in zip(lines, ref) if o["perplexity"] < threshold]
    assert out.read_text().splitlines() == want
    assert 0 < len(want) < len(lines)
    assert "line/s" in err or "line]" in err  # the tqdm bar
    assert "kept %d of %d scored lines (2 unreadable or failed)" % (len(want), len(lines)) in err
    assert "tokens/s" in err.splitlines()[-1]


@pytest.mark.parametrize("path", [STORIES, TINY], ids=["stories260K", "tiny-random-f16"])
def test_loglikelihood(tmp_path, path):
    need(path)
    sys.path.insert(0, EX)
    try:
        import loglikelihood as ll_mod
    finally:
        sys.path.remove(EX)
    import promptscore
    reqs = ll_mod.EXAMPLE + [
        {"context": "Lily wanted to play with her  ", "continuation": "friend, Tom."},
        {"context": "He said: \"", "continuation": "Hello!\""},
    ]
    f = tmp_path / "req.jsonl"
    f.write_text("".join(json.dumps(q) + "\n" for q in reqs))
    out, _ = run_example("loglikelihood.py", "-m", path, "-i", str(f), "-t", "2", "--check")
    got = [json.loads(l) for l in out.splitlines()]
    assert len(got) == len(reqs)
    with promptscore.Model(path) as m:
        pairs = []
        for q in reqs:
            ids, start = m.tokenize_pair(q["context"], q["continuation"])
            pairs.append((ids[:start].tolist(), ids[start:].tolist()))
    ref = cli_score(path, [{"prompt": c + x, "logprobs": 1, "logprobs_from": len(c)}
                           for c, x in pairs])
    pair_lines = cli_score(path, [dict(q, logprobs=1) for q in reqs])
    greedy_seen = set()
    for (c, x), o, g, pl in zip(pairs, ref, got, pair_lines):
        lp = o["logprobs"]
        assert all(v is None for v in lp["token_logprobs"][:len(c)])
        total = 0.0
        for v in np.array(lp["token_logprobs"][len(c):], dtype=np.float64).astype(np.float32):
            total += float(v)
        assert g["loglikelihood"] == total == pl["continuation_logprob"]
        assert g["is_greedy"] == pl["is_greedy"]
        greedy = all(row[0][0] == t for row, t in zip(lp["top_ids"][len(c):], x))
        assert g["is_greedy"] == greedy
        assert (g["n_context"], g["n_continuation"]) == (len(c), len(x))
        greedy_seen.add(greedy)
    if path == STORIES:
        assert greedy_seen == {True, False}  # both answers occur on the trained model
