#!/bin/sh
# tests/test_testhooks.sh — the test hooks (src/base/testhooks.h) exist in test builds only.
# The shipped binary $BUILD/promptscore, the static core $BUILD/libpromptscore.a and the shared
# library carry no PS_TEST_ string (strings) and define none of the hook functions (nm):
# ps_alloc_fail_after, ps_alloc_count, ps_test_moe_plain, and no hold of PS_TEST_HOLD_FDS. The
# test build of the CLI, $BUILD/tests/promptscore-t (compiled with -DPS_TESTING), has them:
# the same probes find them there, so the checks can fail. Prints "testhooks: N passed, N
# failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
NAME=testhooks; FILE=test_testhooks.sh
. tests/check.sh

for tool in nm strings; do
    command -v "$tool" >/dev/null 2>&1 || { skip "$tool missing"; done_; }
done
BIN="$BUILD/promptscore"
TBIN="$BUILD/tests/promptscore-t"
SO="$BUILD/libpromptscore.so"
LIB="$BUILD/libpromptscore.a"
for f in "$BIN" "$TBIN" "$SO" "$LIB"; do
    [ -e "$f" ] || { skip "$f is not built"; done_; }
done

HOOKS='ps_alloc_fail_after|ps_alloc_count|ps_test_moe_plain|ps_test_hold'
# defined symbols of a file (static functions too: an unstripped binary lists them)
defs() { nm "$1" 2>/dev/null | awk 'NF == 3 && $2 != "U" {print $3}'; }

for f in "$BIN" "$SO" "$LIB"; do
    n=$(strings -a "$f" | grep -c 'PS_TEST_')
    check "$f holds $n PS_TEST_ string(s): $(strings -a "$f" | grep 'PS_TEST_' | head -3 | tr '\n' ' ')" \
        '[ "$n" -eq 0 ]'
    h=$(defs "$f" | grep -E "^($HOOKS)" | sort -u | tr '\n' ' ')
    check "$f defines test hooks: $h" '[ -z "$h" ]'
done

# the test build has them: the probes above find what they look for
check "$TBIN lacks PS_TEST_HOLD_FDS (the probe finds nothing?)" \
    'strings -a "$TBIN" | grep -q "^PS_TEST_HOLD_FDS$"'
for sym in ps_alloc_fail_after ps_alloc_count ps_test_moe_plain; do
    check "$TBIN does not define $sym (the probe finds nothing?)" 'defs "$TBIN" | grep -qx "$sym"'
done

done_
