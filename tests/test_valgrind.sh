#!/bin/sh
# test_valgrind.sh — memcheck on real runs of the gcc build: `promptscore score` on stories260K
# (text and id prompts, a bad line, 2 threads, chunk 8) and the fault-injection walks of
# test_faults (every allocation-failure path of load, score, JSONL and the HTTP server).
# valgrind --error-exitcode=1 --leak-check=full: any invalid read/write, use of uninitialised
# memory or definite/possible leak fails the case. Skips when valgrind or ../shared is absent.
# valgrind does not emulate AVX-512, and reports that CPU to the program, so the AVX2 or
# scalar kernels run here (the sanitizer build covers every ISA).
BUILD=${BUILD:-build}
SHARED=${PS_SHARED:-../shared}
cd "$(dirname "$0")/.." || exit 1
NAME=valgrind; FILE=test_valgrind.sh
. tests/check.sh

# valgrind checks the plain build; tests/run.sh does not run this script under `make check`
# (ASan's shadow memory and valgrind do not mix)
if [ -n "$PS_SANITIZED" ]; then
    echo "NOTE: the sanitizer build is not run under valgrind (make test runs this)"; done_
fi

if ! command -v valgrind >/dev/null 2>&1; then
    skip "valgrind is not installed"; done_
fi
if [ ! -r "$SHARED/models/stories260K.gguf" ]; then
    skip "shared test material not found at $SHARED (set PS_SHARED)"; done_
fi
bin="$BUILD/promptscore"
[ -x "$bin" ] || { bad "no binary at $bin (build first)"; done_; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
VG="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,possible --show-leak-kinds=definite,possible"  # add --track-origins=yes to find where an uninitialised value came from

# 1. a short scoring run through the CLI
cat >"$tmp/in.jsonl" <<'EOF'
{"id": "lily", "prompt": "Once upon a time, there was a little girl named Lily.", "logprobs": 3}
{"id": [1, {"x": null}], "prompt": [1, 403, 407, 261, 378], "logprobs": 0}
{"id": "bad", "prompt": [1, 999999]}
not json
{"id": "long", "prompt": "The dog ran to the park and played with a red ball. It was a sunny day and the sky was blue."}
EOF
$VG "$bin" score -m "$SHARED/models/stories260K.gguf" -i "$tmp/in.jsonl" -o "$tmp/out.jsonl" \
    -t 2 --chunk 8 --logprobs 4 >"$tmp/score.log" 2>&1
rc=$?
if [ "$rc" -eq 99 ]; then
    bad "valgrind found errors in promptscore score:"; head -n 60 "$tmp/score.log"
elif [ "$rc" -ne 0 ]; then
    bad "promptscore score exited $rc:"; tail -n 20 "$tmp/score.log"
else
    ok
fi
# the run did its work: 5 lines, 3 results and 2 errors
n=$(wc -l <"$tmp/out.jsonl" 2>/dev/null || echo 0)
[ "$n" -eq 5 ] && ok || bad "expected 5 output lines, got $n"
r=$(grep -c '"sum_logprob"' "$tmp/out.jsonl" 2>/dev/null)
e=$(grep -c '"error"' "$tmp/out.jsonl" 2>/dev/null)
[ "$r" = 3 ] && [ "$e" = 2 ] && ok || bad "expected 3 results and 2 errors, got $r and $e"

# 2. the fault-injection walks (error paths are where leaks hide)
faults="$BUILD/tests/test_faults"
if [ -x "$faults" ]; then
    $VG "$faults" >"$tmp/faults.log" 2>&1
    rc=$?
    if [ "$rc" -eq 99 ]; then
        bad "valgrind found errors in test_faults:"; head -n 60 "$tmp/faults.log"
    elif [ "$rc" -ne 0 ]; then
        bad "test_faults exited $rc under valgrind:"; grep -E 'FAIL' "$tmp/faults.log" | head -n 20
    else
        ok
    fi
else
    skip "$faults not built"
fi
done_
