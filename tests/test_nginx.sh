#!/bin/sh
# tests/test_nginx.sh — contrib/nginx/promptscore.conf in front of two `promptscore serve`
# replicas: Debian's nginx started here on 127.0.0.1 with a config in a temp dir (pid, logs,
# temp paths there; the contrib file included with its ports replaced), 2 replicas of a
# gen-model model, and 4 clients sending lm-evaluation-harness-shaped requests (token-id
# prompts, echo, logprobs 1, max_tokens 1; 160 in all) while replica 1 is SIGKILLed after
# the 40th answer, once nginx's log shows an answer from each replica. Checked: zero failed
# requests at the clients, every answer's choices bitwise equal (the raw JSON text) to what a
# single server answers alone, both replicas answered before the kill and the survivor after
# it (counted in the log, no timing), and nginx retried requests of the dead replica on the other one (its log shows
# both upstreams for a request). Body size: a body over client_max_body_size gets 413 from
# nginx. Bounded: every request has a 60 s timeout, the load 240 s in all. Without nginx it
# skips saying why; under CI=true that is a failure.
# Prints "nginx: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
BIN="$ROOT/$BUILD/promptscore"
NAME=nginx; FILE=test_nginx.sh
. tests/check.sh
unavailable() { skip "$1 (.ci/run installs it)"; done_; }
if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
NGINX=$(command -v nginx || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; })
[ -n "$NGINX" ] || unavailable "nginx not found (apt-get install nginx: tools/setup.sh)"
command -v python3 >/dev/null 2>&1 || unavailable "python3 not found"

T=$(mktemp -d /tmp/ps-test-nginx-XXXXXX)
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for p in $PIDS; do
        i=0
        while [ $i -lt 50 ] && kill -0 "$p" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    if [ "$fail" -gt 0 ]; then
        for f in "$T"/*.log "$T"/*.err; do [ -e "$f" ] && { echo "---- $f"; tail -n 15 "$f"; }; done
    fi
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
wait_for() {
    n=0
    while [ $n -lt "$1" ]; do eval "$2" && return 0; sleep 0.1; n=$((n + 1)); done
    return 1
}

G="$T/g.gguf"
# small: the test is about the balancer, and it must stay quick under the sanitizers too
"$BIN" gen-model -o "$G" --arch qwen3 --n-embd 128 --n-layer 4 --n-ff 384 --seed 9 >/dev/null 2>&1
check "gen-model wrote the model" '[ -s "$G" ]'
# serve NAME: starts a replica on a free port; sets PORT and adds the pid to PIDS
serve() {
    name=$1
    "$BIN" serve -m "$G" --port 0 -t 1 -q > "$T/$name.log" 2>&1 &
    pid=$!
    PIDS="$PIDS $pid"
    eval "PID_$name=$pid"
    wait_for 100 'grep -qs "listening on" "$T/$name.log"'
    PORT=$(sed -nE 's/.*listening on http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$T/$name.log")
    eval "PORT_$name=$PORT"
}
serve single
serve r1
serve r2
check "three servers listening ($PORT_single $PORT_r1 $PORT_r2)" \
    '[ -n "$PORT_single" ] && [ -n "$PORT_r1" ] && [ -n "$PORT_r2" ]'
[ "$fail" -eq 0 ] || done_

# nginx: the contrib upstream + server, on a free port, everything under $T
LB=$(free_ports 1) || { bad "no free port below the ephemeral range"; done_; }
sed -e "s/127\.0\.0\.1:8081/127.0.0.1:$PORT_r1/" -e "s/127\.0\.0\.1:8082/127.0.0.1:$PORT_r2/" \
    -e "s/127\.0\.0\.1:8080/127.0.0.1:$LB/" contrib/nginx/promptscore.conf > "$T/promptscore.conf"
check "the contrib config names both replicas and the listen port" \
    '[ "$(grep -cE "127.0.0.1:($PORT_r1|$PORT_r2|$LB)" "$T/promptscore.conf")" -eq 3 ]'
mkdir -p "$T/tmp"
user=""; [ "$(id -u)" = 0 ] && user="user root;"
cat > "$T/nginx.conf" <<EOC
$user
worker_processes 1;
pid $T/nginx.pid;
error_log $T/nginx-error.log info;
events { worker_connections 256; }
http {
    log_format up '\$status \$request_length \$uri [\$upstream_addr] [\$upstream_status]';
    access_log $T/nginx-access.log up;
    client_body_temp_path $T/tmp/body;
    proxy_temp_path $T/tmp/proxy;
    fastcgi_temp_path $T/tmp/fastcgi;
    uwsgi_temp_path $T/tmp/uwsgi;
    scgi_temp_path $T/tmp/scgi;
    include $T/promptscore.conf;
}
EOC
"$NGINX" -t -p "$T" -e "$T/nginx-error.log" -c "$T/nginx.conf" >"$T/nginx-t.err" 2>&1
rc=$?
check "nginx -t accepts the config (rc $rc: $(tail -n 2 "$T/nginx-t.err"))" '[ $rc -eq 0 ]'
[ "$fail" -eq 0 ] || done_
"$NGINX" -p "$T" -e "$T/nginx-error.log" -c "$T/nginx.conf" -g 'daemon off;' 2>>"$T/nginx.err" &
PIDS="$PIDS $!"
wait_for 100 'python3 -c "import urllib.request as u; u.urlopen(\"http://127.0.0.1:$LB/health\", timeout=1)" 2>/dev/null'
check "nginx passes /health to a replica" \
    'python3 -c "import urllib.request as u, sys; r = u.urlopen(\"http://127.0.0.1:$LB/health\", timeout=5); sys.exit(r.status != 200)"'

cat > "$T/load.py" <<'PY'
import json, os, random, signal, sys, threading, time, urllib.request, urllib.error
single, lb, kill_pid, name = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
access_log, r1, r2 = sys.argv[5], int(sys.argv[6]), int(sys.argv[7])
rng = random.Random(7)
prompts = [[1] + [rng.randrange(2, 512) for _ in range(rng.randint(20, 150))] for _ in range(40)]
def post(port, ids, timeout=60):
    body = json.dumps({"model": name, "prompt": ids, "echo": True, "logprobs": 1,
                       "max_tokens": 1, "temperature": 0}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % port, body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read().decode()
def choices(text):  # the raw JSON text from "choices" on: no id, no created
    return text[text.index('"choices":'):]
base = []
for p in prompts:
    st, t = post(single, p)
    assert st == 200, st
    base.append(choices(t))
lock = threading.Lock()
done = [0]; failures = []; mismatches = []; killed = [False]; at_kill = [0]
def both_answered():  # the access log holds a 200 from each replica: (lines, yes)
    with open(access_log) as f:
        text = f.read()
    return text.count("\n"), all("/v1/completions [127.0.0.1:%d] [200]" % p in text
                                  for p in (r1, r2))
t_end = time.time() + 240
def client(c):
    order = list(range(len(prompts)))
    random.Random(c).shuffle(order)
    for i in order:
        if time.time() > t_end:
            with lock: failures.append("client %d: out of time" % c)
            return
        try:
            st, t = post(lb, prompts[i])
            ok = st == 200
        except Exception as e:
            ok, t = False, repr(e)
        with lock:
            if not ok:
                failures.append("client %d prompt %d: %s" % (c, i, t[:200]))
            elif choices(t) != base[i]:
                mismatches.append("client %d prompt %d" % (c, i))
            done[0] += 1
            # the kill: after the 40th answer, once each replica has answered (counted in
            # nginx's log, not timed: a slow replica 1 is waited for)
            if done[0] >= 40 and not killed[0]:
                lines, yes = both_answered()
                if yes:
                    os.kill(kill_pid, signal.SIGKILL)
                    killed[0] = True
                    at_kill[0] = lines
ths = [threading.Thread(target=client, args=(c,)) for c in range(4)]
for t in ths: t.start()
for t in ths: t.join()
print(json.dumps({"done": done[0], "failures": failures, "mismatches": mismatches,
                  "killed": killed[0], "at_kill": at_kill[0]}))
PY
MODEL_ID=$(python3 -c "import json, urllib.request as u; print(json.load(u.urlopen('http://127.0.0.1:$PORT_single/v1/models', timeout=5))['data'][0]['id'])")
timeout 300 python3 "$T/load.py" "$PORT_single" "$LB" "$PID_r1" "$MODEL_ID" \
    "$T/nginx-access.log" "$PORT_r1" "$PORT_r2" > "$T/load.out" 2>"$T/load.err"
rc=$?
res=$(cat "$T/load.out")
check "the load ran to its end (rc $rc: $(tail -n 3 "$T/load.err"))" '[ $rc -eq 0 ] && [ -n "$res" ]'
field() { python3 -c "import json, sys; r = json.loads(sys.argv[1]); print($1)" "$res" 2>/dev/null; }
killed=$(field 'r["killed"]'); ndone=$(field 'r["done"]')
nfail=$(field 'len(r["failures"])'); nmis=$(field 'len(r["mismatches"])')
check "replica 1 was SIGKILLed mid-run (after the 40th answer, once both had answered)" \
    '[ "$killed" = True ] && ! kill -0 "$PID_r1" 2>/dev/null'
check "all 160 requests answered ($ndone)" '[ "$ndone" = 160 ]'
check "zero failed requests at the clients ($nfail: $(field 'r["failures"][:3]'))" '[ "$nfail" = 0 ]'
check "every answer bitwise equal to the single server's ($nmis differ: $(field 'r["mismatches"][:3]'))" \
    '[ "$nmis" = 0 ]'
AL="$T/nginx-access.log"
# counted, not timed: every replica answered before the kill, and the survivor after it (the
# log lines before and after the kill; a request in flight to replica 1 at the kill is retried
# on replica 2, its line naming both)
at_kill=$(field 'r["at_kill"]')
n1=$(head -n "$at_kill" "$AL" | grep -c "/v1/completions \[127.0.0.1:$PORT_r1\] \[200\]")
n2=$(head -n "$at_kill" "$AL" | grep -c "/v1/completions \[127.0.0.1:$PORT_r2\] \[200\]")
check "both replicas answered before the kill (r1 $n1, r2 $n2 of the first $at_kill)" \
    '[ "$n1" -ge 1 ] && [ "$n2" -ge 1 ]'
n2a=$(tail -n +"$((at_kill + 1))" "$AL" | grep -cE "127.0.0.1:$PORT_r2\] \[([0-9-]+, )?200\]")
check "the survivor answered after the kill (r2 $n2a)" '[ "$n2a" -ge 1 ]'
nr=$(grep -cE "\[127.0.0.1:$PORT_r1, 127.0.0.1:$PORT_r2\] \[[0-9-]+, 200\]" "$AL")
check "nginx retried requests of the dead replica on the other one ($nr retried)" '[ "$nr" -ge 1 ]'
echo "NOTE: before the kill r1 answered $n1, r2 $n2; after it r2 $n2a; $nr retried from r1 to r2"
check "nginx answered every request 200" '! grep -qvE "^200 " "$AL"'
# client_max_body_size 16m (= serve --max-body): a larger body gets 413 from nginx itself
code=$(python3 - "$LB" <<'PY2'
import sys, urllib.request, urllib.error
body = b'{"prompt": "' + b"a" * (17 << 20) + b'"}'
req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % sys.argv[1], body,
                             {"Content-Type": "application/json"})
try:
    print(urllib.request.urlopen(req, timeout=30).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception as e:
    print("error", e)
PY2
)
check "a 17 MiB body gets 413 (got $code)" '[ "$code" = 413 ]'
check "the 413 came from nginx, not a replica" 'grep -qE "^413 .* \[-?\] \[-?\]$" "$AL"'
done_
