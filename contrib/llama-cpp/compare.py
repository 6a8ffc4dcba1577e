#!/usr/bin/python3
"""compare.py — promptscore against llama.cpp (lscore) on one model and one prompt.

    compare.py MODEL.gguf [--n 300] [--seed 7] [--max-id 500] [--lscore PATH]
               [--promptscore PATH] [-- PROMPTSCORE-SCORE-FLAGS...]

The prompt is BOS (id 1) then n-1 ids drawn with the seed from 3..max-id-1 (every generated
vocabulary has them). Prints, over the scored positions: the largest |difference| of the scored
token's logprob and of the top-5 logprobs, and how often the top-5 ids differ where their
logprobs are more than 1e-3 apart (a swap of near-equal values is counted apart); then the same
figures between llama.cpp with and without its repacked weights (LS_NOREPACK=1): llama.cpp's own
two CPU paths, the noise floor of the comparison. Exit 1 when a program fails.
"""
import argparse, json, os, random, subprocess, sys

ap = argparse.ArgumentParser()
ap.add_argument('model')
ap.add_argument('--n', type=int, default=300)
ap.add_argument('--seed', type=int, default=7)
ap.add_argument('--max-id', type=int, default=500)
ap.add_argument('--lscore', default=os.path.join(os.path.dirname(__file__), 'lscore'))
ap.add_argument('--promptscore', default='build/promptscore')
ap.add_argument('flags', nargs='*')
a = ap.parse_args()

random.seed(a.seed)
ids = [1] + [random.randrange(3, a.max_id) for _ in range(a.n - 1)]
ctx = str(a.n + 8)


def lscore(env):
    e = dict(os.environ)
    e.update(env)
    r = subprocess.run([a.lscore, a.model, ctx] + [str(i) for i in ids], capture_output=True,
                       text=True, env=e)
    if r.returncode:
        sys.exit('lscore failed: ' + r.stderr.strip())
    rows = {}
    for line in r.stdout.splitlines():
        f = line.split()
        rows[int(f[0])] = (float(f[2]), [(int(t.split(':')[0]), float(t.split(':')[1]))
                                         for t in f[3:]])
    return rows


def promptscore():
    r = subprocess.run([a.promptscore, 'score', '-m', a.model, '-c', ctx] + a.flags,
                       input=json.dumps({'prompt': ids, 'logprobs': 5}), capture_output=True,
                       text=True)
    if r.returncode:
        sys.exit('promptscore failed: ' + r.stderr.strip())
    lp = json.loads(r.stdout.splitlines()[0])['logprobs']
    return {i: (lp['token_logprobs'][i], [tuple(t) for t in lp['top_ids'][i][:5]])
            for i in range(1, len(ids))}


def diff(x, y):
    d = dt = 0.0
    far = near = 0
    for i in x:
        d = max(d, abs(x[i][0] - y[i][0]))
        for (ia, la), (ib, lb) in zip(x[i][1], y[i][1]):
            dt = max(dt, abs(la - lb))
            if ia != ib:
                if abs(la - lb) < 1e-3:
                    near += 1
                else:
                    far += 1
    return f'max|d logprob| {d:.2e}  top-5 max|d| {dt:.2e}  top-5 ids differ {far} (+{near} near-equal swaps)'


ref = lscore({})
print(f'{os.path.basename(a.model)} {" ".join(a.flags)}, {a.n} tokens')
print('  promptscore vs llama.cpp:          ' + diff(promptscore(), ref))
print('  llama.cpp generic vs repacked:     ' + diff(lscore({'LS_NOREPACK': '1'}), ref))
