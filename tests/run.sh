#!/bin/sh
# Runs every test binary of $BUILD/tests, the quick validating mode of every benchmark
# ($BUILD/bench/bench_* --check: fast kernels against their references on small shapes, no
# timing) and every tests/test_*.sh script but those `make check` adds (PS_SUITE below), and
# adds up their closing lines
# "<name>: N passed, N failed, N skipped[, N not available on this CPU]". Also replays every
# fuzz corpus ($BUILD/fuzz/*_replay) and reports those inputs on a line of their own, outside
# the test total. Exit 1 when any test failed, any binary crashed or any replay failed.
#
# In parallel: PS_JOBS tests at once (default: the number of CPUs, nproc; PS_JOBS=1 runs one
# after another). Each test's output goes to $BUILD/test-logs/NAME.log; the run prints one line
# per finished test as it finishes, then the skipped cases, then an excerpt of each failing
# test's log, then the totals. No test may depend on another's order or share a fixed path or
# port with another (temporary folders by mktemp, servers on --port 0). The longest tests start
# first, so that no long one is left running alone at the end: each run writes every test's
# seconds to $BUILD/test-times, which orders the next run; on a fresh build the tests named in
# SLOW below go first.
#
# Skips: a test skips a case when something it needs is missing, saying why. With CI=true
# (CI installs everything) a skip is a failure: tests/check.h and tests/check.sh count it so,
# and this script fails any test whose closing line still reports a skip. "Not available on
# this CPU" (an instruction set the machine lacks) is never a failure. A test that prints no
# closing line crashed; one whose closing line counts nothing checked nothing: both fail.
# Which tests (PS_SUITE): "test" (the default: what `make test` runs), "check" (the suites
# `make check` adds on the plain build, $EXTRA: the memory checker, the daemons and the
# browsers, minutes of their own), "all" (both).
#
# (Internally, `sh tests/run.sh --one KIND PATH` runs one test for the pool.)
EXTRA="test_valgrind.sh test_nginx.sh test_slurm.sh test_page.sh test_openai.sh"
# the longest tests, longest first: the order of a run without $BUILD/test-times
SLOW="test_valgrind.sh test_reference test_score test_moe test_python.sh test_readme.sh
test_slurm.sh test_nginx.sh test_page.sh test_cli_score.sh test_kvtype test_batch test_gptoss
test_hybrid test_gemma test_phi3 test_matmul_quant test_olmo2 test_swa test_repack
test_serve_safety test_prefix_cache"
BUILD=${BUILD:-build}
export BUILD
LOGS="$BUILD/test-logs"
case "${CI:-}" in "" | 0 | false) ci=0 ;; *) ci=1 ;; esac

# NAME: the name of a test's log and of its line in $BUILD/test-times (the file name: test_x,
# test_x.sh, bench_x, fuzz_x_replay)
name_of() { echo "${1##*/}"; }

# --one KIND PATH (KIND: test or fuzz): runs one test into $LOGS/NAME.log, prints its line and
# writes $LOGS/NAME.res: "KIND PASSED FAILED SKIPPED CPU STATE SECONDS WHY" (STATE: ok, failed
# or crash; FAILED counts a failing test once even when its own line reports none)
if [ "${1:-}" = --one ]; then
    kind=$2; t=$3
    n=$(name_of "$t")
    log="$LOGS/$n.log"
    case "$t" in
        *.sh) set -- sh "$t" ;;
        */bench/*) set -- "$t" --check ;;
        *) set -- "$t" ;;
    esac
    start=$(date +%s)
    "$@" >"$log" 2>&1 </dev/null
    rc=$?
    secs=$(( $(date +%s) - start ))
    line=$(grep -E '^[A-Za-z0-9_.-]+: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        echo "$kind 0 1 0 0 crash $secs exit $rc, no summary line" >"$LOGS/$n.res"
        printf 'CRASH   %s  (%ss: exit %s, no summary line)\n' "$n" "$secs" "$rc"
        exit 0
    fi
    p=$(echo "$line" | sed -E 's/^[^:]*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    s=$(echo "$line" | sed -E 's/.* ([0-9]+) skipped.*/\1/')
    u=$(echo "$line" | sed -nE 's/.* ([0-9]+) not available on this CPU.*/\1/p'); u=${u:-0}
    why=""
    [ "$rc" -ne 0 ] && why="exit $rc"
    [ "$f" -ne 0 ] && why="${why:+$why, }$f failed"
    if [ "$ci" = 1 ] && [ "$s" -ne 0 ]; then why="${why:+$why, }$s skipped under CI=true"; fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ] && [ "$u" -eq 0 ]; then
        why="${why:+$why, }it checked nothing"
    fi
    if [ -n "$why" ]; then
        [ "$f" -eq 0 ] && f=1
        echo "$kind $p $f $s $u failed $secs $why" >"$LOGS/$n.res"
        printf 'FAILED  %s  (%s, %ss: %s)\n' "$line" "$n" "$secs" "$why"
    else
        echo "$kind $p $f $s $u ok $secs" >"$LOGS/$n.res"
        printf 'ok      %s  (%s, %ss)\n' "$line" "$n" "$secs"
    fi
    exit 0
fi

suite=${PS_SUITE:-test}
case "$suite" in test | check | all) ;; *) echo "PS_SUITE=$suite: want test, check or all"; exit 2 ;; esac
jobs=${PS_JOBS:-}
[ -n "$jobs" ] || jobs=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
case "$jobs" in '' | *[!0-9]* | 0) echo "PS_JOBS=$jobs: want a number of tests to run at once (1 or more)"; exit 2 ;; esac
pass=0; fail=0; skip=0; cpu=0; bad=""
fz_n=0; fz_inputs=0; fz_fail=0
rm -rf "$LOGS"
mkdir -p "$LOGS" || exit 2
list=$(mktemp)
trap 'rm -f "$list" "$list.w" "$list.w.times"' EXIT

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

# the tests of this suite, "WEIGHT KIND PATH" per line; the heaviest first
weight() {
    w=$(awk -v n="$1" '$2 == n { print $1; exit }' "$BUILD/test-times" 2>/dev/null)
    if [ -n "$w" ]; then echo "$w"; return; fi
    i=0
    for s in $SLOW; do
        i=$((i + 1))
        [ "$s" = "$1" ] && { echo $((100000 - i)); return; }
    done
    echo 1000 # a test without a time yet: early, it may be long
}
held=""; unsanitized=""
for t in "$BUILD"/tests/test_* "$BUILD"/bench/bench_* tests/test_*.sh; do
    [ -f "$t" ] || continue
    case "$t" in *.d) continue ;; esac # the header dependencies of a test binary (make)
    extra=0
    case " $EXTRA " in *" ${t##*/} "*) extra=1 ;; esac
    if [ "$suite" = test ] && [ "$extra" = 1 ]; then held="$held ${t##*/}"; continue; fi
    [ "$suite" = check ] && [ "$extra" = 0 ] && continue
    case "$t" in
        *.sh)
            # valgrind checks the plain build; ASan's shadow memory and valgrind do not mix.
            # The Slurm and nginx tests check orchestration (a real cluster, a real balancer)
            # around the same score/merge/serve code that test_shard.sh and test_server run
            # under the sanitizers; sanitized, their daemons' deadlines are what they measure.
            # The Python package loads the plain shared library into python3 (an ASan one
            # would need the runtime preloaded into the interpreter); so do the docs' commands,
            # whose Python blocks install and run it.
            if [ -n "${PS_SANITIZED:-}" ]; then
                case "${t##*/}" in test_valgrind.sh|test_slurm.sh|test_nginx.sh|test_python.sh|test_docs_commands.sh)
                    unsanitized="$unsanitized ${t##*/}"; continue ;;
                esac
            fi ;;
        *) [ -x "$t" ] || continue ;;
    esac
    echo "$(weight "$(name_of "$t")") test $t"
done >"$list.w"
if [ "$suite" != check ]; then
    for t in "$BUILD"/fuzz/*_replay; do
        [ -x "$t" ] && echo "$(weight "$(name_of "$t")") fuzz $t"
    done >>"$list.w"
fi
sort -k1,1nr -s "$list.w" | cut -d' ' -f2- >"$list"
[ -z "$held" ] || echo "  (in make check:$held)"
[ -z "$unsanitized" ] || echo "  (not run in the sanitizer build, they check the plain build:$unsanitized)"
echo "running $(grep -c . "$list") tests, $jobs at a time; each one's output: $LOGS/NAME.log"

# the pool: xargs starts the next test as soon as one of the $jobs running ends
xargs -P "$jobs" -L 1 sh "$0" --one <"$list"

# the tally, in the order the tests were started
skipped=""; failed_logs=""
while read -r kind t; do
    n=$(name_of "$t")
    res="$LOGS/$n.res"
    if [ ! -f "$res" ]; then # the pool did not run it (interrupted)
        echo "$kind 0 1 0 0 crash 0 not run" >"$res"
    fi
    read -r k p f s u state secs why <"$res"
    if [ "$kind" = fuzz ]; then
        fz_n=$((fz_n + 1)); fz_inputs=$((fz_inputs + p))
        [ "$state" = ok ] || fz_fail=$((fz_fail + f))
    else
        pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s)); cpu=$((cpu + u))
    fi
    [ "$state" = ok ] || { bad="$bad $n"; failed_logs="$failed_logs $n"; }
    [ "$state" = ok ] && [ "$s" -gt 0 ] && skipped="$skipped $n"
    echo "$secs $n" >>"$list.w.times"
done <"$list"

# the next run's order: this run's seconds, then those of tests it did not run
if [ -f "$list.w.times" ]; then
    cp "$list.w.times" "$BUILD/test-times.new"
    if [ -f "$BUILD/test-times" ]; then
        awk 'NR == FNR { seen[$2] = 1; next } !($2 in seen)' "$list.w.times" \
            "$BUILD/test-times" >>"$BUILD/test-times.new"
    fi
    mv "$BUILD/test-times.new" "$BUILD/test-times"
    rm -f "$list.w.times"
fi

if [ -n "$skipped" ]; then
    echo "skipped cases (the reasons; each test's log has the rest):"
    for n in $skipped; do grep -E '^(SKIP|UNAVAILABLE)' "$LOGS/$n.log" | head -n 10; done
fi
for n in $failed_logs; do
    log="$LOGS/$n.log"
    read -r k p f s u state secs why <"$LOGS/$n.res"
    echo "---- $n: $state ($why); $log:"
    lines=$(grep -E 'FAIL|SKIP|CRASH|NOTE' "$log" 2>/dev/null | head -n 40)
    if [ "$state" = crash ] || [ -z "$lines" ]; then
        tail -n 30 "$log" 2>/dev/null
    else
        printf '%s\n' "$lines"
    fi
done
echo "fuzz corpora: $fz_inputs inputs replayed over $fz_n targets, $fz_fail failed (not in the total)"
echo "total: $pass passed, $fail failed, $skip skipped, $cpu not available on this CPU"
[ -z "$bad" ] || { echo "failing:$bad"; exit 1; }
exit 0
