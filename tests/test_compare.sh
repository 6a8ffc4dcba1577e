#!/bin/sh
# tests/test_compare.sh — several models compared in one pass, end to end, on generated models
# with the same 5000-token vocabulary (the base llama F32, a qwen3, the base in Q8_0):
#   - score --compare A --compare B: each line's "compare" array holds, model by model, the
#     kld / same_top1 / dp arrays and kld_mean / same_top1_pct that --compare with that model
#     alone writes (the same JSON text: bitwise the same floats), and the rest of the line is
#     that of a score without them; a comma list is the same as the repeated option; the
#     arrays are the same across --chunk 7 -t 1;
#   - perplexity --ppl-mode llama --compare A --compare B --json: an array whose objects are,
#     but for "model", those --compare A and --compare B print apart; the text output has a
#     row per model and chunk and one block per model;
#   - serve --compare A --compare B: the logprobs object gets the same "compare" array, and
#     /v1/models names both models;
#   - bad input: the same file twice (also spelled another way; exit 2, both names), a model
#     with another vocabulary (exit 2, both files named), several models with --format table.
# Prints "compare_cli: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
BIN="$BUILD/promptscore"
PY=/usr/bin/python3
NAME=compare_cli; FILE=test_compare.sh
. tests/check.sh

if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
"$PY" -c 'import json' 2>/dev/null || { skip "$PY missing"; done_; }

T=$(mktemp -d /tmp/ps-test-compare-XXXXXX)
spid=""
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; rm -rf "$T"' EXIT

"$BIN" gen-model -o "$T/a.gguf" --preset tiny --n-vocab 5000 --seed 3 >/dev/null 2>&1 &&
"$BIN" gen-model -o "$T/b.gguf" --preset tiny --arch qwen3 --n-vocab 5000 --seed 4 >/dev/null 2>&1 &&
"$BIN" gen-model -o "$T/aq.gguf" --preset tiny --n-vocab 5000 --seed 3 --type q8_0 >/dev/null 2>&1 &&
"$BIN" gen-model -o "$T/c.gguf" --preset tiny --n-vocab 600 >/dev/null 2>&1 ||
    { bad "gen-model failed"; done_; }

"$PY" - "$T" <<'PYEOF'
import json, random, sys
random.seed(5)
w = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'and', 'dog', 'ran', 'far', 'away', 'lo', 'qu', 'zz']
with open(sys.argv[1] + '/in.jsonl', 'w') as f:
    for i, n in enumerate([1, 3, 40, 300]):
        f.write(json.dumps({'id': i, 'prompt': ' '.join(random.choice(w) for _ in range(n))}) + '\n')
    f.write(json.dumps({'id': 'from', 'prompt': 'the cat sat on a mat and ran far', 'logprobs_from': 4}) + '\n')
with open(sys.argv[1] + '/text.txt', 'w') as f:
    f.write(' '.join(random.choice(w) for _ in range(800)) + '\n')
PYEOF

# ---- score ---------------------------------------------------------------------------------
"$BIN" score -m "$T/a.gguf" --compare "$T/b.gguf" --compare "$T/aq.gguf" -i "$T/in.jsonl" \
    -o "$T/multi.jsonl" 2>"$T/err" || bad "score with two --compare failed: $(cat "$T/err")"
"$BIN" score -m "$T/a.gguf" --compare "$T/b.gguf,$T/aq.gguf" -i "$T/in.jsonl" \
    -o "$T/comma.jsonl" 2>/dev/null
check "a comma list is the repeated --compare" 'cmp -s "$T/multi.jsonl" "$T/comma.jsonl"'
"$BIN" score -m "$T/a.gguf" --compare "$T/b.gguf" --compare "$T/aq.gguf" --chunk 7 -t 1 \
    -i "$T/in.jsonl" -o "$T/multi7.jsonl" 2>/dev/null
check "two --compare: the same bytes with --chunk 7 -t 1" 'cmp -s "$T/multi.jsonl" "$T/multi7.jsonl"'
for m in b aq; do
    "$BIN" score -m "$T/a.gguf" --compare "$T/$m.gguf" -i "$T/in.jsonl" -o "$T/one_$m.jsonl" 2>/dev/null
done
"$BIN" score -m "$T/a.gguf" -i "$T/in.jsonl" -o "$T/none.jsonl" 2>/dev/null
"$PY" - "$T" > "$T/py.out" 2>&1 <<'PYEOF'
import json, sys
T = sys.argv[1]
load = lambda n: [json.loads(l, parse_float=str) for l in open(T + '/' + n)]
multi, none = load('multi.jsonl'), load('none.jsonl')
one = {m: load('one_%s.jsonl' % m) for m in ('b', 'aq')}
bad = []
for li, line in enumerate(multi):
    cmp = line.pop('compare', None)
    if cmp is None or [c['model'] for c in cmp] != ['b.gguf', 'aq.gguf']:
        bad.append('line %d: no compare array of b.gguf, aq.gguf' % li); continue
    for c, m in zip(cmp, ('b', 'aq')):
        o = one[m][li]
        for k in ('kld', 'same_top1', 'dp'):
            if c[k] != o['logprobs'][k]: bad.append('line %d %s: %s differs' % (li, m, k))
        for k in ('kld_mean', 'same_top1_pct'):
            if c[k] != o[k]: bad.append('line %d %s: %s %s != %s' % (li, m, k, c[k], o[k]))
    if line != none[li]: bad.append('line %d: the rest differs from a score without compare' % li)
print('\n'.join(bad) if bad else 'ok %d lines' % len(multi))
PYEOF
check "two --compare: each model's fields bitwise those of --compare it alone ($(head -n 3 "$T/py.out"))" \
    'grep -q "^ok 5 lines" "$T/py.out"'

# ---- perplexity ----------------------------------------------------------------------------
P="perplexity -m $T/a.gguf --ppl-mode llama -c 32 --chunks 4 -f $T/text.txt"
$BIN $P --compare "$T/b.gguf" --compare "$T/aq.gguf" --json > "$T/pm.json" 2>"$T/err" ||
    bad "perplexity with two --compare failed: $(cat "$T/err")"
$BIN $P --compare "$T/b.gguf" --json > "$T/pb.json" 2>/dev/null
$BIN $P --compare "$T/aq.gguf" --json > "$T/paq.json" 2>/dev/null
"$PY" - "$T" > "$T/py.out" 2>&1 <<'PYEOF'
import json, sys
T = sys.argv[1]
m = json.load(open(T + '/pm.json'), parse_float=str)
ok = isinstance(m, list) and len(m) == 2
for o, f, name in zip(m, ('pb.json', 'paq.json'), ('b.gguf', 'aq.gguf')):
    ok = ok and o.pop('model') == name and o == json.load(open(T + '/' + f), parse_float=str)
print('ok' if ok else 'differ')
PYEOF
check "perplexity --json with two --compare: each object that of its model alone" \
    'grep -qx ok "$T/py.out"'
$BIN $P --compare "$T/b.gguf" --compare "$T/aq.gguf" > "$T/pm.txt" 2>/dev/null
check "perplexity text: a row per model and chunk, a block per model" \
    '[ "$(grep -c "^   [1-4] .*gguf\$" "$T/pm.txt")" -eq 8 ] &&
     [ "$(grep -c "====== KL divergence statistics" "$T/pm.txt")" -eq 2 ] &&
     grep -q "Compared model: b.gguf" "$T/pm.txt" && grep -q "Compared model: aq.gguf" "$T/pm.txt"'
$BIN $P --compare "$T/b.gguf" > "$T/p1.txt" 2>/dev/null
check "perplexity text with one --compare: no model names" \
    '! grep -q "gguf" "$T/p1.txt" && grep -q "====== KL divergence statistics" "$T/p1.txt"'

# ---- bad input -----------------------------------------------------------------------------
"$BIN" score -m "$T/a.gguf" --compare "$T/b.gguf" --compare "$T/../$(basename "$T")/b.gguf" \
    -i "$T/in.jsonl" >/dev/null 2>"$T/err"; rc=$?
check "the same file twice: exit 2, clear ($(cat "$T/err"))" \
    '[ $rc -eq 2 ] && grep -q "same file" "$T/err"'
$BIN $P --compare "$T/aq.gguf,$T/aq.gguf" >/dev/null 2>"$T/err"; rc=$?
check "perplexity: the same file twice in a comma list: exit 2" \
    '[ $rc -eq 2 ] && grep -q "same file" "$T/err"'
"$BIN" score -m "$T/a.gguf" --compare "$T/b.gguf" --compare "$T/c.gguf" -i "$T/in.jsonl" \
    >/dev/null 2>"$T/err"; rc=$?
check "another vocabulary: exit 2, both files named ($(cat "$T/err"))" \
    '[ $rc -eq 2 ] && grep -q "a.gguf" "$T/err" && grep -q "c.gguf" "$T/err"'
"$BIN" score -m "$T/a.gguf" --compare "$T/b.gguf" --compare "$T/aq.gguf" --format table \
    -i "$T/in.jsonl" >/dev/null 2>"$T/err"; rc=$?
check "several models with --format table: exit 2" '[ $rc -eq 2 ] && grep -q "format" "$T/err"'

# ---- serve ---------------------------------------------------------------------------------
"$BIN" serve -m "$T/a.gguf" --compare "$T/b.gguf" --compare "$T/aq.gguf" --port 0 -t 1 \
    2>"$T/serve.log" &
spid=$!
port=""
for i in $(seq 100); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$T/serve.log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    bad "serve did not start: $(tail -n 3 "$T/serve.log")"
else
    "$PY" - "$port" "$T" > "$T/py.out" 2>&1 <<'PYEOF'
import json, sys, urllib.request
port, T = sys.argv[1], sys.argv[2]
def post(body):
    rq = urllib.request.Request('http://127.0.0.1:%s/v1/completions' % port,
                                data=json.dumps(body).encode(), headers={'Content-Type': 'application/json'})
    return json.loads(urllib.request.urlopen(rq).read(), parse_float=str)
line = [json.loads(l, parse_float=str) for l in open(T + '/multi.jsonl')][3]
prompt = [json.loads(l) for l in open(T + '/in.jsonl')][3]['prompt']
r = post({'prompt': prompt, 'echo': True, 'max_tokens': 0, 'logprobs': 5})
lp = r['choices'][0]['logprobs']
ok = [c['model'] for c in lp.get('compare', [])] == ['b.gguf', 'aq.gguf']
for c, d in zip(lp.get('compare', []), line['compare']):
    ok = ok and all(c[k] == d[k] for k in ('kld', 'same_top1', 'dp', 'kld_mean', 'same_top1_pct'))
models = json.loads(urllib.request.urlopen('http://127.0.0.1:%s/v1/models' % port).read())
ok = ok and models['data'][0]['meta'].get('compares') == ['b.gguf', 'aq.gguf']
print('ok' if ok else 'differ: %s' % json.dumps(lp.get('compare'))[:300])
PYEOF
    check "serve with two --compare: the same compare array, /v1/models names both ($(head -c 200 "$T/py.out"))" \
        'grep -qx ok "$T/py.out"'
    kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; spid=""
fi
done_
