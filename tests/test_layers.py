#!/usr/bin/env python3
"""test_layers.py — the layering of src/, read from the code itself.

src/ holds one folder per layer. The order, lowest first (docs/layout.md says what each holds):

    base < gguf < kernels < model < run < score < front < {serve, gen} < cli

front is the request path that `score` and `serve` share (requests, JSON Lines, the engine,
downloads); serve (HTTP) and gen share a rank above it and never include each other. The checks:
  1. every source file sits in one of these folders;
  2. every `#include "..."` of src/ names a file that exists, as folder/file.h;
  3. an include goes to the same folder or to a lower one, never up or sideways;
  4. no include cycle between modules: a module is a stem (x.c with x.h, plus the x_*.c files
     that share x.h, such as topk_avx2.c); an edge runs from a module to every module whose
     header one of its files includes. A cycle means two concepts each need the other;
  5. no cycle of calls between the objects of different modules (nm of the built objects, when
     BUILD/obj exists): a module that calls into another must not be called back by it.
Closing line: "layers: N passed, N failed, 0 skipped".
"""
import os
import re
import subprocess
import sys

ORDER = ["base", "gguf", "kernels", "model", "run", "score", "front", ("serve", "gen"), "cli"]
RANK = {}
for i, d in enumerate(ORDER):
    for name in (d if isinstance(d, tuple) else (d,)):
        RANK[name] = i

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# PS_LAYERS_SRC: another tree to check (tests/test_layers.sh plants breaks in a copy)
src = os.environ.get("PS_LAYERS_SRC") or os.path.join(root, "src")
passed = 0
failed = 0


def check(ok, msg):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL " + msg)


files = []
for dp, _, fs in os.walk(src):
    for f in fs:
        if f.endswith((".c", ".h")):
            files.append(os.path.relpath(os.path.join(dp, f), src))
files.sort()
inc_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder(rel):
    parts = rel.split(os.sep)
    return parts[0] if len(parts) == 2 else None


def module(rel):
    """folder/stem: x.c and x.h are one module; x_avx2.c joins x when x.h exists beside it."""
    d, base = os.path.split(rel)
    stem = base.rsplit(".", 1)[0]
    if base.endswith(".c") and not os.path.exists(os.path.join(src, d, stem + ".h")):
        head = stem
        while "_" in head:
            head = head.rsplit("_", 1)[0]
            if os.path.exists(os.path.join(src, d, head + ".h")):
                stem = head
                break
    return d + "/" + stem


edges = {}
for rel in files:
    f = folder(rel)
    check(f in RANK, "%s: outside the layer folders (%s)" % (rel, ", ".join(sorted(RANK))))
    text = open(os.path.join(src, rel), encoding="utf-8", errors="replace").read()
    for inc in inc_re.findall(text):
        if inc == "promptscore.h":
            continue
        target = os.path.normpath(inc)
        exists = os.path.exists(os.path.join(src, target))
        tf = folder(target)
        check(exists and tf is not None, "%s includes \"%s\": not a src/<layer>/file.h path" % (rel, inc))
        if not exists or tf is None or f not in RANK:
            continue
        check(tf in RANK, "%s includes %s, outside the layer folders" % (rel, inc))
        if tf not in RANK:
            continue
        up = tf != f and RANK[tf] >= RANK[f]
        check(not up, "%s (%s) includes %s (%s): %s" % (
            rel, f, inc, tf, "upward" if RANK[tf] > RANK[f] else "sideways between siblings"))
        a, b = module(rel), module(target)
        if a != b:
            edges.setdefault(a, set()).add(b)


def find_cycles(graph, what):
    """Every strongly connected component of more than one node is a cycle (Tarjan)."""
    index = {}
    low = {}
    stack = []
    on = set()
    out = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    for comp in out:
        # name one edge chain of the cycle so the failure says where to look
        chain = []
        for a in comp:
            for b in sorted(graph.get(a, ())):
                if b in comp:
                    chain.append("%s -> %s" % (a, b))
        check(False, "%s cycle among %s: %s" % (what, ", ".join(comp), "; ".join(chain)))
    check(not out, "no %s cycle (%d modules)" % (what, len(graph)))


find_cycles(edges, "include")

# 5. calls between objects: which module defines each global symbol, which module uses it
build = os.environ.get("BUILD", "build")
objdir = os.path.join(root, build, "obj")
if os.environ.get("PS_LAYERS_SRC"):
    pass  # a planted copy has no objects of its own
elif os.path.isdir(objdir):
    defined = {}
    used = {}
    for dp, _, fs in os.walk(objdir):
        for f in fs:
            if not f.endswith(".o"):
                continue
            rel = os.path.relpath(os.path.join(dp, f), objdir)[:-2] + ".c"
            if not os.path.exists(os.path.join(src, rel)):
                continue
            m = module(rel)
            out = subprocess.run(["nm", os.path.join(dp, f)], capture_output=True, text=True).stdout
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] in "TDBR":
                    defined[parts[2]] = m
                elif len(parts) == 2 and parts[0] == "U":
                    used.setdefault(m, set()).add(parts[1])
    calls = {}
    for m, syms in used.items():
        for s in syms:
            d = defined.get(s)
            if d and d != m:
                calls.setdefault(m, set()).add(d)
    find_cycles(calls, "call")
    # a call from a lower folder into a higher one is an upward dependency too
    for m, targets in sorted(calls.items()):
        for t in sorted(targets):
            fm, ft = m.split("/")[0], t.split("/")[0]
            if fm in RANK and ft in RANK:
                check(ft == fm or RANK[ft] < RANK[fm],
                      "%s calls into %s: %s" % (m, t, "upward" if RANK[ft] > RANK[fm] else "sideways"))
else:
    print("NOTE no %s: the call check (5) needs the built objects" % objdir)

print("layers: %d passed, %d failed, 0 skipped" % (passed, failed))
sys.exit(1 if failed else 0)
