#!/bin/sh
# tests/test_shard.sh — `score --shard I/N`, `score --resume` and `promptscore merge`.
# On ../shared/models/stories260K.gguf ($PS_SHARED overrides; skipped when absent) and on a
# model written by `promptscore gen-model` (always):
#   - 4 shards (given to merge in any order) merge back to one plain run, byte for byte, on a
#     mixed input (text and id prompts, blank lines, bad lines, per-line K), from a file and
#     from stdin;
#   - a run SIGKILLed at 10 random points (output lines), each time restarted with --resume,
#     then finished, merges to the plain run byte for byte; a half-written last line is cut off by --resume;
#   - bad input: --shard 4/4, -1/3, 1/0, x/2, 3, and --resume on an output that does not match
#     (a plain output, another shard, other settings, another input, a record out of place):
#     exit 2, a message saying what, the file untouched (cmp with a copy);
#   - merge of shards that do not make one input (a shard missing, one given twice, one that
#     did not finish, another N, other settings, a doubled record): exit 2, the missing or
#     doubled lines named, nothing written.
# Prints "shard: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SHARED=${PS_SHARED:-../shared}
BIN="$BUILD/promptscore"
NAME=shard; FILE=test_shard.sh
. tests/check.sh

if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
T=$(mktemp -d /tmp/ps-test-shard-XXXXXX)
trap 'rm -rf "$T"' EXIT

# 4 shards of MODEL on IN (extra score options in $3) == the plain run; merge order 2 0 3 1
four_shards() { # name model in opts
    name=$1; m=$2; in=$3; opts=$4
    "$BIN" score -m "$m" -i "$in" -o "$T/$name.plain" -t 1 $opts 2>/dev/null
    check "$name: plain run" '[ -s "$T/$name.plain" ]'
    for i in 0 1 2 3; do
        "$BIN" score -m "$m" -i "$in" -o "$T/$name.s$i" --shard $i/4 -t 1 $opts 2>"$T/err"
        rc=$?
        check "$name: shard $i/4 exit 0 (got $rc: $(cat "$T/err"))" '[ $rc -eq 0 ]'
    done
    "$BIN" merge -o "$T/$name.merged" "$T/$name.s2" "$T/$name.s0" "$T/$name.s3" "$T/$name.s1" \
        2>"$T/err"
    rc=$?
    check "$name: merge exit 0 (got $rc: $(cat "$T/err"))" '[ $rc -eq 0 ]'
    check "$name: 4 shards merged == one run, byte for byte" \
        'cmp "$T/$name.merged" "$T/$name.plain"'
    # the shards really split the work: each holds about a quarter of the records
    n1=$(grep -c '"ps_line"' "$T/$name.s1"); nall=$(grep -c . "$T/$name.plain")
    check "$name: shard 1 holds a quarter of the lines ($n1 of $nall non-blank)" \
        '[ "$n1" -ge $((nall / 4 - 3)) ] && [ "$n1" -le $((nall / 4 + 3)) ]'
}

# ---- stories260K: text prompts, ids, blank and bad lines -----------------------------------
MODEL="$SHARED/models/stories260K.gguf"
if [ -r "$MODEL" ]; then
    {
        for r in 1 2 3; do
            cat examples/prompts.jsonl
            echo
            echo 'not json'
            echo '{"id": "oov", "prompt": [1, 403, 512]}'
            echo '{"id": ["k", 2], "prompt": [1, 403, 407, 261, 378], "logprobs": 2}'
            echo '{"prompt": "Lily and Ben", "logprobs": 0}'
        done
    } > "$T/st.jsonl"
    four_shards st "$MODEL" "$T/st.jsonl" ""
    # stdin works (modulo sharding needs no counting pass)
    for i in 0 1 2 3; do
        "$BIN" score -m "$MODEL" --shard $i/4 -t 1 < "$T/st.jsonl" > "$T/stdin.s$i" 2>/dev/null
    done
    "$BIN" merge -o "$T/stdin.merged" "$T/stdin.s0" "$T/stdin.s1" "$T/stdin.s2" "$T/stdin.s3" \
        2>/dev/null
    check "stdin shards merged == one run" 'cmp -s "$T/stdin.merged" "$T/st.plain"'
else
    skip "shared test material not found at $SHARED (set PS_SHARED): stories260K shards"
fi

# ---- a generated model and a corpus of 400 lines -------------------------------------------
G="$T/g.gguf"
"$BIN" gen-model -o "$G" --arch qwen3 --n-embd 128 --n-layer 4 --n-ff 256 --seed 5 \
    >/dev/null 2>&1
check "gen-model wrote the model" '[ -s "$G" ]'
awk 'BEGIN {
    srand(21)
    for (i = 0; i < 400; i++) {
        if (i % 37 == 5) { print ""; continue }
        if (i % 53 == 7) { printf "{\"id\": %d, \"prompt\": [1, 99999]}\n", i; continue }
        n = 2 + int(rand() * 119); s = ""
        for (j = 0; j < n; j++) s = s (j ? "," : "") int(rand() * 512)
        k = (i % 4 == 0) ? 0 : (i % 4 == 1) ? 1 : (i % 4 == 2) ? 5 : 20
        printf "{\"id\": %d, \"prompt\": [%s], \"logprobs\": %d}\n", i, s, k
    } }' > "$T/corpus.jsonl"
four_shards gen "$G" "$T/corpus.jsonl" ""

# ---- SIGKILL at 10 random points, --resume each time ---------------------------------------
# the whole corpus as one shard (--resume alone: shard 0/1). The 10 kill points are random
# places in the run, as output lines (10 distinct numbers in 2..360 of 401, sorted, new each
# run): each (re)start is SIGKILLed as soon as its output has reached the next one, whatever
# the speed of the machine (checked: exit status 137)
out="$T/killed.jsonl"
rm -f "$out"
points=$(awk 'BEGIN { srand(); while (n < 10) { p = 2 + int(rand() * 359); if (!(p in s)) { s[p]; n++ } }
                      for (p in s) print p }' | sort -n | tr '\n' ' ')
hits=0; prev=0; grew=0
nlines() { if [ -e "$1" ]; then wc -l < "$1"; else echo 0; fi; }
for target in $points; do
    "$BIN" score -m "$G" -i "$T/corpus.jsonl" -o "$out" --resume -t 1 \
        2>>"$T/kill.err" &
    pid=$!
    i=0 # up to 60 s
    while [ $i -lt 6000 ] && [ "$(nlines "$out")" -lt "$target" ] &&
        kill -0 "$pid" 2>/dev/null; do
        sleep 0.01; i=$((i + 1))
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    rc=$?
    [ "$rc" -eq 137 ] && hits=$((hits + 1))
    at="$at $(nlines "$out")"
    size=$(wc -c < "$out" 2>/dev/null || echo 0)
    [ "$size" -ge "$prev" ] && grew=$((grew + 1))
    prev=$size
    # every line but the last ends with a newline; the last may be cut (resume cuts it)
done
echo "NOTE: kill points (output lines) $points; lines at each kill:$at"
check "the 10 kills landed mid-run ($hits of 10 exited 137; at output lines $points)" \
    '[ $hits -ge 9 ]'
check "the output never shrank across kills and resumes ($grew of 10)" '[ $grew -eq 10 ]'
check "the killed output lacks its end record before the final resume" \
    '! tail -n 1 "$out" | grep -q "ps_end"'
# a half-written last line (what a SIGKILL in the middle of a multi-page write(2) leaves)
last=$(tail -n 1 "$out")
case "$last" in *'"ps_line"'*) : ;; *) last='{"ps_line":999,"ps_hash":"00' ;; esac
printf '%s' "$(printf '%s' "$last" | head -c 40)" >> "$out"
"$BIN" score -m "$G" -i "$T/corpus.jsonl" -o "$out" --resume -t 1 2>"$T/err"
rc=$?
check "final --resume exit 0 (got $rc: $(cat "$T/err"))" '[ $rc -eq 0 ]'
check "--resume says it cut the half line off" 'grep -q "half-written last line was cut off" "$T/err"'
"$BIN" merge -o "$T/killed.merged" "$out" 2>"$T/err"
check "killed 10 times + resumed, merged == one run, byte for byte ($(cat "$T/err"))" \
    'cmp "$T/killed.merged" "$T/gen.plain"'
n=$(grep -c '"ps_line"' "$out")
check "the resumed output holds each of the 400 input lines once (got $n)" '[ "$n" -eq 400 ]'
cp "$out" "$T/killed.copy"
"$BIN" score -m "$G" -i "$T/corpus.jsonl" -o "$out" --resume -t 1 2>"$T/err"
rc=$?
check "--resume on a finished shard: exit 0, says complete, file unchanged (rc $rc)" \
    '[ $rc -eq 0 ] && grep -q "it is complete" "$T/err" && cmp -s "$out" "$T/killed.copy"'

# ---- bad --shard values --------------------------------------------------------------------
for spec in 4/4 -1/3 1/0 x/2 3 2/ /2 "1/4/2" ""; do
    "$BIN" score -m "$G" -i "$T/corpus.jsonl" -o "$T/bad.out" --shard "$spec" 2>"$T/err"
    rc=$?
    check "--shard '$spec': exit 2 (got $rc)" '[ $rc -eq 2 ]'
    check "--shard '$spec': says what --shard wants" 'grep -q -- "--shard" "$T/err"'
    check "--shard '$spec': writes nothing" '[ ! -e "$T/bad.out" ]'
done
"$BIN" score -m "$G" -i "$T/corpus.jsonl" --resume 2>"$T/err"
rc=$?
check "--resume without -o: exit 2" '[ $rc -eq 2 ] && grep -q -- "-o FILE" "$T/err"'

# ---- --resume on an output that does not match ---------------------------------------------
# a partial shard 1/4 (the first 20 records of the finished one) to resume from
head -n 21 "$T/gen.s1" > "$T/partial"
resume_bad() { # what file expect opts...
    what=$1; f=$2; expect=$3; shift 3
    cp "$f" "$T/before"
    "$BIN" score -m "$G" -o "$f" --resume -t 1 "$@" 2>"$T/err"
    rc=$?
    check "--resume on $what: exit 2 (got $rc)" '[ $rc -eq 2 ]'
    check "--resume on $what: says '$expect' ($(cat "$T/err"))" 'grep -q -- "$expect" "$T/err"'
    check "--resume on $what: file untouched" 'cmp -s "$f" "$T/before"'
}
cp "$T/gen.plain" "$T/plain.copy"
resume_bad "a plain output" "$T/plain.copy" "is not the output of score --shard" \
    -i "$T/corpus.jsonl"
cp "$T/partial" "$T/p"
resume_bad "another shard" "$T/p" "holds shard 1/4, this run is shard 2/4" \
    -i "$T/corpus.jsonl" --shard 2/4
resume_bad "another N" "$T/p" "holds shard 1/4, this run is shard 1/3" \
    -i "$T/corpus.jsonl" --shard 1/3
resume_bad "other settings (--logprobs 3)" "$T/p" "different settings" \
    -i "$T/corpus.jsonl" --shard 1/4 --logprobs 3
resume_bad "other settings (--chunk 64)" "$T/p" "chunk=64" \
    -i "$T/corpus.jsonl" --shard 1/4 --chunk 64
# another input: line 10 changed (shard 1/4 holds lines 2, 6, 10, ...)
awk 'NR == 10 { sub(/"prompt": \[/, "\"prompt\": [7, ") } { print }' "$T/corpus.jsonl" \
    > "$T/other.jsonl"
resume_bad "another input (line 10 changed)" "$T/p" "input line 10 is not the line" \
    -i "$T/other.jsonl" --shard 1/4
head -n 5 "$T/corpus.jsonl" > "$T/short.jsonl"
resume_bad "a shorter input" "$T/p" "but the input has only 5 lines" \
    -i "$T/short.jsonl" --shard 1/4
# a record out of place: drop the second record (line 6) from the partial output
awk 'NR != 3' "$T/partial" > "$T/gap"
resume_bad "an output with a line missing inside" "$T/gap" "lacks input line 6" \
    -i "$T/corpus.jsonl" --shard 1/4
awk 'NR == 3 { print; print; next } { print }' "$T/partial" > "$T/twice"
resume_bad "an output with a line twice" "$T/twice" "out of order or twice" \
    -i "$T/corpus.jsonl" --shard 1/4
cp "$T/gen.s1" "$T/done1"
resume_bad "a finished shard of another input" "$T/done1" "a different input" \
    -i "$T/other.jsonl" --shard 1/4
{ cat "$T/partial"; printf 'hello'; } > "$T/foreign"
resume_bad "a file ending in a foreign half line" "$T/foreign" "did not write" \
    -i "$T/corpus.jsonl" --shard 1/4
# (the partial output itself, resumed with the right options, finishes as the whole shard)
cp "$T/partial" "$T/p2"
"$BIN" score -m "$G" -i "$T/corpus.jsonl" -o "$T/p2" --shard 1/4 --resume -t 1 2>"$T/err"
check "--resume of a 20-record shard 1/4 == the uninterrupted shard, byte for byte" \
    'cmp -s "$T/p2" "$T/gen.s1"'
check "--resume says how many it kept" 'grep -q "holds 20 lines of shard 1/4" "$T/err"'

# ---- merge of shards that do not make one input --------------------------------------------
merge_bad() { # what expect files...
    what=$1; expect=$2; shift 2
    rm -f "$T/m.out"
    "$BIN" merge -o "$T/m.out" "$@" 2>"$T/err"
    rc=$?
    check "merge with $what: exit 2 (got $rc)" '[ $rc -eq 2 ]'
    check "merge with $what: says '$expect' ($(tr '\n' ' ' < "$T/err"))" \
        'grep -q -- "$expect" "$T/err"'
    check "merge with $what: nothing written" \
        '[ ! -e "$T/m.out" ] && [ -z "$(ls "$T" | grep merge-)" ]'
}
merge_bad "shard 2 missing" "input line(s) missing: 3, 7, 11, 15, 19" \
    "$T/gen.s0" "$T/gen.s1" "$T/gen.s3"
merge_bad "shard 2 missing" "no file for shard(s) 2 of 4" "$T/gen.s0" "$T/gen.s1" "$T/gen.s3"
merge_bad "shard 1 given twice" "present twice: 2, 6, 10" \
    "$T/gen.s0" "$T/gen.s1" "$T/gen.s2" "$T/gen.s3" "$T/gen.s1"
merge_bad "an unfinished shard" "has no end record" \
    "$T/gen.s0" "$T/partial" "$T/gen.s2" "$T/gen.s3"
merge_bad "an unfinished shard" "input line(s) missing: 82, 86" \
    "$T/gen.s0" "$T/partial" "$T/gen.s2" "$T/gen.s3"
head -c -30 "$T/gen.s3" > "$T/cut3"
merge_bad "a half-written last line" "half written" \
    "$T/gen.s0" "$T/gen.s1" "$T/gen.s2" "$T/cut3"
merge_bad "another N" "is of 4" "$T/gen.s0" "$out"
awk 'NR == 4 { print; print; next } { print }' "$T/gen.s2" > "$T/dbl2"
merge_bad "a record twice in a shard" "present twice: 11 (line 11: in" \
    "$T/gen.s0" "$T/gen.s1" "$T/dbl2" "$T/gen.s3"
merge_bad "a plain file" "is not an output of score --shard" "$T/gen.plain"
"$BIN" score -m "$G" -i "$T/corpus.jsonl" -o "$T/k3.s3" --shard 3/4 --logprobs 3 -t 1 2>/dev/null
merge_bad "other settings" "was scored with" "$T/gen.s0" "$T/gen.s1" "$T/gen.s2" "$T/k3.s3"
"$BIN" score -m "$G" -i "$T/other.jsonl" -o "$T/o.s3" --shard 3/4 -t 1 2>/dev/null
merge_bad "shards of another input" "scored from an input of" \
    "$T/gen.s0" "$T/gen.s1" "$T/gen.s2" "$T/o.s3"
"$BIN" merge 2>/dev/null; rc=$?
check "merge without arguments: exit 2" '[ $rc -eq 2 ]'
done_
