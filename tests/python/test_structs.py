"""The ctypes copies of the public structs (every Structure in promptscore._lib) against
include/promptscore.h: a small C program, compiled here with cc, prints sizeof and, for each
field ctypes names, offsetof and the member's size; the same program's debug information
(readelf, the build tier's binutils) lists every member the C struct has, in order, so a field
added to the header and not to _lib.py fails here even where padding hides it from sizeof."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

from promptscore import _lib
from conftest import REPO

HEADER = os.path.join(REPO, "include", "promptscore.h")


def structures():
    out = []
    for name in dir(_lib):
        obj = getattr(_lib, name)
        if isinstance(obj, type) and issubclass(obj, ctypes.Structure) and obj is not ctypes.Structure:
            out.append(obj)
    return sorted(out, key=lambda s: s.__name__)


def c_program(structs):
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "promptscore.h"',
             'int main(void) {']
    for s in structs:
        n = s.__name__
        lines.append('    printf("%%s %%zu\\n", "%s", sizeof(%s));' % (n, n))
        for f in s._fields_:
            lines.append('    printf("%%s.%%s %%zu %%zu\\n", "%s", "%s", offsetof(%s, %s), '
                         'sizeof(((%s *)0)->%s));' % (n, f[0], n, f[0], n, f[0]))
    lines += ['    return 0;', '}']
    return "\n".join(lines) + "\n"


_DIE = re.compile(r"^\s*<(\d+)><([0-9a-f]+)>: Abbrev Number: \d+ \((DW_TAG_\w+)\)")
_ATTR = re.compile(r"^\s*<[0-9a-f]+>\s+(DW_AT_\w+)\s*: (.*)$")


def dwarf_members(dump):
    """{typedef name: [member names in order]} of the structs in readelf's dump."""
    dies = []
    for line in dump.splitlines():
        m = _DIE.match(line)
        if m:
            dies.append([int(m.group(1)), int(m.group(2), 16), m.group(3), {}])
            continue
        m = _ATTR.match(line)
        if m and dies:
            v = m.group(2).strip()
            if "(indirect" in v:
                v = v.rsplit("): ", 1)[-1]
            dies[-1][3][m.group(1)] = v
    members = {}
    for i, (depth, off, tag, _) in enumerate(dies):
        if tag != "DW_TAG_structure_type":
            continue
        names = []
        for d2, _, t2, a2 in dies[i + 1:]:
            if d2 <= depth:
                break
            if d2 == depth + 1 and t2 == "DW_TAG_member":
                names.append(a2.get("DW_AT_name"))
        members[off] = names
    out = {}
    for depth, off, tag, a in dies:
        if tag == "DW_TAG_typedef":
            ref = re.match(r"<0x([0-9a-f]+)>", a.get("DW_AT_type", ""))
            if ref and int(ref.group(1), 16) in members:
                out[a["DW_AT_name"]] = members[int(ref.group(1), 16)]
    return out


def check_structs(structs, header_dir, tmp):
    """Compiles the program against header_dir/promptscore.h; returns the list of mismatches."""
    src = os.path.join(tmp, "layout.c")
    exe = os.path.join(tmp, "layout")
    with open(src, "w") as f:
        f.write(c_program(structs))
    p = subprocess.run(["cc", "-g", "-std=c11", "-I", header_dir, src, "-o", exe],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return ["the program naming _lib.py's fields does not compile against the header "
                "(a field missing or renamed in C): " + p.stderr[-1500:]]
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    c = {}
    for line in out.splitlines():
        k, *vals = line.split()
        c[k] = [int(v) for v in vals]
    bad = []
    for s in structs:
        n = s.__name__
        if c[n][0] != ctypes.sizeof(s):
            bad.append("%s: sizeof %d in C, %d in ctypes" % (n, c[n][0], ctypes.sizeof(s)))
        for f in s._fields_:
            off, size = c["%s.%s" % (n, f[0])]
            field = getattr(s, f[0])
            if (off, size) != (field.offset, field.size):
                bad.append("%s.%s: offset %d size %d in C, %d %d in ctypes" %
                           (n, f[0], off, size, field.offset, field.size))
    dump = subprocess.run(["readelf", "--debug-dump=info", exe], capture_output=True,
                          text=True, check=True).stdout
    members = dwarf_members(dump)
    for s in structs:
        names = [f[0] for f in s._fields_]
        if members.get(s.__name__) != names:
            bad.append("%s: the C members %s, ctypes %s" % (s.__name__, members.get(s.__name__),
                                                            names))
    return bad


@pytest.fixture(scope="module")
def tools():
    for t in ("cc", "readelf"):
        if not shutil.which(t):
            pytest.skip("%s is not installed (the build tier has it)" % t)
    if not os.path.exists(HEADER):
        pytest.skip("%s is missing" % HEADER)


def test_every_structure_is_checked():
    names = {s.__name__ for s in structures()}
    assert {"ps_error", "ps_model_params", "ps_model_info", "ps_session_params",
            "ps_score_params", "ps_score_result", "ps_score_prompt", "ps_ppl_params",
            "ps_ppl_result", "ps_prefix_cache_params", "ps_prefix_cache_stats"} <= names


def test_structs_match_the_header(tools, tmp_path):
    bad = check_structs(structures(), os.path.dirname(HEADER), str(tmp_path))
    assert not bad, "\n".join(bad)


def test_a_field_added_in_c_only_is_found(tools, tmp_path):
    # the check can fail: a copy of the header with one more field at the end of
    # ps_model_params (where it fits in the padding: sizeof does not change) and of
    # ps_score_result, and one with a member's type widened
    with open(HEADER) as f:
        h = f.read()
    planted = h.replace("    bool no_repack;", "    bool no_repack;\n    bool planted_flag;", 1)
    planted = planted.replace("    float *dp;               /* n_total:",
                              "    int32_t planted_count;\n    float *dp;               /* n_total:", 1)
    assert planted != h and planted.count("planted_") == 2
    d = tmp_path / "h1"
    d.mkdir()
    (d / "promptscore.h").write_text(planted)
    bad = check_structs(structures(), str(d), str(tmp_path))
    assert any("ps_model_params: the C members" in b and "planted_flag" in b for b in bad), bad
    assert any("ps_score_result" in b for b in bad), bad
    m = re.search(r"typedef struct \{[^}]*\} ps_prefix_cache_params;", h)
    assert m
    widened = h[:m.start()] + m.group(0).replace("int32_t block;", "int64_t block;") + h[m.end():]
    assert widened != h
    d = tmp_path / "h2"
    d.mkdir()
    (d / "promptscore.h").write_text(widened)
    bad = check_structs(structures(), str(d), str(tmp_path))
    assert any(b.startswith("ps_prefix_cache_params") for b in bad), bad
