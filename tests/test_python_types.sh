#!/bin/sh
# tests/test_python_types.sh — the Python package's type hints hold: `mypy --strict` (Debian's
# mypy) over python/promptscore finds no issue, so the hints the package ships (py.typed) are
# ones a user's type checker can trust. Without mypy the check is skipped (a failure under
# CI=true; sh tools/setup.sh --test installs it).
cd "$(dirname "$0")/.." || exit 1
NAME=python_types; FILE=test_python_types.sh
. tests/check.sh
if ! command -v mypy >/dev/null 2>&1; then
    skip "mypy is not installed (apt-get install mypy)"; done_
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
# the cache goes to a temporary folder: nothing is written into the tree
mypy --strict --cache-dir "$T/cache" python/promptscore >"$T/out" 2>&1; rc=$?
check "mypy --strict python/promptscore: $(tail -n 20 "$T/out")" '[ $rc -eq 0 ]'
# the check can fail: an unannotated function in a copy of the package is reported
cp -r python/promptscore "$T/pkg"
printf '\n\ndef _planted(x):\n    return x\n' >>"$T/pkg/_result.py"
mypy --strict --cache-dir "$T/cache" "$T/pkg" >"$T/out2" 2>&1; rc=$?
check "mypy --strict passed a copy with an unannotated function" '[ $rc -ne 0 ] && grep -q "_result.py" "$T/out2"'
done_
