#!/bin/sh
# bench/words.sh — what `score --words` costs: the same prompts scored with and without it.
#
#   bench/words.sh [MODEL.gguf [LENGTH [THREADS [ROUNDS]]]]     (defaults: generated, 1024, 0, 3)
#
# Without MODEL it generates the Qwen3-0.6B shape (gen-model --preset qwen3-0.6b: 28 layers,
# 1024 wide, a 151,936-token synthetic SentencePiece vocabulary, BF16; N_LAYER=N makes a
# shallower copy, which overstates the share: the words' cost is per row of logits, the rest
# per layer). Each round times `score --cache-mb 0 -k 5` over 4 pseudo-random id prompts of
# LENGTH tokens and over the first alone: plain, with --words, and with --words and 16 named
# tokens (--token-ids, ids spread over the vocabulary); (time(4) - time(1)) / 3 is the steady
# seconds per prompt (load and first touch cancel out). Prints each round and the median
# overheads in percent (the target on the Qwen3-0.6B shape at 1,024 tokens: at most 3%). User
# CPU time at THREADS 1 (steadier on a shared machine), else wall time (THREADS 0 = every CPU).
# Not a test (timing); needs /usr/bin/time.
set -eu
MODEL=${1:-}; LEN=${2:-1024}; THREADS=${3:-0}; ROUNDS=${4:-3}
BIN=${BIN:-build/promptscore}
T=$(mktemp -d /tmp/ps-bench-words-XXXXXX)
trap 'rm -rf "$T"' EXIT
if [ -z "$MODEL" ]; then
    MODEL="$T/qwen3-0.6b.gguf"
    "$BIN" gen-model -o "$MODEL" --preset qwen3-0.6b --type bf16 ${N_LAYER:+--n-layer "$N_LAYER"} \
        -c $((LEN + 16)) > /dev/null
fi
TH=""
[ "$THREADS" != 0 ] && TH="-t $THREADS"
NV=$("$BIN" bench -m "$MODEL" -t 1 -l 1 --runs 1 2>/dev/null | sed -n 's/.*vocab \([0-9]*\),.*/\1/p' | head -n 1)
awk -v n=4 -v len="$LEN" -v nv="$NV" 'BEGIN { srand(11); for (i = 0; i < n; i++) {
    s = "{\"id\": " i ", \"prompt\": [1"; for (j = 1; j < len; j++) s = s "," (3 + int(rand() * (nv - 3)));
    print s "]}" } }' > "$T/p4.jsonl"
head -n 1 "$T/p4.jsonl" > "$T/p1.jsonl"
IDS=$(awk -v nv="$NV" 'BEGIN { for (i = 0; i < 16; i++) printf "%s%d", (i ? "," : ""), 3 + int(i * (nv - 3) / 16) }')
secs() { # user CPU time at one thread (page faults of the load vary), else wall
    /usr/bin/time -f "%e %U %S" -o "$T/time" "$@" > /dev/null 2> "$T/err" || { cat "$T/err" >&2; exit 1; }
    if [ "$THREADS" = 1 ]; then awk '{ print $2 }' "$T/time"; else awk '{ print $1 }' "$T/time"; fi
}
steady() { # seconds per prompt at steady state, with the extra options $*
    # shellcheck disable=SC2086
    a=$(secs "$BIN" score -m "$MODEL" $TH --cache-mb 0 -k 5 "$@" -i "$T/p4.jsonl")
    # shellcheck disable=SC2086
    b=$(secs "$BIN" score -m "$MODEL" $TH --cache-mb 0 -k 5 "$@" -i "$T/p1.jsonl")
    awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", (a - b) / 3 }'
}
pct() { awk -v p="$1" -v w="$2" 'BEGIN { printf "%+.2f", 100 * (w - p) / p }'; }
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
: > "$T/rounds"; : > "$T/rounds16"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    p=$(steady)
    w=$(steady --words)
    n=$(steady --words --token-ids "$IDS")
    o=$(pct "$p" "$w"); o16=$(pct "$p" "$n")
    echo "round $r: plain $p s/prompt, --words $w s/prompt ($o%), --words and 16 named tokens $n s/prompt ($o16%)"
    echo "$o" >> "$T/rounds"; echo "$o16" >> "$T/rounds16"
    r=$((r + 1))
done
echo "median overhead: --words $(median "$T/rounds")%, --words and 16 named tokens $(median "$T/rounds16")% ($LEN tokens, vocab $NV, $(basename "$MODEL"))"
