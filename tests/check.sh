# tests/check.sh — the shell tests' harness, the counterpart of tests/check.h. Sourced by
# tests/test_*.sh after setting NAME (the summary's name) and FILE (for messages):
#   ok / bad MSG / check MSG 'SHELL CONDITION'   a pass, a failure, or a condition to eval
#   skip MSG        something the test needs is missing (../shared, a tool, a built binary):
#                   a skip with its reason; under CI=true (CI installs everything) a FAILURE
#   cpu_lacks MSG   this CPU lacks an instruction set the case is about (AVX-512 BF16, VNNI,
#                   AMX, ...): "not available on this CPU", never a failure, in CI or not
#   free_ports N    prints N TCP ports of 127.0.0.1, free now, for a daemon that takes a fixed
#                   port (slurmd, nginx): below the kernel's ephemeral range, so no outgoing
#                   connection and no --port 0 listener of a test beside it can take one first;
#                   exits 1 (printing nothing) when it cannot find N
#   done_           prints "<NAME>: N passed, N failed, N skipped" (then ", N not available on
#                   this CPU" when N > 0) and exits 1 when anything failed
pass=0; fail=0; skip=0; cpu=0
ps_ci() { case "${CI:-}" in "" | 0 | false) return 1 ;; *) return 0 ;; esac; }
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $FILE: $1"; }
check() { if eval "$2"; then ok; else bad "$1"; fi; }
skip() {
    if ps_ci; then
        fail=$((fail + 1)); echo "FAIL $FILE: skipped under CI=true (a skip is a failure there): $1"
    else
        skip=$((skip + 1)); echo "SKIP $FILE: $1"
    fi
}
free_ports() {
    python3 - "$1" <<'PYEOF'
import random, socket, sys
try:
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    lo = 32768
out, tries = [], 0
while len(out) < int(sys.argv[1]) and tries < 1000:
    tries += 1
    p = random.randrange(max(1024, lo - 12000), lo) if lo > 2048 else 0
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        p = s.getsockname()[1]
        if p not in out: out.append(p)
    except OSError:
        pass
    finally:
        s.close()
if len(out) < int(sys.argv[1]): sys.exit(1)
print(" ".join(map(str, out)))
PYEOF
}
cpu_lacks() { cpu=$((cpu + 1)); echo "UNAVAILABLE $FILE: not available on this CPU: $1"; }
done_() {
    if [ "$cpu" -gt 0 ]; then
        echo "$NAME: $pass passed, $fail failed, $skip skipped, $cpu not available on this CPU"
    else
        echo "$NAME: $pass passed, $fail failed, $skip skipped"
    fi
    [ "$fail" -eq 0 ]
    exit $?
}
