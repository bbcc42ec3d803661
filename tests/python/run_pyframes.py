#!/usr/bin/env python3
"""Python frames end to end: victim_py.py under LD_PRELOAD=libdsmemtrace.so.

  run_pyframes.py MODE --python PY --libdir STANDIN --preload LIB --decoder EXE
                  --rawframes EXE --victim victim_py.py --shim libnvtxshim.so

MODE
  frames      every allocation of the victim after its warm-up carries the
              Python stack the victim expected (sys._getframe() at the call):
              same code objects (qualname, file, firstlineno, co_linetable),
              same instruction for the outer frames, the allocating line for
              the innermost, on the right thread; NVTX push and mark (GIL held)
              too with DSMEMTRACE_NVTX_FRAMES=1, and without frames by default
              (a second traced run: allocations keep theirs); the atexit allocation; none on a C thread without a
              Python thread state; a daemon thread still allocating at
              exit does not crash the process; stdout as without the preload,
              nothing on stderr.
  depth       DSMEMTRACE_PY_DEPTH=3: stacks hold the 3 innermost frames;
              DSMEMTRACE_PY_DEPTH=0: no Python records at all.
  selftest    DSMEMTRACE_PY_SELFTEST_FAIL=1 (the layout check reads one field
              at a wrong offset): exactly one stderr line saying Python frames
              are off, naming the version; no Python records; stdout unchanged.
  unsupported a CPython other than 3.11/3.12: one stderr line, no Python
              records, stdout unchanged.

Records are read with `rawframes` (the decompressed record stream; format.h
field layouts below) and, when `dsmemdecode --dump` prints PYCODE/PYSTACK
lines, cross-checked against the dump.  Exit 0 pass, 1 fail, 77 skip (the
interpreter does not exist, or is not of the kind the mode needs)."""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


# ---- reading records (format.h) ----

ALLOC, FREE, OOM, DRV = 0x10, 0x11, 0x12, 0x13
NVTX_PUSH, NVTX_START, NVTX_MARK = 0x20, 0x22, 0x24
# fields of each event before its optional trailing pystack
EVENT_FIELDS = {ALLOC: 11, FREE: 11, OOM: 8, DRV: 10, NVTX_PUSH: 4, NVTX_START: 5, NVTX_MARK: 4,
                0x21: 3, 0x23: 3, 0x30: 3, 0x31: 5, 0x40: 5, 0x41: 5}
NO_PYSTACK = {0x21, 0x23, 0x30, 0x31, 0x40, 0x41}


class Payload:
    def __init__(self, b):
        self.b, self.i = b, 0

    def more(self):
        return self.i < len(self.b)

    def u(self):
        v = s = 0
        while True:
            c = self.b[self.i]
            self.i += 1
            v |= (c & 0x7F) << s
            s += 7
            if c < 0x80:
                return v

    def str(self):
        n = self.u()
        r = self.b[self.i:self.i + n]
        self.i += n
        return r


def read_trace(rawframes, path):
    data = subprocess.run([rawframes, path], stdout=subprocess.PIPE, check=True).stdout
    pycode, pystack, strings, events = {}, {}, {}, []
    off = 0
    while off < len(data):
        n = int.from_bytes(data[off:off + 4], "little")
        fr = data[off + 4:off + 4 + n]
        off += 4 + n
        seqs, tid, pos = {}, 0, 0
        while pos < len(fr):
            typ = fr[pos]
            p = Payload(fr)
            p.i = pos + 1
            ln = p.u()
            pl = Payload(fr[p.i:p.i + ln])
            pos = p.i + ln
            if typ == 0x02:
                sid = pl.u()
                strings[sid] = pl.str().decode("utf-8", "replace")
            elif typ == 0x05:
                tid = pl.u()
            elif typ == 0x08:
                cid = pl.u()
                rec = {"file": pl.str().decode("utf-8"), "qual": pl.str().decode("utf-8")}
                rec["firstlineno"] = pl.u()
                rec["linetable"] = pl.str().hex()
                rec["pyver"] = pl.u()
                if cid in pycode and pycode[cid] != rec:
                    fail("PYCODE %d defined twice, differently" % cid)
                pycode[cid] = rec
            elif typ == 0x09:
                sid = pl.u()
                k = pl.u()
                fs = [(pl.u(), pl.u()) for _ in range(k)]
                if pl.more():
                    fail("PYSTACK %d: trailing bytes" % sid)
                if sid in pystack and pystack[sid] != fs:
                    fail("PYSTACK %d defined twice, differently" % sid)
                pystack[sid] = fs
            elif typ in EVENT_FIELDS:
                f = [pl.u() for _ in range(EVENT_FIELDS[typ])]
                pys = 0
                if pl.more():
                    pys = pl.u()
                    if pys == 0:
                        fail("event 0x%02x: a pystack of 0 written (absent means none)" % typ)
                if pl.more():
                    fail("event 0x%02x: more fields than format 1.2 has" % typ)
                if typ in NO_PYSTACK and pys:
                    fail("event 0x%02x carries a pystack" % typ)
                seq = seqs.get(tid, 0) + f[-2]
                seqs[tid] = seq
                ev = {"type": typ, "tid": tid, "seq": seq, "pystack": pys}
                if typ in (ALLOC, FREE):
                    ev.update(api=f[0], size=f[3])
                elif typ in (NVTX_PUSH, NVTX_MARK):
                    ev.update(domain=f[0], name=f[1])
                events.append(ev)
    return pycode, pystack, strings, events


def dump_crosscheck(decoder, path, pycode, pystack, events):
    """When the decoder prints Python records, they must agree with ours."""
    out = subprocess.run([decoder, "--dump", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout.decode(
        "utf-8", "replace")
    if not re.search(r"^\d+ PYCODE ", out, re.M):
        print("note: dsmemdecode --dump prints no PYCODE records yet; cross-check skipped")
        return
    n = 0
    for m in re.finditer(r"^\d+ PYSTACK id=(\d+) frames=([\d:,]*)", out, re.M):
        fs = [tuple(int(x) for x in a.split(":")) for a in m.group(2).split(",") if a]
        if pystack.get(int(m.group(1))) != fs:
            fail("dump PYSTACK %s differs from the raw records" % m.group(1))
        n += 1
    for m in re.finditer(r"^\d+ PYCODE id=(\d+) .*?firstlineno=(\d+)", out, re.M):
        rec = pycode.get(int(m.group(1)))
        if not rec or rec["firstlineno"] != int(m.group(2)):
            fail("dump PYCODE %s differs from the raw records" % m.group(1))
        n += 1
    byseq = {e["seq"]: e["pystack"] for e in events}
    for m in re.finditer(r"^\d+ (?:ALLOC|FREE|NVTX_PUSH|NVTX_MARK) seq=(\d+) .*", out, re.M):
        pm = re.search(r" pystack=(\d+)", m.group(0))
        if byseq.get(int(m.group(1)), 0) != (int(pm.group(1)) if pm else 0):
            fail("dump event seq=%s: pystack differs from the raw records" % m.group(1))
        n += 1
    print("dump cross-check: %d lines agree" % n)


# ---- running ----

def base_env(libdir):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("DSMEMTRACE_") or k in ("LD_PRELOAD", "NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH",
                                                "PYTHONSTARTUP", "PYTHONPATH"):
            env.pop(k)
    env["LD_LIBRARY_PATH"] = ":".join([libdir] + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p])
    env.setdefault("STANDIN_DEVICE_MEM", str(1 << 30))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def run_victim(a, tmp, name, extra_env, preload):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    env = base_env(a.libdir)
    env.update(extra_env)
    if preload:
        env["LD_PRELOAD"] = a.preload
        env["DSMEMTRACE_DIR"] = d
    exp = os.path.join(d, "expect.jsonl")
    try:
        p = subprocess.run([a.python, a.victim, exp, a.shim], env=env, cwd=d, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
    except subprocess.TimeoutExpired:
        fail("%s: timeout" % name)
        return None
    r = {"rc": p.returncode, "out": p.stdout.decode("utf-8", "replace"), "err": p.stderr.decode("utf-8", "replace"),
         "expect": [json.loads(l) for l in open(exp, encoding="utf-8")] if os.path.exists(exp) else [],
         "traces": sorted(glob.glob(os.path.join(d, "dsmemtrace.*.zst")))}
    if r["rc"] != 0:
        fail("%s: exit status %d; stderr:\n%s" % (name, r["rc"], r["err"]))
    return r


def pyver_of(python):
    out = subprocess.run([python, "-c", "import sys; print(sys.version_info[0]*100+sys.version_info[1], "
                          "sys.implementation.name, hasattr(sys, 'gettotalrefcount'))"],
                         stdout=subprocess.PIPE, check=True).stdout.decode().split()
    return int(out[0]), out[1] == "cpython" and out[2] == "False"


def check_stack(label, ev, exp, pycode, pystack, pyver, depth):
    sid = ev["pystack"]
    if not sid:
        fail("%s (seq %d): no Python frames" % (label, ev["seq"]))
        return
    if sid not in pystack:
        fail("%s: PYSTACK %d is not defined" % (label, sid))
        return
    got, chain = pystack[sid], exp["chain"][:depth]
    if len(got) != len(chain):
        fail("%s: %d frames, expected %d: %s" % (label, len(got), len(chain), [pycode.get(c, {}).get("qual") for c, _ in got]))
    for i, ((cid, instr), (qual, file, first, lasti)) in enumerate(zip(got, chain)):
        code = pycode.get(cid)
        if code is None:
            fail("%s: frame %d: PYCODE %d is not defined" % (label, i, cid))
            continue
        if (code["qual"], code["file"], code["firstlineno"]) != (qual, file, first):
            fail("%s: frame %d is %s (%s:%d), expected %s (%s:%d)" % (label, i, code["qual"], code["file"],
                                                                   code["firstlineno"], qual, file, first))
        if code["pyver"] != pyver:
            fail("%s: PYCODE %d pyver %d, expected %d" % (label, cid, code["pyver"], pyver))
        if i == 0:
            if not any(s <= instr < e for s, e in exp["inner"]):
                fail("%s: innermost instruction %d is not on the allocating line (%s)" % (label, instr, exp["inner"]))
            if code["linetable"] != exp["linetable"]:
                fail("%s: innermost co_linetable differs" % label)
        elif instr != lasti:
            fail("%s: frame %d (%s) instruction %d, expected %d" % (label, i, qual, instr, lasti))


def mode_frames(a, tmp, pyver, depth=32, env=None, nvtx=True):
    """nvtx: NVTX push and mark carry frames (DSMEMTRACE_NVTX_FRAMES=1 in
    env); otherwise they must carry none while allocations still do"""
    base = run_victim(a, tmp, "plain", {}, False)
    r = run_victim(a, tmp, "traced", dict(env or {}), True)
    if not base or not r or failures:
        return
    if r["out"] != base["out"]:
        fail("stdout differs with the preload:\n%s\n---\n%s" % (base["out"], r["out"]))
    if r["err"].strip():
        fail("stderr with the preload:\n" + r["err"])
    if len(r["traces"]) != 1:
        fail("expected one trace, found %s" % r["traces"])
        return
    pycode, pystack, strings, events = read_trace(a.rawframes, r["traces"][0])
    if depth == 0:
        if pycode or pystack or any(e["pystack"] for e in events):
            fail("DSMEMTRACE_PY_DEPTH=0: Python records in the trace")
        return
    bysize = {}
    for e in events:
        if e["type"] == ALLOC and e["api"] == 1:
            bysize.setdefault(e["size"], []).append(e)
    checked = 0
    for exp in r["expect"]:
        if exp["kind"] != "alloc":
            continue
        evs = [e for e in bysize.get(exp["size"], []) if e["tid"] == exp["tid"]]
        if not evs:
            fail("k=%d: no ALLOC of %d bytes on thread %d" % (exp["k"], exp["size"], exp["tid"]))
        for e in evs:
            check_stack("k=%d %s" % (exp["k"], exp["chain"][0][0]), e, exp, pycode, pystack, pyver, depth)
            checked += 1
    for kind, rec, name in (("nvtx", NVTX_PUSH, "py-region"), ("mark", NVTX_MARK, "py-mark")):
        exp = [x for x in r["expect"] if x["kind"] == kind][0]
        evs = [e for e in events if e["type"] == rec and strings.get(e["name"]) == name]
        if len(evs) != 1:
            fail("%s: %d %s records named %r" % (kind, len(evs), kind, name))
        for e in evs:
            if nvtx:
                check_stack(kind, e, exp, pycode, pystack, pyver, depth)
            elif e["pystack"]:
                fail("%s: Python frames on an NVTX record without DSMEMTRACE_NVTX_FRAMES=1" % kind)
            checked += 1
    # the daemon thread: whatever it recorded names daemon_loop innermost
    for e in bysize.get(512 * 31, []):
        if e["pystack"] and e["pystack"] in pystack:
            cid = pystack[e["pystack"]][0][0]
            if pycode.get(cid, {}).get("qual") != "daemon_loop":
                fail("daemon thread event with innermost frame %s" % pycode.get(cid, {}).get("qual"))
    for exp in [x for x in r["expect"] if x["kind"] == "native"]:
        evs = [e for e in bysize.get(exp["size"], []) if e["tid"] == exp["tid"]]
        if not evs:
            fail("native thread: no ALLOC of %d bytes on thread %d" % (exp["size"], exp["tid"]))
        if any(e["pystack"] for e in evs):
            fail("native thread (no Python thread state): its ALLOC carries Python frames")
    addrs = [x["address"] for x in r["expect"] if x["kind"] == "code_address"]
    if len(set(addrs)) == len(addrs):
        fail("reuse: no code object address was reused (%s): the scenario tests nothing" % addrs)
    ks = {x["k"] for x in r["expect"]}
    need = set(range(1, 17)) | set(range(20, 25)) | {30} | set(range(50, 60))
    if not need <= ks:
        fail("the victim did not reach scenarios %s" % sorted(need - ks))
    if subprocess.run([a.decoder, "--format", "json", r["traces"][0]], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        fail("dsmemdecode --format json failed on the trace")
    dump_crosscheck(a.decoder, r["traces"][0], pycode, pystack, events)
    print("%d stacks checked, %d PYCODE, %d PYSTACK records" % (checked, len(pycode), len(pystack)))


def mode_off(a, tmp, env, want_line):
    base = run_victim(a, tmp, "plain", {}, False)
    r = run_victim(a, tmp, "traced", env, True)
    if not base or not r or failures:
        return
    if r["out"] != base["out"]:
        fail("stdout differs with the preload")
    lines = [l for l in r["err"].splitlines() if l.strip()]
    if len(lines) != 1 or not re.search(want_line, lines[0]):
        fail("expected one stderr line matching %r, got:\n%s" % (want_line, r["err"]))
    if len(r["traces"]) != 1:
        fail("expected one trace, found %s" % r["traces"])
        return
    pycode, pystack, _, events = read_trace(a.rawframes, r["traces"][0])
    if pycode or pystack or any(e["pystack"] for e in events):
        fail("Python records in the trace although Python frames are off")
    if not any(e["type"] == ALLOC for e in events):
        fail("no ALLOC records: the trace is not the victim's")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["frames", "depth", "selftest", "unsupported"])
    for o in ("python", "libdir", "preload", "decoder", "rawframes", "victim", "shim"):
        ap.add_argument("--" + o, required=True)
    a = ap.parse_args()
    if not (os.path.exists(a.python) or shutil.which(a.python)):
        print("skip: %s not found" % a.python)
        return 77
    # the interpreter itself, not a launcher script (pyenv's shims)
    a.python = subprocess.run([a.python, "-c", "import sys; print(sys.executable)"], stdout=subprocess.PIPE,
                              check=True).stdout.decode().strip()
    pyver, cpython = pyver_of(a.python)
    supported = cpython and pyver in (311, 312)
    if (a.mode == "unsupported") == supported:
        print("skip: %s is CPython %d (release: %s): not what mode %s needs" % (a.python, pyver, cpython, a.mode))
        return 77
    tmp = tempfile.mkdtemp(prefix="dsmt-py-")
    try:
        if a.mode == "frames":
            for sub, env in (("nvtx", {"DSMEMTRACE_NVTX_FRAMES": "1"}), ("default", None)):
                os.makedirs(os.path.join(tmp, sub))
                mode_frames(a, os.path.join(tmp, sub), pyver, env=env, nvtx=env is not None)
        elif a.mode == "depth":
            for d in (3, 0):
                os.makedirs(os.path.join(tmp, str(d)))
                mode_frames(a, os.path.join(tmp, str(d)), pyver, depth=d,
                            env={"DSMEMTRACE_PY_DEPTH": str(d), "DSMEMTRACE_NVTX_FRAMES": "1"})
        elif a.mode == "selftest":
            ver = subprocess.run([a.python, "-c", "import platform; print(platform.python_version())"],
                                 stdout=subprocess.PIPE).stdout.decode().strip()
            mode_off(a, tmp, {"DSMEMTRACE_PY_SELFTEST_FAIL": "1"},
                     r"Python frames off: the frame layout check .* failed on CPython " + re.escape(ver))
        else:
            mode_off(a, tmp, {}, r"Python frames off: CPython \S+ is not supported")
    finally:
        if failures:
            print("kept for inspection: " + tmp, file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        return 1
    print("pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
