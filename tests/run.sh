#!/bin/sh
# Runs every test binary of $BUILD/tests, every fuzz corpus replay of $BUILD/fuzz and every
# tests/test_*.sh script; adds up their "N passed, N failed, N skipped" lines. Exit 1 when any
# test failed or any binary crashed.
BUILD=${BUILD:-build}
export BUILD
pass=0; fail=0; skip=0; bad=""
log=$(mktemp)
for t in "$BUILD"/tests/test_* "$BUILD"/fuzz/*_replay tests/test_*.sh; do
    [ -e "$t" ] || continue
    case "$t" in *.sh) cmd="sh $t";; *) cmd="$t";; esac
    start=$(date +%s)
    $cmd >"$log" 2>&1
    rc=$?
    line=$(grep -E '^[A-Za-z0-9_.-]+: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    secs=$(( $(date +%s) - start ))
    if [ -z "$line" ]; then
        echo "CRASH $t (exit $rc, no summary line):"; tail -n 30 "$log"
        fail=$((fail + 1)); bad="$bad $t"; continue
    fi
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    s=$(echo "$line" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p'); s=${s:-0}
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
        [ "$f" -eq 0 ] && fail=$((fail + 1))
        echo "FAILED $t (exit $rc):"; grep -E 'FAIL|SKIP|NOTE' "$log" | head -n 40; bad="$bad $t"
    else
        grep -E '^(SKIP|NOTE)' "$log" | head -n 10
    fi
    echo "  $line  (${secs}s)"
done
rm -f "$log"
echo "total: $pass passed, $fail failed, $skip skipped"
[ -z "$bad" ] || { echo "failing:$bad"; exit 1; }
exit 0
