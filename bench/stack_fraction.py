#!/usr/bin/env python3
"""How often does a native stack of D frames hold the whole native part of
an allocation's call stack, i.e. everything from the allocating call up to
the first Python interpreter frame?

Record a trace with full stacks (DSMEMTRACE_NATIVE_DEPTH=64), then:

    python3 bench/stack_fraction.py DSMEMDECODE TRACE [D ...]

For each tensor event (api torch) the script finds, in its recorded stack,
the first frame inside the Python interpreter (a module whose file name
starts with "python" or "libpython"); L = the frames before it.  A capture of
D frames equals the full unwind up to the interpreter exactly when L <= D.
Prints the fraction of events with L <= D for each D, and the distribution
of L.  Events whose 64 frames hold no interpreter frame count as L = 64+.
"""
import bisect
import collections
import os
import re
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    dec, trace = sys.argv[1], sys.argv[2]
    depths = [int(x) for x in sys.argv[3:]] or [0, 2, 4, 8, 16, 32]
    out = subprocess.run([dec, "--dump", trace], capture_output=True, text=True)
    if out.returncode not in (0,):
        print(out.stderr, file=sys.stderr)
        return 1
    mods, stacks, ev_stacks = [], {}, collections.Counter()
    for line in out.stdout.splitlines():
        if " MODULE " in line:
            lo = int(re.search(r"lo=(0x[0-9a-f]+)", line).group(1), 16)
            hi = int(re.search(r"hi=(0x[0-9a-f]+)", line).group(1), 16)
            path = re.search(r'path="([^"]*)"', line).group(1)
            mods.append((lo, hi, os.path.basename(path)))
        elif " STACK " in line:
            sid = int(re.search(r"id=(\d+)", line).group(1))
            stacks[sid] = [int(x, 16) for x in re.findall(r" (0x[0-9a-f]+)", line)]
        elif (" ALLOC " in line or " FREE " in line) and "api=torch" in line:
            m = re.search(r"stack=(\d+)", line)
            ev_stacks[int(m.group(1)) if m else 0] += 1
    mods.sort()
    los = [m[0] for m in mods]

    def module(ip):
        i = bisect.bisect_right(los, ip) - 1
        return mods[i][2] if i >= 0 and ip < mods[i][1] else "?"

    def interp(name):
        return name.startswith("python") or name.startswith("libpython")

    lengths = collections.Counter()
    total = 0
    for sid, n in ev_stacks.items():
        ips = stacks.get(sid)
        if not ips:
            continue
        L = next((i for i, ip in enumerate(ips) if interp(module(ip))), None)
        lengths[L if L is not None else 10**6] += n
        total += n
    if not total:
        print("no tensor events with native stacks in this trace (record with DSMEMTRACE_NATIVE_DEPTH=64)")
        return 1
    print(f"{total} tensor events with stacks, {len(ev_stacks)} distinct stacks")
    for d in depths:
        ok = sum(n for L, n in lengths.items() if L <= d)
        print(f"  depth {d:3d}: {100.0 * ok / total:6.2f}% of events hold the whole native stack up to the interpreter")
    known = sorted((L, n) for L, n in lengths.items() if L < 10**6)
    if known:
        med = sorted(L for L, n in known for _ in range(n))[sum(n for _, n in known) // 2]
        print(f"  frames before the interpreter: min {known[0][0]}, median {med}, max {known[-1][0]};"
              f" no interpreter frame within the stack: {lengths.get(10**6, 0)} events")
    return 0


if __name__ == "__main__":
    sys.exit(main())
