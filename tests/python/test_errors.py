"""Bad inputs: each raises the promptscore.Error subclass of the library's code, with its
message, and the interpreter survives (every case runs in this one process, then the model is
used again)."""
import os

import numpy as np
import pytest

import promptscore as ps
from conftest import SHARED, STORIES, need

E = ps


@pytest.fixture(scope="module")
def m():
    model = ps.Model(need(STORIES), threads=2)
    yield model
    model.close()


@pytest.fixture(scope="module")
def closed():
    model = ps.Model(need(STORIES), cache_mb=0)
    model.close()
    return model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    with open(STORIES, "rb") as f:
        data = f.read()
    (d / "truncated.gguf").write_bytes(data[:5000])
    (d / "notgguf.gguf").write_bytes(b"hello, this is not a GGUF file at all\n" * 10)
    (d / "empty.gguf").write_bytes(b"")
    bad_version = bytearray(data[:64])
    bad_version[4:8] = (99).to_bytes(4, "little")
    (d / "version.gguf").write_bytes(bytes(bad_version))
    return d


# (name, callable taking (model, closed model, files dir), expected class, text in the message)
CASES = [
    ("missing file", lambda m, c, d: ps.Model("/no/such/model.gguf"), E.FileIOError,
     "/no/such/model.gguf"),
    ("directory", lambda m, c, d: ps.Model(str(d)), E.FileIOError, "cannot load /"),
    ("empty file", lambda m, c, d: ps.Model(str(d / "empty.gguf")), E.Error, "empty.gguf"),
    ("not a gguf", lambda m, c, d: ps.Model(str(d / "notgguf.gguf")), E.FormatError,
     "notgguf.gguf"),
    ("truncated gguf", lambda m, c, d: ps.Model(str(d / "truncated.gguf")), E.FormatError,
     "truncated.gguf"),
    ("gguf version 99", lambda m, c, d: ps.Model(str(d / "version.gguf")), E.Error,
     "version.gguf"),
    ("file without weights", lambda m, c, d: ps.Model(os.path.join(SHARED, "vocab",
                                                             "ggml-vocab-llama-spm.gguf")),
     E.NotFoundError, "token_embd.weight"),
    ("path of wrong type", lambda m, c, d: ps.Model(123), E.ArgumentTypeError, "path"),
    ("path with NUL", lambda m, c, d: ps.Model("a\0b.gguf"), E.InvalidArgumentError, "NUL"),
    ("negative threads", lambda m, c, d: ps.Model(STORIES, threads=-1), E.InvalidArgumentError,
     "threads"),
    ("ctx of wrong type", lambda m, c, d: ps.Model(STORIES, ctx="512"), E.ArgumentTypeError,
     "ctx"),
    ("ctx 0", lambda m, c, d: ps.Model(STORIES, ctx=0), E.InvalidArgumentError, "ctx"),
    ("ctx too large", lambda m, c, d: ps.Model(STORIES, ctx=2**30), E.InvalidArgumentError,
     "n_ctx"),
    ("unknown act", lambda m, c, d: ps.Model(STORIES, act="bf16"), E.InvalidArgumentError, "act"),
    ("unknown kv_type", lambda m, c, d: ps.Model(STORIES, kv_type="q8"), E.InvalidArgumentError,
     "kv_type"),
    ("negative cache_mb", lambda m, c, d: ps.Model(STORIES, cache_mb=-5), E.InvalidArgumentError,
     "cache_mb"),
    ("closed: score", lambda m, c, d: c.score("hi"), E.InvalidArgumentError, "closed"),
    ("closed: tokenize", lambda m, c, d: c.tokenize("hi"), E.InvalidArgumentError, "closed"),
    ("closed: n_vocab", lambda m, c, d: c.n_vocab, E.InvalidArgumentError, "closed"),
    ("closed: score_many", lambda m, c, d: c.score_many(["hi"]), E.InvalidArgumentError,
     "closed"),
    ("closed: perplexity", lambda m, c, d: c.perplexity("hi there"), E.InvalidArgumentError,
     "closed"),
    ("closed: with", lambda m, c, d: c.__enter__(), E.InvalidArgumentError, "closed"),
    ("prompt int", lambda m, c, d: m.score(123), E.ArgumentTypeError, "prompt"),
    ("prompt bytes", lambda m, c, d: m.score(b"hi"), E.ArgumentTypeError, "prompt"),
    ("prompt None", lambda m, c, d: m.score(None), E.ArgumentTypeError, "prompt"),
    ("empty id list", lambda m, c, d: m.score([]), E.InvalidArgumentError, "empty"),
    ("empty text, no BOS", lambda m, c, d: m.score("", add_special=False),
     E.InvalidArgumentError, "prompt is empty"),
    ("id = n_vocab", lambda m, c, d: m.score([1, 512]), E.TokenRangeError, "512"),
    ("negative id", lambda m, c, d: m.score([1, -1, 3]), E.TokenRangeError, "-1"),
    ("id beyond int32", lambda m, c, d: m.score([1, 2**40]), E.TokenRangeError, "outside"),
    ("id beyond int64", lambda m, c, d: m.score([1, 2**70]), E.TokenRangeError, "outside"),
    ("float ids", lambda m, c, d: m.score([1.5, 2.0]), E.ArgumentTypeError, "int"),
    ("bool ids", lambda m, c, d: m.score([True, False]), E.ArgumentTypeError, "int"),
    ("2-d ids", lambda m, c, d: m.score([[1, 2], [3, 4]]), E.ArgumentTypeError, "flat"),
    ("ragged ids", lambda m, c, d: m.score([[1, 2], [3]]), E.ArgumentTypeError, "ints"),
    ("string ids", lambda m, c, d: m.score(["1", "2"]), E.ArgumentTypeError, "int"),
    ("float array", lambda m, c, d: m.score(np.ones(4)), E.ArgumentTypeError, "int"),
    ("prompt longer than the context", lambda m, c, d: m.score([1] * (m.n_ctx + 1)),
     E.ContextError, str(2049)),
    ("text longer than the context", lambda m, c, d: m.score("the cat " * 3000),
     E.ContextError, "context"),
    ("negative top_k", lambda m, c, d: m.score("hi", top_k=-1), E.InvalidArgumentError, "top_k"),
    ("top_k > n_vocab", lambda m, c, d: m.score("hi", top_k=513), E.InvalidArgumentError,
     "top_k"),
    ("top_k str", lambda m, c, d: m.score("hi", top_k="5"), E.ArgumentTypeError, "top_k"),
    ("top_k float", lambda m, c, d: m.score("hi", top_k=2.0), E.ArgumentTypeError, "top_k"),
    ("negative logprobs_from", lambda m, c, d: m.score("hi", logprobs_from=-1),
     E.InvalidArgumentError, "logprobs_from"),
    ("lone surrogate", lambda m, c, d: m.score("a\ud800b"), E.InvalidArgumentError, "Unicode"),
    ("tokenize None", lambda m, c, d: m.tokenize(None), E.ArgumentTypeError, "text"),
    ("tokenize a list", lambda m, c, d: m.tokenize([b"x"]), E.ArgumentTypeError, "text"),
    ("detokenize bytes", lambda m, c, d: m.detokenize(b"x", skip_special=True),
     E.ArgumentTypeError, "ids"),
    ("detokenize str", lambda m, c, d: m.detokenize("abc"), E.ArgumentTypeError, "ids"),
    ("detokenize out of range", lambda m, c, d: m.detokenize([5, 100000]), E.TokenRangeError,
     "100000"),
    ("score_many int", lambda m, c, d: m.score_many(5), E.ArgumentTypeError, "iterable"),
    ("score_many str", lambda m, c, d: m.score_many("abc"), E.ArgumentTypeError, "iterable"),
    ("score_many max_seqs 0", lambda m, c, d: m.score_many(["a"], max_seqs=0),
     E.InvalidArgumentError, "max_seqs"),
    ("score_many max_seqs 257", lambda m, c, d: m.score_many(["a"], max_seqs=257),
     E.InvalidArgumentError, "max_seqs"),
    ("score_many bad prompt", lambda m, c, d: list(m.score_many(["ok", [1, 9999], "ok"])),
     E.TokenRangeError, "prompt 1"),
    ("score_many too long", lambda m, c, d: list(m.score_many(["ok", [1] * 3000], max_seqs=4)),
     E.ContextError, "prompt 1"),
    ("perplexity mode", lambda m, c, d: m.perplexity("a b c", mode="exact"),
     E.InvalidArgumentError, "mode"),
    ("perplexity llama, short text", lambda m, c, d: m.perplexity("a b c", mode="llama"),
     E.InvalidArgumentError, "at least 1024 tokens"),
    ("perplexity stride > ctx", lambda m, c, d: m.perplexity("a b c d e f", ctx=4, stride=9),
     E.InvalidArgumentError, "stride"),
    ("perplexity one token", lambda m, c, d: m.perplexity("", ctx=8), E.InvalidArgumentError,
     "at least 2"),
    ("perplexity llama ctx 2", lambda m, c, d: m.perplexity("a " * 50, mode="llama", ctx=2),
     E.InvalidArgumentError, "ctx >= 3"),
    ("perplexity stride in llama mode", lambda m, c, d: m.perplexity("a", mode="llama",
                                                                     stride=4),
     E.InvalidArgumentError, "stride"),
]


def test_at_least_twenty_cases():
    assert len(CASES) >= 20


@pytest.mark.parametrize("name,call,cls,text", CASES, ids=[c[0] for c in CASES])
def test_bad_input(m, closed, files, name, call, cls, text):
    with pytest.raises(cls) as ei:
        call(m, closed, files)
    e = ei.value
    assert isinstance(e, ps.Error)
    assert isinstance(e.code, int) and e.code < 0
    assert text in str(e), str(e)
    assert e.message == str(e)
    # the model still works after the error
    assert np.isfinite(m.score("Once upon a time").logprobs[1:]).all()


def test_parse_error_carries_offset(files):
    with pytest.raises(ps.FormatError) as ei:
        ps.Model(str(files / "truncated.gguf"))
    assert ei.value.code == -4 and ei.value.offset >= 0


def test_score_many_yields_results_before_a_failure(m):
    it = m.score_many(["Once upon", [1, 4000], "a time"], max_seqs=8)
    first = next(it)
    assert first.n_tokens == len(m.tokenize("Once upon"))
    with pytest.raises(ps.TokenRangeError):
        next(it)


def test_wrong_types_are_also_type_errors(m):
    with pytest.raises(TypeError):
        m.score(3.5)
    with pytest.raises(ValueError):
        m.score([1, 99999])
