#!/bin/sh
# tests/test_cli_bench.sh — `promptscore bench` end to end on ../shared/models/stories260K.gguf
# ($PS_SHARED overrides): --json gives one object per (threads, length) with sane figures
# (tokens/s > 0, shares in [0, 1] summing to ~1 — matmul, attention, delta-net, top-K and rest
# together are the whole score time; a gen-model qwen35 hybrid reports a delta-net share), then
# the peak-RSS line within its budget; every row is the median of --runs (default 3) after
# the cold pass of a fresh session, which has its own line ("pass": "cold"); the table form runs no kernel check (the kernels against
# their references on model matrices are tests/test_model_kernels.c); bad usage exits 2, a
# missing model 1. --act: every --json run line
# carries "act" ("native" by default, "f32" with --act f32); --act bogus or without a value
# exits 2 naming --act; on a gen-model BF16 model the banner names the activations and the run
# goes through with either. --cache-pairs prints a fresh-cache and a warm-cache line. Runs in
# about a second.
# Prints "cli_bench: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SHARED=${PS_SHARED:-../shared}
MODEL="$SHARED/models/stories260K.gguf"
BIN="$BUILD/promptscore"
NAME=cli_bench; FILE=test_cli_bench.sh
. tests/check.sh

if [ ! -r "$MODEL" ]; then
    skip "shared test material not found at $SHARED (set PS_SHARED)"; done_
fi
if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
command -v python3 >/dev/null 2>&1 || { skip "python3 missing"; done_; }

T=$(mktemp -d /tmp/ps-test-cli-bench-XXXXXX)
trap 'rm -rf "$T"' EXIT

"$BIN" bench -m "$MODEL" --json -t 1,2 --lengths 40,300 -k 7 > "$T/out.json" 2> "$T/err"; rc=$?
check "bench --json exits 0 ($(cat "$T/err"))" '[ $rc -eq 0 ]'
check "bench --json lines" "python3 - '$T/out.json' <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 9, rows
cold, runs, rss = rows[0:8:2], rows[1:8:2], rows[8]
assert [(r['threads'], r['tokens']) for r in runs] == [(1, 40), (1, 300), (2, 40), (2, 300)]
assert [(r['threads'], r['tokens']) for r in cold] == [(1, 40), (1, 300), (2, 40), (2, 300)]
for c in cold:  # the cold pass of a fresh session, on its own line before its row
    assert c['pass'] == 'cold' and c['k'] == 7 and c['seconds'] > 0 and c['tokens_per_s'] > 0, c
    assert c['clock'] == 'wall', c  # one clock for every row: the wall clock by default
for r in runs:
    assert r['pass'] == 'steady' and r['runs'] == 3, r
    assert r['k'] == 7 and r['tokens_per_s'] > 0 and r['seconds'] > 0, r
    shares = [r[k] for k in ('matmul_share', 'attention_share', 'deltanet_share', 'topk_share',
                             'rest_share')]
    assert all(0 <= s <= 1.0001 for s in shares), r
    assert 0.9 <= sum(shares) <= 1.05, (sum(shares), r)
    assert r['matmul_gflops'] > 0, r
    assert r['clock'] == 'wall', r
assert rss['within_budget'] is True and 0 < rss['peak_rss_mb'] <= rss['budget_mb'], rss
PY"

"$BIN" bench -m "$MODEL" -t 1 --lengths 64 > "$T/table" 2>&1; rc=$?
check "bench table exits 0" '[ $rc -eq 0 ]'
check "the table runs no kernel check (tests/test_model_kernels.c does)" '! grep -q "^check:" "$T/table"'
check "table shows one cold line, one row and the RSS line" '[ $(grep -c "^ *1 *64 *cold: " "$T/table") -eq 1 ] && [ $(grep -c "^ *1 *64 *[0-9.]* *[0-9.]* .*(median of 3, wall time" "$T/table") -eq 1 ] && grep -q "^peak RSS .*(within)" "$T/table"'
check "the header names the one clock of the rows" 'grep -q "^each row: .*; seconds and tok/s on the wall clock" "$T/table"'
"$BIN" bench -m "$MODEL" --json -t 1,2 --lengths 24 --runs 1 --cpu-time > "$T/cpu.json" 2> "$T/err"; rc=$?
check "--cpu-time: every row and cold line on the process's CPU time ($(cat "$T/err"))" "[ \$rc -eq 0 ] && python3 - '$T/cpu.json' <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '\"pass\"' in l]
assert len(rows) == 4 and all(r['clock'] == 'cpu' for r in rows), rows
PY"
"$BIN" bench -m "$MODEL" -t 1 --lengths 24 --runs 1 --cpu-time > "$T/cpu.txt" 2>&1
check "--cpu-time: the header says so" 'grep -q "^each row: .*CPU time, all threads (--cpu-time)" "$T/cpu.txt"'
"$BIN" bench -m "$MODEL" -t 1 --lengths 64 --runs 5 --json > "$T/r5.json" 2>&1; rc=$?
check "--runs 5: the row says 5 runs" '[ $rc -eq 0 ] && grep -q "\"pass\": \"steady\", \"runs\": 5," "$T/r5.json"'
"$BIN" bench -m "$MODEL" --runs 0 > /dev/null 2> "$T/e"; rc=$?
check "--runs 0: exit 2 naming --runs" '[ $rc -eq 2 ] && grep -q -- "--runs" "$T/e"'

"$BIN" bench -m "$MODEL" -t 1 --lengths 5 > "$T/short" 2>&1; rc=$?
check "a 5-token prompt: exit 0 and its run line ($(tail -n 1 "$T/short"))" '[ $rc -eq 0 ] && grep -q "^ *1 *5 " "$T/short"'

# ---- --act: the activations of the matrix products, reported in every --json run line ------
check "default --json lines carry \"act\": \"native\"" "python3 - '$T/out.json' <<'PY'
import json, sys
runs = [r for r in map(json.loads, open(sys.argv[1])) if r.get('pass') == 'steady']
assert runs and all(r['act'] == 'native' for r in runs), runs
PY"
"$BIN" bench -m "$MODEL" --json -t 1 --lengths 40 -k 7 --act f32 > "$T/f32.json" 2> "$T/err"; rc=$?
check "bench --act f32 --json exits 0 (rc $rc: $(cat "$T/err"))" '[ $rc -eq 0 ]'
check "--act f32 --json lines carry \"act\": \"f32\"" "python3 - '$T/f32.json' <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 3, rows
r = rows[1]
assert (r['threads'], r['tokens'], r['k'], r['act']) == (1, 40, 7, 'f32'), r
assert r['tokens_per_s'] > 0 and r['isa'], r
assert 'act' not in rows[2] and rows[2]['within_budget'] is True, rows[2]
PY"
"$BIN" bench -m "$MODEL" -t 1 --lengths 8 --act native --json > "$T/nat.json" 2>/dev/null
check "--act native --json carries \"native\"" 'grep -q "\"act\": \"native\"" "$T/nat.json"'
"$BIN" bench -m "$MODEL" --act bogus > /dev/null 2> "$T/e"; rc=$?
check "--act bogus: exit 2 naming --act" '[ $rc -eq 2 ] && grep -q -- "--act" "$T/e"'
"$BIN" bench -m "$MODEL" --act > /dev/null 2> "$T/e"; rc=$?
check "--act without a value: exit 2 naming --act" '[ $rc -eq 2 ] && grep -q -- "--act" "$T/e"'
check "--help lists --act" '"$BIN" bench --help | grep -q -- "--act native|f32"'
"$BIN" bench -m "$MODEL" -t 1 --lengths 8 --kv-type bf16 --json > "$T/kv.json" 2>/dev/null
check "--kv-type bf16 --json carries \"kv_type\": \"bf16\"" 'grep -q "\"kv_type\": \"bf16\"" "$T/kv.json"'
"$BIN" bench -m "$MODEL" --kv-type q8 > /dev/null 2> "$T/e"; rc=$?
check "--kv-type q8: exit 2 naming --kv-type" '[ $rc -eq 2 ] && grep -q -- "--kv-type wants f32, f16, bf16, bf16-dot or f16-dot" "$T/e"'
# --kv-pairs: after the run line, one line timing the row's cache type against --kv-base's
"$BIN" bench -m "$MODEL" --json -t 1 --lengths 40 --kv-type bf16-dot --kv-pairs 3 --kv-base bf16 > "$T/kp.json" 2> "$T/err"; rc=$?
check "bench --kv-type bf16-dot --kv-pairs 3 --kv-base bf16 --json exits 0 ($(cat "$T/err"))" '[ $rc -eq 0 ]'
check "--kv-pairs: a line of medians and the pairs' median ratio, bf16-dot over bf16, then the budget with both caches" "python3 - '$T/kp.json' <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 4, rows
r = rows[2]
assert (r['tokens'], r['kv_pairs'], r['kv_type'], r['kv_base']) == (40, 3, 'bf16-dot', 'bf16'), r
assert r['type_seconds'] > 0 and r['base_seconds'] > 0, r
assert 0.25 < r['type_over_base'] / (r['type_seconds'] / r['base_seconds']) < 4, r
assert rows[3]['kv_base_cache_mb'] == rows[3]['kv_cache_mb'], rows[3]  # both 2-byte caches
assert rows[3]['within_budget'] is True, rows[3]
PY"
"$BIN" bench -m "$MODEL" --kv-pairs 2 --kv-base q8 > /dev/null 2> "$T/e"; rc=$?
check "--kv-base q8: exit 2 naming --kv-base" '[ $rc -eq 2 ] && grep -q -- "--kv-base wants f32, f16, bf16, bf16-dot or f16-dot" "$T/e"'
# --thread-pairs: after the rows, one line per length timing the first -t count against each
# later one in alternating pairs, then the budget with the second session
"$BIN" bench -m "$MODEL" --json -t 1,2 --lengths 24,40 --thread-pairs 3 > "$T/tp.json" 2> "$T/err"; rc=$?
check "bench -t 1,2 --lengths 24,40 --thread-pairs 3 --json exits 0 ($(cat "$T/err"))" '[ $rc -eq 0 ]'
check "--thread-pairs: a line per length with both medians and the pairs' median speed-up, then the budget with the second session" "python3 - '$T/tp.json' <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
pairs = [r for r in rows if 'thread_pairs' in r]
assert [(r['tokens'], r['threads_a'], r['threads_b']) for r in pairs] == [(24, 1, 2), (40, 1, 2)], rows
for r in pairs:
    assert r['thread_pairs'] == 3 and (r['a_clock'], r['b_clock']) == ('wall', 'wall'), r
    # (the median of ratios is checked exactly on one pair below; with two threads on a busy
    # machine a pair's second run can take 60x its first, so no bound ties it to the medians)
    assert r['a_seconds'] > 0 and r['b_seconds'] > 0 and 0 < r['a_over_b'] < float('inf'), r
    # the vdpbf16ps peak's own speed-up in the same pairs: measured where the CPU has it
    bf16 = ' avx512_bf16' in open('/proc/cpuinfo').read()
    assert (r['peak_a_over_b'] > 0) == bf16, (bf16, r)
last = rows[-1]
assert last['thread_pairs_session_mb'] == last['kv_cache_mb'] + last['logits_mb'], last
assert last['within_budget'] is True, last
PY"
# one pair: its ratio is the two seconds' quotient, the first count's over the later one's
"$BIN" bench -m "$MODEL" --json -t 1,2 --lengths 24 --runs 1 --thread-pairs 1 > "$T/tp1.json" 2> "$T/err"
check "--thread-pairs 1: a_over_b is a_seconds / b_seconds" "python3 - '$T/tp1.json' <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if 'thread_pairs' in l][0]
assert abs(r['a_over_b'] / (r['a_seconds'] / r['b_seconds']) - 1) < 1e-3, r
PY"
"$BIN" bench -m "$MODEL" -t 1,2 --lengths 24 --runs 1 --thread-pairs 1 > "$T/tp.txt" 2> "$T/err"
check "--thread-pairs in the table: \"2 over 1 thread: N.NNx\" and the second session in the budget" 'grep -Eq "^ +2 +24  2 over 1 thread: [0-9]+\.[0-9]{2}x \(" "$T/tp.txt" && grep -q -- "--thread-pairs'"'"' second session" "$T/tp.txt"'
"$BIN" bench -m "$MODEL" -t 2 --thread-pairs 2 > /dev/null 2> "$T/e"; rc=$?
check "--thread-pairs with one thread count: exit 2 naming -t" '[ $rc -eq 2 ] && grep -q -- "--thread-pairs needs two or more thread counts" "$T/e"'
# --cache-pairs: after the run line, one line against fresh caches and one against a warm, full
# cache (each "on" run a prompt it has not seen, evicting the one before), then the RSS line
# counting the caches held
"$BIN" bench -m "$MODEL" --json -t 1 --lengths 64 --cache-pairs 3 > "$T/cp.json" 2> "$T/err"; rc=$?
check "bench --cache-pairs 3 --json exits 0 ($(cat "$T/err"))" '[ $rc -eq 0 ]'
check "--cache-pairs: a fresh and a warm line, then the RSS line" "python3 - '$T/cp.json' <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 5, rows
fresh, warm, rss = rows[2], rows[3], rows[4]
for r, kind in ((fresh, 'fresh'), (warm, 'warm')):
    assert r['cache'] == kind and r['cache_pairs'] == 3 and r['tokens'] == 64, r
    assert r['off_seconds'] > 0 and r['on_seconds'] > 0, r
    # the ratio is printed to 4 decimals, the seconds to 9: the tolerance is what those digits allow
    q = r['on_seconds'] / r['off_seconds']
    tol = 5e-5 + q * (5e-10 / r['on_seconds'] + 5e-10 / r['off_seconds']) + 1e-12
    assert abs(r['on_over_off'] - q) <= tol, (r, q, tol)
assert rss['cache_mb'] > 0 and rss['within_budget'] is True, rss
PY"
"$BIN" bench -m "$MODEL" -t 1 --lengths 32 --cache-pairs 1 > "$T/cpt" 2>&1
check "--cache-pairs table: fresh and warm lines" 'grep -q "prefix cache (fresh) on / off" "$T/cpt" && grep -q "prefix cache (warm) on / off" "$T/cpt"'
# a generated qwen35 hybrid (3 Gated DeltaNet layers + 1 attention): the delta-net share is reported and the shares still add up
if "$BIN" gen-model -o "$T/hy.gguf" --preset qwen35-tiny --type q8_0 > /dev/null 2>&1; then
    "$BIN" bench -m "$T/hy.gguf" --json -t 1,2 --lengths 300 > "$T/hy.json" 2> "$T/err"; rc=$?
    check "bench on qwen35 exits 0 (rc $rc: $(cat "$T/err"))" '[ $rc -eq 0 ]'
    check "qwen35: deltanet share > 0, shares sum to ~1" "python3 - '$T/hy.json' <<'PY'
import json, sys
runs = [r for r in map(json.loads, open(sys.argv[1])) if r.get('pass') == 'steady']
assert len(runs) == 2, runs
for r in runs:
    keys = ('matmul_share', 'attention_share', 'deltanet_share', 'topk_share', 'rest_share')
    assert r['deltanet_share'] > 0 and 0.9 <= sum(r[k] for k in keys) <= 1.05, r
PY"
    "$BIN" bench -m "$T/hy.gguf" -t 1 --lengths 64 > "$T/hyt" 2>&1
    check "qwen35 table has its run line" 'grep -q "^ *1 *64 " "$T/hyt"'
else
    bad "gen-model qwen35-tiny failed"
fi
# a generated BF16 model: the banner names the activations and the run goes through either way
# (the matmul against its reference with the same activations: tests/test_model_kernels.c)
if "$BIN" gen-model -o "$T/bf16.gguf" --arch qwen3 --type bf16 > /dev/null 2>&1; then
    for a in native f32; do
        "$BIN" bench -m "$T/bf16.gguf" -t 1 --lengths 16 --act $a > "$T/b_$a" 2>&1; rc=$?
        check "BF16 model, --act $a: exit 0, banner and run line (rc $rc: $(head -c 300 "$T/b_$a"))" \
            '[ $rc -eq 0 ] && grep -q "bf16 weights.*activations $a" "$T/b_$a" && grep -q "^ *1 *16 " "$T/b_$a"'
    done
else
    bad "gen-model --type bf16 failed"
fi
# a generated model with experts (Q8_0): the routing and expert shares are there, in [0, 1],
# both > 0, the experts' not above the matmul share
if "$BIN" gen-model -o "$T/moe.gguf" --preset qwen3moe-tiny --type q8_0 > /dev/null 2>&1; then
    "$BIN" bench -m "$T/moe.gguf" --json -t 1 --lengths 300 > "$T/moe.json" 2> "$T/moe.err"; rc=$?
    check "experts: bench --json exits 0 ($(cat "$T/moe.err"))" '[ $rc -eq 0 ]'
    check "experts: route and experts shares" "python3 - '$T/moe.json' <<'PY'
import json, sys
r = [r for r in map(json.loads, open(sys.argv[1])) if r.get('pass') == 'steady'][0]
assert 0 < r['route_share'] <= 1 and 0 < r['experts_share'] <= r['matmul_share'] + 1e-3, r
PY"
    "$BIN" bench -m "$T/moe.gguf" -t 1 --lengths 16 > "$T/moe.table" 2>&1
    check "experts: the table has the route and experts columns" 'grep -q "route experts" "$T/moe.table" && grep -q "^experts: 8 per layer, 2 per token, FFN 32" "$T/moe.table"'
    # Q8_0 on the integer kernels: the vpdpbusd int8 peak measured beside the row where the CPU
    # has AVX-512 VNNI (its share > 0), else none; no BF16 peak on such a model
    check "Q8_0: the int8 peak and its share where the CPU has VNNI" "python3 - '$T/moe.json' <<'PY'
import json, sys
r = [r for r in map(json.loads, open(sys.argv[1])) if r.get('pass') == 'steady'][0]
vnni = ' avx512_vnni' in open('/proc/cpuinfo').read()
assert (r['i8_peak_gops'] > 0 and r['i8_peak_share'] > 0) == vnni, (vnni, r)
assert r['bf16_peak_gflops'] == 0, r
PY"
    if grep -q ' avx512_vnni' /proc/cpuinfo; then
        check "Q8_0: the table's int8 peak line" 'grep -q "q8_0 matmuls .* GOP/s = .*% of the vpdpbusd int8 peak" "$T/moe.table"'
    else
        cpu_lacks "AVX-512 VNNI: no int8 peak line"
    fi
else
    bad "gen-model --preset qwen3moe-tiny failed"
fi
"$BIN" bench > /dev/null 2>&1; rc=$?
check "no model: exit 2" '[ $rc -eq 2 ]'
"$BIN" bench -m "$MODEL" --lengths 0 > /dev/null 2>&1; rc=$?
check "length 0: exit 2" '[ $rc -eq 2 ]'
"$BIN" bench -m "$MODEL" -t x > /dev/null 2>&1; rc=$?
check "bad threads: exit 2" '[ $rc -eq 2 ]'
"$BIN" bench -m "$T/missing.gguf" > /dev/null 2>&1; rc=$?
check "missing file: exit 1" '[ $rc -eq 1 ]'
"$BIN" bench --help | grep -q "^usage: promptscore bench"; rc=$?
check "--help" '[ $rc -eq 0 ]'
done_
