#!/bin/sh
# bench/vs_ikllama.sh — promptscore and ik_llama.cpp (the llama.cpp fork with row-interleaved
# repacked kernels, the fastest CPU prompt processing we know of) side by side, on the same
# machine, file and prompt, at steady state.
#
#   bench/vs_ikllama.sh IK_BUILD_DIR MODEL.gguf [MODEL.gguf ...]
#
# IK_BUILD_DIR is an existing CMake build of ik_llama.cpp with its shared library
# (-DBUILD_SHARED_LIBS=ON; docs/figures.md says how to make one, outside this repository); its
# CMakeCache.txt names the source tree, whose include/ and ggml/include/ hold llama.h. This
# script builds nothing of ik_llama.cpp: it compiles bench/llama_client.c with -DPS_IK_LLAMA
# against that build, then for each model and thread count alternates ROUNDS times: the client
# with the fork's run-time repack off, the client with it on (IK_RTR=1, its -rtr), then
# `promptscore bench` (its row: the median of RUNS after the cold pass), all on the same LENGTH
# ids with logits at every position. Prints a Markdown table: each side's median over the
# rounds, and the ratio (the median of the rounds' ratios) of promptscore to the fork at its
# better setting for that file and thread count. One thread is timed by CPU time on every
# side, more by the wall clock. promptscore's figure includes the log-softmax and top-K (-k 20)
# of every position; ik_llama.cpp's stops at the logits.
#
# Environment: THREADS (default "1 2"), LENGTH (256), RUNS (5), ROUNDS (3), IK_COMMIT (the
# snapshot's commit, printed; default: git rev-parse in the source tree), BIN
# (build/promptscore), CC (cc). Not part of CI (timing).
set -eu
if [ $# -lt 2 ]; then
    echo "usage: bench/vs_ikllama.sh IK_BUILD_DIR MODEL.gguf [MODEL.gguf ...]" >&2
    exit 2
fi
LB=$(cd "$1" && pwd); shift
THREADS=${THREADS:-"1 2"}; LENGTH=${LENGTH:-256}; RUNS=${RUNS:-5}; ROUNDS=${ROUNDS:-3}
BIN=${BIN:-build/promptscore}; CC=${CC:-cc}
cd "$(dirname "$0")/.."
[ -x "$BIN" ] || { echo "vs_ikllama: no $BIN (make first)" >&2; exit 1; }
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$LB/CMakeCache.txt" 2>/dev/null || true)
[ -n "$SRC" ] && [ -r "$SRC/include/llama.h" ] || {
    echo "vs_ikllama: $LB is not a CMake build of ik_llama.cpp (no CMakeCache.txt naming a source tree with include/llama.h)" >&2
    exit 1
}
grep -q repack_tensors "$SRC/include/llama.h" || {
    echo "vs_ikllama: $SRC/include/llama.h has no repack_tensors: not ik_llama.cpp (bench/vs_llamacpp.sh is for mainline)" >&2
    exit 1
}
LIBDIR=$(dirname "$(find "$LB" -name 'libllama.so' | head -n 1)")
[ -r "$LIBDIR/libllama.so" ] || { echo "vs_ikllama: no libllama.so under $LB (build with -DBUILD_SHARED_LIBS=ON)" >&2; exit 1; }
T=$(mktemp -d /tmp/ps-vs-ikllama-XXXXXX)
trap 'rm -rf "$T"' EXIT
"$CC" -O2 -std=c11 -D_GNU_SOURCE -DPS_IK_LLAMA -I"$SRC/include" -I"$SRC/ggml/include" \
    bench/llama_client.c -o "$T/ik_client" -L"$LIBDIR" -lllama -Wl,-rpath,"$LIBDIR"
IK_COMMIT=${IK_COMMIT:-$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo "unknown: set IK_COMMIT")}
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p" | head -n 1; }
med() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "CPU: $CPU, $(nproc) CPUs; $(date -u +%Y-%m-%d); promptscore $(git rev-parse --short HEAD 2>/dev/null || echo '?'); ik_llama.cpp source $SRC ($IK_COMMIT)"
echo "LENGTH=$LENGTH RUNS=$RUNS ROUNDS=$ROUNDS; each figure: the median over $ROUNDS alternating rounds of each program's median of $RUNS runs after a warm-up"
echo
echo "| file | threads | ik_llama.cpp tok/s | ik -rtr tok/s | promptscore tok/s | ratio to the better |"
echo "|---|---|---|---|---|---|"
for m in "$@"; do
    for t in $THREADS; do
        : > "$T/rounds"
        r=1
        while [ "$r" -le "$ROUNDS" ]; do
            a=$(IK_RTR=0 "$T/ik_client" "$m" "$LENGTH" "$t" "$RUNS" | field tokens_per_s)
            b=$(IK_RTR=1 "$T/ik_client" "$m" "$LENGTH" "$t" "$RUNS" | field tokens_per_s)
            ct=""; [ "$t" = 1 ] && ct=--cpu-time
            p=$("$BIN" bench -m "$m" -t "$t" -l "$LENGTH" -k 20 --runs "$RUNS" --json $ct | grep '"pass": "steady"' | field tokens_per_s)
            [ -n "$a" ] && [ -n "$b" ] && [ -n "$p" ] || { echo "vs_ikllama: a run failed ($m, $t threads)" >&2; exit 1; }
            echo "$a $b $p" >> "$T/rounds"
            r=$((r + 1))
        done
        am=$(cut -d' ' -f1 "$T/rounds" | med)
        bm=$(cut -d' ' -f2 "$T/rounds" | med)
        pm=$(cut -d' ' -f3 "$T/rounds" | med)
        # the fork at its better setting for this file: the one with the higher median
        col=1; awk -v a="$am" -v b="$bm" 'BEGIN { exit !(b > a) }' && col=2
        q=$(awk -v c="$col" '{ printf "%.3f\n", $3 / $c }' "$T/rounds" | med)
        printf '| %s | %s | %s | %s | %s | %.2fx |\n' "$(basename "$m")" "$t" "$am" "$bm" "$pm" "$q"
    done
done
