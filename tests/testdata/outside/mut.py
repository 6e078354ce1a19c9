#!/usr/bin/env python3
"""Mutate hbg model YAML files and run hbgrun validate / run on each mutant."""
import os, random, re, subprocess, sys, json, time

H = '/tmp/outside/hbgrun'
SRC = sys.argv[1].split(',')
N = int(sys.argv[2])
SEED = int(sys.argv[3])
OUT = sys.argv[4]
os.makedirs(OUT, exist_ok=True)
rng = random.Random(SEED)
texts = {p: open(p).read() for p in SRC}

NUMS = ['0', '-1', '1', '2', '9223372036854775807', '9223372036854775808', '-9223372036854775808',
        '99999999999999999999999', '1e9', '0x10', '65536', '32768', '4294967296', '3.5', '.inf', '1_000']
UNI = ['é', '\u200b', '日本', '\u202e', '\U0001F600', '\x00', '\t', 'Ａ', '\ufeff']

def mutate(lines):
    kind = rng.choice(['del', 'num', 'num', 'num', 'swap', 'dup', 'uni', 'nest', 'trunc', 'blank_val',
                       'indent', 'dupkey', 'expr', 'name'])
    if not lines:
        return kind, lines
    i = rng.randrange(len(lines))
    L = list(lines)
    if kind == 'del':
        del L[i]
    elif kind == 'num':
        cands = [j for j, l in enumerate(L) if re.search(r'\d', l) and not l.lstrip().startswith('#')]
        if cands:
            i = rng.choice(cands)
            ms = list(re.finditer(r'-?\d+', L[i]))
            m = rng.choice(ms)
            L[i] = L[i][:m.start()] + rng.choice(NUMS) + L[i][m.end():]
    elif kind == 'swap':
        j = min(len(L) - 1, i + rng.randint(1, 3))
        L[i], L[j] = L[j], L[i]
    elif kind == 'dup':
        n = rng.randint(1, 8)
        L[i:i] = L[i:i + n]
    elif kind == 'uni':
        l = L[i]
        p = rng.randrange(len(l) + 1)
        L[i] = l[:p] + rng.choice(UNI) + l[p:]
    elif kind == 'nest':
        d = rng.choice([50, 500, 5000])
        l = L[i]
        m = re.search(r': (\S.*)$', l)
        if m:
            L[i] = l[:m.start(1)] + '[' * d + m.group(1) + ']' * d
        else:
            L.insert(i, 'x: ' + '[' * d + ']' * d)
    elif kind == 'trunc':
        L = L[:i]
        if L and rng.random() < 0.5:
            L[-1] = L[-1][:rng.randrange(len(L[-1]) + 1)]
    elif kind == 'blank_val':
        l = L[i]
        m = re.search(r':\s+\S.*$', l)
        if m:
            L[i] = l[:m.start()] + ':'
    elif kind == 'indent':
        L[i] = (' ' * rng.choice([1, 2, 4])) + L[i] if rng.random() < 0.5 else L[i].lstrip()
    elif kind == 'dupkey':
        l = L[i]
        if ':' in l:
            L.insert(i + 1, l)
    elif kind == 'expr':
        cands = [j for j, l in enumerate(L) if re.search(r'[a-z_]+ *[-+*/%] *[a-z0-9_]+', l)]
        if cands:
            i = rng.choice(cands)
            L[i] = re.sub(r'([-+*/%])', lambda m: rng.choice(['/', '%', '*', '-', '+', '/ 0 *', '% 0 +', '<<']), L[i], count=1)
    elif kind == 'name':
        # rename an identifier to another one found in the file
        words = re.findall(r'\b[a-z_][a-z0-9_]{2,}\b', '\n'.join(L))
        if words:
            a, b = rng.choice(words), rng.choice(words)
            L[i] = re.sub(r'\b%s\b' % re.escape(a), b, L[i])
    return kind, L

def run(cmd, timeout=30):
    t0 = time.time()
    try:
        p = subprocess.run(['nice'] + cmd, capture_output=True, timeout=timeout, env=dict(os.environ, HBG_STORE='off'))
        return p.returncode, p.stdout.decode('utf8', 'replace'), p.stderr.decode('utf8', 'replace'), time.time() - t0
    except subprocess.TimeoutExpired as e:
        return 'TIMEOUT', (e.stdout or b'').decode('utf8', 'replace'), (e.stderr or b'').decode('utf8', 'replace'), timeout

res = []
for k in range(N):
    src = rng.choice(SRC)
    lines = texts[src].split('\n')
    kinds = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        kd, lines = mutate(lines)
        kinds.append(kd)
    path = os.path.join(OUT, 'm%04d.yaml' % k)
    open(path, 'w', encoding='utf8', errors='surrogateescape').write('\n'.join(lines))
    out = {'n': k, 'src': src, 'kinds': kinds, 'path': path}
    rc, so, se, dt = run([H, 'validate', path])
    out['validate'] = (rc, se.strip().split('\n')[-1][:400] if se.strip() else '', round(dt, 2))
    flags = []
    def check(name, rc, so, se):
        txt = so + se
        if rc == 'TIMEOUT': flags.append(name + ':hang')
        if 'goroutine ' in txt or 'panic:' in txt or 'runtime error' in txt: flags.append(name + ':panic')
        if rc not in (0, 1, 2, 'TIMEOUT'): flags.append(name + ':rc%s' % rc)
        if rc == 2 and not re.search(re.escape(path) + r':\d+', se): flags.append(name + ':noline')
    check('validate', rc, so, se)
    rc2, so2, se2, dt2 = run([H, 'run', path, '--rounds', '1', '--skip-device'])
    out['run'] = (rc2, se2.strip().split('\n')[-1][:400] if se2.strip() else '', round(dt2, 2))
    check('run', rc2, so2, se2)
    if rc == 0 and rc2 not in (0,): flags.append('validate-ok-run-fails')
    if rc2 == 1: flags.append('run-rc1')
    out['flags'] = flags
    if flags:
        open(path + '.log', 'w').write('VALIDATE rc=%s\n%s\n%s\nRUN rc=%s\n%s\n%s\n' % (rc, so[-3000:], se[-5000:], rc2, so2[-3000:], se2[-5000:]))
    res.append(out)
    print(json.dumps(out), flush=True)
