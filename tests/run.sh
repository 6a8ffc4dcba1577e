#!/bin/sh
# Runs every test binary of $BUILD/tests, the quick validating mode of every benchmark
# ($BUILD/bench/bench_* --check: fast kernels against their references on small shapes, no
# timing) and every tests/test_*.sh script but those `make check` adds (PS_SUITE below), and
# adds up their closing lines
# "<name>: N passed, N failed, N skipped[, N not available on this CPU]". Then replays every
# fuzz corpus ($BUILD/fuzz/*_replay) and reports those inputs on a line of their own, outside
# the test total. Exit 1 when any test failed, any binary crashed or any replay failed.
#
# Skips: a test skips a case when something it needs is missing, saying why. With CI=true
# (CI installs everything) a skip is a failure: tests/check.h and tests/check.sh count it so,
# and this script fails any test whose closing line still reports a skip. "Not available on
# this CPU" (an instruction set the machine lacks) is never a failure.
# Which tests (PS_SUITE): "test" (the default: what `make test` runs), "check" (the suites
# `make check` adds on the plain build, $EXTRA: the memory checker, the daemons and the
# browsers, minutes of their own), "all" (both).
EXTRA="test_valgrind.sh test_nginx.sh test_slurm.sh test_page.sh test_openai.sh"
BUILD=${BUILD:-build}
export BUILD
suite=${PS_SUITE:-test}
case "$suite" in test | check | all) ;; *) echo "PS_SUITE=$suite: want test, check or all"; exit 2 ;; esac
case "${CI:-}" in "" | 0 | false) ci=0 ;; *) ci=1 ;; esac
pass=0; fail=0; skip=0; cpu=0; bad=""
fz_n=0; fz_inputs=0; fz_fail=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# run KIND CMD NAME: runs one test, reads its closing line, adds it to the tally of KIND
# (test or fuzz)
run() {
    kind=$1; cmd=$2; t=$3
    start=$(date +%s)
    $cmd >"$log" 2>&1
    rc=$?
    line=$(grep -E '^[A-Za-z0-9_.-]+: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$log" | tail -n 1)
    secs=$(( $(date +%s) - start ))
    if [ -z "$line" ]; then
        echo "CRASH $t (exit $rc, no summary line):"; tail -n 30 "$log"
        if [ "$kind" = fuzz ]; then fz_fail=$((fz_fail + 1)); else fail=$((fail + 1)); fi
        bad="$bad $t"; return
    fi
    p=$(echo "$line" | sed -E 's/^[^:]*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    s=$(echo "$line" | sed -E 's/.* ([0-9]+) skipped.*/\1/')
    u=$(echo "$line" | sed -nE 's/.* ([0-9]+) not available on this CPU.*/\1/p'); u=${u:-0}
    if [ "$kind" = fuzz ]; then
        fz_n=$((fz_n + 1)); fz_inputs=$((fz_inputs + p)); fz_fail=$((fz_fail + f))
    else
        pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s)); cpu=$((cpu + u))
    fi
    why=""
    [ "$rc" -ne 0 ] && why="exit $rc"
    [ "$f" -ne 0 ] && why="${why:+$why, }$f failed"
    if [ "$ci" = 1 ] && [ "$s" -ne 0 ]; then why="${why:+$why, }$s skipped under CI=true"; fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ] && [ "$u" -eq 0 ]; then
        why="${why:+$why, }it checked nothing"
    fi
    if [ -n "$why" ]; then
        if [ "$f" -eq 0 ]; then
            if [ "$kind" = fuzz ]; then fz_fail=$((fz_fail + 1)); else fail=$((fail + 1)); fi
        fi
        echo "FAILED $t ($why):"; grep -E 'FAIL|SKIP|CRASH|NOTE' "$log" | head -n 40
        bad="$bad $t"
    else
        grep -E '^(SKIP|NOTE|UNAVAILABLE)' "$log" | head -n 10
    fi
    echo "  $line  (${secs}s)"
}

# A shell check whose condition starts by testing $? (a message holding "$(...)" and the
# condition [ $? -eq 0 ]) tests the status of whatever ran last before the eval, under bash the
# message's command substitution, so it cannot fail: capture the status first (cmd; rc=$?;
# then the condition [ $rc -eq 0 ]). Any such line in tests/ fails the run.
qs=$(grep -nE "check .*['\"]\[ \"?\\\$\?" tests/*.sh tests/*/*.sh 2>/dev/null)
if [ -n "$qs" ]; then
    echo "FAILED tests/*.sh: a check tests \$? (the status of its own message's substitution):"
    echo "$qs"
    fail=$((fail + 1)); bad="$bad \$?-check"
fi

for t in "$BUILD"/tests/test_* "$BUILD"/bench/bench_* tests/test_*.sh; do
    [ -f "$t" ] || continue
    extra=0
    case " $EXTRA " in *" ${t##*/} "*) extra=1 ;; esac
    if [ "$suite" = test ] && [ "$extra" = 1 ]; then
        echo "  (in make check: $t)"; continue
    fi
    [ "$suite" = check ] && [ "$extra" = 0 ] && continue
    case "$t" in
        *.sh)
            # valgrind checks the plain build; ASan's shadow memory and valgrind do not mix.
            # The Slurm and nginx tests check orchestration (a real cluster, a real balancer)
            # around the same score/merge/serve code that test_shard.sh and test_server run
            # under the sanitizers; sanitized, their daemons' deadlines are what they measure.
            # The Python package loads the plain shared library into python3 (an ASan one
            # would need the runtime preloaded into the interpreter).
            if [ -n "${PS_SANITIZED:-}" ]; then
                case "${t##*/}" in test_valgrind.sh|test_slurm.sh|test_nginx.sh|test_python.sh)
                    echo "  (not run in the sanitizer build: $t checks the plain build)"; continue ;;
                esac
            fi
            run test "sh $t" "$t" ;;
        */bench/*) run test "$t --check" "$t --check" ;;
        *) [ -x "$t" ] && run test "$t" "$t" ;;
    esac
done
for t in "$BUILD"/fuzz/*_replay; do
    [ -x "$t" ] && [ "$suite" != check ] || continue
    run fuzz "$t" "$t"
done
echo "fuzz corpora: $fz_inputs inputs replayed over $fz_n targets, $fz_fail failed (not in the total)"
echo "total: $pass passed, $fail failed, $skip skipped, $cpu not available on this CPU"
[ -z "$bad" ] || { echo "failing:$bad"; exit 1; }
exit 0
