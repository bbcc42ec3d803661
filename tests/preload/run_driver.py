#!/usr/bin/env python3
"""Driver-level end-to-end test: victim_driver (every path to the driver, its
own ground truth on stdout) under LD_PRELOAD=libdsmemtrace.so, one scenario
per run, checked against `dsmemdecode --dump` and `--format json`.

  run_driver.py SCENARIO --libdir DIR --victim EXE --preload LIB --decoder EXE
                [--foreign LIB] [--keep DIR]

Scenarios (MECHANICS.md §1.5-1.6, §2):
  cupti      default: CUPTI through CUDA_INJECTION64_PATH -> SOURCE cupti/start,
             every driver event via cupti (+rt inside runtime calls), statics
             via activity, no stderr line
  disabled   DSMEMTRACE_CUPTI=0: via dlsym, SOURCE dlsym/disabled
  no-cupti   DSMEMTRACE_CUPTI_LIB=/nonexistent: via dlsym, SOURCE dlsym/no_cupti,
             one stderr line
  refused    STANDIN_CUPTI_REFUSE=1 (as under nsys): via dlsym, SOURCE dlsym/refused
  yield      victim --yield-after N: SOURCE cupti/start then dlsym/yield; events
             before the hand-over via cupti, after via dlsym, none lost or
             doubled; the victim's own subscriber got callbacks; one stderr line
  no-dlsym   DSMEMTRACE_NO_DLSYM=1: CUPTI alone, same numbers
  foreign    CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH name another tool
             (foreign_tool.c) that subscribes first: it keeps CUPTI and gets its
             callbacks; we record via dlsym, SOURCE reason foreign (or refused)
  off        DSMEMTRACE_CUPTI=0 DSMEMTRACE_NO_DLSYM=1: no DRV record, SOURCE
             via none; device numbers from the runtime hooks only

Every scenario: the victim's stdout and exit status are the same with and
without the preload; per-op DRV counts equal the victim's; the per-device
peak/end device bytes and host-pinned bytes of the decoder's JSON equal the
victim's ground truth (what the trace can see: module statics only while
CUPTI activity is ours).  A JSON field the decoder does not print is a
failure, never a skip.  Exit status 0 pass, 1 fail, 77 skip.
"""
import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

F_AFTER_YIELD, F_RT, F_CUPTI_ONLY = 1, 2, 4
DEVICE_CATS = ("device", "managed", "static")
HOST_CATS = ("host", "registered")
YIELD_AFTER = 30

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


def base_env(libdir):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("DSMEMTRACE_", "STANDIN_")) or k in ("LD_PRELOAD", "NVTX_INJECTION64_PATH",
                                                               "CUDA_INJECTION64_PATH", "RANK", "LOCAL_RANK",
                                                               "WORLD_SIZE"):
            del env[k]
    env["LD_LIBRARY_PATH"] = ":".join([libdir] + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p])
    env["STANDIN_DEVICE_MEM"] = str(1 << 30)
    return env


def run(cmd, env, cwd, timeout=60):
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def scenario_setup(name, args, tmp):
    """environment of the traced run, extra victim args, expectations"""
    env, vargs = {}, []
    exp = {"cupti_at_start": True, "dlsym": True, "sources": [("cupti", "start")], "stderr_lines": 0}
    if name == "cupti":
        pass
    elif name == "disabled":
        env["DSMEMTRACE_CUPTI"] = "0"
        exp.update(cupti_at_start=False, sources=[("dlsym", "disabled")])
    elif name == "no-cupti":
        env["DSMEMTRACE_CUPTI_LIB"] = "/nonexistent/libcupti.so.13"
        exp.update(cupti_at_start=False, sources=[("dlsym", "no_cupti")], stderr_lines=1)
    elif name == "refused":
        env["STANDIN_CUPTI_REFUSE"] = "1"
        exp.update(cupti_at_start=False, sources=[("dlsym", "refused")], stderr_lines=1)
    elif name == "yield":
        vargs = ["--yield-after", str(YIELD_AFTER)]
        exp.update(sources=[("cupti", "start"), ("dlsym", "yield")], stderr_lines=1)
    elif name == "no-dlsym":
        env["DSMEMTRACE_NO_DLSYM"] = "1"
        exp.update(dlsym=False)
    elif name == "foreign":
        if not args.foreign:
            fail("scenario foreign needs --foreign")
        env["CUDA_INJECTION64_PATH"] = os.path.abspath(args.foreign)
        env["NVTX_INJECTION64_PATH"] = os.path.abspath(args.foreign)
        env["FOREIGN_TOOL_OUT"] = os.path.join(tmp, "foreign.json")
        exp.update(cupti_at_start=False, sources=[("dlsym", ("foreign", "refused"))], stderr_lines=1)
    elif name == "off":
        env["DSMEMTRACE_CUPTI"] = "0"
        env["DSMEMTRACE_NO_DLSYM"] = "1"
        exp.update(cupti_at_start=False, dlsym=False, sources=[("none", "disabled")])
    else:
        raise SystemExit("unknown scenario %s" % name)
    return env, vargs, exp


def cupti_sees(flags, exp):
    """does the trace's CUPTI (callbacks or activity) see this event?"""
    if not exp["cupti_at_start"]:
        return False
    return not (flags & F_AFTER_YIELD)


def expected_events(truth, exp):
    """the DRV events the trace must hold, in order: [(op, expected via, flags)]"""
    out = []
    for op, dev, cat, delta, flags in truth["ops"]:
        if flags & F_CUPTI_ONLY:
            if cupti_sees(flags, exp):
                out.append((op, "activity" if op.startswith("static") else "cupti", flags))
            continue
        if cupti_sees(flags, exp):
            via = "cupti"
        elif exp["dlsym"]:
            via = "dlsym"
        else:
            continue
        out.append((op, via + ("+rt" if flags & F_RT else ""), flags))
    return out


def levels(truth, exp, runtime_only=False):
    """{dev: (peak, end)} of device bytes and (peak, end) of host pinned"""
    cur, peak = collections.Counter(), collections.Counter()
    hcur = hpeak = 0
    if runtime_only:
        for api, dev, cat, delta in truth["rt"]:
            if cat in DEVICE_CATS:
                cur[dev] += delta
                peak[dev] = max(peak[dev], cur[dev])
            elif cat in HOST_CATS:
                hcur += delta
                hpeak = max(hpeak, hcur)
        return {d: (peak[d], cur[d]) for d in peak}, (hpeak, hcur)
    for op, dev, cat, delta, flags in truth["ops"]:
        if flags & F_CUPTI_ONLY and not cupti_sees(flags, exp):
            continue
        if not (flags & F_CUPTI_ONLY) and not cupti_sees(flags, exp) and not exp["dlsym"]:
            continue
        if cat in DEVICE_CATS:
            cur[dev] += delta
            peak[dev] = max(peak[dev], cur[dev])
        elif cat in HOST_CATS:
            hcur += delta
            hpeak = max(hpeak, hcur)
    return {d: (peak[d], cur[d]) for d in peak}, (hpeak, hcur)


DRV = re.compile(r"^\d+ DRV seq=(\d+) .* op=(\w+) via=([\w+]+) dev=(\S+) ")
SOURCE = re.compile(r"^\d+ SOURCE seq=(\d+) .* via=(\w+) reason=(\w+)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario")
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--victim", required=True)
    ap.add_argument("--preload")
    ap.add_argument("--decoder")
    ap.add_argument("--foreign")
    ap.add_argument("--keep")
    args = ap.parse_args()
    for what, path in (("preload", args.preload), ("decoder", args.decoder)):
        if not path or not os.path.exists(path):
            print("SKIP: %s %s not built" % (what, path))
            sys.exit(77)
    args.preload, args.decoder = os.path.abspath(args.preload), os.path.abspath(args.decoder)
    with tempfile.TemporaryDirectory(prefix="dsmt-driver-") as tmp:
        check(args, tmp)
        if failures and args.keep:
            os.makedirs(args.keep, exist_ok=True)
            for f in glob.glob(os.path.join(tmp, "traces", "*")):
                subprocess.call(["cp", f, args.keep])
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        sys.exit(1)
    print("ok")


def check(args, tmp):
    env_extra, vargs, exp = scenario_setup(args.scenario, args, tmp)
    env0 = base_env(args.libdir)
    cmd = [os.path.abspath(args.victim)] + vargs
    # --- without the preload (the foreign tool, if any, is there too)
    env_plain = dict(env0)
    env_plain.update({k: v for k, v in env_extra.items() if not k.startswith("DSMEMTRACE_")})
    if "FOREIGN_TOOL_OUT" in env_plain:
        env_plain["FOREIGN_TOOL_OUT"] += ".plain"
    rc0, out0, err0 = run(cmd, env_plain, tmp)
    if rc0 != 0:
        fail("victim without the preload exited %d\n%s" % (rc0, err0))
        return
    truth = json.loads(out0)
    if vargs:
        if truth["own_cupti_subscribe"] != 0 or truth["own_cupti_callbacks"] <= 0:
            fail("without the preload the victim's own CUPTI subscriber got %d callbacks (subscribe -> %d)"
                 % (truth["own_cupti_callbacks"], truth["own_cupti_subscribe"]))
    # --- under the preload
    tdir = os.path.join(tmp, "traces")
    os.mkdir(tdir)
    env1 = dict(env0)
    env1.update(env_extra)
    env1["LD_PRELOAD"] = os.path.abspath(args.preload)
    env1["DSMEMTRACE_DIR"] = tdir
    rc1, out1, err1 = run(cmd, env1, tmp)
    if rc1 != rc0:
        fail("exit status %d under the preload, %d without\n%s" % (rc1, rc0, err1))
        return
    if out1 != out0:
        fail("the victim's stdout differs under the preload:\n--- without\n%s--- with\n%s" % (out0, out1))
    if vargs:
        c0 = [l for l in err0.splitlines() if "own CUPTI ENTER callbacks" in l]
        c1 = [l for l in err1.splitlines() if "own CUPTI ENTER callbacks" in l]
        if c0 != c1:
            print("NOTE: the victim's subscriber saw other driver calls under the preload (the tracer's own):\n"
                  "  without: %s\n  with:    %s" % (c0, c1))
    ours = [l for l in err1.splitlines() if l.startswith("dsmemtrace[")]
    if len(ours) != exp["stderr_lines"]:
        fail("%d stderr line(s) from the library, expected %d:\n%s" % (len(ours), exp["stderr_lines"], err1))
    if args.scenario == "foreign":
        for label, path in (("without", env_plain["FOREIGN_TOOL_OUT"]), ("with", env1["FOREIGN_TOOL_OUT"])):
            try:
                with open(path) as f:
                    ft = json.load(f)
            except (OSError, ValueError) as e:
                fail("foreign tool %s the preload: no report (%s)" % (label, e))
                continue
            if ft["subscribe"] != 0 or ft["callbacks"] <= 0 or ft["nvtx_inits"] < 1:
                fail("foreign tool %s the preload: subscribe %d, %d callbacks, %d NVTX inits (wants 0, >0, >=1)"
                     % (label, ft["subscribe"], ft["callbacks"], ft["nvtx_inits"]))
            else:
                print("foreign tool %s the preload: %d callbacks (ENTER+EXIT, all driver APIs), %d NVTX init(s)"
                      % (label, ft["callbacks"], ft["nvtx_inits"]))
    files = sorted(glob.glob(os.path.join(tdir, "dsmemtrace.*")))
    if len(files) != 1:
        fail("expected one trace file, found %s" % [os.path.basename(f) for f in files])
        return
    trace = files[0]

    # --- --dump: sources and every DRV record
    rcd, dump, derr = run([args.decoder, "--dump", trace], dict(os.environ), tmp)
    if rcd != 0:
        fail("dsmemdecode --dump exited %d\n%s" % (rcd, derr))
        return
    drv, sources = [], []
    for line in dump.splitlines():
        m = DRV.match(line)
        if m:
            drv.append((int(m.group(1)), m.group(2), m.group(3), m.group(4)))
            continue
        m = SOURCE.match(line)
        if m:
            sources.append((int(m.group(1)), m.group(2), m.group(3)))
    drv.sort()
    sources.sort()
    check_sources(sources, exp)
    want = expected_events(truth, exp)
    check_events(drv, want, sources)

    # --- JSON: per device peak/end device bytes, host pinned
    rcj, js, jerr = run([args.decoder, "--format", "json", trace], dict(os.environ), tmp)
    if rcj != 0:
        fail("dsmemdecode --format json exited %d\n%s" % (rcj, jerr))
        return
    d = json.loads(js)
    procs = d.get("processes", [])
    if len(procs) != 1:
        fail("decoder reports %d processes" % len(procs))
        return
    check_json(procs[0], truth, exp, want, args.scenario)


def check_sources(sources, exp):
    got = [(v, r) for _, v, r in sources]
    ok = len(got) == len(exp["sources"]) and all(
        g[0] == e[0] and (g[1] in e[1] if isinstance(e[1], tuple) else g[1] == e[1])
        for g, e in zip(got, exp["sources"]))
    if not ok:
        fail("SOURCE records %s, expected %s" % (got, exp["sources"]))


def check_events(drv, want, sources):
    got_counts = collections.Counter(op for _, op, _, _ in drv)
    want_counts = collections.Counter(op for op, _, _ in want)
    for op in sorted(set(got_counts) | set(want_counts)):
        if got_counts[op] != want_counts[op]:
            fail("op %s: %d DRV record(s), the victim made %d" % (op, got_counts[op], want_counts[op]))
    # order and via, event by event (activity records arrive when CUPTI
    # delivers its buffer, so statics are compared apart)
    g = [(op, via) for _, op, via, _ in drv if via != "activity"]
    w = [(op, via) for op, via, _ in want if via != "activity"]
    for i, (a, b) in enumerate(zip(g, w)):
        if a != b:
            fail("DRV event %d: %s via=%s, expected %s via=%s (later mismatches not reported)" % (i, a[0], a[1], b[0],
                                                                                                   b[1]))
            break
    ga = sorted(op for _, op, via, _ in drv if via == "activity")
    wa = sorted(op for op, via, _ in want if via == "activity")
    if ga != wa:
        fail("activity records %s, expected %s" % (ga, wa))
    if len(g) == len(w) and g == w and ga == wa:
        print("%d DRV records in order, ops and via as expected (%s)" % (len(drv), dict(sorted(want_counts.items()))))


def check_json(p, truth, exp, want, scenario):
    runtime_only = not exp["dlsym"] and not exp["cupti_at_start"]
    devs, (hpeak, hend) = levels(truth, exp, runtime_only)
    steps = p.get("steps")
    if steps is None:
        fail("decoder JSON has no steps")
        return
    by_dev = {s.get("device"): s for s in steps}
    for dev, (peak, end) in sorted(devs.items()):
        if dev < 0:
            continue
        s = by_dev.get(dev)
        if s is None:
            if peak:
                fail("JSON: no step for device %d (expected peak_device %d)" % (dev, peak))
            continue
        for field, val in (("peak_device", peak), ("end_device", end), ("peak_host_pinned", hpeak),
                           ("end_host_pinned", hend)):
            if field not in s:
                fail("JSON: steps[device %d] has no %s (decoder not there yet?)" % (dev, field))
            elif s[field] != val:
                fail("JSON: device %d %s = %s, victim %d (%+d)" % (dev, field, s[field], val, (s[field] or 0) - val))
    drvj = p.get("driver")
    if drvj is None:
        fail("JSON: no driver object")
        return
    want_counts = collections.Counter(op for op, _, _ in want)
    ev = drvj.get("events")
    if ev is None:
        fail("JSON: driver.events missing")
    else:
        got = {k: v for k, v in ev.items() if v}
        if got != dict(want_counts):
            fail("JSON: driver.events %s, victim %s" % (got, dict(want_counts)))
    srcs = drvj.get("sources")
    if srcs is None:
        fail("JSON: driver.sources missing")
    elif [(s.get("via"), s.get("reason")) for s in srcs] != [(v, r) for v, r in
                                                               ((e[0], e[1]) for e in exp["sources"])] and \
            scenario != "foreign":
        fail("JSON: driver.sources %s, expected %s" % ([(s.get("via"), s.get("reason")) for s in srcs],
                                                       exp["sources"]))
    bd = drvj.get("device_breakdown")
    if bd is None:
        fail("JSON: driver.device_breakdown missing")
    else:
        for b in bd:
            dev = b.get("device")
            if dev in devs and b.get("peak_device") != devs[dev][0]:
                fail("JSON: device_breakdown device %s peak_device %s, victim %d" % (dev, b.get("peak_device"),
                                                                                  devs[dev][0]))
    if not failures:
        print("JSON: %s; host pinned peak %d end %d" % (
            ", ".join("device %d peak %d end %d" % (d, v[0], v[1]) for d, v in sorted(devs.items()) if d >= 0),
            hpeak, hend))


if __name__ == "__main__":
    main()
