#!/bin/sh
# fuzz/build.sh [seconds] — builds every fuzz/fuzz_*.c as a libFuzzer binary with clang-14
# (-fsanitize=fuzzer,address,undefined) against the library sources compiled with the same
# sanitizers (through the Makefile, into build-fuzz/; not the gcc-built .a), then runs each
# target for `seconds` (default 60; 0 = build only) on a working copy of its corpus with its
# dictionary, and prints libFuzzer's final stats. Exits non-zero on a finding (the crashing
# input is left in build-fuzz/artifacts/: add it to fuzz/corpus/<name>/ with the fix).
#   FUZZ_TARGETS="fuzz_gguf"   only these targets
#   FUZZ_JOBS=2                targets fuzzed at once (default 2)
#   FUZZ_CC=clang-14           the compiler
set -eu
secs=${1:-60}
cd "$(dirname "$0")/.."
CC=${FUZZ_CC:-clang-14}
OUT=build-fuzz
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
PKGS="libpcre2-8 libmicrohttpd jansson libcurl"

# The libraries (the core and the front ends beside it), instrumented for coverage
# (fuzzer-no-link) and sanitized. -Wno-error: clang's warnings differ from gcc's, and a warning
# must not stop a fuzzing run.
make -s -j2 BUILD="$OUT" CC="$CC" OPT="-O1 -g" \
    EXTRA_CFLAGS="-fsanitize=fuzzer-no-link $SAN -Wno-error" \
    "$OUT/libpromptscore.a" "$OUT/libpromptscore-front.a"

targets=${FUZZ_TARGETS:-$(for f in fuzz/fuzz_*.c; do basename "$f" .c; done)}
mkdir -p "$OUT/bin" "$OUT/artifacts"
for t in $targets; do
    echo "== build $t"
    $CC -O1 -g -std=c11 -D_GNU_SOURCE -pthread -Iinclude -Isrc \
        $(pkg-config --cflags $PKGS) -fsanitize=fuzzer $SAN \
        -o "$OUT/bin/$t" "fuzz/$t.c" \
        "$OUT/libpromptscore-front.a" "$OUT/libpromptscore.a" $(pkg-config --libs $PKGS) -lm
done
[ "$secs" -gt 0 ] || exit 0

# Targets run FUZZ_JOBS at a time (default 2, the cores CI has): each still gets its `seconds`
# of one core, and the logs print in order once each batch is done.
jobs=${FUZZ_JOBS:-2}
fuzz_one() { # fuzz_one TARGET: runs it into $OUT/TARGET.log, its status into $OUT/TARGET.rc
    t=$1; name=${t#fuzz_}
    work="$OUT/corpus/$t"  # new inputs go here, not into the seed corpus of the repository
    mkdir -p "$work"
    dict=""
    [ -f "fuzz/$name.dict" ] && dict="-dict=fuzz/$name.dict"
    seeds=""
    [ -d "fuzz/corpus/$t" ] && seeds="fuzz/corpus/$t"
    rc=0
    "$OUT/bin/$t" -max_total_time="$secs" -print_final_stats=1 -max_len=65536 \
        -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$OUT/artifacts/$t-" \
        $dict "$work" $seeds > "$OUT/$t.log" 2>&1 || rc=$?
    echo $rc > "$OUT/$t.rc"
}
status=0
batch=""
flush() {
    wait
    for b in $batch; do
        echo "== run $b for ${secs}s"
        cat "$OUT/$b.log"
        if [ "$(cat "$OUT/$b.rc")" != 0 ]; then
            echo "FINDING in $b: see $OUT/artifacts/$b-*"
            status=1
        fi
    done
    batch=""
}
n=0
for t in $targets; do
    fuzz_one "$t" &
    batch="$batch $t"; n=$((n + 1))
    [ $((n % jobs)) -ne 0 ] || flush
done
flush
exit $status
