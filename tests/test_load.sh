#!/bin/sh
# tests/test_load.sh — the load client of tests/load/load.c ($BUILD/load/load) against a real
# `promptscore serve` on 127.0.0.1 with ../shared/models/stories260K.gguf ($PS_SHARED
# overrides): 4 clients x 50 lm-eval-shaped requests all answered 200 with the same answer
# (exit 0, "0 errors, 0 answers differ"); bad arguments exit 2; a server that is gone exits 1.
# Prints "load: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SHARED=${PS_SHARED:-../shared}
MODEL="$SHARED/models/stories260K.gguf"
BIN="$BUILD/promptscore"
LOAD="$BUILD/load/load"
NAME=load; FILE=test_load.sh
. tests/check.sh

[ -r "$MODEL" ] || { skip "shared test material not found at $SHARED (set PS_SHARED)"; done_; }
[ -x "$BIN" ] || { bad "no binary $BIN (make first)"; done_; }
[ -x "$LOAD" ] || { bad "no load client $LOAD (make test builds it)"; done_; }

T=$(mktemp -d /tmp/ps-test-load-XXXXXX)
"$BIN" serve -m "$MODEL" --port 0 -t 1 -q 2>"$T/log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$T"' EXIT
port=""
i=0
while [ $i -lt 400 ]; do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$T/log" | head -n 1)
    [ -n "$port" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05; i=$((i + 1))
done
[ -n "$port" ] || { bad "the server did not start: $(cat "$T/log")"; done_; }
printf '%s' '{"prompt": [[1, 403, 407, 261, 378, 411, 285]], "echo": true, "max_tokens": 1, "logprobs": 1, "temperature": 0}' >"$T/body.json"
URL="http://127.0.0.1:$port/v1/completions"
"$LOAD" "$URL" 4 50 "$T/body.json" >"$T/out" 2>"$T/err"; rc=$?
check "4 x 50 requests: exit 0, all 200, one answer (rc $rc: $(cat "$T/out" "$T/err"))" \
    '[ $rc -eq 0 ] && grep -q "^200 requests by 4 clients in .*; 0 errors, 0 answers differ$" "$T/out"'
"$LOAD" "$URL" 0 5 "$T/body.json" >/dev/null 2>&1; rc=$?
check "0 clients: exit 2 (got $rc)" '[ $rc -eq 2 ]'
"$LOAD" "$URL" 1 1 "$T/missing.json" >/dev/null 2>&1; rc=$?
check "missing body file: exit 2 (got $rc)" '[ $rc -eq 2 ]'
printf '%s' '{"prompt": [[1, 99999]], "echo": true, "max_tokens": 0, "logprobs": 1}' >"$T/bad.json"
"$LOAD" "$URL" 1 1 "$T/bad.json" >/dev/null 2>&1; rc=$?
check "a request the server refuses (400): exit 1 (got $rc)" '[ $rc -eq 1 ]'
kill $pid; wait $pid; src=$?
check "the server exits 0 on SIGTERM (got $src)" '[ $src -eq 0 ]'
"$LOAD" "$URL" 1 1 "$T/body.json" >/dev/null 2>&1; rc=$?
check "no server: exit 1 (got $rc)" '[ $rc -eq 1 ]'
done_
