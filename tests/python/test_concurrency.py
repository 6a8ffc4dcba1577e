"""score_many releases the GIL while it scores (another Python thread makes progress inside its
C calls), and memory stays flat over many calls (no leak of results, sessions or models)."""
import gc
import os
import sys
import threading
import time

import numpy as np

import promptscore
from conftest import STORIES, need

TEXT = ("Once upon a time, there was a little girl named Lily. She loved to play outside in "
        "the sun. One day, she saw a big red ball in the park. ")


def test_second_thread_progresses_inside_score_batch():
    """With a switch interval of 30 s, a thread holding the GIL in Python keeps it: the counter
    thread runs only while the scoring thread is in a call that released the GIL. The counter's
    advance is measured across each ps_score_batch call alone (a wrapper around the ctypes
    function), so it counts progress made while several sequences were being scored in C."""
    m = promptscore.Model(need(STORIES), threads=1, cache_mb=0)
    real = promptscore._C.ps_score_batch
    count = [0]
    stop = threading.Event()
    deltas = []

    def wrapped(*args):
        before = count[0]
        st = real(*args)
        deltas.append(count[0] - before)
        return st

    def counter():
        while not stop.is_set():
            count[0] += 1
            time.sleep(0)  # gives the GIL back at once, so the scorer never waits on it

    old = sys.getswitchinterval()
    promptscore._C.ps_score_batch = wrapped
    t = threading.Thread(target=counter)
    try:
        sys.setswitchinterval(30.0)
        t.start()
        prompts = [TEXT * 3 + str(i) for i in range(64)]
        results = list(m.score_many(prompts, top_k=5, max_seqs=16))
    finally:
        stop.set()
        sys.setswitchinterval(old)
        promptscore._C.ps_score_batch = real
        t.join()
        m.close()
    assert len(results) == 64
    assert len(deltas) == 4  # 64 prompts, 16 per ps_score_batch call
    assert sum(deltas) > 0, deltas  # 0 with a binding that kept the GIL (ctypes.PyDLL)


def test_threads_share_a_model():
    with promptscore.Model(need(STORIES), threads=1) as m:
        ref = m.score(TEXT, top_k=3)
        out, errors = [], []

        def work():
            try:
                for r in m.score_many([TEXT] * 8, top_k=3, max_seqs=4):
                    out.append(r)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors and len(out) == 32
        for r in out:
            assert np.array_equal(r.logprobs[1:].view(np.uint32), ref.logprobs[1:].view(np.uint32))


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_memory_flat_over_1000_scores():
    """1,000 results of 150 tokens x top-50 are ~60 KB each of C memory and as much of numpy:
    a leak of either would grow the process by tens of MB; the budget is 12 MB."""
    with promptscore.Model(need(STORIES), threads=2) as m:
        ids = m.tokenize(TEXT * 3)[:150]
        for _ in range(100):  # warm up: allocator pools, token texts, session buffers
            m.score(ids, top_k=50)
        gc.collect()
        before = rss_bytes()
        for i in range(500):
            r = m.score(ids, top_k=50)
            assert r.top_ids.shape == (len(ids), 50)
        for r in m.score_many([ids] * 500, top_k=50, max_seqs=16):
            pass
        gc.collect()
        grown = rss_bytes() - before
    assert grown < 12 << 20, "RSS grew by %.1f MB over 1,000 scores" % (grown / 2**20)


def test_memory_flat_over_models():
    """Each Model holds a session with a 2,048-position KV cache (~5 MB on stories260K) and a
    thread pool; 100 load/close rounds that leaked them would grow by hundreds of MB."""
    for _ in range(5):
        with promptscore.Model(need(STORIES), threads=2) as m:
            m.score("warm up")
    gc.collect()
    before = rss_bytes()
    for _ in range(100):
        m = promptscore.Model(STORIES, threads=2)
        m.score("Once upon a time")
        m.close()
    for _ in range(50):  # dropped without close(): freed by the garbage collector
        promptscore.Model(STORIES, threads=2).score("hi")
    gc.collect()
    grown = rss_bytes() - before
    assert grown < 24 << 20, "RSS grew by %.1f MB over 150 models" % (grown / 2**20)


def test_close_while_another_thread_scores():
    """close() from one thread while another is inside score_many: the call in flight ends
    first, the next group sees the model closed (InvalidArgumentError), nothing crashes."""
    m = promptscore.Model(need(STORIES), threads=1)
    got, errors = [], []
    started = threading.Event()

    def work():
        try:
            for r in m.score_many([TEXT * 2] * 400, top_k=2, max_seqs=8):
                got.append(r)
                started.set()
        except promptscore.Error as e:
            errors.append(e)
        finally:
            started.set()

    t = threading.Thread(target=work)
    t.start()
    started.wait(30)
    m.close()
    t.join()
    assert m.closed and got
    assert len(got) == 400 or (len(errors) == 1 and "closed" in str(errors[0]))
    assert all(np.isfinite(r.logprobs[1:]).all() for r in got)
