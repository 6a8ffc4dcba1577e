#!/usr/bin/env python3
"""Keeps the lines of a JSON Lines corpus whose text has a perplexity under a threshold.

    python3 examples/filter_corpus.py -m model.gguf -i corpus.jsonl -o kept.jsonl --max-ppl 20

Each input line is a JSON object with the text in a field ("text" by default; --field).
Lines are scored with promptscore's score_many (several per forward pass, the prefix cache
shared), a progress bar shows on stderr (tqdm), and each kept line is written unchanged, in
input order. The perplexity is exp(-mean logprob) over the line's tokens after BOS, the
"perplexity" field of `promptscore score`. The last stderr line gives the throughput.
Lines that are not JSON, lack the field, or fail to score (longer than the context) are
counted and dropped. --add-field PPL writes each kept line with its perplexity added.
"""
import argparse
import collections
import itertools
import json
import sys
import time

import promptscore

try:
    from tqdm import tqdm
except ImportError:  # the bar is optional; the filter is not
    tqdm = None


def read_lines(f, field, bad, on_bad):
    for lineno, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            text = obj[field]
            if not isinstance(text, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            bad.append(lineno)
            on_bad()
            continue
        yield line.rstrip("\n"), obj, text


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-i", "--input", default="-", help="JSON Lines (default stdin)")
    ap.add_argument("-o", "--output", default="-", help="kept lines (default stdout)")
    ap.add_argument("--max-ppl", type=float, required=True,
                    help="keep lines whose perplexity is below this")
    ap.add_argument("--field", default="text")
    ap.add_argument("--max-seqs", type=int, default=16, help="prompts per forward pass group")
    ap.add_argument("-t", "--threads", type=int, default=None)
    ap.add_argument("--add-field", default=None, help="add the perplexity under this key")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)

    fin = sys.stdin if a.input == "-" else open(a.input, encoding="utf-8")
    fout = sys.stdout if a.output == "-" else open(a.output, "w", encoding="utf-8")
    total = None
    if a.input != "-":
        with open(a.input, encoding="utf-8") as f:
            total = sum(1 for l in f if l.strip())
    bad, kept, seen, tokens = [], 0, 0, 0
    t0 = time.perf_counter()
    with promptscore.Model(a.model, threads=a.threads) as m:
        bar = None
        if tqdm is not None and not a.no_progress:
            bar = tqdm(total=total, unit="line", file=sys.stderr, dynamic_ncols=True)
        source = read_lines(fin, a.field, bad, lambda: bar and bar.update(1))
        queue = collections.deque()  # lines handed to score_many, not yet answered, in order

        def feed(first):
            for row in itertools.chain(first, source):
                queue.append(row)
                yield row[2]

        it = m.score_many(feed(()), max_seqs=a.max_seqs)
        while True:
            try:
                r = next(it)
            except StopIteration:
                break
            except promptscore.Error as e:
                # the line after the last answer failed (longer than the context, say): drop
                # it and go on with the lines already handed over, then the rest
                queue.popleft()
                print("filter_corpus: dropped a line: %s" % e, file=sys.stderr)
                bad.append(e)
                again = list(queue)
                queue.clear()
                it = m.score_many(feed(again), max_seqs=a.max_seqs)
                if bar:
                    bar.update(1)
                continue
            line, obj, _ = queue.popleft()
            seen += 1
            tokens += r.n_tokens
            if r.perplexity < a.max_ppl:
                kept += 1
                if a.add_field:
                    obj[a.add_field] = r.perplexity
                    line = json.dumps(obj, ensure_ascii=False)
                fout.write(line + "\n")
            if bar:
                bar.update(1)
                bar.set_postfix(kept=kept, refresh=False)
        if bar:
            bar.close()
    el = time.perf_counter() - t0
    if fout is not sys.stdout:
        fout.close()
    print("filter_corpus: kept %d of %d scored lines (%d unreadable or failed); %d tokens in %.2fs: "
          "%.1f lines/s, %.0f tokens/s" % (kept, seen, len(bad), tokens, el,
                                           seen / el if el > 0 else 0.0,
                                           tokens / el if el > 0 else 0.0), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
