#!/bin/sh
# tests/test_python_skip.sh — the Python suite cannot be skipped silently. tests/test_python.sh
# runs with an interpreter that lacks one module the tests need (a wrapper around python3 whose
# `import pytest` / `import tqdm` fails): where the build tier is installed (PS_BUILD_TIER=1,
# which stands for tools/setup.sh's base packages being there) it must FAIL, naming the module
# and the set-up command; where it is not (PS_BUILD_TIER=0) and CI is unset it may skip, saying
# why. And every Debian package docs/python.md names for the tests is one that
# `tools/setup.sh --test` installs.
cd "$(dirname "$0")/.." || exit 1
NAME=python_skip; FILE=test_python_skip.sh
. tests/check.sh

PY=${PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || PY=$(command -v python3)
[ -n "$PY" ] || { skip "python3 missing"; done_; }
T=$(mktemp -d /tmp/ps-test-python-skip-XXXXXX)
trap 'rm -rf "$T"' EXIT

for mod in pytest tqdm; do
    # python3, except that `-c "import $mod"` fails as if the module were not installed
    cat >"$T/py-$mod" <<EOF
#!/bin/sh
[ "\$1" = "-c" ] && [ "\$2" = "import $mod" ] && exit 1
exec "$PY" "\$@"
EOF
    chmod +x "$T/py-$mod"
    PYTHON="$T/py-$mod" PS_BUILD_TIER=1 CI= sh tests/test_python.sh >"$T/out1" 2>&1
    rc=$?
    check "without $mod, build tier installed: exit 1 (rc $rc): $(tail -n 2 "$T/out1")" '[ $rc -ne 0 ]'
    check "without $mod, build tier installed: a FAIL naming $mod and setup.sh --test" \
        'grep "^FAIL" "$T/out1" | grep "$mod" | grep -q "tools/setup.sh --test"'
    check "without $mod, build tier installed: 1 failed, 0 skipped" \
        'grep -q "^python: 0 passed, 1 failed, 0 skipped" "$T/out1"'
    PYTHON="$T/py-$mod" PS_BUILD_TIER=0 CI= sh tests/test_python.sh >"$T/out0" 2>&1
    rc=$?
    check "without $mod, no build tier: a skip (rc $rc): $(tail -n 2 "$T/out0")" \
        '[ $rc -eq 0 ] && grep -q "^SKIP.*$mod" "$T/out0" && grep -q "1 skipped" "$T/out0"'
    PYTHON="$T/py-$mod" PS_BUILD_TIER=0 CI=true sh tests/test_python.sh >"$T/outci" 2>&1
    rc=$?
    check "without $mod under CI=true: a failure (rc $rc)" '[ $rc -ne 0 ]'
done

# what docs/python.md says the tests need, tools/setup.sh --test installs
pkgs=$(sh tools/setup.sh --test --list)
named=$(sed -n '/^## Tests/,/^## /p' docs/python.md | grep -o 'python3-[a-z0-9-]*' | sort -u)
check "docs/python.md's Tests section names the packages" '[ -n "$named" ]'
for p in $named python3-numpy python3-pytest python3-tqdm python3-venv; do
    check "tools/setup.sh --test installs $p (docs/python.md needs it)" \
        'printf "%s\n" $pkgs | grep -qx "$p"'
done
done_
