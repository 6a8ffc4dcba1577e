#!/bin/sh
# tests/test_logprobs_from.sh — continuation-only answers (docs/api.md, "logprobs_from"): with
# "logprobs_from": P, entries before position P have null token_logprobs, top_logprobs and
# top_ids, and everything else of the answer is what the same request without it gives, byte
# for byte (the values from P on, tokens, token_ids, text_offset, prompt_offset, text; in JSON
# Lines also sum_logprob, mean_logprob, perplexity). On the server (one prompt and a list,
# max_tokens 0 and 1) and in `score`; a bad value is a 400 / an error line naming the field.
# On ../shared/models/stories260K.gguf. Prints "logprobs_from: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SHARED=${PS_SHARED:-../shared}
MODEL="$SHARED/models/stories260K.gguf"
BIN="$BUILD/promptscore"
NAME=logprobs_from; FILE=test_logprobs_from.sh
. tests/check.sh

if [ ! -r "$MODEL" ]; then
    skip "shared test material not found at $SHARED (set PS_SHARED)"; done_
fi
if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
command -v python3 >/dev/null 2>&1 || { skip "python3 missing"; done_; }

T=$(mktemp -d /tmp/ps-test-lpfrom-XXXXXX)
log="$T/serve.log"
"$BIN" serve -m "$MODEL" --port 0 -t 1 2>"$log" &
spid=$!
trap 'kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; rm -rf "$T"' EXIT
port=""
for i in $(seq 50); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then bad "serve did not start: $(tail -n 3 "$log")"; done_; fi

cat > "$T/in.jsonl" <<'EOF'
{"id": 1, "prompt": "Once upon a time there was a little girl named Lily", "logprobs": 4}
{"id": 2, "prompt": "Once upon a time there was a little girl named Lily", "logprobs": 4, "logprobs_from": 6}
{"id": 3, "prompt": [1, 403, 407, 261, 378], "logprobs": 2}
{"id": 4, "prompt": [1, 403, 407, 261, 378], "logprobs": 2, "logprobs_from": 4}
{"id": 5, "prompt": [1, 403, 407, 261, 378], "logprobs": 2, "logprobs_from": 99}
{"id": 6, "prompt": [1, 403], "logprobs_from": -1}
{"id": 7, "prompt": [1, 403], "logprobs_from": "3"}
EOF
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" -o "$T/out.jsonl" 2>/dev/null; rc=$?
check "score runs (rc $rc)" '[ $rc -eq 0 ]'

python3 - "$port" "$T" > "$T/py.out" 2>&1 <<'EOF'
import json, sys, urllib.request, urllib.error
port, T = sys.argv[1], sys.argv[2]
fails = []
VALS = ('token_logprobs', 'top_logprobs', 'top_ids')
SAME = ('tokens', 'token_ids', 'text_offset', 'prompt_offset')
def compare(name, full, part, p):
    n = len(full['tokens'])
    for k in SAME:
        if full[k] != part[k]:
            fails.append('%s: %s differs' % (name, k))
    for k in VALS:
        if len(part[k]) != n:
            fails.append('%s: %s has %d entries, want %d' % (name, k, len(part[k]), n))
            continue
        for i in range(n):
            want = None if i < p else full[k][i]
            if part[k][i] != want:
                fails.append('%s: %s[%d] = %r, want %r' % (name, k, i, part[k][i], want))
                break
# JSON Lines
out = [json.loads(l, parse_float=str) for l in open(T + '/out.jsonl')]
for a, b, p in ((0, 1, 6), (2, 3, 4), (2, 4, 99)):
    compare('score line %d' % (b + 1), out[a]['logprobs'], out[b]['logprobs'], p)
    for k in ('sum_logprob', 'mean_logprob', 'perplexity', 'n_tokens'):
        if out[a][k] != out[b][k]:
            fails.append('score line %d: %s %r != %r' % (b + 1, k, out[b][k], out[a][k]))
for i in (5, 6):
    e = out[i].get('error', {})
    if e.get('param') != 'logprobs_from' or 'logprobs_from' not in e.get('message', ''):
        fails.append('score line %d: want an error naming logprobs_from, got %r' % (i + 1, out[i]))
# server
def post(body):
    req = urllib.request.Request('http://127.0.0.1:%s/v1/completions' % port, json.dumps(body).encode(),
                                 {'Content-Type': 'application/json'})
    try:
        r = urllib.request.urlopen(req, timeout=30)
        return r.status, json.loads(r.read(), parse_float=str)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
cases = [({'prompt': 'Once upon a time there was a little girl named Lily', 'echo': True, 'logprobs': 4, 'max_tokens': 0}, 6),
         ({'prompt': [[1, 403, 407, 261, 378], [1, 403, 407, 261, 378, 417, 285]], 'echo': True, 'logprobs': 1, 'max_tokens': 1, 'temperature': 0}, 5),
         ({'prompt': [1, 403, 407], 'echo': True, 'logprobs': 0, 'max_tokens': 0}, 0)]
for body, p in cases:
    s1, full = post(body)
    b2 = dict(body, logprobs_from=p)
    s2, part = post(b2)
    if s1 != 200 or s2 != 200:
        fails.append('server %r: status %d / %d' % (body['prompt'], s1, s2))
        continue
    for ci, (cf, cp) in enumerate(zip(full['choices'], part['choices'])):
        compare('server choice %d of %r' % (ci, body['prompt']), cf['logprobs'], cp['logprobs'], p)
        if cf['text'] != cp['text'] or cf['finish_reason'] != cp['finish_reason']:
            fails.append('server: text / finish_reason differ')
    if full['usage'] != part['usage']:
        fails.append('server: usage differs')
for bad in (-1, 'x', 1.5, True):
    s, j = post({'prompt': [1, 403], 'echo': True, 'logprobs': 1, 'max_tokens': 0, 'logprobs_from': bad})
    if s != 400 or j.get('error', {}).get('param') != 'logprobs_from':
        fails.append('server logprobs_from %r: status %d %r' % (bad, s, j))
for f in fails:
    print('FAIL ' + f)
print('done')
EOF
grep '^FAIL ' "$T/py.out" | head -20 | while read -r l; do echo "FAIL $FILE: ${l#FAIL }"; done
check "logprobs_from: nulls before P, every other byte the same, errors name it" \
    '! grep -q "^FAIL\|Traceback" "$T/py.out" && grep -q "^done" "$T/py.out" || { tail -n 5 "$T/py.out"; false; }'
done_
