#!/usr/bin/python3
"""words.py - a float64 reference for `score --words` (docs/api.md, "Words").

Usage: words.py MODEL.gguf IN.jsonl OUT.jsonl [--tol T]

For every scored line of OUT.jsonl (the CLI's answer to IN.jsonl, whose lines hold text
prompts), recomputes in float64, with forward.py's forward pass over the line's token_ids and
its full log-softmax:
  - the words: the text split at whitespace (Unicode's White_Space characters),
    each token given to the word holding its first non-whitespace byte, a whitespace-only
    token to the next word, a token touching two words joining them;
  - naive = -sum of the word's token logprobs;
  - S(row) = log sum over BOW and EOS of p(s | row), BOW the non-control ids whose text begins
    with whitespace (read from the GGUF's tokenizer keys, not from promptscore);
  - surprisal = naive + D - N, D = S(row before the word's first token) when that token begins
    with whitespace, the log mass of the ids that neither begin with whitespace nor are EOS or
    control after BOS for the text's first word, else 0; N = S(row after the word's last
    token) unless that token ends in whitespace (then 0). The first word without BOS: null.
It shares no code with promptscore. Prints "BAD ..." for each disagreement (word text, offset,
n_tokens exactly; surprisal, naive and the correction surprisal - naive within --tol nats;
surprisal != naive wherever N != 0) and one summary line "words N, worst ...".
"""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forward  # noqa: E402

CONTROL = 3
BYTE = 6


def gpt2_byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def token_texts(kv):
    toks = kv["tokenizer.ggml.tokens"]
    types = kv.get("tokenizer.ggml.token_type", [1] * len(toks))
    model = kv["tokenizer.ggml.model"]
    out = []
    if model == "gpt2":
        dec = gpt2_byte_decoder()
        for t, ty in zip(toks, types):
            if ty == CONTROL:
                out.append(t.encode())
            else:
                out.append(bytes(dec[c] for c in t) if all(c in dec for c in t) else t.encode())
    else:
        for t, ty in zip(toks, types):
            if ty == BYTE and t.startswith("<0x") and t.endswith(">"):
                out.append(bytes([int(t[3:-1], 16)]))
            else:
                out.append(t.replace("\u2581", " ").encode())
    return out, [int(x) for x in types], model


# Unicode's White_Space property (str.isspace would add U+001C..U+001F)
WS = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | \
    {chr(c) for c in range(0x2000, 0x200B)}


def isws(c):
    return c in WS


def starts_ws(b):
    s = b.decode("utf-8", errors="replace")
    return len(s) > 0 and isws(s[0])


def logmass(lp_row, ids):
    v = lp_row[ids]
    m = v.max()
    return float(m + np.log(np.exp(v - m).sum())) if np.isfinite(m) else -math.inf


def ref_words(text, ids, texts, types, model, spm_prefix, lp, bow, nonbow):
    """The reference words of one line: [(word, offset, n_tokens, surprisal, naive, has_N)]."""
    tb = text.encode()
    # each token's span in the text (bytes), the SentencePiece space prefix dropped
    spans, pos, prefix = [], 0, spm_prefix
    for t in ids:
        if types[t] == CONTROL:
            spans.append(None)
            prefix = spm_prefix
            continue
        b = texts[t]
        if prefix and b.startswith(b" "):
            b = b[1:]
        prefix = False
        assert tb[pos:pos + len(b)] == b, "token text %r not at %d" % (b, pos)
        spans.append((pos, pos + len(b)))
        pos += len(b)
    assert pos == len(tb), "tokens spell %d of %d bytes" % (pos, len(tb))
    # the words (byte ranges) of the text: runs of non-whitespace characters
    words, i, chars = [], 0, text
    boff = [0]
    for c in chars:
        boff.append(boff[-1] + len(c.encode()))
    while i < len(chars):
        if isws(chars[i]):
            i += 1
            continue
        j = i
        while j < len(chars) and not isws(chars[j]):
            j += 1
        words.append([boff[i], boff[j]])
        i = j
    def word_of(byte):
        for k, (s, e) in enumerate(words):
            if s <= byte < e:
                return k
        return None
    # tokens to words
    owner = []
    for k, sp in enumerate(spans):
        if sp is None:
            owner.append(None)
            continue
        hit = [w for w in range(sp[0], sp[1]) if word_of(w) is not None]
        owner.append(word_of(hit[0]) if hit else None)
        if hit:  # a token touching two words joins them
            ws = sorted({word_of(w) for w in hit})
            if len(ws) > 1:
                raise AssertionError("test texts never join words")
    groups = {}
    for k, o in enumerate(owner):
        if o is not None:
            groups.setdefault(o, []).append(k)
    out = []
    for w in sorted(groups):
        toks = groups[w]
        a, b = toks[0], toks[-1]
        # whitespace-only tokens right before the word belong to it
        while a - 1 >= 0 and spans[a - 1] is not None and owner[a - 1] is None and \
                all(isws(c) for c in tb[spans[a - 1][0]:spans[a - 1][1]].decode(errors="replace")):
            a -= 1  # (an empty span: the SentencePiece space prefix alone)
        naive = -sum(lp[i - 1, ids[i]] for i in range(a, b + 1)) if a > 0 else None
        closed = spans[b][1] > words[w][1]
        N = 0.0 if closed else logmass(lp[b], bow)
        if a == 0:
            sur = None
        else:
            if starts_ws(texts[ids[a]]):
                D = logmass(lp[a - 1], bow)
            elif a == 1 and types[ids[0]] == CONTROL:
                D = logmass(lp[0], nonbow)
            else:
                D = 0.0
            sur = naive + D - N
        s, e = words[w]
        out.append((tb[s:e].decode(), s, b - a + 1, sur, naive, not closed))
    return out


def main():
    args = sys.argv[1:]
    tol = 1e-5
    if "--tol" in args:
        k = args.index("--tol")
        tol = float(args[k + 1])
        del args[k:k + 2]
    path, inp, outp = args
    m = forward.Model(path)
    texts, types, model = token_texts(m.kv)
    spm_prefix = model == "llama" and bool(m.kv.get("tokenizer.ggml.add_space_prefix", True))
    eos = int(m.kv.get("tokenizer.ggml.eos_token_id", -1))
    n_vocab = len(texts)
    bow = [i for i in range(n_vocab) if types[i] != CONTROL and starts_ws(texts[i])]
    if 0 <= eos < n_vocab and eos not in bow:
        bow.append(eos)
    bowset = set(bow)
    nonbow = [i for i in range(n_vocab) if i not in bowset and types[i] != CONTROL and i != eos]
    bow = np.array(sorted(bow))
    nonbow = np.array(nonbow)
    n_words, worst, bad = 0, {"surprisal": 0.0, "naive": 0.0, "correction": 0.0}, []
    for li, lo in zip(open(inp), open(outp)):
        text = json.loads(li)["prompt"]
        got = json.loads(lo)
        ids = got["logprobs"]["token_ids"]
        z = m.forward(ids)
        lp = forward.log_softmax(z)
        ref = ref_words(text, ids, texts, types, model, spm_prefix, lp, bow, nonbow)
        gw = got["words"]
        if len(gw) != len(ref):
            bad.append("line %s: %d words, reference %d" % (got["id"], len(gw), len(ref)))
            continue
        for g, (word, off, nt, sur, naive, has_n) in zip(gw, ref):
            n_words += 1
            where = "line %s word %r" % (got["id"], word)
            if (g["word"], g["offset"], g["n_tokens"]) != (word, off, nt):
                bad.append("%s: got %r" % (where, (g["word"], g["offset"], g["n_tokens"])))
                continue
            for key, want, have in (("surprisal", sur, g["surprisal"]),
                                    ("naive", naive, g["surprisal_naive"])):
                if want is None or have is None:
                    if want is not None or have is not None:
                        bad.append("%s: %s %r, reference %r" % (where, key, have, want))
                    continue
                worst[key] = max(worst[key], abs(have - want))
                if abs(have - want) > tol:
                    bad.append("%s: %s %.9g, reference %.9g" % (where, key, have, want))
            if sur is not None and g["surprisal"] is not None:
                e = abs((g["surprisal"] - g["surprisal_naive"]) - (sur - naive))
                worst["correction"] = max(worst["correction"], e)
                if e > tol:
                    bad.append("%s: correction %.9g, reference %.9g" %
                               (where, g["surprisal"] - g["surprisal_naive"], sur - naive))
                if has_n and g["surprisal"] == g["surprisal_naive"]:
                    bad.append("%s: surprisal equals the naive sum" % where)
                bits = g["surprisal"] / math.log(2)
                if abs(g["surprisal_bits"] - bits) > 1e-12 * max(1.0, abs(bits)):
                    bad.append("%s: bits %r" % (where, g["surprisal_bits"]))
    print("words %d, worst |diff|: surprisal %.2e naive %.2e correction %.2e" %
          (n_words, worst["surprisal"], worst["naive"], worst["correction"]))
    for b in bad[:20]:
        print("BAD " + b)


if __name__ == "__main__":
    main()
