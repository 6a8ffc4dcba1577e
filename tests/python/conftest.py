"""Shared fixtures of the Python package's tests (run by tests/test_python.sh, which installs the
package into a fresh virtual environment first). The paths come from the environment:
PS_REPO (the repository), PS_BIN (the promptscore binary of the same build), PS_SHARED (the
shared models)."""
import json
import os
import subprocess

import numpy as np
import pytest

import promptscore

REPO = os.environ.get("PS_REPO", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BIN = os.environ.get("PS_BIN", os.path.join(REPO, "build", "promptscore"))
SHARED = os.environ.get("PS_SHARED", os.path.join(REPO, "..", "shared"))
STORIES = os.path.join(SHARED, "models", "stories260K.gguf")
TINY = os.path.join(SHARED, "models", "llama-2-tiny-random.gguf")


def need(path):
    if not os.path.exists(path):
        pytest.skip("%s is missing" % path)
    return path


@pytest.fixture(scope="session")
def stories():
    m = promptscore.Model(need(STORIES), threads=2)
    yield m
    m.close()


@pytest.fixture(scope="session")
def tiny():
    m = promptscore.Model(need(TINY), threads=2)
    yield m
    m.close()


def cli(*args, input=None):
    """Runs the promptscore binary; returns its stdout (str). Fails the test on a non-zero exit."""
    need(BIN)
    p = subprocess.run([BIN] + list(args), input=input, capture_output=True, text=True)
    assert p.returncode == 0, "promptscore %s: exit %d: %s" % (" ".join(args), p.returncode,
                                                                p.stderr[-2000:])
    return p.stdout


def cli_score(model_path, lines, *extra):
    """`promptscore score` over JSON Lines objects; returns the parsed output objects."""
    out = cli("score", "-m", model_path, "-t", "2", *extra,
              input="".join(json.dumps(o) + "\n" for o in lines))
    return [json.loads(l) for l in out.splitlines() if l.strip()]


def f32_bits(values):
    """JSON numbers (null = NaN) as float32 bit patterns."""
    a = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    return a.astype(np.float32).view(np.uint32)
