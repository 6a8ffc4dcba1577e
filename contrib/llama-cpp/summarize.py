#!/usr/bin/python3
"""summarize.py — quantize_compare.sh's results.tsv as two Markdown tables (per model, per ftype).

    summarize.py results.tsv

Per row, over its files: the weight types llama-quantize wrote (besides f32); how many files'
dequantisation was bitwise ggml's; the largest |d logprob| of promptscore --act f32 against
llama.cpp on the dequantised file; for native activations the range of promptscore vs
llama.cpp and of llama.cpp vs itself (generic vs repacked paths), each with the median first
position where the pair parts by more than 1e-4 ("-": they never do); and at the position where
promptscore and llama.cpp first part, who leaves the float64 reference (ll: llama.cpp alone,
ps: promptscore alone, both; within 1e-5 counts as on it), with the largest of ties.py's
rounding margins (float32 ulps) over the files where promptscore is the one that leaves.
"""
import statistics, sys

rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1])][1:]
NEVER = 10 ** 9


def num(s):
    try:
        return float(s)
    except ValueError:
        return None


def summary(group):
    done = [r for r in group if len(r) >= 20 and 'FAIL' not in '\t'.join(r)]
    refused = [r for r in group if len(r) >= 3 and r[2].startswith('llama-quantize refuses')]
    failed = len(group) - len(done) - len(refused)
    if not done:
        return None, len(refused), failed
    types = sorted({t for r in done for t in r[2].split(',') if t})
    bit = sum(r[3] == 'bitwise' for r in done)
    f32 = max(num(r[19]) for r in done)
    nat = [num(r[4]) for r in done]
    flo = [num(r[9]) for r in done]

    def first(k):
        v = statistics.median_low(int(r[k]) if r[k] != '-' else NEVER for r in done)
        return '-' if v >= NEVER else '%d' % v
    who = {'ll': 0, 'ps': 0, 'both': 0}
    margin = []
    for r in done:
        if r[14] == '-':
            continue
        ps, ll = num(r[15]), num(r[16])
        k = 'll' if ps <= 1e-5 else 'ps' if ll <= 1e-5 else 'both'
        who[k] += 1
        if k != 'll' and num(r[17]) is not None:
            margin.append(num(r[17]))
    parts = ' '.join('%s %d' % (k, v) for k, v in who.items() if v) or 'never part'
    if margin:
        parts += '; <= %.0f ulps' % max(margin)
    return (', '.join(types), '%d/%d' % (bit, len(done)), '%.1e' % f32,
            '%.1e .. %.1e' % (min(nat), max(nat)), first(8),
            '%.1e .. %.1e' % (min(flo), max(flo)), first(13), parts), len(refused), failed


def table(key, title):
    print('| %s | types written | dequant bitwise | --act f32 | native vs llama.cpp | first '
          '| llama.cpp vs itself | first | who leaves the reference |' % title)
    print('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
    seen = []
    for r in rows:
        if r[key] not in seen:
            seen.append(r[key])
    for k in seen:
        s, refused, failed = summary([r for r in rows if r[key] == k])
        extra = (' (%d refused by llama-quantize)' % refused if refused else '') + \
                (' (%d FAILED)' % failed if failed else '')
        if s is None:
            print('| %s%s |' % (k, extra) + ' |' * 8)
        else:
            print('| %s%s | %s |' % (k, extra, ' | '.join(s)))
    print()


table(0, 'model')
table(1, 'ftype')
