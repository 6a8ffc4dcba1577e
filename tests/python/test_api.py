"""Every public call of the package, on the shared models."""
import json
import math
import os
import sys

import numpy as np
import pytest

import promptscore
from conftest import STORIES, TINY, cli, need

STORY = ("Once upon a time, there was a little girl named Lily. She loved to play outside in "
         "the sun. One day, she saw a big red ball in the park. She ran to get it.\n")


def test_installed_package_is_used():
    # tests/test_python.sh runs these from a fresh virtual environment: the package and its
    # bundled library come from there, not from the source tree
    if os.environ.get("PS_EXPECT_VENV"):
        assert promptscore.__file__.startswith(sys.prefix)
        assert promptscore.lib_path().startswith(os.path.dirname(promptscore.__file__))
    assert promptscore.version() == promptscore.__version__


def test_model_facts(stories):
    assert stories.n_vocab == 512
    assert stories.arch == "llama"
    assert isinstance(stories.name, str) and stories.name
    assert stories.n_ctx > 0
    assert stories.bos == 1 and stories.eos == 2 and stories.add_bos
    assert "stories260K" in repr(stories) or stories.name in repr(stories)


def test_context_manager_and_close():
    with promptscore.Model(need(STORIES), ctx=64, cache_mb=0) as m:
        assert m.n_ctx == 64 and not m.closed
        assert m.cache_stats()["blocks"] == 0
        r = m.score("Once upon a time")
    assert m.closed and "closed" in repr(m)
    m.close()  # idempotent
    assert r.logprobs.shape == (len(r.token_ids),)  # results outlive the model
    assert r.tokens[0] == "<s>"


def test_tokenize_detokenize(stories):
    ids = stories.tokenize(STORY)
    assert ids[0] == stories.bos and all(isinstance(i, int) for i in ids)
    plain = stories.tokenize(STORY, add_special=False)
    assert plain == ids[1:]
    assert stories.detokenize(plain) == STORY
    assert stories.detokenize([]) == ""
    assert stories.detokenize(np.array(plain, dtype=np.int64)) == STORY
    # the CLI's tokenizer gives the same ids
    out = cli("tokenize", "-m", STORIES, "--json", input="Once upon a time")
    assert json.loads(out) == stories.tokenize("Once upon a time")
    out = cli("tokenize", "-m", STORIES, "--json", "--no-bos", "--no-parse-special",
              input="a</s> b")
    assert json.loads(out) == stories.tokenize("a</s> b", add_special=False, parse_special=False)
    # special tokens: parsed by default, plain text on request
    assert stories.tokenize("a</s>", add_special=False)[-1] == stories.eos
    assert stories.tokenize("a</s>", add_special=False, parse_special=False)[-1] != stories.eos


def test_score_result(stories):
    r = stories.score(STORY, top_k=5)
    n = len(stories.tokenize(STORY))
    assert len(r) == r.n_tokens == n
    assert r.token_ids.dtype == np.int32 and r.token_ids.shape == (n,)
    assert r.logprobs.dtype == np.float32 and np.isnan(r.logprobs[0])
    assert (r.logprobs[1:] <= 0).all()
    assert r.top_ids.dtype == np.int32 and r.top_ids.shape == (n, 5)
    assert r.top_logprobs.dtype == np.float32 and r.top_logprobs.shape == (n, 5)
    assert (r.top_ids[0] == -1).all()
    # top-1 is at least the token's own logprob; rows descend
    assert (r.top_logprobs[1:, 0] >= r.logprobs[1:]).all()
    assert (np.diff(r.top_logprobs[1:], axis=1) <= 0).all()
    assert math.isclose(r.sum_logprob, float(np.sum(r.logprobs[1:], dtype=np.float64)),
                        rel_tol=1e-12)
    assert r.mean_logprob == r.sum_logprob / (n - 1)
    assert r.perplexity == math.exp(-r.mean_logprob)
    assert "".join(r.tokens[1:]) == " " + STORY  # SentencePiece's space prefix
    assert r.text_offsets.dtype == np.int64 and r.text_offsets[0] == 0
    assert r.entropy is None and r.rank is None and r.kld is None and r.kld_mean is None
    # ids are verbatim and give the same answer
    r2 = stories.score(r.token_ids, top_k=5)
    assert np.array_equal(r2.logprobs.view(np.uint32)[1:], r.logprobs.view(np.uint32)[1:])
    r3 = stories.score(r.token_ids.tolist())
    assert r3.top_ids.shape == (n, 0)
    # the K column of a score does not change the logprobs
    assert np.array_equal(r3.logprobs[1:].view(np.uint32), r.logprobs[1:].view(np.uint32))


def test_score_top_k_full_vocab(stories):
    r = stories.score("hi", top_k=stories.n_vocab)
    assert r.top_ids.shape == (len(r), stories.n_vocab)
    assert sorted(r.top_ids[1].tolist()) == list(range(stories.n_vocab))


def test_logprobs_from(stories):
    full = stories.score(STORY, top_k=3)
    cont = stories.score(STORY, top_k=3, logprobs_from=10)
    assert np.isnan(cont.logprobs[:10]).all() and (cont.top_ids[:10] == -1).all()
    assert np.array_equal(cont.logprobs[10:].view(np.uint32), full.logprobs[10:].view(np.uint32))
    assert np.array_equal(cont.top_ids[10:], full.top_ids[10:])
    assert cont.sum_logprob == full.sum_logprob  # the CLI's sum: the whole prompt
    past = stories.score(STORY, logprobs_from=10**6)
    assert np.isnan(past.logprobs).all()


def test_score_many_equals_score(stories):
    prompts = [STORY[:n] for n in range(5, 120, 9)] + [[1, 2, 3, 4], "x"]
    got = list(stories.score_many(iter(prompts), top_k=2, max_seqs=5))
    assert len(got) == len(prompts)
    for p, r in zip(prompts, got):
        one = stories.score(p, top_k=2)
        assert np.array_equal(r.token_ids, one.token_ids)
        assert np.array_equal(r.logprobs[1:].view(np.uint32), one.logprobs[1:].view(np.uint32))
        assert np.array_equal(r.top_ids, one.top_ids)
    assert list(stories.score_many([])) == []
    gen = stories.score_many(prompts)
    assert iter(gen) is gen


def test_prefix_cache_is_used(stories):
    before = stories.cache_stats()["hits"]
    prompts = [STORY + " choice %d" % i for i in range(8)]
    list(stories.score_many(prompts, max_seqs=8))
    assert stories.cache_stats()["hits"] > before


def _cli_ppl(path, text, *args):
    f = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ps-py-ppl-%d.txt" % os.getpid())
    with open(f, "w") as fh:
        fh.write(text)
    try:
        return json.loads(cli("perplexity", "-m", path, "-t", "2", "-f", f, "--json", *args))
    finally:
        os.unlink(f)


@pytest.mark.parametrize("args", [{}, {"ctx": 48, "stride": 16}, {"ctx": 64}])
def test_perplexity_sliding_equals_cli(args):
    text = STORY * 12
    cli_args = []
    if "ctx" in args:
        cli_args += ["-c", str(args["ctx"])]
    if "stride" in args:
        cli_args += ["--stride", str(args["stride"])]
    ref = _cli_ppl(STORIES, text, *cli_args)
    with promptscore.Model(STORIES, ctx=args.get("ctx")) as m:
        r = m.perplexity(text, **args)
    assert r.mode == "sliding" == ref["mode"]
    assert r.perplexity == ref["perplexity"] and r.mean_nll == ref["mean_nll"]
    assert r.tokens_scored == ref["tokens_scored"] and r.n_tokens == ref["tokens"]
    assert r.windows == ref["windows"] and r.ctx == ref["ctx"] and r.stride == ref["stride"]
    assert math.isnan(r.perplexity_stderr) and r.running.size == 0


@pytest.mark.parametrize("path", [STORIES, TINY], ids=["stories260K", "tiny-random-f16"])
def test_perplexity_llama_equals_cli(path):
    need(path)
    text = STORY * 30
    # the CLI's llama mode takes llama-perplexity's f16-dot cache unless --kv-type says
    # otherwise; the library computes with its session's cache type
    ref = _cli_ppl(path, text, "--ppl-mode", "llama", "-c", "64", "--chunks", "9")
    with promptscore.Model(path, ctx=64, kv_type="f16-dot") as m:
        r = m.perplexity(text, mode="llama", ctx=64, max_chunks=9)
    ref32 = _cli_ppl(path, text, "--ppl-mode", "llama", "-c", "64", "--chunks", "9",
                     "--kv-type", "f32")
    with promptscore.Model(path, ctx=64) as m:
        assert m.perplexity(text, mode="llama", ctx=64, max_chunks=9).perplexity == \
            ref32["perplexity"] != ref["perplexity"]
    assert r.mode == "llama"
    assert r.perplexity == ref["perplexity"]
    assert r.perplexity_stderr == ref["perplexity_stderr"]
    assert r.mean_nll == ref["mean_nll"]
    assert r.tokens_scored == ref["tokens_scored"] and r.n_tokens == ref["tokens"]
    assert r.windows == ref["chunks"] == 9 and r.ctx == 64
    assert r.running.tolist() == ref["running"]


def test_perplexity_of_ids(stories):
    ids = stories.tokenize(STORY * 3)
    a = stories.perplexity(ids, ctx=32)
    b = stories.perplexity(STORY * 3, ctx=32)
    assert a.perplexity == b.perplexity and a.tokens_scored == len(ids) - 1


def test_threads_do_not_change_bits():
    with promptscore.Model(STORIES, threads=1) as a, promptscore.Model(STORIES, threads=3) as b:
        ra, rb = a.score(STORY, top_k=4), b.score(STORY, top_k=4)
        assert np.array_equal(ra.logprobs[1:].view(np.uint32), rb.logprobs[1:].view(np.uint32))
        assert np.array_equal(ra.top_ids, rb.top_ids)


def test_kv_type_and_act_options():
    with promptscore.Model(STORIES, act="f32", kv_type="f16") as m:
        r = m.score(STORY)
        assert np.isfinite(r.logprobs[1:]).all()


def test_error_attributes():
    with pytest.raises(promptscore.Error) as ei:
        promptscore.Model("/nonexistent/dir/model.gguf")
    e = ei.value
    assert isinstance(e, promptscore.FileIOError)
    assert e.code == -3 and e.status and "/nonexistent/dir/model.gguf" in str(e)
    assert e.offset == -1


def test_score_many_logprobs_from_per_prompt(stories):
    prompts = [STORY[:40], STORY[:60], STORY]
    froms = [3, 0, 9]
    got = list(stories.score_many(prompts, top_k=2, logprobs_from=iter(froms), max_seqs=2))
    for p, f, r in zip(prompts, froms, got):
        one = stories.score(p, top_k=2, logprobs_from=f)
        assert r.logprobs_from == f
        assert np.array_equal(np.isnan(r.logprobs), np.isnan(one.logprobs))
        ok = ~np.isnan(one.logprobs)
        assert np.array_equal(r.logprobs[ok].view(np.uint32), one.logprobs[ok].view(np.uint32))
        assert np.array_equal(r.top_ids, one.top_ids)
    with pytest.raises(promptscore.InvalidArgumentError):
        list(stories.score_many(prompts, logprobs_from=[1]))
    with pytest.raises(promptscore.ArgumentTypeError):
        stories.score_many(prompts, logprobs_from=1.5)
