#!/bin/sh
# tests/test_cli_score.sh — `promptscore score` and `promptscore perplexity` end to end on
# ../shared/models/stories260K.gguf ($PS_SHARED overrides): text and id prompts, ids passed
# through, per-line K, every kind of bad line answered by an error line while the others are
# scored, output order, --strict exit status, --no-bos, files vs pipes, the README command,
# and perplexity (whole text = the score's NLL; sliding windows score every token once).
# --act: native/f32 give identical lines on the F32 stories260K (score and perplexity); bad
# or missing values exit 2 naming --act; on a gen-model BF16 model f32 and native differ
# (sum_logprob) within a bound explained there, and the default is native.
# JSON is checked with python3's json module. Prints "cli_score: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SHARED=${PS_SHARED:-../shared}
MODEL="$SHARED/models/stories260K.gguf"
BIN="$BUILD/promptscore"
NAME=cli_score; FILE=test_cli_score.sh
. tests/check.sh

if [ ! -r "$MODEL" ]; then
    skip "shared test material not found at $SHARED (set PS_SHARED)"; done_
fi
if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
command -v python3 >/dev/null 2>&1 || { skip "python3 missing"; done_; }

T=$(mktemp -d /tmp/ps-test-cli-score-XXXXXX)
trap 'rm -rf "$T"' EXIT

# ---- a mixed input: good lines interleaved with every kind of bad one --------------------
long=$(python3 -c 'print(",".join(["1"] * 2049))')
cat > "$T/in.jsonl" <<EOF
{"id": "text", "prompt": "Once upon a time"}
{"id": 7, "prompt": [1, 403, 407, 261, 378], "logprobs": 2}
this is not json
{"id": {"nested": [1, 2]}, "prompt": ""}
{"id": "oov", "prompt": [1, 403, 512]}
{"id": "long", "prompt": [$long]}

{"id": "k0", "prompt": "Lily", "logprobs": 0}
{"id": "badk", "prompt": "Lily", "logprobs": true}
{"id": "badtype", "prompt": 42}
{"id": "emptyids", "prompt": []}
{"prompt": [1, 291]}
{"id": "k7", "prompt": [1, 403, 407], "logprobs": 7}
EOF
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" -o "$T/out.jsonl" 2>"$T/err"
rc=$?
check "exit 0 without --strict despite bad lines (got $rc)" '[ $rc -eq 0 ]'
check "summary line on stderr" 'grep -q "12 prompts, .* tokens, .* tokens/s, 7 errors" "$T/err"'
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" -o "$T/out2.jsonl" --strict 2>/dev/null
rc=$?
check "--strict exits 1 when a line failed (got $rc)" '[ $rc -eq 1 ]'
check "--strict output identical" 'cmp -s "$T/out.jsonl" "$T/out2.jsonl"'

cat > "$T/check.py" <<'EOF'
import json, struct, sys
f32 = lambda x: struct.unpack('f', struct.pack('f', x))[0]
lines = open(sys.argv[1], encoding='utf-8').read().split('\n')
assert lines[-1] == '', 'output must end with a newline'
out = [json.loads(l) for l in lines[:-1]]
fails = []
def expect(cond, what):
    if not cond: fails.append(what)
expect(len(out) == 12, 'one output line per non-blank input line: %d' % len(out))
ids = [o.get('id') for o in out]
expect(ids == ['text', 7, None, {'nested': [1, 2]}, 'oov', 'long', 'k0', 'badk', 'badtype',
               'emptyids', None, 'k7'], 'ids in input order: %r' % (ids,))
errs = [i for i, o in enumerate(out) if 'error' in o]
expect(errs == [2, 3, 4, 5, 7, 8, 9], 'error lines: %r' % errs)
for i in errs:
    e = out[i]['error']
    expect(e.get('type') == 'invalid_request_error' and e.get('message'), 'error shape %d' % i)
    expect('logprobs' not in out[i], 'no logprobs on error line %d' % i)
m = lambda i: out[i]['error']['message']
expect('line 3' in m(2) and 'JSON' in m(2), 'bad json message: ' + m(2))
expect('empty' in m(3), 'empty prompt message: ' + m(3))
expect('512' in m(4) and 'index 2' in m(4), 'out of range message: ' + m(4))
# refused by the pre-scan at id 2049, without reading the rest of the line: "more than 2048"
expect('more than 2048 tokens' in m(5) and out[5]['error']['code'] == 'context_length_exceeded',
       'too long message: ' + m(5))
expect('logprobs' in m(7) and out[7]['error']['param'] == 'logprobs', 'bool K: ' + m(7))
expect('prompt' in m(8), 'wrong type: ' + m(8))
expect('empty' in m(9), 'empty id list: ' + m(9))

def consistent(o, k):
    lp = o['logprobs']
    n = o['n_tokens']
    for key in ('tokens', 'token_logprobs', 'top_logprobs', 'text_offset', 'token_ids', 'top_ids'):
        expect(len(lp[key]) == n, 'length of %s' % key)
    expect(lp['token_logprobs'][0] is None and lp['top_logprobs'][0] is None and lp['top_ids'][0] is None,
           'entry 0 null')
    text = ''.join(lp['tokens'])
    for i in range(n):
        t = lp['tokens'][i]
        expect(text[lp['text_offset'][i]:][:len(t)] == t, 'text_offset %d' % i)
    s = 0.0
    for i in range(1, n):
        v = lp['token_logprobs'][i]
        top = lp['top_logprobs'][i]
        ti = lp['top_ids'][i]
        expect(len(ti) in (k, k + 1), 'top_ids length %d at %d (k %d)' % (len(ti), i, k))
        expect([x[0] for x in ti].count(lp['token_ids'][i]) == 1, 'scored id in top_ids at %d' % i)
        expect(dict((a, b) for a, b in ti)[lp['token_ids'][i]] == v, 'top_ids value = token_logprob')
        if lp['tokens'][i] in top:
            expect(top[lp['tokens'][i]] >= v, 'key keeps the larger value')
        expect(max(top.values()) == ti[0][1], 'first top_ids entry is the max')
        s += f32(v)
    expect(s == o['sum_logprob'], 'sum_logprob %r vs %r' % (s, o['sum_logprob']))

o = out[0]
expect(o['logprobs']['token_ids'] == [1, 403, 407, 261, 378], 'text prompt tokens (BOS added)')
expect(o['logprobs']['tokens'] == ['<s>', ' Once', ' upon', ' a', ' time'], 'token texts')
expect(o['n_tokens'] == 5, 'n_tokens')
consistent(o, 5)
consistent(out[1], 2)
expect(out[1]['logprobs']['token_logprobs'] == o['logprobs']['token_logprobs'], 'ids = text scores')
consistent(out[6], 0)
consistent(out[10], 5)
consistent(out[11], 7)
print('\n'.join(fails))
sys.exit(1 if fails else 0)
EOF
if python3 "$T/check.py" "$T/out.jsonl" >"$T/py" 2>&1; then ok; else bad "output checks:"; cat "$T/py"; fi

# ---- "id" comes back byte for byte, whatever JSON it is --------------------------------------
# (jansson would re-serialise 0.1 as 0.10000000000000001, refuse integers over 2^63 and
# \u0000 in strings; the raw text of the value is echoed instead)
cat > "$T/ids.jsonl" <<'EOF'
{"id": 0.1, "prompt": [1, 403]}
{"id":1.5e300,"prompt":[1,403]}
{"id": 12345678901234567890, "prompt": [1, 403]}
{"id": "a\u0000b\"c\\d\u00e9", "prompt": [1, 403]}
{"id": {"x": [1, {"y": null}], "z": -0.0}, "prompt": [1, 403]}
{"prompt": [1, 403], "id": [ ], "logprobs": 0}
{"id": null, "prompt": [1, 403]}
{"prompt": [1, 403]}
{"id": 1, "id": 2, "prompt": [1, 403]}
{"id": 0.1, "prompt": [1, 9999]}
{"id": 1e99999, "prompt": [1, 403]}
{"id": "\ud800", "prompt": [1, 403]}
EOF
"$BIN" score -m "$MODEL" -i "$T/ids.jsonl" -o "$T/ids.out" 2>/dev/null
python3 - "$T/ids.out" >"$T/ids.py" 2>&1 <<'EOF'
import json, sys
lines = open(sys.argv[1], 'rb').read().split(b'\n')[:-1]
want = [b'0.1', b'1.5e300', b'12345678901234567890', b'"a\\u0000b\\"c\\\\d\\u00e9"',
        b'{"x": [1, {"y": null}], "z": -0.0}', b'[ ]', b'null', b'null', b'2', b'0.1']
fails = []
if len(lines) != 12: fails.append('%d lines' % len(lines))
for i, w in enumerate(want):
    if not lines[i].startswith(b'{"id":' + w + b','): fails.append('line %d: %r' % (i + 1, lines[i][:60]))
for i in range(12):
    try: o = json.loads(lines[i])
    except Exception as e: fails.append('line %d not JSON: %s' % (i + 1, e)); continue
    if i < 9 and 'logprobs' not in o: fails.append('line %d not scored: %r' % (i + 1, lines[i][:200]))
if b'"error"' not in lines[9]: fails.append('line 10 should be an error line')
for i in (10, 11):  # not valid for the parser: error line, id null
    if not lines[i].startswith(b'{"id":null,"error"'): fails.append('line %d: %r' % (i + 1, lines[i][:80]))
print('\n'.join(fails)); sys.exit(1 if fails else 0)
EOF
if [ $? -eq 0 ]; then ok; else bad "ids echoed verbatim:"; cat "$T/ids.py"; fi

# ---- a bad logprobs is shown as written ---------------------------------------------------------
printf '%s\n' '{"id":1,"prompt":[1,403],"logprobs":-2}' '{"id":2,"prompt":[1,403],"logprobs":2.0}' \
    '{"id":3,"prompt":[1,403],"logprobs":"5"}' | "$BIN" score -m "$MODEL" >"$T/k.out" 2>/dev/null
check "bad logprobs messages show the value (-2, 2.0, a string)" 'grep -q "got -2\"" "$T/k.out" && grep -q "got 2.0\"" "$T/k.out" && grep -q "got a string\"" "$T/k.out"'

# ---- U+0000 in a text prompt is text (its byte token), as on the server -----------------------
printf '%s\n' '{"id":1,"prompt":"a\u0000b","logprobs":0}' | "$BIN" score -m "$MODEL" >"$T/nul.out" 2>/dev/null
check "a prompt holding U+0000 is scored" 'grep -q "\"tokens\":\[\"<s>\",\" a\",\"\\\\u0000\",\"b\"\]" "$T/nul.out"'

# ---- pipes, --no-bos, --logprobs, threads ---------------------------------------------------
printf '{"id":1,"prompt":"Once upon a time"}\n' | "$BIN" score -m "$MODEL" --no-bos --logprobs 3 -t 2 \
    >"$T/nobos.jsonl" 2>/dev/null
check "--no-bos through a pipe" 'grep -q "\"token_ids\":\[403,407,261,378\]" "$T/nobos.jsonl"'
check "--logprobs 3 default K" 'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if all(len(x) in (3,4) for x in d[\"logprobs\"][\"top_ids\"][1:]) else 1)" "$T/nobos.jsonl"'
"$BIN" score -m "$MODEL" -t 1 -i "$T/in.jsonl" 2>/dev/null > "$T/t1.jsonl"
"$BIN" score -m "$MODEL" -t 2 -i "$T/in.jsonl" 2>/dev/null > "$T/t2.jsonl"
check "stdout = -o file, 1 thread = 2 threads" 'cmp -s "$T/t1.jsonl" "$T/out.jsonl" && cmp -s "$T/t1.jsonl" "$T/t2.jsonl"'
"$BIN" score -m "$MODEL" --chunk 7 -i "$T/in.jsonl" 2>/dev/null > "$T/c7.jsonl"
check "--chunk 7 runs (same on this model)" 'cmp -s "$T/c7.jsonl" "$T/out.jsonl"'
# chunk geometry on prompts of many chunks (600 ids: 86 chunks of 7, 3 of 256; a long text):
# --chunk 7 and --chunk 1, on 1 and 2 threads, print the default's lines byte for byte
python3 -c '
import json
print(json.dumps({"id": "ids600", "prompt": [1] + [3 + (i * 37 + i // 7) % 509 for i in range(599)], "logprobs": 3}))
print(json.dumps({"id": "text", "prompt": " ".join(["Once upon a time there was a little girl named Lily who loved to play outside in the sun."] * 12)}))
print(json.dumps({"id": "ids40", "prompt": [1] + [3 + (i * 11) % 500 for i in range(39)]}))' > "$T/long.jsonl"
"$BIN" score -m "$MODEL" -i "$T/long.jsonl" >"$T/l256.jsonl" 2>/dev/null; rc=$?
check "long prompts scored (rc $rc)" '[ $rc -eq 0 ] && [ "$(grep -c "\"sum_logprob\"" "$T/l256.jsonl")" -eq 3 ] && python3 -c "
import json, sys
n = [json.loads(l)[\"n_tokens\"] for l in open(sys.argv[1])]
sys.exit(0 if n[0] == 600 and n[1] > 256 and n[2] == 40 else 1)" "$T/l256.jsonl"'
for c in 7 1; do
    for th in 1 2; do
        "$BIN" score -m "$MODEL" --chunk $c -t $th -i "$T/long.jsonl" >"$T/lc.jsonl" 2>/dev/null; rc=$?
        check "--chunk $c -t $th on long prompts = the default chunk 256, byte for byte (rc $rc)" \
            '[ $rc -eq 0 ] && cmp -s "$T/lc.jsonl" "$T/l256.jsonl"'
    done
done

# ---- the README's first command ------------------------------------------------------------
"$BIN" score -m "$MODEL" -i examples/prompts.jsonl >"$T/ex.jsonl" 2>"$T/ex.err"
rc=$?
check "README command exits 0" '[ $rc -eq 0 ]'
check "README command: one line per prompt, no errors" '[ "$(grep -c "\"sum_logprob\"" "$T/ex.jsonl")" -eq "$(grep -c . examples/prompts.jsonl)" ] && ! grep -q "\"error\"" "$T/ex.jsonl"'

# ---- usage errors exit 2 -------------------------------------------------------------------
"$BIN" score --bogus >/dev/null 2>&1; rc=$?
check "unknown option exits 2 (got $rc)" '[ $rc -eq 2 ]'
"$BIN" score -m "$MODEL" --chunk 300 </dev/null >/dev/null 2>&1; rc=$?
check "--chunk 300 exits 2 (got $rc)" '[ $rc -eq 2 ]'
"$BIN" score </dev/null >/dev/null 2>&1; rc=$?
check "no model exits 2, usage (got $rc)" '[ $rc -eq 2 ]'
"$BIN" score -m "$T/missing.gguf" </dev/null >/dev/null 2>"$T/e"; rc=$?
check "missing model exits 1 with its name (got $rc)" '[ $rc -eq 1 ] && grep -q missing.gguf "$T/e"'

# ---- perplexity ----------------------------------------------------------------------------
text='Once upon a time there was a little girl who loved to play outside. She ran through the meadow and laughed at the clouds.'
printf '%s' "$text" > "$T/text.txt"
"$BIN" perplexity -m "$MODEL" -f "$T/text.txt" >"$T/ppl" 2>"$T/pplerr"; rc=$?
check "perplexity exits 0 (got $rc)" '[ $rc -eq 0 ]'
# stdout is the result only: no wall-clock figure (two runs are compared byte for byte below);
# the elapsed time is on stderr
check "perplexity stdout holds no elapsed time ($(cat "$T/ppl"))" '[ "$(wc -l < "$T/ppl")" -eq 1 ] && grep -qE "^perplexity [0-9.]+  mean NLL [0-9.]+  tokens 53  \(windows 1, ctx 2048, stride 1024\)$" "$T/ppl"'
check "perplexity elapsed time on stderr ($(cat "$T/pplerr"))" 'grep -qE "^promptscore perplexity: 53 tokens in [0-9.]+s" "$T/pplerr"'
# the golden: 54 tokens (BOS included), NLL 48.669974 -> 53 scored tokens
check "perplexity = golden NLL (whole text in one window)" 'python3 - "$T/ppl" <<EOF
import math, re, sys
s = open(sys.argv[1]).read()
m = re.search(r"perplexity ([0-9.]+)  mean NLL ([0-9.]+)  tokens ([0-9]+)", s)
ppl, mean, n = float(m.group(1)), float(m.group(2)), int(m.group(3))
ok = n == 53 and abs(mean * n - 48.669974) / 48.669974 < 1e-5 and abs(ppl - math.exp(mean)) < 1e-3 * ppl
sys.exit(0 if ok else 1)
EOF'
"$BIN" perplexity -m "$MODEL" -f "$T/text.txt" --ctx 16 --stride 5 --per-token >"$T/pt" 2>"$T/pterr"; rc=$?
check "sliding window scores every token once" '[ $rc -eq 0 ] && [ "$(wc -l < "$T/pt")" -eq 53 ] && python3 -c "
import json,sys
rows=[json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if [r[\"i\"] for r in rows]==list(range(1,54)) else 1)" "$T/pt" && grep -q "tokens 53  (windows 9, ctx 16, stride 5" "$T/pterr"'
"$BIN" perplexity -m "$MODEL" -f "$T/text.txt" --ctx 16 --stride 17 >/dev/null 2>&1; rc=$?
check "stride > ctx exits 2 (got $rc)" '[ $rc -eq 2 ]'

# ---- --act: activations of the matrix products -------------------------------------------
# stories260K has F32 matrices: float32 activations either way, so the output is identical.
"$BIN" score -m "$MODEL" --act f32 -i "$T/in.jsonl" >"$T/af32.jsonl" 2>/dev/null; rc1=$?
"$BIN" score -m "$MODEL" --act native -i "$T/in.jsonl" >"$T/anat.jsonl" 2>/dev/null; rc2=$?
check "--act f32 / native on an F32 model: same lines as the default (rc $rc1, $rc2)" '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && cmp -s "$T/af32.jsonl" "$T/out.jsonl" && cmp -s "$T/anat.jsonl" "$T/out.jsonl"'
"$BIN" score -m "$MODEL" --act bogus </dev/null >/dev/null 2>"$T/e"; rc=$?
check "--act bogus exits 2 naming --act (got $rc: $(cat "$T/e"))" '[ $rc -eq 2 ] && grep -q -- "--act" "$T/e" && grep -q bogus "$T/e"'
"$BIN" score -m "$MODEL" --act </dev/null >/dev/null 2>"$T/e"; rc=$?
check "--act without a value exits 2 naming --act (got $rc: $(cat "$T/e"))" '[ $rc -eq 2 ] && grep -q -- "--act" "$T/e"'
"$BIN" perplexity -m "$MODEL" -f "$T/text.txt" --act f32 >"$T/ppl32" 2>/dev/null; rc=$?
check "perplexity --act f32 = the default on an F32 model (rc $rc)" '[ $rc -eq 0 ] && grep -q "perplexity " "$T/ppl32" && cmp -s "$T/ppl32" "$T/ppl"'
"$BIN" perplexity -m "$MODEL" -f "$T/text.txt" --act nope >/dev/null 2>"$T/e"; rc=$?
check "perplexity --act nope exits 2 naming --act (got $rc)" '[ $rc -eq 2 ] && grep -q -- "--act" "$T/e"'
check "score --help lists --act" '"$BIN" score --help 2>&1 | grep -q -- "--act native|f32"'

# A generated BF16 model (qwen3, tiny, synthetic vocab): native rounds the activations to bf16,
# f32 does not, so sum_logprob must differ; and stay close. Bound, per scored token: a logprob
# is logit - logsumexp(logits), so it moves by at most twice the largest logit change; the
# logits of such a model move by <= 0.021 (test_score, BF16 on every ISA), hence |d logprob|
# <= ~0.042 < 0.05 for every token. The mean |d sum| / n is far smaller (errors of both signs
# cancel): measured 4.0e-4 (63 tokens) and 3.4e-4 (13 tokens), bound 0.01 (25x room).
"$BIN" gen-model -o "$T/bf16.gguf" --arch qwen3 --type bf16 --seed 3 >/dev/null 2>"$T/e"; rc=$?
check "gen-model --type bf16 (rc $rc: $(cat "$T/e"))" '[ $rc -eq 0 ] && [ -s "$T/bf16.gguf" ]'
python3 -c '
import json
print(json.dumps({"id": "ids", "prompt": [1] + [(i * 37) % 500 + 3 for i in range(63)]}))
print(json.dumps({"id": "text", "prompt": "Once upon a time"}))' > "$T/act.jsonl"
"$BIN" score -m "$T/bf16.gguf" --act native -i "$T/act.jsonl" >"$T/bn.jsonl" 2>/dev/null; rc1=$?
"$BIN" score -m "$T/bf16.gguf" --act f32 -i "$T/act.jsonl" >"$T/bf.jsonl" 2>/dev/null; rc2=$?
"$BIN" score -m "$T/bf16.gguf" -i "$T/act.jsonl" >"$T/bd.jsonl" 2>/dev/null; rc3=$?
check "BF16 model scored with each --act (rc $rc1 $rc2 $rc3)" '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc3 -eq 0 ]'
check "BF16: the default is --act native" 'cmp -s "$T/bn.jsonl" "$T/bd.jsonl"'
python3 - "$T/bn.jsonl" "$T/bf.jsonl" >"$T/act.py" 2>&1 <<'EOF'
import json, sys
na = [json.loads(l) for l in open(sys.argv[1])]
fa = [json.loads(l) for l in open(sys.argv[2])]
fails = []
if len(na) != 2 or len(fa) != 2: fails.append('%d / %d lines' % (len(na), len(fa)))
for a, b in zip(na, fa):
    if 'error' in a or 'error' in b: fails.append('error line: %r %r' % (a, b)); continue
    la, lb = a['logprobs'], b['logprobs']
    if la['token_ids'] != lb['token_ids']: fails.append('%s: tokens differ' % a['id'])
    n = a['n_tokens'] - 1
    d = abs(a['sum_logprob'] - b['sum_logprob'])
    worst = max(abs(x - y) for x, y in zip(la['token_logprobs'][1:], lb['token_logprobs'][1:]))
    print('%s: %d tokens, sum_logprob native %.6f f32 %.6f, |d|/n %.2e, worst token %.2e'
          % (a['id'], n, a['sum_logprob'], b['sum_logprob'], d / n, worst))
    if a['sum_logprob'] == b['sum_logprob']: fails.append('%s: sum_logprob equal: --act ignored?' % a['id'])
    if not d / n < 0.01: fails.append('%s: |d sum_logprob| / n = %g' % (a['id'], d / n))
    if not worst < 0.05: fails.append('%s: a token logprob moved by %g' % (a['id'], worst))
print('\n'.join(fails)); sys.exit(1 if fails else 0)
EOF
if [ $? -eq 0 ]; then ok; else bad "--act on a BF16 model:"; cat "$T/act.py"; fi
"$BIN" perplexity -m "$T/bf16.gguf" -f "$T/text.txt" --act f32 >"$T/bp32" 2>/dev/null; rc1=$?
"$BIN" perplexity -m "$T/bf16.gguf" -f "$T/text.txt" >"$T/bpn" 2>/dev/null; rc2=$?
check "perplexity on BF16: --act f32 differs from native (rc $rc1 $rc2)" '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && grep -q "perplexity " "$T/bp32" && ! cmp -s "$T/bp32" "$T/bpn"'

# ---- --hf through a local HTTP server (python's http.server: HEAD + GET, no Range) -----------
mkdir -p "$T/hub/org/tiny/resolve/main" "$T/hub/api/models/org"
cp "$MODEL" "$T/hub/org/tiny/resolve/main/stories-F32.gguf"
printf '{"siblings":[{"rfilename":"README.md"},{"rfilename":"stories-F32.gguf"}]}' > "$T/hub/api/models/org/tiny"
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/hub" >"$T/http.log" 2>&1 &
hpid=$!
port=""
for i in 1 2 3 4 5 6 7 8 9 10; do
    port=$(sed -nE 's/.*port ([0-9]+).*/\1/p' "$T/http.log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.3
done
if [ -z "$port" ]; then
    skip "could not start python3 -m http.server: --hf CLI test not run"
else
    printf '{"id":1,"prompt":"Once upon a time"}\n' > "$T/one.jsonl"
    PS_CACHE="$T/cache" HF_ENDPOINT="http://127.0.0.1:$port" "$BIN" score --hf org/tiny \
        -i "$T/one.jsonl" >"$T/hf.jsonl" 2>"$T/hf.err"; rc=$?
    check "--hf REPO downloads, picks the .gguf, scores (rc $rc)" '[ $rc -eq 0 ] && cmp -s "$T/cache/org/tiny/stories-F32.gguf" "$MODEL" && grep -q "picked stories-F32.gguf" "$T/hf.err" && grep -q "\"token_ids\":\[1,403,407,261,378\]" "$T/hf.jsonl"'
    kill "$hpid" 2>/dev/null; wait "$hpid" 2>/dev/null
    PS_CACHE="$T/cache" HF_ENDPOINT="http://127.0.0.1:1" "$BIN" score --hf org/tiny:stories-F32.gguf \
        -i "$T/one.jsonl" >"$T/hf2.jsonl" 2>"$T/hf2.err"; rc=$?
    check "--hf REPO:FILE uses the cache without the network (rc $rc)" '[ $rc -eq 0 ] && cmp -s "$T/hf.jsonl" "$T/hf2.jsonl" && grep -q "using cached" "$T/hf2.err"'
    PS_CACHE="$T/cache" HF_ENDPOINT="http://127.0.0.1:1" "$BIN" score --hf org/other:x.gguf \
        -i "$T/one.jsonl" >/dev/null 2>"$T/hf3.err"; rc=$?
    check "--hf with no server fails clearly (rc $rc)" '[ $rc -eq 1 ] && grep -q "org/other" "$T/hf3.err"'
fi
kill "$hpid" 2>/dev/null

# ---- the prefix cache: lines sharing prefixes give the same bytes with it on and off ---------
python3 -c '
import random
r = random.Random(5)
ctx = [1] + [r.randrange(3, 512) for _ in range(90)]
for i in range(12):
    tail = [r.randrange(3, 512) for _ in range(1 + i * 3)]
    print("{\"id\": %d, \"prompt\": %s, \"logprobs\": %d}" % (i, ctx[: 40 + i * 5] + tail, [1, 5, 2, 8][i % 4]))
' > "$T/shared.jsonl"
"$BIN" score -m "$MODEL" -i "$T/shared.jsonl" --cache-mb 0 > "$T/pc0.jsonl" 2>/dev/null
"$BIN" score -m "$MODEL" -i "$T/shared.jsonl" --cache-mb 8 > "$T/pc8.jsonl" 2>/dev/null
"$BIN" score -m "$MODEL" -i "$T/shared.jsonl" > "$T/pcd.jsonl" 2>/dev/null
check "--cache-mb 0, 8 and the default give identical lines on shared prefixes" '[ -s "$T/pc0.jsonl" ] && [ $(wc -l < "$T/pc0.jsonl") -eq 12 ] && cmp -s "$T/pc0.jsonl" "$T/pc8.jsonl" && cmp -s "$T/pc0.jsonl" "$T/pcd.jsonl"'
"$BIN" score -m "$MODEL" -i "$T/shared.jsonl" --cache-mb -1 >/dev/null 2>"$T/pcbad.err"; rc=$?
check "--cache-mb -1 is a usage error (rc $rc)" '[ $rc -eq 2 ] && grep -q -- "--cache-mb" "$T/pcbad.err"'
# --kv-type: f16 / bf16 / bf16-dot / f16-dot lines differ from f32's, and are the same with the
# cache off, on and a smaller chunk; an unknown type is a usage error naming the accepted values
for kvt in f16 bf16 bf16-dot f16-dot; do
    "$BIN" score -m "$MODEL" -i "$T/shared.jsonl" --kv-type $kvt --cache-mb 0 > "$T/kv0.jsonl" 2>/dev/null
    "$BIN" score -m "$MODEL" -i "$T/shared.jsonl" --kv-type $kvt --cache-mb 8 --chunk 7 > "$T/kv8.jsonl" 2>/dev/null
    check "--kv-type $kvt: identical lines with --cache-mb 0 and 8 --chunk 7, not f32's" '[ $(wc -l < "$T/kv0.jsonl") -eq 12 ] && cmp -s "$T/kv0.jsonl" "$T/kv8.jsonl" && ! cmp -s "$T/kv0.jsonl" "$T/pc0.jsonl"'
done
"$BIN" score -m "$MODEL" --kv-type f64 </dev/null >/dev/null 2>"$T/e"; rc=$?
check "--kv-type f64 exits 2 naming the five types (got $rc: $(cat "$T/e"))" '[ $rc -eq 2 ] && grep -q -- "--kv-type wants f32, f16, bf16, bf16-dot or f16-dot, got .f64." "$T/e"'
"$BIN" score -m "$MODEL" -i "$T/shared.jsonl" --kv-type f16 --cache-mb 0 > "$T/kvh.jsonl" 2>/dev/null
check "--kv-type f16-dot: not f16's lines (queries and probabilities rounded too)" '[ -s "$T/kvh.jsonl" ] && ! cmp -s "$T/kv0.jsonl" "$T/kvh.jsonl"'
"$BIN" score -m "$MODEL" -i "$T/shared.jsonl" --kv-type bf16-dot --cache-mb 0 > "$T/kv0.jsonl" 2>/dev/null
"$BIN" score -m "$MODEL" -i "$T/shared.jsonl" --kv-type bf16 --cache-mb 0 > "$T/kvb.jsonl" 2>/dev/null
check "--kv-type bf16-dot: not bf16's lines (queries and probabilities rounded too)" '[ -s "$T/kvb.jsonl" ] && ! cmp -s "$T/kv0.jsonl" "$T/kvb.jsonl"'
PS_ISA=avx2 "$BIN" score -m "$MODEL" --kv-type bf16-dot </dev/null >/dev/null 2>"$T/e"; rc=$?
check "--kv-type bf16-dot under PS_ISA=avx2: rc 0 and a note that attention runs its scalar form (rc $rc)" '[ $rc -eq 0 ] && grep -q "bf16-dot without AVX-512 BF16.*scalar form" "$T/e"'

# ---- --max-seqs: rounds of lines scored together, written in input order, the same bytes -----
for ms in 3 5; do
    "$BIN" score -m "$MODEL" -i "$T/shared.jsonl" --max-seqs $ms > "$T/ms$ms.jsonl" 2>/dev/null
    "$BIN" score -m "$MODEL" -i "$T/shared.jsonl" --max-seqs $ms --cache-mb 0 > "$T/ms$ms-0.jsonl" 2>/dev/null
done
check "--max-seqs 3 and 5 (cache on and off): the bytes of --max-seqs 1 on shared prefixes" '[ -s "$T/ms3.jsonl" ] && cmp -s "$T/pc0.jsonl" "$T/ms3.jsonl" && cmp -s "$T/pc0.jsonl" "$T/ms5.jsonl" && cmp -s "$T/pc0.jsonl" "$T/ms3-0.jsonl" && cmp -s "$T/pc0.jsonl" "$T/ms5-0.jsonl"'
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" --max-seqs 1 > "$T/mix1.jsonl" 2>/dev/null; rc1=$?
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" --max-seqs 4 > "$T/mix4.jsonl" 2>/dev/null; rc4=$?
check "--max-seqs 4 on good, bad and blank lines: the output of --max-seqs 1 (rc $rc1 $rc4)" '[ -s "$T/mix1.jsonl" ] && [ $rc1 -eq $rc4 ] && cmp -s "$T/mix1.jsonl" "$T/mix4.jsonl"'
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" --shard 1/2 -o "$T/sh1.jsonl" 2>/dev/null
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" --shard 1/2 --max-seqs 3 -o "$T/sh3.jsonl" 2>/dev/null
check "--shard 1/2 --max-seqs 3: the records of --max-seqs 1" '[ -s "$T/sh1.jsonl" ] && cmp -s "$T/sh1.jsonl" "$T/sh3.jsonl"'
# the default --max-seqs is 1 (serve's is 16): from a pipe, where a program may wait for each
# answer before it writes the next line, every answer comes before the next line is read
"$BIN" score -m "$MODEL" -i "$T/shared.jsonl" --max-seqs 1 --cache-mb 0 > "$T/ms1-0.jsonl" 2>/dev/null
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" > "$T/mixd.jsonl" 2>/dev/null; rcd=$?
check "default --max-seqs: the bytes of --max-seqs 1 (rc $rc1 $rcd)" '[ -s "$T/ms1-0.jsonl" ] && cmp -s "$T/ms1-0.jsonl" "$T/pc0.jsonl" && [ $rc1 -eq $rcd ] && cmp -s "$T/mix1.jsonl" "$T/mixd.jsonl"'
check "default --max-seqs from a pipe: each answer comes before the next line is written" "python3 - '$BIN' '$MODEL' <<'PY'
import subprocess, sys, select
p = subprocess.Popen([sys.argv[1], 'score', '-m', sys.argv[2]], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
for i in range(3):
    p.stdin.write(b'{\"id\": %d, \"prompt\": \"Once upon a time\"}\\n' % i)
    p.stdin.flush()
    r, _, _ = select.select([p.stdout], [], [], 20)
    assert r, 'no answer to line %d while the pipe stays open' % (i + 1)
    line = p.stdout.readline()
    assert b'\"id\": %d' % i in line or b'\"id\":%d' % i in line, line
p.stdin.close()
assert p.wait(timeout=20) == 0
PY"
"$BIN" score -m "$MODEL" -i "$T/shared.jsonl" --max-seqs 0 >/dev/null 2>"$T/ms0.err"; rc=$?
check "--max-seqs 0 is a usage error (rc $rc)" '[ $rc -eq 2 ] && grep -q -- "--max-seqs" "$T/ms0.err"'

done_
