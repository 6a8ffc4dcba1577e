#!/bin/sh
# tests/test_detect.sh — `score --detect` (contamination scores) and --stats' varentropy end
# to end on three generated models (llama, qwen3, llama; one 5000-token vocabulary), 50 lines
# each (25 text prompts of the vocabulary's words, 25 id prompts, 2 to 60 tokens), every
# model compared with the next one (ref_ratio), with --act f32:
#   - against the float64 reference (tests/reference/forward.py, /usr/bin/python3 for numpy):
#     varentropy within 1e-4 absolute at every position; min_k, min_k_pp and ref_ratio within
#     1e-5 relative (min_k_pp relative to max(|x|, 1), a z-score's scale; ref_ratio relative
#     to max(|x|, the mean NLL), as it is a difference of two mean NLLs) of a re-implementation that follows the cited reference code line by line
#     (mink-plus-plus run.py: int(len * ratio), np.sort, np.mean, (lp - mu) / sigma.sqrt();
#     mimir: -np.mean for the loss, loss / len(zlib.compress(bytes(text, "utf-8"))), loss minus
#     the reference's loss);
#   - the same re-implementation on promptscore's own float32 arrays (token_logprobs, entropy,
#     varentropy of --stats) agrees within 1e-12 relative, and zlib_ratio equals Python's
#     zlib on the same bytes exactly (the text as sent; an id line: its tokens' text after BOS);
#   - every new field is bitwise the same across --chunk 1 / 7, -t 2, --max-seqs 3 and the
#     prefix cache (with hits), and with --compare across --chunk and -t;
#   - --detect alone adds "detect" and no statistics arrays; without it no "detect";
#   - serve with --compare: "detect": true and "min_k" give the CLI's objects (text and id
#     prompts, several prompts in one request); bad "detect" / "min_k" / a one-token prompt: 400;
#   - bad input: --min-k 0 and 101 (exit 2, named), --min-k without --detect, a one-token line
#     (an error line naming it; the run goes on and scores the next line).
# Prints "detect_cli: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
BIN="$BUILD/promptscore"
PY=/usr/bin/python3
NAME=detect_cli; FILE=test_detect.sh
. tests/check.sh

if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then skip "$PY with numpy missing"; done_; fi

T=$(mktemp -d /tmp/ps-test-detect-XXXXXX)
trap 'rm -rf "$T"' EXIT

"$BIN" gen-model -o "$T/m0.gguf" --preset tiny --n-vocab 5000 --seed 3 >/dev/null 2>&1 &&
"$BIN" gen-model -o "$T/m1.gguf" --preset tiny --arch qwen3 --n-vocab 5000 --seed 4 >/dev/null 2>&1 &&
"$BIN" gen-model -o "$T/m2.gguf" --preset tiny --n-vocab 5000 --seed 11 >/dev/null 2>&1 ||
    { bad "gen-model failed"; done_; }

# 50 lines: text of the vocabulary's words and ids past the byte tokens (valid UTF-8 words)
"$PY" - > "$T/in.jsonl" <<'PYEOF'
import json, random
r = random.Random(48)
words = ["a", "b", "c", "ab", "ba", "cab", "d", "li", "ng"]
for i in range(50):
    if i % 2 == 0:
        text = " ".join(r.choice(words) for _ in range(r.randrange(1, 40)))
        print(json.dumps({"id": i, "prompt": text}))
    else:
        print(json.dumps({"id": i, "prompt": [1] + [r.randrange(300, 5000) for _ in range(r.randrange(1, 60))]}))
PYEOF

KS=10,20,30,70,100
for m in 0 1 2; do
    o=$(( (m + 1) % 3 ))
    "$BIN" score -m "$T/m$m.gguf" --act f32 --stats --detect --min-k $KS --compare "$T/m$o.gguf" \
        -k 0 -i "$T/in.jsonl" -o "$T/d$m.jsonl" 2>"$T/err" || bad "score --detect (m$m) failed: $(cat "$T/err")"
    "$PY" - "$T" "$m" "$o" "$KS" > "$T/cmp$m" <<'PYEOF'
import json, math, sys, warnings, zlib
import numpy as np
T, m, o, KS = sys.argv[1], sys.argv[2], sys.argv[3], [int(k) for k in sys.argv[4].split(",")]
sys.path.insert(0, "tests/reference")
import forward
M = forward.Model(T + "/m%s.gguf" % m)
R = forward.Model(T + "/m%s.gguf" % o)
inputs = [json.loads(l) for l in open(T + "/in.jsonl")]
got = [json.loads(l) for l in open(T + "/d%s.jsonl" % m)]
warnings.simplefilter("ignore", RuntimeWarning)  # np.mean of an empty selection is nan

def reference_scores(token_log_probs, mu, sigma, ll, ref_ll, text_bytes):
    # mink-plus-plus run.py, line by line (ratios k / 100; torch tensors as numpy arrays)
    scores = {}
    for k in KS:
        ratio = k / 100
        k_length = int(len(token_log_probs) * ratio)
        topk = np.sort(token_log_probs)[:k_length]
        scores["min_k", k] = np.mean(topk).item()
    mink_plus = (token_log_probs - mu) / np.sqrt(sigma)
    for k in KS:
        ratio = k / 100
        k_length = int(len(mink_plus) * ratio)
        topk = np.sort(mink_plus)[:k_length]
        scores["min_k_pp", k] = np.mean(topk).item()
    # mimir: get_ll = -np.mean(all_prob) (the loss); zlib.py: loss / zlib_entropy;
    # reference.py (the versions with the issue's sign): loss - ref_loss
    loss, ref_loss = -ll, -ref_ll
    scores["zlib_ratio"] = loss / len(zlib.compress(text_bytes))
    scores["ref_ratio"] = loss - ref_loss
    return scores

def value(det, key):
    v = det[key[0]][str(key[1])] if isinstance(key, tuple) else det[key]
    return float("nan") if v is None else v

def close(a, b, rel, floor=1e-30):
    if math.isnan(a) or math.isnan(b): return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= rel * max(abs(a), abs(b), floor)

bad, worst_v, worst_rel, n_lines, worst_by = [], 0.0, 0.0, 0, {}
strict = [0, 0, 0.0, 0.0]  # values, values within 1e-5 of |want| itself, worst such ratio, its |want|
for inp, g in zip(inputs, got):
    if g.get("id") != inp["id"] or "detect" not in g:
        bad.append("line %s: no detect object (%s)" % (inp["id"], str(g)[:200])); continue
    lp = g["logprobs"]
    ids = lp["token_ids"]
    det = g["detect"]
    text = inp["prompt"].encode() if isinstance(inp["prompt"], str) else "".join(lp["tokens"][1:]).encode()
    # float64 reference
    ref = forward.stats_lines(M, ids, R)
    for d in ref:
        e = abs(lp["varentropy"][d["pos"]] - d["varentropy"])
        worst_v = max(worst_v, e)
        if not e <= 1e-4: bad.append("line %s pos %d: varentropy %r vs %r" % (inp["id"], d["pos"], lp["varentropy"][d["pos"]], d["varentropy"]))
    r64 = reference_scores(np.array([d["logprob"] for d in ref]),
                           np.array([-d["entropy"] for d in ref]),
                           np.array([d["varentropy"] for d in ref]),
                           np.mean([d["logprob"] for d in ref]),
                           np.mean([d["logprob_other"] for d in ref]), text)
    loss = -np.mean([d["logprob"] for d in ref])
    for key, want in r64.items():
        if key == "zlib_ratio": continue  # its exact check is below
        v = value(det, key)
        # relative to the scale of what the score is made of: a z-score (min_k_pp) is O(1),
        # and ref_ratio is a difference of two mean NLLs: float32 logprobs (~1e-7 of them)
        # cannot make a difference near 0 relatively exact
        wk = key[0] if isinstance(key, tuple) else key
        floor = {"min_k": 1e-30, "min_k_pp": 1.0, "ref_ratio": loss}[wk]
        if not math.isnan(v) and not math.isnan(want):
            e = abs(v - want) / max(abs(want), floor)
            worst_rel = max(worst_rel, e)
            worst_by[wk] = max(worst_by.get(wk, 0.0), e)
            es = abs(v - want) / max(abs(want), 1e-300)
            strict[0] += 1
            strict[1] += es <= 1e-5
            if es > strict[2]: strict[2], strict[3] = es, abs(want)
        if not close(v, want, 1e-5, floor):
            bad.append("line %s %s: %r vs float64 %r" % (inp["id"], key, v, want))
    # promptscore's own float32 arrays through the same code
    n = len(ids) - 1
    f32 = lambda xs: np.array(xs, dtype=np.float32).astype(np.float64)  # the printed floats
    own = reference_scores(f32(lp["token_logprobs"][1:]), -f32(lp["entropy"][1:]),
                           f32(lp["varentropy"][1:]),
                           g["sum_logprob"] / n, 0.0, text)
    for key, want in own.items():
        if key == "ref_ratio": continue  # the compared logprobs are not in the output
        v = value(det, key)
        if key == "zlib_ratio":
            want = (-g["sum_logprob"] / n) / len(zlib.compress(text))
            if v != want: bad.append("line %s zlib_ratio %r vs Python zlib %r" % (inp["id"], v, want))
        elif not close(v, want, 1e-12):
            bad.append("line %s %s: %r vs its own arrays %r" % (inp["id"], key, v, want))
    n_lines += 1
print("m%s: %d lines, worst varentropy |diff| %.2e, worst relative score diff %.2e (%s)" % (m, n_lines, worst_v, worst_rel, ", ".join("%s %.1e" % kv for kv in sorted(worst_by.items()))))
print("m%s: %d of %d scores within 1e-5 of the float64 value itself; the worst %.1e, at |value| %.2e" % (m, strict[1], strict[0], strict[2], strict[3]))
for b in bad[:12]: print("BAD " + b)
PYEOF
    cat "$T/cmp$m"
    check "m$m --detect agrees with the float64 reference and the re-implementation" \
        '! grep -q BAD "$T/cmp$m" && grep -q "50 lines" "$T/cmp$m"'
done

# ---- invariance ---------------------------------------------------------------------------
fields() { # the detect object and the varentropy array of every line of $1
    "$PY" -c "
import json, sys
for l in open(sys.argv[1]):
    x = json.loads(l)
    print(json.dumps([x.get('detect'), x['logprobs'].get('varentropy'), x['logprobs'].get('entropy')]))" "$1"
}
head -20 "$T/in.jsonl" > "$T/in20.jsonl"
head -10 "$T/in.jsonl" >> "$T/in20.jsonl" # repeated lines: prefix-cache hits
"$BIN" score -m "$T/m0.gguf" --stats --detect --min-k $KS --cache-mb 0 -i "$T/in20.jsonl" -o "$T/base.jsonl" 2>/dev/null
fields "$T/base.jsonl" > "$T/base.txt"
for opt in "--chunk 1" "--chunk 7 -t 2" "--max-seqs 3" "--max-seqs 3 --chunk 7" "--cache-mb 64" \
           "--cache-mb 64 --max-seqs 3 --chunk 16"; do
    # shellcheck disable=SC2086
    "$BIN" score -m "$T/m0.gguf" --stats --detect --min-k $KS $opt -i "$T/in20.jsonl" -o "$T/o.jsonl" 2>/dev/null
    fields "$T/o.jsonl" > "$T/o.txt"
    check "detect and varentropy with $opt equal --chunk 256 -t 1 without a cache" 'cmp -s "$T/base.txt" "$T/o.txt"'
done
"$BIN" score -m "$T/m0.gguf" --stats --detect --compare "$T/m1.gguf" -i "$T/in20.jsonl" -o "$T/cb.jsonl" 2>/dev/null
fields "$T/cb.jsonl" > "$T/cb.txt"
for opt in "--chunk 1" "--chunk 7 -t 2"; do
    # shellcheck disable=SC2086
    "$BIN" score -m "$T/m0.gguf" --stats --detect --compare "$T/m1.gguf" $opt -i "$T/in20.jsonl" -o "$T/o.jsonl" 2>/dev/null
    fields "$T/o.jsonl" > "$T/o.txt"
    check "--compare: detect (ref_ratio) with $opt equals --chunk 256 -t 1" 'cmp -s "$T/cb.txt" "$T/o.txt"'
done
check "--compare: ref_ratio present on every line" '[ "$(grep -c ref_ratio "$T/cb.jsonl")" -eq 30 ]'

# ---- what is shown --------------------------------------------------------------------------
"$BIN" score -m "$T/m0.gguf" --detect -i "$T/in20.jsonl" -o "$T/only.jsonl" 2>/dev/null
check "--detect alone: a detect object per line, no statistics arrays, no ref_ratio" \
    '[ "$(grep -c "\"detect\":{\"min_k\":{\"20\":" "$T/only.jsonl")" -eq 30 ] && ! grep -q "\"entropy\"\|\"varentropy\"\|\"rank\"\|ref_ratio" "$T/only.jsonl"'
check "--detect alone: the detect objects of --detect --stats (default k 20)" \
    '"$PY" -c "
import json, sys
a = [json.loads(l)[\"detect\"] for l in open(\"$T/only.jsonl\")]
b = [json.loads(l)[\"detect\"] for l in open(\"$T/base.jsonl\")]
sys.exit(0 if all(x[\"min_k\"][\"20\"] == y[\"min_k\"][\"20\"] and x[\"min_k_pp\"][\"20\"] == y[\"min_k_pp\"][\"20\"] and x[\"zlib_ratio\"] == y[\"zlib_ratio\"] for x, y in zip(a, b)) and len(a) == 30 else 1)"'
"$BIN" score -m "$T/m0.gguf" --stats -i "$T/in20.jsonl" -o "$T/nod.jsonl" 2>/dev/null
check "without --detect: no detect key; --stats has varentropy aligned with token_logprobs" \
    '! grep -q "\"detect\"" "$T/nod.jsonl" && "$PY" -c "
import json, sys
for l in open(\"$T/nod.jsonl\"):
    lp = json.loads(l)[\"logprobs\"]
    if lp[\"varentropy\"][0] is not None or len(lp[\"varentropy\"]) != len(lp[\"token_logprobs\"]): sys.exit(1)"'

# ---- the server: "detect": true, "min_k" ----------------------------------------------------
"$BIN" serve -m "$T/m0.gguf" --compare "$T/m1.gguf" --port 0 -t 1 2>"$T/serve.log" &
spid=$!
port=""
i=0
while [ $i -lt 200 ]; do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$T/serve.log" | head -n 1)
    [ -n "$port" ] && break
    kill -0 $spid 2>/dev/null || break
    sleep 0.05; i=$((i + 1))
done
if [ -z "$port" ]; then
    bad "the server did not start: $(cat "$T/serve.log")"
else
    "$BIN" score -m "$T/m0.gguf" --detect --min-k 10,50 --compare "$T/m1.gguf" -i "$T/in20.jsonl" \
        -o "$T/sc.jsonl" 2>/dev/null
    "$PY" - "$port" "$T/in20.jsonl" "$T/sc.jsonl" > "$T/srv" <<'PYEOF'
import json, sys, urllib.request, urllib.error
port, inp, cli = sys.argv[1], sys.argv[2], sys.argv[3]
def post(body):
    req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % port, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
lines = [json.loads(l) for l in open(inp)][:6]
want = [json.loads(l)["detect"] for l in open(cli)][:6]
ok = True
for l, w in zip(lines, want):  # one request each: a text or a list of ids
    st, got = post({"prompt": l["prompt"], "max_tokens": 0, "logprobs": 0, "detect": True,
                    "min_k": [10, 50]})
    ok = ok and st == 200 and got["choices"][0]["detect"] == w
    ok = ok and "entropy" not in got["choices"][0]["logprobs"]
    if not ok: print("differs: %s %s" % (st, str(got)[:300])); break
texts = [l["prompt"] for l in lines if isinstance(l["prompt"], str)]
st, got = post({"prompt": texts, "max_tokens": 0, "logprobs": 0, "detect": True, "min_k": [10, 50]})
ok = ok and st == 200 and [c["detect"] for c in got["choices"]] == [w for l, w in zip(lines, want) if isinstance(l["prompt"], str)]
print("server detect equals the CLI's: %s" % ok)
st, _ = post({"prompt": "a b", "max_tokens": 0})
print("without detect: %s" % (st == 200 and "detect" not in _["choices"][0]))
for body, what in (({"prompt": [1], "max_tokens": 0, "detect": True}, "one token"),
                   ({"prompt": "a b", "max_tokens": 0, "detect": True, "min_k": [0]}, "min_k 0"),
                   ({"prompt": "a b", "max_tokens": 0, "detect": True, "min_k": [101]}, "min_k 101"),
                   ({"prompt": "a b", "max_tokens": 0, "detect": "yes"}, "detect not a bool")):
    st, e = post(body)
    print("%s: %d %s" % (what, st, e.get("error", {}).get("message", "")))
PYEOF
    cat "$T/srv"
    check "serve \"detect\": true equals score --detect (with --compare: ref_ratio)" \
        'grep -q "equals the CLI.s: True" "$T/srv" && grep -q "without detect: True" "$T/srv"'
    check "serve: a one-token prompt with detect, min_k 0 / 101, a non-bool detect: 400, named" \
        '[ "$(grep -c ": 400 " "$T/srv")" -eq 4 ] && grep -q "one token: 400 detect needs prompts of at least 2" "$T/srv" && grep -q "min_k 101: 400 min_k\[0\]" "$T/srv"'
    kill -TERM $spid; wait $spid
fi

# ---- bad input ------------------------------------------------------------------------------
for kk in 0 101 "10,,20" "x"; do
    "$BIN" score -m "$T/m0.gguf" --detect --min-k "$kk" -i "$T/in20.jsonl" >/dev/null 2>"$T/err"; rc=$?
    check "--min-k $kk: exit 2, named ($(cat "$T/err"))" '[ $rc -eq 2 ] && grep -q -- "--min-k" "$T/err"'
done
"$BIN" score -m "$T/m0.gguf" --min-k 10 -i "$T/in20.jsonl" >/dev/null 2>"$T/err"; rc=$?
check "--min-k without --detect: exit 2" '[ $rc -eq 2 ] && grep -q "needs --detect" "$T/err"'
printf '{"id":"one","prompt":[1]}\n{"id":"two","prompt":[1,400,500]}\n' > "$T/one.jsonl"
"$BIN" score -m "$T/m0.gguf" --detect -i "$T/one.jsonl" -o "$T/one.out" 2>/dev/null; rc=$?
check "a one-token line: an error line naming --detect, the next line scored, exit 0" \
    '[ $rc -eq 0 ] && head -1 "$T/one.out" | grep -q "\"id\":\"one\",\"error\".*--detect needs a prompt of at least 2 tokens" && sed -n 2p "$T/one.out" | grep -q "\"id\":\"two\".*\"detect\""'
"$BIN" score -m "$T/m0.gguf" --detect --strict -i "$T/one.jsonl" -o /dev/null 2>/dev/null; rc=$?
check "a one-token line with --strict: exit 1" '[ $rc -eq 1 ]'

done_
