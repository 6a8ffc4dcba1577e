#!/usr/bin/env bash
# compare_many.sh -- several models compared in one pass: `promptscore score -m BASE --compare
# Q1 --compare Q2 --compare Q3` on one id prompt of N tokens (-c N), on four generated
# Qwen3-0.6B-shaped files (gen-model --preset qwen3-0.6b, the same seed: the base in Q8_0, the
# three compared in Q4_K_M, Q5_K_M and Q6_K, as a quantisation sweep would have them). Checks
#   - peak RSS <= the four models' weights (file sizes) + one chunk of logits each (256 x
#     n_vocab x 4 bytes) + the four K/V caches (layers x N x kv_heads x head_dim x 2 x 4 bytes,
#     the default f32 cache) + 64 MiB;
#   - wall time of the one pass <= 1.1 x (the base scored alone + each compared model scored
#     alone), every run on the same prompt, threads and machine. The CPU time (user + system)
#     of each run is printed too, with its ratio: on a shared machine the wall clock measures
#     the neighbours as much as the work.
# A benchmark, not a test: run it by hand on a quiet machine.
#
# usage: bench/compare_many.sh [N_TOKENS (default 4096)] [THREADS (default 2)]
#   env PROMPTSCORE (default build/promptscore), PY (default /usr/bin/python3),
#   DIR (where the files are written, default a new folder under /tmp; removed at the end
#   unless KEEP=1). Needs GNU time (/usr/bin/time). Prints each figure; exits 1 when a bound
#   is not met.
set -euo pipefail
N=${1:-4096} T=${2:-2}
PS=${PROMPTSCORE:-build/promptscore}
PY=${PY:-/usr/bin/python3}
W=${DIR:-$(mktemp -d /tmp/ps-bench-compare-XXXXXX)}
mkdir -p "$W"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$W"' EXIT

TYPES="q8_0 q4_k_m q5_k_m q6_k"
for t in $TYPES; do
    [ -s "$W/$t.gguf" ] ||
        "$PS" gen-model --preset qwen3-0.6b --type "$t" --seed 1 -o "$W/$t.gguf" >/dev/null
done
BASE="$W/q8_0.gguf"
CMP=("$W/q4_k_m.gguf" "$W/q5_k_m.gguf" "$W/q6_k.gguf")

# n_vocab, layers, kv heads, head dim of a GGUF (its metadata)
read -r V L H D < <("$PY" - "$BASE" <<'PYEOF'
import struct, sys
f = open(sys.argv[1], 'rb')
def rd(fmt):
    return struct.unpack('<' + fmt, f.read(struct.calcsize('<' + fmt)))
def rstr():
    (n,) = rd('Q'); return f.read(n).decode('utf-8', 'replace')
SIZES = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}
def rval(t):
    if t == 8: return rstr()
    if t == 9:
        (et,), (n,) = rd('I'), rd('Q')
        if et == 8:
            for _ in range(n): rstr()
            return n
        f.read(struct.calcsize('<' + SIZES[et]) * n); return n
    return rd(SIZES[t])[0]
assert f.read(4) == b'GGUF'
rd('I'); (nt,), (nkv,) = rd('Q'), rd('Q')
kv = {}
for _ in range(nkv):
    k = rstr(); (t,) = rd('I'); kv[k] = rval(t)
a = kv['general.architecture']
heads = kv[a + '.attention.head_count']
kvh = kv.get(a + '.attention.head_count_kv', heads)
hd = kv.get(a + '.attention.key_length', kv[a + '.embedding_length'] // heads)
print(kv['tokenizer.ggml.tokens'], kv[a + '.block_count'], kvh, hd)
PYEOF
)
"$PY" -c "
import json, random
random.seed(1)
print(json.dumps({'id': 1, 'prompt': [random.randrange(1, $V) for _ in range($N)]}))" > "$W/p.jsonl"

# run NAME ARGS...: wall seconds and peak RSS (KB) of one score, into $W/NAME.{s,kb}
run() {
    local name=$1
    shift
    /usr/bin/time -v "$PS" score "$@" -c "$N" -t "$T" -i "$W/p.jsonl" -o "$W/$name.jsonl" \
        2> "$W/$name.time"
    awk -F': ' '/Maximum resident set size/ {print $2}' "$W/$name.time" > "$W/$name.kb"
    awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0;
        for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$W/$name.time" > "$W/$name.s"
    awk -F': ' '/User time|System time/ {s += $2} END {print s}' "$W/$name.time" > "$W/$name.cpu"
}
run multi -m "$BASE" --compare "${CMP[0]}" --compare "${CMP[1]}" --compare "${CMP[2]}"
run base -m "$BASE"
for i in 0 1 2; do run "c$i" -m "${CMP[$i]}"; done

"$PY" - "$W" "$N" "$V $L $H $D" "$BASE" "${CMP[@]}" <<'PYEOF'
import json, os, sys
W, n = sys.argv[1], int(sys.argv[2])
v, l, h, d = map(int, sys.argv[3].split())
files = sys.argv[4:]
K = 1024
rd = lambda name, ext: float(open('%s/%s.%s' % (W, name, ext)).read())
weights = sum(os.path.getsize(f) for f in files)
logits = len(files) * 256 * v * 4
kv = len(files) * l * n * h * d * 2 * 4
slack = 64 * K * K
budget = weights + logits + kv + slack
rss = rd('multi', 'kb') * K
for name, x in (('weights of the 4 files', weights), ('4 chunks of logits (256 x %d x 4)' % v, logits),
                ('4 K/V caches (%d x %d x %d x %d x 2 x 4)' % (l, n, h, d), kv), ('slack', slack),
                ('budget', budget), ('peak RSS, 3 compared in one pass', rss)):
    print('%-46s %10.1f MB' % (name, x / 1e6))
t_multi = rd('multi', 's')
apart = {k: rd(k, 's') for k in ('base', 'c0', 'c1', 'c2')}
t_apart = sum(apart.values())
print('%-46s %10.2f s' % ('one pass, 3 compared', t_multi))
for k, name in zip(('base', 'c0', 'c1', 'c2'), [os.path.basename(f) for f in files]):
    print('%-46s %10.2f s' % ('alone: ' + name, apart[k]))
print('%-46s %10.2f s  (ratio %.3f, bound 1.1)' % ('base + 3 apart', t_apart, t_multi / t_apart))
c_multi = rd('multi', 'cpu')
c_apart = sum(rd(k, 'cpu') for k in ('base', 'c0', 'c1', 'c2'))
print('%-46s %10.2f s / %.2f s  (ratio %.3f)' % ('CPU time (user + sys): one pass / apart',
                                                 c_multi, c_apart, c_multi / c_apart))
m = json.loads(open(W + '/multi.jsonl').readline())
print('kld_mean per model: ' + ', '.join('%s %.6f' % (c['model'], c['kld_mean']) for c in m['compare']))
ok = rss <= budget and t_multi <= 1.1 * t_apart
print('RSS %s, time %s' % ('within budget' if rss <= budget else 'OVER BUDGET',
                          'within 1.1x' if t_multi <= 1.1 * t_apart else 'OVER 1.1x'))
sys.exit(0 if ok else 1)
PYEOF
