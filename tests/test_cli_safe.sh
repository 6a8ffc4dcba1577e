#!/bin/sh
# tests/test_cli_safe.sh — `promptscore score` under hostile input and signals, on
# ../shared/models/stories260K.gguf ($PS_SHARED overrides):
#   - a 26 M-id line is refused by the pre-scanner at the first id past the context, quickly
#     and at bounded memory (peak RSS from /usr/bin/time), while the lines around it are scored;
#     a line past --max-line-bytes and one nested too deep are refused the same way;
#   - a UTF-8 BOM at the start of the input is not part of line 1;
#   - a line that is not JSON echoes its id when the id was readable before the error;
#   - SIGINT / SIGTERM mid-run: the line being written is finished, the summary printed, the
#     exit status is 130 / 143, and every output line parses (a file and a pipe);
#   - -m naming a FIFO, a directory or a device is refused at once (score, serve, tokenize,
#     perplexity), and SIGTERM stops `serve` while it loads a model.
# Prints "cli_safe: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SHARED=${PS_SHARED:-../shared}
MODEL="$SHARED/models/stories260K.gguf"
BIN="$BUILD/promptscore"
NAME=cli_safe; FILE=test_cli_safe.sh
. tests/check.sh

if [ ! -r "$MODEL" ]; then
    skip "shared test material not found at $SHARED (set PS_SHARED)"; done_
fi
if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
command -v python3 >/dev/null 2>&1 || { skip "python3 missing"; done_; }

T=$(mktemp -d /tmp/ps-test-cli-safe-XXXXXX)
trap 'rm -rf "$T"' EXIT

# ---- a 26 M-id line between two good lines ------------------------------------------------
python3 - "$T/big.jsonl" <<'EOF'
import sys
with open(sys.argv[1], 'w') as f:
    f.write('{"id": "a", "prompt": [1, 403, 407]}\n')
    f.write('{"id": "big", "prompt": [' + '403,' * (26 * 1000 * 1000) + '403]}\n')
    f.write('{"id": "b", "prompt": [1, 403]}\n')
EOF
if [ -x /usr/bin/time ]; then
    start=$(date +%s)
    /usr/bin/time -f '%M' -o "$T/rss" "$BIN" score -m "$MODEL" -i "$T/big.jsonl" -o "$T/big.out" 2>"$T/big.err"; rc=$?
    secs=$(( $(date +%s) - start ))
    rss=$(tail -n 1 "$T/rss")
    check "26 M-id line: exit 0 (rc $rc)" '[ $rc -eq 0 ]'
    check "26 M-id line refused as context_length_exceeded, its id echoed" \
        'sed -n 2p "$T/big.out" | grep -q "^{\"id\":\"big\",\"error\".*more than 2048 tokens.*context_length_exceeded"'
    check "the lines around it are scored" \
        'sed -n 1p "$T/big.out" | grep -q "^{\"id\":\"a\",\"logprobs\"" && sed -n 3p "$T/big.out" | grep -q "^{\"id\":\"b\",\"logprobs\""'
    check "26 M-id line: peak RSS under 64 MB (got ${rss} KB)" '[ "$rss" -lt 65536 ]'
    check "26 M-id line: refused within 5 s (took ${secs} s)" '[ "$secs" -le 5 ]'
else
    skip "/usr/bin/time missing: the 26 M-id line's memory is not measured"
fi
rm -f "$T/big.jsonl"

# ---- --max-line-bytes, depth -------------------------------------------------------------
python3 - "$T/lim.jsonl" <<'EOF'
import sys
with open(sys.argv[1], 'w') as f:
    f.write('{"id": "long", "prompt": "' + 'x' * 5000 + '"}\n')
    f.write('{"id": "deep", "prompt": [1], "x": ' + '[' * 65 + ']' * 65 + '}\n')
    f.write('{"id": "ok", "x": ' + '[' * 63 + ']' * 63 + ', "prompt": [1, 403]}\n')
EOF
"$BIN" score -m "$MODEL" -i "$T/lim.jsonl" --max-line-bytes 4096 -o "$T/lim.out" 2>"$T/lim.err"; rc=$?
check "over --max-line-bytes: line_too_long with its id (rc $rc)" \
    'sed -n 1p "$T/lim.out" | grep -q "^{\"id\":\"long\",\"error\".*longer than 4096 bytes.*line_too_long"'
check "nested deeper than 64: too_deep with its id" \
    'sed -n 2p "$T/lim.out" | grep -q "^{\"id\":\"deep\",\"error\".*deeper than 64.*too_deep"'
check "63 levels and a short line are scored" 'sed -n 3p "$T/lim.out" | grep -q "^{\"id\":\"ok\",\"logprobs\""'
"$BIN" score -m "$MODEL" -i "$T/lim.jsonl" --max-line-bytes 10 -o /dev/null 2>/dev/null; rc=$?
check "--max-line-bytes below 64 is refused (rc $rc)" '[ $rc -eq 2 ]'

# ---- BOM, broken lines echo their id -----------------------------------------------------
printf '\357\273\277{"id": 1, "prompt": [1, 403]}\n{"id": 2, "prompt": [1, 403]}\n' > "$T/bom.jsonl"
"$BIN" score -m "$MODEL" -i "$T/bom.jsonl" -o "$T/bom.out" 2>/dev/null
check "a leading BOM is not part of line 1" \
    'sed -n 1p "$T/bom.out" | grep -q "^{\"id\":1,\"logprobs\"" && [ "$(sed -n 1p "$T/bom.out" | cut -c 8-)" = "$(sed -n 2p "$T/bom.out" | cut -c 8-)" ]'
printf '{"id": 2, "prompt": [1, 403]}\n\357\273\277{"id": 3, "prompt": [1]}\n' > "$T/bom2.jsonl"
"$BIN" score -m "$MODEL" -i "$T/bom2.jsonl" -o "$T/bom2.out" 2>/dev/null
check "a BOM inside the file is still an error" 'sed -n 2p "$T/bom2.out" | grep -q "\"error\""'
cat > "$T/broken.jsonl" <<'EOF'
{"id": "q-17", "prompt": [1, 403,, 407]}
{"id": {"k": [1, "]"]}, "prompt": "Once upon
{"prompt": [1, 2], "id": [1, 2
not json at all
EOF
"$BIN" score -m "$MODEL" -i "$T/broken.jsonl" -o "$T/broken.out" 2>/dev/null
check "a broken line echoes its readable id" \
    'sed -n 1p "$T/broken.out" | grep -q "^{\"id\":\"q-17\",\"error\":{\"message\":\"line 1: invalid JSON"'
check "a broken line echoes a readable object id" \
    'sed -n 2p "$T/broken.out" | grep -q "^{\"id\":{\"k\": \[1, \"\]\"\]},\"error\""'
check "an id cut by the error, or none: null" \
    'sed -n 3p "$T/broken.out" | grep -q "^{\"id\":null,\"error\"" && sed -n 4p "$T/broken.out" | grep -q "^{\"id\":null,\"error\""'

# ---- -m naming what is not a regular file: refused at once, for every subcommand ---------
mkfifo "$T/fifo"
echo "Once upon a time" > "$T/text.txt"
for what in fifo dir dev; do
    case $what in fifo) m="$T/fifo"; word="FIFO (named pipe)" ;; dir) m="$T"; word="directory" ;; dev) m=/dev/zero; word="character device" ;; esac
    for sub in score tokenize perplexity serve bench; do
        case $sub in
            score) set -- -i "$T/text.txt" ;;
            tokenize) set -- ;;
            perplexity) set -- -f "$T/text.txt" ;;
            serve) set -- --port 0 ;;
            bench) set -- ;;
        esac
        echo "x" | timeout -s KILL 10 "$BIN" $sub -m "$m" "$@" >/dev/null 2>"$T/m.err"; rc=$?
        check "$sub -m $what: refused at once, naming it (rc $rc: $(head -c 200 "$T/m.err"))" \
            '[ $rc -eq 1 ] && grep -q "$word, not a regular file" "$T/m.err"'
    done
done

# ---- SIGTERM stops serve while it loads (a -hf download that stalls) --------------------
cat > "$T/stall.py" <<'EOF'
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
conns = []
end = time.time() + 40
s.settimeout(0.5)
while time.time() < end:
    try:
        c, _ = s.accept(); conns.append(c)  # read nothing, answer nothing
    except socket.timeout:
        pass
EOF
python3 "$T/stall.py" > "$T/stall.port" 2>/dev/null &
spid=$!
for i in 1 2 3 4 5 6 7 8 9 10; do [ -s "$T/stall.port" ] && break; sleep 0.2; done
sport=$(head -n 1 "$T/stall.port")
if [ -z "$sport" ]; then
    skip "could not start the stalling server: serve's load is not interrupted"
else
    PS_CACHE="$T/cache" HF_ENDPOINT="http://127.0.0.1:$sport" "$BIN" serve --port 0 \
        -hf org/stall:model.gguf >/dev/null 2>"$T/stall.err" &
    vpid=$!
    sleep 1.5
    kill -TERM "$vpid" 2>/dev/null
    t=0
    while kill -0 "$vpid" 2>/dev/null && [ $t -lt 50 ]; do sleep 0.1; t=$((t + 1)); done
    if kill -0 "$vpid" 2>/dev/null; then
        bad "serve still running 5 s after SIGTERM during a stalled -hf load"
        kill -KILL "$vpid" 2>/dev/null
    else
        ok
    fi
    wait "$vpid" 2>/dev/null
fi
kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null

# ---- SIGINT / SIGTERM mid-run: whole lines, summary, 130 / 143 --------------------------
python3 tests/kill_score.py "$BIN" "$MODEL" "$T" > "$T/kill.log" 2>&1
n_ok=$(grep -c '^ok ' "$T/kill.log")
grep '^FAIL ' "$T/kill.log" | while read -r l; do echo "FAIL $FILE: $l"; done
for i in $(seq "$n_ok"); do ok; done
n_bad=$(grep -c '^FAIL ' "$T/kill.log")
for i in $(seq "$n_bad"); do fail=$((fail + 1)); done
check "the kill cases ran (5 expected, got $((n_ok + n_bad)))" '[ $((n_ok + n_bad)) -eq 5 ]'

done_
