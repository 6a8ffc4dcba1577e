#!/bin/sh
# tests/test_cli_output.sh — what `score` and `perplexity` write for people and for programs:
#   - every JSONL line carries mean_logprob = sum_logprob / (n - 1) and perplexity =
#     exp(-mean_logprob) (null for a one-token prompt);
#   - prompt_offset maps each token back onto the prompt as sent (bytes): null for BOS and
#     id prompts, prompt[off:next] spells the token (SentencePiece stories260K, and a byte-level
#     BPE model generated with the GPT-2 vocabulary, with multi-byte UTF-8 and an emoji), also
#     after special-token text ("<s>", "<|endoftext|>") parsed as its token;
#   - --format summary: one line per prompt whose numbers equal the JSONL ones, a total line;
#     --format table: one row per token with rank and top 3, no colour into a file;
#     with --stats / --compare (against a random model on the same vocabulary) the table's
#     rank, entropy, kld, same and dp columns and the summary's mean entropy, top-1 share,
#     kld_mean and same_top1 share (per line and total) equal the JSONL ones;
#   - perplexity --ppl-mode llama follows llama-perplexity's procedure: rebuilt here from
#     `score` on id prompts (the text less one trailing newline, chunks of c tokens with BOS
#     first, the second half scored), the
#     mean NLL and the standard error agree; "[i]x," per chunk and the "Final estimate" line;
#     too short a text exits 1, -c 2 exits 2; --json of both modes parses.
# Needs ../shared/models/stories260K.gguf and ../shared/vocab/ggml-vocab-gpt-2.gguf ($PS_SHARED)
# and python3. Prints "cli_output: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SHARED=${PS_SHARED:-../shared}
MODEL="$SHARED/models/stories260K.gguf"
GPT2="$SHARED/vocab/ggml-vocab-gpt-2.gguf"
BIN="$BUILD/promptscore"
NAME=cli_output FILE=test_cli_output.sh
. tests/check.sh
if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
if [ ! -r "$MODEL" ] || [ ! -r "$GPT2" ]; then
    skip "shared test material not found at $SHARED (set PS_SHARED)"; done_
fi
command -v python3 >/dev/null 2>&1 || { skip "python3 missing"; done_; }
T=$(mktemp -d /tmp/ps-test-cli-output-XXXXXX)
trap 'rm -rf "$T"' EXIT

cat > "$T/in.jsonl" <<'EOF'
{"id": "a", "prompt": "Once upon a time, there was a little girl."}
{"id": "b", "prompt": "  two  spaces\nand a newline\u00e9\u4e2d\ud83d\ude00!"}
{"id": "ids", "prompt": [1, 403, 407, 261]}
{"id": "one", "prompt": [1]}
{"id": "bad", "prompt": ""}
EOF
"$BIN" gen-model -o "$T/bpe.gguf" --vocab "$GPT2" --n-embd 32 --n-layer 1 --n-head 2 --n-head-kv 1 \
    --head-dim 16 --n-ff 64 2>/dev/null
check "gen-model with the GPT-2 vocabulary" '[ -s "$T/bpe.gguf" ]'
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" -o "$T/spm.jsonl" 2>/dev/null
"$BIN" score -m "$T/bpe.gguf" -i "$T/in.jsonl" -o "$T/bpe.jsonl" 2>/dev/null
cat > "$T/check.py" <<'EOF'
import json, math, struct, sys
f32 = lambda x: struct.unpack('f', struct.pack('f', x))[0]
ins = [json.loads(l) for l in open(sys.argv[1], encoding='utf-8')]
outs = [json.loads(l) for l in open(sys.argv[2], encoding='utf-8')]
bos_first = sys.argv[3] == 'bos'
fails = []
def expect(c, w):
    if not c: fails.append(w)
expect(len(outs) == len(ins), 'one line per input')
for inp, o in zip(ins, outs):
    if 'error' in o:
        expect(inp['id'] == 'bad', 'only the empty prompt fails: %r' % o)
        continue
    lp = o['logprobs']
    n = o['n_tokens']
    po = lp['prompt_offset']
    expect(len(po) == n, 'prompt_offset length')
    s = sum(f32(v) for v in lp['token_logprobs'][1:])
    expect(s == o['sum_logprob'], 'sum')
    if n > 1:
        expect(abs(o['mean_logprob'] - s / (n - 1)) <= 1e-15 * abs(s) + 1e-300, 'mean %r' % o)
        expect(abs(o['perplexity'] - math.exp(-o['mean_logprob'])) <= 1e-12 * o['perplexity'], 'ppl')
    else:
        expect(o['mean_logprob'] is None and o['perplexity'] is None, 'one token: nulls')
    if isinstance(inp['prompt'], list):
        expect(all(x is None for x in po), 'id prompts: all null')
        continue
    p = inp['prompt'].encode('utf-8')
    if bos_first:
        expect(po[0] is None and lp['token_ids'][0] == 1, 'BOS null')
    offs = [(i, x) for i, x in enumerate(po) if x is not None]
    # special-token text is that token; the SentencePiece prefix after it may be a token alone
    special = [t in ('<s>', '</s>', '<|endoftext|>') and
               ('<s>' in lp['tokens'] if t != '<|endoftext|>' else '<s>' not in lp['tokens'])
               for t in lp['tokens']]
    expect(len(offs) >= n - 2 - sum(special[1:]), 'nearly every token has an offset: %r' % po)
    expect([x for _, x in offs] == sorted(x for _, x in offs), 'offsets ascend')
    # the spans between offsets, put together, are the prompt (from the first offset on)
    expect(offs and offs[0][1] == 0, 'the first token starts at 0: %r' % po)
    for j, (i, x) in enumerate(offs):
        end = offs[j + 1][1] if j + 1 < len(offs) else len(p)
        tok = lp['tokens'][i].encode('utf-8')
        span = p[x:end]
        # a token's text is its span, or the span with the SentencePiece prefix space, or (a
        # byte token of a multi-byte character) U+FFFD standing for its bytes
        after = x == 0 or special[i - 1] or (i > 1 and po[i - 1] is None and special[i - 2])
        expect(span == tok or (after and b' ' + span == tok) or tok == '\ufffd'.encode(),
               'token %d %r at %d: span %r' % (i, tok, x, span))
print('\n'.join(fails)); sys.exit(1 if fails else 0)
EOF
python3 "$T/check.py" "$T/in.jsonl" "$T/spm.jsonl" bos >"$T/py" 2>&1
rc=$?
check "SentencePiece: mean/perplexity fields and prompt_offset ($(head -c 600 "$T/py"))" '[ $rc -eq 0 ]'
python3 "$T/check.py" "$T/in.jsonl" "$T/bpe.jsonl" nobos >"$T/py" 2>&1
rc=$?
check "byte-level BPE: mean/perplexity fields and prompt_offset ($(head -c 600 "$T/py"))" '[ $rc -eq 0 ]'
# special-token text parsed as its token ("<s>" for SentencePiece, "<|endoftext|>" for GPT-2)
echo '{"id": "special", "prompt": "Once<s> upon </s>a <|endoftext|>b\u00e9</s> end"}' >"$T/sp.jsonl"
for m in spm bpe; do
    if [ $m = spm ]; then f=$MODEL b=bos; else f=$T/bpe.gguf b=nobos; fi
    "$BIN" score -m "$f" -i "$T/sp.jsonl" -o "$T/sp.$m.jsonl" 2>/dev/null
    python3 "$T/check.py" "$T/sp.jsonl" "$T/sp.$m.jsonl" $b >"$T/py" 2>&1
    rc=$?
    check "$m: prompt_offset after special-token text ($(head -c 600 "$T/py"))" '[ $rc -eq 0 ]'
done

# ---- --format summary / table ------------------------------------------------------------------
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" --format summary >"$T/sum" 2>/dev/null; rc=$?
check "summary exits 0 (rc $rc)" '[ $rc -eq 0 ]'
python3 - "$T/spm.jsonl" "$T/sum" >"$T/py" 2>&1 <<'EOF'
import json, re, sys
outs = [json.loads(l) for l in open(sys.argv[1])]
lines = open(sys.argv[2]).read().splitlines()
ok = len(lines) == len(outs) + 1 and lines[-1].startswith('total  prompts 4  errors 1  tokens 49  scored 45')
for o, l in zip(outs, lines):
    if 'error' in o:
        ok &= 'error' in l
        continue
    m = re.search(r'tokens (\d+)  sum NLL (\S+)  mean NLL (\S+)  perplexity (\S+)', l)
    ok &= bool(m) and int(m.group(1)) == o['n_tokens'] and abs(float(m.group(2)) + o['sum_logprob']) < 1e-4
    if o['n_tokens'] > 1:
        ok &= abs(float(m.group(3)) + o['mean_logprob']) < 1e-4 and abs(float(m.group(4)) - o['perplexity']) < 1e-3
        ok &= 'most surprising: #' in l
print(lines); sys.exit(0 if ok else 1)
EOF
rc=$?
check "summary numbers = the JSONL ones ($(head -c 400 "$T/py"))" '[ $rc -eq 0 ]'
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" --format table >"$T/tab" 2>/dev/null; rc=$?
check "table: a header per prompt, one row per token, no colour in a file (rc $rc)" \
    '[ $rc -eq 0 ] && [ "$(grep -c "^== id" "$T/tab")" -eq 5 ] && grep -Eq "^ +1  \" Once\" +-0\.2437 +1  \" Once\" -0\.24  \" One\" -1\.86" "$T/tab" && ! grep -q "$(printf "\033")" "$T/tab"'
"$BIN" score -m "$MODEL" -i "$T/in.jsonl" --format xml >/dev/null 2>"$T/err"; rc=$?
check "--format xml: exit 2 (rc $rc)" '[ $rc -eq 2 ] && grep -q "jsonl, table or summary" "$T/err"'

# ---- --format summary / table with --stats and --compare --------------------------------------
"$BIN" gen-model -o "$T/cmp.gguf" --vocab "$MODEL" --n-embd 32 --n-layer 1 --n-head 2 --n-head-kv 1 \
    --head-dim 16 --n-ff 64 2>/dev/null
SC="--stats --compare $T/cmp.gguf"
"$BIN" score -m "$MODEL" $SC -i "$T/in.jsonl" -o "$T/sc.jsonl" 2>/dev/null
"$BIN" score -m "$MODEL" $SC -i "$T/in.jsonl" --format summary >"$T/sc.sum" 2>/dev/null; rs=$?
"$BIN" score -m "$MODEL" $SC -i "$T/in.jsonl" --format table >"$T/sc.tab" 2>/dev/null; rt=$?
python3 - "$T/sc.jsonl" "$T/sc.sum" "$T/sc.tab" >"$T/py" 2>&1 <<'EOF'
import json, re, sys
outs = [json.loads(l) for l in open(sys.argv[1])]
sums = open(sys.argv[2]).read().splitlines()
tab = open(sys.argv[3]).read().splitlines()
fails = []
def expect(c, w):
    if not c: fails.append(w)
num = r'(-?[0-9.e+-]+|-)'
fields = r'mean entropy (\S+)  top-1 (\S+)%  kld_mean (\S+)  same_top1 (\S+)%'
tot = {'ent': 0.0, 'top1': 0, 'kld': 0.0, 'same': 0, 'n': 0}
rows = iter(tab)
for o, l in zip(outs, sums):
    if 'error' in o:
        expect('error' in l, 'error line')
        next(rows)
        continue
    lp = o['logprobs']
    n = o['n_tokens']
    ent, rank, kld, same, dp = (lp[k] for k in ('entropy', 'rank', 'kld', 'same_top1', 'dp'))
    m = n - 1
    if m > 0:
        e, t1 = sum(ent[1:]), sum(r == 1 for r in rank[1:])
        k, sa = sum(kld[1:]), sum(s == 1 for s in same[1:])
        tot['ent'] += e; tot['top1'] += t1; tot['kld'] += k; tot['same'] += sa; tot['n'] += m
        g = re.search(fields, l)
        expect(bool(g), 'summary fields in %r' % l)
        if g:
            expect(abs(float(g.group(1)) - e / m) < 1e-4, 'mean entropy %s' % l)
            expect(abs(float(g.group(2)) - 100.0 * t1 / m) < 0.01, 'top-1 share %s' % l)
            expect(abs(float(g.group(3)) - o['kld_mean']) < 1e-6, 'kld_mean %s' % l)
            expect(abs(float(g.group(4)) - o['same_top1_pct']) < 0.01, 'same_top1 %s' % l)
    head = next(rows)
    expect(head.startswith('== id'), 'table header %r' % head)
    cols = next(rows)
    expect(re.match(r' +# +token +logprob +rank +entropy +kld +same +dp +top', cols) is not None,
           'columns %r' % cols)
    for i in range(n):
        r = next(rows)
        f = re.match(r' +(\d+)  ".*" +' + ' +'.join([num] * 6), r)
        expect(bool(f) and int(f.group(1)) == i, 'row %d: %r' % (i, r))
        if not f: continue
        if i == 0:
            expect(f.groups()[1:] == ('-',) * 6, 'row 0 dashes %r' % r)
            continue
        expect(int(f.group(3)) == rank[i], 'rank %d %r' % (rank[i], r))
        expect(abs(float(f.group(4)) - ent[i]) <= 5.1e-5, 'entropy %r' % r)
        expect(abs(float(f.group(5)) - kld[i]) <= 5.1e-4 * abs(kld[i]) + 1e-12, 'kld %r' % r)
        expect(int(f.group(6)) == same[i], 'same %r' % r)
        expect(abs(float(f.group(7)) - dp[i]) <= 5.1e-5, 'dp %r' % r)
g = re.search(fields, sums[-1])
expect(sums[-1].startswith('total') and bool(g), 'total line %r' % sums[-1])
if g:
    n = tot['n']
    expect(abs(float(g.group(1)) - tot['ent'] / n) < 1e-4, 'total entropy')
    expect(abs(float(g.group(2)) - 100.0 * tot['top1'] / n) < 0.01, 'total top-1')
    expect(abs(float(g.group(3)) - tot['kld'] / n) < 1e-6, 'total kld_mean')
    expect(abs(float(g.group(4)) - 100.0 * tot['same'] / n) < 0.01, 'total same_top1')
expect(tot['kld'] > 0 and tot['n'] > 0, 'a positive kld between two different models')
print(fails[:5]); sys.exit(1 if fails else 0)
EOF
rc=$?
check "--stats --compare: summary (per line, total) and table columns = the JSONL (rs $rs rt $rt; $(head -c 500 "$T/py"))" \
    '[ $rc -eq 0 ] && [ $rs -eq 0 ] && [ $rt -eq 0 ]'
"$BIN" score -m "$MODEL" --stats -i "$T/in.jsonl" --format table >"$T/st.tab" 2>/dev/null
"$BIN" score -m "$MODEL" --stats -i "$T/in.jsonl" --format summary >"$T/st.sum" 2>/dev/null
check "--stats alone: an entropy column and no kld one; summary with mean entropy, no kld_mean" \
    'grep -Eq "^ +# +token +logprob +rank +entropy +top 3$" "$T/st.tab" && grep -q "mean entropy" "$T/st.sum" && ! grep -q "kld" "$T/st.sum" "$T/st.tab"'
check "without --stats / --compare: no new column or field" \
    '! grep -q "entropy\|kld\|same_top1" "$T/tab" "$T/sum"'

# ---- perplexity --ppl-mode llama ------------------------------------------------------------------
TEXT=tests/data/story.txt
"$BIN" perplexity -m "$MODEL" -f "$TEXT" --ppl-mode llama -c 64 >"$T/ll" 2>/dev/null; rc=$?
check "llama mode exits 0 (rc $rc)" '[ $rc -eq 0 ]'
"$BIN" perplexity -m "$MODEL" -f "$TEXT" --ppl-mode llama -c 64 --json >"$T/ll.json" 2>/dev/null
# llama-perplexity's -f drops one trailing newline before tokenizing
python3 -c 'import sys; t = open(sys.argv[1], "rb").read(); sys.stdout.buffer.write(t[:-1] if t.endswith(b"\n") else t)' "$TEXT" >"$T/text.stripped"
"$BIN" tokenize -m "$MODEL" --json <"$T/text.stripped" >"$T/ids.json"
python3 - "$T/ids.json" 64 >"$T/chunks.jsonl" <<'EOF'
import json, sys
ids = json.load(open(sys.argv[1])); c = int(sys.argv[2])
for i in range(len(ids) // c):
    chunk = ids[i * c:(i + 1) * c]
    chunk[0] = 1  # BOS replaces the chunk's first token
    print(json.dumps({"id": i, "prompt": chunk, "logprobs": 0}))
EOF
# the same cache type as llama mode's default: f16-dot (llama-perplexity's attention roundings)
"$BIN" score -m "$MODEL" --kv-type f16-dot -i "$T/chunks.jsonl" -o "$T/chunks.out" 2>/dev/null
python3 - "$T/chunks.out" "$T/ll.json" "$T/ll" 64 "$T/ids.json" >"$T/py" 2>&1 <<'EOF'
import json, math, re, sys
outs = [json.loads(l) for l in open(sys.argv[1])]
j = json.load(open(sys.argv[2])); txt = open(sys.argv[3]).read(); c = int(sys.argv[4])
n = len(json.load(open(sys.argv[5])))
first = c // 2
nll = [-v for o in outs for v in o['logprobs']['token_logprobs'][first + 1:c]]
cnt = len(nll); mean = sum(nll) / cnt
var = sum(v * v for v in nll) / cnt - mean * mean
ppl = math.exp(mean); err = math.sqrt(var / (cnt - 1)) * ppl
ok = j['mode'] == 'llama' and j['chunks'] == n // c == len(outs) and j['tokens'] == n
ok &= j['tokens_scored'] == cnt == j['chunks'] * (c - first - 1)
ok &= abs(j['mean_nll'] - mean) < 1e-6 and abs(j['perplexity'] - ppl) < 1e-5 * ppl
ok &= abs(j['perplexity_stderr'] - err) < 1e-4 * err
run = re.findall(r'\[(\d+)\]([0-9.]+),', txt)
ok &= [int(a) for a, _ in run] == list(range(1, j['chunks'] + 1))
ok &= abs(float(run[-1][1]) - ppl) < 1e-4
m = re.search(r'^Final estimate: PPL = ([0-9]+\.[0-9]{4}) \+/- ([0-9]+\.[0-9]{5})$', txt, re.M)
ok &= bool(m) and m.group(1) == '%.4f' % j['perplexity'] and m.group(2) == '%.5f' % j['perplexity_stderr']
print(j, mean, ppl, err, txt[-80:]); sys.exit(0 if ok else 1)
EOF
rc=$?
check "llama mode = chunks of c with BOS first, second half scored, its standard error ($(tail -c 300 "$T/py"))" '[ $rc -eq 0 ]'
"$BIN" perplexity -m "$MODEL" -f "$TEXT" --ppl-mode llama -c 64 --chunks 3 --json >"$T/o" 2>/dev/null
check "--chunks 3 keeps three chunks" 'grep -q "\"chunks\":3," "$T/o"'
"$BIN" perplexity -m "$MODEL" -f "$TEXT" --ppl-mode llama -c 2048 >/dev/null 2>"$T/err"; rc=$?
check "llama mode on too short a text: exit 1 with the numbers (rc $rc)" '[ $rc -eq 1 ] && grep -q "at least 4096 tokens" "$T/err"'
"$BIN" perplexity -m "$MODEL" -f "$TEXT" --ppl-mode llama -c 2 >/dev/null 2>"$T/err"; rc=$?
check "llama mode -c 2: exit 2 (rc $rc)" '[ $rc -eq 2 ]'
"$BIN" perplexity -m "$MODEL" -f "$TEXT" --ppl-mode llama --stride 4 >/dev/null 2>"$T/err"; rc=$?
check "--stride with llama mode: exit 2 (rc $rc)" '[ $rc -eq 2 ]'
"$BIN" perplexity -m "$MODEL" -f "$TEXT" --ppl-mode bogus >/dev/null 2>"$T/err"; rc=$?
check "--ppl-mode bogus: exit 2 (rc $rc)" '[ $rc -eq 2 ] && grep -q "sliding or llama" "$T/err"'
"$BIN" perplexity -m "$MODEL" -f "$TEXT" -c 128 --json >"$T/sl.json" 2>/dev/null
"$BIN" perplexity -m "$MODEL" -f "$TEXT" -c 128 >"$T/sl" 2>/dev/null
python3 - "$T/sl.json" "$T/sl" >"$T/py" 2>&1 <<'EOF'
import json, re, sys
j = json.load(open(sys.argv[1])); t = open(sys.argv[2]).read()
m = re.search(r'perplexity ([0-9.]+)  mean NLL ([0-9.]+)  tokens ([0-9]+)', t)
ok = j['mode'] == 'sliding' and j['ctx'] == 128 and j['stride'] == 64 and m
ok = ok and abs(float(m.group(1)) - j['perplexity']) < 1e-5 and int(m.group(3)) == j['tokens_scored'] == j['tokens'] - 1
print(j, t); sys.exit(0 if ok else 1)
EOF
rc=$?
check "sliding --json = its text line ($(head -c 300 "$T/py"))" '[ $rc -eq 0 ]'
done_
