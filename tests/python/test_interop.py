"""What users of llama-cpp-python, vLLM and minicons reach for: Result.prompt_offsets (equal to
the CLI's prompt_offset), Result.token_bytes, Result.to_dict() (equal to the parsed CLI line,
for several options), detokenize(ids, skip_special), tokenize of bytes, real signatures in
help(), and file errors that are also OSError / FileNotFoundError / PermissionError."""
import errno
import inspect
import json
import os
import pydoc

import numpy as np
import pytest

import promptscore as ps
from promptscore import _result
from conftest import STORIES, cli_score, need

PROMPTS = [
    "Once upon a time, there was a little girl named Lily.",
    "  two  spaces\nand a newline \u00e9\u4e2d\U0001F600!",
    "h\u00e9llo w\u00f6rld \u2603 \u65e5\u672c <s> and </s> end",
    "Once<s> upon </s>a <|endoftext|>b\u00e9</s> end",
    "<s>A b c",
    "x",
]


def offsets_as_cli(r):
    return [None if r.prompt_offsets is None or v < 0 else int(v)
            for v in (r.prompt_offsets if r.prompt_offsets is not None else [0] * r.n_tokens)]


@pytest.mark.parametrize("flags", [(), ("--no-bos",), ("--no-parse-special",)])
def test_prompt_offsets_equal_cli(stories, flags):
    outs = cli_score(STORIES, [{"prompt": p, "logprobs": 0} for p in PROMPTS], *flags)
    kw = {"add_special": "--no-bos" not in flags,
          "parse_special": "--no-parse-special" not in flags}
    many = list(stories.score_many(PROMPTS, max_seqs=3, **kw))
    for p, o, rm in zip(PROMPTS, outs, many):
        r = stories.score(p, **kw)
        assert r.token_ids.tolist() == o["logprobs"]["token_ids"]
        assert r.prompt_offsets is not None and r.prompt_offsets.dtype == np.int64
        assert offsets_as_cli(r) == o["logprobs"]["prompt_offset"], p
        assert offsets_as_cli(rm) == o["logprobs"]["prompt_offset"], p
        # each offset is where the token's bytes are in the prompt's bytes (a SentencePiece
        # word token after the text's start or a special token: without its added space)
        b = p.encode("utf-8")
        for i, off in enumerate(r.prompt_offsets.tolist()):
            if off >= 0:
                t = r.token_bytes[i]
                assert b[off:].startswith(t) or b[off:].startswith(t[1:]), (p, i, t, off)
    # after special-token text the offsets go on (not null to the end)
    r = stories.score(PROMPTS[3])
    assert r.prompt_offsets[-1] == len(PROMPTS[3].encode()) - 2  # "nd"
    # an id prompt has none, as the CLI's nulls
    assert stories.score([1, 403, 407]).prompt_offsets is None


def test_token_bytes(stories):
    p = "h\u00e9llo \u4e2d \U0001F600 <s> x"
    r = stories.score(p)
    assert len(r.token_bytes) == r.n_tokens and all(isinstance(t, bytes) for t in r.token_bytes)
    assert r.token_bytes[0] == b"<s>"
    # the bytes put together are the text the ids stand for (SentencePiece adds a space in
    # front, and after the special token "<s>")
    assert b"".join(r.token_bytes[1:]) == b" " + p.encode().replace(b"<s> x", b"<s>  x")
    # single bytes of a multi-byte character are kept as they are; tokens shows U+FFFD
    assert any(len(t) == 1 and t[0] >= 0x80 for t in r.token_bytes)
    for t, s in zip(r.token_bytes, r.tokens):
        assert _result._clean_text(t) == s


OPTIONS = [
    ({"top_k": 0}, []),
    ({"top_k": 3}, []),
    ({"top_k": 5, "stats": True}, ["--stats"]),
    ({"top_k": 2, "logprobs_from": 4}, []),
    ({"top_k": 1, "logprobs_from": 2, "stats": True}, ["--stats"]),
    ({"top_k": 512}, []),
]


@pytest.mark.parametrize("opts,flags", OPTIONS)
def test_to_dict_equals_cli_line(stories, opts, flags):
    lines = [{"id": i, "prompt": p, "logprobs": opts["top_k"],
              "logprobs_from": opts.get("logprobs_from", 0)} for i, p in enumerate(PROMPTS)]
    lines.append({"id": "ids", "prompt": [1, 403, 407, 261], "logprobs": opts["top_k"],
                  "logprobs_from": opts.get("logprobs_from", 0)})
    outs = cli_score(STORIES, lines, *flags)
    prompts = PROMPTS + [[1, 403, 407, 261]]
    many = list(stories.score_many(prompts, max_seqs=4, **opts))
    for line, o, rm in zip(lines, outs, many):
        r = stories.score(line["prompt"], **opts)
        d = r.to_dict(id=line["id"])
        assert d == o
        assert rm.to_dict(id=line["id"]) == o
        # the same text as the CLI writes, key order included, and floats that round-trip
        assert json.dumps(d) == json.dumps(o)
        back = json.loads(json.dumps(d))
        got = np.array([np.nan if v is None else v for v in back["logprobs"]["token_logprobs"]],
                       np.float64).astype(np.float32)
        assert np.array_equal(got.view(np.uint32)[r.logprobs_from or 1:],
                              r.logprobs.view(np.uint32)[r.logprobs_from or 1:])


def test_to_dict_with_compare(stories):
    p = PROMPTS[0]
    o = cli_score(STORIES, [{"prompt": p, "logprobs": 2}], "--compare", STORIES)[0]
    d = stories.score(p, top_k=2, compare=stories).to_dict()
    assert d == o and "kld_mean" in d and list(d)[-3:] == ["kld_mean", "same_top1_pct", "n_tokens"]


def test_f32_json_rules():
    # the shortest "%.{6..9}g" that reads back to the same float32, as src/front/json.c
    rng = np.random.default_rng(7)
    vals = np.concatenate([
        rng.standard_normal(20000).astype(np.float32) * np.float32(10.0),
        -np.abs(rng.standard_normal(5000)).astype(np.float32) * np.float32(1e-7),
        (rng.integers(0, 2**31 - 2**23, 20000, dtype=np.int64).astype(np.uint32)
         .view(np.float32)),  # every positive finite exponent
    ])
    for v in vals.tolist():
        v = np.float32(v)
        j = ps._result._f32_json(v)
        assert isinstance(j, float) and np.float32(j).view(np.uint32) == v.view(np.uint32), v
        # the first of "%.6g".."%.9g" that reads back as v (the test's simpler reading)
        first = next(t for t in ("%.*g" % (p, float(v)) for p in (6, 7, 8, 9))
                     if np.float32(float(t)) == v)
        assert j == float(first), (v, j, first)
    assert ps._result._f32_json(np.float32(-np.inf)) == -9999.0
    assert ps._result._f32_json(np.float32(np.nan)) is None
    assert ps._result._f32_json(np.float32(np.inf)) is None
    assert ps._result._f32_json(np.float32(0.1)) == 0.1


def test_detokenize(stories):
    s = "Once upon a time, there was a girl."
    assert stories.detokenize(stories.tokenize(s, add_special=False)) == s
    # with BOS first the BOS is "<s>" and the space after it stays
    assert stories.detokenize(stories.tokenize(s)) == "<s> " + s
    assert stories.detokenize(stories.tokenize(s), skip_special=True) == s
    t = "a </s> b"
    ids = stories.tokenize(t)
    assert stories.eos in ids
    assert "</s>" in stories.detokenize(ids)
    assert "</s>" not in stories.detokenize(ids, skip_special=True)
    assert stories.detokenize([], skip_special=True) == ""
    assert stories.detokenize([stories.bos, stories.eos], skip_special=True) == ""
    with pytest.raises(ps.TokenRangeError):
        stories.detokenize([1, 99999], skip_special=True)


def test_tokenize_bytes(stories):
    s = "h\u00e9llo \u4e2d"
    assert stories.tokenize(s.encode()) == stories.tokenize(s)
    assert stories.tokenize(bytearray(s.encode()), add_special=False) == \
        stories.tokenize(s, add_special=False)
    # bytes that are not UTF-8 are tokenized as they are: byte tokens
    ids = stories.tokenize(b"a\xff\xfe", add_special=False)
    r = stories.score([stories.bos] + ids)
    assert b"".join(r.token_bytes[1:]) == b" a\xff\xfe"
    with pytest.raises(ps.ArgumentTypeError):
        stories.tokenize(123)
    with pytest.raises(ps.ArgumentTypeError):
        stories.tokenize(["a"])


def test_real_signatures():
    expect = {
        "score": ["self", "prompt", "top_k", "logprobs_from", "add_special", "parse_special",
                  "stats", "compare", "detect", "min_k", "token_ids", "words"],
        "tokenize": ["self", "text", "add_special", "parse_special"],
        "detokenize": ["self", "ids", "skip_special"],
        "perplexity": ["self", "text", "ctx", "stride", "mode", "max_chunks", "compare"],
        "cache_stats": ["self"],
        "score_many": ["self", "prompts", "top_k", "logprobs_from", "max_seqs", "add_special",
                       "parse_special", "stats", "compare", "detect", "min_k", "token_ids",
                       "words"],
    }
    for name, params in expect.items():
        fn = getattr(ps.Model, name)
        sig = inspect.signature(fn)
        assert list(sig.parameters) == params, name
        assert fn.__doc__ and fn.__name__ == name
    assert inspect.signature(ps.Model.score).parameters["top_k"].default == 0
    assert list(inspect.signature(ps.Result.to_dict).parameters) == ["self", "id"]
    text = pydoc.render_doc(ps.Model, renderer=pydoc.plaintext)
    assert "score(self, prompt" in text and "detokenize(self, ids" in text


def test_missing_file_is_file_not_found(tmp_path):
    path = str(tmp_path / "no-such-model.gguf")
    with pytest.raises(FileNotFoundError) as ei:
        ps.Model(path)
    e = ei.value
    assert isinstance(e, ps.Error) and isinstance(e, ps.FileIOError)
    assert isinstance(e, ps.FileMissingError) and isinstance(e, OSError)
    assert e.errno == errno.ENOENT and e.filename == path and e.code == -3
    assert str(e).startswith("cannot load %s" % path) and e.status
    # caught by what a user of open() writes, and by promptscore.Error
    try:
        ps.Model(path)
    except OSError as oe:
        assert oe.errno == errno.ENOENT
    with pytest.raises(ps.Error):
        ps.Model(path)


def test_directory_and_unreadable_are_oserror(tmp_path, monkeypatch):
    with pytest.raises(ps.FileIOError) as ei:
        ps.Model(str(tmp_path))
    assert isinstance(ei.value, OSError) and ei.value.errno == errno.EISDIR
    assert not isinstance(ei.value, FileNotFoundError)
    f = tmp_path / "unreadable.gguf"
    f.write_bytes(b"GGUF")
    f.chmod(0)
    try:
        if os.geteuid() != 0:  # root reads it anyway
            with pytest.raises(PermissionError) as ei:
                ps.Model(str(f))
            assert isinstance(ei.value, ps.FilePermissionError)
            assert ei.value.errno == errno.EACCES
    finally:
        f.chmod(0o600)
    # the errno as the library met it (EACCES here) picks the class, whoever runs the test
    real_open = os.open

    def denied(path, *a, **k):
        if str(path).endswith("denied.gguf"):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, *a, **k)
    monkeypatch.setattr(os, "open", denied)
    with pytest.raises(PermissionError) as ei:
        ps.Model(str(tmp_path / "denied.gguf"))
    assert isinstance(ei.value, ps.FilePermissionError) and isinstance(ei.value, ps.Error)
    assert ei.value.errno == errno.EACCES


def test_not_found_key_is_not_a_file_error():
    vocab = os.path.join(os.path.dirname(os.path.dirname(STORIES)), "vocab",
                         "ggml-vocab-llama-spm.gguf")
    with pytest.raises(ps.NotFoundError) as ei:
        ps.Model(need(vocab))
    assert not isinstance(ei.value, OSError)
