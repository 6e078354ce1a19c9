#!/usr/bin/env python3
"""Mutate run/compare JSON reports (structurally) and binary images (bytes), feed to hbgrun report / describe."""
import os, random, re, subprocess, sys, json, copy

H = '/tmp/outside/hbgrun'
mode, srcs, N, SEED, OUT = sys.argv[1], sys.argv[2].split(','), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
os.makedirs(OUT, exist_ok=True)
rng = random.Random(SEED)
VALS = [None, -1, 0, 1, 2**63, -2**63, 2**64, 1e308, -1e308, float('nan') if False else 1.5, '', 'x' * 1000, [], {}, True,
        '<script>alert(1)</script>', '"><b>x', 10**30, 'é\u202e日本']

def paths(o, p=()):
    yield p
    if isinstance(o, dict):
        for k, v in o.items(): yield from paths(v, p + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o[:6]): yield from paths(v, p + (i,))
        if len(o) > 6:
            i = rng.randrange(len(o)); yield from paths(o[i], p + (i,))

def get(o, p):
    for k in p: o = o[k]
    return o

def jmutate(d):
    ps = list(paths(d))[1:]
    p = rng.choice(ps)
    parent = get(d, p[:-1]); k = p[-1]
    kind = rng.choice(['del', 'val', 'val', 'val', 'dup', 'deep'])
    if kind == 'del':
        if isinstance(parent, dict): del parent[k]
        else: parent.pop(k)
    elif kind == 'val':
        parent[k] = rng.choice(VALS)
    elif kind == 'dup' and isinstance(parent[k], list) and parent[k]:
        parent[k] = parent[k] * rng.choice([2, 50])
    elif kind == 'deep':
        v = 1
        for _ in range(rng.choice([100, 900])): v = [v]
        parent[k] = v
    return kind + ':' + '/'.join(map(str, p))

def bmutate(b):
    b = bytearray(b)
    kind = rng.choice(['flip', 'flip', 'hdr', 'hdr', 'hdr', 'trunc', 'u32', 'u32'])
    if kind == 'flip':
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(b)); b[i] ^= 1 << rng.randrange(8)
    elif kind == 'hdr':
        i = rng.randrange(min(136, len(b)))
        b[i] = rng.choice([0, 0xff, b[i] + 1 & 0xff, b[i] - 1 & 0xff])
    elif kind == 'trunc':
        b = b[:rng.randrange(len(b))]
    elif kind == 'u32':
        i = rng.randrange(0, min(136, len(b) - 4)) & ~3
        b[i:i + 4] = rng.choice([0xffffffff, 0x7fffffff, 0x80000000, 0, 1, len(b) + 1, len(b) * 1000]).to_bytes(4, 'little')
    return kind, bytes(b)

for n in range(N):
    src = rng.choice(srcs)
    flags = []
    if mode == 'json':
        d = json.load(open(src))
        kinds = [jmutate(d) for _ in range(rng.choice([1, 1, 2, 4]))]
        path = os.path.join(OUT, 'j%04d.json' % n)
        try:
            txt = json.dumps(d)
        except (ValueError, RecursionError):
            continue
        if rng.random() < 0.1: txt = txt[:rng.randrange(len(txt))]
        elif rng.random() < 0.05: txt = txt.replace('"warnings": [', '"warnings": [' + '[' * 100000 + ']' * 100000 + ',', 1)
        open(path, 'w').write(txt)
        cmd = [H, 'report', path, '-o', path + '.html']
    else:
        kinds = []
        b = open(src, 'rb').read()
        for _ in range(rng.choice([1, 1, 2])):
            k, b = bmutate(b); kinds.append(k)
        path = os.path.join(OUT, 'b%04d' % n + os.path.splitext(src)[1])
        open(path, 'wb').write(b)
        cmd = [H, 'describe', path]
    try:
        p = subprocess.run(['nice'] + cmd, capture_output=True, timeout=30)
        rc, so, se = p.returncode, p.stdout.decode('utf8', 'replace'), p.stderr.decode('utf8', 'replace')
    except subprocess.TimeoutExpired as e:
        rc, so, se = 'TIMEOUT', '', ''
    txt = so + se
    if rc == 'TIMEOUT': flags.append('hang')
    if 'goroutine ' in txt or 'panic:' in txt or 'runtime error' in txt: flags.append('panic')
    if rc not in (0, 1, 2, 'TIMEOUT'): flags.append('rc%s' % rc)
    if mode == 'json' and rc == 0: flags.append('accepted')
    if flags and flags != ['accepted']:
        open(path + '.log', 'w').write('rc=%s\n%s\n---\n%s\n' % (rc, so[-4000:], se[-6000:]))
    last = se.strip().split('\n')[-1][:300] if se.strip() else ''
    print(json.dumps({'n': n, 'src': src, 'kinds': kinds, 'rc': rc, 'flags': flags, 'err': last}), flush=True)
