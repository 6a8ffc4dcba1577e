# tests/corrupt_models.py --bin BIN --seed S --copies N --timeout SEC --dir DIR MODEL.gguf...
# The corrupted-model walk (tests/test_corrupt_models.sh runs it): for each model, a fixed list
# of keys rewritten to values that make it meaningless (norm eps, special ids, head counts,
# context length, rope base, expert counts, array lengths, header counts), then N seeded random
# corruptions (byte flips in the header and the weights, truncations, values, types and counts
# of random keys).
# Each copy is scored by `BIN score` on a short prompt under a timeout. A copy passes when the
# run ends by itself with status 0, 1 or 2 and no sanitizer report; a copy whose norm eps or a
# special id lies outside its range (the file parsed here as the loader parses it) must not
# load, and the rewritten keys must be refused with status 1 and a message naming the key.
# Prints one "ok ..." or "FAIL ..." line per copy, then "NOTE ..." counts. Standard library only.
import argparse, math, os, random, struct, subprocess, sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: '<B', I8: '<b', U16: '<H', I16: '<h', U32: '<I', I32: '<i', F32: '<f', BOOL: '<?',
       U64: '<Q', I64: '<q', F64: '<d'}
INTS = (U8, I8, U16, I16, U32, I32, U64, I64)
# the special-id keys the loader reads (src/model/vocab.c), as llama.cpp spells them
SPECIAL = ['bos', 'eos', 'unknown', 'padding', 'seperator', 'cls', 'mask', 'eot', 'eom',
           'fim_pre', 'fim_suf', 'fim_mid', 'fim_pad', 'fim_rep', 'fim_sep', 'prefix',
           'suffix', 'middle']
MAX_EPS = 1e-2
SANITIZER = (b'AddressSanitizer', b'LeakSanitizer', b'runtime error:', b'UndefinedBehavior')


class Bad(Exception):
    pass


class Reader:
    def __init__(self, b, off=0):
        self.b, self.o = b, off

    def take(self, n):
        if n < 0 or self.o + n > len(self.b):
            raise Bad('past the end')
        s = self.b[self.o:self.o + n]
        self.o += n
        return s

    def num(self, t):
        f = FMT[t]
        return struct.unpack(f, self.take(struct.calcsize(f)))[0]

    def string(self):
        n = self.num(U64)
        return self.take(n)


def read_value(r, t, depth=0):
    if t in FMT:
        return r.num(t)
    if t == STR:
        return r.string()
    if t == ARR and depth == 0:  # ('array', element type, count, offset of the elements)
        et, n = r.num(U32), r.num(U64)
        if n > len(r.b):
            raise Bad('array count past the end')
        at = r.o
        if et in FMT:
            r.take(n * struct.calcsize(FMT[et]))
        elif et == STR:  # skipped without decoding: vocabularies hold many strings
            b, o, end = r.b, r.o, len(r.b)
            for _ in range(n):
                if o + 8 > end:
                    raise Bad('past the end')
                o += 8 + int.from_bytes(b[o:o + 8], 'little')
            if o > end:
                raise Bad('past the end')
            r.o = o
        else:
            raise Bad('array of type %d' % et)
        return ('array', et, n, at)
    raise Bad('type %d' % t)


def parse(b):
    """The header of a GGUF v3 file: a dict, or None where it does not parse."""
    try:
        r = Reader(b)
        if r.take(4) != b'GGUF' or r.num(U32) not in (2, 3):
            return None
        n_tensors, n_kv = r.num(U64), r.num(U64)
        if n_kv > len(b) or n_tensors > len(b):
            return None
        kvs = []
        for _ in range(n_kv):
            start = r.o
            key = r.string()
            t = r.num(U32)
            tpos = r.o - 4
            vpos = r.o
            v = read_value(r, t)
            kvs.append({'key': key.decode('utf-8', 'replace'), 'type': t, 'value': v,
                        'start': start, 'tpos': tpos, 'vpos': vpos, 'end': r.o})
        tstart = r.o
        for _ in range(n_tensors):
            r.string()
            nd = r.num(U32)
            if nd > 4:
                return None
            for _ in range(nd):
                r.num(U64)
            r.num(U32)
            r.num(U64)
        align = 32
        for kv in kvs:
            if kv['key'] == 'general.alignment' and kv['type'] == U32 and kv['value'] > 0:
                align = kv['value']
        data = (r.o + align - 1) // align * align
        return {'kvs': kvs, 'n_tensors': n_tensors, 'tinfo': b[tstart:r.o], 'align': align,
                'data': data, 'tend': r.o}
    except (Bad, struct.error, MemoryError, OverflowError):
        return None


def get(h, key):
    return [kv for kv in h['kvs'] if kv['key'] == key]


def out_of_range(b):
    """The eps / special-id keys of file b that lie outside their range ([] if none, or if the
    file does not parse: then the loader cannot read them either)."""
    h = parse(b)
    if not h:
        return []
    bad = []
    arch = [kv['value'] for kv in get(h, 'general.architecture') if kv['type'] == STR]
    toks = [kv['value'] for kv in get(h, 'tokenizer.ggml.tokens')
            if kv['type'] == ARR and kv['value'][1] == STR]
    if len(arch) == 1:
        key = arch[0].decode('utf-8', 'replace') + '.attention.layer_norm_rms_epsilon'
        for kv in get(h, key):
            if kv['type'] not in (F32, F64):
                bad.append(key)
                continue
            try:  # the loader reads a float64 eps as float32
                e = struct.unpack('<f', struct.pack('<f', kv['value']))[0]
            except OverflowError:
                e = math.inf
            if not (e > 0 and e <= MAX_EPS):
                bad.append(key)
    if len(toks) == 1:
        nv = toks[0][2]
        for name in SPECIAL:
            key = 'tokenizer.ggml.%s_token_id' % name
            for kv in get(h, key):
                v = kv['value']
                if kv['type'] not in INTS:
                    bad.append(key)
                elif v not in (-1, 0xFFFFFFFF) and not (0 <= v < nv):
                    bad.append(key)
    return bad


def enc_str(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack('<Q', len(s)) + s


def enc_kv(key, t, v):
    if t == STR:
        return enc_str(key) + struct.pack('<I', t) + enc_str(v)
    return enc_str(key) + struct.pack('<I', t) + struct.pack(FMT[t], v)


def rebuild(b, h, raws, n_kv):
    """File b with its key/value section replaced by raws (the tensor infos and data kept;
    the data re-aligned)."""
    head = b[:16] + struct.pack('<Q', n_kv) + b''.join(raws) + h['tinfo']
    pad = (-len(head)) % h['align']
    return head + b'\0' * pad + b[h['data']:]


def set_kv(b, h, key, t, v):
    raws, found = [], False
    for kv in h['kvs']:
        if kv['key'] == key:
            raws.append(enc_kv(key, t, v))
            found = True
        else:
            raws.append(b[kv['start']:kv['end']])
    if not found:
        raws.append(enc_kv(key, t, v))
    return rebuild(b, h, raws, len(raws))


def drop_kv(b, h, key):
    raws = [b[kv['start']:kv['end']] for kv in h['kvs'] if kv['key'] != key]
    return rebuild(b, h, raws, len(raws))


def patch(b, off, data):
    return b[:off] + data + b[off + len(data):]


def f32_above(x):
    return struct.unpack('<f', struct.pack('<I', struct.unpack('<I', struct.pack('<f', x))[0] + 1))[0]


def targeted(b, h):
    """(name, bytes, expect) for the fixed rewrites; expect: ('key', KEY) refused naming KEY,
    ('refuse', None) refused, ('any', None) any clean exit."""
    arch = get(h, 'general.architecture')[0]['value'].decode()
    nv = get(h, 'tokenizer.ggml.tokens')[0]['value'][2]
    a = arch + '.'
    eps = a + 'attention.layer_norm_rms_epsilon'
    out = []

    def key(name, k, t, v):
        out.append((name, set_kv(b, h, k, t, v), ('key', k)))

    for v in (0.0, -0.0, -1.0, 1e30, math.nan, math.inf, -math.inf, f32_above(MAX_EPS), 0.02):
        key('eps=%r' % v, eps, F32, v)
    for v in (1e30, 0.010000001, 1e-60, 1e300):
        key('eps=%r (f64)' % v, eps, F64, v)
    key('eps as u32', eps, U32, 1)
    key('eps as string', eps, STR, '1e-5')
    out.append(('eps absent', drop_kv(b, h, eps), ('key', eps)))
    # every name: n_vocab, -2, 0x7fffffff and a float; BOS and EOS: the other types' edges too
    more = ((U32, 0xFFFFFFFE), (I64, nv), (U64, 1 << 40), (I32, -2147483648), (I64, -3))
    for name in ('bos', 'eos', 'padding', 'unknown', 'eot', 'fim_pre'):
        k = 'tokenizer.ggml.%s_token_id' % name
        for t, v in ((U32, nv), (I32, -2), (U32, 0x7fffffff)) + (more if name in ('bos', 'eos')
                                                                  else ()):
            key('%s=%d (type %d)' % (name, v, t), k, t, v)
        key('%s as f32' % name, k, F32, 1.0)
    for k, t, v in ((a + 'attention.head_count', U32, 0), (a + 'attention.head_count_kv', U32, 0),
                    (a + 'context_length', U32, 0), (a + 'block_count', U32, 0),
                    (a + 'block_count', U32, 1 << 31), (a + 'embedding_length', U32, 0),
                    (a + 'embedding_length', U32, 0x7fffffff),
                    (a + 'feed_forward_length', U32, 0),
                    (a + 'rope.freq_base', F32, 0.0), (a + 'rope.freq_base', F32, math.nan),
                    (a + 'rope.freq_base', F32, -1.0), (a + 'rope.freq_base', F32, math.inf)):
        if get(h, k) or k.endswith('freq_base'):
            key('%s=%r' % (k, v), k, t, v)
    ne = get(h, a + 'expert_count')
    if ne:
        n = ne[0]['value']
        for k, v in ((a + 'expert_used_count', n + 1), (a + 'expert_used_count', 0),
                     (a + 'expert_count', 1), (a + 'expert_used_count', 0xFFFFFFFF)):
            key('%s=%d' % (k, v), k, U32, v)
        out.append(('expert_count=0', set_kv(b, h, a + 'expert_count', U32, 0), ('refuse', None)))
    else:  # a dense model: expert keys it does not read
        out.append(('stray expert_count', set_kv(b, h, a + 'expert_used_count', U32, 9),
                    ('any', None)))
    # array and string lengths: huge, one too many, the top bit
    for kv in h['kvs']:
        if kv['type'] == ARR:
            for n in (1 << 62, kv['value'][2] + 1):
                out.append(('%s count %d' % (kv['key'], n),
                            patch(b, kv['vpos'] + 4, struct.pack('<Q', n)), ('refuse', None)))
    first = h['kvs'][0]
    for n in ((1 << 64) - 1, 1 << 31):
        out.append(('key length %d' % n, patch(b, first['start'], struct.pack('<Q', n)),
                    ('refuse', None)))
    for off, what in ((8, 'n_tensors'), (16, 'n_kv')):
        for n in ((1 << 63), (1 << 64) - 1):
            out.append(('%s=%d' % (what, n), patch(b, off, struct.pack('<Q', n)), ('refuse', None)))
    for v in (0, 3, 1 << 31):
        out.append(('general.alignment=%d' % v, set_kv(b, h, 'general.alignment', U32, v),
                    ('refuse', None)))
    return out


INTERESTING_INT = [0, 1, 2, 3, 7, 255, 256, 65535, 0x7fffffff, 0x80000000, 0xFFFFFFFE,
                   0xFFFFFFFF, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]
INTERESTING_F = [0.0, -0.0, 1.0, -1.0, 1e-45, 1e-2, 0.0100001, 1e30, 3.4e38, math.nan, math.inf,
                 -math.inf]


def clamp(t, v):
    """v made to fit type t (wrapped as a cast would)."""
    bits = struct.calcsize(FMT[t]) * 8
    v &= (1 << bits) - 1
    if t in (I8, I16, I32, I64) and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def random_copy(b, h, rng):
    """(name, bytes): one seeded random corruption of b."""
    kind = rng.randrange(8)
    kvs = h['kvs']
    if kind == 7 and len(b) > h['data']:  # bytes of the weights: NaN, infinities, huge values
        c = bytearray(b)
        offs = []
        for _ in range(rng.randint(1, 64)):
            o = rng.randrange(h['data'], len(b))
            offs.append(o)
            c[o] = rng.choice([0xff, 0x7f, 0x80, 0x00, rng.randrange(256)])
        return 'weights flip %d bytes from %d' % (len(offs), min(offs)), bytes(c)
    if kind == 0:  # byte flips in the header (key/value section and tensor infos)
        c = bytearray(b)
        offs = []
        for _ in range(rng.randint(1, 6)):
            o = rng.randrange(h['tend'])
            offs.append(o)
            c[o] = rng.randrange(256) if rng.random() < 0.5 else c[o] ^ (1 << rng.randrange(8))
        return 'flip %s' % offs, bytes(c)
    if kind == 1:  # truncation, mostly inside the header
        n = rng.randrange(h['data'] + 64) if rng.random() < 0.7 else rng.randrange(len(b))
        return 'truncate %d' % n, b[:n]
    kv = rng.choice(kvs)
    if kind == 2:  # the value of a random key, in place
        t = kv['type']
        if t in FMT:
            if t in (F32, F64):
                v = rng.choice(INTERESTING_F)
            elif t == BOOL:
                return '%s bool byte' % kv['key'], patch(b, kv['vpos'], bytes([rng.randrange(256)]))
            else:
                v = clamp(t, rng.choice(INTERESTING_INT + [kv['value'] + rng.randint(-2, 2)]))
            return '%s=%r' % (kv['key'], v), patch(b, kv['vpos'], struct.pack(FMT[t], v))
        if t == STR:
            n = rng.choice([0, 1, len(kv['value']) + 1, 1 << 40, (1 << 64) - 1])
            return '%s length %d' % (kv['key'], n), patch(b, kv['vpos'], struct.pack('<Q', n))
        n = rng.choice([0, 1, kv['value'][2] - 1, kv['value'][2] + 1, 1 << 30, 1 << 62])
        return '%s count %d' % (kv['key'], max(n, 0)), patch(b, kv['vpos'] + 4,
                                                            struct.pack('<Q', max(n, 0)))
    if kind == 3:  # the type of a random key (or of its array's elements)
        t = rng.randrange(16)
        if kv['type'] == ARR and rng.random() < 0.5:
            return '%s element type %d' % (kv['key'], t), patch(b, kv['vpos'], struct.pack('<I', t))
        return '%s type %d' % (kv['key'], t), patch(b, kv['tpos'], struct.pack('<I', t))
    if kind == 4:  # a random key rewritten with another type and an interesting value
        t = rng.choice([U8, I8, U16, I16, U32, I32, U64, I64, F32, F64, BOOL])
        if t in (F32, F64):
            v = rng.choice(INTERESTING_F)
        elif t == BOOL:
            v = rng.random() < 0.5
        else:
            v = clamp(t, rng.choice(INTERESTING_INT))
        return '%s=%r (type %d)' % (kv['key'], v, t), set_kv(b, h, kv['key'], t, v)
    if kind == 5:  # one element of a random array
        arrs = [k for k in kvs if k['type'] == ARR and k['value'][2] > 0]
        if arrs:
            a = rng.choice(arrs)
            et, n, at = a['value'][1], a['value'][2], a['value'][3]
            i = rng.randrange(n)
            if et in FMT:
                off = at + i * struct.calcsize(FMT[et])
                v = rng.choice(INTERESTING_F) if et in (F32, F64) else \
                    clamp(et, rng.choice(INTERESTING_INT)) if et != BOOL else True
                return '%s[%d]=%r' % (a['key'], i, v), patch(b, off, struct.pack(FMT[et], v))
            off = at
            for _ in range(i):
                off += 8 + int.from_bytes(b[off:off + 8], 'little')
            nl = rng.choice([0, int.from_bytes(b[off:off + 8], 'little') + 1, 65537, 1 << 40])
            return '%s[%d] length %d' % (a['key'], i, nl), patch(b, off, struct.pack('<Q', nl))
    # a random key dropped
    return 'drop %s' % kv['key'], drop_kv(b, h, kv['key'])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--seed', type=int, default=47)
    ap.add_argument('--copies', type=int, default=30)
    ap.add_argument('--timeout', type=float, default=20)
    ap.add_argument('--dir', required=True)
    ap.add_argument('--keep', action='store_true', help='keep each failing copy in --dir')
    ap.add_argument('models', nargs='+')
    o = ap.parse_args()
    prompt = b'{"id": 1, "prompt": "Once upon a time, a little"}\n'
    path = os.path.join(o.dir, 'copy.gguf')
    counts = {'copies': 0, 'loaded': 0, 'refused': 0, 'usage': 0, 'crashes': 0, 'hangs': 0,
              'sanitizer': 0, 'loaded out of range': 0, 'refused wrongly': 0}
    for mi, model in enumerate(o.models):
        with open(model, 'rb') as f:
            b = f.read()
        h = parse(b)
        if not h:
            print('FAIL %s: the original does not parse here' % model)
            continue
        fam = os.path.basename(model)
        cases = [(n, c, e) for n, c, e in targeted(b, h)]
        for i in range(o.copies):
            rng = random.Random(o.seed * 1000003 + mi * 10007 + i)
            n, c = random_copy(b, h, rng)
            cases.append(('random %d: %s' % (i, n), c, ('any', None)))
        for ci, (name, c, (expect, key)) in enumerate(cases):
            with open(path, 'wb') as f:
                f.write(c)
            counts['copies'] += 1
            bad = out_of_range(c)
            what = '%s [%s]' % (fam, name)
            try:
                p = subprocess.run([o.bin, 'score', '-m', path, '-t', '1', '--cache-mb', '0'],
                                   input=prompt, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   timeout=o.timeout)
                rc, err = p.returncode, p.stderr
            except subprocess.TimeoutExpired:
                rc, err = None, b''
            msg = err.decode('utf-8', 'replace').strip().splitlines()
            msg = msg[-1] if msg else ''
            fail = None
            if rc is None:
                counts['hangs'] += 1
                fail = 'no answer within %g s (a hang)' % o.timeout
            elif rc < 0 or rc > 2:
                counts['crashes'] += 1
                fail = 'exit status %d (a signal or a crash): %s' % (rc, msg)
            elif any(s in err for s in SANITIZER):
                counts['sanitizer'] += 1
                fail = 'sanitizer report: %s' % err.decode('utf-8', 'replace')[-2000:]
            else:
                counts[{0: 'loaded', 1: 'refused', 2: 'usage'}[rc]] += 1
                if rc == 0 and bad:
                    counts['loaded out of range'] += 1
                    fail = 'loaded with %s out of range' % ', '.join(bad)
                elif expect == 'key' and (rc != 1 or key.encode() not in err):
                    counts['refused wrongly'] += 1
                    fail = 'expected exit 1 naming %s, got %d: %s' % (key, rc, msg)
                elif expect == 'refuse' and rc != 1:
                    counts['refused wrongly'] += 1
                    fail = 'expected exit 1, got %d: %s' % (rc, msg)
            if fail:
                print('FAIL %s: %s' % (what, fail))
                if o.keep:
                    os.replace(path, os.path.join(o.dir, 'fail-%d-%d.gguf' % (mi, ci)))
            else:
                print('ok %s: exit %d' % (what, rc))
    try:
        os.unlink(path)
    except OSError:
        pass
    print('NOTE corrupted copies: %d (seed %d, %d random per model, %d models)' %
          (counts['copies'], o.seed, o.copies, len(o.models)))
    print('NOTE exits: %d loaded (0), %d refused (1), %d usage (2)' %
          (counts['loaded'], counts['refused'], counts['usage']))
    print('NOTE crashes %d, hangs %d, sanitizer reports %d, loaded out of range %d, '
          'not refused as expected %d' % (counts['crashes'], counts['hangs'], counts['sanitizer'],
                                          counts['loaded out of range'],
                                          counts['refused wrongly']))


if __name__ == '__main__':
    main()
