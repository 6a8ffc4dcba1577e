#!/bin/sh
# tools/demo.sh — `make demo`: score the sample prompts (examples/prompts.jsonl) with a model
# this script finds or makes, and print the per-prompt summary, then the first prompt token by
# token. Where the model comes from, in order, said on the first line:
#   1. ../shared/models/stories260K.gguf ($PS_SHARED overrides ../shared): a small trained model;
#   2. the download cache, or Hugging Face when online: -hf ggml-org/models:tinyllamas/stories260K.gguf
#      (the same file, 1.2 MB, cached in $PS_CACHE or ~/.cache/promptscore);
#   3. offline and without either: a model with random weights written by gen-model
#      (build/demo-random.gguf). Its scores show the plumbing works; they mean nothing.
BUILD=${BUILD:-build}
BIN="$BUILD/promptscore"
SHARED=${PS_SHARED:-../shared}
IN=examples/prompts.jsonl
cd "$(dirname "$0")/.." || exit 1
[ -x "$BIN" ] || { echo "demo: $BIN is missing (make first)" >&2; exit 1; }
HF=ggml-org/models:tinyllamas/stories260K.gguf
if [ -r "$SHARED/models/stories260K.gguf" ]; then
    echo "demo: model $SHARED/models/stories260K.gguf (trained on TinyStories, from ../shared)"
    set -- -m "$SHARED/models/stories260K.gguf"
elif "$BIN" tokenize -hf "$HF" </dev/null >/dev/null 2>"$BUILD/demo-hf.log"; then
    echo "demo: model -hf $HF (trained on TinyStories; downloaded once, then cached)"
    set -- -hf "$HF"
else
    echo "demo: no ../shared and no network ($(tail -n 1 "$BUILD/demo-hf.log")):"
    echo "demo: model $BUILD/demo-random.gguf, RANDOM weights made by gen-model; its scores mean nothing"
    "$BIN" gen-model -o "$BUILD/demo-random.gguf" 2>/dev/null || exit 1
    set -- -m "$BUILD/demo-random.gguf"
fi
echo "demo: promptscore score $* -i $IN --format summary"
"$BIN" score "$@" -i "$IN" --format summary 2>/dev/null || exit 1
echo "demo: the first prompt, token by token (--format table; JSON Lines is the default format):"
head -n 1 "$IN" | "$BIN" score "$@" --format table -k 3 2>/dev/null || exit 1
