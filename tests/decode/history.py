#!/usr/bin/env python3
"""Frame history (format.h, META zstd_prefix_bytes): the same training-like
trace written with independent frames, with a history shorter than a frame,
longer than one and the default 1 MiB, with small and large frames, decodes
to the same report and the same records; the history makes the file smaller;
a trace whose header does not announce its history is damaged from its second
frame on; cut at any frame boundary, each variant still decodes.

usage: history.py MKTRACE DSMEMDECODE WORKDIR
"""
import json
import os
import random
import shutil
import subprocess
import sys

MK, DEC, WORK = [os.path.abspath(a) for a in sys.argv[1:4]]
fails = []


def mk(name, header, synth):
    path = os.path.join(WORK, name + ".txt")
    with open(path, "w") as f:
        f.write("%s\nmeta host hist\nmeta pid 7\nmeta ts_unit_ns 1000\n"
                "meta start_realtime_ns 1700000000000000000\n%s\n" % (header, synth))
    p = subprocess.run([MK, path, os.path.join(WORK, name + ".zst")], stderr=subprocess.PIPE)
    if p.returncode:
        fails.append("mktrace %s: %s" % (name, p.stderr.decode()))
    return os.path.join(WORK, name + ".zst")


def run(args):
    p = subprocess.run([DEC] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode < 0 or p.returncode >= 128:
        fails.append("%s: died by a signal (status %d)" % (args, p.returncode))
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def report(path):
    rc, out, err = run(["--format", "json", "-v", path])
    if rc != 0:
        fails.append("%s: exit %d\n%s" % (path, rc, err))
        return None
    doc = json.loads(out)
    for p in doc["processes"]:
        p.pop("file")
    return doc


def records(path):
    """--dump without the header line and the zstd_prefix_bytes META"""
    rc, out, err = run(["--dump", path])
    if rc != 0:
        fails.append("--dump %s: exit %d\n%s" % (path, rc, err))
    return [l for l in out.splitlines()[1:] if '"zstd_prefix_bytes"' not in l]


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

small = "synth events=30000 threads=2 batch=64 frame=4096"
large = "synth events=60000 threads=2 batch=256 frame=300000"
variants = {
    "p_default": ("header", small),
    "p_none": ("header zstd_prefix_bytes=0", small),
    "p_100": ("header zstd_prefix_bytes=100", small),
    "p_5000": ("header zstd_prefix_bytes=5000", small),
    "p_default_large": ("header", large),
    "p_none_large": ("header zstd_prefix_bytes=0", large),
    "p_400k_large": ("header zstd_prefix_bytes=400000", large),
}
paths = {n: mk(n, h, s) for n, (h, s) in variants.items()}

for group in (["p_default", "p_none", "p_100", "p_5000"], ["p_default_large", "p_none_large", "p_400k_large"]):
    ref = group[0]
    want_rep, want_rec = report(paths[ref]), records(paths[ref])
    if want_rep and not want_rep["processes"][0]["steps"]:
        fails.append("%s: no steps decoded" % ref)
    for n in group[1:]:
        if report(paths[n]) != want_rep:
            fails.append("%s: report differs from %s" % (n, ref))
        if records(paths[n]) != want_rec:
            fails.append("%s: --dump records differ from %s" % (n, ref))

# the history is used: with frames smaller than a step, 1 MiB of it makes the
# repeated steps much smaller
for a, b in (("p_default", "p_none"),):
    sa, sb = os.path.getsize(paths[a]), os.path.getsize(paths[b])
    if not sa * 2 < sb:
        fails.append("%s (%d bytes) not much smaller than %s (%d bytes)" % (a, sa, b, sb))

# compressed against a history the header does not announce: frame 2 is damaged
na = mk("unannounced", "header announce=0", small)
rc, out, err = run(["--format", "json", na])
if rc != 2 or "damaged at byte offset" not in err or "(frame 2:" not in err:
    fails.append("unannounced history: exit %d, stderr %r" % (rc, err))

# cut at every frame boundary: a shorter trace; one byte before it: truncated
# after the data frames before (frame numbers count data frames only)
def frame_ends(data):
    """end offsets of the zstd frames after the header"""
    off, ends = 8 + int.from_bytes(data[4:8], "little"), []
    while off < len(data):
        if data[off:off + 4] != bytes.fromhex("28b52ffd"):
            raise AssertionError("not a zstd frame at %d" % off)
        fhd = data[off + 4]
        single = (fhd >> 5) & 1
        fcs = [1 if single else 0, 2, 4, 8][fhd >> 6]
        q = off + 5 + (0 if single else 1) + [0, 1, 2, 4][fhd & 3] + fcs
        while True:
            bh = int.from_bytes(data[q:q + 3], "little")
            q += 3 + (1 if (bh >> 1) & 3 == 1 else bh >> 3)
            if bh & 1:
                break
        off = q + (4 if (fhd >> 2) & 1 else 0)
        ends.append(off)
    return ends


for n in ("p_default", "p_100", "p_none"):
    data = open(paths[n], "rb").read()
    ends = frame_ends(data)
    if len(ends) < 10:
        fails.append("%s: only %d frames" % (n, len(ends)))
    cutp = os.path.join(WORK, "cut.zst")
    for k, end in enumerate(ends[:-1], 1):
        for cut, want in ((end, None), (end - 1, "truncated after frame %d," % (k - 1))):
            with open(cutp, "wb") as f:
                f.write(data[:cut])
            rc, out, err = run(["--format", "json", cutp])
            if rc != 0 or "damaged" in err or (want and want not in err) or (not want and "truncated" in err):
                fails.append("%s cut at %d (frame %d): exit %d, stderr %r" % (n, cut, k, rc, err))

# every field value comes back: random values of every magnitude (1 to 10
# byte varints, both signs of the deltas), through the fast and the checked
# field decoders, from the report as from --dump
rng = random.Random(7)


def rnd():
    return rng.choice([0, 1, 127, 128, 16383, 16384, (1 << 32) - 1, 1 << 32, (1 << 63) + 5, (1 << 64) - 1,
                       rng.randrange(1 << rng.randrange(1, 65))])


lines, want = ["meta host vals"], []
for i in range(3000):
    if i % 500 == 0:
        lines.append("frame")
    if i % 7 == 0:
        lines.append("thread %d" % (1 + i % 3))
    kind = rng.choice(["alloc", "free"])
    api = rng.choice(["torch", "malloc", "async", "200", str(rng.randrange(1 << 40))])
    v = dict(ptr=rnd(), size=rnd(), stream=rnd(), stack=rnd(), site=rnd(), dev=rng.choice([0, 1, 5, 253]))
    tot = (rnd(), rnd()) if api == "torch" else None
    lines.append("%s seq=%d ts=%d api=%s %s%s" % (kind, i, 10 * i + rng.randrange(3), api,
                 " ".join("%s=%d" % kv for kv in v.items()), " tot=%d,%d" % tot if tot else ""))
    want.append((i, kind.upper(), v, tot))
vp = os.path.join(WORK, "values.txt")
with open(vp, "w") as f:
    f.write("\n".join(lines) + "\n")
subprocess.run([MK, vp, os.path.join(WORK, "values.zst")], check=True)
rc, out, err = run(["--dump", os.path.join(WORK, "values.zst")])
got = {}
for l in out.splitlines():
    w = l.split(" ")
    if len(w) > 2 and w[1] in ("ALLOC", "FREE"):
        d = dict(x.split("=", 1) for x in w[2:] if "=" in x)
        got[int(d["seq"])] = (w[1], d)
for seq, kind, v, tot in want:
    if seq not in got:
        fails.append("values: seq %d missing from --dump" % seq)
        continue
    k, d = got[seq]
    ok = k == kind and int(d["ptr"], 16) == v["ptr"] and int(d["size"]) == v["size"] and \
        int(d["stream"], 16) == v["stream"] and int(d["stack"]) == v["stack"] and \
        int(d["site"], 16) == v["site"] and d["dev"] == str(v["dev"]) and int(d["ts"]) // 10 == seq
    if tot:
        ok = ok and int(d["tot_alloc"]) == tot[0] and int(d["tot_reserved"]) == tot[1]
    if not ok:
        fails.append("values: seq %d: wrote %s %s %s, --dump says %s %s" % (seq, kind, v, tot, k, d))
        if len(fails) > 5:
            break
rc, out, err = run(["--format", "json", "-v", os.path.join(WORK, "values.zst")])
if rc != 0 or '"events": 3000' not in out:
    fails.append("values: report exit %d, %s" % (rc, err))

if fails:
    print("\n".join(fails[:50]))
    print("%d failure(s)" % len(fails))
    sys.exit(1)
print("ok")
