#!/bin/sh
# tests/test_scorers.sh — (context, continuation) pairs and named tokens end to end (docs/api.md,
# "Continuations" and "Named tokens"), on generated models with a SentencePiece vocabulary
# (llama-spm's) and a byte-level BPE one (gpt-2's) and on ../shared/models/stories260K.gguf:
#   - against the independent float64 reference (tests/reference/forward.py, with numpy, as a
#     module: one load per model), `score --act f32`: continuation_logprob within 1e-5
#     relative of the float64 sum over the continuation (near 0: 2e-6 per token, about an ulp
#     of the logsumexp, to which a float32 logprob is resolved), is_greedy
#     exactly the float64 argmax's answer; token_id_logprobs bitwise equal to top_logprobs
#     where the id is in the top-K, and within 1e-5 relative to max(1, |value|) of the float64
#     log-softmax otherwise (the line printed shows the worst; an absolute 1e-6 is not
#     reachable: the float32 logprob of -20 alone is resolved to 2e-6, and the bound leaves
#     room for other ISAs' summation orders);
#   - every new field (token_id_logprobs, continuation_logprob, is_greedy, continuation_start)
#     and token_logprobs bitwise the same across --chunk 1/7/256, -t 1/2, --max-seqs 1/4 and
#     the prefix cache on or off (pairs sharing their context);
#   - the server: the batch form (one context, a list of continuations; two lists) bitwise
#     the CLI's lines, with token_ids_logprob; the served name also as the file's base name
#     (stories260K); bad input: context without continuation, prompt and context, ids out of
#     range, lists of different lengths (400, naming the field); score --token-ids out of
#     range or not a number (exit 2, named).
# Prints "scorers: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SHARED=${PS_SHARED:-../shared}
STORIES="$SHARED/models/stories260K.gguf"
BIN="$BUILD/promptscore"
PY=/usr/bin/python3
NAME=scorers; FILE=test_scorers.sh
. tests/check.sh

if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
if [ ! -r "$STORIES" ] || [ ! -r "$SHARED/vocab/ggml-vocab-gpt-2.gguf" ]; then
    skip "shared test material not found at $SHARED (set PS_SHARED)"; done_
fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then skip "$PY with numpy missing"; done_; fi

T=$(mktemp -d /tmp/ps-test-scorers-XXXXXX)
spid=""
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT

"$BIN" gen-model -o "$T/spm.gguf" --preset tiny --vocab "$SHARED/vocab/ggml-vocab-llama-spm.gguf" --seed 6 >/dev/null 2>&1 &&
"$BIN" gen-model -o "$T/bpe.gguf" --preset tiny --vocab "$SHARED/vocab/ggml-vocab-gpt-2.gguf" --seed 5 >/dev/null 2>&1 ||
    { bad "gen-model failed"; done_; }

cat > "$T/pairs.jsonl" <<'EOF'
{"id": 1, "context": "Once upon a time", "continuation": " there was a girl"}
{"id": 2, "context": "Once upon a time ", "continuation": "there was a girl"}
{"id": 3, "context": "", "continuation": "Once upon a time"}
{"id": 4, "context": "The cat sat on the\n", "continuation": "mat. It was happy."}
{"id": 5, "context": "She said <s> and </s> then", "continuation": " <|endoftext|> left"}
{"id": 6, "context": "Once upon a", "continuation": " time"}
{"id": 7, "context": "Once upon a time", "continuation": ", there was a little girl named Lily."}
{"id": 8, "context": "Once upon a time", "continuation": " in a big forest"}
{"id": 9, "context": "12345 + 678 =", "continuation": " 13023"}
EOF

# ---- against the float64 reference -------------------------------------------------------
for m in spm bpe stories; do
    [ "$m" = stories ] && path="$STORIES" || path="$T/$m.gguf"
    nv=$("$PY" -c "
import sys; sys.path.insert(0, 'tests/reference')
from forward import Model
print(Model(sys.argv[1]).n_vocab)" "$path")
    ids="0,1,2,3,100,$((nv - 1))"
    "$BIN" score -m "$path" --act f32 -k 4 --token-ids "$ids" -i "$T/pairs.jsonl" -o "$T/$m.jsonl" 2>"$T/err" ||
        bad "$m: score of the pairs failed: $(cat "$T/err")"
    "$PY" - "$path" "$T/$m.jsonl" "$ids" > "$T/$m.cmp" 2>&1 <<'PYEOF'
import json, sys
import numpy as np
sys.path.insert(0, "tests/reference")
from forward import Model
model = Model(sys.argv[1])
named = [int(x) for x in sys.argv[3].split(",")]
bad, worst_sum, worst_named, n_top, n_pairs, n_greedy = [], 0.0, 0.0, 0, 0, 0
strict = [0, 0, 0, 0.0]  # continuations within 1e-5 of |want|; named values, within 1e-6 absolute, worst
for line in open(sys.argv[2]):
    o = json.loads(line)
    if "error" in o:
        bad.append("line %s: %s" % (o["id"], o["error"]["message"]))
        continue
    lp = o["logprobs"]
    toks, start = lp["token_ids"], o["continuation_start"]
    z = model.forward(toks).astype(np.float64)
    m = z.max(axis=1, keepdims=True)
    ls = z - (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True)))
    want = sum(ls[i - 1][toks[i]] for i in range(start, len(toks)))
    greedy = all(int(np.argmax(z[i - 1])) == toks[i] for i in range(start, len(toks)))
    d = abs(o["continuation_logprob"] - want)
    # 1e-5 relative; near 0 the float32 logprob itself (logit - lse, lse of a few units) is
    # only resolved to an ulp of the lse (~1e-6), so each term may be that far off
    bound = max(1e-5 * abs(want), 2e-6 * (len(toks) - start))
    worst_sum = max(worst_sum, d / bound)
    strict[0] += d <= 1e-5 * abs(want)
    if not d <= bound:
        bad.append("line %s: continuation_logprob %r vs float64 %r" % (o["id"], o["continuation_logprob"], want))
    if o["is_greedy"] != greedy:
        bad.append("line %s: is_greedy %r vs float64 %r" % (o["id"], o["is_greedy"], greedy))
    n_pairs += 1
    n_greedy += greedy
    tl = lp["token_id_logprobs"]
    if tl[0] is not None or len(tl) != len(toks):
        bad.append("line %s: token_id_logprobs not aligned with token_logprobs" % o["id"])
    for i in range(1, len(toks)):
        tops = dict((t, v) for t, v in lp["top_ids"][i])
        for j, t in enumerate(named):
            got = tl[i][j]
            if t in tops:
                n_top += 1
                if np.float32(got).tobytes() != np.float32(tops[t]).tobytes():
                    bad.append("line %s pos %d id %d: %r vs top_logprobs %r" % (o["id"], i, t, got, tops[t]))
            e = abs(got - ls[i - 1][t]) / max(1.0, abs(ls[i - 1][t]))
            worst_named = max(worst_named, e)
            ea = abs(got - ls[i - 1][t])
            strict[1] += 1
            strict[2] += ea <= 1e-6
            strict[3] = max(strict[3], ea)
            if not e <= 1e-5:
                bad.append("line %s pos %d id %d: %r vs float64 %r" % (o["id"], i, t, got, ls[i - 1][t]))
print("pairs %d (greedy %d), worst continuation diff / its bound %.2f, worst named rel diff %.2e, "
      "named ids in the top-K %d" % (n_pairs, n_greedy, worst_sum, worst_named, n_top))
print("continuations within 1e-5 of the float64 sum itself %d of %d; named values within 1e-6 "
      "absolute %d of %d, the worst %.2e" % (strict[0], n_pairs, strict[2], strict[1], strict[3]))
for b in bad[:10]:
    print("BAD " + b)
PYEOF
    sed "s/^/  $m: /" "$T/$m.cmp"
    check "$m: continuations and named tokens agree with the float64 reference" \
        '! grep -q "BAD\|Error\|Traceback" "$T/$m.cmp" && grep -q "^pairs 9" "$T/$m.cmp"'
done
check "stories260K: some continuation is greedy, some is not" \
    'grep -q "greedy [1-8])" "$T/stories.cmp"'

# ---- invariance: chunk, threads, --max-seqs, the prefix cache -----------------------------
fields() { # the new fields and token_logprobs of every line of $1, one line each
    "$PY" -c "
import json, sys
for l in open(sys.argv[1]):
    o = json.loads(l)
    lp = o['logprobs']
    print(json.dumps([o.get(k) for k in ('continuation_logprob', 'is_greedy', 'continuation_start')] +
                     [lp.get('token_id_logprobs'), lp.get('token_logprobs')]))" "$1"
}
for m in spm bpe; do
    "$BIN" score -m "$T/$m.gguf" -k 2 --token-ids 5,1,900 --cache-mb 0 -i "$T/pairs.jsonl" -o "$T/b.jsonl" 2>/dev/null
    fields "$T/b.jsonl" > "$T/b.txt"
    for opt in "--chunk 1" "--chunk 7 -t 2" "--max-seqs 4" "--max-seqs 4 --chunk 16 -t 2" "--cache-mb 64" "--cache-mb 64 --max-seqs 4"; do
        # shellcheck disable=SC2086
        "$BIN" score -m "$T/$m.gguf" -k 2 --token-ids 5,1,900 $opt -i "$T/pairs.jsonl" -o "$T/o.jsonl" 2>/dev/null
        fields "$T/o.jsonl" > "$T/o.txt"
        check "$m: the new fields with $opt equal --chunk 256 -t 1 without a cache" 'cmp -s "$T/b.txt" "$T/o.txt"'
    done
done
# the cache found blocks of the shared contexts (continuations read cached ranks)
"$BIN" score -m "$T/spm.gguf" -k 2 --cache-mb 64 -i "$T/pairs.jsonl" -o "$T/c.jsonl" 2>/dev/null
"$BIN" score -m "$T/spm.gguf" -k 2 --cache-mb 0 -i "$T/pairs.jsonl" -o "$T/c0.jsonl" 2>/dev/null
fields "$T/c.jsonl" > "$T/c.txt"; fields "$T/c0.jsonl" > "$T/c0.txt"
check "continuations through the prefix cache equal those without" 'cmp -s "$T/c.txt" "$T/c0.txt"'
check "without --token-ids no token_id_logprobs" '! grep -q token_id_logprobs "$T/c.jsonl"'

# ---- bad --token-ids ----------------------------------------------------------------------
echo '{"prompt": "x"}' | "$BIN" score -m "$STORIES" --token-ids 1,512 >/dev/null 2>"$T/err"; rc=$?
check "--token-ids 1,512: exit 2 naming the id and the vocabulary (rc $rc)" \
    '[ $rc -eq 2 ] && grep -q "512" "$T/err" && grep -q "vocabulary has 512" "$T/err"'
echo '{"prompt": "x"}' | "$BIN" score -m "$STORIES" --token-ids 1,x >/dev/null 2>"$T/err"; rc=$?
check "--token-ids 1,x: exit 2 (rc $rc)" '[ $rc -eq 2 ] && grep -q "not an integer" "$T/err"'

# ---- the server ----------------------------------------------------------------------------
log="$T/serve.log"
"$BIN" serve -m "$STORIES" --port 0 -t 1 2>"$log" &
spid=$!
port=""
for i in $(seq 50); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then bad "serve did not start: $(tail -n 3 "$log")"; done_; fi
"$BIN" score -m "$STORIES" -k 1 --token-ids 13,400 -i "$T/pairs.jsonl" -o "$T/cli.jsonl" 2>/dev/null
"$PY" - "$port" "$T/cli.jsonl" > "$T/srv.out" 2>&1 <<'PYEOF'
import json, sys, urllib.request, urllib.error
port = sys.argv[1]
cli = [json.loads(l) for l in open(sys.argv[2])]
fails = []
def post(body):
    req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % port, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        r = urllib.request.urlopen(req, timeout=30)
        return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
def same(choice, line, what):
    for k in ("continuation_logprob", "is_greedy", "continuation_start"):
        if choice.get(k) != line.get(k):
            fails.append("%s: %s %r vs the CLI's %r" % (what, k, choice.get(k), line.get(k)))
    a, b = choice["logprobs"], line["logprobs"]
    for k in ("token_ids", "token_logprobs", "token_id_logprobs"):
        if a.get(k) != b.get(k):
            fails.append("%s: logprobs.%s differs from the CLI's" % (what, k))
# one context, several continuations (lines 1, 7, 8 share "Once upon a time")
s, j = post({"context": "Once upon a time", "continuation": [" there was a girl",
             ", there was a little girl named Lily.", " in a big forest"], "logprobs": 1,
             "token_ids_logprob": [13, 400], "model": "stories260K"})
if s != 200 or len(j.get("choices", [])) != 3:
    fails.append("batch form: status %d %r" % (s, j))
else:
    for c, i in zip(j["choices"], (0, 6, 7)):
        same(c, cli[i], "choice %d" % c["index"])
        if c["text"] != "".join(c["logprobs"]["tokens"][1:]) and not c["text"]:
            fails.append("choice %d: no echoed text" % c["index"])
# two lists
s, j = post({"context": ["", "Once upon a"], "continuation": ["Once upon a time", " time"],
             "logprobs": 1, "logprob_token_ids": [13, 400]})
if s != 200:
    fails.append("two lists: status %d %r" % (s, j))
else:
    same(j["choices"][0], cli[2], "two lists, choice 0")
    same(j["choices"][1], cli[5], "two lists, choice 1")
    if j["usage"]["completion_tokens"] != 0:
        fails.append("pairs generate nothing by default: %r" % j["usage"])
# the served name: general.name and the file's base name
for name, want in (("llama", 200), ("stories260K", 200), ("stories", 404)):
    s, j = post({"prompt": "x", "max_tokens": 0, "model": name})
    if s != want:
        fails.append("model %r: status %d, want %d" % (name, s, want))
# bad input
for body, param in (({"context": "x"}, "continuation"), ({"continuation": "x"}, "context"),
                    ({"prompt": "a", "context": "x", "continuation": "y"}, "prompt"),
                    ({"context": ["a", "b"], "continuation": ["c", "d", "e"]}, "continuation"),
                    ({"context": "a", "continuation": ""}, "continuation"),
                    ({"prompt": "a", "logprob_token_ids": [1, 512]}, "logprob_token_ids"),
                    ({"prompt": "a", "token_ids_logprob": "1"}, "token_ids_logprob"),
                    ({"prompt": "a", "logprob_token_ids": [1], "token_ids_logprob": [2]}, "token_ids_logprob")):
    s, j = post(body)
    e = j.get("error", {})
    if s != 400 or e.get("param") != param:
        fails.append("%r: status %d, error %r (want 400 naming %s)" % (body, s, e, param))
for f in fails:
    print("FAIL " + f)
print("done")
PYEOF
grep '^FAIL ' "$T/srv.out" | head -20 | while read -r l; do echo "FAIL $FILE: ${l#FAIL }"; done
check "server: pairs and named tokens bitwise the CLI's, the base name served, errors named" \
    '! grep -q "^FAIL\|Traceback" "$T/srv.out" && grep -q "^done" "$T/srv.out" || { tail -n 5 "$T/srv.out"; false; }'
done_
