#!/usr/bin/env bash
# kld_vs_llama.sh -- `promptscore perplexity --ppl-mode llama --compare` against
# llama-perplexity --kl-divergence-base / --kl-divergence on the same files (flash attention
# off), and both against promptscore's exact log-probabilities put through llama.cpp's 16-bit
# base (bench/kld_llama16.py). The procedure and its results: docs/correctness.md.
#
# usage: bench/kld_vs_llama.sh BASE.gguf OTHER.gguf TEXT.txt N_CTX [WORKDIR]
#   env LLAMA_PERPLEXITY: the llama-perplexity binary (its directory also goes on
#   LD_LIBRARY_PATH); LLAMA_BATCH: its -b (default N_CTX; 1 evaluates one token at a time);
#   PROMPTSCORE (default build/promptscore); PY (default /usr/bin/python3, which needs numpy).
# Prints, for each engine and --kv-type f16-dot (the default of --ppl-mode llama: llama.cpp's
# attention roundings) / f32 on promptscore's side: Mean PPL(base), Mean KLD and Same top p;
# then, per model, in how many scored rows the two engines' top-1 differ (kld_llama16.py
# --rows); then, when the vocabulary is small enough for `score -k V` (V = its size, at most
# 4096: stories260K's 512) to list every token's log-probability, kld_llama16.py's exact and
# 16-bit figures.
set -euo pipefail
[ $# -ge 4 ] || { sed -n 2,16p "$0"; exit 2; }
BASE=$1 OTHER=$2 TEXT=$3 NCTX=$4 W=${5:-$(mktemp -d)}
PS=${PROMPTSCORE:-build/promptscore}
PY=${PY:-/usr/bin/python3}
LP=${LLAMA_PERPLEXITY:?set LLAMA_PERPLEXITY to the llama-perplexity binary}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$W"
LD_LIBRARY_PATH="$(dirname "$LP")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH

pick() { grep -h 'Mean PPL(base)\|Mean    KLD\|Same top p:' "$1" | tr -s ' ' | paste -sd'|' ; }

NB=${LLAMA_BATCH:-$NCTX}
"$LP" -m "$BASE" -f "$TEXT" -c "$NCTX" -b "$NB" -t 2 -fa off \
    --kl-divergence-base "$W/base.kld" > "$W/llama_base.log" 2>&1
# (llama.cpp's log thread has been seen to drop the closing statistics: run again then)
for _ in 1 2 3; do
    "$LP" -m "$OTHER" -f "$TEXT" -c "$NCTX" -b "$NB" -t 2 -fa off \
        --kl-divergence --kl-divergence-base "$W/base.kld" > "$W/llama_kld.log" 2>&1
    grep -q 'Same top p:' "$W/llama_kld.log" && break
done
# llama.cpp's own 16-bit log-probabilities of OTHER, for kld_llama16.py's engine comparison
"$LP" -m "$OTHER" -f "$TEXT" -c "$NCTX" -b "$NB" -t 2 -fa off \
    --kl-divergence-base "$W/other.kld" > "$W/llama_other.log" 2>&1
echo "llama-perplexity:           $(pick "$W/llama_kld.log")"
for kv in f16-dot f32; do
    "$PS" perplexity --ppl-mode llama -m "$BASE" --compare "$OTHER" -f "$TEXT" -c "$NCTX" \
        -t 2 --kv-type "$kv" > "$W/ps_$kv.log" 2>&1
    echo "promptscore --kv-type $kv:  $(pick "$W/ps_$kv.log")"
done

# llama-perplexity's chunks as id prompts: N_CTX ids each, the first replaced by BOS when the
# model adds one (what `tokenize` makes of empty text), the text without one trailing newline,
# tokenized without special-token parsing (as perplexity does)
V=$("$PY" - "$BASE" <<'EOF'
import sys, struct
# the vocabulary size: the length of the array tokenizer.ggml.tokens (after its key: the
# value type and the element type, 4 bytes each, then the u64 count)
b = open(sys.argv[1], 'rb').read(1 << 22)
k = b.find(b'tokenizer.ggml.tokens')
print(struct.unpack_from('<Q', b, k + len('tokenizer.ggml.tokens') + 8)[0])
EOF
)
"$PY" - "$TEXT" "$NCTX" "$PS" "$BASE" > "$W/chunks.jsonl" <<'EOF'
import json, subprocess, sys
text, n, ps, model = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
t = open(text, 'rb').read()
if t.endswith(b'\n'):
    t = t[:-1]
def tok(b):
    return [int(x) for x in subprocess.run([ps, 'tokenize', '--no-parse-special', '-m', model],
                                           input=b, capture_output=True, check=True).stdout.split()]
ids, bos = tok(t), tok(b'')
for c in range(len(ids) // n):
    ch = ids[c * n:(c + 1) * n]
    if bos:
        ch[0] = bos[0]
    print(json.dumps({'id': c, 'prompt': ch}))
EOF
# each model scored once per --kv-type: every token's log-probability (-k V) when the
# vocabulary is small enough, else the top-1 only; the first of top_ids is the top-1 either way
K=1; [ "$V" -le 4096 ] && K=$V
for kv in f16-dot f32; do
    for m in base other; do
        f=$BASE; [ $m = other ] && f=$OTHER
        "$PS" score -m "$f" -k "$K" -t 2 -c "$NCTX" --kv-type "$kv" -i "$W/chunks.jsonl" \
            -o "$W/${m}_$kv.jsonl" 2>/dev/null
        echo "top-1, $m model, llama-perplexity against promptscore --kv-type $kv:" \
            "$("$PY" "$HERE/kld_llama16.py" --rows "$W/$m.kld" "$W/${m}_$kv.jsonl" "$NCTX")"
    done
done
[ "$K" = "$V" ] || exit 0
for kv in f16-dot f32; do
    echo "kld_llama16.py, promptscore's log-probabilities with --kv-type $kv:"
    "$PY" "$HERE/kld_llama16.py" "$W/base_$kv.jsonl" "$W/other_$kv.jsonl" "$NCTX" \
        "$W/base.kld" "$W/other.kld"
done
