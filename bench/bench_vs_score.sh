#!/bin/sh
# bench/bench_vs_score.sh — does `promptscore bench` report what `score` does at steady state?
#
#   bench/bench_vs_score.sh MODEL.gguf [THREADS [LENGTH [ROUNDS]]]     (defaults 1, 256, 3)
#
# Each round runs, in turn: `bench -t THREADS -l LENGTH -k 20` (its row: the median of 3 runs
# after the cold pass), then `score --cache-mb 0 -k 20 --max-seqs 1` over nine pseudo-random
# id prompts of LENGTH tokens, then over the first one of them. The second score run pays the
# load, the first touch of the session's buffers and one prompt; the first pays the same plus
# eight prompts at steady state, so (time(9) - time(1)) / 8 is score's steady seconds per
# prompt. SCORE_ARGS adds options to both score runs. Times are the processes' CPU time (user + system) at one thread, as bench's are, and
# wall time with more. Prints each round and the medians over rounds of both tokens/s and of
# the rounds' bench / score ratios. Not a test (timing); needs /usr/bin/time.
set -eu
MODEL=$1; THREADS=${2:-1}; LEN=${3:-256}; ROUNDS=${4:-3}
BIN=${BIN:-build/promptscore}
T=$(mktemp -d /tmp/ps-bench-vs-score-XXXXXX)
trap 'rm -rf "$T"' EXIT
NV=$("$BIN" bench -m "$MODEL" -t 1 -l 1 --runs 1 2>/dev/null | sed -n 's/.*vocab \([0-9]*\),.*/\1/p' | head -n 1)
awk -v n=9 -v len="$LEN" -v nv="$NV" 'BEGIN { srand(7); for (i = 0; i < n; i++) {
    s = "{\"id\": " i ", \"prompt\": ["; for (j = 0; j < len; j++) s = s (j ? "," : "") int(rand() * nv);
    print s "]}" } }' > "$T/p9.jsonl"
head -n 1 "$T/p9.jsonl" > "$T/p1.jsonl"
# seconds of a command: CPU (user + system) at one thread, else wall
secs() {
    /usr/bin/time -f "%e %U %S" -o "$T/time" "$@" > /dev/null 2> "$T/err" || { cat "$T/err" >&2; exit 1; }
    if [ "$THREADS" = 1 ]; then awk '{ print $2 + $3 }' "$T/time"; else awk '{ print $1 }' "$T/time"; fi
}
: > "$T/rounds"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    ct=""; [ "$THREADS" = 1 ] && ct=--cpu-time  # one thread: CPU time on both sides
    b=$("$BIN" bench -m "$MODEL" -t "$THREADS" -l "$LEN" -k 20 --json $ct | sed -n 's/.*"pass": "steady".*"tokens_per_s": \([0-9.]*\),.*/\1/p')
    s9=$(secs "$BIN" score -m "$MODEL" -t "$THREADS" --cache-mb 0 -k 20 ${SCORE_ARGS:-} -i "$T/p9.jsonl")
    s1=$(secs "$BIN" score -m "$MODEL" -t "$THREADS" --cache-mb 0 -k 20 ${SCORE_ARGS:-} -i "$T/p1.jsonl")
    s=$(awk -v a="$s9" -v b="$s1" -v len="$LEN" 'BEGIN { printf "%.1f", 8 * len / (a - b) }')
    echo "round $r: bench $b tok/s, score $s tok/s (9 prompts $s9 s, 1 prompt $s1 s), bench / score $(awk -v a="$b" -v b="$s" 'BEGIN { printf "%.3f", a / b }')"
    echo "$b $s" >> "$T/rounds"
    r=$((r + 1))
done
med() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
n=$(wc -l < "$T/rounds")
echo "median over $n rounds: bench $(cut -d' ' -f1 "$T/rounds" | med) tok/s, score $(cut -d' ' -f2 "$T/rounds" | med) tok/s, bench / score $(awk '{ printf "%.3f\n", $1 / $2 }' "$T/rounds" | med)"
