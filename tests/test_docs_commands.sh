#!/bin/sh
# tests/test_docs_commands.sh — the commands the documentation shows run as written. A code
# block of README.md or docs/*.md (indented or fenced) that follows a line
#     <!-- run -->
# (blank lines between are fine; the comment does not render) is run as a shell script
# (sh -e) and must exit 0. A marker may shrink a long command for the test with substitutions
# applied to the block's text first: <!-- run: -n 1000 => -n 20; --rounds 9 => --rounds 1 -->.
# The blocks of one file run in order in one scratch copy of the repository (a folder next to
# a `shared` link to ../shared, with links to build/, src/, examples/, ... and a copy of
# python/, which pip writes into), so a block can use what an earlier one made (the venv `V`
# of docs/python.md's install command). A file's blocks stop at its first failure. At least
# one block must be marked. Prints "docs_commands: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
SHARED=${PS_SHARED:-../shared}
NAME=docs_commands FILE=test_docs_commands.sh
. tests/check.sh
command -v python3 >/dev/null 2>&1 || { skip "python3 missing"; done_; }
[ -x "$BUILD/promptscore" ] || { bad "no binary $BUILD/promptscore (make first)"; done_; }
[ -r "$SHARED/models/stories260K.gguf" ] || { skip "shared test material not found at $SHARED"; done_; }

T=$(mktemp -d /tmp/ps-test-docs-cmds-XXXXXX)
trap 'rm -rf "$T"' EXIT

# the marked blocks: one file per block under $T/blocks, named FILE.N.sh, in order
python3 - "$T/blocks" README.md docs/*.md <<'EOF' || { bad "reading the marked blocks failed"; done_; }
import os, re, sys
out = sys.argv[1]
os.makedirs(out)
for path in sys.argv[2:]:
    lines = open(path, encoding="utf-8").read().split("\n")
    n, i = 0, 0
    while i < len(lines):
        m = re.match(r"^<!-- run(?::(.*))? -->\s*$", lines[i])
        i += 1
        if not m:
            continue
        subs = [tuple(s.split("=>", 1)) for s in (m.group(1) or "").split(";") if "=>" in s]
        while i < len(lines) and not lines[i].strip():
            i += 1
        block = []
        if i < len(lines) and lines[i].lstrip().startswith("```"):
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith("```"):
                block.append(lines[i])
                i += 1
            i += 1
        else:
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                block.append(lines[i][4:])
                i += 1
        text = "\n".join(block).strip() + "\n"
        for a, b in subs:
            a, b = a.strip(), b.strip()
            if a not in text:
                sys.exit("%s: the substitution %r does not apply to its block" % (path, a))
            text = text.replace(a, b)
        n += 1
        name = "%s.%d.sh" % (path.replace("/", "_"), n)
        open(os.path.join(out, name), "w").write(text)
        print("%s block %d: %s" % (path, n, text.split("\n")[0][:100]))
EOF
count=$(ls "$T/blocks" | wc -l)
check "some documented commands are marked to run (found $count)" '[ "$count" -ge 3 ]'

# a scratch repository per documentation file
for doc in $(ls "$T/blocks" | sed 's/\.[0-9]*\.sh$//' | sort -u); do
    W="$T/w-$doc"
    mkdir -p "$W/repo"
    ln -s "$(cd "$SHARED" && pwd)" "$W/shared"
    for f in Makefile promptscore.pc.in include src tools web examples tests bench fuzz docs contrib README.md; do
        [ -e "$ROOT/$f" ] && ln -s "$ROOT/$f" "$W/repo/$f"
    done
    ln -s "$ROOT/$BUILD" "$W/repo/build"
    cp -r "$ROOT/python" "$W/repo/python"
    failed=""
    for b in $(ls "$T/blocks" | grep "^$doc\.[0-9]*\.sh$" | sort -t. -k2 -n); do
        what="$(echo "$doc" | tr _ /) block ${b#"$doc".}"
        if [ -n "$failed" ]; then bad "$what: not run (an earlier block of the file failed)"; continue; fi
        (cd "$W/repo" && timeout 300 sh -e "$T/blocks/$b") >"$T/out" 2>&1; rc=$?
        if [ $rc -eq 0 ]; then ok; else
            bad "$what exits $rc: $(head -c 300 "$T/blocks/$b" | head -n 2) ... $(tail -n 4 "$T/out")"
            failed=1
        fi
    done
done
done_
