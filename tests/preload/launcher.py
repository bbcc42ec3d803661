#!/usr/bin/env python3
"""The launcher, dsmemtrace [options] -- CMD (issue 7 part 7), from the build
tree and from an installed layout, on the stand-in victim:
  - the victim traced: one trace in the -o directory, its per-step numbers
    equal to the victim's own counters; CMD's environment holds the library's
    absolute path before the LD_PRELOAD it had, DSMEMTRACE_DIR absolute and
    the options' variables; the printed decode command runs;
  - CMD's exit status (and its signal) comes back; its stdout is untouched;
  - --deepspeed-env: KEY=VALUE lines DeepSpeed's runner can split, ours
    replaced and the others kept, our library before the file's LD_PRELOAD,
    the same file after a second run; default path ./.deepspeed_env or
    $DS_ENV_FILE; without CMD only the file;
  - a copy installed as bin/dsmemtrace + LIBDIR/libdsmemtrace.so preloads
    that library;
  - bad options, a missing command or library: one line, exit 125; CMD not
    found: 127.

usage: launcher.py LAUNCHER LIBRARY STANDIN_LIBDIR VICTIM LIB_FROM_BIN WORKDIR
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

LAUNCHER, LIB, LIBDIR, VICTIM, LIB_FROM_BIN, WORK = sys.argv[1:7]
LAUNCHER, LIB, LIBDIR, VICTIM, WORK = [os.path.abspath(p) for p in (LAUNCHER, LIB, LIBDIR, VICTIM, WORK)]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
fails = []
FIELDS = ("peak_allocated", "end_allocated", "peak_reserved", "end_reserved")


def env0(**kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSMEMTRACE_") and k not in (
        "LD_PRELOAD", "NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH", "RANK", "LOCAL_RANK", "WORLD_SIZE",
        "DS_ENV_FILE")}
    env["LD_LIBRARY_PATH"] = ":".join([LIBDIR] + [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p])
    env.setdefault("STANDIN_DEVICE_MEM", str(1 << 30))
    env.update(kw)
    return env


def run(args, cwd=WORK, env=None, launcher=LAUNCHER):
    p = subprocess.run([launcher] + args, cwd=cwd, env=env or env0(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def env_file(path):
    return dict(l.split("=", 1) for l in open(path).read().splitlines() if "=" in l)


# 1. the victim traced
out = os.path.join(WORK, "traces", "sub")  # created by the launcher
envdump = os.path.join(WORK, "env.txt")
vjson = os.path.join(WORK, "victim.json")
rc, so, se = run(["-o", "traces/sub", "--native-depth", "4", "--run-id", "lt-run", "--",
                  "sh", "-c", 'env > "$0"; exec "$@"', envdump, VICTIM, "--out", vjson, "--steps", "3"],
                 env=env0(LD_PRELOAD="/nonexistent/other.so"))
if rc != 0:
    fails.append("traced victim: exit %d\n%s" % (rc, se))
e = env_file(envdump) if os.path.exists(envdump) else {}
want = {"LD_PRELOAD": os.path.realpath(LIB) + ":/nonexistent/other.so", "DSMEMTRACE_DIR": os.path.realpath(out),
        "DSMEMTRACE_NATIVE_DEPTH": "4", "DSMEMTRACE_RUN_ID": "lt-run"}
for k, v in want.items():
    if e.get(k) != v:
        fails.append("CMD's %s = %r, expected %r" % (k, e.get(k), v))
traces = sorted(os.listdir(out)) if os.path.isdir(out) else []
if len(traces) != 1 or not traces[0].startswith("dsmemtrace."):
    fails.append("traces in %s: %r (expected one)" % (out, traces))
lines = [l for l in se.splitlines() if l.startswith("dsmemtrace: decode with: ")]
if len(lines) != 1 or (traces and os.path.join(os.path.realpath(out), traces[0]) not in lines[0]):
    fails.append("no decode command naming the trace in:\n%s" % se)
else:
    cmd = shlex.split(lines[0][len("dsmemtrace: decode with: "):])
    d = subprocess.run(cmd + ["--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    doc = json.loads(d.stdout) if d.returncode == 0 else None
    v = json.load(open(vjson)) if os.path.exists(vjson) else None
    if not doc or not v:
        fails.append("decode command %r: exit %d %s" % (cmd, d.returncode, d.stderr.decode()))
    else:
        p = doc["processes"][0]
        if p["run_id"] != "lt-run":
            fails.append("trace run_id %r" % p["run_id"])
        got = {(s["device"], s["step"]): s for s in p["steps"]}
        exp = {(s["device"], s["step"]): s for s in v["steps"]}
        if sorted(got) != sorted(exp):
            fails.append("steps %r, victim %r" % (sorted(got), sorted(exp)))
        for k in exp:
            for f in FIELDS:
                if k in got and got[k][f] != exp[k][f]:
                    fails.append("step %r %s: trace %d, victim %d" % (k, f, got[k][f], exp[k][f]))

# 2. exit status, signal, stdout untouched, -q
for args, code in ((["--", VICTIM], 2), (["sh", "-c", "exit 7"], 7), (["--", "sh", "-c", "kill -TERM $$"], -15),
                   (["--", "sh", "-c", "kill -INT $$"], -2)):
    rc, so, se = run(args)
    if rc != code:
        fails.append("%r: exit %d, expected %d (%s)" % (args, rc, code, se))
rc, so, se = run(["--", "sh", "-c", "echo hello; echo err >&2"])
if rc or so != "hello\n" or not se.startswith("err\n") or "no trace in" not in se:
    fails.append("stdout/stderr of CMD: %r %r" % (so, se))
rc, so, se = run(["-q", "--", "sh", "-c", "echo hello"])
if rc or so != "hello\n" or se:
    fails.append("-q: %r %r" % (so, se))

# 3. .deepspeed_env
dse = os.path.join(WORK, "ds_env")
open(dse, "w").write("NCCL_DEBUG=INFO\nLD_PRELOAD=/opt/other.so\nDSMEMTRACE_DIR=/old\nPYTHONPATH=/x=y\n")
for rnd in range(2):
    rc, so, se = run(["--deepspeed-env=" + dse, "-o", "dsout", "--py-depth", "0", "--", "true"])
    text = open(dse).read()
    if rc:
        fails.append("--deepspeed-env run %d: exit %d %s" % (rnd, rc, se))
    for l in text.splitlines():  # DeepSpeed's runner: key, val = var.split('=', maxsplit=1)
        if len(l.split("=", 1)) != 2 or not l.split("=", 1)[0]:
            fails.append("--deepspeed-env: line %r is not KEY=VALUE" % l)
    got = env_file(dse)
    want = {"NCCL_DEBUG": "INFO", "PYTHONPATH": "/x=y", "LD_PRELOAD": os.path.realpath(LIB) + ":/opt/other.so",
            "DSMEMTRACE_DIR": os.path.realpath(os.path.join(WORK, "dsout")), "DSMEMTRACE_PY_DEPTH": "0"}
    if got != want or len(text.splitlines()) != len(want):
        fails.append("--deepspeed-env round %d: %r, expected %r" % (rnd, text, want))
    if rnd == 0:
        first = text
    elif text != first:
        fails.append("--deepspeed-env: a second run changed the file:\n%s\n%s" % (first, text))
cwd2 = os.path.join(WORK, "cwd2")
os.makedirs(cwd2)
rc, so, se = run(["--deepspeed-env"], cwd=cwd2)  # no CMD: the file only
f2 = os.path.join(cwd2, ".deepspeed_env")
if rc or not os.path.exists(f2) or env_file(f2).get("LD_PRELOAD") != os.path.realpath(LIB) \
        or env_file(f2).get("DSMEMTRACE_DIR") != os.path.realpath(cwd2):
    fails.append("--deepspeed-env without CMD: exit %d, %r" % (rc, open(f2).read() if os.path.exists(f2) else None))
rc, so, se = run(["--deepspeed-env", "--", "true"], cwd=cwd2, env=env0(DS_ENV_FILE="custom_env"))
if rc or not os.path.exists(os.path.join(cwd2, "custom_env")):
    fails.append("DS_ENV_FILE: exit %d, %r" % (rc, os.listdir(cwd2)))

# 4. an installed layout: PREFIX/bin/dsmemtrace, PREFIX/bin/LIB_FROM_BIN/libdsmemtrace.so
if not LIB_FROM_BIN.startswith("/"):
    pre = os.path.join(WORK, "prefix")
    os.makedirs(os.path.join(pre, "bin"))
    shutil.copy(LAUNCHER, os.path.join(pre, "bin", "dsmemtrace"))
    libdst = os.path.normpath(os.path.join(pre, "bin", LIB_FROM_BIN))
    os.makedirs(libdst, exist_ok=True)
    shutil.copy(LIB, os.path.join(libdst, "libdsmemtrace.so"))
    rc, so, se = run(["--", "sh", "-c", 'echo "$LD_PRELOAD"'], launcher=os.path.join(pre, "bin", "dsmemtrace"))
    if rc or so.strip() != os.path.realpath(os.path.join(libdst, "libdsmemtrace.so")):
        fails.append("installed layout: exit %d, LD_PRELOAD %r (expected %s)\n%s" % (rc, so, libdst, se))

# 5. bad uses: one line
for args, code, what in ((["--bogus", "--", "true"], 125, "--bogus"),
                         (["--native-depth", "99", "--", "true"], 125, "--native-depth"),
                         (["--py-depth", "x", "--", "true"], 125, "--py-depth"),
                         (["--run-id"], 125, "--run-id"),
                         ([], 125, "no command"),
                         (["--lib", "/nonexistent/lib.so", "--", "true"], 125, "--lib"),
                         (["--", "/nonexistent/cmd"], 127, "/nonexistent/cmd")):
    rc, so, se = run(args)
    if rc != code or len(se.strip().splitlines()) != 1 or what not in se:
        fails.append("%r: exit %d (expected %d), stderr %r" % (args, rc, code, se))
rc, so, se = run(["--help"])
if rc or "--deepspeed-env" not in so or "DSMEMTRACE_NATIVE_DEPTH" not in so:
    fails.append("--help: exit %d %r" % (rc, so[:200]))

if fails:
    print("FAIL\n  " + "\n  ".join(fails))
    sys.exit(1)
print("ok")
