#!/bin/sh
# tests/test_cli_flags.sh — the command line as llama.cpp and vLLM users type it, the same in
# every subcommand:
#   - -h/--help (exit 0, "usage: promptscore CMD" on stdout, every alias listed), --version
#     (exit 0, the same "promptscore X.Y.Z" everywhere), an unknown option, a missing value and
#     a stray argument (exit 2, one line on stderr naming it), no model (exit 2, usage), a model
#     that does not load (exit 1);
#   - each alias does what its long form does: -m/--model, -c/--ctx-size/--ctx, -t/--threads,
#     -k/--logprobs/--top-k, -ngl/--n-gpu-layers (accepted, a note that this build runs on the
#     CPU, same output), -hf/--hf/--hf-repo (from a pre-filled cache, no network) on score,
#     perplexity, tokenize, bench and serve; serve's -a/--alias/--served-model-name/--name
#     (GET /v1/models) and -np/--parallel/--workers (the banner); bench -t LIST and lengths
#     over the context (exit 2); gen-model -c/--ctx-size/--ctx/--n-ctx.
# Needs ../shared/models/stories260K.gguf ($PS_SHARED overrides) and python3.
# Prints "cli_flags: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SHARED=${PS_SHARED:-../shared}
MODEL="$SHARED/models/stories260K.gguf"
BIN="$BUILD/promptscore"
NAME=cli_flags FILE=test_cli_flags.sh
. tests/check.sh

if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
if [ ! -r "$MODEL" ]; then
    skip "shared test material not found at $SHARED (set PS_SHARED)"; done_
fi
command -v python3 >/dev/null 2>&1 || { skip "python3 missing"; done_; }
T=$(mktemp -d /tmp/ps-test-cli-flags-XXXXXX)
spid=""
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$T"' EXIT

printf 'Once upon a time' > "$T/text0.txt"
VERSION=$("$BIN" --version)
check "promptscore --version (got '$VERSION')" 'echo "$VERSION" | head -n 1 | grep -Eq "^promptscore [0-9]+\.[0-9]+\.[0-9]+$"'

# ---- the same behaviour in every subcommand --------------------------------------------------
for c in score perplexity tokenize serve bench gen-model merge; do
    for h in -h --help; do
        "$BIN" $c $h >"$T/help" 2>"$T/err"; rc=$?
        check "$c $h: exit 0, usage on stdout, nothing on stderr (rc $rc)" \
            '[ $rc -eq 0 ] && head -n 1 "$T/help" | grep -q "^usage: promptscore $c " && [ ! -s "$T/err" ]'
    done
    check "$c --help lists -h, --help and --version" \
        'grep -q -- "-h, --help" "$T/help" && grep -q -- "--version" "$T/help"'
    v=$("$BIN" $c --version 2>/dev/null); rc=$?
    check "$c --version = promptscore --version (rc $rc, '$v')" '[ $rc -eq 0 ] && [ "$v" = "$VERSION" ]'
    "$BIN" $c --no-such-option >/dev/null 2>"$T/err"; rc=$?
    check "$c unknown option: exit 2, one line naming it (rc $rc)" \
        '[ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q -- "unknown option .--no-such-option." "$T/err"'
    [ $c = merge ] && continue # merge takes its shard files as arguments
    "$BIN" $c stray >/dev/null 2>"$T/err"; rc=$?
    check "$c stray argument: exit 2 naming it (rc $rc)" '[ $rc -eq 2 ] && grep -q "stray" "$T/err"'
done
for c in score perplexity tokenize serve bench; do
    "$BIN" $c -m >/dev/null 2>"$T/err"; rc=$?
    check "$c -m without a value: exit 2 naming -m (rc $rc)" '[ $rc -eq 2 ] && grep -q -- "-m needs a value" "$T/err"'
    f=""; [ $c = perplexity ] && f="-f $T/text0.txt"
    "$BIN" $c $f </dev/null >/dev/null 2>"$T/err"; rc=$?
    check "$c without a model: exit 2 (rc $rc: $(cat "$T/err"))" '[ $rc -eq 2 ] && grep -q "no model" "$T/err"'
    "$BIN" $c -m "$T/missing.gguf" $f </dev/null >/dev/null 2>"$T/err"; rc=$?
    check "$c with a missing model file: exit 1 naming it (rc $rc)" '[ $rc -eq 1 ] && grep -q "missing.gguf" "$T/err"'
    "$BIN" $c --help >"$T/help"
    for a in "-m, --model" "-hf, --hf, --hf-repo" "-ngl, --n-gpu-layers"; do
        check "$c --help lists '$a'" 'grep -q -- "$a" "$T/help"'
    done
done
for c in score perplexity serve bench; do
    "$BIN" $c --help >"$T/help"
    for a in "-c, --ctx-size" "-t, --threads" "--act"; do
        check "$c --help lists '$a'" 'grep -q -- "$a" "$T/help"'
    done
done
for c in score bench; do
    "$BIN" $c --help >"$T/help"
    check "$c --help lists -k, --logprobs" 'grep -q -- "-k, --logprobs" "$T/help"'
done
"$BIN" serve --help >"$T/help"
for a in "-a, --alias, --served-model-name, --name" "-np, --parallel, --workers"; do
    check "serve --help lists '$a'" 'grep -q -- "$a" "$T/help"'
done
"$BIN" gen-model --help >"$T/help"
check "gen-model --help lists -c, --ctx-size, --ctx, --n-ctx" 'grep -q -- "-c, --ctx-size, --ctx, --n-ctx" "$T/help"'
"$BIN" score -m "$MODEL" --threads=x </dev/null >/dev/null 2>"$T/err"; rc=$?
check "--threads=x: exit 2 with the range (rc $rc)" '[ $rc -eq 2 ] && grep -q -- "--threads wants an integer in 0..1024, got .x." "$T/err"'
"$BIN" score -m "$MODEL" --strict=1 </dev/null >/dev/null 2>"$T/err"; rc=$?
check "a flag given a value: exit 2 (rc $rc)" '[ $rc -eq 2 ] && grep -q -- "--strict takes no value" "$T/err"'

# ---- score: every alias gives what its long form gives -----------------------------------------
printf '{"id":1,"prompt":"Once upon a time, there was a girl"}\n' > "$T/in.jsonl"
"$BIN" score --model "$MODEL" --logprobs 4 --threads 1 --ctx 64 -i "$T/in.jsonl" >"$T/ref" 2>/dev/null
check "score reference run" '[ -s "$T/ref" ] && grep -q "\"mean_logprob\"" "$T/ref"'
for args in "-m $MODEL -k 4 -t 1 -c 64" "-m $MODEL --top-k 4 -t 1 --ctx-size 64" \
            "--model=$MODEL --logprobs=4 --threads=2 --ctx-size=64" \
            "-m $MODEL -k 4 -c 64 -ngl 99" "-m $MODEL -k 4 -c 64 --n-gpu-layers 0"; do
    "$BIN" score $args -i "$T/in.jsonl" >"$T/o" 2>"$T/err"; rc=$?
    check "score $args = the long forms (rc $rc)" '[ $rc -eq 0 ] && cmp -s "$T/o" "$T/ref"'
done
"$BIN" score -m "$MODEL" -ngl 99 -i "$T/in.jsonl" >/dev/null 2>"$T/err"
check "-ngl 99: one note that this build runs on the CPU" 'grep -c "runs on the CPU" "$T/err" | grep -qx 1'
"$BIN" score -m "$MODEL" -c 4 -i "$T/in.jsonl" >"$T/o" 2>/dev/null
check "score -c 4: the prompt is over the context" 'grep -q "context_length_exceeded" "$T/o"'
python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).readline()); sys.exit(0 if all(len(t)==4 or len(t)==5 for t in d["logprobs"]["top_ids"][1:]) else 1)' "$T/ref"
rc=$?
check "-k 4: 4 (or 5) alternatives per position" '[ $rc -eq 0 ]'

# ---- -hf from a pre-filled cache (no network: HF_ENDPOINT is a closed port) ------------------------
mkdir -p "$T/cache/org/tiny"
cp "$MODEL" "$T/cache/org/tiny/stories.gguf"
export PS_CACHE="$T/cache" HF_ENDPOINT="http://127.0.0.1:1"
for hf in -hf --hf --hf-repo; do
    "$BIN" score $hf org/tiny:stories.gguf --logprobs 4 --threads 1 --ctx 64 -i "$T/in.jsonl" >"$T/o" 2>"$T/err"; rc=$?
    check "score $hf REPO:FILE from the cache = -m (rc $rc)" '[ $rc -eq 0 ] && cmp -s "$T/o" "$T/ref" && grep -q "using cached" "$T/err"'
done
"$BIN" score -hf org/tiny:stories.gguf -m "$MODEL" -i "$T/in.jsonl" >/dev/null 2>"$T/err"; rc=$?
check "-hf and -m together: exit 2 (rc $rc)" '[ $rc -eq 2 ] && grep -q "not both" "$T/err"'
"$BIN" score -hf org/tiny:Q4_K_M -i "$T/in.jsonl" >/dev/null 2>"$T/err"; rc=$?
check "-hf REPO:QUANT needs the listing: no network is exit 1 naming the repo (rc $rc)" '[ $rc -eq 1 ] && grep -q "org/tiny" "$T/err"'
printf 'Once upon a time' | "$BIN" tokenize -hf org/tiny:stories.gguf >"$T/o" 2>/dev/null; rc=$?
check "tokenize -hf (rc $rc: $(cat "$T/o"))" '[ $rc -eq 0 ] && [ "$(cat "$T/o")" = "1 403 407 261 378" ]'
printf 'Once upon a time, there was a little girl named Lily. She liked to play.' > "$T/text.txt"
"$BIN" perplexity -hf org/tiny:stories.gguf -f "$T/text.txt" >"$T/o1" 2>/dev/null; rc1=$?
"$BIN" perplexity -m "$MODEL" -f "$T/text.txt" >"$T/o2" 2>/dev/null; rc2=$?
check "perplexity -hf = -m (rc $rc1 $rc2)" '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && cmp -s "$T/o1" "$T/o2"'
"$BIN" perplexity -m "$MODEL" -f "$T/text.txt" -c 8 >"$T/o1" 2>/dev/null
"$BIN" perplexity -m "$MODEL" -f "$T/text.txt" --ctx-size 8 >"$T/o2" 2>/dev/null
check "perplexity -c 8 = --ctx-size 8, windows of 8" 'cmp -s "$T/o1" "$T/o2" && grep -q "ctx 8, stride 4" "$T/o1"'
"$BIN" bench -hf org/tiny:stories.gguf -t 1 --lengths 16 -k 3 --json >"$T/o" 2>"$T/err"; rc=$?
check "bench -hf (rc $rc)" '[ $rc -eq 0 ] && grep -q "\"tokens\": 16" "$T/o"'
unset PS_CACHE HF_ENDPOINT

# ---- bench -------------------------------------------------------------------------------------
"$BIN" bench -m "$MODEL" -t 2 -l 16 --logprobs 3 --json >"$T/o" 2>/dev/null; rc=$?
check "bench -t 2 is 2 threads alone (rc $rc)" '[ $rc -eq 0 ] && [ "$(grep -c "\"threads\": 2, .*\"pass\": \"steady\"" "$T/o")" -eq 1 ] && ! grep -q "\"threads\": 1," "$T/o" && grep -q "\"k\": 3" "$T/o"'
"$BIN" bench -m "$MODEL" -t 1,2 -l 16 --json >"$T/o" 2>/dev/null; rc=$?
check "bench -t 1,2: both (rc $rc)" '[ $rc -eq 0 ] && grep -q "\"threads\": 1," "$T/o" && grep -q "\"threads\": 2," "$T/o"'
"$BIN" bench -m "$MODEL" --lengths 99999 >/dev/null 2>"$T/err"; rc=$?
check "bench --lengths over the context: exit 2 at once, naming it (rc $rc)" '[ $rc -eq 2 ] && grep -q "99999 is longer than the context, 2048" "$T/err"'
"$BIN" bench -m "$MODEL" -c 64 -l 100 >/dev/null 2>"$T/err"; rc=$?
check "bench -c 64 -l 100: exit 2 (rc $rc)" '[ $rc -eq 2 ] && grep -q "100 is longer than the context, 64" "$T/err"'
"$BIN" bench -m "$MODEL" -t 1 -l 16,32 --json | head -n 1 >"$T/o"
check "bench output reaches a pipe line by line" 'grep -q "\"tokens\": 16" "$T/o"'

# ---- gen-model -c ------------------------------------------------------------------------------
for a in "-c" "--ctx-size" "--ctx" "--n-ctx"; do
    "$BIN" gen-model -o "$T/g.gguf" $a 96 2>/dev/null
    "$BIN" perplexity -m "$T/g.gguf" -f "$T/text.txt" >"$T/o" 2>/dev/null
    check "gen-model $a 96 writes a context of 96" 'grep -q "ctx 96," "$T/o"'
done

# ---- the integer parsers (cli_opts.c): a minus sign is never a huge --seed; lists ------------
for v in "-5" " -5" "5x" "" "18446744073709551616"; do
    "$BIN" gen-model -o "$T/s.gguf" --seed "$v" 2>"$T/e"
    rc=$?
    check "gen-model --seed '$v' exits 2 naming --seed" '[ $rc -eq 2 ] && grep -q -- "--seed wants an integer >= 0" "$T/e"'
done
"$BIN" gen-model -o "$T/s.gguf" --seed 18446744073709551615 2>/dev/null
rc=$?
check "gen-model --seed 2^64-1 is accepted" '[ $rc -eq 0 ]'
for v in "1,,2" ",1" "0" "1,2x" "1048577"; do
    "$BIN" bench -m "$MODEL" -t "$v" 2>"$T/e" >/dev/null
    rc=$?
    check "bench -t '$v' exits 2 naming -t" '[ $rc -eq 2 ] && grep -q -- "-t wants a comma-separated list" "$T/e"'
done

# ---- serve: -a/--alias/--served-model-name/--name, -np/--parallel/--workers, -c, -hf ------------
serve() { # args...: starts serve, sets port (empty when it did not start)
    rm -f "$T/serve.err" # (a stale one would give the last server's port)
    : >"$T/serve.err"
    "$BIN" serve --port 0 -t 1 -q "$@" 2>>"$T/serve.err" &
    spid=$!
    port=""
    for i in $(seq 1 50); do
        port=$(sed -nE 's/.*listening on http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$T/serve.err")
        [ -n "$port" ] && break
        sleep 0.1
    done
}
stop() { kill $spid 2>/dev/null; wait $spid 2>/dev/null; spid=""; }
models() { python3 -c 'import json,sys,urllib.request; d=json.load(urllib.request.urlopen("http://127.0.0.1:%s/v1/models" % sys.argv[1], timeout=5)); m=d["data"][0]; print(m["id"], m["max_model_len"])' "$port"; }
for a in -a --alias --served-model-name --name; do
    serve -m "$MODEL" $a "my-$a" -c 512
    check "serve $a: /v1/models says it (and -c 512)" '[ -n "$port" ] && [ "$(models)" = "my-$a 512" ]'
    stop
done
for a in -np --parallel --workers; do
    serve -m "$MODEL" $a 2
    check "serve $a 2: two workers" '[ -n "$port" ] && grep -q "2 worker(s)" "$T/serve.err"'
    stop
done
mkdir -p "$T/cache/org/tiny"
PS_CACHE="$T/cache" HF_ENDPOINT="http://127.0.0.1:1" serve -hf org/tiny:stories.gguf --ctx-size 256 -ngl 33
check "serve -hf from the cache, --ctx-size 256, -ngl noted" '[ -n "$port" ] && [ "$(models)" = "llama 256" ] && grep -q "runs on the CPU" "$T/serve.err"'
stop
done_
