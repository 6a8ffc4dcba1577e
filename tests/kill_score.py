# tests/kill_score.py BIN MODEL DIR — `promptscore score` stopped by SIGINT / SIGTERM while it
# works, writing to a file and to a pipe: the exit status is 128 + the signal, the summary line
# and the "stopped by" line are on stderr, and every output line is whole JSON (an id of the
# input, in order). Several kill times, so some land while a long line is being written.
# Prints one "ok ..." or "FAIL ..." line per case (tests/test_cli_safe.sh counts them).
import json, os, signal, subprocess, sys, time
BIN, MODEL, D = sys.argv[1:4]
inp = os.path.join(D, 'kill.jsonl')
with open(inp, 'w') as f:
    for i in range(3000):
        ids = [1] + [(i * 7 + j * 13) % 500 + 3 for j in range(250)]
        f.write(json.dumps({'id': i, 'prompt': ids, 'logprobs': 40}) + '\n')

def dfl():
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

def run(sig, delay, to_pipe):
    out = os.path.join(D, 'kill.out')
    err = open(os.path.join(D, 'kill.err'), 'w+')
    args = [BIN, 'score', '-m', MODEL, '-i', inp]
    if to_pipe:
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, preexec_fn=dfl)
        data = bytearray()
        t0 = time.time()
        os.set_blocking(p.stdout.fileno(), False)
        sent = False
        while True:
            try:
                chunk = p.stdout.read(65536)
            except BlockingIOError:
                chunk = None
            if chunk:
                data += chunk
            elif chunk == b'':
                break
            if not sent and time.time() - t0 >= delay:
                p.send_signal(sig)
                sent = True
            time.sleep(0.002)
            if time.time() - t0 > 60:
                p.kill()
                break
        rc = p.wait()
    else:
        p = subprocess.Popen(args + ['-o', out], stdout=subprocess.DEVNULL, stderr=err, preexec_fn=dfl)
        time.sleep(delay)
        p.send_signal(sig)
        try:
            rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        data = open(out, 'rb').read()
    err.seek(0)
    e = err.read()
    name = '%s after %.2fs to a %s' % (signal.Signals(sig).name, delay, 'pipe' if to_pipe else 'file')
    fails = []
    if rc != 128 + sig:
        fails.append('exit %d, want %d' % (rc, 128 + sig))
    if 'prompts,' not in e or 'stopped by ' + signal.Signals(sig).name not in e:
        fails.append('no summary / stop line on stderr: %r' % e[-300:])
    if data and not data.endswith(b'\n'):
        fails.append('output ends inside a line (%d bytes)' % len(data))
    lines = data.split(b'\n')[:-1] if data else []
    for n, l in enumerate(lines):
        try:
            j = json.loads(l)
            if j.get('id') != n or 'logprobs' not in j:
                fails.append('line %d: id %r' % (n + 1, j.get('id')))
                break
        except ValueError:
            fails.append('line %d is not JSON (%d bytes)' % (n + 1, len(l)))
            break
    if len(lines) >= 3000:
        fails.append('the run finished before the signal')
    print(('FAIL ' if fails else 'ok ') + name + ' (%d whole lines)' % len(lines) + (': ' + '; '.join(fails) if fails else ''))

for sig, delay, pipe in [(signal.SIGTERM, 0.8, False), (signal.SIGINT, 1.3, False), (signal.SIGTERM, 1.1, True),
                         (signal.SIGINT, 0.7, True), (signal.SIGTERM, 1.7, True)]:
    run(sig, delay, pipe)
