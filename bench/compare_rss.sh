#!/usr/bin/env bash
# compare_rss.sh -- peak RSS of `promptscore score -m A --compare B` on one id prompt of N
# tokens (-c N), against the budget: the weights of both (file sizes) + one chunk of logits each
# (256 positions x n_vocab x 4 bytes) + both K/V caches (layers x N x kv_heads x head_dim x 2 x
# 4 bytes, the default f32 cache) + 64 MiB.
#
# usage: bench/compare_rss.sh MODEL_A.gguf MODEL_B.gguf [N_TOKENS (default 4096)] [THREADS (2)]
#   env PROMPTSCORE (default build/promptscore), PY (default /usr/bin/python3)
# Prints each part of the budget, the budget, the peak RSS and the margin, in KB (1024 bytes),
# and exits 1 when the peak is over the budget. Needs GNU time (/usr/bin/time).
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,11p "$0"; exit 2; }
A=$1 B=$2 N=${3:-4096} T=${4:-2}
PS=${PROMPTSCORE:-build/promptscore}
PY=${PY:-/usr/bin/python3}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

# n_vocab, layers, kv heads, head dim of a GGUF (its metadata; the K/V of every layer)
hparams() {
    "$PY" - "$1" <<'EOF'
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
EOF
}
read -r VA LA HA DA < <(hparams "$A")
read -r VB LB HB DB < <(hparams "$B")
"$PY" -c "
import json, random
random.seed(1)
print(json.dumps({'id': 1, 'prompt': [random.randrange(1, $VA) for _ in range($N)]}))" > "$W/p.jsonl"

/usr/bin/time -v "$PS" score -m "$A" --compare "$B" -c "$N" -t "$T" -i "$W/p.jsonl" \
    -o /dev/null 2> "$W/time"
RSS=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$W/time")
"$PY" - "$A" "$B" "$N" "$RSS" "$VA $LA $HA $DA" "$VB $LB $HB $DB" <<'EOF'
import os, sys
a, b, n, rss = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ha, hb = (list(map(int, x.split())) for x in sys.argv[5:7])
K = 1024
wa, wb = os.path.getsize(a), os.path.getsize(b)
la, lb = 256 * ha[0] * 4, 256 * hb[0] * 4
kva = ha[1] * n * ha[2] * ha[3] * 2 * 4
kvb = hb[1] * n * hb[2] * hb[3] * 2 * 4
slack = 64 * K * K
budget = wa + wb + la + lb + kva + kvb + slack
rows = [('weights A (file size)', wa), ('weights B (file size)', wb),
        ('logits A (256 x %d x 4)' % ha[0], la), ('logits B (256 x %d x 4)' % hb[0], lb),
        ('K/V A (%d x %d x %d x %d x 2 x 4)' % (ha[1], n, ha[2], ha[3]), kva),
        ('K/V B (%d x %d x %d x %d x 2 x 4)' % (hb[1], n, hb[2], hb[3]), kvb),
        ('slack', slack)]
for name, v in rows:
    print('%-40s %12.0f KB' % (name, v / K))
print('%-40s %12.0f KB' % ('budget', budget / K))
print('%-40s %12d KB' % ('peak RSS', rss))
print('%-40s %12.0f KB (%.1f MB)' % ('margin (budget - peak)', budget / K - rss, (budget / K - rss) / 1000))
print('%-40s %12.0f KB' % ('beyond weights, logits and K/V', rss - (budget - slack) / K))
sys.exit(0 if rss <= budget / K else 1)
EOF
