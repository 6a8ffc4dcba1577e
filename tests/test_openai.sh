#!/bin/sh
# test_openai.sh — runs tests/openai/test.mjs (the official `openai` npm package) against a real
# `promptscore serve` on 127.0.0.1 with stories260K. Skips, saying why, when the shared models,
# the binary, node or tests/openai/node_modules (run `npm ci` there) are missing.
BUILD=${BUILD:-build}
SHARED=${PS_SHARED:-../shared}
MODEL="$SHARED/models/stories260K.gguf"
cd "$(dirname "$0")/.." || exit 1
NAME=openai; FILE=test_openai.sh
. tests/check.sh
[ -r "$MODEL" ] || { skip "no $MODEL (set PS_SHARED)"; done_; }
[ -x "$BUILD/promptscore" ] || { skip "$BUILD/promptscore is not built"; done_; }
command -v node >/dev/null 2>&1 || { skip "node is not installed"; done_; }
[ -d tests/openai/node_modules/openai ] || { skip "tests/openai/node_modules is missing: run 'npm ci' in tests/openai"; done_; }

log="$BUILD/tests/openai-server-$$.log"
mkdir -p "$BUILD/tests"
"$BUILD/promptscore" serve -m "$MODEL" --port 0 -t 1 --name stories 2>"$log" &
pid=$!
port=""
i=0
while [ $i -lt 200 ]; do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log" | head -n 1)
    [ -n "$port" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05; i=$((i + 1))
done
if [ -z "$port" ]; then
    bad "the server did not start:"; cat "$log"; kill $pid 2>/dev/null; done_
fi
PS_BASE_URL="http://127.0.0.1:$port/v1" PS_MODEL=stories node tests/openai/test.mjs
rc=$?
kill -TERM $pid; wait $pid; src=$?
if [ $src -ne 0 ]; then bad "the server exited $src after SIGTERM"; done_; fi
rm -f "$log"
exit $rc
