#!/bin/sh
# tests/test_stats.sh — `score --stats` and `score --compare` end to end on generated models of
# two families (llama and qwen3) with the same 5000-token vocabulary (a 4096-logit chunk plus
# full blocks plus a ragged tail), against the independent float64 reference
# (tests/reference/forward.py --stats --compare, run with /usr/bin/python3 for numpy):
#   - with --act f32: entropy, varentropy, kld and dp within 1e-4 absolute at every position, rank and
#     same_top1 exact;
#   - a model compared with itself: kld exactly 0 and same_top1 1 everywhere;
#   - the new arrays are bitwise the same across --chunk 1/7/256, -t 1/2, --max-seqs 1/3 and
#     the prefix cache (a prompt scored again, finding its blocks cached); without --stats
#     and --compare the output has none of the new keys;
#   - bad input: vocabularies that differ (exit 2, both sizes named; of one size, the token
#     named), --compare a FIFO and a missing file (exit 1, named), never a crash.
# Prints "stats_cli: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
BIN="$BUILD/promptscore"
PY=/usr/bin/python3
NAME=stats_cli; FILE=test_stats.sh
. tests/check.sh

if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then skip "$PY with numpy missing"; done_; fi

T=$(mktemp -d /tmp/ps-test-stats-XXXXXX)
trap 'rm -rf "$T"' EXIT

"$BIN" gen-model -o "$T/a.gguf" --preset tiny --n-vocab 5000 --seed 3 >/dev/null 2>&1 &&
"$BIN" gen-model -o "$T/b.gguf" --preset tiny --arch qwen3 --n-vocab 5000 --seed 4 >/dev/null 2>&1 &&
"$BIN" gen-model -o "$T/aq.gguf" --preset tiny --n-vocab 5000 --seed 3 --type q8_0 >/dev/null 2>&1 &&
"$BIN" gen-model -o "$T/c.gguf" --preset tiny --n-vocab 600 >/dev/null 2>&1 ||
    { bad "gen-model failed"; done_; }

# a 40-token prompt of random ids and a second one sharing its first 32
IDS=$("$PY" -c 'import random; r = random.Random(7); print(",".join(["1"] + [str(r.randrange(3, 5000)) for _ in range(39)]))')
IDS2=$(echo "$IDS" | cut -d, -f1-32),17,4000,250
printf '{"id":1,"prompt":[%s],"logprobs":3}\n' "$IDS" > "$T/in.jsonl"
printf '{"id":1,"prompt":[%s],"logprobs":3}\n{"id":2,"prompt":[%s],"logprobs":3}\n{"id":3,"prompt":[%s],"logprobs":3}\n' \
    "$IDS" "$IDS2" "$IDS" > "$T/in3.jsonl"

# ---- against the float64 reference: another family (b), and a Q8_0 copy of a (aq: most top-1 agree) ----
for other in b aq; do
"$BIN" score -m "$T/a.gguf" --act f32 --stats --compare "$T/$other.gguf" -i "$T/in.jsonl" \
    -o "$T/ab.jsonl" 2>"$T/err" || bad "score --stats --compare failed: $(cat "$T/err")"
"$PY" tests/reference/forward.py "$T/a.gguf" --tokens "$IDS" --stats --compare "$T/$other.gguf" \
    > "$T/ref.jsonl" || bad "forward.py --stats --compare failed"
"$PY" - "$T/ab.jsonl" "$T/ref.jsonl" > "$T/cmp" <<'PYEOF'
import json, sys
got = json.loads(open(sys.argv[1]).readline())
lp = got["logprobs"]
ref = [json.loads(l) for l in open(sys.argv[2])]
worst = {"entropy": 0.0, "kld": 0.0, "dp": 0.0, "varentropy": 0.0}
bad = []
for d in ref:
    i = d["pos"]
    for key in worst:
        e = abs(lp[key][i] - d[key])
        worst[key] = max(worst[key], e)
        if not e <= 1e-4:
            bad.append("%s at %d: %r vs %r" % (key, i, lp[key][i], d[key]))
    for key in ("rank", "same_top1"):
        if lp[key][i] != d[key]:
            bad.append("%s at %d: %r vs %r" % (key, i, lp[key][i], d[key]))
for key in ("entropy", "rank", "kld", "same_top1", "dp", "varentropy"):
    if lp[key][0] is not None or len(lp[key]) != len(lp["token_logprobs"]):
        bad.append("%s: not aligned with token_logprobs (first entry null)" % key)
n = len(ref)
if abs(got["kld_mean"] - sum(d["kld"] for d in ref) / n) > 1e-4:
    bad.append("kld_mean %r" % got["kld_mean"])
if abs(got["same_top1_pct"] - 100.0 * sum(d["same_top1"] for d in ref) / n) > 1e-9:
    bad.append("same_top1_pct %r" % got["same_top1_pct"])
print("positions %d, worst |diff|: entropy %.2e varentropy %.2e kld %.2e dp %.2e, same top1 %.1f%%" %
      (n, worst["entropy"], worst["varentropy"], worst["kld"], worst["dp"], got["same_top1_pct"]))
for b in bad[:10]:
    print("BAD " + b)
PYEOF
cat "$T/cmp"
check "score --stats --compare $other.gguf agrees with the float64 reference" '! grep -q BAD "$T/cmp" && grep -q positions "$T/cmp"'
done

# ---- a model compared with itself ---------------------------------------------------------
"$BIN" score -m "$T/a.gguf" --compare "$T/a.gguf" -i "$T/in.jsonl" -o "$T/aa.jsonl" 2>/dev/null
check "self-compare: kld exactly 0, same_top1 1, dp 0" \
    '"$PY" -c "
import json, sys
lp = json.loads(open(\"$T/aa.jsonl\").readline())[\"logprobs\"]
sys.exit(0 if all(x == 0 for x in lp[\"kld\"][1:]) and all(x == 1 for x in lp[\"same_top1\"][1:]) and all(x == 0 for x in lp[\"dp\"][1:]) else 1)"'

# ---- invariance: chunk, threads, --max-seqs, the prefix cache ------------------------------
arrays() { # the new arrays of every line of $1, one line each
    "$PY" -c "
import json, sys
for l in open(sys.argv[1]):
    lp = json.loads(l)['logprobs']
    print(json.dumps([lp.get(k) for k in ('entropy', 'rank', 'kld', 'same_top1', 'dp', 'varentropy', 'token_logprobs')]))" "$1"
}
"$BIN" score -m "$T/a.gguf" --stats --compare "$T/b.gguf" -i "$T/in.jsonl" -o "$T/base.jsonl" 2>/dev/null
arrays "$T/base.jsonl" > "$T/base.txt"
for opt in "--chunk 1" "--chunk 7" "--chunk 256 -t 2" "--chunk 7 -t 2"; do
    # shellcheck disable=SC2086
    "$BIN" score -m "$T/a.gguf" --stats --compare "$T/b.gguf" $opt -i "$T/in.jsonl" -o "$T/o.jsonl" 2>/dev/null
    arrays "$T/o.jsonl" > "$T/o.txt"
    check "--compare arrays with $opt equal --chunk 256 -t 1" 'cmp -s "$T/base.txt" "$T/o.txt"'
done
"$BIN" score -m "$T/a.gguf" --stats --cache-mb 0 -i "$T/in3.jsonl" -o "$T/s0.jsonl" 2>/dev/null
arrays "$T/s0.jsonl" > "$T/s0.txt"
check "the first line's entropy and rank equal the --compare run's" \
    '[ "$(head -1 "$T/s0.txt" | cut -c1-200)" = "$(head -1 "$T/base.txt" | cut -c1-200)" ]'
check "a prompt scored twice has the same statistics" '[ "$(sed -n 1p "$T/s0.txt")" = "$(sed -n 3p "$T/s0.txt")" ]'
for opt in "--chunk 1" "--chunk 7 -t 2" "--max-seqs 3" "--max-seqs 3 --chunk 7" "--cache-mb 64" "--cache-mb 64 --max-seqs 3 --chunk 16"; do
    # shellcheck disable=SC2086
    "$BIN" score -m "$T/a.gguf" --stats $opt -i "$T/in3.jsonl" -o "$T/o.jsonl" 2>/dev/null
    arrays "$T/o.jsonl" > "$T/o.txt"
    check "--stats arrays with $opt equal those without a cache" 'cmp -s "$T/s0.txt" "$T/o.txt"'
done
# the prefix cache: the second and third lines find blocks of the first cached
"$BIN" score -m "$T/a.gguf" --stats --cache-mb 64 -i "$T/in3.jsonl" -o "$T/o.jsonl" 2>/dev/null
arrays "$T/o.jsonl" > "$T/o.txt"
check "--stats with the prefix cache (hits) equals without" 'cmp -s "$T/s0.txt" "$T/o.txt"'
# off by default: none of the new keys, the rest as with them
"$BIN" score -m "$T/a.gguf" -i "$T/in3.jsonl" -o "$T/plain.jsonl" 2>/dev/null
check "without --stats the lines hold no new key" \
    '! grep -q "\"entropy\"\|\"varentropy\"\|\"rank\"\|\"kld\"\|kld_mean" "$T/plain.jsonl"'
check "without --stats the other values are those with it" \
    '"$PY" -c "
import json, sys
a = [json.loads(l) for l in open(\"$T/plain.jsonl\")]
b = [json.loads(l) for l in open(\"$T/s0.jsonl\")]
for x in b:
    for k in (\"entropy\", \"rank\", \"varentropy\"): del x[\"logprobs\"][k]
sys.exit(0 if a == b else 1)"'

# ---- perplexity --ppl-mode llama --compare --------------------------------------------------
# ids as a text: the synthetic vocab's tokens are words; 3 chunks of 32 tokens, each scoring
# its second half (positions 16..30 predict 17..31)
"$PY" -c 'import random; r = random.Random(3); print(" ".join(r.choice(["a", "b", "c", "ab", "ba", "cab", "d"]) for _ in range(400)))' > "$T/text.txt"
"$BIN" perplexity -m "$T/a.gguf" --ppl-mode llama -c 32 --chunks 3 --act f32 --compare "$T/b.gguf" \
    -f "$T/text.txt" > "$T/ppl.txt" 2>"$T/err" || bad "perplexity --compare failed: $(cat "$T/err")"
for label in "Mean PPL(Q)                   :" "Mean    KLD:" "Maximum KLD:" "99.9%   KLD:" \
             "Median  KLD:" " 0.1%   KLD:" "Minimum KLD:" "Mean    Δp:" "75.0%   Δp:" \
             "RMS Δp    :" "Same top p:" "====== KL divergence statistics ======"; do
    check "perplexity --compare prints '$label'" 'grep -qF "$label" "$T/ppl.txt"'
done
"$BIN" perplexity -m "$T/a.gguf" --ppl-mode llama -c 32 --chunks 3 --act f32 --compare "$T/b.gguf" \
    -f "$T/text.txt" --json > "$T/ppl.json" 2>/dev/null
# the ids perplexity reads: the text less its trailing newline, special-token text as text
head -c -1 "$T/text.txt" | "$BIN" tokenize -m "$T/a.gguf" --no-parse-special > "$T/ids.txt" 2>/dev/null
"$PY" - "$T" <<'PYEOF' > "$T/pcmp"
import json, subprocess, sys, math
T = sys.argv[1]
j = json.load(open(T + "/ppl.json"))
txt = open(T + "/ppl.txt").read()
# the text's lines agree with --json
mean = float(txt.split("Mean    KLD:")[1].split()[0])
top = float(txt.split("Same top p:")[1].split()[0])
bad = []
if abs(mean - j["kld_mean"]) > 1e-6: bad.append("text and json Mean KLD differ")
if abs(top - j["same_top_p_pct"]) > 1e-3: bad.append("text and json Same top p differ")
# against the float64 reference: the chunks' scored positions
ids = [int(t) for t in open(T + "/ids.txt").read().replace(",", " ").replace("[", " ").replace("]", " ").split()]
sys.path.insert(0, "tests/reference")
import forward
a = forward.Model(T + "/a.gguf"); b = forward.Model(T + "/b.gguf")
kl, same, n = 0.0, 0, 0
for c in range(3):
    chunk = ids[c * 32:(c + 1) * 32]
    chunk[0] = 1  # BOS
    for d in forward.stats_lines(a, chunk, b)[16:]:  # rows 16..30
        kl += d["kld"]; same += d["same_top1"]; n += 1
# the target of each scored row is the original token, which stats_lines reads from chunk
if n != j["tokens_scored"]: bad.append("tokens scored %d vs %d" % (j["tokens_scored"], n))
if abs(kl / n - j["kld_mean"]) > 1e-4: bad.append("Mean KLD %r vs float64 %r" % (j["kld_mean"], kl / n))
if abs(100.0 * same / n - j["same_top_p_pct"]) > 1e-9: bad.append("Same top p %r vs %r" % (j["same_top_p_pct"], 100.0 * same / n))
print("perplexity --compare: Mean KLD %.6f float64 %.6f, same top %.3f%%" % (j["kld_mean"], kl / n, j["same_top_p_pct"]))
for x in bad: print("BAD " + x)
PYEOF
cat "$T/pcmp"
check "perplexity --compare agrees with --json and the float64 reference" \
    '! grep -q BAD "$T/pcmp" && grep -q "Mean KLD" "$T/pcmp"'
"$BIN" perplexity -m "$T/a.gguf" --ppl-mode llama -c 32 --chunks 3 --compare "$T/a.gguf" \
    -f "$T/text.txt" > "$T/self.txt" 2>/dev/null
check "perplexity --compare with itself: Mean KLD 0, Same top p 100%" \
    'grep -q "Mean    KLD:   0.000000 ±   0.000000" "$T/self.txt" && grep -q "Same top p: 100.000 ± 0.000 %" "$T/self.txt"'

# ---- bad input -----------------------------------------------------------------------------
"$BIN" score -m "$T/a.gguf" --compare "$T/c.gguf" -i "$T/in.jsonl" >/dev/null 2>"$T/err"; rc=$?
check "vocabularies that differ: exit 2, both sizes named ($(cat "$T/err"))" \
    '[ $rc -eq 2 ] && grep -q "5000" "$T/err" && grep -q "600" "$T/err"'
# the same size (512 tokens each), other tokens: refused, naming the first token that differs
# (the vocabulary check compares every token, not sizes; test_vocab.c: types and special ids)
STORIES=${PS_SHARED:-../shared}/models/stories260K.gguf
if [ -e "$STORIES" ] && "$BIN" gen-model -o "$T/v512.gguf" --preset tiny --n-vocab 512 \
        >/dev/null 2>&1; then
    "$BIN" score -m "$STORIES" --compare "$T/v512.gguf" -i "$T/in.jsonl" >"$T/out" 2>"$T/err"
    rc=$?
    check "vocabularies of one size that differ: exit 2, the token named ($(cat "$T/err"))" \
        '[ $rc -eq 2 ] && grep -q "differ at token 259" "$T/err" && ! grep -q kld "$T/out"'
else
    skip "stories260K or gen-model --n-vocab 512 missing: the same-size vocabulary case"
fi
mkfifo "$T/fifo"
timeout 20 "$BIN" score -m "$T/a.gguf" --compare "$T/fifo" -i "$T/in.jsonl" >/dev/null 2>"$T/err"; rc=$?
check "--compare a FIFO: exit 1, named ($(cat "$T/err"))" '[ $rc -eq 1 ] && grep -qi "fifo" "$T/err"'
"$BIN" score -m "$T/a.gguf" --compare "$T/missing.gguf" -i "$T/in.jsonl" >/dev/null 2>"$T/err"; rc=$?
check "--compare a missing file: exit 1, named ($(cat "$T/err"))" \
    '[ $rc -eq 1 ] && grep -q "missing.gguf" "$T/err"'
done_
