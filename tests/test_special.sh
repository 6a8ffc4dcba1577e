#!/bin/sh
# tests/test_special.sh — one tokenization policy for text prompts (docs/api.md, "Text
# prompts"): special-token text (`</s>`, `<s>`) is that token by default in `serve` and in
# `score` (and `tokenize`), and plain text with "parse_special": false (a request's or a JSON
# Lines line's field) / --no-parse-special.
# For prompts with and without special-token text, under both settings, the server
# (/v1/completions echo, logprobs 5, max_tokens 0; /tokenize) and the CLI give the same token
# ids and the same logprob values written the same way (token_logprobs, top_logprobs, top_ids),
# which is bitwise equality of the float32 values; and the two settings do differ on the
# prompts that hold special-token text. On ../shared/models/stories260K.gguf.
# Prints "special: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SHARED=${PS_SHARED:-../shared}
MODEL="$SHARED/models/stories260K.gguf"
BIN="$BUILD/promptscore"
NAME=special; FILE=test_special.sh
. tests/check.sh

if [ ! -r "$MODEL" ]; then
    skip "shared test material not found at $SHARED (set PS_SHARED)"; done_
fi
if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
command -v python3 >/dev/null 2>&1 || { skip "python3 missing"; done_; }

T=$(mktemp -d /tmp/ps-test-special-XXXXXX)
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

cat > "$T/prompts.json" <<'EOF'
["Once upon a time there was a girl", "Once upon a time</s> there was<s> a girl", "</s>Lily</s>"]
EOF
python3 - "$T/prompts.json" > "$T/in.jsonl" <<'EOF'
import json, sys
for i, p in enumerate(json.load(open(sys.argv[1]))):
    print(json.dumps({"id": i, "prompt": p, "logprobs": 5}))
EOF
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" -o "$T/cli_on.jsonl" 2>/dev/null; rc1=$?
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" -o "$T/cli_off.jsonl" --no-parse-special 2>/dev/null; rc2=$?
check "score runs with and without --no-parse-special (rc $rc1 $rc2)" '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ]'
# the server's field on a line (one request module for both): "parse_special": false on each
# line gives the bytes of --no-parse-special
sed 's/}$/, "parse_special": false}/' "$T/in.jsonl" > "$T/in_off.jsonl"
"$BIN" score -m "$MODEL" -i "$T/in_off.jsonl" -o "$T/cli_off_field.jsonl" 2>/dev/null; rc3=$?
check "a line's \"parse_special\": false is --no-parse-special, byte for byte (rc $rc3)" \
    '[ $rc3 -eq 0 ] && cmp -s "$T/cli_off.jsonl" "$T/cli_off_field.jsonl"'
for setting in on off; do
    case $setting in on) flag="" ;; off) flag="--no-parse-special" ;; esac
    : > "$T/cli_tok_$setting"
    python3 - "$T/prompts.json" "$T" <<'EOF'
import json, sys
for i, p in enumerate(json.load(open(sys.argv[1]))):
    open('%s/p%d.txt' % (sys.argv[2], i), 'w').write(p)
EOF
    for i in 0 1 2; do
        "$BIN" tokenize -m "$MODEL" --json $flag < "$T/p$i.txt" >> "$T/cli_tok_$setting" 2>/dev/null
        echo >> "$T/cli_tok_$setting"
    done
done

python3 - "$port" "$T" <<'EOF' > "$T/py.out" 2>&1
import json, sys, urllib.request
port, T = sys.argv[1], sys.argv[2]
prompts = json.load(open(T + '/prompts.json'))
def post(path, body):
    req = urllib.request.Request('http://127.0.0.1:%s%s' % (port, path), json.dumps(body).encode(),
                                 {'Content-Type': 'application/json'})
    return json.loads(urllib.request.urlopen(req, timeout=30).read(), parse_float=str)
fails, n = [], 0
ids_by = {}
for setting in ('on', 'off'):
    cli = [json.loads(l, parse_float=str) for l in open('%s/cli_%s.jsonl' % (T, setting))]
    toks = [json.loads(l) for l in open('%s/cli_tok_%s' % (T, setting)) if l.strip()]
    for i, p in enumerate(prompts):
        body = {'prompt': p, 'echo': True, 'logprobs': 5, 'max_tokens': 0}
        if setting == 'off':
            body['parse_special'] = False
        srv = post('/v1/completions', body)['choices'][0]['logprobs']
        c = cli[i]['logprobs']
        n += 1
        for key in ('token_ids', 'tokens', 'token_logprobs', 'top_logprobs', 'top_ids'):
            if srv[key] != c[key]:
                fails.append('%s, prompt %d: %s differ: server %r, cli %r' % (setting, i, key, srv[key][:6], c[key][:6]))
        tb = {'prompt': p} if setting == 'on' else {'prompt': p, 'parse_special': False}
        st = post('/tokenize', tb)['tokens']
        if st != c['token_ids'] or toks[i] != c['token_ids']:
            fails.append('%s, prompt %d: /tokenize %r, tokenize CLI %r, score %r' % (setting, i, st, toks[i], c['token_ids']))
        ids_by[(setting, i)] = c['token_ids']
for i, p in enumerate(prompts):
    has = '</s>' in p
    differ = ids_by[('on', i)] != ids_by[('off', i)]
    if has != differ:
        fails.append('prompt %d (%r): settings %s' % (i, p, 'differ' if differ else 'agree'))
    if has and 2 not in ids_by[('on', i)]:
        fails.append('prompt %d: </s> (id 2) not recognised by default: %r' % (i, ids_by[('on', i)]))
for f in fails:
    print('FAIL ' + f)
print('compared %d' % n)
EOF
grep '^FAIL ' "$T/py.out" | while read -r l; do echo "FAIL $FILE: ${l#FAIL }"; done
check "server and CLI agree on ids and logprobs, both settings, 3 prompts ($(tail -n 1 "$T/py.out"))" \
    '! grep -q "^FAIL\|Traceback" "$T/py.out" && grep -q "compared 6" "$T/py.out"'
check "no Python error" '! grep -q Traceback "$T/py.out" || { cat "$T/py.out"; false; }'
curl -s -o "$T/bad" -w '%{http_code}' -H 'Content-Type: application/json' \
    -d '{"prompt":"a","parse_special":1}' "http://127.0.0.1:$port/v1/completions" > "$T/code" 2>/dev/null
check "parse_special must be a bool: 400 naming it ($(cat "$T/code"))" \
    '[ "$(cat "$T/code")" = 400 ] && grep -q "parse_special" "$T/bad"'
done_
