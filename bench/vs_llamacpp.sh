#!/bin/sh
# bench/vs_llamacpp.sh — promptscore and llama.cpp side by side, on the same machine, file and
# prompt, at steady state.
#
#   bench/vs_llamacpp.sh LLAMA_BUILD_DIR MODEL.gguf [MODEL.gguf ...]
#
# LLAMA_BUILD_DIR is an existing CMake build of llama.cpp with its shared library (libllama.so;
# docs/figures.md says how to make one, outside this repository); its CMakeCache.txt
# names the source tree, whose include/ and ggml/include/ hold llama.h. This script builds
# nothing of llama.cpp: it compiles bench/llama_client.c (a client of llama.h: the whole prompt
# in one llama_decode, logits at every position, a warm-up pass, the median of RUNS) against
# that build, then for each model and thread count alternates ROUNDS times: llama_client, then
# `promptscore bench` (its row: the median of RUNS after the cold pass), both on the same
# LENGTH ids (bench's pseudo-random prompt; llama_client draws it the same way). Prints a
# Markdown table: each side's median over the rounds and the median of the rounds' ratios
# (promptscore / llama.cpp). One thread is timed by CPU time on both sides, more by the wall
# clock. promptscore's figure includes the log-softmax and top-K (-k 20) of every position;
# llama.cpp's stops at the logits.
#
# Environment: THREADS (default "1 2"), LENGTH (256), RUNS (5), ROUNDS (3), LLAMA_COMMIT (the
# snapshot's commit, printed; default: git rev-parse in the source tree), BIN
# (build/promptscore), CC (cc). Not part of CI (timing).
set -eu
if [ $# -lt 2 ]; then
    echo "usage: bench/vs_llamacpp.sh LLAMA_BUILD_DIR MODEL.gguf [MODEL.gguf ...]" >&2
    exit 2
fi
LB=$(cd "$1" && pwd); shift
THREADS=${THREADS:-"1 2"}; LENGTH=${LENGTH:-256}; RUNS=${RUNS:-5}; ROUNDS=${ROUNDS:-3}
BIN=${BIN:-build/promptscore}; CC=${CC:-cc}
cd "$(dirname "$0")/.."
[ -x "$BIN" ] || { echo "vs_llamacpp: no $BIN (make first)" >&2; exit 1; }
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$LB/CMakeCache.txt" 2>/dev/null || true)
[ -n "$SRC" ] && [ -r "$SRC/include/llama.h" ] || {
    echo "vs_llamacpp: $LB is not a llama.cpp CMake build (no CMakeCache.txt naming a source tree with include/llama.h)" >&2
    exit 1
}
LIBDIR=$(dirname "$(find "$LB" -name 'libllama.so' | head -n 1)")
[ -r "$LIBDIR/libllama.so" ] || { echo "vs_llamacpp: no libllama.so under $LB (build with -DBUILD_SHARED_LIBS=ON)" >&2; exit 1; }
T=$(mktemp -d /tmp/ps-vs-llamacpp-XXXXXX)
trap 'rm -rf "$T"' EXIT
"$CC" -O2 -std=c11 -D_GNU_SOURCE -I"$SRC/include" -I"$SRC/ggml/include" bench/llama_client.c \
    -o "$T/llama_client" -L"$LIBDIR" -lllama -Wl,-rpath,"$LIBDIR"
LLAMA_COMMIT=${LLAMA_COMMIT:-$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo "unknown: set LLAMA_COMMIT")}
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p" | head -n 1; }
med() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "CPU: $CPU, $(nproc) CPUs; $(date -u +%Y-%m-%d); promptscore $(git rev-parse --short HEAD 2>/dev/null || echo '?'); llama.cpp source $SRC ($LLAMA_COMMIT)"
echo "LENGTH=$LENGTH RUNS=$RUNS ROUNDS=$ROUNDS; each figure: the median over $ROUNDS alternating rounds of each program's median of $RUNS runs after a warm-up"
echo
echo "| file | threads | llama.cpp tok/s | promptscore tok/s | ratio |"
echo "|---|---|---|---|---|"
for m in "$@"; do
    for t in $THREADS; do
        : > "$T/rounds"
        r=1
        while [ "$r" -le "$ROUNDS" ]; do
            l=$("$T/llama_client" "$m" "$LENGTH" "$t" "$RUNS" | field tokens_per_s)
            # one thread on the process's CPU time, as llama_client times it; more on the wall
            ct=""; [ "$t" = 1 ] && ct=--cpu-time
            p=$("$BIN" bench -m "$m" -t "$t" -l "$LENGTH" -k 20 --runs "$RUNS" --json $ct | grep '"pass": "steady"' | field tokens_per_s)
            [ -n "$l" ] && [ -n "$p" ] || { echo "vs_llamacpp: a run failed ($m, $t threads)" >&2; exit 1; }
            echo "$l $p" >> "$T/rounds"
            r=$((r + 1))
        done
        lm=$(cut -d' ' -f1 "$T/rounds" | med)
        pm=$(cut -d' ' -f2 "$T/rounds" | med)
        q=$(awk '{ printf "%.3f\n", $2 / $1 }' "$T/rounds" | med)
        printf '| %s | %s | %s | %s | %.2fx |\n' "$(basename "$m")" "$t" "$lm" "$pm" "$q"
    done
done
