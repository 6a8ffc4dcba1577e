#!/bin/sh
# tests/test_corrupt_models.sh — the corrupted-model walk: small models of several families
# written by `promptscore gen-model` (llama, qwen3moe, gemma2, qwen35, and llama with the GPT-2
# BPE vocabulary of ../shared), each corrupted in fixed and seeded random ways by
# tests/corrupt_models.py and scored on a short prompt under a timeout. Every run must end by
# itself with status 0, 1 or 2 (no signal, no hang, no sanitizer report); a norm eps or special
# id outside its range must never load, and the rewritten keys (eps, special ids, head counts,
# context length, rope base, expert counts) are refused with status 1 naming the key
# (docs/models.md, "What a model must satisfy").
# PS_CORRUPT_SEED (default 47) and PS_CORRUPT_COPIES (random copies per model, default 20)
# choose the walk; PS_CORRUPT_KEEP=1 keeps the failing copies. Under PS_SANITIZED the timeout
# grows. Prints "corrupt_models: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
BIN="$BUILD/promptscore"
NAME=corrupt_models; FILE=test_corrupt_models.sh
. tests/check.sh

if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
PY=/usr/bin/python3
[ -x "$PY" ] || { skip "no $PY"; done_; }
T=$(mktemp -d /tmp/ps-test-corrupt-XXXXXX)
[ "${PS_CORRUPT_KEEP:-0}" = 1 ] || trap 'rm -rf "$T"' EXIT
TIMEOUT=20
[ -n "${PS_SANITIZED:-}" ] && TIMEOUT=120

MODELS=""
for preset in tiny qwen3moe-tiny gemma2-tiny qwen35-tiny; do
    "$BIN" gen-model --preset "$preset" -o "$T/$preset.gguf" >/dev/null 2>"$T/err"
    rc=$?
    check "gen-model --preset $preset: exit 0 (got $rc: $(cat "$T/err"))" '[ $rc -eq 0 ]'
    [ $rc -eq 0 ] && MODELS="$MODELS $T/$preset.gguf"
done
GPT2=../shared/vocab/ggml-vocab-gpt-2.gguf
if [ -f "$GPT2" ]; then
    # narrow, so that the 50,257-token embedding stays small
    "$BIN" gen-model --preset tiny --vocab "$GPT2" --tied --n-embd 16 --n-head 1 \
        --n-head-kv 1 --head-dim 16 --n-ff 32 -o "$T/bpe.gguf" >/dev/null 2>"$T/err"
    rc=$?
    check "gen-model with the GPT-2 vocabulary: exit 0 (got $rc: $(cat "$T/err"))" '[ $rc -eq 0 ]'
    [ $rc -eq 0 ] && MODELS="$MODELS $T/bpe.gguf"
else
    skip "no $GPT2: no BPE vocabulary in the walk"
fi

keep=""
[ "${PS_CORRUPT_KEEP:-0}" = 1 ] && keep=--keep
# shellcheck disable=SC2086
"$PY" tests/corrupt_models.py --bin "$BIN" --seed "${PS_CORRUPT_SEED:-47}" \
    --copies "${PS_CORRUPT_COPIES:-20}" --timeout "$TIMEOUT" --dir "$T" $keep $MODELS \
    >"$T/walk" 2>"$T/walk.err"
rc=$?
check "corrupt_models.py ran (exit $rc: $(tail -3 "$T/walk.err"))" '[ $rc -eq 0 ]'
n=0
while IFS= read -r line; do
    case "$line" in
        ok\ *) ok; n=$((n + 1)) ;;
        FAIL\ *) bad "${line#FAIL }"; n=$((n + 1)) ;;
        NOTE\ *) echo "$line" ;;
    esac
done <"$T/walk"
check "the walk scored copies (got $n)" '[ $n -gt 100 ]'
[ "${PS_CORRUPT_KEEP:-0}" = 1 ] && echo "NOTE copies and models kept in $T"
done_
