#!/usr/bin/env python3
"""Tamper with a populated Definition store, then run DSv4 full on it: golden must match, exit 0,
rejections counted, store verify / gc clean after gc."""
import os, random, shutil, subprocess, sys, json, glob, re
H = '/tmp/outside/hbgrun'
BASE = sys.argv[1]; N = int(sys.argv[2]); rng = random.Random(int(sys.argv[3]))
for n in range(N):
    S = '/tmp/outside/sf/%d' % n
    shutil.rmtree(S, ignore_errors=True); shutil.copytree(BASE, S)
    objs = sorted(glob.glob(S + '/objects/*')); idx = sorted(glob.glob(S + '/index/*'))
    kind = rng.choice(['objflip', 'objtrunc', 'objswap', 'idxedit', 'idxswap', 'idxtrunc', 'objdel', 'idxgarbage', 'symlink_obj', 'objempty', 'idxdup'])
    if kind == 'objflip':
        f = rng.choice(objs); b = bytearray(open(f, 'rb').read()); i = rng.randrange(len(b)); b[i] ^= 1 << rng.randrange(8); open(f, 'wb').write(b)
    elif kind == 'objtrunc':
        f = rng.choice(objs); b = open(f, 'rb').read(); open(f, 'wb').write(b[:rng.randrange(len(b))])
    elif kind == 'objswap':
        a, c = rng.sample(objs, 2); ba, bc = open(a, 'rb').read(), open(c, 'rb').read(); open(a, 'wb').write(bc); open(c, 'wb').write(ba)
    elif kind == 'objempty':
        open(rng.choice(objs), 'wb').close()
    elif kind == 'objdel':
        os.remove(rng.choice(objs))
    elif kind == 'symlink_obj':
        f = rng.choice(objs); os.remove(f); os.symlink('/etc/passwd', f)
    elif kind in ('idxedit', 'idxgarbage', 'idxtrunc', 'idxswap', 'idxdup'):
        f = rng.choice(idx); t = open(f).read()
        if kind == 'idxedit':
            d = json.loads(t); k = rng.choice(list(d.keys()))
            d[k] = rng.choice([0, -1, 2**63, '', 'x', None, [], d[k]])
            t = json.dumps(d)
        elif kind == 'idxgarbage': t = '\x00garbage' + t[5:]
        elif kind == 'idxtrunc': t = t[:rng.randrange(len(t))]
        elif kind == 'idxswap':
            g = rng.choice([x for x in idx if x != f]); t2 = open(g).read(); open(g, 'w').write(t)
            t = t2
        elif kind == 'idxdup':
            open(f.replace('-v3', '0-v3'), 'w').write(t)
        open(f, 'w').write(t)
    if n < int(os.environ.get('START', '0')):
        continue
    if os.environ.get('STOP_BEFORE_RUN'):
        print('prepared', n, kind, S, flush=True); continue
    import signal, time
    p = subprocess.Popen(['nice', H, 'run', '--form', 'full', '--rounds', '2', '--store', S, '-v'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t0 = time.time()
    try:
        so, se = p.communicate(timeout=60); rc = p.returncode; so, se = so.decode(), se.decode()
    except subprocess.TimeoutExpired:
        # the hbgrun child of nice: nice execs, so p.pid is hbgrun
        shutil.copytree(S, S + '.hung')
        os.kill(p.pid, signal.SIGQUIT)
        so, se = p.communicate(); so, se = so.decode(), se.decode()
        open('/tmp/outside/sf/hang-%d.txt' % n, 'w').write(so + '\n-----\n' + se)
        rc = 'TIMEOUT'
    gold = re.search(r'golden: (\w+)', so); rej = re.search(r'store_rejected (\d+)', so + se); loaded = re.search(r'loaded_definitions (\d+)', so)
    pre = re.search(r'preload \(before the first pass\): (\d+) Definitions .* (\d+) rejected', so)
    v = subprocess.run([H, 'store', 'verify', '--store', S], capture_output=True); g = subprocess.run([H, 'store', 'gc', '--store', S], capture_output=True)
    v2 = subprocess.run([H, 'store', 'verify', '--store', S], capture_output=True)
    flags = []
    if rc != 0: flags.append('rc%s' % rc)
    if 'goroutine ' in so + se or 'panic:' in so + se: flags.append('panic')
    if not gold or gold.group(1) != 'match': flags.append('golden:' + (gold.group(1) if gold else 'none'))
    if v2.returncode != 0: flags.append('verify-after-gc:%d' % v2.returncode)
    warn = [l for l in (so + se).split('\n') if 'warning' in l.lower() or 'quarantin' in l.lower() or 'reject' in l.lower()]
    print(json.dumps({'n': n, 'kind': kind, 'rc': rc, 'golden': gold.group(1) if gold else None, 'store_rejected': rej.group(1) if rej else None,
                      'preload': pre.groups() if pre else None, 'verify_before_run_rc': v.returncode, 'verify_before': v.stdout.decode().strip()[-160:] + v.stderr.decode().strip()[-200:],
                      'gc': g.stdout.decode().strip()[-200:], 'verify_after_gc': v2.returncode, 'flags': flags, 'warn': warn[:3], 'err': se.strip()[-300:]}), flush=True)
