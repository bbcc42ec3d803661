#!/usr/bin/env python3
"""End-to-end test driver: a victim program over the stand-in CUDA/torch
libraries, run with and without LD_PRELOAD=libdsmemtrace.so.

  run_victim.py train --libdir DIR [--preload LIB --decoder EXE] -- VICTIM ARGS...
      Runs the victim (which writes its own per-step torch counters as JSON)
      twice without the preload (must be deterministic), then, given
      --preload/--decoder, once under the preload, and checks:
        - exit status and stdout identical with and without the preload, and
          the victim's own numbers identical (the preload changed nothing);
        - every c10 report and OOM report reached the stand-in libc10 with its
          arguments (count and checksum equal to what the allocator sent);
        - exactly one trace file, dsmemtrace.<host>.<pid>.zst, pid = victim's;
        - `dsmemdecode --format json TRACE`: one process, with per device the
          same number of steps as the victim, and each step's peak_allocated,
          end_allocated, peak_reserved, end_reserved equal to the byte.
      Without --preload it checks only the victim (exit 0 = stand-ins sane).

  run_victim.py notrace --libdir DIR --preload LIB -- COMMAND ARGS...
      Runs COMMAND with and without the preload: same status and output, and
      no trace file anywhere (DSMEMTRACE_DIR and the working directory).

Exit status 0 pass, 1 fail, 77 skip.
"""
import argparse
import glob
import json
import os
import re
import socket
import subprocess
import sys
import tempfile

FIELDS = ("peak_allocated", "end_allocated", "peak_reserved", "end_reserved")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


def base_env(libdir):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "DSMEMTRACE_DIR", "NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH",
              "RANK", "LOCAL_RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        env.pop(k, None)
    paths = [libdir] + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    env["LD_LIBRARY_PATH"] = ":".join(paths)
    env.setdefault("STANDIN_DEVICE_MEM", str(1 << 30))
    return env


def run(cmd, env, cwd, timeout=90):
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        fail("timeout: %s" % " ".join(cmd))
    return p.pid, p.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def traces_in(*dirs):
    found = []
    for d in dirs:
        found += glob.glob(os.path.join(d, "dsmemtrace.*"))
    return sorted(set(found))


def victim_cmd(argv, out_json):
    return [a.replace("@OUT@", out_json) for a in argv]


def check_victim_json(v, label):
    if "c10" not in v:  # examples write the step counters only
        return
    if v["c10"]["reports"] != v["allocator"]["reports"]:
        fail("%s: libc10 received %d reports, the allocator sent %d (not forwarded?)"
             % (label, v["c10"]["reports"], v["allocator"]["reports"]))
    if v["c10"]["report_sum"] != v["allocator"]["report_sum"]:
        fail("%s: report arguments changed on the way to libc10 (checksum %d != %d)"
             % (label, v["c10"]["report_sum"], v["allocator"]["report_sum"]))
    if v["c10"]["ooms"] != v["allocator"]["ooms"] or v["c10"]["oom_sum"] != v["allocator"]["oom_sum"]:
        fail("%s: OOM reports: libc10 got %d (sum %d), allocator sent %d (sum %d)"
             % (label, v["c10"]["ooms"], v["c10"]["oom_sum"], v["allocator"]["ooms"], v["allocator"]["oom_sum"]))
    if v["allocator"]["reports"] == 0:
        fail("%s: the victim made no allocations" % label)


def cmd_train(args):
    env0 = base_env(args.libdir)
    with tempfile.TemporaryDirectory(prefix="dsmt-preload-") as tmp:
        # --- without the preload, twice: the victim must be deterministic
        ref = []
        for i in range(2):
            out_json = os.path.join(tmp, "plain%d.json" % i)
            _, rc, out, err = run(victim_cmd(args.command, out_json), env0, tmp)
            if rc != 0:
                fail("victim without preload exited %d\n%s" % (rc, err))
                return
            with open(out_json) as f:
                ref.append((rc, out, json.load(f)))
        if ref[0][1] != ref[1][1] or ref[0][2]["steps"] != ref[1][2]["steps"]:
            fail("victim is not deterministic without the preload")
        rc0, out0, v0 = ref[0]
        check_victim_json(v0, "without preload")
        if traces_in(tmp):
            fail("trace files without the preload: %s" % traces_in(tmp))
        if not args.preload:
            return
        for what, path in (("preload", args.preload), ("decoder", args.decoder)):
            if not path or not os.path.exists(path):
                print("SKIP: %s %s not built" % (what, path))
                sys.exit(77)

        # --- under the preload
        tdir = os.path.join(tmp, "traces")
        os.mkdir(tdir)
        env1 = dict(env0)
        env1["LD_PRELOAD"] = os.path.abspath(args.preload)
        env1["DSMEMTRACE_DIR"] = tdir
        env1.update(kv.split("=", 1) for kv in args.env)
        out_json = os.path.join(tmp, "preload.json")
        pid, rc1, out1, err1 = run(victim_cmd(args.command, out_json), env1, tmp)
        if rc1 != rc0:
            fail("exit status %d under the preload, %d without\n%s" % (rc1, rc0, err1))
            return
        if out1 != out0:
            fail("stdout differs under the preload:\n--- without\n%s--- with\n%s" % (out0, out1))
        with open(out_json) as f:
            v1 = json.load(f)
        check_victim_json(v1, "under the preload")
        if v1["steps"] != v0["steps"] or v1.get("baseline") != v0.get("baseline"):
            fail("the victim's own counters changed under the preload")
        if traces_in(tmp):
            fail("trace files outside DSMEMTRACE_DIR: %s" % traces_in(tmp))
        files = traces_in(tdir)
        rank = env1.get("RANK")
        want = "dsmemtrace.%s.%d%s.zst" % (socket.gethostname(), pid, ".rank" + rank if rank else "")
        if len(files) != 1:
            fail("expected one trace file in %s, found %s" % (tdir, [os.path.basename(f) for f in files]))
            return
        if os.path.basename(files[0]) != want:
            fail("trace file named %s, expected %s" % (os.path.basename(files[0]), want))

        # --- decode and compare, step by step, device by device
        dcmd = [args.decoder, "--format", "json"] + args.decode_arg + [files[0]]
        _, rcd, dout, derr = run(dcmd, dict(os.environ), tmp)
        if rcd != 0:
            fail("%s exited %d\n%s" % (" ".join(dcmd), rcd, derr))
            return
        try:
            d = json.loads(dout)
        except ValueError as e:
            fail("decoder output is not JSON (%s):\n%s" % (e, dout[:2000]))
            return
        if d.get("format") not in ("dsmemdecode-steps/2", "dsmemdecode-steps/3"):
            fail("decoder format %r, expected dsmemdecode-steps/3" % d.get("format"))
        procs = d.get("processes", [])
        if len(procs) != 1:
            fail("decoder reports %d processes, expected 1" % len(procs))
            return
        p = procs[0]
        if p.get("pid") != pid:
            fail("decoder pid %r, victim pid %d" % (p.get("pid"), pid))
        if rank is not None and p.get("rank") != int(rank):
            fail("decoder rank %r, RANK=%s" % (p.get("rank"), rank))
        if "WORLD_SIZE" in env1 and p.get("world_size") != int(env1["WORLD_SIZE"]):
            fail("decoder world_size %r, WORLD_SIZE=%s" % (p.get("world_size"), env1["WORLD_SIZE"]))
        if p.get("truncated"):
            fail("decoder says the trace is truncated")
        compare_steps(v0, p.get("steps", []), " ".join(dcmd))
        if args.want_host_per_step:
            rows = [r for r in p.get("steps", []) if r.get("kind", "step") == "step"]
            if not rows:
                fail("no step rows to check host samples in")
            for r in rows:
                if r.get("peak_host_rss") is None or not r.get("peak_host_rss"):
                    fail("step %s: no host-memory sample inside the step (peak_host_rss %r)"
                         % (r.get("step"), r.get("peak_host_rss")))
        if args.keep and failures:
            keep = os.path.abspath(args.keep)
            os.makedirs(keep, exist_ok=True)
            for f in files + [out_json]:
                subprocess.call(["cp", f, keep])
            print("kept %s and the victim's JSON in %s" % (os.path.basename(files[0]), keep), file=sys.stderr)


def compare_steps(v, dsteps, dcmd):
    ndev = v["devices"]
    exp = {(s["device"], s["step"]): s for s in v["steps"]}
    got = {}
    for s in dsteps:
        key = (s.get("device"), s.get("step"))
        if key in got:
            fail("decoder lists device %s step %s twice" % key)
        got[key] = s
    for dev in range(ndev):
        ne = sorted(k[1] for k in exp if k[0] == dev)
        ng = sorted(k[1] for k in got if k[0] == dev)
        if ne != ng:
            fail("device %d: decoder steps %s, victim steps %s" % (dev, ng, ne))
    extra = sorted({k[0] for k in got} - set(range(ndev)))
    if extra:
        fail("decoder reports devices %s the victim never used" % extra)
    bad = 0
    for key in sorted(exp):
        if key not in got:
            continue
        e, g = exp[key], got[key]
        diffs = ["%s %s (torch %d, %+d)" % (f, g.get(f), e[f], (g.get(f) or 0) - e[f])
                 for f in FIELDS if g.get(f) != e[f]]
        if diffs:
            bad += 1
            fail("device %d step %d: %s" % (key[0], key[1], "; ".join(diffs)))
    if bad:
        print("decoder command: %s" % dcmd, file=sys.stderr)
    elif not failures:
        print("%d steps x %d device(s) equal to the byte" % (len(exp) // max(ndev, 1), ndev))


def cmd_notrace(args):
    if not args.preload or not os.path.exists(args.preload):
        print("SKIP: preload %s not built" % args.preload)
        sys.exit(77)
    env0 = base_env(args.libdir)
    with tempfile.TemporaryDirectory(prefix="dsmt-notrace-") as tmp:
        tdir = os.path.join(tmp, "traces")
        os.mkdir(tdir)
        _, rc0, out0, err0 = run(args.command, env0, tmp)
        env1 = dict(env0)
        env1["LD_PRELOAD"] = os.path.abspath(args.preload)
        env1["DSMEMTRACE_DIR"] = tdir
        _, rc1, out1, err1 = run(args.command, env1, tmp)
        if rc1 != rc0 or out1 != out0:
            fail("%s: status %d/%d, output differs with the preload:\n%s\n%s" % (args.command, rc1, rc0, out1, err1))
        # the preload must not complain either (it reaches every process)
        if err1 != err0:
            fail("%s: stderr differs with the preload:\n%s" % (args.command, err1))
        files = traces_in(tdir, tmp)
        if files:
            fail("%s made no allocation but left %s" % (args.command, [os.path.relpath(f, tmp) for f in files]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("train", "notrace"))
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--preload")
    ap.add_argument("--decoder")
    ap.add_argument("--decode-arg", action="append", default=[])
    ap.add_argument("--env", action="append", default=[], help="VAR=VALUE for the traced run")
    ap.add_argument("--keep", help="copy the trace here when the test fails")
    ap.add_argument("--want-host-per-step", action="store_true",
                    help="every step's row must hold a host-memory sample taken inside it")
    argv = sys.argv[1:]
    if "--" not in argv:
        ap.error("no command (give it after --)")
    cut = argv.index("--")
    args = ap.parse_args(argv[:cut])
    args.command = argv[cut + 1:]
    if not args.command:
        ap.error("no command")
    (cmd_train if args.mode == "train" else cmd_notrace)(args)
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
