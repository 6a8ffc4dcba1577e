#!/usr/bin/python3
"""compare.py — promptscore against llama.cpp (lscore) on one model and one prompt.

    compare.py MODEL.gguf [--n 300] [--seed 7] [--max-id 500] [--lscore PATH]
               [--promptscore PATH] [--lscore-model FILE] [--no-floor] [--tsv] [--reference]
               [-- PROMPTSCORE-SCORE-FLAGS...]

The prompt is BOS (id 1) then n-1 ids drawn with the seed from 3..max-id-1 (every generated
vocabulary has them). Prints, over the scored positions: the largest |difference| of the scored
token's logprob and of the top-5 logprobs, and how often the top-5 ids differ where their
logprobs are more than 1e-3 apart (a swap of near-equal values is counted apart); then the same
figures between llama.cpp with and without its repacked weights (LS_NOREPACK=1): llama.cpp's own
two CPU paths, the noise floor of the comparison. Each line also names the first position
where the scored logprobs differ by more than 1e-4 ("first > 1e-4 at -" when none does).
--lscore-model gives llama.cpp another file than promptscore (a quantised file's F32
dequantisation, for promptscore's --act f32 on the quantised file); --no-floor skips llama.cpp's
second run; --tsv prints one tab-separated line of the figures instead (d-logprob, top-5 d,
top-5 ids far, near, first > 1e-4; then the same for the floor, or "-"). --reference also
scores the prompt with the float64 reference (tests/reference/forward.py, with --native-act
unless promptscore runs --act f32) and prints how far each engine is from it: which of two
disagreeing engines is off, at the first position where they part by more than 1e-4 (with
--tsv: three more columns, that position and each engine's distance there from the
reference). Exit 1 when a program fails.
"""
import argparse, json, os, random, subprocess, sys

ap = argparse.ArgumentParser()
ap.add_argument('model')
ap.add_argument('--n', type=int, default=300)
ap.add_argument('--seed', type=int, default=7)
ap.add_argument('--max-id', type=int, default=500)
ap.add_argument('--lscore', default=os.path.join(os.path.dirname(__file__), 'lscore'))
ap.add_argument('--promptscore', default='build/promptscore')
ap.add_argument('--lscore-model')
ap.add_argument('--no-floor', action='store_true')
ap.add_argument('--tsv', action='store_true')
ap.add_argument('--reference', action='store_true')
# Everything after "--" goes to promptscore as is (argparse would take "--act" for its own).
argv = sys.argv[1:]
flags = argv[argv.index('--') + 1:] if '--' in argv else []
a = ap.parse_args(argv[:argv.index('--')] if '--' in argv else argv)
a.flags = flags

random.seed(a.seed)
ids = [1] + [random.randrange(3, a.max_id) for _ in range(a.n - 1)]
ctx = str(a.n + 8)


def lscore(env):
    e = dict(os.environ)
    e.update(env)
    r = subprocess.run([a.lscore, a.lscore_model or a.model, ctx] + [str(i) for i in ids], capture_output=True,
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
    first = None
    for i in sorted(x):
        d = max(d, abs(x[i][0] - y[i][0]))
        if first is None and abs(x[i][0] - y[i][0]) > 1e-4:
            first = i
        for (ia, la), (ib, lb) in zip(x[i][1], y[i][1]):
            dt = max(dt, abs(la - lb))
            if ia != ib:
                if abs(la - lb) < 1e-3:
                    near += 1
                else:
                    far += 1
    first = '-' if first is None else str(first)
    if a.tsv:
        return f'{d:.2e}\t{dt:.2e}\t{far}\t{near}\t{first}'
    return (f'max|d logprob| {d:.2e}  top-5 max|d| {dt:.2e}  top-5 ids differ {far} '
            f'(+{near} near-equal swaps)  first > 1e-4 at {first}')


def reference():
    import tempfile
    import numpy as np
    fwd = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tests',
                       'reference', 'forward.py')
    with tempfile.NamedTemporaryFile(suffix='.f64') as out:
        cmd = ['/usr/bin/python3', fwd, a.model, '--tokens', ','.join(map(str, ids)),
               '--out', out.name, '--n-ctx', ctx]
        if 'f32' not in a.flags:
            cmd.append('--native-act')
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit('forward.py failed: ' + r.stderr.strip())
        z = np.fromfile(out.name, dtype='<f8').reshape(len(ids), -1)
    z = z - z.max(axis=1, keepdims=True)
    lp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    rows = {}
    for i in range(1, len(ids)):
        top = sorted(range(lp.shape[1]), key=lambda v: (-lp[i - 1][v], v))[:5]
        rows[i] = (float(lp[i - 1][ids[i]]), [(v, float(lp[i - 1][v])) for v in top])
    return rows


ref = lscore({})
mine = promptscore()
ps = diff(mine, ref)
floor = '-' if a.no_floor else diff(lscore({'LS_NOREPACK': '1'}), ref)
part = next((i for i in sorted(mine) if abs(mine[i][0] - ref[i][0]) > 1e-4), None)
if a.reference:
    f64 = reference()
    at = ('-\t-\t-' if part is None else
          f'{part}\t{abs(mine[part][0] - f64[part][0]):.1e}\t{abs(ref[part][0] - f64[part][0]):.1e}')
if a.tsv:
    print(ps + '\t' + floor + ('\t' + at if a.reference else ''))
else:
    print(f'{os.path.basename(a.model)} {" ".join(a.flags)}, {a.n} tokens'
          + (f' (llama.cpp: {os.path.basename(a.lscore_model)})' if a.lscore_model else ''))
    print('  promptscore vs llama.cpp:          ' + ps)
    print('  llama.cpp generic vs repacked:     ' + floor)
if a.reference and not a.tsv:
    print('  promptscore vs float64 reference:  ' + diff(mine, f64))
    print('  llama.cpp vs float64 reference:    ' + diff(ref, f64))
    if part is not None:
        p_, dp, dl = at.split('\t')
        print(f'  where the engines first part (position {p_}): promptscore is {dp} from the '
              f'reference, llama.cpp {dl}')
