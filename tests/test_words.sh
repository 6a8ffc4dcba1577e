#!/bin/sh
# tests/test_words.sh — `score --words` / "words": true (docs/api.md, "Words") end to end:
#   - against the float64 reference tests/reference/words.py (forward.py's full log-softmax,
#     the word-start set read from the GGUF by itself) on a generated llama model with a
#     SentencePiece vocabulary (BOS), a generated qwen3 model with GPT-2's byte-level BPE
#     vocabulary (no BOS: the first word is null) and stories260K: every word's text, offset
#     and n_tokens exact, surprisal, naive sum and their difference within 1e-5 nats, and the
#     corrected surprisal different from the naive sum wherever the word-end term applies;
#   - "words" bitwise the same across --chunk 1/7/256, -t 1/2, --max-seqs 1/3 and the prefix
#     cache (lines repeated), and a line's "words": true equal to --words;
#   - the server's /v1/completions with "words": true equal to the CLI's, max_tokens
#     defaulting to 0 there, and an explicit max_tokens > 0 refused;
#   - a vocabulary without word marks: --words exits 2 and a line's "words": true gets an
#     error line, both saying "not available for this tokenizer".
# Prints "words_cli: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
BIN="$BUILD/promptscore"
PY=/usr/bin/python3
NAME=words_cli; FILE=test_words.sh
. tests/check.sh

if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then skip "$PY with numpy missing"; done_; fi

SHARED=${PS_SHARED:-../shared}
if [ ! -f "$SHARED/vocab/ggml-vocab-gpt-2.gguf" ]; then
    skip "shared test material not found at $SHARED (set PS_SHARED)"; done_
fi

T=$(mktemp -d /tmp/ps-test-words-XXXXXX)
spid=""
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; rm -rf "$T"' EXIT

"$BIN" gen-model -o "$T/spm.gguf" --preset tiny --n-vocab 5000 --seed 3 >/dev/null 2>&1 &&
"$BIN" gen-model -o "$T/bpe.gguf" --preset tiny --arch qwen3 --seed 5 \
    --vocab "$SHARED/vocab/ggml-vocab-gpt-2.gguf" >/dev/null 2>&1 ||
    { bad "gen-model failed"; done_; }

"$PY" - > "$T/in.jsonl" <<'EOF'
import json
texts = ["the cat sat on the mat.", "Hello,   world!\nIt is  a fine day; isn't it?",
         "naïve café — déjà vu\n\n  twice", "x", "a b", "end with space ", "123 4567 89.5%",
         "Tab\tseparated\tvalues\r\nand lines", "(parens) [brackets] {braces}",
         "Once upon a time, there was a little girl named Lily. She liked to play outside."]
for i, t in enumerate(texts):
    print(json.dumps({"id": i, "prompt": t, "logprobs": 1}))
EOF

# ---- against the float64 reference ----
for m in "$T/spm.gguf" "$T/bpe.gguf" "$SHARED/models/stories260K.gguf"; do
    name=$(basename "$m")
    if [ ! -f "$m" ]; then skip "$name missing"; continue; fi
    "$BIN" score -m "$m" --act f32 --words -i "$T/in.jsonl" -o "$T/out.jsonl" 2>"$T/err" ||
        bad "score --words on $name failed: $(cat "$T/err")"
    "$PY" tests/reference/words.py "$m" "$T/in.jsonl" "$T/out.jsonl" > "$T/cmp" 2>&1
    cat "$T/cmp" | head -5
    check "--words on $name agrees with the float64 reference within 1e-5 nats" \
        '! grep -q BAD "$T/cmp" && grep -q "^words [1-9]" "$T/cmp"'
done
# the first word: null without BOS (the BPE model), a number with it
check "the first word's surprisal is null without BOS, a number with it" \
    '"$BIN" score -m "$T/bpe.gguf" --words -i "$T/in.jsonl" 2>/dev/null | head -1 | grep -q "\"words\":\[{\"word\":\"the\",\"offset\":0,\"n_tokens\":1,\"surprisal\":null" &&
     "$BIN" score -m "$T/spm.gguf" --words -i "$T/in.jsonl" 2>/dev/null | head -1 | grep -q "\"words\":\[{\"word\":\"the\",\"offset\":0,\"n_tokens\":[0-9]*,\"surprisal\":[0-9]"'

# ---- bitwise invariance ----
"$PY" - "$T/in.jsonl" > "$T/rep.jsonl" <<'EOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
for l in lines + lines[:4]:  # repeated lines: the prefix cache would hold their blocks
    print(l)
EOF
words_of() { "$PY" -c 'import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    print(json.dumps(d.get("words"), sort_keys=True))' "$1"; }
for m in spm bpe; do
    "$BIN" score -m "$T/$m.gguf" --words -i "$T/rep.jsonl" -o "$T/base.jsonl" 2>/dev/null
    words_of "$T/base.jsonl" > "$T/base.w"
    ok=1
    for opts in "--chunk 1" "--chunk 7" "-t 2" "--max-seqs 3" "--max-seqs 3 --chunk 7 -t 2" "--cache-mb 64 --max-seqs 1"; do
        # shellcheck disable=SC2086
        "$BIN" score -m "$T/$m.gguf" --words $opts -i "$T/rep.jsonl" -o "$T/o.jsonl" 2>"$T/err" || { ok=0; echo "failed: $opts: $(cat "$T/err")"; }
        words_of "$T/o.jsonl" > "$T/o.w"
        cmp -s "$T/base.w" "$T/o.w" || { ok=0; echo "$m: $opts differs"; }
    done
    check "$m: words bitwise the same across chunk, threads, max-seqs and the prefix cache" '[ $ok = 1 ]'
    sed 's/}$/, "words": true}/' "$T/rep.jsonl" > "$T/line.jsonl"
    "$BIN" score -m "$T/$m.gguf" -i "$T/line.jsonl" -o "$T/o.jsonl" 2>/dev/null
    words_of "$T/o.jsonl" > "$T/o.w"
    check "$m: a line's \"words\": true gives what --words gives" 'cmp -s "$T/base.w" "$T/o.w"'
done
"$BIN" score -m "$T/spm.gguf" -i "$T/in.jsonl" -o "$T/o.jsonl" 2>/dev/null
check "without --words no line has a words array" '! grep -q "\"words\"" "$T/o.jsonl"'

# ---- the server ----
log="$T/serve.log"
"$BIN" serve -m "$T/spm.gguf" --port 0 -t 1 2>"$log" &
spid=$!
port=""
for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    bad "serve did not start: $(tail -n 3 "$log")"
else
    "$BIN" score -m "$T/spm.gguf" --words -i "$T/in.jsonl" -o "$T/cli.jsonl" 2>/dev/null
    "$PY" - "$port" "$T/in.jsonl" "$T/cli.jsonl" > "$T/srv" 2>&1 <<'EOF'
import json, sys, urllib.request, urllib.error
port, inp, cli = sys.argv[1], sys.argv[2], sys.argv[3]
def post(body):
    req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % port,
                                 json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
texts = [json.loads(l)["prompt"] for l in open(inp)]
want = [json.loads(l)["words"] for l in open(cli)]
s, j = post({"prompt": texts, "words": True, "logprobs": 0, "echo": True})
if s != 200:
    print("BAD status %d %r" % (s, j))
else:
    for c, w in zip(j["choices"], want):
        if c["words"] != w:
            print("BAD choice %d words differ" % c["index"])
        if c["logprobs"]["token_logprobs"][0] is not None or c["finish_reason"] != "length":
            print("BAD choice %d: not the prompt alone" % c["index"])
s, j = post({"prompt": "a b", "words": True, "max_tokens": 4})
if s != 400 or "max_tokens must be 0" not in j["error"]["message"]:
    print("BAD words with max_tokens 4: %d %r" % (s, j))
print("done")
EOF
    cat "$T/srv"
    check "the server's words equal the CLI's; max_tokens > 0 with words refused" \
        '! grep -q BAD "$T/srv" && grep -q done "$T/srv"'
    kill "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    spid=""
fi

# ---- a vocabulary without word marks ----
"$PY" - "$T/nomarks.vocab.gguf" <<'EOF'
# a vocab-only GGUF: SentencePiece kind, <unk> <s> </s>, 256 byte tokens, then letters: no
# piece begins with U+2581
import struct, sys
toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + \
    [a + b for a in "abcdefghij" for b in " abcdefghij".strip() + "k"] + list("abcdefghij")
types = [2, 3, 3] + [6] * 256 + [1] * (len(toks) - 259)
def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b
kv = []
kv.append(s("general.architecture") + struct.pack("<I", 8) + s("llama"))
kv.append(s("tokenizer.ggml.model") + struct.pack("<I", 8) + s("llama"))
kv.append(s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(toks)) + b"".join(s(t) for t in toks))
kv.append(s("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, len(toks)) + b"".join(struct.pack("<f", -i) for i in range(len(toks))))
kv.append(s("tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 5, len(toks)) + b"".join(struct.pack("<i", t) for t in types))
kv.append(s("tokenizer.ggml.bos_token_id") + struct.pack("<II", 4, 1))
kv.append(s("tokenizer.ggml.eos_token_id") + struct.pack("<II", 4, 2))
with open(sys.argv[1], "wb") as f:
    f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(kv))
EOF
if "$BIN" gen-model -o "$T/nomarks.gguf" --preset tiny --vocab "$T/nomarks.vocab.gguf" >"$T/err" 2>&1; then
    "$BIN" score -m "$T/nomarks.gguf" --words -i "$T/in.jsonl" -o "$T/o.jsonl" 2>"$T/err"
    rc=$?
    check "--words with a vocabulary without word marks: exit 2, \"not available for this tokenizer\"" \
        '[ $rc = 2 ] && grep -q "not available for this tokenizer" "$T/err"'
    printf '{"id":1,"prompt":"abc","words":true}\n{"id":2,"prompt":"abc"}\n' | "$BIN" score -m "$T/nomarks.gguf" > "$T/o.jsonl" 2>/dev/null
    check "a line's \"words\": true there gets an error line; the next line is scored" \
        'head -1 "$T/o.jsonl" | grep -q "\"error\".*not available for this tokenizer" &&
         tail -1 "$T/o.jsonl" | grep -q "\"n_tokens\""'
else
    bad "gen-model with a vocabulary without word marks failed: $(cat "$T/err")"
fi

# ---- Python: Result.words() equal to the CLI's words, bit for bit ----
# (in the plain build: a sanitized library would need its runtime preloaded into python3)
if [ -z "${PS_SANITIZED:-}" ] && [ -f "$BUILD/libpromptscore.so.0" ]; then
    for m in spm bpe; do
        "$BIN" score -m "$T/$m.gguf" --words -i "$T/in.jsonl" -o "$T/cli.jsonl" 2>/dev/null
        PROMPTSCORE_LIB="$BUILD/libpromptscore.so.0" PYTHONPATH=python "$PY" - "$T/$m.gguf" \
            "$T/in.jsonl" "$T/cli.jsonl" "$T/nomarks.gguf" > "$T/py" 2>&1 <<'EOF'
import json, sys
import promptscore as ps
path, inp, cli, nomarks = sys.argv[1:]
m = ps.Model(path)
texts = [json.loads(l)["prompt"] for l in open(inp)]
want = [json.loads(l)["words"] for l in open(cli)]
for t, w in zip(texts, want):
    if m.score(t, words=True).words() != w:
        print("BAD score(%r).words() differs" % t)
for r, w in zip(m.score_many(texts, words=True, max_seqs=3), want):
    if r.words() != w:
        print("BAD score_many words differ")
try:
    m.score(texts[0]).words()
    print("BAD words() without words=True")
except ps.InvalidArgumentError:
    pass
try:
    ps.Model(nomarks).score("abc", words=True)
    print("BAD no error without word marks")
except ps.UnsupportedError as e:
    if "not available for this tokenizer" not in str(e):
        print("BAD message %s" % e)
print("done")
EOF
        tail -3 "$T/py"
        check "$m: Python's Result.words() equals the CLI's words; errors without words / marks" \
            '! grep -q BAD "$T/py" && grep -q done "$T/py"'
    done
elif [ -z "${PS_SANITIZED:-}" ]; then
    skip "no $BUILD/libpromptscore.so.0"
fi

done_
