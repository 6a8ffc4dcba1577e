#!/bin/sh
# tests/test_kld_tools.sh — bench/kld_llama16.py --rows, which docs/correctness.md's comparison
# of llama-perplexity runs with one another and with promptscore rests on, on small files
# written here: two llama-perplexity --kl-divergence-base files (header, tokens, per scored row
# a float scale and minimum then one uint16 per id) and a `score -k` output of the same rows.
#   - the top-1 of a base file is the first largest 16-bit value (a tie goes to the lower id);
#   - a score output's is the first of top_ids at entry p + 1 for position p, positions
#     N_CTX/2 .. N_CTX-2 of each line;
#   - rows differing are counted, a file against itself differs in none, and a base file
#     shorter than its header says is refused with its name.
# Prints "kld_tools: N passed, N failed, N skipped".
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
NAME=kld_tools; FILE=test_kld_tools.sh
. tests/check.sh

if ! "$PY" -c 'import numpy' 2>/dev/null; then skip "$PY with numpy missing"; done_; fi

T=$(mktemp -d /tmp/ps-test-kld-XXXXXX)
trap 'rm -rf "$T"' EXIT

# n_ctx 8, 5 ids, 2 chunks: 3 scored rows per chunk. Row tops of a.kld: 2 0 4 | 1(tie 1,3) 3 0;
# b.kld moves row 1's top to 3; s.jsonl matches a.kld everywhere; t.jsonl moves row 5's to 2.
"$PY" - "$T" <<'EOF' || bad "could not write the files"
import json, struct, sys
import numpy as np
d = sys.argv[1]
n_ctx, n_vocab, n_chunk = 8, 5, 2
nv = 2 * ((n_vocab + 1) // 2) + 4
def base(path, rows):
    with open(path, "wb") as f:
        f.write(b"_logits_" + struct.pack("<3i", n_ctx, n_vocab, n_chunk))
        f.write(np.arange(n_ctx * n_chunk, dtype=np.int32).tobytes())
        for r in rows:
            w = np.zeros(nv, dtype=np.uint16)
            w[:4] = np.frombuffer(struct.pack("<2f", 1e-3, -9.0), dtype=np.uint16)
            w[4:4 + n_vocab] = r
            f.write(w.tobytes())
a = [[1, 2, 900, 3, 4], [800, 5, 6, 7, 8], [1, 1, 1, 1, 999],
     [0, 700, 3, 700, 2], [5, 5, 5, 600, 5], [65535, 0, 0, 0, 0]]
base(f"{d}/a.kld", a)
b = [r[:] for r in a]
b[1] = [800, 5, 6, 801, 8]
base(f"{d}/b.kld", b)
base(f"{d}/short.kld", a[:3])
def score(path, tops):
    with open(path, "w") as f:
        for c in range(n_chunk):
            top = [[[0, -1.0]] for _ in range(n_ctx)]
            for j, p in enumerate(range(n_ctx // 2, n_ctx - 1)):
                top[p + 1] = [[tops[c * 3 + j], -0.5], [9, -2.0]]
            f.write(json.dumps({"id": c, "logprobs": {"top_ids": top}}) + "\n")
score(f"{d}/s.jsonl", [2, 0, 4, 1, 3, 0])
score(f"{d}/t.jsonl", [2, 0, 4, 1, 3, 2])
EOF

rows() { "$PY" bench/kld_llama16.py --rows "$1" "$2" 8 2>&1; }
check "a file against itself: no row differs" \
    '[ "$(rows "$T/a.kld" "$T/a.kld")" = "rows 6: top-1 differs in 0 rows (0.00 %)" ]'
check "two base files: the one moved top-1 is counted" \
    '[ "$(rows "$T/a.kld" "$T/b.kld")" = "rows 6: top-1 differs in 1 rows (16.67 %)" ]'
check "a base file's tie goes to the lower id, as llama.cpp's scan (score says 1, not 3)" \
    '[ "$(rows "$T/a.kld" "$T/s.jsonl")" = "rows 6: top-1 differs in 0 rows (0.00 %)" ]'
check "a score output's rows are positions N_CTX/2 .. N_CTX-2 of each line" \
    '[ "$(rows "$T/s.jsonl" "$T/t.jsonl")" = "rows 6: top-1 differs in 1 rows (16.67 %)" ]'
check "a score output against a base file, either order" \
    '[ "$(rows "$T/t.jsonl" "$T/a.kld")" = "rows 6: top-1 differs in 1 rows (16.67 %)" ]'
check "a base file shorter than its header says is refused (nonzero exit, named)" \
    '! rows "$T/a.kld" "$T/short.kld" >/dev/null && rows "$T/a.kld" "$T/short.kld" | grep -q "short.kld: ends at row 3 of 6"'
done_
