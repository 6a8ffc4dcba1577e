"""A Model used by multiprocessing workers: with the fork start method the workers inherit a
Model whose thread pool already ran (its threads do not exist in a child: before the library
rebuilt them there, the first score in a worker waited for them forever); with spawn each
worker loads its own. Four workers score prompts and every result matches the parent's bit
for bit. A hang is a failure after a timeout, not a stuck suite."""
import multiprocessing
import os
import signal

import numpy as np
import pytest

import promptscore
from conftest import STORIES, need

TEXTS = ["Once upon a time, there was a little girl named Lily.",
         "She loved to play outside in the sun.",
         "One day, she saw a big red ball in the park.",
         "The dog ran after the cat, and the cat ran up a tree.",
         "Tom and Sue went to the shop to buy some bread.",
         "The bird sang a happy song in the morning.",
         "He was very sad because he lost his toy.",
         "They played together all day and had lots of fun."]
TIMEOUT_S = 60

_model = None  # the worker's Model: inherited (fork) or loaded by _init (spawn)


def _init(path):
    global _model
    if path is not None:
        _model = promptscore.Model(path, threads=2)


def _answer(r):
    return (r.token_ids.tobytes(), r.logprobs.tobytes(), r.top_ids.tobytes(),
            r.top_logprobs.tobytes())


def _work(i):
    return os.getpid(), i, _answer(_model.score(TEXTS[i], top_k=5))


def _run(method, path):
    global _model
    _model = promptscore.Model(need(STORIES), threads=4)
    try:
        want = [_answer(_model.score(t, top_k=5)) for t in TEXTS]  # the pool's threads ran
        ctx = multiprocessing.get_context(method)
        with ctx.Pool(4, initializer=_init, initargs=(path,)) as pool:
            job = pool.map_async(_work, range(len(TEXTS)), chunksize=1)
            try:
                got = job.get(TIMEOUT_S)
            except multiprocessing.TimeoutError:
                pool.terminate()
                pytest.fail("the %s workers did not answer in %d s (hung)" % (method, TIMEOUT_S))
        assert [g[1] for g in got] == list(range(len(TEXTS)))
        assert all(g[0] != os.getpid() for g in got)
        for g in got:
            assert g[2] == want[g[1]], "worker's result differs from the parent's: %r" % (
                TEXTS[g[1]],)
        # the parent's own pool still works after the fork
        assert _answer(_model.score(TEXTS[0], top_k=5)) == want[0]
    finally:
        _model.close()
        _model = None


def test_fork_workers_score_as_the_parent():
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork start method on this platform")
    _run("fork", None)


def test_spawn_workers_score_as_the_parent():
    _run("spawn", need(STORIES))


def test_os_fork_child_scores():
    """The issue's reproduction: os.fork() after a score on threads=4, then score in the child."""
    m = promptscore.Model(need(STORIES), threads=4)
    try:
        want = _answer(m.score(TEXTS[0], top_k=3))
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                signal.alarm(TIMEOUT_S)
                os.close(r)
                ok = _answer(m.score(TEXTS[0], top_k=3)) == want
                os.write(w, b"same" if ok else b"diff")
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        got = os.read(r, 16)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (
            "the child failed or hung (status %d)" % status)
        assert got == b"same"
    finally:
        m.close()


def test_results_are_bytes_of_the_same_arrays():
    """_answer compares the arrays' bytes: two equal results give equal tuples, a changed
    float32 bit does not (so the comparisons above can fail)."""
    m = promptscore.Model(need(STORIES), threads=1)
    try:
        a = m.score(TEXTS[1], top_k=2)
        b = m.score(TEXTS[1], top_k=2)
        assert _answer(a) == _answer(b)
        b.logprobs[1] = np.nextafter(b.logprobs[1], np.float32(0))
        assert _answer(a) != _answer(b)
    finally:
        m.close()
