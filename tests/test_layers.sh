#!/bin/sh
# The layering of src/ (tests/test_layers.py says what it checks): folders in their order, no
# upward or sideways include, no include or call cycle between modules. Then the checker is
# shown to catch a break: in a copy of src/, each planted include (front into serve, score
# into front, serve into gen, a module cycle inside front) must make it fail.
NAME=layers FILE=tests/test_layers.sh
here=$(dirname "$0")
. "$here/check.sh"
# the tree itself: the checker's own counts join this test's
out=$(python3 "$here/test_layers.py"); rc=$?
echo "$out" | grep -v '^layers: '
p=$(echo "$out" | sed -nE 's/^layers: ([0-9]+) passed, ([0-9]+) failed.*/\1/p')
f=$(echo "$out" | sed -nE 's/^layers: ([0-9]+) passed, ([0-9]+) failed.*/\2/p')
pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0}))
[ -n "$p" ] || bad "test_layers.py printed no closing line (exit $rc)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# plant FILE INCLUDE WHAT: the copy with one more include must fail the checker
plant() {
    rm -rf "$tmp/src"; cp -r "$here/../src" "$tmp/src"
    printf '#include "%s"\n' "$2" >>"$tmp/src/$1"
    PS_LAYERS_SRC="$tmp/src" python3 "$here/test_layers.py" >"$tmp/out" 2>&1; rc=$?
    check "$3: the checker passed a copy where src/$1 includes $2" '[ $rc -ne 0 ]'
}
plant front/request.c serve/server.h "front into serve (upward)"
plant score/score.c front/request.h "score into front (upward)"
plant serve/server.c gen/genmodel.h "serve into gen (sideways)"
plant front/json.c front/request.h "front/json <-> front/request (include cycle)"
done_
