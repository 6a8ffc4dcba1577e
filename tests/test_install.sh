#!/bin/sh
# tests/test_install.sh — the installable library, checked from the outside: `make install
# PREFIX=DIR` into an empty temporary folder (and DESTDIR staging), then, using only the
# installed header, libraries and `pkg-config --cflags --libs promptscore`
# (PKG_CONFIG_PATH=DIR/lib/pkgconfig), builds examples/score.c against the shared library and
# against the static one, runs both on ../shared/models/stories260K.gguf ($PS_SHARED
# overrides) and compares every logprob with `promptscore score` bit for bit (as float32).
# The exports: `nm -D` of the installed .so defines exactly the functions declared in the
# installed promptscore.h (all ps_), and neither library needs curl, jansson, microhttpd or
# OpenBLAS (readelf NEEDED, undefined symbols). Prints "install: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SHARED=${PS_SHARED:-../shared}
MODEL="$SHARED/models/stories260K.gguf"
NAME=install; FILE=test_install.sh
. tests/check.sh

for tool in pkg-config nm readelf cc python3; do
    command -v "$tool" >/dev/null 2>&1 || { skip "$tool missing"; done_; }
done

T=$(mktemp -d /tmp/ps-test-install-XXXXXX)
trap 'rm -rf "$T"' EXIT
P="$T/prefix"

# ---- make install into an empty folder ---------------------------------------------------
# Run from `make test`, MAKEFLAGS carries BUILD, SAN and OPT, so this copies what was built.
if ! make -s --no-print-directory BUILD="$BUILD" install PREFIX="$P" >"$T/install.log" 2>&1; then
    bad "make install PREFIX=$P failed: $(tail -n 5 "$T/install.log")"; done_
fi
for f in bin/promptscore include/promptscore.h lib/libpromptscore.a lib/libpromptscore.so \
         lib/libpromptscore.so.0 lib/pkgconfig/promptscore.pc; do
    check "installed $f" '[ -e "$P/$f" ]'
done
check "libpromptscore.so.0 is the SONAME" \
    'readelf -d "$P/lib/libpromptscore.so" | grep -q "SONAME.*\[libpromptscore\.so\.0\]"'
check "the installed binary runs" '"$P/bin/promptscore" --version >/dev/null 2>&1'

# DESTDIR stages under another root while the .pc keeps the real prefix
if make -s --no-print-directory BUILD="$BUILD" install PREFIX=/opt/ps DESTDIR="$T/stage" \
        >"$T/stage.log" 2>&1; then
    check "DESTDIR: files under DESTDIR/PREFIX" \
        '[ -f "$T/stage/opt/ps/lib/libpromptscore.a" ] && [ -f "$T/stage/opt/ps/include/promptscore.h" ]'
    check "DESTDIR: the .pc names PREFIX, not DESTDIR" \
        'grep -qx "prefix=/opt/ps" "$T/stage/opt/ps/lib/pkgconfig/promptscore.pc" && ! grep -q "$T" "$T/stage/opt/ps/lib/pkgconfig/promptscore.pc"'
else
    bad "make install DESTDIR=... failed: $(tail -n 5 "$T/stage.log")"
fi

# ---- pkg-config: the core's link line only -----------------------------------------------
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
flags=$(pkg-config --cflags --libs promptscore 2>"$T/pc.err")
check "pkg-config --cflags --libs promptscore: -I, -L and -lpromptscore ($flags)" \
    'echo " $flags " | grep -q -- " -I$P/include " && echo " $flags " | grep -q -- " -L$P/lib " && echo " $flags " | grep -q -- " -lpromptscore "'
static=$(pkg-config --static --libs promptscore)
for l in -lpcre2-8 -lm -pthread; do
    check "pkg-config --static --libs has $l ($static)" 'echo " $static " | grep -q -- " $l "'
done
check "promptscore.pc names no front-end library" \
    '! grep -Eq "curl|jansson|microhttpd|openblas" "$P/lib/pkgconfig/promptscore.pc"'

# ---- exports: exactly the public header's functions --------------------------------------
cc -E -P "$P/include/promptscore.h" | grep -o 'ps_[a-z0-9_]*[[:space:]]*(' | tr -d '( \t' \
    | sort -u >"$T/declared"
nm -D --defined-only "$P/lib/libpromptscore.so" | awk '$2 ~ /^[TtWwDdBbRrVvi]$/ {print $3}' \
    | sort -u >"$T/exported"
check "the header declares functions ($(wc -l <"$T/declared"))" '[ "$(wc -l <"$T/declared")" -ge 30 ]'
extra=$(comm -13 "$T/declared" "$T/exported" | tr '\n' ' ')
missing=$(comm -23 "$T/declared" "$T/exported" | tr '\n' ' ')
check "nm -D exports nothing the header does not declare (extra: $extra)" '[ -z "$extra" ]'
check "nm -D exports every function the header declares (missing: $missing)" '[ -z "$missing" ]'
check "every export starts with ps_" '! grep -qv "^ps_" "$T/exported"'
check "test hooks are not exported" \
    '! grep -Eq "^(ps_alloc_fail_after|ps_alloc_count|ps_pool_for)$" "$T/exported"'

# ---- dependencies: PCRE2, libm, pthreads (libc) only -------------------------------------
needed=$(readelf -d "$P/lib/libpromptscore.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
check "the .so needs libpcre2-8 ($needed)" 'echo "$needed" | grep -q "libpcre2-8"'
check "the .so needs no curl, jansson, microhttpd or OpenBLAS ($needed)" \
    '! echo "$needed" | grep -Eq "curl|jansson|microhttpd|openblas|blas"'
undef_so=$(nm -D --undefined-only "$P/lib/libpromptscore.so" | grep -Ec ' (curl_|json_|MHD_|cblas_|openblas)')
check "the .so calls no curl_/json_/MHD_/cblas_ symbol ($undef_so)" '[ "$undef_so" -eq 0 ]'
undef_a=$(nm "$P/lib/libpromptscore.a" 2>/dev/null | grep -Ec ' U (curl_|json_|MHD_|cblas_|openblas)')
check "the .a calls no curl_/json_/MHD_/cblas_ symbol ($undef_a)" '[ "$undef_a" -eq 0 ]'

# ---- examples/score.c against the installed copy -----------------------------------------
# A sanitized build (make check) installs a sanitized library; its users link the runtime too.
san=""
[ -n "${PS_SANITIZED:-}" ] && san="-fsanitize=address,undefined"
if ! cc -std=c11 -Wall -Wextra -Werror $san -o "$T/score" examples/score.c \
        $(pkg-config --cflags --libs promptscore) 2>"$T/cc.log"; then
    bad "examples/score.c does not build with pkg-config alone: $(head -n 5 "$T/cc.log")"; done_
fi
ok
check "the example links the installed libpromptscore.so.0" \
    'LD_LIBRARY_PATH="$P/lib" ldd "$T/score" | grep -q "$P/lib/libpromptscore.so.0"'
# static: the archive plus the private link line (-lpromptscore from the .a, not the .so)
if cc -std=c11 -Wall -Wextra -Werror $san -o "$T/score_static" examples/score.c \
        $(pkg-config --cflags promptscore) "$P/lib/libpromptscore.a" \
        $(pkg-config --static --libs promptscore | sed 's/-lpromptscore//') 2>"$T/cc2.log"; then
    ok
    check "the static example needs no libpromptscore.so" \
        '! ldd "$T/score_static" | grep -q libpromptscore'
else
    bad "examples/score.c does not link statically: $(head -n 5 "$T/cc2.log")"
fi

if [ ! -r "$MODEL" ]; then
    skip "shared test material not found at $SHARED (set PS_SHARED)"; done_
fi
TEXT="Once upon a time, there was a little girl named Lily. She loved to play outside."
if LD_LIBRARY_PATH="$P/lib" "$T/score" "$MODEL" "$TEXT" >"$T/out.txt" 2>"$T/err.txt"; then
    ok
else
    bad "examples/score.c failed: $(head -n 5 "$T/err.txt")"; done_
fi
if [ -x "$T/score_static" ]; then
    "$T/score_static" "$MODEL" "$TEXT" >"$T/out_static.txt" 2>&1
    check "static and shared examples print the same" 'cmp -s "$T/out.txt" "$T/out_static.txt"'
fi
check "usage error exits 2" '"$T/score_static" >/dev/null 2>&1; [ $? -eq 2 ]'
check "a missing model is a clear error, exit 1" \
    'LD_LIBRARY_PATH="$P/lib" "$T/score" "$T/none.gguf" x 2>"$T/e2"; [ $? -eq 1 ] && grep -q "score: .*none.gguf" "$T/e2"'

# the same sentence through the installed CLI: same ids, the same float32 logprobs
printf '{"id": 1, "prompt": "%s", "logprobs": 1}\n' "$TEXT" >"$T/in.jsonl"
if "$P/bin/promptscore" score -m "$MODEL" -i "$T/in.jsonl" -o "$T/cli.jsonl" 2>"$T/cli.err"; then
    res=$(python3 - "$T/out.txt" "$T/cli.jsonl" <<'EOF'
import json, math, struct, sys
f32 = lambda x: struct.pack("<f", float(x))
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
total = rows.pop()
assert total[0] == "sum_logprob", total
cli = json.loads(open(sys.argv[2]).readline())
lp = cli["logprobs"]
ids = [int(r[1]) for r in rows]
assert len(rows) >= 10, "too few tokens: %d" % len(rows)
assert ids == lp["token_ids"], (ids, lp["token_ids"])
assert rows[0][2] == "-" and lp["token_logprobs"][0] is None
for i in range(1, len(rows)):
    a, b = float(rows[i][2]), lp["token_logprobs"][i]
    assert math.isfinite(a) and a <= 0, (i, a)
    assert f32(a) == f32(b), (i, a, b)
    top_id, top_lp = lp["top_ids"][i][0]  # [[id, logprob], ...] in rank order
    assert int(rows[i][3]) == top_id and f32(rows[i][4]) == f32(top_lp), (i, rows[i][3:5], top_id, top_lp)
    assert float(rows[i][4]) >= a, (i, rows[i][4], a)
assert abs(float(total[1]) - cli["sum_logprob"]) <= 1e-6 * abs(cli["sum_logprob"]), (total, cli["sum_logprob"])
print("ok %d" % len(rows))
EOF
)
    check "example and CLI agree: ids, float32 logprobs, top ids, sum ($res)" \
        'echo "$res" | grep -q "^ok [0-9]"'
else
    bad "promptscore score failed: $(head -n 5 "$T/cli.err")"
fi
done_
