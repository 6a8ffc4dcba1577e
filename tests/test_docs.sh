#!/bin/sh
# tests/test_docs.sh — the documentation holds together:
#   - README.md has at most 300 lines (the rest lives in docs/);
#   - every relative link of README.md and docs/*.md resolves: the file or folder exists and,
#     for a link to a heading (`file.md#anchor` or `#anchor`), the target file has a heading
#     whose GitHub anchor is that (lower case, punctuation dropped, spaces to hyphens, -1, -2
#     for repeats); links inside code (fenced, indented, `spans`) are not links;
#   - every src/ path that docs/layout.md, README.md or docs/*.md names exists (globs such as
#     src/kernels/topk*.c match at least one file), and every file under src/ is named in
#     docs/layout.md (a new file gets its line there);
#   - every Debian package tools/setup.sh installs (both tiers, `--test --list`) is named in
#     README.md's dependency table;
#   - every repository path a code comment names exists: the comments of the C, JavaScript,
#     shell and Python files under src/, include/, tests/, bench/, fuzz/, tools/, python/ and of
#     the Makefile (and Python's docstrings), a path being a top folder of this repository and
#     what follows it (globs match at least one file). Accepted without existing: a path that
#     .gitignore covers (made by a build, a test or the set-up) and one that follows the words
#     "llama.cpp" on its line (that project's tree). A file that moves leaves no comment behind
#     that names its old place.
# python3 (the standard library only) does the reading. Prints "docs: N passed, ...".
cd "$(dirname "$0")/.." || exit 1
NAME=docs FILE=test_docs.sh
. tests/check.sh
command -v python3 >/dev/null 2>&1 || { skip "python3 missing"; done_; }

PKGS=$(sh tools/setup.sh --test --list 2>/dev/null | tr '\n' ' ')
out=$(PS_DOCS_PKGS="$PKGS" python3 - <<'EOF'
import fnmatch, glob, os, re, sys

def code_free(text, spans=True):
    """The lines of a Markdown file with code removed: fenced blocks, indented blocks (after a
    blank line) and, unless spans is false, inline code spans. Returns (line number, text)
    pairs."""
    out, fence, prev_blank, in_indent = [], None, True, False
    for n, line in enumerate(text.split("\n"), 1):
        s = line.lstrip()
        if fence:
            if s.startswith(fence):
                fence = None
            prev_blank = False
            continue
        if s.startswith("```") or s.startswith("~~~"):
            fence = s[:3]
            continue
        if line.startswith("    ") and (prev_blank or in_indent):
            in_indent = True
            continue
        if line.strip() == "":
            prev_blank = True
            # a blank line inside an indented block keeps it open
            continue
        in_indent = False
        prev_blank = False
        out.append((n, re.sub(r"`+[^`]*`+", "", line) if spans else line))
    return out

def slug(heading):
    h = heading.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)      # drop punctuation (backticks, parentheses, dots, ...)
    return h.replace(" ", "-")

def anchors(path, cache={}):
    if path not in cache:
        seen, found = {}, set()
        for _, line in code_free(open(path, encoding="utf-8").read(), spans=False):
            m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            s = slug(m.group(2))
            k = seen.get(s, 0)
            found.add(s if k == 0 else "%s-%d" % (s, k))
            seen[s] = k + 1
        cache[path] = found
    return cache[path]

res = []
def check(ok, msg):
    res.append(("PASS " if ok else "FAIL ") + msg)

readme = open("README.md", encoding="utf-8").read()
n = readme.count("\n")
check(n <= 300, "README.md has at most 300 lines (it has %d)" % n)

files = ["README.md"] + sorted(glob.glob("docs/*.md"))
link = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
nlinks = 0
for f in files:
    # the code spans are dropped before links are looked for; their raw text is still checked
    # for a link written around a span: [`x`](y) leaves [](y), which still matches
    for lineno, line in code_free(open(f, encoding="utf-8").read()):
        for target in link.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):     # http:, https:, mailto:
                continue
            nlinks += 1
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            where = "%s:%d: %s" % (f, lineno, target)
            if not os.path.exists(dest):
                check(False, "%s: %s does not exist" % (where, dest))
                continue
            if frag and dest.endswith(".md"):
                check(frag in anchors(dest), "%s: no heading with anchor #%s in %s" % (where, frag, dest))
            else:
                check(True, where)
check(nlinks > 0, "found relative links to check (%d)" % nlinks)

# src/ paths named by the layout map, the README and the other pages
named = set()
srcpath = re.compile(r"(?<![\w./-])src/[A-Za-z0-9_.*/-]*[A-Za-z0-9_*/]")
for f in ["docs/layout.md", "README.md"] + [d for d in files if d != "docs/layout.md" and d != "README.md"]:
    if not os.path.exists(f):
        check(False, "%s exists" % f)
        continue
    for lineno, line in enumerate(open(f, encoding="utf-8").read().split("\n"), 1):
        for p in srcpath.findall(line):
            ok = bool(glob.glob(p)) if "*" in p else os.path.exists(p)
            check(ok, "%s:%d names %s%s" % (f, lineno, p, "" if ok else ", which does not exist"))
            if f == "docs/layout.md":
                named.update(glob.glob(p) if "*" in p else [p])
for p in sorted(glob.glob("src/*/*")):
    check(p in named, "docs/layout.md names %s" % p)

# repository paths named in code comments
def c_comments(text):
    """(line number, text) of every comment of C or JavaScript source: /* */ and //, outside
    string and character literals."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            line += text.count("\n", i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j
            for k, part in enumerate(text[i + 2:j].split("\n")):
                out.append((line + k, part))
            line += text.count("\n", i, j)
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append((line, text[i + 2:j]))
            i = j - 1
        i += 1
    return out

def hash_comments(text, docstrings):
    """(line number, text) of every # comment of a shell, Python or make file (a # that starts
    a line or follows a blank, outside quotes on that line), plus Python's docstrings."""
    out = []
    for ln, l in enumerate(text.split("\n"), 1):
        q = None
        for k, c in enumerate(l):
            if q:
                if c == q:
                    q = None
            elif c in "\"'":
                q = c
            elif c == "#" and (k == 0 or l[k - 1] in " \t"):
                out.append((ln, l[k + 1:]))
                break
    if docstrings:
        for m in re.finditer(r'"""(.*?)"""', text, re.S):
            first = text.count("\n", 0, m.start()) + 1
            for k, part in enumerate(m.group(1).split("\n")):
                out.append((first + k, part))
    return out

ignored = []
for l in open(".gitignore", encoding="utf-8").read().split("\n"):
    l = l.strip()
    if l and not l.startswith("#"):
        ignored.append(l.rstrip("/"))
def generated(p):
    """whether .gitignore covers p or a folder above it"""
    parts = p.rstrip("/").split("/")
    for k in range(1, len(parts) + 1):
        head, name = "/".join(parts[:k]), parts[k - 1]
        for g in ignored:
            if g.startswith("/") and fnmatch.fnmatch(head, g[1:]):
                return True
            if not g.startswith("/") and "/" not in g and fnmatch.fnmatch(name, g):
                return True
            if not g.startswith("/") and "/" in g and fnmatch.fnmatch(head, g):
                return True
    return False

repo_path = re.compile(r"(?<![\w./$-])(?:src|include|tests|bench|fuzz|tools|python|docs|web|"
                       r"examples|contrib)/[A-Za-z0-9_.*/-]*[A-Za-z0-9_*/]")
code = ["Makefile"]
for top in ["src", "include", "tests", "bench", "fuzz", "tools", "python"]:
    for root, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if not generated(os.path.join(root, d)) and
                         d not in ("corpus", "data", "__pycache__"))
        code += [os.path.join(root, f) for f in sorted(names)]
npaths = 0
for f in code:
    ext = os.path.splitext(f)[1]
    try:
        text = open(f, encoding="utf-8").read()
    except (UnicodeDecodeError, OSError):
        continue
    if ext in (".c", ".h", ".js", ".mjs", ".cjs"):
        comments = c_comments(text)
    elif ext in (".sh", ".py") or f == "Makefile" or text.startswith("#!"):
        comments = hash_comments(text, ext == ".py")
    else:
        continue
    for lineno, c in comments:
        for m in repo_path.finditer(c):
            p = m.group(0)
            if "llama.cpp" in c[:m.start()]:
                continue
            npaths += 1
            ok = bool(glob.glob(p)) if "*" in p else os.path.exists(p) or generated(p)
            if not ok:
                check(False, "%s:%d: a comment names %s, which does not exist" % (f, lineno, p))
check(npaths > 100, "code comments name repository paths that exist (%d checked)" % npaths)

pkgs = os.environ.get("PS_DOCS_PKGS", "").split()
check(len(pkgs) > 10, "tools/setup.sh --test --list gives the packages (%d)" % len(pkgs))
for p in pkgs:
    check("`%s`" % p in readme, "README.md names the Debian package %s" % p)
print("\n".join(res))
EOF
)
rc=$?
check "the checker ran (python3 exit $rc)" '[ $rc -eq 0 ]'
# one line per check: PASS msg | FAIL msg
while IFS= read -r l; do
    case "$l" in
        "PASS "*) ok ;;
        "FAIL "*) bad "${l#FAIL }" ;;
        *) [ -n "$l" ] && bad "unexpected checker output: $l" ;;
    esac
done <<EOF
$out
EOF
done_
