#!/bin/sh
# tests/test_slurm.sh — contrib/slurm on a real Slurm: Debian's slurm-wlm and munge started
# here as a one-node cluster (munged with a fresh key, slurmctld, slurmd with
# proctrack/linuxproc and task/none, select/cons_tres by CPU; keys, state, spool, logs and pid
# files under a temp dir; ports on 127.0.0.1). A corpus is scored by contrib/slurm/submit.sh as
# a 4-task array plus its dependent merge job (held until the requeue); array task 1 is killed
# mid-way and requeued: its first run starts stopped (PS_BIN is a wrapper that stops itself
# before exec), the test lets it run in short bursts until its shard holds some lines, then
# sends SIGKILL to the stopped scorer, so where the kill lands does not depend on how fast
# this machine is or how loaded (with scancel, which resumes the process before it ends it, a
# loaded machine let it finish first, and the other tasks' end could start the merge before
# the requeue). Checked: the kill landed
# mid-way (no end record), a merge of the shards then fails naming the missing lines, the
# requeued task resumed (--resume kept the lines) and the merge job's output equals a
# single-process `score` run byte for byte. Everything is stopped by pid at the end (trap),
# every wait has a timeout. Without slurm-wlm/munge (or not as root: slurmd runs jobs as their
# user) it skips saying why; under CI=true that is a failure.
# Prints "slurm: N passed, N failed, N skipped".
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
BIN="$ROOT/$BUILD/promptscore"
NAME=slurm; FILE=test_slurm.sh
. tests/check.sh
unavailable() { skip "$1 (.ci/run installs it)"; done_; }

if [ ! -x "$BIN" ]; then bad "no binary $BIN (make first)"; done_; fi
for c in munged slurmctld slurmd sbatch squeue scontrol scancel python3; do
    command -v "$c" >/dev/null 2>&1 ||
        unavailable "$c not found (apt-get install slurm-wlm munge: tools/setup.sh)"
done
[ "$(id -u)" = 0 ] || unavailable "needs root (slurmd starts the jobs as their user)"

T=$(mktemp -d /tmp/ps-test-slurm-XXXXXX)
chmod 700 "$T"
mkdir -p "$T/munge" "$T/state" "$T/spool" "$T/log" "$T/run" "$T/shards"
PIDS=""
JOBS=""
cleanup() {
    if [ -n "$JOBS" ]; then
        scancel $JOBS 2>/dev/null
        i=0
        while [ $i -lt 50 ] && [ -n "$(squeue -h 2>/dev/null)" ]; do sleep 0.2; i=$((i + 1)); done
    fi
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for p in $PIDS; do
        i=0
        while [ $i -lt 50 ] && kill -0 "$p" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    if [ "$fail" -gt 0 ]; then
        for f in "$T"/log/*; do echo "---- $f"; tail -n 15 "$f"; done
    fi
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
# waits up to $1 tenths of a second for the command $2 to succeed
wait_for() {
    n=0
    while [ $n -lt "$1" ]; do eval "$2" && return 0; sleep 0.1; n=$((n + 1)); done
    return 1
}

# ---- the cluster ----------------------------------------------------------------------------
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$T/munge/munge.key"
SOCK="$T/munge/munge.socket.2"
munged -F --force --key-file="$T/munge/munge.key" --socket="$SOCK" \
    --pid-file="$T/munge/munged.pid" --log-file="$T/log/munged.log" \
    --seed-file="$T/munge/munged.seed" 2>>"$T/log/munged.log" &
PIDS="$!"
wait_for 100 '[ -S "$SOCK" ]'
check "munged is up (socket within 10 s)" '[ -S "$SOCK" ]'
ports=$(free_ports 2) || { bad "no two free ports below the ephemeral range"; done_; }
CTLD_PORT=${ports% *}; SLURMD_PORT=${ports#* }
H=$(hostname -s)
CPUS=$(nproc)
cat > "$T/slurm.conf" <<EOF
ClusterName=pstest
SlurmctldHost=$H(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/run/slurmctld.pid
SlurmdPidFile=$T/run/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
JobRequeue=1
MinJobAge=600
KillWait=2
NodeName=pstest1 NodeHostname=$H NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=500 State=UNKNOWN
PartitionName=test Nodes=pstest1 Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$T/slurm.conf"
slurmctld -D -f "$SLURM_CONF" 2>>"$T/log/slurmctld.log" &
PIDS="$! $PIDS"
slurmd -D -f "$SLURM_CONF" -N pstest1 2>>"$T/log/slurmd.log" &
PIDS="$! $PIDS"
wait_for 300 'sinfo -h -o %t 2>/dev/null | grep -q idle'
check "the node is idle within 30 s ($(sinfo -h 2>&1 | head -n 1))" \
    'sinfo -h -o %t 2>/dev/null | grep -q idle'
[ "$fail" -eq 0 ] || done_

# ---- the corpus and the single-process run --------------------------------------------------
G="$T/g.gguf"
"$BIN" gen-model -o "$G" --arch qwen3 --n-embd 256 --n-layer 4 --n-ff 512 --seed 7 >/dev/null 2>&1
awk 'BEGIN {
    srand(12)
    for (i = 0; i < 800; i++) {
        if (i % 97 == 5) { print ""; continue }
        if (i % 101 == 7) { printf "{\"id\": %d, \"prompt\": [1, 99999]}\n", i; continue }
        n = 20 + int(rand() * 100); s = ""
        for (j = 0; j < n; j++) s = s (j ? "," : "") int(rand() * 512)
        printf "{\"id\": %d, \"prompt\": [%s], \"logprobs\": %d}\n", i, s, i % 3 == 0 ? 5 : 1
    } }' > "$T/corpus.jsonl"
"$BIN" score -m "$G" -i "$T/corpus.jsonl" -o "$T/single.jsonl" -t 1 2>"$T/log/single.err"
rc=$?
check "single-process score (rc $rc)" '[ $rc -eq 0 ] && [ -s "$T/single.jsonl" ]'

# ---- the array and its merge job ------------------------------------------------------------
export PS_MODEL="$G" PS_INPUT="$T/corpus.jsonl" PS_OUT="$T/shards" PS_RESULT="$T/merged.jsonl"
# task 1's first run stops itself before it becomes the scorer (exec keeps the pid)
{
    echo '#!/bin/sh'
    echo 'case " $* " in'
    echo "*\" --shard 1/4 \"*) [ -e \"$T/stopped\" ] || { echo \$\$ > \"$T/stopped\"; kill -STOP \$\$; } ;;"
    echo 'esac'
    echo "exec \"$BIN\" \"\$@\""
} > "$T/ps-wrap"
chmod +x "$T/ps-wrap"
export PS_BIN="$T/ps-wrap"
ids=$(cd "$T" && bash "$ROOT/contrib/slurm/submit.sh" 4 --cpus-per-task=1 \
    --output="$T/log/score-%A_%a.log" 2>"$T/log/submit.err")
A=$(echo "$ids" | sed -nE 's/^array ([0-9]+) merge ([0-9]+)$/\1/p')
M=$(echo "$ids" | sed -nE 's/^array ([0-9]+) merge ([0-9]+)$/\2/p')
JOBS="$A $M"
check "submit.sh submitted the array and the merge job ($ids $(cat "$T/log/submit.err"))" \
    '[ -n "$A" ] && [ -n "$M" ]'
[ "$fail" -eq 0 ] || done_
S1="$T/shards/shard-1-of-4.jsonl"
records() { n=$(grep -c '"ps_line"' "$1" 2>/dev/null); echo "${n:-0}"; }
scontrol hold "$M"
rc=$?
check "scontrol hold $M, the merge job, until task 1 is requeued (rc $rc)" '[ $rc -eq 0 ]'
stopped() { [ "$(ps -o stat= -p "$1" 2>/dev/null | cut -c1)" = T ]; }
wait_for 3000 '[ -s "$T/stopped" ] && stopped "$(cat "$T/stopped")"'
P1=$(cat "$T/stopped" 2>/dev/null)
# short bursts of running until the shard holds 15 lines (each ends with the scorer stopped)
i=0
while [ -n "$P1" ] && [ $i -lt 3000 ] && [ "$(records "$S1")" -lt 15 ]; do
    kill -CONT "$P1"; sleep 0.02; kill -STOP "$P1"
    while [ $i -lt 3000 ] && kill -0 "$P1" 2>/dev/null && ! stopped "$P1"; do
        sleep 0.01; i=$((i + 1))
    done
    i=$((i + 1))
done
n_before=$(records "$S1")
kill -KILL "$P1" 2>/dev/null
rc=$?
check "task 1's scorer (pid ${P1:-none}) killed (rc $rc) while stopped with $n_before lines in its shard" \
    '[ -n "$P1" ] && [ $rc -eq 0 ] && [ "$n_before" -ge 15 ]'
state() { scontrol show job "$1" 2>/dev/null | sed -nE 's/.*JobState=([A-Z_]+).*/\1/p' | head -n 1; }
wait_for 200 'case "$(state "${A}_1")" in CANCELLED|FAILED) true;; *) false;; esac'
st=$(state "${A}_1")
check "task 1 ended by the kill (state $st)" '[ "$st" = CANCELLED ] || [ "$st" = FAILED ]'
# (CANCELLED is shown once the node has finished killing; still, wait for the file to settle)
n_killed=$(records "$S1"); i=0
while [ $i -lt 20 ]; do
    sleep 0.3; n=$(records "$S1"); [ "$n" = "$n_killed" ] && break; n_killed=$n; i=$((i + 1))
done
check "the kill landed mid-way: shard 1 has $n_killed of its 200 lines and no end record" \
    '[ "$n_killed" -lt 200 ] && ! grep -q "ps_end" "$S1"'
# merge sees that the killed shard did not finish (to a scratch file; the others still run)
"$BIN" merge -o "$T/early.jsonl" "$S1" 2>"$T/early.err"
rc=$?
check "a merge of the killed shard fails: exit 2, says so, writes nothing (rc $rc: $(tr '\n' ' ' < "$T/early.err"))" \
    '[ $rc -eq 2 ] && grep -Eq "shard-1-of-4.jsonl (has no end record|: line [0-9]+ is half written)" "$T/early.err" && [ ! -e "$T/early.jsonl" ]'
scontrol requeue "${A}_1"
rc=$?
# a requeued job waits ~2 minutes before it is eligible again; start it now
scontrol update jobid="${A}_1" StartTime=now
check "scontrol requeue ${A}_1 (rc $rc)" '[ $rc -eq 0 ]'
scontrol release "$M"
rc=$?
check "scontrol release $M (rc $rc)" '[ $rc -eq 0 ]'
wait_for 6000 'case "$(state "$M")" in COMPLETED|FAILED|CANCELLED|TIMEOUT) true;; *) false;; esac'
st=$(state "$M")
check "the merge job completed within 600 s (state $st; $(squeue -h 2>&1 | tr '\n' ' '))" \
    '[ "$st" = COMPLETED ]'
check "task 1 was started again (restart count 1)" \
    'grep -q "restart 1" "$T/log/score-${A}_1.log"'
check "task 1 resumed after the lines it had ($(grep -- "--resume" "$T/log/score-${A}_1.log"))" \
    'grep -q -- "--resume: .* holds $n_killed lines of shard 1/4" "$T/log/score-${A}_1.log"'
for i in 0 2 3; do
    st=$(state "${A}_$i")
    check "task $i completed (state $st)" '[ "$st" = COMPLETED ]'
done
check "the merged output == the single-process run, byte for byte" \
    'cmp "$T/merged.jsonl" "$T/single.jsonl"'
echo "NOTE: shard 1 held $n_before lines at the kill, $n_killed after; $(grep -- "--resume" "$T/log/score-${A}_1.log")"
done_
