#!/bin/sh
# tests/test_readme.sh — the README's first screen, run as a new user would: the commands of
# its "Try it: two commands" section are read from README.md (not copied here). The section
# must hold exactly two: the set-up and demo command (`sh tools/setup.sh && make demo`) and the
# test command (`sh tools/setup.sh --test && make test`). On a fresh `git clone` of this
# repository (its committed HEAD) in a temporary folder, next to a `shared` link to ../shared
# when that exists:
#   - the first command exits 0: set-up (on a machine where it ran before it fetches nothing),
#     then the demo builds the clone and scores the samples with ../shared's stories260K: one
#     summary line per prompt of examples/prompts.jsonl, the total line, the token table;
#   - the first command again with no ../shared and no network (HF_ENDPOINT on a closed port,
#     an empty cache): the demo says so, uses a random-weight model and says its numbers mean
#     nothing;
#   - the set-up half of the second command exits 0 (npm is told to stay offline, so a missing
#     package fails here rather than downloads). Its `make test` is this suite, so it is not
#     run again.
# Prints "readme: N passed, ...".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
NAME=readme FILE=test_readme.sh
. tests/check.sh
ROOT=$(pwd)
SHARED=${PS_SHARED:-../shared}
command -v git >/dev/null 2>&1 || { skip "git missing"; done_; }
[ -d "$ROOT/.git" ] || [ -f "$ROOT/.git" ] || { skip "not a git checkout"; done_; }

cmds=$(awk '/^## /{on = ($0 ~ /^## Try it/)} on && /^    [^ ]/{sub(/^    /, ""); print}' README.md)
n=$(printf '%s\n' "$cmds" | grep -c .)
demo_cmd=$(printf '%s\n' "$cmds" | sed -n 1p)
test_cmd=$(printf '%s\n' "$cmds" | sed -n 2p)
check "the section holds the set-up + demo command and the set-up --test + make test command (got $n: $(printf '%s' "$cmds" | tr '\n' '|'))" \
    '[ "$n" -eq 2 ] && [ "$demo_cmd" = "sh tools/setup.sh && make demo" ] && [ "$test_cmd" = "sh tools/setup.sh --test && make test" ]'
[ -n "$demo_cmd" ] || { bad "no demo command in README.md"; done_; }
test_setup=${test_cmd% && make test}

W=$(mktemp -d /tmp/ps-test-readme-XXXXXX)
trap 'rm -rf "$W"' EXIT
git clone -q "$ROOT" "$W/promptscore" 2>"$W/clone.err"
check "git clone of the repository ($(cat "$W/clone.err"))" '[ -f "$W/promptscore/README.md" ]'
have_shared=0
if [ -r "$SHARED/models/stories260K.gguf" ]; then
    ln -s "$(cd "$SHARED" && pwd)" "$W/shared"
    have_shared=1
else
    skip "no ../shared: the demo's trained-model path is not checked (set PS_SHARED)"
fi

NP=$(grep -c . examples/prompts.jsonl)
if [ $have_shared -eq 1 ]; then
    (cd "$W/promptscore" && env -u PS_SHARED MAKEFLAGS=-j2 HF_ENDPOINT=http://127.0.0.1:1 \
        PS_CACHE="$W/cache" npm_config_offline=true sh -c "$demo_cmd") >"$W/demo.out" 2>&1; rc=$?
    check "'$demo_cmd' on a fresh clone exits 0 (rc $rc: $(tail -n 5 "$W/demo.out"))" '[ $rc -eq 0 ]'
    check "the set-up said what it did" 'grep -q "^setup: done (base tier)" "$W/demo.out"'
    check "the demo says it uses ../shared's stories260K" 'grep -q "^demo: model ../shared/models/stories260K.gguf" "$W/demo.out"'
    check "one summary line per sample prompt ($NP) and the total" \
        '[ "$(grep -c "^id .*  tokens [0-9]*  sum NLL" "$W/demo.out")" -eq "$NP" ] && grep -q "^total  prompts $NP  errors 0" "$W/demo.out"'
    check "the first prompt token by token" 'grep -q "^== id \"lily\"" "$W/demo.out" && grep -Eq "^ +1  \" Once\" " "$W/demo.out"'
    rm -f "$W/shared"
fi
[ -x "$W/promptscore/$BUILD/promptscore" ] || (cd "$W/promptscore" && make -j2 >/dev/null 2>&1)
(cd "$W/promptscore" && env PS_SHARED="$W/none" HF_ENDPOINT=http://127.0.0.1:1 \
    PS_CACHE="$W/cache" npm_config_offline=true sh -c "$demo_cmd") >"$W/demo2.out" 2>&1; rc=$?
check "offline without ../shared: exit 0, a random model said plainly (rc $rc: $(head -n 3 "$W/demo2.out"))" \
    '[ $rc -eq 0 ] && grep -q "no ../shared and no network" "$W/demo2.out" && grep -q "RANDOM weights" "$W/demo2.out" && grep -q "^total  prompts $NP  errors 0" "$W/demo2.out"'
(cd "$W/promptscore" && npm_config_offline=true sh -c "$test_setup") >"$W/setup-test.out" 2>&1; rc=$?
check "the test set-up '$test_setup' exits 0 and installs the test tier (rc $rc: $(tail -n 3 "$W/setup-test.out"))" \
    '[ $rc -eq 0 ] && grep -q "^setup: done (test tier)" "$W/setup-test.out"'
done_
