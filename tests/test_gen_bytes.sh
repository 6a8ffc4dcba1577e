#!/bin/sh
# tests/test_gen_bytes.sh — `promptscore gen-model` writes the same bytes as it always has: the
# sha256 of each small preset of every family (f32 and the q4_k_m mix), the merged-expert
# layouts, qwen2 / qwen3 / gemma by --arch, and the optional model-wide tensors, against the
# sums of files written before gen-model took its tensors from the loader's tables
# (src/model/model_tensors.c). A change of tensor order, shape, type, values or metadata fails
# here; a deliberate change to the files updates the sums below.
# Prints "gen_bytes: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
BIN="$BUILD/promptscore"
NAME=gen_bytes; FILE=test_gen_bytes.sh
. tests/check.sh

if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
command -v sha256sum >/dev/null 2>&1 || { skip "no sha256sum"; done_; }
T=$(mktemp -d /tmp/ps-test-gen-bytes-XXXXXX)
trap 'rm -rf "$T"' EXIT

# sum, name, gen-model options
while read -r sum name opts; do
    [ -n "$sum" ] || continue
    "$BIN" gen-model -o "$T/$name.gguf" $opts >/dev/null 2>"$T/err"
    rc=$?
    check "$name: exit 0 (got $rc: $(cat "$T/err"))" '[ $rc -eq 0 ]'
    got=$(sha256sum "$T/$name.gguf" 2>/dev/null | cut -d' ' -f1)
    check "$name ($opts): sha256 $got, expected $sum" '[ "$got" = "$sum" ]'
    rm -f "$T/$name.gguf"
done <<'SUMS'
34dfcb0fb7acdd2985e6fc6db95c3894b3e4675c35f8b7d1c5e752409fe67cba tiny --preset tiny
e3d3c8f0fc3d1f2595bef0537d1253fb17341c321e6cc6c712af4705b9d35957 tiny.q4_k_m --preset tiny --type q4_k_m
419db0493c4c3ca9657bdb3ddb99492714102ec24c00fdc7e7998c399f7f5023 qwen3moe-tiny --preset qwen3moe-tiny
41c4087907a4866a5ba0cdb72f40094d336db3358cf478cac4ad5e9087b8fd20 qwen3moe-tiny.q4_k_m --preset qwen3moe-tiny --type q4_k_m
0a9ec71a3397ea815c03e1dcdf013e8d4681407746e910d7e48e0318d7daa2ab mixtral-tiny --preset mixtral-tiny
018c999a27044d42bd2e7dd45290846fb43fa17700bfce765bda663f18672121 mixtral-tiny.q4_k_m --preset mixtral-tiny --type q4_k_m
80e2799ca6c98fe55037b14cab5d0bc1eea72b52fc9e07ad82b03abaaf60bd15 qwen35-tiny --preset qwen35-tiny
b057950dbf9a2f32af5f503ec9a6216ad8f8c2d96e104ad596c519948a20d291 qwen35-tiny.q4_k_m --preset qwen35-tiny --type q4_k_m
bae60aab3028e67e7f09a554b007a1c6c982b37008c4a710b60c5e4328394652 qwen35moe-tiny --preset qwen35moe-tiny
2eab558e827efcfeec3db06bb75098d4ef4d2e8b90769e6f9a4c42c63eaac823 qwen35moe-tiny.q4_k_m --preset qwen35moe-tiny --type q4_k_m
a8475a56f3734d9be783bb0295eb3cf846aaf89e2f6e85a3ca6ef163e97d2044 gpt-oss-tiny --preset gpt-oss-tiny
192fcffd7431f1de17f6773db57cf259ac717b87c586835542e7540e5dbfeace gpt-oss-tiny.q4_k_m --preset gpt-oss-tiny --type q4_k_m
5b6e69f4b2154ab1039f29b776bf92f9b7430f46eff3505feef4cefee35d7324 phi3-tiny --preset phi3-tiny
431b062f17720ef5b1c6f5858f305250dfd9d7f5a74590b330553d3a485e32f4 phi3-tiny.q4_k_m --preset phi3-tiny --type q4_k_m
4a9c92ec41c86ffcba26a9cba94b05934c95b3e4e11057fefce2511b35f5fc87 olmo2-tiny --preset olmo2-tiny
972249ff7dcfd28d4f9d2b3eec11e09eab783eb4add62256a82df5340d382c84 olmo2-tiny.q4_k_m --preset olmo2-tiny --type q4_k_m
2fa1dbec55e89e8dd269301a5b759e76035baa82ae0cf96c33e334e541ba1a58 gemma2-tiny --preset gemma2-tiny
1cb4d3cb23e57441be55f53ad6037194e2734113952541211ba4527599bd0b4f gemma2-tiny.q4_k_m --preset gemma2-tiny --type q4_k_m
7204a3a950ebcf430f5f4b2a7e18c2b9973e71c6ee6b655348afe7df2ce7ad2b gemma3-tiny --preset gemma3-tiny
6b337bb407ec5d6d58359c5a85614fa9e2c09e20e44bacd2bf73f97c5630e9f7 gemma3-tiny.q4_k_m --preset gemma3-tiny --type q4_k_m
ba4acff05993078a8ae317abc0014194a00b1a4355edb11892fa7a7f17948601 qwen3moe-tiny.merged --preset qwen3moe-tiny --merged-gate-up
41469d2bc1e683337941645aab4ee90b32e2fad7829973ab30bf9d3281de295b qwen35moe-tiny.merged --preset qwen35moe-tiny --merged-gate-up
60291e0a3ca0603c0832f7c89f27cc877d889b76b785117baa35b497dbd19ef8 gpt-oss-tiny.merged --preset gpt-oss-tiny --merged-gate-up
d133199fe713516027b24cc4e2a781f677feb3c28366b49a7f2906c43bdb0c03 qwen2 --arch qwen2
51aa07cc48a9dd49aba9bfbed90c8e4f867ca9d32cc5a82343cdc4f027868ef1 qwen3 --arch qwen3
90e50c51861c1e9d3ee705484d8444ae0b9a7d5d86d8b95c4a38e09d65d478db gemma --arch gemma
76a52d0188c2122dffc1cd646526d09857c1fcd0f9ffbf1c69dc3d4924177fe8 tiny.ropefreqs-outbias --preset tiny --rope-freqs --output-bias
77002b92d26bf7760ad3e33a0e210dc7f7d6e3e9a5f0c9232988595629ea6f73 phi3-tiny.longrope --preset phi3-tiny --n-ctx-orig 128
SUMS
done_
