#!/bin/sh
# quantize_compare.sh — promptscore against llama.cpp on files quantised by llama.cpp's own
# quantiser, every ftype, every architecture promptscore runs.
#
#   contrib/llama-cpp/quantize_compare.sh LLAMA_BUILD_DIR [WORK_DIR] [MODEL ...]
#
# Run from the repository root after `make`. LLAMA_BUILD_DIR is a llama.cpp build holding
# bin/llama-quantize and lscore (see README.md; LSCORE=PATH points elsewhere). WORK_DIR
# (default /tmp/ps-quantize-compare) receives the files and results.tsv. MODEL names a subset
# of the list below (default: all of them).
#
# For each model: gen-model writes it in F32 (or it is taken from ../shared/models), then for
# each ftype:
#   1. llama-quantize F32 -> QUANT (imatrix-free; every ftype here needs none);
#   2. llama-quantize --allow-requantize QUANT -> F32 again: ggml's own dequantisation;
#   3. dequant_check QUANT F32: promptscore's dequantisation of every tensor, with every ISA,
#      bitwise ggml's;
#   4. compare.py QUANT --reference: promptscore (native activations) against llama.cpp, and
#      llama.cpp's two CPU paths against each other (the noise floor); where promptscore and
#      llama.cpp first part by more than 1e-4, each one's distance from the float64 reference
#      (tests/reference/forward.py --native-act), and ties.py's closest rounding boundary at
#      that position (in float32 ulps, and in which tensor);
#   5. compare.py QUANT --act f32 against llama.cpp on the dequantised F32 file: the same
#      weights in float on both sides, so float32 rounding is all that may differ.
# results.tsv has one line per file; a failing step is written as FAIL and the run goes on. A
# file llama-quantize itself refuses (a row its fallbacks cannot hold: stories260K's FFN of 172
# columns for the legacy types, llama-2-tiny-random's 8) is listed as such and is no failure.
# summary.md has summarize.py's tables. Exit status 1 when a step failed or a dequantisation
# was not bitwise ggml's, else 0 (the figures are for a person to judge: see README.md).
set -u
LB=${1:?usage: quantize_compare.sh LLAMA_BUILD_DIR [WORK_DIR] [MODEL ...]}
W=${2:-/tmp/ps-quantize-compare}
[ $# -ge 2 ] && shift 2 || shift 1
PS=${PROMPTSCORE:-build/promptscore}
QZ=$LB/bin/llama-quantize
LS=${LSCORE:-$LB/lscore}
SHARED=${SHARED:-../shared/models}
N=${N:-300}
HERE=$(dirname "$0")
VOCABS=${LLAMA_MODELS:-$LB/../models}  # llama.cpp's models/ (ggml-vocab-phi-3.gguf for phi3)
for f in "$PS" "$QZ" "$LS"; do
    [ -x "$f" ] || { echo "quantize_compare: $f is missing (build it first)" >&2; exit 2; }
done
mkdir -p "$W"
cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -o "$W/dequant_check" "$HERE/dequant_check.c" \
    build/libpromptscore.a -lm -pthread || exit 2

DENSE="Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS"
MOE="$DENSE MXFP4_MOE"
Q3="--n-layer 2 --n-head 4 --n-head-kv 2 --head-dim 64 --n-vocab 1024"

# name | gen-model options ("shared:FILE" takes ../shared/models/FILE) | ftypes
models() {
    cat <<EOF
stories260K|shared:stories260K.gguf|$DENSE
llama-2-tiny-random|shared:llama-2-tiny-random.gguf|$DENSE
llama-tiny|--preset tiny|$DENSE
llama-256|--arch llama --n-embd 256 --n-ff 768 $Q3|$DENSE
qwen2-256|--arch qwen2 --n-embd 256 --n-ff 768 $Q3|$DENSE
qwen3-256-tied|--arch qwen3 --n-embd 256 --n-ff 768 --tied $Q3|$DENSE
qwen3-0.6b-like|--arch qwen3 --n-embd 256 --n-ff 768 --n-layer 3 --n-head 4 --n-head-kv 2 --head-dim 128 --n-vocab 1024 --tied|$DENSE
qwen3-384-ff640|--arch qwen3 --n-embd 384 --n-ff 640 --n-layer 2 --n-head 6 --n-head-kv 2 --head-dim 64 --n-vocab 1024|$DENSE
gemma2-tiny|--preset gemma2-tiny|$DENSE
gemma3-256|--preset gemma3-tiny --n-embd 256 --n-ff 768 --n-vocab 1024|$DENSE
phi3-tiny|--preset phi3-tiny --vocab $VOCABS/ggml-vocab-phi-3.gguf|$DENSE
phi3-256|--preset phi3-tiny --n-embd 256 --n-ff 768 --n-head 4 --n-head-kv 4 --head-dim 64 --vocab $VOCABS/ggml-vocab-phi-3.gguf|$DENSE
olmo2-256|--preset olmo2-tiny --n-embd 256 --n-ff 768 --n-head 4 --n-head-kv 4 --head-dim 64 --n-vocab 1024|$DENSE
qwen3moe-256|--preset qwen3moe-tiny --n-embd 256 --n-ff-exp 256 --n-vocab 1024|$MOE
mixtral-tiny|--preset mixtral-tiny|$MOE
qwen35-256|--preset qwen35-tiny --n-embd 256 --n-ff 768 --n-vocab 1024|$DENSE
qwen35moe-256|--preset qwen35moe-tiny --n-embd 256 --n-ff-exp 256 --n-vocab 1024|$MOE
gpt-oss-256|--preset gpt-oss-tiny --n-embd 256 --n-ff-exp 256 --n-vocab 1024|$MOE
EOF
}

bad=0
R=$W/results.tsv
printf 'model\tftype\ttypes\tdequant\tnative_dlp\tnative_dtop\tnative_far\tnative_near\tnative_first\tfloor_dlp\tfloor_dtop\tfloor_far\tfloor_near\tfloor_first\tpart\tpart_ps_ref\tpart_ll_ref\tpart_tie_ulps\tpart_tie_in\tf32_dlp\tf32_dtop\tf32_far\tf32_near\tf32_first\n' > "$R"
models | while IFS='|' read -r name opts ftypes; do
    if [ $# -gt 0 ]; then
        hit=0; for m in "$@"; do [ "$m" = "$name" ] && hit=1; done
        [ $hit = 1 ] || continue
    fi
    src=$W/$name.F32.gguf
    case $opts in
        shared:*) f=$SHARED/${opts#shared:}
                  [ -f "$f" ] || { echo "quantize_compare: $f is absent, $name skipped" >&2; continue; }
                  src=$f ;;
        *) $PS gen-model -o "$src" $opts > /dev/null || { echo "$name: gen-model failed" >&2; bad=1; continue; } ;;
    esac
    for ft in $ftypes; do
        q=$W/$name.$ft.gguf
        d=$W/$name.$ft.f32.gguf
        if ! "$QZ" "$src" "$q" "$ft" 1 > "$W/$name.$ft.log" 2>&1; then
            why=$(grep 'no tensor type fallback' "$W/$name.$ft.log" |
                  grep -o '[a-z0-9_.]*weight *- ncols *[0-9]* not divisible by *[0-9]*' | tr -s ' ' | head -1)
            printf '%s\t%s\tllama-quantize refuses: %s\n' "$name" "$ft" "${why:-see $name.$ft.log}" >> "$R"
            echo "$name $ft: llama-quantize refuses (${why:-see $W/$name.$ft.log})" >&2
            continue
        fi
        "$QZ" --allow-requantize "$q" "$d" F32 1 > /dev/null 2>&1 || { echo "$name $ft: dequantise failed" >&2; }
        dq=$("$W/dequant_check" "$q" "$d" 2>&1); rc=$?
        types=$(printf '%s\n' "$dq" | awk '$3 == "tensors" && $1 != "f32" {printf "%s%s", s, $1; s = ","}')
        if [ $rc = 0 ]; then dv=bitwise; else dv=FAIL; printf '%s\n' "$dq" > "$W/$name.$ft.dequant"; fi
        nat=$("$HERE/compare.py" "$q" --n "$N" --lscore "$LS" --promptscore "$PS" --tsv \
                 --reference 2>&1) || nat="FAIL: $(printf '%s' "$nat" | tr '\t\n' '  ')"
        part=$(printf '%s' "$nat" | cut -f11)
        tie='-	-'
        case $part in
            ''|-|FAIL*) ;;
            *) tie=$("$HERE/ties.py" "$q" --n "$N" --positions "$part" 2>&1 |
                     sed -n 's/.*boundary \([0-9.]*\) float32 ulps, in \(.*\)/\1\t\2/p')
               [ -n "$tie" ] || tie='FAIL	ties.py' ;;
        esac
        nat=$(printf '%s\t%b' "$nat" "$tie")
        f32=$("$HERE/compare.py" "$q" --n "$N" --lscore "$LS" --promptscore "$PS" --lscore-model "$d" \
                 --no-floor --tsv -- --act f32 2>&1) \
            || f32="FAIL: $(printf '%s' "$f32" | tr '\t\n' '  ')"
        f32=$(printf '%s' "$f32" | cut -f1-5)
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$ft" "$types" "$dv" "$nat" "$f32" >> "$R"
        printf '%-20s %-9s %-26s %s | %s | %s\n' "$name" "$ft" "$types" "$dv" \
            "$(printf '%s' "$nat" | cut -f1,5,6,10-15)" "$(printf '%s' "$f32" | cut -f1)"
        rm -f "$d"
    done
done
"$HERE/summarize.py" "$R" > "$W/summary.md"
cat "$W/summary.md"
awk -F'\t' 'NR > 1 && $3 !~ /^llama-quantize refuses/ && ($4 != "bitwise" || $0 ~ /FAIL/) {bad = 1}
             END {exit bad}' "$R"
