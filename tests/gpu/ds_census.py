#!/usr/bin/env python3
"""Which DeepSpeed names of DEEPSPEED.md actually occur in traced runs.

    python3 tests/gpu/ds_census.py DECODER DEEPSPEED.md TRACE... [--markdown]

Names: the backticked identifiers of DEEPSPEED.md that look like Python
qualnames (`Class.method`, `func_name`, `Outer.<locals>.inner`).  For each
one, in the traces: how many NVTX ranges carried it, and how many tensor
allocations (and bytes) had it among their Python frames (any depth) or as
their innermost frame.  A name seen nowhere is "not seen" — a rule keyed on
it is unverified for these runs.
"""
import re
import subprocess
import sys

NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*(?:\.(?:<locals>|[A-Za-z_][A-Za-z0-9_]*))*)(?:\(\))?`")
PYCODE = re.compile(r'^\d+ PYCODE id=(\d+) file="([^"]*)" qualname="([^"]*)"')
PYSTACK = re.compile(r"^\d+ PYSTACK id=(\d+) .*?frames=([0-9:,]*)")
NVTX = re.compile(r'^\d+ NVTX_(?:PUSH|START|MARK) .*?name=\d+ "([^"]*)"')
ALLOC = re.compile(r"^\d+ ALLOC .*?api=torch .*?size=(\d+).*? pystack=(\d+)")


def names_of(md):
    out = []
    for n in NAME.findall(open(md).read()):
        if ("." in n or "_" in n) and not n.endswith((".py", ".json", ".h", ".c")) and len(n) > 3 and n not in out:
            out.append(n)
    return out


def scan(decoder, trace, acc):
    code, stacks = {}, {}
    p = subprocess.run([decoder, "--dump", trace], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        m = PYCODE.match(line)
        if m:
            code[int(m.group(1))] = m.group(3)
            continue
        m = PYSTACK.match(line)
        if m:
            stacks[int(m.group(1))] = [int(f.split(":")[0]) for f in m.group(2).split(",") if f]
            continue
        m = NVTX.match(line)
        if m:
            acc["nvtx"][m.group(1)] = acc["nvtx"].get(m.group(1), 0) + 1
            continue
        m = ALLOC.match(line)
        if m:
            acc["allocs"].append((int(m.group(1)), int(m.group(2)), trace))
    acc["code"][trace] = code
    acc["stacks"][trace] = stacks


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    decoder, md, traces = sys.argv[1], sys.argv[2], [t for t in sys.argv[3:] if not t.startswith("--")]
    acc = {"nvtx": {}, "allocs": [], "code": {}, "stacks": {}}
    for t in traces:
        scan(decoder, t, acc)
    anyf, inner = {}, {}
    for size, sid, t in acc["allocs"]:
        quals = [acc["code"][t].get(c, "?") for c in acc["stacks"][t].get(sid, [])]
        for i, q in enumerate(dict.fromkeys(quals)):
            a = anyf.setdefault(q, [0, 0])
            a[0] += 1
            a[1] += size
        if quals:
            a = inner.setdefault(quals[0], [0, 0])
            a[0] += 1
            a[1] += size
    rows = []
    for n in names_of(md):
        def hit(table):
            c = b = 0
            for q, (k, s) in table.items():
                if q == n or q.endswith("." + n) or q.startswith(n + ".<locals>"):
                    c += k
                    b += s
            return c, b
        nv = sum(k for q, k in acc["nvtx"].items() if q == n or q.endswith("." + n))
        fa, fb = hit(anyf)
        ia, ib = hit(inner)
        rows.append((n, nv, fa, fb, ia, ib))
    seen = [r for r in rows if r[1] or r[2]]
    print(f"{len(rows)} names in {md}; {len(seen)} seen in {len(traces)} trace(s)")
    print("| name | NVTX ranges | allocations with it in their Python stack (bytes) | as innermost frame (bytes) |")
    print("|---|---|---|---|")
    for n, nv, fa, fb, ia, ib in sorted(rows, key=lambda r: (-(r[1] + r[2]), r[0])):
        if nv or fa:
            print(f"| `{n}` | {nv} | {fa} ({fb}) | {ia} ({ib}) |")
    print("\nnot seen: " + ", ".join(f"`{r[0]}`" for r in rows if not (r[1] or r[2])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
