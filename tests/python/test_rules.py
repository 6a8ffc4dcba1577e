"""The server's (and `promptscore score`'s) rules, in Python: an empty text prompt is refused
with the same words ("prompt is empty"), not scored as a BOS-only result; a boolean option
takes True or False only (the server answers 400 to "stats": "yes"), never a truthy value."""
import numpy as np
import pytest

import promptscore as ps
from conftest import STORIES, cli_score, need


@pytest.fixture(scope="module")
def m():
    model = ps.Model(need(STORIES), threads=2)
    yield model
    model.close()


def test_cli_and_server_refuse_the_same():
    """What the Python rules mirror: `promptscore score`'s answers to these lines (the server
    reads a request with the same code, src/front/request.c, "stats" included)."""
    out = cli_score(STORIES, [{"prompt": ""}, {"prompt": "hi", "add_special_tokens": 1},
                              {"prompt": "hi", "parse_special": "yes"}])
    assert out[0]["error"]["message"].endswith("prompt is empty")
    assert "add_special_tokens must be true or false" in out[1]["error"]["message"]
    assert "parse_special must be true or false" in out[2]["error"]["message"]


@pytest.mark.parametrize("add_special", [True, False])
def test_empty_text_prompt_refused(m, add_special):
    with pytest.raises(ps.InvalidArgumentError, match="prompt is empty"):
        m.score("", add_special=add_special)
    with pytest.raises(ps.InvalidArgumentError, match="prompt is empty"):
        m.score("", top_k=3, stats=True)


def test_empty_prompt_in_score_many(m):
    it = m.score_many(["Once upon a time", "", "ok"])
    first = next(it)
    assert len(first) > 1
    with pytest.raises(ps.InvalidArgumentError, match="prompt 1: prompt is empty"):
        next(it)
    with pytest.raises(ps.InvalidArgumentError, match="prompt 0: prompt is empty"):
        list(m.score_many([""], max_seqs=1))
    # an empty id list as before
    with pytest.raises(ps.InvalidArgumentError, match="prompt is empty"):
        m.score([])


def test_blank_text_is_scored(m):
    """A non-empty text is scored; "prompt is empty" is about the text, not the tokens."""
    assert len(m.score(" ")) >= 1


NOT_BOOLS = ["yes", "false", 1, 0, None, 1.0, [], "True"]
OPTIONS = [
    ("score", "stats", lambda m, v: m.score("hi", stats=v)),
    ("score", "add_special", lambda m, v: m.score("hi", add_special=v)),
    ("score", "parse_special", lambda m, v: m.score("hi", parse_special=v)),
    ("score_many", "stats", lambda m, v: m.score_many(["hi"], stats=v)),
    ("score_many", "add_special", lambda m, v: m.score_many(["hi"], add_special=v)),
    ("score_many", "parse_special", lambda m, v: m.score_many(["hi"], parse_special=v)),
    ("tokenize", "add_special", lambda m, v: m.tokenize("hi", add_special=v)),
    ("tokenize", "parse_special", lambda m, v: m.tokenize("hi", parse_special=v)),
]


@pytest.mark.parametrize("where,name,call", OPTIONS, ids=["%s-%s" % o[:2] for o in OPTIONS])
def test_boolean_options_take_bools_only(m, where, name, call):
    for v in NOT_BOOLS:
        with pytest.raises(ps.ArgumentTypeError, match="%s must be True or False" % name) as e:
            r = call(m, v)
            if where == "score_many":
                list(r)
        assert isinstance(e.value, TypeError) and isinstance(e.value, ValueError)
    for v in (True, False, np.bool_(True), np.bool_(False)):
        r = call(m, v)
        if where == "score_many":
            r = list(r)
        assert r is not None
    # the model is still usable after every refusal
    assert len(m.score("Once upon a time")) > 1


def test_bool_option_values_mean_what_they_say(m):
    a = m.score("Once upon a time", stats=np.bool_(True))
    assert a.entropy is not None
    b = m.score("Once upon a time", stats=False)
    assert b.entropy is None
    assert m.tokenize("hi", add_special=False) == m.tokenize("hi", add_special=np.bool_(False))
