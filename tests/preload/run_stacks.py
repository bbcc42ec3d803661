#!/usr/bin/env python3
"""The native stack cache records the stack each event came through.

victim_stacks allocates through the stand-in allocator from three native
call chains of different depths, interleaved (block size names the chain).
It runs under the preload with DSMEMTRACE_NATIVE_DEPTH=32 three times: stack
cache off (every event unwound), cache on, cache on with
DSMEMTRACE_STACK_CHECK=1.  Checked:
  * with the cache on, every tensor event's stack, as module+offset frames,
    equals the stack the cache-off run recorded for its chain (one stack per
    chain and kind there, and three chains give three different stacks);
  * the check run reports 100% of events equal to a full unwind, most of them
    served by the cache, fewer unwinds than events, and no stack replaced.

usage: run_stacks.py VICTIM PRELOAD DSMEMDECODE STANDIN_LIBDIR WORKDIR
"""
import bisect
import collections
import os
import re
import shutil
import subprocess
import sys


def run(victim, preload, libdir, d, extra):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    env = dict(os.environ, LD_PRELOAD=preload, LD_LIBRARY_PATH=libdir, DSMEMTRACE_DIR=d,
               DSMEMTRACE_NATIVE_DEPTH="32", **extra)
    p = subprocess.run([victim, "20000"], env=env, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise SystemExit(f"victim failed ({p.returncode}): {p.stderr}")
    files = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".zst")]
    if len(files) != 1:
        raise SystemExit(f"expected one trace in {d}, found {files}")
    return files[0], p.stderr


def stacks_by_chain(dec, trace):
    """{(kind, size): Counter of stacks as tuples of (module, offset)}"""
    out = subprocess.run([dec, "--dump", trace], capture_output=True, text=True, check=True).stdout
    mods, stacks, ev = [], {}, collections.defaultdict(collections.Counter)
    for line in out.splitlines():
        if " MODULE " in line:
            base = int(re.search(r"base=(0x[0-9a-f]+)", line).group(1), 16)
            lo = int(re.search(r"lo=(0x[0-9a-f]+)", line).group(1), 16)
            hi = int(re.search(r"hi=(0x[0-9a-f]+)", line).group(1), 16)
            mods.append((lo, hi, base, os.path.basename(re.search(r'path="([^"]*)"', line).group(1))))
        elif " STACK " in line:
            sid = int(re.search(r"id=(\d+)", line).group(1))
            stacks[sid] = [int(x, 16) for x in re.findall(r" (0x[0-9a-f]+)", line)]
    mods.sort()
    los = [m[0] for m in mods]

    def norm(ip):
        i = bisect.bisect_right(los, ip) - 1
        if i >= 0 and ip < mods[i][1]:
            return (mods[i][3], ip - mods[i][2])
        return ("?", ip)

    for line in out.splitlines():
        if (" ALLOC " in line or " FREE " in line) and "api=torch" in line:
            size = int(re.search(r"size=(\d+)", line).group(1))
            m = re.search(r"stack=(\d+)", line)
            sid = int(m.group(1)) if m else 0
            kind = "alloc" if " ALLOC " in line else "free"
            ev[(kind, size)][tuple(norm(ip) for ip in stacks.get(sid, []))] += 1
    return ev


def main():
    victim, preload, dec, libdir, work = sys.argv[1:6]
    bad = 0
    ref_trace, _ = run(victim, preload, libdir, os.path.join(work, "nocache"), {"DSMEMTRACE_STACK_CACHE": "0"})
    ref = stacks_by_chain(dec, ref_trace)
    want = {}
    for key, c in sorted(ref.items()):
        full = [s for s in c if len(s) > 0]
        if len(full) != 1:
            print(f"cache off: {key}: {len(full)} different stacks, expected one: {c.most_common(3)}")
            bad += 1
        want[key] = full[0] if full else None
    alloc_stacks = {want.get(("alloc", s)) for s in (4096, 8192, 12288)}
    if None in alloc_stacks or len(alloc_stacks) != 3:
        print(f"cache off: the three chains' allocations should have three different stacks")
        bad += 1
    got_trace, _ = run(victim, preload, libdir, os.path.join(work, "cache"), {"DSMEMTRACE_STACK_CACHE": "1"})
    got = stacks_by_chain(dec, got_trace)
    for key, c in sorted(got.items()):
        n = sum(c.values())
        wrong = sum(v for s, v in c.items() if s and s != want.get(key))
        print(f"cache on: {key}: {n} events, {wrong} with another chain's stack, {c.get((), 0)} without stack")
        if wrong or n != 20000 or c.get((), 0) > n // 2:
            bad += 1
    _, err = run(victim, preload, libdir, os.path.join(work, "check"), {"DSMEMTRACE_STACK_CHECK": "1", "DSMEMTRACE_STACK_CACHE": "1"})
    m = re.search(r"stackcheck: (\d+) events, (\d+) \(([\d.]+)%\).*?; (\d+) events from the stack cache;"
                  r".*?; (\d+) unwinds, (\d+) cached stacks replaced", err)
    if not m:
        print(f"no stackcheck line on stderr:\n{err}")
        return 1
    ev, match, cached, unwinds, replaced = (int(m.group(i)) for i in (1, 2, 4, 5, 6))
    print(m.group(0))
    if ev < 60000 or match != ev or cached < ev * 9 // 10 or unwinds >= ev // 10 or replaced:
        print("stackcheck: expected every event equal to a full unwind, >= 90% from the cache, no replacement")
        bad += 1
    print("FAIL" if bad else "PASS")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
